"""Navix's specifics (the checklist every source passes is tests/integration/test_env_sources.py: reset and
step equal navix's own across autoresets, max_steps truncates, ids, the missing install, PPO
learns Navix-Empty-5x5): the goal terminates (and wins over max_steps on the same step) with
its goal_reached metric, the adapter's step does not reset, observation_fn by name, GIFs."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("navix")

from jaxppo import ConfigError, PPOConfig, make_train  # noqa: E402
from jaxppo.envs import VecEnv  # noqa: E402

EMPTY = "navix/Navix-Empty-5x5-v0"
FORWARD, TURN_RIGHT = 2, 1  # MiniGrid's action order: left, right, forward, pickup, ...
TO_GOAL = (FORWARD, FORWARD, TURN_RIGHT, FORWARD, FORWARD)  # (1,1) facing east -> goal (3,3)


def _walk(venv: VecEnv, actions) -> list:
    _, state = jax.jit(venv.reset)(jax.random.key(0))
    # navix's reset leaves a weak-typed leaf, which a step returns strong: made strong here, the
    # step compiles once
    state = jax.tree.map(lambda x: jax.lax.convert_element_type(x, x.dtype), state)
    steps = []
    step = jax.jit(venv.step)
    for t, a in enumerate(actions):
        state, out = step(jax.random.key(t), state, jnp.asarray(a, jnp.int32))
        steps.append((state, out))
    return steps


def test_goal_terminates_wins_over_max_steps_and_autoresets():
    """Env 0 walks to the goal in 5 steps, env 1 turns on the spot: at max_steps 5 env 0's
    episode ends both ways at once (termination wins, as navix's step_type says), env 1's is
    truncated."""
    venv = VecEnv(EMPTY, 2, env_kwargs={"max_steps": 5})
    reset_obs, _ = jax.jit(venv.reset)(jax.random.key(5))
    steps = _walk(venv, [(a, TURN_RIGHT) for a in TO_GOAL])
    for _, out in steps[:-1]:
        assert not out.done.any()
    state, out = steps[-1]
    np.testing.assert_array_equal(out.terminated, [True, False])
    np.testing.assert_array_equal(out.done, [True, True])
    np.testing.assert_array_equal(out.reward, [1.0, 0.0])
    np.testing.assert_array_equal(out.episode_length, [5, 5])
    np.testing.assert_array_equal(out.metrics["goal_reached"], [1.0, 0.0])
    # The final observations are the goal's and a view south (five right turns); the next ones
    # are fresh starts facing east (Empty-5x5's start is fixed, so any reset's observation).
    assert not np.array_equal(out.final_obs[0], out.obs[0])
    assert not np.array_equal(out.final_obs[1], out.obs[1])
    np.testing.assert_array_equal(out.obs, reset_obs)
    np.testing.assert_array_equal(state.inner.t, [0, 0])
    np.testing.assert_array_equal(state.episode_length, [0, 0])


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

