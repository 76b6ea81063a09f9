"""Craftax's specifics (the checklist every source passes is tests/integration/test_env_sources.py: steps
equal Craftax's own, the time limit truncates, the autoreset is Craftax's reset, ids, the
missing install, learning): death terminates even on the time limit's step, achievements are
episode metrics named as Craftax names them, full Craftax's spaces, env_kwargs split between
Craftax's params and static params."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("craftax")

from jaxppo import ConfigError  # noqa: E402
from jaxppo.envs import VecEnv, make_env  # noqa: E402
from jaxppo.envs.sources.craftax import CLASSIC_ACHIEVEMENTS  # noqa: E402

CLASSIC = "Craftax-Classic-Symbolic-v1"
ID = "craftax/" + CLASSIC
N = 4
LIMIT = 12  # a tiny time limit, so a few steps reach it


@pytest.fixture(scope="module")
def classic():
    """The adapter with a 12-step limit, its params, and a first state of N envs (op by op:
    cheaper than compiling a reset)."""
    env, params = make_env(ID, {"max_timesteps": LIMIT})
    keys = jax.random.split(jax.random.key(0), N)
    return env, params, jax.vmap(env.reset_env, (0, None))(keys, params)[1]


def test_death_terminates_even_at_the_time_limit(classic):
    env, params, inner = classic
    # Env 0 is at 0 health, env 1 at 0 health on the last step, env 2 at full health on the
    # last step, env 3 is untouched.
    health = inner.player_health.at[0].set(0).at[1].set(0)
    timestep = inner.timestep.at[1].set(LIMIT - 1).at[2].set(LIMIT - 1)
    inner = inner.replace(player_health=health, timestep=timestep,
                          player_recover=jnp.zeros_like(inner.player_recover))

    @jax.jit
    def step(keys, state, action):
        _, state, _, terminated, _ = jax.vmap(env.step_env, (0, 0, 0, None))(
            keys, state, action, params)
        return terminated, jax.vmap(env.is_truncated, (0, None))(state, params)

    terminated, truncated = step(jax.random.split(jax.random.key(3), N), inner,
                                 jnp.zeros((N,), jnp.int32))
    np.testing.assert_array_equal(np.asarray(terminated), [True, True, False, False])
    # VecEnv ends an episode on either; the clock alone is a truncation
    np.testing.assert_array_equal(np.asarray(terminated | truncated), [True, True, True, False])


def test_achievements_are_episode_metrics(classic):
    env, params, inner = classic
    venv = VecEnv(ID, N, env=env, env_params=params)  # abstract checks only: nothing compiles
    assert set(venv.metric_names) == {"num_achievements",
                                      *(f"achievements/{n}" for n in CLASSIC_ACHIEVEMENTS)}
    state = jax.tree.map(lambda x: x[0], inner)
    got = state.achievements.at[0].set(True).at[21].set(True)
    metrics = env.episode_metrics(state.replace(achievements=got), params)
    assert float(metrics["num_achievements"]) == 2.0
    assert float(metrics["achievements/collect_wood"]) == 1.0
    assert float(metrics["achievements/make_iron_sword"]) == 1.0
    assert float(metrics["achievements/place_table"]) == 0.0


@pytest.mark.parametrize("module", ["craftax.craftax_classic.constants",
                                    "craftax.craftax.constants"])
def test_achievement_names_follow_craftax(module):
    import importlib

    enum = importlib.import_module(module).Achievement
    assert [enum(i).name.lower() for i in range(22)] == list(CLASSIC_ACHIEVEMENTS)


def test_full_craftax_traces_with_its_spaces():
    venv = VecEnv("craftax/Craftax-Symbolic-v1", 2)  # abstract checks only: nothing compiles
    assert venv.obs_shape == (8268,) and venv.action_dim == 43 and not venv.masked
    assert venv.info.truncates and venv.lazy_reset


def test_env_kwargs_reach_params_and_static_params():
    env, params = make_env(ID, {"max_timesteps": 7, "map_size": [32, 32]})
    assert params.max_timesteps == 7
    assert env.inner.static_env_params.map_size == (32, 32)
    with pytest.raises(ConfigError, match="takes no 'max_steps'"):
        make_env(ID, {"max_steps": 7})
