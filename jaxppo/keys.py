"""Typed PRNG keys as data: checkpoints, the memory estimate and cross-process placement all
need to see a key array as its raw uint32 words."""

from __future__ import annotations

import jax
import numpy as np


def is_key(x) -> bool:
    """A typed PRNG key array (or its abstract shape)."""
    return hasattr(x, "dtype") and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def keys_as_data(tree):
    """Typed PRNG keys become their raw uint32 data (still on device, still sharded)."""
    return jax.tree.map(lambda x: jax.random.key_data(x) if is_key(x) else x, tree)


def to_host(tree):
    """Typed PRNG keys become their raw uint32 data; everything becomes NumPy."""
    return jax.tree.map(np.asarray, keys_as_data(tree))
