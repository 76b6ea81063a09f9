"""Network output shapes and valid distributions."""

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxppo import PPOConfig
from jaxppo.envs import VecEnv
from jaxppo.networks import Categorical, DiagGaussian, init_params, make_network, orthogonal


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


def test_cnn_torso_reads_images_as_images():
    """`torso: cnn` puts MinAtar's 3x3x16 conv before the hidden layers of actor and critic;
    the conv's output is the flattened 8x8x16 map the first dense layer reads."""
    cfg = PPOConfig(env_id="Breakout-MinAtar", torso="cnn", hidden_sizes=(32,))
    env = VecEnv("Breakout-MinAtar", 3)
    net = make_network(cfg, env)
    params = init_params(net, jax.random.key(0), env.obs_shape)["params"]
    for part in ("actor", "critic"):
        assert params[part]["Conv_0"]["kernel"].shape == (3, 3, 4, 16)
        assert params[part]["Dense_0"]["kernel"].shape == (8 * 8 * 16, 32)
    obs = jax.random.bernoulli(jax.random.key(1), 0.2, (5, 7, 10, 10, 4))  # [T, N, H, W, C]
    dist, value = net.apply({"params": params}, obs)
    assert dist.logits.shape == (5, 7, env.action_dim) and value.shape == (5, 7)
    # The same network on one image at a time: the torso keeps leading axes apart.
    one = net.apply({"params": params}, obs[2, 3])[1]
    np.testing.assert_allclose(one, value[2, 3], rtol=1e-5, atol=1e-6)


def test_nature_cnn_torso_and_one_line_for_the_wrong_observations():
    from jaxppo import ConfigError
    from jaxppo.networks import check_torso

    big = PPOConfig(env_id="Breakout-MinAtar", torso="nature_cnn", hidden_sizes=(32,))
    check_torso(big, (84, 84, 4))  # fits
    for cfg, shape, match in [(big, (10, 10, 4), "does not fit 10x10"),
                              (dataclasses.replace(big, torso="cnn"), (4,), "needs image")]:
        with pytest.raises(ConfigError, match=match) as e:
            check_torso(cfg, shape)
        assert "\n" not in str(e.value)
    with pytest.raises(ConfigError, match="torso"):
        PPOConfig(torso="resnet")


def test_cnn_torso_trains_through_make_train():
    cfg = PPOConfig(env_id="Breakout-MinAtar", torso="cnn", hidden_sizes=(16,), num_envs=4,
                    num_steps=8, num_minibatches=2, update_epochs=1, total_timesteps=64)
    from jaxppo import make_train

    out = jax.jit(make_train(cfg))(jax.random.key(0))
    assert out.metrics["policy_loss"].shape == (2,)
    assert np.isfinite(out.metrics["value_loss"]).all()


@pytest.mark.parametrize("change", [{}, {"network": "gru"}])
def test_vmapped_init_is_each_seeds_own_init(change):
    """Seeds vmapped together start from exactly the params each gets alone, and flax's
    orthogonal init for one seed is unchanged (jaxppo only reorders a vmapped draw's QRs)."""
    cfg = PPOConfig(env_id="CartPole-v1", hidden_sizes=(16, 8), **change)
    env = VecEnv("CartPole-v1", 2)
    net = make_network(cfg, env)
    keys = jax.random.split(jax.random.key(3), 3)
    together = jax.jit(jax.vmap(lambda k: init_params(net, k, env.obs_shape)))(keys)
    for i, key in enumerate(keys):
        alone = init_params(net, key, env.obs_shape)
        assert jax.tree.all(jax.tree.map(lambda a, b, i=i: bool((a[i] == b).all()), together,
                                         alone))
    key = jax.random.key(4)
    assert bool((orthogonal(2.0)(key, (5, 7)) == nn.initializers.orthogonal(2.0)(key, (5, 7))).all())
