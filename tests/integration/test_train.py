"""The compiled train function: purity, determinism, vmap equivalences, retracing, metrics."""

import dataclasses

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import ROOT, compile_exactly

from jaxppo import Hparams, PPOConfig, make_train
from jaxppo.core.metrics import METRIC_NAMES
from jaxppo.core.shuffle import (
    BITONIC_MAX_ROWS,
    BITONIC_MIN_AGENTS,
    SORT_KEY_INDEX_BITS,
    bitonic_sort,
    epoch_permutations,
)
from jaxppo.run.placement import LocalPlacement


def assert_trees_close(a, b, rtol=1e-5, atol=1e-6):
    jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, rtol=rtol, atol=atol), a, b)


@pytest.fixture(scope="module")
def tiny(tiny_config):
    train = make_train(tiny_config)
    return train, jax.jit(train), jax.jit(jax.vmap(train))


def test_metrics_shapes_and_names(tiny, tiny_config, keys):
    _, train_j, _ = tiny
    out = train_j(keys[0])
    U = tiny_config.num_updates
    assert set(out.metrics) == set(METRIC_NAMES)
    for name, v in out.metrics.items():
        assert v.shape == (U,), name
        assert bool(jnp.all(jnp.isfinite(v))), name
    np.testing.assert_array_equal(out.metrics["env_steps"],
                                  np.arange(1, U + 1) * tiny_config.batch_size)
    assert int(out.train_state.step) == U
    # linear annealing from lr at update 0 down to lr / U
    np.testing.assert_allclose(out.metrics["learning_rate"],
                               tiny_config.lr * (1 - np.arange(U) / U), rtol=1e-6)
    assert float(out.metrics["episodes"].sum()) > 0


def test_same_key_gives_identical_params(tiny, keys):
    _, train_j, _ = tiny
    a, b = train_j(keys[0]), train_j(keys[0])
    jax.tree.map(np.testing.assert_array_equal, a.train_state.params, b.train_state.params)
    c = train_j(keys[1])
    leaves_a = jax.tree.leaves(a.train_state.params)
    leaves_c = jax.tree.leaves(c.train_state.params)
    assert any(not np.array_equal(x, y) for x, y in zip(leaves_a, leaves_c, strict=False))


@pytest.fixture(scope="module")
def exact_runs(tiny, keys):
    """The seeds vmapped and each alone, compiled as the `exact` tests compare them (XLA's
    emitters): the vmap test and the chunks test compare against these, so the lone program
    is compiled once for both."""
    _, train_j, train_v = tiny
    with pytest.MonkeyPatch.context() as mp:
        compile_exactly(mp)
        runs = train_v(keys), [train_j(k) for k in keys]
    jax.clear_caches()  # nothing compiled here is reused under the suite's options
    return runs


@pytest.mark.exact
def test_vmapped_seeds_equal_seeds_run_alone(exact_runs, keys):
    batched, alone = exact_runs
    for i in range(len(keys)):
        one = jax.tree.map(lambda x, i=i: x[i], batched)
        assert_trees_close(one.train_state.params, alone[i].train_state.params)
        np.testing.assert_allclose(one.metrics["episodic_return"],
                                   alone[i].metrics["episodic_return"], rtol=1e-5)


