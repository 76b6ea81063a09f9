"""PRNG keys at jaxppo's edges: a caller's key in either of JAX's forms becomes the typed key
the compiled program carries, and typed keys become their raw uint32 words where checkpoints,
the memory estimate and cross-process placement need data."""

from __future__ import annotations

import jax
import numpy as np


def is_key(x) -> bool:
    """A typed PRNG key array (or its abstract shape)."""
    return hasattr(x, "dtype") and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def key_words() -> int:
    """uint32 words of one legacy key of JAX's default PRNG implementation (threefry: 2)."""
    return jax.eval_shape(lambda: jax.random.key_data(jax.random.key(0))).shape[-1]


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
    if is_key(key):
        if tuple(key.shape) == batch:
            return key
        got = f"{key.dtype}{list(key.shape)}"
    else:
        dtype, shape = getattr(key, "dtype", None), tuple(getattr(key, "shape", ()))
        words = key_words()
        if dtype == np.uint32 and shape == (*batch, words):
            return jax.random.wrap_key_data(key)
        got = (f"{dtype}{list(shape)}" if dtype is not None else
               f"{type(key).__name__} {key!r}"[:60])
    one = "one key" if not batch else f"keys of shape {list(batch)}"
    hint = (" (several keys: jax.vmap over them)" if not batch and got.endswith("]") and
            "[]" not in got else "")
    raise TypeError(f"{where}: expected {one}, jax.random.key(seed) or jax.random.PRNGKey(seed) "
                    f"(split for several), got {got}{hint}")


def keys_as_data(tree):
    """Typed PRNG keys become their raw uint32 data (still on device, still sharded)."""
    return jax.tree.map(lambda x: jax.random.key_data(x) if is_key(x) else x, tree)


def to_host(tree):
    """Typed PRNG keys become their raw uint32 data; everything becomes NumPy."""
    return jax.tree.map(np.asarray, keys_as_data(tree))
