"""Probe environments: the critic must learn known values, the actor the known best action."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxppo import PPOConfig, make_train

GAMMA = 0.9


def trained(env_id, updates=60, **kw):
    cfg = PPOConfig(env_id=env_id, total_timesteps=8 * 16 * updates, num_envs=8, num_steps=16,
                    num_minibatches=2, update_epochs=4, lr=3e-3, anneal_lr=False, gamma=GAMMA,
                    gae_lambda=0.95, clip_vloss=False, ent_coef=0.0, hidden_sizes=(32, 32), **kw)
    train = make_train(cfg)
    out = jax.jit(train)(jax.random.key(0))
    return train.network, out.train_state.params


def values(net, params, obs):
    return np.asarray(net.apply(params, jnp.array(obs, jnp.float32)[:, None], method="value"))


def test_constant_value():
    net, params = trained("probe/Constant-v0")
    np.testing.assert_allclose(values(net, params, [0.0]), [1.0], atol=0.05)


def test_value_depends_on_observation():
    net, params = trained("probe/ObsReward-v0")
    np.testing.assert_allclose(values(net, params, [1.0, -1.0]), [1.0, -1.0], atol=0.1)


def test_discounting():
    net, params = trained("probe/TwoStep-v0")
    np.testing.assert_allclose(values(net, params, [0.0, 1.0]), [GAMMA, 1.0], atol=0.07)


def test_truncation_bootstraps_from_the_final_observation():
    # Reward 1 forever, cut every 5 steps by a time limit: with the correct bootstrap
    # V = 1 / (1 - gamma) = 10. Treating truncation as death would give at most 4.1.
    net, params = trained("probe/Truncation-v0", updates=150)
    np.testing.assert_allclose(values(net, params, [0.0]), [1.0 / (1.0 - GAMMA)], rtol=0.1)


def test_policy_learns_the_better_action():
    net, params = trained("probe/Action-v0", updates=30)
    dist = net.apply(params, jnp.zeros((1, 1)), method="policy")
    assert float(jax.nn.softmax(dist.logits)[0, 1]) > 0.95


@pytest.mark.parametrize("env_id", ["probe/Constant-v0"])
def test_probe_value_is_not_learned_without_updates(env_id):
    # Guard against a vacuous pass: an untrained critic is far from the target.
    net, params = trained(env_id, updates=1)
    assert abs(values(net, params, [0.0])[0] - 1.0) > 0.2
