"""MuJoCo Playground's DM Control suite through the adapter: reset and step agree with
Playground's own, the time limit truncates (bootstrapped) while a diverged simulation terminates,
the autoreset gives Playground's reset state, one-line errors, and learning on
playground/CartpoleBalance."""

import functools
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("mujoco_playground")

from jaxppo import ConfigError, PPOConfig, make_train  # noqa: E402
from jaxppo.envs import VecEnv, check_env_id, make_env  # noqa: E402
from jaxppo.envs.sources import playground as playground_env  # noqa: E402
from jaxppo.envs.sources.playground import PlaygroundState  # noqa: E402

CARTPOLE = "playground/CartpoleBalance"
N = 3
LIMIT = 5  # episode_length through Playground's config: the time limit the tests hit
# Uniform random actions on CartpoleBalance, 200-step episodes: 114 (sd 11 per episode; 256
# episodes, measured with this adapter on 2026-11-22). Over 1000 steps: 356.
RANDOM_RETURN_200 = 114.0


@functools.cache
def _venv() -> VecEnv:
    """One VecEnv (and so one compiled step) for the equality, truncation and termination tests."""
    # reset: cond resets an ended env from its own reset key, as Playground would (the default
    # for this suite, optimistic, hands out pooled draws: tests/test_resets.py)
    return VecEnv(CARTPOLE, N, env_kwargs={"config_overrides": {"episode_length": LIMIT}},
                  reset="cond")


@functools.cache
def _playground_fns():
    """Playground's own reset and step, vmapped, on the adapter's Playground env."""
    pg = _venv().env.playground_env
    return jax.jit(jax.vmap(pg.reset)), jax.jit(jax.vmap(pg.step))


@functools.cache
def _venv_step():
    return jax.jit(_venv().step), jax.jit(_venv().reset)


def _close(a, b):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-5)


def _reset_keys(key):
    """The keys VecEnv's autoreset uses for a `VecEnv.step(key, ...)` (per env: split, 2nd)."""
    return jax.vmap(lambda k: jax.random.split(k)[1])(jax.random.split(key, (1, N))[0])


def test_registry_lists_dm_control_offline():
    from mujoco_playground import dm_control_suite

    assert set(playground_env.DM_CONTROL_NAMES) == set(dm_control_suite.ALL_ENVS)
    ids = playground_env.env_ids()
    assert CARTPOLE in ids and all(i.startswith("playground/") for i in ids)
    assert len(ids) == len(dm_control_suite.ALL_ENVS)


def test_env_object_follows_playground_config():
    venv = _venv()
    env = venv.env
    assert venv.max_episode_steps == LIMIT  # Playground's episode_length, counted by VecEnv
    assert venv.lazy_reset  # reset runs mjx.forward
    assert env.playground_env.mjx_model.impl.value == "jax"  # the CPU default
    assert venv.obs_shape == (5,) and not venv.discrete
    np.testing.assert_array_equal(venv.action_low, [-1.0])
    np.testing.assert_array_equal(venv.action_high, [1.0])
    default, _ = make_env(CARTPOLE)
    assert default.max_episode_steps == 1000