@pytest.mark.parametrize("swept", [False, True])
def test_a_lone_run_is_compiled_alone_and_equals_the_vmapped_program(tiny, tiny_config, keys,
                                                                    swept):
    """An Experiment of one run (one seed; a sweep of one setting) compiles its init and chunk
    programs without the vmap (nothing to batch: less to trace), taking and giving the state
    and metrics with the runs axis of 1 that the vmapped program has, and their values."""
    train = tiny[0]
    placement = LocalPlacement(tiny_config)
    one = keys[:1]
    hp = Hparams.stack([dataclasses.replace(tiny_config, lr=1e-3)]) if swept else None
    inputs = placement.place_inputs(one, hp)
    runner = placement.init_program(inputs)(*inputs)
    hp_axis = 0 if swept else None
    ref = jax.jit(jax.vmap(train.init, in_axes=(0, hp_axis)))(one, hp)
    assert jax.tree.map(jnp.shape, runner) == jax.tree.map(jnp.shape, ref)
    assert_trees_close(runner.train_state.params, ref.train_state.params)
    program = placement.run_program(inputs, 3)
    (scan,) = [e for e in program.trace(runner, hp).jaxpr.eqns if e.primitive.name == "scan"]
    carried = {tuple(v.aval.shape) for v in scan.invars}  # the update scan's carry: one run's
    assert (4, 16) in carried and (1, 4, 16) not in carried  # the first layer's kernel, unbatched
    runner, metrics = program(runner, hp)
    ref, ref_metrics = jax.jit(jax.vmap(lambda r, h: train.run(r, h, 3), in_axes=(0, hp_axis)))(
        ref, hp)
    assert jax.tree.map(jnp.shape, (runner, metrics)) == jax.tree.map(jnp.shape,
                                                                     (ref, ref_metrics))
    assert_trees_close(runner.train_state.params, ref.train_state.params)
    np.testing.assert_allclose(metrics["learning_rate"], ref_metrics["learning_rate"])
    assert metrics["learning_rate"][0, 0] == pytest.approx(1e-3 if swept else tiny_config.lr)


@pytest.mark.exact
def test_hyperparameter_vmap_equals_separate_runs(tiny, tiny_config, keys):
    train, train_j, _ = tiny
    settings = [dataclasses.replace(tiny_config, lr=lr, ent_coef=ent)
                for lr, ent in [(1e-3, 0.0), (2.5e-4, 0.01), (3e-3, 0.05)]]
    hp = Hparams.stack(settings)
    swept = jax.jit(jax.vmap(train, in_axes=(None, 0)))(keys[0], hp)
    for i, cfg in enumerate(settings):
        alone = train_j(keys[0], Hparams.from_config(cfg))
        one = jax.tree.map(lambda x, i=i: x[i], swept)
        assert_trees_close(one.train_state.params, alone.train_state.params)
    # and the settings really differ
    assert not np.allclose(swept.metrics["learning_rate"][0], swept.metrics["learning_rate"][2])


def test_nothing_retraces(tiny_config, keys):
    # New keys and new hyperparameter values reuse the one compiled program.
    chex.clear_trace_counter()
    f = jax.jit(chex.assert_max_traces(make_train(tiny_config).__call__, n=1))
    f(keys[0])
    f(keys[1])
    chex.clear_trace_counter()  # chex counts per code object, shared by every `train`
    g = jax.jit(chex.assert_max_traces(make_train(tiny_config).__call__, n=1))
    g(keys[0], Hparams.from_config(dataclasses.replace(tiny_config, lr=1e-3)))
    g(keys[1], Hparams.from_config(dataclasses.replace(tiny_config, gamma=0.9, clip_eps=0.1)))
    with pytest.raises(AssertionError, match="traced > 1"):
        g(keys[0], Hparams.from_config(tiny_config)._replace(lr=jnp.ones(2)))  # new shape


@pytest.mark.exact
def test_chunked_run_equals_whole_run(tiny, exact_runs, keys):
    train = tiny[0]
    whole = exact_runs[1][0]  # keys[0]'s run, one program
    runner = jax.jit(train.init)(keys[0])
    run_chunk = jax.jit(train.run, static_argnums=2)
    metrics = []
    for n in (3, 3):  # one chunk program, run twice: the second must go on from update 3
        runner, m = run_chunk(runner, None, n)
        metrics.append(m)
    jax.tree.map(np.testing.assert_array_equal, runner.train_state.params,
                 whole.train_state.params)
    np.testing.assert_array_equal(
        np.concatenate([m["episodic_return"] for m in metrics]), whole.metrics["episodic_return"])


