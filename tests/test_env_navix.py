"""Navix through jaxppo: the adapter agrees with navix's own reset and step, ends episodes the
way navix's step_type says (goal: termination; max_steps: truncation), leaves resets to
VecEnv, and PPO learns Navix-Empty-5x5 in seconds."""

import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

navix = pytest.importorskip("navix")

from jaxppo import ConfigError, PPOConfig, make_train  # noqa: E402
from jaxppo.envs import VecEnv, check_env_id  # noqa: E402

EMPTY = "navix/Navix-Empty-5x5-v0"
FORWARD, TURN_RIGHT = 2, 1  # MiniGrid's action order: left, right, forward, pickup, ...
TO_GOAL = (FORWARD, FORWARD, TURN_RIGHT, FORWARD, FORWARD)  # (1,1) facing east -> goal (3,3)


def _reference(name: str, **kwargs):
    """Navix's own env with the adapter's default observation."""
    return navix.make(name, observation_fn=navix.observations.symbolic_first_person, **kwargs)


def test_reset_and_step_match_navix():
    """Random starts and randomly moving balls (navix's state key), a 12-step limit: every
    adapter step equals navix's own step from the same state, across autoresets."""
    name, n, steps, max_steps = "Navix-Dynamic-Obstacles-5x5-Random-v0", 8, 40, 12
    venv = VecEnv(f"navix/{name}", n, env_kwargs={"max_steps": max_steps})
    ref = _reference(name, max_steps=max_steps)
    key = jax.random.key(0)
    obs, _ = jax.jit(venv.reset)(key)
    ref_ts = jax.jit(jax.vmap(ref.reset))(jax.random.split(key, n))
    np.testing.assert_array_equal(obs, ref_ts.observation.astype(np.float32))

    def run(key, actions):
        _, state = venv.reset(key)

        def body(state, xs):
            step_key, action = xs
            new_state, out = venv.step(step_key, state, action)
            return new_state, (state.inner, out)

        return jax.lax.scan(body, state, (jax.random.split(key, steps), actions))[1]

    actions = jax.random.randint(jax.random.key(1), (steps, n), 0, venv.action_dim)
    before, out = jax.jit(run)(key, actions)
    # navix's autoresetting step, from the states VecEnv stepped (none of which had ended)
    expect = jax.jit(jax.vmap(jax.vmap(ref.step)))(before, actions)
    np.testing.assert_array_equal(out.final_obs, expect.observation.astype(np.float32))
    np.testing.assert_array_equal(out.reward, expect.reward)
    np.testing.assert_array_equal(out.terminated, expect.step_type == 2)
    np.testing.assert_array_equal(out.done, expect.step_type > 0)
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
    venv = VecEnv(EMPTY, 2)
    reset_obs, _ = jax.jit(venv.reset)(jax.random.key(5))
    steps = _walk(venv, TO_GOAL)
    for _, out in steps[:-1]:
        assert not out.done.any()
    state, out = steps[-1]
    assert out.terminated.all() and out.done.all()
    np.testing.assert_array_equal(out.reward, [1.0, 1.0])
    np.testing.assert_array_equal(out.episode_length, [5, 5])
    np.testing.assert_array_equal(out.metrics["goal_reached"], [1.0, 1.0])
    # The final observation is the goal state's; the next one is a fresh start (Empty-5x5's
    # start is fixed, so any reset's observation).
    assert not np.array_equal(out.final_obs, out.obs)
    np.testing.assert_array_equal(out.obs, reset_obs)
    np.testing.assert_array_equal(state.inner.t, [0, 0])
    np.testing.assert_array_equal(state.episode_length, [0, 0])


def test_max_steps_truncates_not_terminates():
    venv = VecEnv(EMPTY, 2, env_kwargs={"max_steps": 3})
    steps = _walk(venv, (TURN_RIGHT,) * 4)
    dones = [bool(out.done.all()) for _, out in steps]
    assert dones == [False, False, True, False]
    state, out = steps[2]
    assert not out.terminated.any()
    np.testing.assert_array_equal(out.episode_length, [3, 3])
    np.testing.assert_array_equal(out.metrics["goal_reached"], [0.0, 0.0])
    # Three right turns face north; the reset faces east: the true final view is kept apart.
    assert not np.array_equal(out.final_obs, out.obs)
    np.testing.assert_array_equal(state.inner.t, [0, 0])


