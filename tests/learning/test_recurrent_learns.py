"""Recurrent PPO learns: memory solves what a feedforward policy cannot (the memory probe, GRU
and LSTM). The rest of recurrent PPO: tests/integration/test_recurrent.py."""

import dataclasses

import jax
import numpy as np
import pytest
from conftest import USER_LEVEL

from jaxppo import PPOConfig, make_train

MEMORY = PPOConfig(env_id="probe/Memory-v0", network="gru", rnn_size=32, hidden_sizes=(32,),
                   num_envs=8, num_steps=20, num_minibatches=4, lr=1e-3,
                   total_timesteps=40_000)


def _returns(config, seeds=4):
    keys = jax.random.split(jax.random.key(0), seeds)
    out = jax.jit(jax.vmap(make_train(config))).lower(keys).compile(  # as a user's run compiles
        compiler_options=USER_LEVEL)(keys)
    ret = np.asarray(out.metrics["episodic_return"])
    return ret[:, -ret.shape[1] // 5:].mean()  # the last 20% of updates, over seeds


@pytest.mark.slow
def test_memory_probe_needs_memory():
    """The cue is gone when the query comes: +1 per episode needs memory, a feedforward policy
    earns 0 on average (+1 or -1 by chance). GRU and LSTM solve it, the MLP stays at chance."""
    assert _returns(MEMORY) > 0.9
    assert _returns(dataclasses.replace(MEMORY, network="lstm")) > 0.9
    assert abs(_returns(dataclasses.replace(MEMORY, network="feedforward"))) < 0.3