def test_step_matches_playground_then_truncates_and_autoresets():
    pg_reset, pg_step = _playground_fns()
    step, reset = _venv_step()
    key = jax.random.key(0)
    obs, state = reset(key)
    pg_state = pg_reset(jax.random.split(key, N))
    _close(obs, pg_state.obs)
    _close(state.inner.playground.data.qpos, pg_state.data.qpos)
    rewards = []
    for t in range(LIMIT + 3):
        k_act, k_step = jax.random.split(jax.random.fold_in(key, t))
        action = jax.random.uniform(k_act, (N, 1), minval=-2.0, maxval=2.0)
        # Playground's own step from the same state, with the action VecEnv clips to [-1, 1].
        want = pg_step(state.inner.playground, jnp.clip(action, -1.0, 1.0))
        state, out = step(k_step, state, action)
        _close(out.final_obs, want.obs)
        _close(out.reward, want.reward)
        rewards.append(np.asarray(out.reward))
        np.testing.assert_array_equal(out.terminated, np.asarray(want.done) > 0.5)
        ended = t + 1 == LIMIT
        # The time limit ends every episode at step LIMIT: truncated (bootstrapped), not
        # terminated; CartpoleBalance never terminates on its own.
        np.testing.assert_array_equal(out.done, [ended] * N)
        assert not np.asarray(out.terminated).any()
        if ended:
            np.testing.assert_array_equal(out.episode_length, [LIMIT] * N)
            _close(out.episode_return, np.sum(rewards, axis=0))
            fresh = pg_reset(_reset_keys(k_step))  # the autoreset is Playground's reset
            _close(out.obs, fresh.obs)
            _close(state.inner.playground.data.qpos, fresh.data.qpos)
            _close(state.inner.playground.data.qvel, fresh.data.qvel)
            assert not np.allclose(out.obs, out.final_obs)
            np.testing.assert_array_equal(state.episode_length, [0] * N)
        else:
            _close(out.obs, want.obs)
            _close(state.inner.playground.data.qvel, want.data.qvel)


def test_diverged_simulation_terminates_with_finite_outputs():
    """DM Control's only termination is a diverged simulation (NaN in qpos/qvel); the step is
    terminal, and its observation and reward reach the learner as finite numbers."""
    _, pg_step = _playground_fns()
    step, reset = _venv_step()
    _, state = reset(jax.random.key(1))
    pg_state = state.inner.playground
    qvel = pg_state.data.qvel.at[0].set(jnp.nan)  # env 0's simulation has blown up
    pg_state = pg_state.replace(data=pg_state.data.replace(qvel=qvel))
    state = state._replace(inner=PlaygroundState.wrap(pg_state))
    action = jnp.zeros((N, 1))
    want = pg_step(pg_state, action)
    np.testing.assert_array_equal(np.asarray(want.done) > 0.5, [True, False, False])
    k_step = jax.random.key(2)
    new_state, out = step(k_step, state, action)
    np.testing.assert_array_equal(out.terminated, [True, False, False])
    np.testing.assert_array_equal(out.done, [True, False, False])
    assert np.isfinite(np.asarray(out.final_obs)).all() and np.isfinite(out.reward).all()
    assert float(out.reward[0]) == 0.0
    _close(out.final_obs[1:], want.obs[1:])  # the healthy envs step as Playground's own
    np.testing.assert_array_equal(out.episode_length, [1, 1, 1])
    fresh = _playground_fns()[0](_reset_keys(k_step))
    _close(out.obs[0], fresh.obs[0])  # env 0 starts over from Playground's reset
    assert np.isfinite(np.asarray(new_state.inner.playground.data.qvel)).all()


def test_action_repeat_sums_rewards_like_playgrounds_wrapper():
    env, _ = make_env(CARTPOLE, {"config_overrides": {"action_repeat": 2, "episode_length": 9}})
    assert env.max_episode_steps == 5  # ceil(9 / 2) agent steps
    pg_reset, pg_step = _playground_fns()  # the same physics; the repeat is the adapter's
    keys = jax.random.split(jax.random.key(3), N)
    state = pg_reset(keys)
    action = jnp.full((N, 1), 0.5)
    obs, _, reward, terminated, _ = jax.jit(jax.vmap(env.step_env))(
        keys, PlaygroundState.wrap(state), action)
    once = pg_step(state, action)
    twice = pg_step(once, action)
    _close(obs, twice.obs)
    _close(reward, once.reward + twice.reward)
    assert not np.asarray(terminated).any()


def test_env_state_survives_a_checkpoint_round_trip():
    """Checkpoints msgpack the env state with flax's serialization, which MJX's `Data` alone
    does not support."""
    from flax import serialization

    from jaxppo.keys import to_host

    _, state = _venv_step()[1](jax.random.key(4))
    host = to_host(state)
    payload = serialization.msgpack_serialize(serialization.to_state_dict(host))
    back = serialization.from_state_dict(host, serialization.msgpack_restore(payload))
    jax.tree.map(np.testing.assert_array_equal, back, host)


