"""Cross-device reductions for one agent whose environments are split over devices
(`make_sharded_train(..., shard="envs")`). With `axis_name=None` (one device, or seeds split
over devices) each is the plain local reduction, so the unsharded program is unchanged.

Every device holds the same number of samples, so a mean of per-device means is the global
mean, and a variance is the mean of per-device second moments around the global mean.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def pmean(x, axis_name: str | None):
    """Average a pytree over devices (identity when unsharded)."""
    return x if axis_name is None else jax.lax.pmean(x, axis_name)


def psum(x, axis_name: str | None):
    return x if axis_name is None else jax.lax.psum(x, axis_name)


def axis_size(axis_name: str | None) -> int:
    return 1 if axis_name is None else jax.lax.psum(1, axis_name)


def fold_device(key: jax.Array, axis_name: str | None) -> jax.Array:
    """A key of this device's own (its environments must not share randomness)."""
    return key if axis_name is None else jax.random.fold_in(key, jax.lax.axis_index(axis_name))


def mean_var(x: jax.Array, axis_name: str | None, axis=None) -> tuple[jax.Array, jax.Array]:
    """Mean and (population) variance over `axis` of the samples of all devices."""
    mean = pmean(jnp.mean(x, axis=axis), axis_name)
    centred = x - (mean if axis is None else jnp.expand_dims(mean, axis))
    return mean, pmean(jnp.mean(centred**2, axis=axis), axis_name)
