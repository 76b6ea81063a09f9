"""Checks that need several devices, run by tests/integration/test_sharding.py in a child process with
XLA_FLAGS=--xla_force_host_platform_device_count=4 (the device count is fixed when JAX starts,
so they cannot share the main test process). `python tests/sharded_checks.py NAME...`: each
check prints `OK NAME` or `FAIL NAME` (its traceback on stderr), the others run regardless.
`--refuse JSON` (a list of `jaxppo` argvs) runs each through the CLI in this process after the
checks and prints `REFUSED I {"code": exit status, "err": its stderr}` (`refused`)."""

import dataclasses
import gc
import json
import os
import sys
import tempfile

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                           + " --xla_force_host_platform_device_count=4")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

from jaxppo import Hparams, PPOConfig, load_config, make_train  # noqa: E402
from jaxppo.cli import main  # noqa: E402
from jaxppo.run.placement import AXIS, make_mesh, make_sharded_train  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = PPOConfig(total_timesteps=4 * 16 * 6, num_envs=4, num_steps=16, num_minibatches=2,
                 update_epochs=2, hidden_sizes=(16, 16))


def close(a, b):
    jax.tree.map(lambda x, y: np.testing.assert_allclose(np.asarray(x), np.asarray(y),
                                                         rtol=1e-5, atol=1e-6), a, b)


def check_seeds():
    """Seeds (and a sweep's settings) split over 4 devices equal the single-device vmap."""
    assert len(jax.devices()) == 4
    keys = jax.random.split(jax.random.key(0), 8)
    ref = jax.jit(jax.vmap(make_train(TINY)))(keys)
    out = make_sharded_train(TINY, make_mesh(4), "seeds")(keys)
    assert out.train_state.params["params"]["actor"]["Dense_0"]["kernel"].sharding.spec == P(AXIS)
    close(ref.train_state.params, out.train_state.params)
    close(ref.metrics, out.metrics)

    hp = Hparams.stack([dataclasses.replace(TINY, lr=lr) for lr in (1e-4, 3e-4, 1e-3, 3e-3)])
    ref = jax.jit(jax.vmap(make_train(TINY)))(keys[:4], hp)
    legacy = jax.random.split(jax.random.PRNGKey(0), 8)[:4]  # PureJaxRL's key form: the same seeds
    out = make_sharded_train(TINY, make_mesh(4), "seeds")(legacy, hp)
    close(ref.train_state.params, out.train_state.params)


def check_envs_math():
    """The env-sharded reductions equal the unsharded ones: the gradient of a minibatch split
    over 4 devices (advantages normalized over the whole minibatch) and the running obs
    normalizer merged over devices."""
    from jaxppo.core.loss import Minibatch, ppo_loss
    from jaxppo.core.normalize import rms_init, rms_update

    mesh = make_mesh(4)
    train = make_train(TINY)
    params = jax.jit(train.init)(jax.random.key(1)).train_state.params
    B = 32

    @jax.jit  # each piece in one program: op by op, this check compiled ~170 tiny ones
    def data(key):
        k = jax.random.split(key, 5)
        batch = Minibatch(jax.random.normal(k[0], (B, 4)), jax.random.bernoulli(
            k[1], 0.5, (B,)).astype(jnp.int32), -jax.random.uniform(k[2], (B,)),
            jax.random.normal(k[3], (B,)), 3.0 + 2.0 * jax.random.normal(k[4], (B,)),
            jax.random.normal(k[0], (B,)))
        return batch, 5.0 + 3.0 * jax.random.normal(k[3], (16, 4))

    batch, obs = data(jax.random.key(2))
    hp = Hparams.from_config(TINY)

    def grads(params, batch, axis_name=None):
        g, _ = jax.grad(ppo_loss, has_aux=True)(params, train.network, batch, hp,
                                                clip_vloss=True, norm_adv=True,
                                                axis_name=axis_name)
        return g if axis_name is None else jax.lax.pmean(g, axis_name)

    whole = jax.jit(grads)(params, batch)
    split = jax.jit(jax.shard_map(lambda p, b: grads(p, b, AXIS), mesh=mesh,
                                  in_specs=(P(), P(AXIS)), out_specs=P(), check_vma=False))
    close(whole, split(params, batch))

    whole = jax.jit(lambda o: rms_update(rms_init((4,)), o))(obs)
    merged = jax.jit(jax.shard_map(lambda o: rms_update(rms_init((4,)), o, AXIS), mesh=mesh,
                                   in_specs=P(AXIS), out_specs=P(), check_vma=False))(obs)
    close(whole, merged)


