"""One train fn, each backend's and each call's form (issue 51): the program's CPU form and
its GPU form (`lax.platform_dependent`: GAE's unroll, the sort of a shuffle, the init's QR
draws, a conv as a matmul) train the same, and so do an agent alone (its epochs on flat
vectors: `jaxppo.core.epochs`) and the same agent vmapped (per leaf).

The GPU form cannot run here, so it is traced with `platform_dependent` patched to take its
`default` branch (what any platform but the CPU compiles) and run on the CPU."""

import jax
import numpy as np
import pytest

from jaxppo import PPOConfig, make_train

TINY = dict(total_timesteps=8 * 32 * 3, num_envs=8, num_steps=32, num_minibatches=2,
            update_epochs=2)
"""32 steps: GAE's unroll is at most half of them, so the CPU's 8 and the GPU's 16 differ."""
CASES = {
    # 8 vmapped seeds: the shuffle's sort is the CPU's sorting network there
    "mlp-8-seeds": (PPOConfig(env_id="CartPole-v1", hidden_sizes=(16, 16), **TINY), 8),
    # a conv torso: a matmul on the CPU, XLA's conv on a GPU
    "cnn-alone": (PPOConfig(env_id="Breakout-MinAtar", torso="cnn", hidden_sizes=(16,), **TINY),
                  1),
}


def _gpu_form(*args, cpu=None, default=None, **platforms):
    return default(*args)


def _train(config, seeds):
    train = make_train(config)
    if seeds == 1:  # as `jax.jit(train)(key)` and a one-seed `jaxppo train` run it
        return jax.jit(train)(jax.random.key(3))
    return jax.jit(jax.vmap(train))(jax.random.split(jax.random.key(3), seeds))


def _close(a, b):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("case", list(CASES))
def test_the_cpu_and_gpu_forms_train_the_same(case, monkeypatch):
    config, seeds = CASES[case]
    cpu = _train(config, seeds)
    monkeypatch.setattr(jax.lax, "platform_dependent", _gpu_form)
    gpu = _train(config, seeds)
    _close(cpu.train_state.params, gpu.train_state.params)
    for name in ("episodic_return", "policy_loss", "value_loss", "approx_kl"):
        _close(cpu.metrics[name], gpu.metrics[name])
    assert np.isfinite(np.asarray(cpu.metrics["episodic_return"])[..., -1]).all()


def test_an_agent_alone_trains_as_the_same_agent_vmapped():
    """Alone, the epochs run on flat vectors; vmapped, per leaf: the same learner and the
    same metrics within float rounding, for each seed of the batch."""
    config, _ = CASES["mlp-8-seeds"]
    train = make_train(config)
    keys = jax.random.split(jax.random.key(5), 2)
    batched = jax.jit(jax.vmap(train))(keys)
    alone = jax.jit(train)
    params = sum(x.size for x in jax.tree.leaves(batched.train_state.params)) // 2
    flat = f"f32[{params}]"  # the flat form: one vector of every parameter
    assert flat in str(alone.trace(keys[0]).jaxpr)
    # vmapped, the rule's per-leaf program runs (the flat one traced beside it is discarded)
    lowered = jax.jit(jax.vmap(train)).lower(keys).as_text()
    assert f"tensor<2x{params}xf32>" not in lowered and f"tensor<{params}xf32>" not in lowered
    for i, key in enumerate(keys):
        one = alone(key)
        _close(jax.tree.map(lambda x, i=i: x[i], batched.train_state), one.train_state)
        _close({k: v[i] for k, v in batched.metrics.items()}, one.metrics)
