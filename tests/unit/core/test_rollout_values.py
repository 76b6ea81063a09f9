"""The rollout's values computed after its scan (one batched critic call) against the values
its steps compute (a call per step): the same values, within float rounding, and nothing else
changed. `values_after_scan` picks the form by the network and the observation's shape."""

import dataclasses

import jax
import numpy as np
import pytest

from jaxppo import PPOConfig, make_train
from jaxppo.core import rollout as rollout_module
from jaxppo.core.networks import make_network
from jaxppo.core.rollout import RolloutSettings, rollout, value_steps, values_after_scan
from jaxppo.envs import VecEnv

# Truncation-v0's episodes are cut by its time limit every 5 steps: V(s'_t) of the true final
# observation is what a truncated step bootstraps from, so the late form must get it right.
CONFIG = PPOConfig(env_id="probe/Truncation-v0", num_envs=4, num_steps=12,
                   total_timesteps=4 * 12 * 2, hidden_sizes=(16, 16), normalize_obs=True)


def _collect(config: PPOConfig, key, form: bool | None, monkeypatch, value_rows: int = 0):
    if form is not None:
        monkeypatch.setattr(rollout_module, "values_after_scan", lambda *_: form)
    train = make_train(config)
    runner = jax.jit(train.init)(jax.random.key(0))
    ts = runner.train_state
    settings = RolloutSettings(config.num_steps, config.normalize_obs, False,
                               value_rows=value_rows)
    return jax.jit(lambda k: rollout(k, runner.env, ts.normalizer, ts.params, env=train.env,
                                     network=train.network, gamma=config.gamma,
                                     settings=settings))(key)


@pytest.mark.parametrize(("env_id", "value_rows"), [
    ("probe/Truncation-v0", 0), ("probe/Truncation-v0", 16), ("CartPole-v1", 8)])
def test_values_after_the_scan_are_the_values_each_step_computes(env_id, value_rows,
                                                                 monkeypatch):
    """All 12 steps in one call, in calls of 4 steps (16 transitions), and of 2."""
    config = dataclasses.replace(CONFIG, env_id=env_id)
    key = jax.random.key(7)
    with monkeypatch.context() as m:
        in_step = _collect(config, key, False, m)
    after = _collect(config, key, True, monkeypatch, value_rows)
    env_a, norm_a, traj_a, next_a, stats_a = after
    env_b, norm_b, traj_b, next_b, stats_b = in_step
    assert bool(traj_a.done.any()), "no episode ended inside the rollout"
    np.testing.assert_allclose(traj_a.value, traj_b.value, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(next_a, next_b, rtol=1e-5, atol=1e-6)
    assert traj_a.value.dtype == next_a.dtype == np.float32
    # Everything else is computed as before, bit for bit.
    for name in ("obs", "action", "logp", "reward", "terminated", "done"):
        np.testing.assert_array_equal(getattr(traj_a, name), getattr(traj_b, name), name)
    jax.tree.map(np.testing.assert_array_equal, (env_a, norm_a, stats_a),
                 (env_b, norm_b, stats_b))


def test_value_calls_take_whole_steps_that_divide_the_rollout():
    assert value_steps(128, 4, 128) == 32  # CartPole's default: the minibatch's 128 rows
    assert value_steps(12, 4, 16) == 4
    assert value_steps(12, 4, 20) == 4  # 5 steps hold 20 but do not divide 12
    assert value_steps(13, 4, 8) == 1
    assert value_steps(10, 64, 32) == 1  # one step even where it holds more
    assert value_steps(13, 4, 0) == 13  # 0: all at once


def test_values_come_after_the_scan_only_for_a_separate_critic_over_vectors():
    env = VecEnv.from_config(CONFIG, 1)
    assert values_after_scan(make_network(CONFIG, env), (4,))
    assert not values_after_scan(make_network(CONFIG, env), (10, 10, 4))  # images: in the step
    shared = make_network(CONFIG, env).clone(shared_torso=True)  # a torso the step reads
    assert not values_after_scan(shared, (4,))
    gru = dataclasses.replace(CONFIG, network="gru", rnn_size=8, hidden_sizes=(8,))
    assert not values_after_scan(make_network(gru, env), (4,))
