"""Lines that blamed the wrong thing or said too much (issue #54, item 9): a finite float64
observation too big for float32 is not "NaN/Inf"; an lr float32 cannot hold is refused before
the run, not after it overflows; a sweep's agents are not "seeds"; an async pool prints no
fork warning; an env whose observation changed is not blamed on the config."""

import warnings

import gymnasium
import jax.numpy as jnp
import numpy as np
import pytest
from faults_setup import cli
from test_host_env import Walk

from jaxppo import Experiment, PPOConfig, load_checkpoint
from jaxppo.envs.sources.gymnasium import GymnasiumSource
from jaxppo.errors import CheckpointError, ConfigError, EnvError

pytestmark = pytest.mark.usefixtures("compile_cache")


class Huge(Walk):
    observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (2,), np.float64)

    def _obs(self):
        return np.array([self.pos, self.t], np.float64)

    def step(self, action):
        obs, *rest = super().step(action)
        return np.array([1e300, 0.0]), *rest


def test_a_finite_float64_observation_past_float32_is_named_not_nan(tmp_path):
    gymnasium.register("test/Huge-v0", entry_point=Huge, max_episode_steps=6)
    config = PPOConfig(env_id="gymnasium/test/Huge-v0", total_timesteps=256, num_envs=4,
                       num_steps=8, num_minibatches=2, update_epochs=1, hidden_sizes=(8,))
    with pytest.raises(EnvError) as e:
        Experiment(config, logdir=str(tmp_path), progress=False, chunk_updates=1).run()
    assert "1e+300, a finite float64 value beyond float32's range" in str(e.value)
    assert "NaN/Inf" not in str(e.value)


@pytest.mark.parametrize("key", ["lr", "max_grad_norm"])
def test_a_number_float32_cannot_hold_is_refused(key):
    with pytest.raises(ConfigError, match=f"config key '{key}': got 1e\\+308, more than float32"):
        PPOConfig(**{key: 1e308})


def test_train_resume_of_a_grid_sweep_names_settings_not_seeds(tmp_path, capsys):
    """Reproduction: two settings of two seeds each were reported as '4 seed(s)'."""
    config = PPOConfig(total_timesteps=1536, num_envs=4, num_steps=16, num_minibatches=2,
                       update_epochs=2, hidden_sizes=(16, 16))
    Experiment(config, hparams=[{"lr": 1e-3}, {"lr": 1e-4}], seeds=2, logdir=str(tmp_path),
               run_name="s", progress=False, chunk_updates=6,
               callbacks=[lambda e: e.update < 12]).run()
    code, out, err = cli(capsys, "train", "--resume", str(tmp_path / "s"), "--no-progress")
    assert code == 0, err
    assert "| 2 settings x 2 seed(s) |" in out and "4 seed(s)" not in out, out
    assert "over 4 agents of 2 settings |" in out.splitlines()[-1], out


def test_an_async_gymnasium_pool_prints_no_fork_warning():
    """Reproduction: every async pool printed JAX's 'os.fork() was called ... deadlock'
    warning, about workers that never touch JAX."""
    jnp.zeros(3).block_until_ready()  # JAX's threads are up, as in a run
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        source = GymnasiumSource("CartPole-v1", 2, {"vectorization": "async"}, False)
        source.vec.close()
    assert not [w for w in seen if "os.fork" in str(w.message)], [str(w.message) for w in seen]


class Wider(Walk):
    observation_space = gymnasium.spaces.Box(-10.0, 10.0, (3,), np.float32)

    def _obs(self):
        return np.array([self.pos, self.t, 0.0], np.float32)


def test_an_env_whose_observation_shape_changed_is_not_blamed_on_the_config(tmp_path):
    """Reproduction: a module's env that grew its observation between train and resume was
    'does not match this config (e.g. other network sizes or num_envs); resume with the run's
    own config', which the resume was using."""
    gymnasium.register("test/Grows-v0", entry_point=Walk, max_episode_steps=6)
    config = PPOConfig(env_id="gymnasium/test/Grows-v0", total_timesteps=64, num_envs=4,
                       num_steps=8, num_minibatches=2, update_epochs=1, hidden_sizes=(8,))
    Experiment(config, logdir=str(tmp_path), run_name="r", progress=False).run()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # gymnasium: overriding the registered id
        gymnasium.register("test/Grows-v0", entry_point=Wider, max_episode_steps=6)
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(tmp_path / "r")
    assert "observation or action shape changed since the run was saved" in str(e.value)
    assert "restore the environment as it was" in str(e.value)
