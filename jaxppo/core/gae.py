"""Generalized Advantage Estimation (Schulman et al. 2016) as a reverse `lax.scan`.

Termination and truncation are kept apart: a terminated step bootstraps from nothing (the
terminal state is worth 0), a time-limit truncation bootstraps from the value of the true next
state, and either one stops the advantage recursion from leaking into the next episode.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp

from jaxppo.core.batching import batched_like

UNROLL = 16
"""Steps of the recursion per loop iteration on a GPU. XLA fuses the unrolled steps: on an
H100, CartPole's GAE went from 513 kernels per update (3 per step and the loop's test) to 41.
At least two iterations are kept: a loop unrolled whole was fused with the code around it
differently when the update scan around it had one trip, so a run resumed in chunks of one
update no longer matched the uninterrupted run bit for bit."""
CPU_UNROLL = 8
"""...and on the CPU: XLA:CPU emits 16 unrolled steps as 15 independent fusions, each
recomputing its prefix, more than its runtime runs on one thread (it hands half of them to
the pool's other thread: 34 hand-offs per CartPole update). Chosen per platform in one program
(`lax.platform_dependent`): a deviceless GPU compile on a CPU host sees the GPU's form."""


def compute_gae(
    rewards: jax.Array,
    values: jax.Array,
    next_values: jax.Array,
    terminated: jax.Array,
    dones: jax.Array,
    gamma: float | jax.Array,
    gae_lambda: float | jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """Advantages and value targets, all `[T, N]`.

    Generalized Advantage Estimation (Schulman et al. 2016) as a reverse `lax.scan`, the one
    the train loop uses. Termination and truncation are kept apart: a terminated step
    bootstraps from nothing (the terminal state is worth 0), a time-limit truncation
    bootstraps from the value of the true next state, and either one stops the advantage
    recursion from leaking into the next episode. Jit- and vmap-safe; T = steps, N = envs.

    Args:
      rewards: r_t.
      values: V(s_t) at rollout time.
      next_values: V(s'_t), the true next state: the final observation where the episode ended.
      terminated: s'_t is terminal (no bootstrap).
      dones: the episode ended at t (terminated or truncated): cuts the lambda recursion.
      gamma: the discount factor (a float, or a traced scalar under a sweep).
      gae_lambda: GAE's lambda: 0 is one-step TD, 1 is Monte Carlo.

    Returns:
      `(advantages, returns)` with
        `delta_t = r_t + gamma * (1 - terminated_t) * V(s'_t) - V(s_t)`,
        `A_t = delta_t + gamma * lambda * (1 - done_t) * A_{t+1}`, `returns = A + V`.
    """
    chex.assert_rank(rewards, 2)
    chex.assert_equal_shape([rewards, values, next_values, terminated, dones])
    not_term = 1.0 - terminated.astype(jnp.float32)
    not_done = 1.0 - dones.astype(jnp.float32)
    deltas = rewards + gamma * not_term * next_values - values

    def backward(next_adv, xs):
        delta, cont = xs
        adv = delta + gamma * gae_lambda * cont * next_adv
        return adv, adv

    def recursion(unroll: int):
        return lambda deltas, not_done: jax.lax.scan(
            backward, batched_like(jnp.zeros_like(deltas[0]), deltas), (deltas, not_done),
            reverse=True,
            unroll=min(unroll, max(1, rewards.shape[0] // 2)))[1]

    advantages = jax.lax.platform_dependent(deltas, not_done, cpu=recursion(CPU_UNROLL),
                                            default=recursion(UNROLL))
    return advantages, advantages + values
