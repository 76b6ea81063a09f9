"""Reset strategies (config key `reset`, `jaxppo/envs/resets.py`): initial states keep the env's
own distribution, no draw is ever handed to two envs, vmapped seeds equal seeds alone, and
`optimistic` costs the same vmapped or not (its fallback stays a real `lax.cond`)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxppo import PPOConfig, make_train
from jaxppo.envs import Box, Discrete, VecEnv, register_env
from jaxppo.errors import ConfigError
from jaxppo.rundir.checkpoint import load_checkpoint, save_checkpoint


class CostlyReset:
    """State [u, L, t, v]: u, v ~ U(0, 1) and an episode length L in 1..4, drawn at reset (v
    only tells draws apart: float32 u alone repeats by chance in a few thousand); the reward is
    u every step, so an episode's return / length is the u it started from. Short episodes
    make many envs end on the same step (often more than the pool can serve)."""

    default_params = None
    expensive_reset = True

    def reset_env(self, key, params):
        ku, kl, kv = jax.random.split(key, 3)
        s = jnp.stack([jax.random.uniform(ku), jax.random.randint(kl, (), 1, 5).astype(
            jnp.float32), jnp.float32(0.0), jax.random.uniform(kv)])
        return s, s

    def step_env(self, key, state, action, params):
        s = state.at[2].add(1.0)
        return s, s, state[0], s[2] >= s[1], {}

    def observation_space(self, params):
        return Box(0.0, 10.0, (4,))

    def action_space(self, params):
        return Discrete(2)


register_env("test/CostlyReset-v0", CostlyReset)
N, K, T = 16, 2, 300


def _steps(env: VecEnv, key, num_steps=T):
    """`num_steps` steps of `env` from `env.reset`: (first obs [N, 4], EnvStep leaves [T, N])."""
    reset_key, run_key = jax.random.split(key)
    obs, state = env.reset(reset_key)
    rand = env.draw_randomness(run_key, num_steps)

    def body(st, r):
        return env.step_with(r, st, jnp.zeros((env.num_envs,), jnp.int32))

    _, steps = jax.lax.scan(body, state, rand)
    return obs, steps


def _starts(env: VecEnv, key) -> np.ndarray:
    """Every initial state the run started an episode from, [E, 4]."""
    obs, steps = jax.jit(lambda k: _steps(env, k))(key)
    done = np.asarray(steps.done)
    return np.concatenate([np.asarray(obs), np.asarray(steps.obs)[done]])


def test_auto_picks_optimistic_for_costly_resets_and_predrawn_for_the_rest():
    assert VecEnv("test/CostlyReset-v0", N).reset_mode == "optimistic"
    assert VecEnv("test/CostlyReset-v0", N).reset_batch == 2  # N / 8
    assert VecEnv("CartPole-v1", N).reset_mode == "predrawn"
    assert VecEnv("CartPole-v1", N, reset="optimistic", reset_batch=99).reset_batch == N


def test_optimistic_initial_states_are_the_envs_own_and_never_shared():
    env = VecEnv("test/CostlyReset-v0", N, reset="optimistic", reset_batch=K)
    _, steps = _steps(env, jax.random.key(0))
    ended = np.asarray(steps.done).sum(axis=1)
    # Both paths ran: steps the pool served alone, and steps with more than 2K endings.
    assert ((ended > 0) & (ended <= 2 * K)).any() and (ended > 2 * K).any()
    starts = _starts(env, jax.random.key(0))
    assert len(starts) > 1500
    # No draw is handed out twice: not on one step, not ever.
    assert len(np.unique(starts, axis=0)) == len(starts)
    # u ~ U(0, 1): Kolmogorov-Smirnov distance well inside the 1% critical value.
    u = np.sort(starts[:, 0])
    ecdf = np.arange(1, len(u) + 1) / len(u)
    assert np.max(np.maximum(ecdf - u, u - (ecdf - 1 / len(u)))) < 1.63 / np.sqrt(len(u))
    # L uniform on 1..4, each within 5 sigma of a quarter.
    freq = np.bincount(starts[:, 1].astype(int), minlength=5)[1:] / len(starts)
    assert np.all(np.abs(freq - 0.25) < 5 * np.sqrt(0.25 * 0.75 / len(starts))), freq


def test_every_key_a_rollout_draws_is_its_own():
    """Step, fallback and fresh-draw keys never repeat (a `fold_in` sibling of a split once
    made the first fresh draws reuse env 1's step and reset keys)."""
    env = VecEnv("test/CostlyReset-v0", N, reset="optimistic", reset_batch=K)
    rand = env.draw_randomness(jax.random.key(7), 5)
    keys = np.concatenate([np.asarray(jax.random.key_data(k)).reshape(-1, 2)
                           for k in (rand.step_key, rand.reset_key, rand.fresh_key)])
    assert len(np.unique(keys, axis=0)) == len(keys) == 5 * (2 * N + K)


def test_every_episode_runs_from_the_state_it_was_handed():
    """Each ended episode's length is the L and its mean reward the u it started from: no
    step the env did not take is counted."""
    env = VecEnv("test/CostlyReset-v0", N, reset="optimistic", reset_batch=K)
    obs, steps = jax.jit(lambda k: _steps(env, k, 60))(jax.random.key(1))
    start = np.asarray(obs)
    for t in range(60):
        done = np.asarray(steps.done[t])
        length, ret = np.asarray(steps.episode_length[t]), np.asarray(steps.episode_return[t])
        np.testing.assert_array_equal(length[done], start[done, 1])
        np.testing.assert_allclose(ret[done] / length[done], start[done, 0], rtol=1e-6)
        start = np.where(done[:, None], np.asarray(steps.obs[t]), start)


@pytest.mark.exact
def test_optimistic_vmapped_seeds_equal_each_seed_alone():
    env = VecEnv("test/CostlyReset-v0", N, reset="optimistic", reset_batch=K)
    keys = jax.random.split(jax.random.key(2), 3)
    run = jax.jit(lambda k: _steps(env, k, 40))
    together = jax.jit(jax.vmap(lambda k: _steps(env, k, 40)))(keys)
    for i, key in enumerate(keys):
        alone = run(key)
        for a, b in zip(jax.tree.leaves(alone), jax.tree.leaves(together), strict=True):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b)[i])


