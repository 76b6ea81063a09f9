"""Network output shapes and valid distributions."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxppo import PPOConfig
from jaxppo.envs import VecEnv
from jaxppo.networks import Categorical, DiagGaussian, init_params, make_network


@pytest.mark.parametrize("env_id,discrete", [("CartPole-v1", True), ("Pendulum-v1", False),
                                             ("Breakout-MinAtar", True)])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_shapes_and_distributions(env_id, discrete, dtype):
    cfg = PPOConfig(env_id=env_id, hidden_sizes=(32, 16), compute_dtype=dtype)
    env = VecEnv(env_id, 3)
    net = make_network(cfg, env)
    params = init_params(net, jax.random.key(0), env.obs_shape)
    obs, _ = env.reset(jax.random.key(1))
    dist, value = net.apply(params, obs)
    assert value.shape == (3,) and value.dtype == jnp.float32
    action = dist.sample(jax.random.key(2))
    logp = dist.log_prob(action)
    assert logp.shape == (3,) and bool(jnp.all(jnp.isfinite(logp)))
    assert dist.entropy().shape == (3,)
    if discrete:
        assert isinstance(dist, Categorical)
        assert action.shape == (3,)
        probs = jax.nn.softmax(dist.logits)
        np.testing.assert_allclose(probs.sum(-1), 1.0, rtol=1e-5)
        # Policy head init gain 0.01: the initial policy is close to uniform.
        np.testing.assert_allclose(probs, 1.0 / env.action_dim, atol=0.05)
    else:
        assert isinstance(dist, DiagGaussian)
        assert action.shape == (3, env.action_dim)


def test_gaussian_log_prob_and_entropy_match_closed_form():
    mean = jnp.array([[0.5, -1.0]])
    log_std = jnp.array([0.1, -0.3])
    d = DiagGaussian(mean, log_std)
    a = jnp.array([[0.0, 0.0]])
    std = np.exp(np.asarray(log_std))
    ref = np.sum(-0.5 * ((0 - np.asarray(mean)) / std) ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi))
    assert float(d.log_prob(a)[0]) == pytest.approx(ref, rel=1e-5)
    ref_ent = np.sum(0.5 + 0.5 * np.log(2 * np.pi) + np.log(std))
    assert float(d.entropy()[0]) == pytest.approx(ref_ent, rel=1e-5)


def test_categorical_sampling_frequencies():
    logits = jnp.log(jnp.array([0.1, 0.6, 0.3]))
    d = Categorical(jnp.broadcast_to(logits, (20000, 3)))
    counts = np.bincount(np.asarray(d.sample(jax.random.key(0))), minlength=3) / 20000
    np.testing.assert_allclose(counts, [0.1, 0.6, 0.3], atol=0.015)
    assert float(d.entropy()[0]) == pytest.approx(
        -np.sum([p * np.log(p) for p in (0.1, 0.6, 0.3)]), rel=1e-5)


def test_actor_and_critic_are_separate():
    cfg = dataclasses.replace(PPOConfig(), hidden_sizes=(8,))
    env = VecEnv("CartPole-v1", 1)
    params = init_params(make_network(cfg, env), jax.random.key(0), env.obs_shape)
    assert set(params["params"]) == {"actor", "critic"}