def test_target_kl_stops_minibatches():
    base = PPOConfig(total_timesteps=4 * 16 * 4, num_envs=4, num_steps=16, num_minibatches=4,
                     update_epochs=4, hidden_sizes=(16,), lr=0.05)
    off = jax.jit(make_train(base))(jax.random.key(0))
    np.testing.assert_array_equal(off.metrics["minibatch_fraction"], 1.0)
    on = jax.jit(make_train(dataclasses.replace(base, target_kl=1e-6)))(jax.random.key(0))
    frac = np.asarray(on.metrics["minibatch_fraction"])
    # The first minibatch of an update is always applied (its KL to the rollout policy is 0),
    # and a tiny target stops the rest.
    assert np.all(frac >= 1.0 / 16) and np.all(frac < 1.0)
    assert np.all(np.asarray(on.metrics["approx_kl"]) <= 1e-6 + 1e-9)


@pytest.mark.parametrize("env_id", ["Pendulum-v1", "Breakout-MinAtar"])
def test_other_env_kinds_run_with_normalization(env_id):
    cfg = PPOConfig(env_id=env_id, total_timesteps=4 * 8 * 3, num_envs=4, num_steps=8,
                    num_minibatches=2, update_epochs=1, hidden_sizes=(16,),
                    normalize_obs=True, normalize_reward=True)
    out = jax.jit(make_train(cfg))(jax.random.key(0))
    ended = np.cumsum(out.metrics["episodes"]) > 0
    for name, v in out.metrics.items():
        if name in ("episodic_return", "episodic_length"):
            # No return before the first episode ends (Pendulum's take 200 steps): NaN, not 0.
            v = np.asarray(v)
            assert np.isfinite(v[ended]).all() and np.isnan(v[~ended]).all(), name
        else:
            assert bool(jnp.all(jnp.isfinite(v))), name
    norm = out.train_state.normalizer
    # observation statistics moved away from their initial values
    assert float(norm.obs.count) > 4 * 8 * 3
    assert not np.allclose(norm.obs.mean, 0.0)
    assert float(norm.ret.count) > 1.0


def test_bfloat16_compute_runs(tiny_config):
    cfg = dataclasses.replace(tiny_config, compute_dtype="bfloat16")
    out = jax.jit(make_train(cfg))(jax.random.key(0))
    assert jax.tree.leaves(out.train_state.params)[0].dtype == jnp.float32
    assert bool(jnp.all(jnp.isfinite(out.metrics["value_loss"])))


def test_make_train_rejects_non_config():
    with pytest.raises(TypeError):
        make_train({"env_id": "CartPole-v1"})


def test_vmapped_minatar_does_not_hang():
    # Regression: with XLA:CPU's concurrency-optimized scheduler on, this exact program (2 vmapped
    # seeds, 64 MinAtar envs) compiled and then deadlocked at 0% CPU: the batched QR of
    # orthogonal init (tests/integration/test_hang.py). Run in a subprocess so a hang fails by timeout.
    import os
    import subprocess
    import sys

    code = (
        "import dataclasses, jax, jaxppo\n"
        "c = dataclasses.replace(jaxppo.load_config('configs/minatar_breakout.yaml'),"
        " total_timesteps=8192, hidden_sizes=(32,))\n"
        "out = jax.jit(jax.vmap(jaxppo.make_train(c)))(jax.random.split(jax.random.key(0), 2))\n"
        "print(float(out.metrics['value_loss'].sum()))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAXPPO_KEEP_XLA_FLAGS")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=240, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-1500:]


