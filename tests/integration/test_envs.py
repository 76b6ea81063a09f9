"""VecEnv on gymnax envs: it must agree with gymnax's own `step` (continuous actions, MinAtar;
CartPole and the checklist every source passes are in tests/integration/test_env_sources.py), autoreset,
count episodes, and keep truncation apart from termination."""

import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxppo.envs import VecEnv


@pytest.mark.parametrize("env_id", ["Pendulum-v1", "Breakout-MinAtar"])
def test_step_matches_gymnax_step_including_autoreset(env_id):
    n = 6
    venv = VecEnv(env_id, n)
    env, params = gymnax.make(env_id)
    obs, state = venv.reset(jax.random.key(0))
    step_fn = jax.jit(venv.step)
    close = lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)  # noqa: E731
    key = jax.random.key(1)
    saw_done = False
    for _t in range(300):
        key, k_act, k_step = jax.random.split(key, 3)
        if venv.discrete:
            action = jax.random.randint(k_act, (n,), 0, venv.action_dim)
        else:
            action = jax.random.uniform(k_act, (n, venv.action_dim), minval=-3.0, maxval=3.0)
        env_keys = jax.random.split(k_step, (1, n))[0]
        clipped = action if venv.discrete else jnp.clip(action, venv.action_low,
                                                        venv.action_high)
        g_obs, g_state, g_rew, g_term, g_trunc, g_info = jax.vmap(
            env.step, in_axes=(0, 0, 0, None))(env_keys, state.inner, clipped, params)
        new_state, step = step_fn(k_step, state, action)
        # Same randomness, same state in: same transition out (to float rounding, as the two
        # are compiled separately); the discrete outcomes must agree exactly.
        np.testing.assert_array_equal(step.terminated, g_term)
        np.testing.assert_array_equal(step.done, g_term | g_trunc)
        close(step.obs, g_obs)
        close(step.final_obs, g_info["final_observation"])
        close(step.reward, g_rew)
        jax.tree.map(close, new_state.inner, g_state)
        state = new_state._replace(inner=g_state)
        saw_done |= bool(step.done.any())
    assert saw_done, "the test never exercised an autoreset"


def test_episode_statistics_cartpole():
    # CartPole pays 1 per step, so an episode's return equals its length.
    venv = VecEnv("CartPole-v1", 8)
    _, state = venv.reset(jax.random.key(0))
    step_fn = jax.jit(venv.step)
    key = jax.random.key(1)
    ended = 0
    for _ in range(200):
        key, k1, k2 = jax.random.split(key, 3)
        state, step = step_fn(k2, state, jax.random.randint(k1, (8,), 0, 2))
        d = np.asarray(step.done)
        np.testing.assert_array_equal(np.asarray(step.episode_return)[d],
                                      np.asarray(step.episode_length)[d])
        # after an episode ends, the running statistics restart at zero
        assert np.all(np.asarray(state.episode_length)[d] == 0)
        # the final observation differs from the reset observation where done
        if d.any():
            assert not np.allclose(np.asarray(step.final_obs)[d], np.asarray(step.obs)[d])
        ended += int(d.sum())
    assert ended > 20


def test_truncation_is_not_termination():
    venv = VecEnv("probe/Truncation-v0", 2)
    _, state = venv.reset(jax.random.key(0))
    for t in range(5):
        state, step = venv.step(jax.random.key(t), state, jnp.zeros((2,), jnp.int32))
    assert bool(step.done.all()) and not bool(step.terminated.any())
    assert np.all(np.asarray(step.episode_length) == 5)


def test_continuous_actions_are_clipped_for_stepping():
    venv = VecEnv("Pendulum-v1", 2)
    _, state = venv.reset(jax.random.key(0))
    _, s_big = venv.step(jax.random.key(1), state, jnp.full((2, 1), 100.0))
    _, s_max = venv.step(jax.random.key(1), state, jnp.full((2, 1), 2.0))
    np.testing.assert_array_equal(s_big.obs, s_max.obs)
