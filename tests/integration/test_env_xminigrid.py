"""XLand-MiniGrid's specifics (the checklist every source passes is tests/integration/test_env_sources.py:
reset and step equal xminigrid's own across autoresets, max_steps truncates (discount 1), ids,
the missing install, PPO learns MiniGrid-Empty-6x6): the goal terminates (discount 0, also on
max_steps' step) with MiniGrid's reward and the success metric, the benchmarks that download
rulesets are refused, env_kwargs."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("xminigrid")

from jaxppo import ConfigError  # noqa: E402
from jaxppo.envs import VecEnv, check_env_id  # noqa: E402
from jaxppo.envs.sources import xminigrid as xminigrid_env  # noqa: E402

EMPTY5 = "xminigrid/MiniGrid-Empty-5x5"
EMPTY6 = "xminigrid/MiniGrid-Empty-6x6"
FORWARD, TURN_RIGHT = 0, 1  # xminigrid's actions: forward, right, left, pick up, put down, toggle
TO_GOAL = (FORWARD, FORWARD, TURN_RIGHT, FORWARD, FORWARD)  # (1,1) facing east -> goal (3,3)


def _walk(venv: VecEnv, actions) -> list:
    _, state = jax.jit(venv.reset)(jax.random.key(0))
    steps = []
    step = jax.jit(venv.step)
    for t, a in enumerate(actions):
        state, out = step(jax.random.key(t), state, jnp.asarray(a, jnp.int32))
        steps.append((state, out))
    return steps


def test_goal_terminates_on_max_steps_step_too_and_autoresets():
    """Env 0 walks to the goal in 5 steps, env 1 turns on the spot: at max_steps 5 env 0's
    episode ends both ways at once (the goal's discount 0: terminated), env 1's is truncated."""
    venv = VecEnv(EMPTY5, 2, env_kwargs={"max_steps": 5})
    reset_obs, _ = jax.jit(venv.reset)(jax.random.key(5))
    steps = _walk(venv, [(a, TURN_RIGHT) for a in TO_GOAL])
    for _, out in steps[:-1]:
        assert not out.done.any()
    state, out = steps[-1]
    np.testing.assert_array_equal(out.terminated, [True, False])
    np.testing.assert_array_equal(out.done, [True, True])
    np.testing.assert_allclose(out.reward, [1 - 0.9 * 5 / 5, 0.0], atol=1e-6)  # MiniGrid's goal reward
    np.testing.assert_array_equal(out.episode_length, [5, 5])
    np.testing.assert_array_equal(out.metrics["success"], [1.0, 0.0])
    # The final observations are the goal's and a view south (five right turns); the next ones
    # are fresh starts facing east (Empty-5x5's start is fixed).
    assert not np.array_equal(out.final_obs[0], out.obs[0])
    assert not np.array_equal(out.final_obs[1], out.obs[1])
    np.testing.assert_array_equal(out.obs, reset_obs)
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


def test_gymnasium_minigrid_spelling_points_to_xminigrid():
    assert xminigrid_env.suggest_id("MiniGrid-Empty-Random-6x6-v0") == \
        "xminigrid/MiniGrid-EmptyRandom-6x6"
