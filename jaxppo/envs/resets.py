"""How an env whose episode ended gets its next initial state (config key `reset`).

- `predrawn`: T x N reset states drawn before each rollout, in one batched call; every step
  picks the ones it needs. Right when a reset costs little (gymnax's are a few random numbers).
- `cond`: all N envs reset inside a `lax.cond` on "an episode ended this step". Cheap for one
  agent, but under a vmap over seeds the predicate is batched, XLA turns the cond into a
  select, and all N resets run on every step.
- `optimistic`: each step draws a fixed number K (`reset_batch`) of fresh reset states,
  unconditionally, into a pool of K carried in the env state; the envs that ended take pooled
  states, oldest first, by rank among the ended envs (env 3 and env 7 end: env 3 gets the
  first, env 7 the second). The work per step is K resets, whatever happens and vmapped or not.

When more envs end on one step than the pool and the K fresh states can serve (2K at most), the
extra envs are reset from their own keys inside a `lax.cond` whose predicate is "this happened
in any of the vmapped copies" (`any_in_batch`): it stays a real cond under vmap, so a sweep of
S seeds pays the S x N fallback resets on the steps where some seed ran short, as one agent of
S x N envs would, not on every step. We chose this over making the extra envs wait a step
(which would have to feed the learner placeholder transitions and mask them out of the loss,
GAE, normaliser and counters) and over sharing a state between envs: every transition is one
the env produced, and no two envs ever start from the same draw. With episodes of length L,
N / L envs end per step on average; K = N / 8 (the default) covers L >= 8 with room for bursts.
Envs whose time limits line up (all N started together, none ended early) run short once per
time limit, which costs one full reset, as `cond` would. Measured (random actions, 1000 steps,
K = N / 8): Brax inverted_double_pendulum (mean episode 18 steps) ended at most 4 of 16 / 11 of
64 envs on one step, Craftax-Classic (mean 152) 2 of 16 / 4 of 64: never short.

Fresh states stay correctly distributed: `reset_env` is a pure function of its key, so a
state drawn some steps early is the same draw as one drawn now, and which pooled state an env
gets depends only on positions (who ended, what is filled), never on the states' contents.

Axis legend: N = num_envs, K = reset_batch.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax.custom_batching import custom_vmap

RESETS = ("auto", "predrawn", "cond", "optimistic")


def default_reset_batch(num_envs: int) -> int:
    """K when the config leaves `reset_batch` null: N / 8, rounded up."""
    return max(1, math.ceil(num_envs / 8))


@custom_vmap
def any_in_batch(x: jax.Array) -> jax.Array:
    """`x` (a scalar bool) unbatched; under `jax.vmap`, whether it holds in any of the mapped
    copies, returned unbatched, so a `lax.cond` on it stays a cond (one branch runs for all
    copies) instead of becoming a select (both branches run, every step)."""
    return x


@any_in_batch.def_vmap
def _any_in_batch_rule(axis_size, in_batched, x):
    del axis_size
    # Call itself again: a nested vmap (seeds x settings) reduces every level.
    return (any_in_batch(jnp.any(x, axis=0)) if in_batched[0] else x), False


class ResetPool(NamedTuple):
    """Reset states drawn on earlier steps and not yet handed out (`optimistic` only)."""

    obs: jax.Array  # [K, *obs_shape]
    inner: Any  # the env's own state, leaves [K, ...]
    mask: jax.Array | None  # [K, A] or None
    filled: jax.Array  # [K] bool: the slot holds a state not yet handed out


def hand_out(pool: ResetPool, fresh: tuple, done: jax.Array,
             fallback: Callable[[], tuple], stepped: tuple) -> tuple[tuple, ResetPool]:
    """The reset `(obs, inner, mask)` for every env ([N, ...], used where `done`), and the new
    pool. `fresh` holds this step's K new draws; `fallback()` resets all N envs from their own
    keys (run only when some env, in any vmapped copy, finds nothing left); `stepped` is
    anything of the reset's structure (the stepped states), what the cond's other branch gives."""
    k = pool.filled.shape[0]
    cands = jax.tree.map(lambda p, f: jnp.concatenate([p, f]), (pool.obs, pool.inner, pool.mask),
                         fresh)
    avail = jnp.concatenate([pool.filled, jnp.ones((k,), bool)])
    order = jnp.argsort((~avail).astype(jnp.int8), stable=True)  # available first, oldest first
    n_avail = jnp.sum(avail)
    rank = jnp.cumsum(done) - 1  # [N] rank among the envs that ended
    handed = jax.tree.map(lambda c: c[order[jnp.clip(rank, 0, 2 * k - 1)]], cands)
    short = done & (rank >= n_avail)
    backup = jax.lax.cond(any_in_batch(jnp.any(short)), fallback, lambda: stepped)

    def choose(b, h):
        return jnp.where(short.reshape(short.shape + (1,) * (h.ndim - 1)), b, h)

    reset = jax.tree.map(choose, backup, handed)
    left = jnp.minimum(jnp.sum(done), n_avail) + jnp.arange(k)  # the first states not taken
    obs, inner, mask = jax.tree.map(lambda c: c[order[jnp.clip(left, 0, 2 * k - 1)]], cands)
    return reset, ResetPool(obs, inner, mask, left < n_avail)
