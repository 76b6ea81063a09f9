"""MuJoCo Playground's specifics (the checklist every source passes is tests/integration/test_env_sources.py:
reset and step equal Playground's own, the time limit truncates, the autoreset is Playground's
reset, ids, the missing install, learning on playground/CartpoleBalance): the DM Control
registry offline, the config's episode_length and action_repeat, a diverged simulation
terminates with finite outputs, the env state survives a checkpoint, one-line errors, the
locomotion suite refused without downloading."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("mujoco_playground")

from jaxppo import ConfigError  # noqa: E402
from jaxppo.envs import VecEnv, check_env_id, make_env  # noqa: E402
from jaxppo.envs.sources import playground as playground_env  # noqa: E402
from jaxppo.envs.sources.playground import PlaygroundState  # noqa: E402

CARTPOLE = "playground/CartpoleBalance"
N = 3
LIMIT = 5  # episode_length through Playground's config


@functools.cache
def _adapter():
    """The adapter's env (a LIMIT-step episode_length), its reset and step vmapped over N envs,
    each compiled once for the tests below."""
    env, _ = make_env(CARTPOLE, {"config_overrides": {"episode_length": LIMIT}})
    return env, jax.jit(jax.vmap(env.reset_env)), jax.jit(jax.vmap(env.step_env))


def _close(a, b):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-5)


def test_registry_lists_dm_control_offline():
    from mujoco_playground import dm_control_suite

    assert set(playground_env.DM_CONTROL_NAMES) == set(dm_control_suite.ALL_ENVS)
    ids = playground_env.env_ids()
    assert CARTPOLE in ids and all(i.startswith("playground/") for i in ids)
    assert len(ids) == len(dm_control_suite.ALL_ENVS)


def test_env_object_follows_playground_config():
    env = _adapter()[0]
    venv = VecEnv(CARTPOLE, N, env=env)  # abstract checks only: nothing compiles
    assert venv.max_episode_steps == LIMIT  # Playground's episode_length, counted by VecEnv
    assert venv.lazy_reset  # reset runs mjx.forward
    assert env.playground_env.mjx_model.impl.value == "jax"  # the CPU default
    assert venv.obs_shape == (5,) and not venv.discrete
    np.testing.assert_array_equal(venv.action_low, [-1.0])
    np.testing.assert_array_equal(venv.action_high, [1.0])
    default, _ = make_env(CARTPOLE)
    assert default.max_episode_steps == 1000


def test_diverged_simulation_terminates_with_finite_outputs():
    """DM Control's only termination is a diverged simulation (NaN in qpos/qvel); the step is
    terminal, and its observation and reward reach the learner as finite numbers."""
    _, reset, step = _adapter()
    keys = jax.random.split(jax.random.key(1), N)
    pg_state = reset(keys)[1].playground
    qvel = pg_state.data.qvel.at[0].set(jnp.nan)  # env 0's simulation has blown up
    pg_state = pg_state.replace(data=pg_state.data.replace(qvel=qvel))
    obs, _, reward, terminated, _ = step(keys, PlaygroundState.wrap(pg_state), jnp.zeros((N, 1)))
    np.testing.assert_array_equal(terminated, [True, False, False])
    assert np.isfinite(np.asarray(obs)).all() and np.isfinite(reward).all()
    assert float(reward[0]) == 0.0


def test_action_repeat_sums_rewards_like_playgrounds_wrapper():
    env, _ = make_env(CARTPOLE, {"config_overrides": {"action_repeat": 2, "episode_length": 9}})
    assert env.max_episode_steps == 5  # ceil(9 / 2) agent steps
    _, reset, step = _adapter()  # the same physics, one step per action
    keys = jax.random.split(jax.random.key(3), N)
    state = reset(keys)[1]
    action = jnp.full((N, 1), 0.5)
    obs, _, reward, terminated, _ = jax.jit(jax.vmap(env.step_env))(keys, state, action)
    _, once, once_reward, _, _ = step(keys, state, action)
    twice_obs, _, twice_reward, _, _ = step(keys, once, action)
    _close(obs, twice_obs)
    _close(reward, once_reward + twice_reward)
    assert not np.asarray(terminated).any()


def test_env_state_survives_a_checkpoint_round_trip():
    """Checkpoints msgpack the env state with flax's serialization, which MJX's `Data` alone
    does not support."""
    from flax import serialization

    from jaxppo.keys import to_host

    state = _adapter()[1](jax.random.split(jax.random.key(4), N))[1]
    host = to_host(state)
    payload = serialization.msgpack_serialize(serialization.to_state_dict(host))
    back = serialization.from_state_dict(host, serialization.msgpack_restore(payload))
    jax.tree.map(np.testing.assert_array_equal, back, host)


@pytest.mark.parametrize("typed", ["cartpole-balance", "cartpole/balance"])
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
