"""XLand-MiniGrid through jaxppo: the adapter agrees with xminigrid's own reset and step, tells
termination (discount 0) from the max_steps limit (discount 1), leaves resets to VecEnv,
refuses the benchmarks that download rulesets, and PPO learns MiniGrid-Empty-6x6 in seconds."""

import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

xminigrid = pytest.importorskip("xminigrid")

from jaxppo import ConfigError, PPOConfig, make_train  # noqa: E402
from jaxppo.envs import VecEnv, check_env_id  # noqa: E402
from jaxppo.envs.sources import xminigrid as xminigrid_env  # noqa: E402

EMPTY5 = "xminigrid/MiniGrid-Empty-5x5"
EMPTY6 = "xminigrid/MiniGrid-Empty-6x6"
FORWARD, TURN_RIGHT = 0, 1  # xminigrid's actions: forward, right, left, pick up, put down, toggle
TO_GOAL = (FORWARD, FORWARD, TURN_RIGHT, FORWARD, FORWARD)  # (1,1) facing east -> goal (3,3)


def test_reset_and_step_match_xminigrid():
    """Random starts, a 12-step limit: every adapter step equals xminigrid's own step from the
    same state, across autoresets."""
    name, n, steps = "MiniGrid-EmptyRandom-5x5", 8, 40
    venv = VecEnv(f"xminigrid/{name}", n, env_kwargs={"max_steps": 12})
    env, params = xminigrid.make(name, max_steps=12)
    key = jax.random.key(0)
    obs, state = jax.jit(venv.reset)(key)
    ref = jax.jit(jax.vmap(env.reset, in_axes=(None, 0)), static_argnums=0)(
        params, jax.random.split(key, n))
    np.testing.assert_array_equal(obs, ref.observation)
    np.testing.assert_array_equal(state.inner.state.agent.position, ref.state.agent.position)

    def run(key, actions):
        _, state = venv.reset(key)

        def body(state, xs):
            step_key, action = xs
            new_state, out = venv.step(step_key, state, action)
            return new_state, (state.inner, out)

        return jax.lax.scan(body, state, (jax.random.split(key, steps), actions))[1]

    actions = jax.random.randint(jax.random.key(1), (steps, n), 0, venv.action_dim)
    before, out = jax.jit(run)(key, actions)
    expect = jax.jit(jax.vmap(jax.vmap(lambda ts, a: env.step(params, ts, a))))(before, actions)
    np.testing.assert_array_equal(out.final_obs, expect.observation)
    np.testing.assert_allclose(out.reward, expect.reward, rtol=1e-6)
    last = expect.step_type == 2
    np.testing.assert_array_equal(out.terminated, last & (expect.discount == 0))
    np.testing.assert_array_equal(out.done, last)
    terminated, truncated = int(out.terminated.sum()), int((out.done & ~out.terminated).sum())
    assert terminated > 0 and truncated > 0, (terminated, truncated)


def _walk(venv: VecEnv, actions) -> list:
    _, state = jax.jit(venv.reset)(jax.random.key(0))
    steps = []
    step = jax.jit(venv.step)
    for t, a in enumerate(actions):
        state, out = step(jax.random.key(t), state, jnp.full((venv.num_envs,), a, jnp.int32))
        steps.append((state, out))
    return steps


def test_goal_terminates_and_autoresets():
    venv = VecEnv(EMPTY5, 2)
    reset_obs, _ = jax.jit(venv.reset)(jax.random.key(5))
    steps = _walk(venv, TO_GOAL)
    for _, out in steps[:-1]:
        assert not out.done.any()
    state, out = steps[-1]
    assert out.terminated.all() and out.done.all()
    np.testing.assert_allclose(out.reward, 1 - 0.9 * 5 / 100)  # MiniGrid's reward, max_steps 100
    np.testing.assert_array_equal(out.episode_length, [5, 5])
    np.testing.assert_array_equal(out.metrics["success"], [1.0, 1.0])
    # The final observation is the goal's; the next is a fresh start (Empty-5x5's is fixed).
    assert not np.array_equal(out.final_obs, out.obs)
    np.testing.assert_array_equal(out.obs, reset_obs)
    np.testing.assert_array_equal(state.inner.state.step_num, [0, 0])


