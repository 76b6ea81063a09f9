"""Running statistics for observation normalization and reward scaling, inside the jit.

The statistics are part of the train state (and of checkpoints), so evaluation and resumed
runs see exactly the normalization the policy was trained with.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxppo.core.collectives import axis_size, mean_var


class RunningMeanStd(NamedTuple):
    mean: jax.Array
    var: jax.Array
    count: jax.Array


def rms_init(shape: tuple[int, ...]) -> RunningMeanStd:
    # count starts at a tiny epsilon, as gym's RunningMeanStd, so the first update dominates.
    return RunningMeanStd(jnp.zeros(shape, jnp.float32), jnp.ones(shape, jnp.float32),
                          jnp.float32(1e-4))


def rms_update(rms: RunningMeanStd, batch: jax.Array, axis_name: str | None = None
               ) -> RunningMeanStd:
    """Merge a batch `[N, *shape]` into the statistics (Chan et al.'s parallel update).

    With `axis_name`, the batch is this device's share of one agent's envs: the statistics
    are merged over all devices, so every device keeps the same normalizer."""
    b_mean, b_var = mean_var(batch, axis_name, axis=0)
    b_count = jnp.float32(batch.shape[0] * axis_size(axis_name))
    delta = b_mean - rms.mean
    total = rms.count + b_count
    mean = rms.mean + delta * b_count / total
    m2 = rms.var * rms.count + b_var * b_count + delta**2 * rms.count * b_count / total
    return RunningMeanStd(mean, m2 / total, total)


def rms_normalize(rms: RunningMeanStd, x: jax.Array, clip: float = 10.0) -> jax.Array:
    return jnp.clip((x - rms.mean) / jnp.sqrt(rms.var + 1e-8), -clip, clip)


class NormalizerState(NamedTuple):
    """Observation statistics, and the statistics of the discounted return for reward scaling."""

    obs: RunningMeanStd
    ret: RunningMeanStd


def normalizer_init(obs_shape: tuple[int, ...]) -> NormalizerState:
    return NormalizerState(rms_init(obs_shape), rms_init(()))