def _has_cond(fn, *args) -> bool:
    return "cond[" in str(jax.make_jaxpr(fn)(*args))


@pytest.mark.parametrize("mode, cond_survives", [("cond", False), ("optimistic", True)])
def test_only_optimistic_keeps_its_cond_under_a_vmap_over_seeds(mode, cond_survives):
    """Under vmap, `cond`'s predicate is batched: the cond becomes a select and all N resets
    run every step. `optimistic`'s fallback predicate is reduced over the batch, so it stays a
    cond (and its K fresh draws per step are all the unconditional work)."""
    env = VecEnv("test/CostlyReset-v0", N, reset=mode)
    keys = jax.random.split(jax.random.key(0), 4)
    assert _has_cond(lambda k: _steps(env, k, 2), keys[0])  # one agent: a real cond
    assert _has_cond(jax.vmap(lambda k: _steps(env, k, 2)), keys) == cond_survives
    # Nested (seeds x settings) too.
    nested = jax.vmap(jax.vmap(lambda k: _steps(env, k, 2)))
    assert _has_cond(nested, keys.reshape(2, 2)) == cond_survives


def test_default_for_cheap_resets_is_the_predrawn_path_unchanged():
    auto = VecEnv("CartPole-v1", 4)
    predrawn = VecEnv("CartPole-v1", 4, reset="predrawn")
    obs, state = auto.reset(jax.random.key(0))
    assert state.pool is None  # the carried state (and so a checkpoint) is as before
    assert auto.draw_randomness(jax.random.key(0), 3).reset_state is not None
    a = jax.jit(lambda k: _steps(auto, k, 200))(jax.random.key(3))
    b = jax.jit(lambda k: _steps(predrawn, k, 200))(jax.random.key(3))
    assert np.asarray(a[1].done).sum() > 0
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_cond_and_predrawn_agree_on_a_costly_env():
    """`cond` resets from the same per-env keys as `predrawn`: the same run."""
    a = jax.jit(lambda k: _steps(VecEnv("test/CostlyReset-v0", 4, reset="cond"), k, 30))(
        jax.random.key(4))
    b = jax.jit(lambda k: _steps(VecEnv("test/CostlyReset-v0", 4, reset="predrawn"), k, 30))(
        jax.random.key(4))
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.fixture(scope="module")
def costly_config():
    return PPOConfig(env_id="test/CostlyReset-v0", total_timesteps=8 * 8 * 4, num_envs=8,
                     num_steps=8, num_minibatches=2, update_epochs=1, hidden_sizes=(8,))