def test_max_steps_truncates_not_terminates():
    venv = VecEnv(EMPTY5, 2, env_kwargs={"max_steps": 3})
    steps = _walk(venv, (TURN_RIGHT,) * 4)
    assert [bool(out.done.all()) for _, out in steps] == [False, False, True, False]
    state, out = steps[2]
    assert not out.terminated.any()
    np.testing.assert_array_equal(out.episode_length, [3, 3])
    np.testing.assert_array_equal(out.metrics["success"], [0.0, 0.0])
    assert not np.array_equal(out.final_obs, out.obs)  # facing north, the reset faces east
    np.testing.assert_array_equal(state.inner.state.step_num, [0, 0])


def test_benchmarks_that_download_rulesets_are_refused():
    assert not any("XLand-MiniGrid" in i for i in xminigrid_env.env_ids())
    with pytest.raises(ConfigError, match="downloads from the internet") as e:
        xminigrid_env.make("XLand-MiniGrid-R1-9x9", {})
    assert "\n" not in str(e.value)
    with pytest.raises(ConfigError) as e:
        check_env_id("xminigrid/XLand-MiniGrid-R1-9x9")
    assert "\n" not in str(e.value)


def test_bad_kwarg_is_one_line():
    with pytest.raises(ConfigError, match=r"does not take \['colour'\]") as e:
        VecEnv(EMPTY5, 1, env_kwargs={"colour": 3})
    assert "\n" not in str(e.value)
    assert VecEnv(EMPTY5, 1, env_kwargs={"view_size": 5}).obs_shape == (5, 5, 2)


def test_unknown_id_names_close_match():
    with pytest.raises(ConfigError, match="did you mean 'xminigrid/MiniGrid-Empty-6x6'"):
        check_env_id("xminigrid/MiniGrid-Emty-6x6")


def test_bare_and_gymnasium_ids_point_to_xminigrid():
    assert xminigrid_env.suggest_id("MiniGrid-Empty-Random-6x6-v0") == \
        "xminigrid/MiniGrid-EmptyRandom-6x6"
    with pytest.raises(ConfigError, match="did you mean the XLand-MiniGrid environment "
                                          "'xminigrid/MiniGrid-Unlock'"):
        check_env_id("MiniGrid-Unlock-v0")  # Navix has no Unlock


def test_missing_xminigrid_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "xminigrid", None)  # makes `import xminigrid` fail
    with pytest.raises(ConfigError, match=r"pip install 'jaxppo\[xminigrid\]'") as e:
        check_env_id(EMPTY6)
    assert "\n" not in str(e.value)


def _random_policy(env_id: str, n: int = 64, steps: int = 400) -> tuple[float, float]:
    """Mean return and length of the episodes a uniformly random policy finishes."""
    venv = VecEnv(env_id, n)

    def run(key):
        _, state = venv.reset(key)

        def body(state, key):
            k_act, k_step = jax.random.split(key)
            action = jax.random.randint(k_act, (n,), 0, venv.action_dim)
            state, out = venv.step(k_step, state, action)
            return state, (out.done, out.episode_return, out.episode_length)

        return jax.lax.scan(body, state, jax.random.split(key, steps))[1]

    done, ret, length = (np.asarray(x) for x in jax.jit(run)(jax.random.key(0)))
    return float(ret[done].mean()), float(length[done].mean())


def test_ppo_learns_empty_6x6():
    """20k steps x 4 seeds (~25 s on 2 cores). The shortest path takes 7 steps (return
    1 - 0.9 * 7 / 144 = 0.956); a random policy scores ~0.22 in episodes of ~115 steps."""
    rand_return, rand_length = _random_policy(EMPTY6)
    assert rand_return < 0.4 and rand_length > 80, (rand_return, rand_length)
    config = PPOConfig(env_id=EMPTY6, total_timesteps=20_000, num_envs=16, num_steps=32,
                       num_minibatches=4, update_epochs=4, lr=1e-3, hidden_sizes=(64, 64))
    out = jax.jit(jax.vmap(make_train(config)))(jax.random.split(jax.random.key(0), 4))
    ret = np.asarray(out.metrics["episodic_return"])[:, -5:]
    length = np.asarray(out.metrics["episodic_length"])[:, -5:]
    assert np.nanmean(ret) >= max(0.85, rand_return + 0.5), ret
    assert np.nanmean(length) <= min(20.0, rand_length / 4), length
