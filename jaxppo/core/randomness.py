"""Where a run's randomness comes from: its seed key split into the initial state's keys, and
each update's randomness (the next key, the rollout's action noise and env keys, the epochs'
shuffles) from one draw of random bits."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxppo.config import PPOConfig
from jaxppo.core.collectives import fold_device
from jaxppo.core.rollout import RolloutRandomness, rollout_randomness, rollout_words
from jaxppo.envs import VecEnv


def init_keys(key: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """`(network, env, run)` keys of a run's initial state, from its seed key."""
    net_key, env_key, run_key = jax.random.split(key, 3)
    return net_key, env_key, run_key


def update_randomness(key: jax.Array, env: VecEnv, config: PPOConfig, perm_size: int,
                      axis_name: str | None = None
                      ) -> tuple[jax.Array, RolloutRandomness, jax.Array]:
    """`(next key, the rollout's randomness, the epochs' shuffle bits [E, perm_size])`, from one
    draw of random bits: threefry was 7 loops per update on the CPU (the key split, the
    rollout's split, its noise, env keys and reset states, the shuffle), ~7% of CartPole's
    kernels. The next key is the first words of the draw (random bits are what a split makes).
    Sharded, the learner's next key must agree across devices and the rest must not: there
    the key is split, and the rest drawn from this device's fold of it."""
    words = jax.random.key_data(key).shape[-1]
    impl = jax.random.key_impl(key)
    n_rollout = rollout_words(env, config.num_steps, words)
    n_rest = n_rollout + config.update_epochs * perm_size
    if axis_name is None:
        bits = jax.random.bits(key, (words + n_rest,), jnp.uint32)
        next_key, bits = jax.random.wrap_key_data(bits[:words], impl=impl), bits[words:]
    else:
        next_key, sub = jax.random.split(key)
        bits = jax.random.bits(fold_device(sub, axis_name), (n_rest,), jnp.uint32)
    rand = rollout_randomness(bits[:n_rollout], env, config.num_steps, impl, words)
    return next_key, rand, bits[n_rollout:].reshape(config.update_epochs, perm_size)
