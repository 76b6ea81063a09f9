"""The minibatch shuffle: one random permutation of the batch per epoch, for every epoch of an
update in one call.

Its own file because making it fast took a sort-key trick and a sorting network (~80 lines
the update itself need not read): on XLA:CPU the shuffle's argsort was 11% of a CartPole
update, and under a vmap over many seeds XLA sorts row by row (BENCHMARKS.md).

Axis legend: E = update_epochs, B = rows shuffled (batch_size, or num_envs for a recurrent
policy's whole env sequences).
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
from jax.custom_batching import custom_vmap

from jaxppo.config import PPOConfig

SORT_KEY_INDEX_BITS = 16
"""Batches of up to 2^16 rows are shuffled by a one-operand sort (`epoch_permutations`)."""


def epoch_permutations(key: jax.Array, config: PPOConfig, size: int | None = None) -> jax.Array:
    """One explicit permutation of the batch per epoch, `[update_epochs, B]`, in one call
    (of the `size = N` env sequences for a recurrent policy).

    Each row's sort key is 32 random bits with the row's index written into the low bits, so
    sorting plain uint32 keys, every key distinct, gives the permutation: XLA:CPU sorts one
    operand 2.4x faster than it argsorts (two operands through a comparator), which took 11% of
    a CartPole update (`sort_rows` picks a sorting network for many vmapped agents).
    Rows whose remaining random bits tie (for 512 rows, one pair in 64 permutations) keep index
    order among themselves; they sit side by side, so which minibatch a row lands in stays
    uniform but for a tie split by a minibatch boundary. Above 2^16 rows (fewer than 16 random
    bits left) the random bits are argsorted instead."""
    size = config.batch_size if size is None else size
    return permutations_from_bits(jax.random.bits(key, (config.update_epochs, size), jnp.uint32))


def permutations_from_bits(bits: jax.Array) -> jax.Array:
    """`epoch_permutations` from its random uint32 `bits` [E, B] (the training program draws
    all of an update's randomness in one call)."""
    size = bits.shape[-1]
    index_bits = max(1, (size - 1).bit_length())
    if index_bits > SORT_KEY_INDEX_BITS:
        perms = jnp.argsort(bits, axis=-1, stable=True).astype(jnp.int32)
    else:
        low = jnp.uint32((1 << index_bits) - 1)
        rows = jax.lax.broadcasted_iota(jnp.uint32, bits.shape, 1)
        perms = (sort_rows((bits & ~low) | rows) & low).astype(jnp.int32)
    chex.assert_shape(perms, bits.shape)
    return perms


BITONIC_MAX_ROWS = 4096
"""Up to this many rows (78 compare-exchange stages), vmapped agents sort by `bitonic_sort`."""
BITONIC_MIN_AGENTS = 8
"""...and from this many agents on: below it the network's compile time (~1 s for 512 rows)
outweighs what it saves."""


@custom_vmap
def sort_rows(keys: jax.Array) -> jax.Array:
    """`keys` [E, B] (uint32) sorted along B: XLA's sort for one agent, and under a vmap of
    `BITONIC_MIN_AGENTS` or more (B up to `BITONIC_MAX_ROWS`) a sorting network over every
    agent's rows at once: XLA:CPU sorts row by row, and at 32 CartPole seeds the network made
    the run 4-6% faster (BENCHMARKS.md), for ~1 s more compile; on the CPU only."""
    return jax.lax.sort(keys, dimension=keys.ndim - 1)


@sort_rows.def_vmap
def _sort_rows_vmapped(axis_size: int, in_batched, keys: jax.Array):
    """Every agent's rows at once: the network on the CPU for many agents (on a GPU the sort
    is one kernel and the network ~45 launches, so it keeps the sort); the rule sees one vmap
    level at a time."""
    sort = lambda k: jax.lax.sort(k, dimension=k.ndim - 1)  # noqa: E731
    if not in_batched[0]:  # the same keys for every agent: sort them once
        return sort(keys), False
    if axis_size >= BITONIC_MIN_AGENTS and keys.shape[-1] <= BITONIC_MAX_ROWS:
        return jax.lax.platform_dependent(keys, cpu=bitonic_sort, default=sort), True
    return sort(keys), True


def bitonic_sort(keys: jax.Array) -> jax.Array:
    """`keys` [..., n] (uint32) sorted along the last axis by a bitonic network: log2(n) *
    (log2(n) + 1) / 2 elementwise compare-exchange stages, each one fused kernel over every
    row at once, where XLA:CPU's sort runs one comparator-driven sort per row (under a vmap over
    32 seeds, 128 of them per update: the network is 2.3x faster there). A length that is not a
    power of two is padded with the largest key, which no real key equals (its low bits hold
    a row index below the mask), and cut back."""
    n = keys.shape[-1]
    width = 1 << max(0, (n - 1).bit_length())
    lead = keys.shape[:-1]
    x = jnp.pad(keys, [(0, 0)] * len(lead) + [(0, width - n)],
                constant_values=jnp.uint32(0xFFFFFFFF))
    k = 2
    while k <= width:
        j = k // 2
        while j >= 1:
            pairs = x.reshape(*lead, width // (2 * j), 2, j)
            a, b = pairs[..., 0, :], pairs[..., 1, :]
            lo, hi = jnp.minimum(a, b), jnp.maximum(a, b)
            block = jax.lax.broadcasted_iota(jnp.int32, (width // (2 * j), 1), 0)
            ascending = ((block * 2 * j) & k) == 0  # this block's direction in the merge
            x = jnp.stack([jnp.where(ascending, lo, hi), jnp.where(ascending, hi, lo)],
                          axis=-2).reshape(*lead, width)
            j //= 2
        k *= 2
    return x[..., :n]
