"""The PPO objective (Schulman et al. 2017): clipped surrogate, (clipped) value loss, entropy.

Each piece is a small pure function so it can be checked against hand-computed numbers.
Axis legend: B = minibatch size.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxppo.core.collectives import mean_var
from jaxppo.core.networks import unroll


class Minibatch(NamedTuple):
    """Rollout data for one minibatch; `logp_old` and `values_old` were stored at rollout time."""

    obs: jax.Array  # [B, *obs_shape]
    actions: jax.Array  # [B] or [B, D]
    logp_old: jax.Array  # [B]
    values_old: jax.Array  # [B]
    advantages: jax.Array  # [B]
    returns: jax.Array  # [B]
    mask: jax.Array | None = None  # [B, A] legal actions (masked envs only)
    # Recurrent policies: the minibatch is n whole env sequences, every field above [n, T, ...]
    start: jax.Array | None = None  # [n, T] bool: the step begins an episode
    carry0: Any = None  # [n, H] the cell's carry before the sequence's first step


class LossInfo(NamedTuple):
    total_loss: jax.Array
    policy_loss: jax.Array
    value_loss: jax.Array
    entropy: jax.Array
    approx_kl: jax.Array
    old_approx_kl: jax.Array
    clipfrac: jax.Array


def clipped_policy_loss(
    logp: jax.Array, logp_old: jax.Array, advantages: jax.Array, clip_eps: float | jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """`-E[min(ratio * A, clip(ratio, 1-eps, 1+eps) * A)]`, plus two KL estimates and the clip
    fraction: `(loss, approx_kl, old_approx_kl, clipfrac)`.

    approx KL is the low-variance estimator `E[(ratio - 1) - log ratio]` (Schulman's k3);
    old_approx_kl is the naive `E[-log ratio]` (k1), which can go negative. CleanRL logs both.
    clipfrac is the share of samples where `|ratio - 1| > eps`.
    """
    log_ratio = logp - logp_old
    ratio = jnp.exp(log_ratio)
    unclipped = ratio * advantages
    clipped = jnp.clip(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * advantages
    loss = -jnp.mean(jnp.minimum(unclipped, clipped))
    approx_kl = jnp.mean((ratio - 1.0) - log_ratio)
    old_approx_kl = jnp.mean(-log_ratio)
    clipfrac = jnp.mean((jnp.abs(ratio - 1.0) > clip_eps).astype(jnp.float32))
    return loss, *jax.lax.stop_gradient((approx_kl, old_approx_kl, clipfrac))


def value_loss(
    values: jax.Array,
    values_old: jax.Array,
    returns: jax.Array,
    clip_eps: float | jax.Array,
    clip_vloss: bool,
) -> jax.Array:
    """`0.5 * E[(V - R)^2]`; with `clip_vloss`, the max with the loss of V clipped around V_old."""
    unclipped = (values - returns) ** 2
    if not clip_vloss:
        return 0.5 * jnp.mean(unclipped)
    v_clipped = values_old + jnp.clip(values - values_old, -clip_eps, clip_eps)
    return 0.5 * jnp.mean(jnp.maximum(unclipped, (v_clipped - returns) ** 2))


def normalize_advantages(advantages: jax.Array, axis_name: str | None = None) -> jax.Array:
    """Zero mean, unit std over the minibatch (over every device's share of it, if sharded)."""
    mean, var = mean_var(advantages, axis_name)
    return (advantages - mean) / (jnp.sqrt(var) + 1e-8)


def ppo_loss(params, network, batch: Minibatch, hp, *, clip_vloss: bool, norm_adv: bool,
             axis_name: str | None = None):
    """Total loss `policy + vf_coef * value - ent_coef * entropy` for one minibatch.

    Sharded over devices (`axis_name`), this is the loss of this device's share of the
    minibatch; advantages are normalized over the whole minibatch, and the caller averages
    the gradients, which equals the gradient of the whole minibatch's loss."""
    if batch.carry0 is not None:  # replay the cell over each env's T steps
        dist, values, _ = unroll(network, params, batch.obs, batch.start, batch.carry0,
                                 batch.mask)
    else:
        dist, values = network.apply(params, batch.obs, batch.mask)
    logp = dist.log_prob(batch.actions)
    advantages = (normalize_advantages(batch.advantages, axis_name) if norm_adv
                  else batch.advantages)
    pg_loss, approx_kl, old_approx_kl, clipfrac = clipped_policy_loss(
        logp, batch.logp_old, advantages, hp.clip_eps)
    v_loss = value_loss(values, batch.values_old, batch.returns, hp.clip_eps, clip_vloss)
    entropy = jnp.mean(dist.entropy())
    total = pg_loss + hp.vf_coef * v_loss - hp.ent_coef * entropy
    return total, LossInfo(total, pg_loss, v_loss, entropy, approx_kl, old_approx_kl, clipfrac)