def test_the_xla_flag_is_opt_in_and_does_not_depend_on_import_order():
    """The scheduler flag is off by default (jaxppo's programs hold no batched LAPACK call, and
    the flag costs 8-20% throughput); JAXPPO_SAFE_SCHEDULER=1 sets it. gymnax (like Jumanji,
    Navix, XLand-MiniGrid) starts JAX's backend at import, when XLA reads XLA_FLAGS once per
    process: imported before jaxppo, it used to leave the process without the flag. JAX's
    plugin hook sets it at backend creation; a process that uses neither jaxppo nor a suite is
    left alone, as is one that set JAXPPO_KEEP_XLA_FLAGS."""
    import os
    import subprocess
    import sys

    check = ("import os, sys, warnings\nwarnings.simplefilter('error', RuntimeWarning)\n"
             "{first}\nimport jax.numpy as jnp\njnp.ones(1)\nimport jaxppo\n"
             "from jaxppo._xla import FLAG, hook\n"
             "assert (FLAG in hook.flags_at_backend_start) == {want}, "
             "hook.flags_at_backend_start\n")
    plain = "import os, jax.numpy as jnp\njnp.ones(1)\nassert 'XLA_FLAGS' not in os.environ\n"
    env = {k: v for k, v in os.environ.items()
           if k not in ("XLA_FLAGS", "JAXPPO_KEEP_XLA_FLAGS", "JAXPPO_SAFE_SCHEDULER")}
    safe = {**env, "JAXPPO_SAFE_SCHEDULER": "1"}
    root = ROOT
    for code, e in ((check.format(first="import gymnax", want=True), safe),
                    (check.format(first="import jaxppo", want=True), safe),
                    (check.format(first="import gymnax", want=False), env),
                    (check.format(first="import jaxppo", want=False),
                     {**safe, "JAXPPO_KEEP_XLA_FLAGS": "1"}),
                    (plain, safe)):
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=240, env=e, cwd=root)
        assert proc.returncode == 0, (code, proc.stderr[-1500:])


def test_a_cuda_plugin_that_can_do_nothing_stays_quiet(tmp_path):
    """The gpu-profile extra installs JAX's CUDA PJRT plugin, whose initialize() raises without
    a CUDA runtime (JAX prints the traceback in every process). `import jaxppo` wraps it to run
    only where JAX could use it (a visible NVIDIA GPU) or where the process asks for it
    (JAX_SKIP_CUDA_CONSTRAINTS_CHECK, as the GPU profile sets, or JAXPPO_CUDA_PLUGIN=1). A
    stand-in plugin that says when it runs shows which; the platform JAX picks is unchanged."""
    import os
    import subprocess
    import sys

    from jax._src import hardware_utils

    plugin = tmp_path / "jax_plugins" / "xla_cuda12"
    plugin.mkdir(parents=True)
    (plugin / "__init__.py").write_text(
        "import sys\ndef initialize():\n    print('CUDA PLUGIN RAN', file=sys.stderr)\n"
        "    raise RuntimeError('Unable to load CUDA. Is it installed?')\n")
    root = ROOT
    env = {k: v for k, v in os.environ.items()
           if k not in ("JAX_SKIP_CUDA_CONSTRAINTS_CHECK", "JAXPPO_CUDA_PLUGIN")}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), root, env.get("PYTHONPATH", "")])
    code = "import jaxppo, jax\njax.numpy.zeros(1)\nprint(jax.default_backend())\n"
    gpu = hardware_utils.has_visible_nvidia_gpu()
    for extra, runs in (({}, gpu), ({"JAX_SKIP_CUDA_CONSTRAINTS_CHECK": "1"}, True),
                        ({"JAXPPO_CUDA_PLUGIN": "1"}, True)):
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=240, env={**env, **extra}, cwd=root)
        assert proc.returncode == 0, proc.stderr[-1500:]
        assert ("CUDA PLUGIN RAN" in proc.stderr) == runs, (extra, proc.stderr[-1500:])
        if not runs:
            assert proc.stderr == "" and proc.stdout.strip() == jax.default_backend()


def _primitives(jaxpr) -> list[str]:
    """Every primitive of a jaxpr, inside its scans, conds and calls too."""
    names = []
    for eqn in jaxpr.eqns:
        names.append(eqn.primitive.name)
        for value in eqn.params.values():
            for sub in value if isinstance(value, (tuple, list)) else (value,):
                if isinstance(sub, jax.extend.core.ClosedJaxpr):
                    names += _primitives(sub.jaxpr)
                elif isinstance(sub, jax.extend.core.Jaxpr):
                    names += _primitives(sub)
    return names