def test_adapter_step_does_not_reset():
    """Stepping an ended timestep again stays ended (navix's own step would reset it)."""
    from jaxppo.envs.sources.navix import make

    env, params = make("Navix-Empty-5x5-v0", {})
    _, ts = jax.jit(env.reset_env)(jax.random.key(0), params)
    step = jax.jit(env.step_env)
    for a in TO_GOAL:
        _, ts, _, terminated, _ = step(jax.random.key(1), ts, a, params)
    assert bool(terminated) and int(ts.t) == 5
    _, after, _, _, _ = step(jax.random.key(2), ts, 0, params)
    assert int(after.t) == 6


def test_observation_fn_by_name_and_bad_kwargs():
    assert VecEnv(EMPTY, 1, env_kwargs={"observation_fn": "symbolic"}).obs_shape == (5, 5, 3)
    assert VecEnv(EMPTY, 1).obs_shape == (7, 7, 3)
    # RGB views draw from navix's rendering cache, which the adapter then keeps
    assert VecEnv(EMPTY, 1, env_kwargs={"observation_fn": "rgb"}).obs_shape == (40, 40, 3)
    with pytest.raises(ConfigError, match="no observation_fn 'symbolc'.*symbolic_first_person"):
        VecEnv(EMPTY, 1, env_kwargs={"observation_fn": "symbolc"})
    with pytest.raises(ConfigError, match=r"does not take \['colour'\]") as e:
        VecEnv(EMPTY, 1, env_kwargs={"colour": 3})
    assert "\n" not in str(e.value)


def test_unknown_id_names_close_match():
    with pytest.raises(ConfigError, match="did you mean 'navix/Navix-Empty-5x5-v0'"):
        check_env_id("navix/Navix-Emty-5x5-v0")


def test_minigrid_id_points_to_navix():
    with pytest.raises(ConfigError, match="did you mean the Navix environment "
                                          "'navix/Navix-DoorKey-8x8-v0'"):
        check_env_id("MiniGrid-DoorKey-8x8-v0")


def test_missing_navix_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "navix", None)  # makes `import navix` fail
    with pytest.raises(ConfigError, match=r"pip install 'jaxppo\[navix\]'") as e:
        check_env_id(EMPTY)
    assert "\n" not in str(e.value)


def _random_policy(env_id: str, n: int = 64, steps: int = 300) -> tuple[float, float]:
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


def test_ppo_learns_empty_5x5():
    """20k steps x 4 seeds (20-35 s on a busy 2-core CPU): the shortest path is 5 steps; a
    random policy reaches the goal in ~40% of its 100-step episodes and takes ~80 steps."""
    rand_return, rand_length = _random_policy(EMPTY)
    assert rand_return < 0.6 and rand_length > 50, (rand_return, rand_length)
    config = PPOConfig(env_id=EMPTY, total_timesteps=20_000, num_envs=16, num_steps=32,
                       num_minibatches=4, update_epochs=4, lr=1e-3, hidden_sizes=(64, 64))
    out = jax.jit(jax.vmap(make_train(config)))(jax.random.split(jax.random.key(0), 4))
    ret = np.asarray(out.metrics["episodic_return"])[:, -5:]
    length = np.asarray(out.metrics["episodic_length"])[:, -5:]
    assert np.nanmean(ret) >= max(0.9, rand_return + 0.3), ret
    assert np.nanmean(length) <= min(15.0, rand_length / 3), length


def test_eval_gif_draws_navix_frames(tmp_path):
    """The adapter's render hook: navix's own RGB view of the whole grid, one frame a step."""
    from PIL import Image

    from jaxppo.policy.render import render_gif

    config = PPOConfig(env_id=EMPTY, env_kwargs={"max_steps": 6}, num_envs=2, num_steps=8,
                       total_timesteps=16, num_minibatches=1, hidden_sizes=(8,))
    ts = make_train(config).init(jax.random.key(0)).train_state
    length = render_gif(config, ts, jax.random.key(0), str(tmp_path / "n.gif"))
    img = Image.open(tmp_path / "n.gif")
    assert img.n_frames == length and 1 <= length <= 6
    assert min(img.size) >= 160 and np.asarray(img.convert("RGB")).std() > 10  # not blank

