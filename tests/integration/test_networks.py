"""Network output shapes and valid distributions."""

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxppo import PPOConfig
from jaxppo.core.distributions import Categorical, DiagGaussian
from jaxppo.core.networks import init_params, make_network
from jaxppo.core.torsos import Conv, check_torso, orthogonal
from jaxppo.envs import Box, VecEnv
from jaxppo.envs.probes import ProbeState, _Probe


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


def test_a_shared_torso_is_one_conv_stack_that_both_losses_train():
    """`shared_torso`: one conv stack (`body`) that actor and critic read, each head with its
    own hidden layers; the value loss and the policy loss both reach the torso, neither reaches
    the other head. With `hidden_sizes: []` the heads read the torso's features directly
    (CleanRL's Atari net); it trains through `make_train`."""
    from jaxppo import ConfigError, make_train

    cfg = PPOConfig(env_id="Breakout-MinAtar", torso="cnn", hidden_sizes=(16,),
                    shared_torso=True)
    env = VecEnv("Breakout-MinAtar", 3)
    net = make_network(cfg, env)
    params = init_params(net, jax.random.key(0), env.obs_shape)
    p = params["params"]
    assert set(p) == {"body", "actor", "critic"}
    assert p["body"]["Conv_0"]["kernel"].shape == (3, 3, 4, 16) and set(p["body"]) == {"Conv_0"}
    for head, out in (("actor", env.action_dim), ("critic", 1)):
        assert p[head]["Dense_0"]["kernel"].shape == (8 * 8 * 16, 16)
        assert p[head]["Dense_1"]["kernel"].shape == (16, out) and "Conv_0" not in p[head]
    obs = jax.random.bernoulli(jax.random.key(1), 0.2, (5, 10, 10, 4))
    dist, value = net.apply(params, obs)
    np.testing.assert_allclose(net.apply(params, obs, method=net.value), value, rtol=1e-6)
    np.testing.assert_allclose(net.apply(params, obs, method=net.policy).logits, dist.logits,
                               rtol=1e-6)
    # the rollout's step: the torso once over obs and the final obs, the same policy and values
    last = jax.random.bernoulli(jax.random.key(2), 0.2, (5, 10, 10, 4))
    d2, both = net.apply(params, obs, last, method=net.act_and_values)
    np.testing.assert_allclose(d2.logits, dist.logits, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(both, net.apply(params, jnp.concatenate([obs, last]),
                                               method=net.value), rtol=1e-5, atol=1e-6)
    g_v = jax.grad(lambda q: net.apply(q, obs, method=net.value).sum())(params)["params"]
    g_pi = jax.grad(lambda q: net.apply(q, obs, method=net.policy).logits[:, 0].sum())(
        params)["params"]
    norm = lambda t: float(sum(jnp.abs(x).sum() for x in jax.tree.leaves(t)))  # noqa: E731
    assert norm(g_v["body"]) > 0 and norm(g_pi["body"]) > 0
    assert norm(g_v["actor"]) == 0 and norm(g_pi["critic"]) == 0

    heads_only = dataclasses.replace(cfg, hidden_sizes=(), num_envs=4, num_steps=8,
                                     num_minibatches=2, update_epochs=1, total_timesteps=64)
    out = jax.jit(make_train(heads_only))(jax.random.key(0))
    assert np.isfinite(out.metrics["value_loss"]).all()
    assert out.runner_state.train_state.params["params"]["actor"]["Dense_0"]["kernel"].shape == (
        8 * 8 * 16, env.action_dim)
    # the memory estimate counts the network as built: 3x3x4x16 conv + 16; heads on 8x8x16
    from jaxppo.labels import value_text
    from jaxppo.run.memory import param_count

    assert param_count(make_network(heads_only, env), env.obs_shape) == (
        (3 * 3 * 4 * 16 + 16) + (1024 * env.action_dim + env.action_dim) + (1024 + 1))
    assert value_text(heads_only.hidden_sizes) == "[]"  # a sweep's label and run folder
    for bad, key in [({"torso": "mlp"}, "shared_torso"), ({"network": "gru"}, "shared_torso"),
                     ({"torso": "mlp", "hidden_sizes": ()}, "shared_torso"),
                     ({"shared_torso": False, "torso": "mlp", "hidden_sizes": ()},
                      "hidden_sizes")]:
        with pytest.raises(ConfigError, match=f"config key '{key}'") as e:
            dataclasses.replace(cfg, **bad)
        assert "\n" not in str(e.value)


class _Pixels(_Probe):
    """36x36x2 uint8 frames (the smallest the Nature CNN takes), as EnvPool's Atari gives
    84x84x4 ones: the network must see them in [0, 1]."""

    num_actions_ = 4

    def reset_env(self, key, params):
        s = ProbeState(obs=jnp.float32(0.0), time=0)
        return self.get_obs(s, key=key), s

    def step_env(self, key, state, action, params):
        return self._out(state.replace(time=state.time + 1), 0.0, True)

    def get_obs(self, state, params=None, key=None):
        return jnp.full((36, 36, 2), 200, jnp.uint8)

    def observation_space(self, params):
        return Box(0, 255, (36, 36, 2), jnp.uint8)


class _Ids(_Pixels):
    def get_obs(self, state, params=None, key=None):
        return jnp.zeros((7, 7, 2), jnp.uint8)

    def observation_space(self, params):
        return Box(0, 255, (7, 7, 2), jnp.uint8)


def test_nature_cnn_reads_uint8_as_pixels_in_0_1_and_other_inputs_as_they_are():
    """DQN/CleanRL divide 0-255 pixels by 255; jaxppo does it in the Nature CNN torso, so the
    rollout keeps uint8 frames (4x less memory). Bool grids (MinAtar), float inputs and uint8
    under other torsos (xminigrid's and navix's tile ids) are unchanged."""
    cfg = PPOConfig(env_id="custom/pixels", torso="nature_cnn", hidden_sizes=(8,))
    env = VecEnv.from_config(cfg, 1, _Pixels())
    assert env.obs_dtype == jnp.uint8
    net = make_network(cfg, env)
    params = init_params(net, jax.random.key(0), env.obs_shape)
    frames = jax.random.randint(jax.random.key(1), (3, 36, 36, 2), 0, 256).astype(jnp.uint8)
    dist, value = net.apply(params, frames)
    scaled_dist, scaled_value = net.apply(params, frames.astype(jnp.float32) / 255.0)
    np.testing.assert_allclose(value, scaled_value, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dist.logits, scaled_dist.logits, rtol=1e-5, atol=1e-6)
    grids = jax.random.bernoulli(jax.random.key(2), 0.3, (3, 36, 36, 2))
    np.testing.assert_allclose(net.apply(params, grids)[1],
                               net.apply(params, grids.astype(jnp.float32))[1], rtol=1e-6)
    floats = frames.astype(jnp.float32)  # a float image is taken as it is, not rescaled
    assert not np.allclose(net.apply(params, floats)[1], value, atol=1e-3)
    ids = jax.random.randint(jax.random.key(3), (3, 7, 7, 2), 0, 14).astype(jnp.uint8)
    for torso in ("mlp", "cnn"):
        grid_net = make_network(dataclasses.replace(cfg, torso=torso),
                                VecEnv.from_config(cfg, 1, _Ids()))
        grid_params = init_params(grid_net, jax.random.key(0), (7, 7, 2))
        np.testing.assert_allclose(grid_net.apply(grid_params, ids)[1],
                                   grid_net.apply(grid_params, ids.astype(jnp.float32))[1],
                                   rtol=1e-6)


def test_policy_act_on_uint8_frames_acts_as_in_training():
    from jaxppo import make_train
    from jaxppo.policy.policy import Policy

    cfg = PPOConfig(env_id="custom/pixels", torso="nature_cnn", hidden_sizes=(8,), num_envs=2,
                    num_steps=4, num_minibatches=1, total_timesteps=8)
    train = make_train(cfg, env=_Pixels())
    ts = train.init(jax.random.key(0)).train_state
    policy = Policy(cfg, ts, 0, 0, env=_Pixels())
    net = make_network(cfg, train.env)
    frames = jax.random.randint(jax.random.key(1), (64, 36, 36, 2), 0, 256).astype(jnp.uint8)
    np.testing.assert_array_equal(policy.act(frames),
                                  net.apply(ts.params, frames, method="policy").mode())


@pytest.mark.parametrize("shape,features,kernel,stride", [
    ((84, 84, 4), 32, 8, 4), ((20, 20, 32), 64, 4, 2), ((9, 9, 64), 64, 3, 1),
    ((10, 10, 4), 16, 3, 1), ((85, 87, 3), 8, 8, 4), ((11, 13, 2), 5, 4, 2)])
def test_conv_as_matmul_is_flax_conv(shape, features, kernel, stride):
    """jaxppo's conv layer (a matmul over space-to-depth patches on the CPU) has flax nn.Conv's
    parameters, drawn alike, and computes its function: same shapes, values to float rounding,
    including inputs the stride does not divide (the unread edge is cropped)."""
    x = jax.random.normal(jax.random.key(1), (3, *shape))
    ref = nn.Conv(features, (kernel, kernel), (stride, stride), padding="VALID")
    params = ref.init(jax.random.key(0), x)
    mine = Conv(features, kernel, stride)
    assert jax.tree.all(jax.tree.map(lambda a, b: bool(jnp.array_equal(a, b)), params,
                                     mine.init(jax.random.key(0), x)))
    want, got = ref.apply(params, x), mine.apply(params, x)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)

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
