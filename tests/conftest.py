import jax
import pytest

from jaxppo import PPOConfig
from jaxppo.envs import register_env
from jaxppo.envs.probes import ProbeState, _Probe


class Explode(_Probe):
    """Reward 0 until step 40 of an episode, then 1e38: returns overflow to inf, the critic's
    loss goes non-finite. A deterministic way to make a run diverge at a known update (the
    third of 16-step updates)."""

    def reset_env(self, key, params):
        s = ProbeState(obs=jax.numpy.float32(0.0), time=0)
        return self.get_obs(s), s

    def step_env(self, key, state, action, params):
        reward = jax.numpy.where(state.time >= 40, 1e38, 0.0)
        return self._out(state.replace(time=state.time + 1), reward, False)


register_env("test/Explode-v0", Explode)


@pytest.fixture(scope="session")
def tiny_config():
    """A CartPole run small enough to compile and run in a few seconds on 2 cores."""
    return PPOConfig(env_id="CartPole-v1", total_timesteps=4 * 16 * 6, num_envs=4, num_steps=16,
                     num_minibatches=2, update_epochs=2, hidden_sizes=(16, 16))


@pytest.fixture(scope="session")
def keys():
    return jax.random.split(jax.random.key(42), 3)