@pytest.mark.exact
def test_training_resumes_bit_exactly_through_a_checkpoint(costly_config, tmp_path):
    """The pool is part of the runner state: a run saved after 2 updates and resumed equals
    the run in one go."""
    train = make_train(costly_config)
    keys = jax.random.split(jax.random.key(5), 2)
    init = jax.jit(jax.vmap(train.init))(keys)
    run = jax.jit(jax.vmap(lambda r, n=2: train.run(r, None, n)))
    whole = jax.jit(jax.vmap(lambda r: train.run(r, None, 4)))(init)
    half, _ = run(init)
    save_checkpoint(str(tmp_path), half, costly_config, 2, 2)
    restored = load_checkpoint(tmp_path).runner_state
    assert restored.env.env_state.pool is not None
    resumed, metrics = run(restored)
    raw = lambda t: jax.tree.map(  # noqa: E731
        lambda x: np.asarray(jax.random.key_data(x) if jnp.issubdtype(
            x.dtype, jax.dtypes.prng_key) else x), t)
    for a, b in zip(jax.tree.leaves(raw(whole[0])), jax.tree.leaves(raw(resumed)), strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(np.asarray(whole[1]["policy_loss"])[:, 2:],
                                  np.asarray(metrics["policy_loss"]))
    assert np.asarray(whole[1]["episodes"]).min() > 0  # episodes ended, resets ran


@pytest.mark.parametrize("values, match", [
    ({"reset": "lazy"}, "config key 'reset': got 'lazy'; use one of"),
    ({"reset_batch": 0}, "config key 'reset_batch': got 0"),
    ({"reset": "cond", "reset_batch": 4}, "reset: cond draws no batch"),
    # issue #36: capped to num_envs while config.yaml kept the original
    ({"reset": "optimistic", "num_envs": 4, "reset_batch": 99},
     "config key 'reset_batch': 99 is more than num_envs \\(4\\).*use at most 4"),
    # issue #36: accepted and ignored on a host env
    ({"env_id": "gymnasium/CartPole-v1", "reset": "optimistic"},
     "config key 'reset': set to optimistic, but 'gymnasium/CartPole-v1' lives on the host"),
    ({"env_id": "gymnasium/CartPole-v1", "reset": "cond"}, "lives on the host"),
    ({"env_id": "gymnasium/CartPole-v1", "reset_batch": 2},
     "config key 'reset_batch': set to 2, but 'gymnasium/CartPole-v1' lives on the host"),
])
def test_bad_reset_keys_are_one_line(values, match):
    with pytest.raises(ConfigError, match=match) as e:
        dataclasses.replace(PPOConfig(), **values)
    assert "\n" not in str(e.value)


def test_a_checkpoint_from_before_the_key_resumes_with_a_fresh_pool(costly_config, tmp_path):
    """A costly-reset run saved before `reset` existed (no key in its config, no pool in its
    state: it reset under a cond) loads, and goes on under `optimistic` with a full pool."""
    import msgpack
    from flax import serialization

    from jaxppo.rundir.checkpoint import _digest, checkpoint_path

    cond = dataclasses.replace(costly_config, reset="cond")
    train = make_train(cond)
    runner, _ = jax.jit(jax.vmap(lambda r: train.run(r, None, 1)))(
        jax.jit(jax.vmap(train.init))(jax.random.split(jax.random.key(6), 2)))
    file = save_checkpoint(str(tmp_path), runner, cond, 1, 2)
    with open(file, "rb") as f:
        blob = msgpack.unpackb(f.read(), raw=False)
    header, payload = blob["header"], serialization.msgpack_restore(blob["payload"])
    for key in ("reset", "reset_batch"):
        del header["config"][key]
    del payload["env"]["env_state"]["pool"]
    blob["payload"] = serialization.msgpack_serialize(payload)
    header["sha256"] = _digest(header, blob["payload"])
    with open(checkpoint_path(tmp_path), "wb") as f:
        f.write(msgpack.packb(blob, use_bin_type=True))
    ckpt = load_checkpoint(tmp_path)
    assert ckpt.config.reset == "auto"
    assert np.asarray(ckpt.runner_state.env.env_state.pool.filled).all()
    restored = make_train(ckpt.config)
    _, metrics = jax.jit(jax.vmap(lambda r: restored.run(r, None, 1)))(ckpt.runner_state)
    assert np.asarray(metrics["episodes"]).min() > 0


def test_a_reset_batch_that_auto_would_ignore_is_refused_for_training_only():
    """Reproduction (issue #36): `reset_batch` with `reset: auto` resolving to predrawn was
    accepted and ignored (an explicit `reset: predrawn` is refused)."""
    config = PPOConfig(env_id="CartPole-v1", num_envs=8, reset_batch=2)
    with pytest.raises(ConfigError, match="reset: auto picks predrawn for 'CartPole-v1'.*"
                                          "set reset: optimistic"):
        make_train(config)
    # an evaluation (or a policy) of a run saved so builds its envs as before
    assert VecEnv.from_config(config, 1, evaluation=True).reset_mode == "predrawn"
    # a costly env's auto is optimistic: its reset_batch is applied as written
    costly = PPOConfig(env_id="test/CostlyReset-v0", num_envs=8, reset_batch=3)
    assert VecEnv.from_config(costly, 8).reset_batch == 3


def test_the_memory_estimate_counts_the_configs_reset_batch():
    from jaxppo.run.memory import estimate_memory

    small = PPOConfig(env_id="test/CostlyReset-v0", num_envs=64, reset_batch=1)
    big = dataclasses.replace(small, reset_batch=64)
    assert estimate_memory(big).rollout > estimate_memory(small).rollout


def test_the_header_line_states_the_reset_strategy(costly_config, capsys):
    """Issue #50: the strategy `reset: auto` picks, and why, is in the run's first line."""
    from jaxppo import Experiment
    from jaxppo.cli.common import Header

    Experiment(costly_config, logdir=None, progress=False,
               callbacks=[Header("jaxppo: test", False)]).run()
    first = capsys.readouterr().out.splitlines()[0]
    assert " | resets: optimistic, 1 per step (costly reset, declared by the env) | " in first


def _saved_then_loaded(config, path, key: int, monkeypatch, costly_then: bool,
                       costly_now: bool):
    """A 1-update run of `config` saved while CostlyReset's word was `costly_then`, loaded
    while it is `costly_now` (the checkpoint templates `load_checkpoint` keeps, cleared), and
    trained 2 more updates: (the loaded Checkpoint, the resumed run's metrics)."""
    from jaxppo.rundir.checkpoint import _restore_target

    monkeypatch.setattr(CostlyReset, "expensive_reset", costly_then)
    train = make_train(config)
    runner, _ = jax.jit(jax.vmap(lambda r: train.run(r, None, 1)))(
        jax.jit(jax.vmap(train.init))(jax.random.split(jax.random.key(key), 2)))
    save_checkpoint(str(path), runner, config, 1, 2)
    monkeypatch.setattr(CostlyReset, "expensive_reset", costly_now)
    _restore_target.cache_clear()
    try:
        ckpt = load_checkpoint(path)
    finally:
        _restore_target.cache_clear()
    now = make_train(ckpt.config)
    assert now.env.reset_mode == ("optimistic" if costly_now else "predrawn")
    _, metrics = jax.jit(jax.vmap(lambda r: now.run(r, None, 2)))(ckpt.runner_state)
    assert np.asarray(metrics["episodes"]).min() > 0
    return ckpt


def test_a_pool_saved_under_optimistic_is_dropped_where_auto_now_picks_predrawn(
        costly_config, tmp_path, monkeypatch):
    """A run whose env was costly when saved (its state holds a pool) and is cheap now (the
    declaration or XLA's estimate changed): it resumes under predrawn, no structure error."""
    ckpt = _saved_then_loaded(costly_config, tmp_path, 7, monkeypatch, True, False)
    assert ckpt.runner_state.env.env_state.pool is None


def test_a_run_saved_under_predrawn_resumes_with_a_fresh_pool_where_auto_now_picks_optimistic(
        costly_config, tmp_path, monkeypatch):
    """The reverse: saved while the env was cheap (its state's pool is None), loaded where
    it is costly: a full pool of fresh draws, and training goes on."""
    ckpt = _saved_then_loaded(costly_config, tmp_path, 8, monkeypatch, False, True)
    assert np.asarray(ckpt.runner_state.env.env_state.pool.filled).all()
