import jax
import pytest

from jaxppo import PPOConfig


@pytest.fixture(scope="session")
def tiny_config():
    """A CartPole run small enough to compile and run in a few seconds on 2 cores."""
    return PPOConfig(env_id="CartPole-v1", total_timesteps=4 * 16 * 6, num_envs=4, num_steps=16,
                     num_minibatches=2, update_epochs=2, hidden_sizes=(16, 16))


@pytest.fixture(scope="session")
def keys():
    return jax.random.split(jax.random.key(42), 3)