@pytest.mark.parametrize("change", [{}, {"network": "gru", "hidden_sizes": (8,)}])
def test_an_update_draws_its_randomness_once_and_never_leaves_the_device(tiny_config, change):
    """All of an update's randomness (the next key, action noise, env keys, the shuffle) is one
    draw of random bits: on the CPU each threefry call is a loop of its own (7 per update
    before, ~7% of CartPole's kernels). An env without randomness (a probe) leaves exactly one;
    a change that adds a per-step draw, a key split or a host callback (a transfer per step)
    fails here."""
    import dataclasses

    config = dataclasses.replace(tiny_config, env_id="probe/TwoStep-v0", **change)
    trainer = make_train(config)
    runner = trainer.init(jax.random.key(0))
    jaxpr = jax.make_jaxpr(lambda r: trainer.run(r, num_updates=1))(runner).jaxpr
    names = _primitives(jaxpr)
    assert names.count("random_bits") == 1, sorted(set(names))
    assert not {"random_split", "random_fold_in", "threefry2x32"} & set(names)
    assert not [n for n in names if "callback" in n]


def test_matmul_precision_reaches_the_compiled_program(tiny_config):
    """`matmul_precision: highest` makes every dot full float32 (no TF32 on Ampere/Hopper);
    `default` leaves XLA's choice. Checked on the lowered program, which the CPU shares."""
    import dataclasses

    def highest_dots(precision):
        config = dataclasses.replace(tiny_config, matmul_precision=precision)
        return jax.jit(make_train(config)).lower(jax.random.key(0)).as_text().count("HIGHEST")

    assert highest_dots("default") == 0 and highest_dots("highest") > 0


def test_epoch_permutations_are_uniform_permutations():
    """The one-operand sort with the row index in the sort key's low bits still gives every
    ordering with equal chance: each row is equally likely at each position, and any two rows
    are as likely in either order (hand-checkable frequencies over 4,000 draws of 6 rows)."""
    config = PPOConfig(env_id="CartPole-v1", num_envs=2, num_steps=3, update_epochs=4,
                       num_minibatches=3)
    keys = jax.random.split(jax.random.key(0), 1000)
    perms = np.asarray(jax.vmap(lambda k: epoch_permutations(k, config))(keys))
    # 1,000 vmapped agents sort by a network, one alone by XLA's sort: the same permutations
    assert np.array_equal(perms[7], np.asarray(epoch_permutations(keys[7], config)))
    perms = perms.reshape(-1, 6)  # 4,000 permutations of 6
    assert all(sorted(p) == list(range(6)) for p in perms.tolist())
    counts = np.stack([np.bincount(perms[:, pos], minlength=6) for pos in range(6)])
    chi2 = ((counts - len(perms) / 6) ** 2 / (len(perms) / 6)).sum()
    assert chi2 < 60, counts  # 25 degrees of freedom: p < 1e-4 beyond 60
    before = (np.argsort(perms, axis=1)[:, 0] < np.argsort(perms, axis=1)[:, 5]).mean()
    assert abs(before - 0.5) < 0.04
    for n in (1, 5, 8, 513):  # the sorting network equals a sort, padded lengths included
        k = jax.random.bits(jax.random.key(n), (2, n))
        assert np.array_equal(np.asarray(bitonic_sort(k)), np.sort(np.asarray(k), axis=-1))
    # XLA's sort where the network is not used: too many rows, too few vmapped agents
    for agents, rows in ((BITONIC_MIN_AGENTS, BITONIC_MAX_ROWS + 1), (BITONIC_MIN_AGENTS - 1, 6)):
        many = np.asarray(jax.vmap(lambda k, r=rows: epoch_permutations(k, config, r))(
            jax.random.split(jax.random.key(2), agents))).reshape(-1, rows)
        assert all(np.array_equal(np.sort(p), np.arange(rows)) for p in many)
    # above 2^16 rows the random bits are argsorted instead (too few left beside the index)
    big = np.asarray(epoch_permutations(jax.random.key(1), config, 2 ** SORT_KEY_INDEX_BITS + 1))
    assert all(np.array_equal(np.sort(p), np.arange(big.shape[1])) for p in big)
