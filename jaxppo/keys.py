"""PRNG keys at jaxppo's edges: a caller's key in either of JAX's forms becomes the typed key
the compiled program carries, and typed keys become their raw uint32 words where checkpoints,
the memory estimate and cross-process placement need data."""

from __future__ import annotations

import functools

import jax
import numpy as np


def is_key(x) -> bool:
    """A typed PRNG key array (or its abstract shape)."""
    return hasattr(x, "dtype") and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def key_words() -> int:
    """uint32 words of one legacy key of JAX's default PRNG implementation (threefry: 2)."""
    return _words(str(jax.config.jax_default_prng_impl))


@functools.cache
def _words(impl: str) -> int:  # traced once per implementation: Policy.act calls it per step
    return jax.eval_shape(lambda: jax.random.key_data(jax.random.key(0, impl=impl))).shape[-1]


def as_key(key, where: str = "train(key)", batch: tuple[int, ...] = ()) -> jax.Array:
    """`key` as a typed key array of shape `batch`: a typed key (`jax.random.key`) is returned
    as it is, a legacy one (`jax.random.PRNGKey`: uint32 words, PureJaxRL's and gymnax's form)
    is wrapped. The same seed gives the same typed key either way, so the same run.

    Why: the update scan carries a typed key; a legacy key in the carry's input would differ in
    type from the typed key the body returns.

    Args:
      key: the caller's key (or keys, `batch` leading).
      where: the call, named in the error.
      batch: the shape of keys expected (`()`: one key).

    Returns:
      The typed key array.

    Raises:
      TypeError: `key` is neither form, or not of shape `batch`; one line naming the fix.
    """
    words = key_words()
    if is_key(key):
        if tuple(key.shape) == batch:
            return key
        got, several = f"{key.dtype}{list(key.shape)}", len(key.shape) > len(batch)
    else:
        dtype, shape = getattr(key, "dtype", None), tuple(getattr(key, "shape", ()))
        if dtype == np.uint32 and shape == (*batch, words):
            return jax.random.wrap_key_data(key)
        got = (f"{dtype}{list(shape)}" if dtype is not None else
               f"{type(key).__name__} {key!r}"[:60])
        several = dtype == np.uint32 and len(shape) > len(batch) + 1 and shape[-1] == words
    one = "one key" if not batch else f"keys of shape {list(batch)}"
    hint = " (several keys: jax.vmap over them)" if several and not batch else ""
    raise TypeError(f"{where}: expected {one}, jax.random.key(seed) or jax.random.PRNGKey(seed) "
                    f"(split for several), got {got}{hint}")


def run_keys(keys, where: str) -> jax.Array:
    """`keys` as typed keys `[R]`, one per run, from either form (`jax.random.split(key, R)` of
    a typed or a legacy key); a single key is a one-line `TypeError` asking for the split."""
    shape = tuple(getattr(keys, "shape", ()))
    batch = shape[:1] if is_key(keys) else shape[:-1]
    if len(batch) != 1:
        raise TypeError(f"{where}: expected one key per run, jax.random.split(key, R) of a "
                        "jax.random.key or jax.random.PRNGKey, got "
                        f"{getattr(keys, 'dtype', type(keys).__name__)}{list(shape)}")
    return as_key(keys, where, batch)


def keys_as_data(tree):
    """Typed PRNG keys become their raw uint32 data (still on device, still sharded)."""
    return jax.tree.map(lambda x: jax.random.key_data(x) if is_key(x) else x, tree)


def to_host(tree):
    """Typed PRNG keys become their raw uint32 data; everything becomes NumPy."""
    return jax.tree.map(np.asarray, keys_as_data(tree))
