"""A loop's carry batched from its first iteration under `jax.vmap`, so the loop's body is
batched once when it is traced.

`jax.lax.scan`'s batching rule needs to know which carry leaves are batched before it
batches the body; one that starts unbatched (zeros: Adam's moments, a sum, a bias) and comes
out batched makes it batch the whole body again, and a scan nested in that body is batched
again each time. The update scan holds the rollout scan and the epochs' scan of minibatch
scans, so a vmapped train fn batched its minibatch body six times where once is enough
(docs/benchmarks/compile.md, "Tracing a vmapped train fn"). Broadcasting such leaves before
the loop gives the program the rule would have reached after its second pass: the same
arithmetic, traced once.

Only leaves that the loop would batch anyway may be broadcast, or the program gains a copy
per agent of a value that needed none: the callers pass what their loop mixes with batched
values (`batched_like`'s `tree`). One known exception, a scalar: under nested vmaps Adam's
step count is one per agent of the outer vmap too, where the inner vmap's per-leaf epochs
(`core/epochs.py`) leave it unbatched for the outer one.

Differentiable: `jax.grad` of a function through it (`compute_gae`'s advantages with respect
to the values) sees the identity (a `custom_jvp` around the `custom_vmap`, which JAX cannot
differentiate in reverse mode by itself).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax.custom_batching import custom_vmap


@custom_vmap
def _batched_like(tree: Any, like: Any) -> Any:
    return tree


@_batched_like.def_vmap
def _rule(axis_size: int, in_batched, tree, like):
    """One vmap level; the call it returns lets each vmap outside this one decide too."""
    tree_batched, like_batched = in_batched
    if any(jax.tree.leaves(like_batched)):
        tree = jax.tree.map(
            lambda x, b: x if b else jnp.broadcast_to(x, (axis_size, *jnp.shape(x))),
            tree, tree_batched)
        tree_batched = jax.tree.map(lambda _: True, tree_batched)
    return _batched_like(tree, like), tree_batched


@jax.custom_jvp
def batched_like(tree: Any, like: Any) -> Any:
    """`tree`, every leaf batched under each `jax.vmap` that batches any leaf of `like`
    (unchanged outside a vmap, and under one that maps neither).

    Args:
      tree: a loop's initial carry, or the part of it the loop mixes with batched values.
      like: the values whose batching decides (the run's key, its hyperparameters).

    Returns:
      `tree`, the same values.
    """
    return _batched_like(tree, like)


@batched_like.defjvp
def _identity_jvp(primals, tangents):
    tree, like = primals
    return batched_like(tree, like), tangents[0]