def check_envs_learns():
    """CartPole's fast config with its 16 envs split 4 per device solves, as one agent whose
    params are identical on every device."""
    config = load_config(os.path.join(ROOT, "configs", "cartpole_fast.yaml"))
    keys = jax.random.split(jax.random.PRNGKey(0), 2)  # PureJaxRL's key form
    out = make_sharded_train(config, make_mesh(4), "envs")(keys)
    final = np.asarray(out.metrics["episodic_return"][:, -1])
    assert final.mean() >= 475, final
    assert out.runner_state.env.obs.shape == (2, 16, 4)  # global view: all 16 envs
    kernel = out.train_state.params["params"]["critic"]["Dense_0"]["kernel"]
    shards = [np.asarray(s.data) for s in kernel.addressable_shards]
    assert len(shards) == 4 and all(np.array_equal(shards[0], s) for s in shards[1:])
    assert int(out.metrics["env_steps"][0, -1]) == config.env_steps


def check_recurrent():
    """A GRU policy over the mesh: seeds split over 4 devices equal the single-device vmap;
    with its 8 envs split 2 per device, one agent's params stay identical on every device and
    its carry is split on the env axis like the env state."""
    gru = dataclasses.replace(TINY, env_id="probe/Memory-v0", network="gru", rnn_size=8,
                              num_envs=8, num_steps=10, total_timesteps=8 * 10 * 3)
    keys = jax.random.split(jax.random.key(0), 4)
    ref = jax.jit(jax.vmap(make_train(gru)))(keys)
    out = make_sharded_train(gru, make_mesh(4), "seeds")(keys)
    close(ref.train_state.params, out.train_state.params)
    one = make_sharded_train(dataclasses.replace(gru, num_minibatches=1), make_mesh(4),
                             "envs")(keys[:2])
    assert one.runner_state.env.hidden.shape == (2, 8, 8)
    assert one.runner_state.env.hidden.sharding.spec == P(None, AXIS)
    assert np.isfinite(np.asarray(one.metrics["value_loss"])).all()


def refused(argv: list[str]) -> dict:
    """`jaxppo *argv` in this process: its exit status and all it wrote to stderr (file
    descriptor 2, so a C++ library's lines too), as its own process would show them."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile("w+") as f:
        os.dup2(f.fileno(), 2)
        try:
            code = main(argv)
        except SystemExit as e:  # argparse's own errors
            code = e.code
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
        f.seek(0)
        return {"code": code, "err": f.read()}


if __name__ == "__main__":
    import traceback

    names, refuse = sys.argv[1:], []
    if "--refuse" in names:
        refuse = json.loads(names.pop(names.index("--refuse") + 1))
        names.remove("--refuse")
    failed = False
    for name in names:
        try:
            globals()[f"check_{name}"]()
        except Exception:
            traceback.print_exc()
            print(f"FAIL {name}", flush=True)
            failed = True
        else:
            print(f"OK {name}", flush=True)
    for i, argv in enumerate(refuse):
        print(f"REFUSED {i} {json.dumps(refused(argv))}", flush=True)
    gc.freeze()  # the exit skips its garbage collections over every module's objects (~0.5 s)
    sys.exit(1 if failed else 0)