def test_missing_playground_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "mujoco_playground", None)  # makes the import fail
    with pytest.raises(ConfigError, match=r"pip install 'jaxppo\[playground\]'") as e:
        check_env_id(CARTPOLE)
    assert "\n" not in str(e.value)


def test_unknown_id_names_close_matches():
    with pytest.raises(ConfigError, match="did you mean 'playground/CartpoleBalance'"):
        check_env_id("playground/CartpoleBalanc")


@pytest.mark.parametrize("typed", ["CartpoleBalance", "cartpole-balance", "cartpole/balance"])
def test_bare_names_point_to_playground(typed):
    with pytest.raises(ConfigError, match="did you mean the MuJoCo Playground environment "
                                          "'playground/CartpoleBalance'"):
        check_env_id(typed)


def test_locomotion_is_refused_without_downloading():
    from mujoco_playground._src import mjx_env

    had_menagerie = mjx_env.MENAGERIE_PATH.exists()
    with pytest.raises(ConfigError):
        check_env_id("playground/Go1JoystickFlatTerrain")  # not in env_ids(): offline only
    with pytest.raises(ConfigError, match="Menagerie .* at first use") as e:
        playground_env.make("Go1JoystickFlatTerrain", {})
    assert "\n" not in str(e.value)
    assert "manipulation" in playground_env.unsupported_reason("playground/PandaPickCube")
    assert playground_env.unsupported_reason(CARTPOLE) is None
    assert mjx_env.MENAGERIE_PATH.exists() == had_menagerie  # nothing was cloned


@pytest.mark.parametrize("kwargs, match", [
    ({"episode_length": 5}, "takes only config_overrides"),
    ({"config_overrides": {"episode_lenght": 5}}, "no key 'episode_lenght'"),
    ({"config_overrides": {"impl": "cuda"}}, "could not build"),
    ({"config_overrides": {"episode_length": -3}}, "episode_length is -3; use a positive integer"),
    ({"config_overrides": {"episode_length": 0}}, "episode_length is 0; use a positive integer"),
    ({"config_overrides": {"action_repeat": 0}}, "action_repeat is 0; use a positive integer"),
])
def test_bad_env_kwargs_are_one_line(kwargs, match):
    with pytest.raises(ConfigError, match=match) as e:
        make_env(CARTPOLE, kwargs)
    assert "\n" not in str(e.value)


@pytest.mark.slow
def test_cartpole_balance_learns_on_cpu():
    """4 seeds, 150k steps each, 200-step episodes (the config's max_episode_steps: more
    episodes per budget than Playground's 1000): a balancing policy earns ~1 per step."""
    config = PPOConfig(env_id=CARTPOLE, max_episode_steps=200, total_timesteps=150_000,
                       num_envs=16, num_steps=64, num_minibatches=2, update_epochs=10,
                       lr=1e-3, gamma=0.99, ent_coef=0.0, normalize_obs=True,
                       normalize_reward=True, hidden_sizes=(64, 64))
    # LLVM level 1 compiles MJX physics faster than the default (a 64-env step scan: 9 s vs 14 s on a
    # busy 2-core CPU) and runs as fast.
    train = jax.jit(make_train(config)).lower(jax.random.key(0)).compile(
        compiler_options={"xla_backend_optimization_level": 1})
    returns = np.stack([np.asarray(train(jax.random.key(s)).metrics["episodic_return"])
                        for s in range(4)])  # [seed, update]; NaN until an episode has ended
    first = float(np.mean([r[r > 0][0] for r in returns]))  # the first episodes: ~untrained
    final = float(returns[:, -5:].mean())
    # The maximum is 200; random actions get ~114 and the first episodes ~105 (8 seeds: 97-116;
    # they reach 192-196). Mean over seeds and the last 5 updates, with margin.
    assert first <= 150, first
    assert final >= 170 and final >= 1.4 * max(first, RANDOM_RETURN_200), (first, returns[:, -5:])
