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

Which one `reset: auto` picks: `optimistic` for an env whose reset is costly, `predrawn` for
the rest (`choose_reset`). Costly is what the env says (an `expensive_reset` attribute, set by
the suites jaxppo adapts from their measured costs) or, where it says nothing (an env of your
own), what XLA's cost model estimates from the lowered reset and step of one env: a reset
that touches at least `COSTLY_RESET` times the bytes of a step. The estimate is static (nothing
compiles or runs, nothing is timed), so a config picks the same mode, and trains the same, on
every machine. The estimate counts bytes, not time, so it is rough: measured against the
reset's time (`python scripts/benchmark_resets.py --only cost`, 64 envs; docs/design/costly-resets.md)
it called Craftax's, Jumanji Maze's and RubiksCube's resets costly (10-25x a step's time) and
gymnax's, MinAtar's, Navix's and XLand-MiniGrid's cheap (<= 3.5x), but also Jumanji TSP's
(1.7x). XLA counts a loop's body once, so a generator written as a `fori_loop` or `scan`
looks cheaper than it is. Where it is wrong for your env, say so: `expensive_reset = True` (or
False) on the class, or `reset:` in the config.

Axis legend: N = num_envs, K = reset_batch.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax.custom_batching import custom_vmap
from jax.sharding import SingleDeviceSharding

from jaxppo.envs.registry import declared_reset_cost
from jaxppo.errors import ConfigError

RESETS = ("auto", "predrawn", "cond", "optimistic")

COSTLY_RESET = 12.0
"""`reset: auto` resets an env lazily (`optimistic`) when XLA estimates its reset at this many
of its steps or more (bytes accessed). Between the cheap grid worlds' estimates (<= 10.7x,
XLand-MiniGrid's Playground) and Craftax's world generation (>= 15x); below it, pre-drawing
T x N resets in one batched call costs less than the pool's per-step bookkeeping."""


class ResetChoice(NamedTuple):
    """The reset strategy in effect and why, as the run's header line states it."""

    mode: str  # one of RESETS but "auto"
    why: str  # "set in the config", "costly reset, declared by the env", "cheap reset, ~4.1
    # steps by XLA's estimate", "no cost estimate from XLA: taken as cheap" (`note` reads it)


_ESTIMATES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""env -> (id of its params, ratio): one estimate per env, however many `VecEnv`s a run builds
(the memory check, the checkpoint's template, evaluation)."""


def reset_cost_ratio(env: Any, params: Any, state: Any, action: Any) -> float | None:
    """XLA's estimate of one env's reset against one of its steps: the bytes each accesses,
    read from the programs lowered for the CPU whatever the default backend (a GPU's plugin
    gives no estimate), so the answer is the same on every machine (`state`, `action`: abstract
    values of one env). None where XLA gives none (no CPU backend in `JAX_PLATFORMS`, a program
    it cannot read). A loop (`fori_loop`, `scan`, `while_loop`) counts once, not per trip."""
    try:
        cached = _ESTIMATES.get(env)
    except TypeError:  # an env that cannot be weakly referenced or hashed: estimated each time
        cached = None
    if cached is not None and cached[0] == id(params):
        return cached[1]
    try:
        cpu = SingleDeviceSharding(jax.devices("cpu")[0])
        on_cpu = lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=cpu)  # noqa: E731
        key = on_cpu(jax.eval_shape(jax.random.key, 0))
        state, action = jax.tree.map(on_cpu, (state, action))

        def bytes_of(fn: Callable, *args: Any) -> float:
            cost = jax.jit(fn).lower(*args).cost_analysis()
            cost = cost[0] if isinstance(cost, (list, tuple)) else cost  # older JAX: a list
            return float((cost or {}).get("bytes accessed", -1.0))

        reset = bytes_of(lambda k: env.reset_env(k, params), key)
        step = bytes_of(lambda k, s, a: env.step_env(k, s, a, params), key, state, action)
        ratio = reset / step if reset > 0 and step > 0 else None
    except Exception:  # noqa: BLE001 - no estimate is an answer: the env is treated as cheap
        ratio = None
    try:
        _ESTIMATES[env] = (id(params), ratio)
    except TypeError:
        pass
    return ratio


def declared_reset(env: Any, env_id: str | None) -> tuple[bool | None, str]:
    """The word on `env`'s reset cost and whose it is: its `expensive_reset` attribute, else
    (for an env built from `env_id` by a suite) the suite's `EXPENSIVE_RESET`, else None."""
    declared = getattr(env, "expensive_reset", None)
    if declared is not None:
        return bool(declared), "the env"
    if env_id is not None and (suite := declared_reset_cost(env_id)) is not None:
        return suite, "its suite"
    return None, "the env"


def choose_reset(reset: str, declared: bool | None, by: str,
                 estimate: Callable[[], float | None]) -> ResetChoice:
    """What `reset` (the config's value) resolves to. `declared`: the word of `by` (the env,
    or the suite that built it) on its reset's cost (None: none; `declared_reset`);
    `estimate()`: `reset_cost_ratio`, asked only when `reset` is `auto` and nothing is
    declared."""
    if reset != "auto":
        return ResetChoice(reset, "set in the config")
    if declared is not None:
        return ResetChoice("optimistic" if declared else "predrawn",
                           f"{'costly' if declared else 'cheap'} reset, declared by {by}")
    ratio = estimate()
    if ratio is None:
        return ResetChoice("predrawn", "no cost estimate from XLA: taken as cheap")
    costly = ratio >= COSTLY_RESET
    return ResetChoice("optimistic" if costly else "predrawn",
                       f"{'costly' if costly else 'cheap'} reset, ~{ratio:.1f} steps by XLA's "
                       "estimate")


def resolve(reset: str, reset_batch: int | None, num_envs: int, env: Any, params: Any,
            info: Any, *, env_id: str, built: bool, strict: bool) -> tuple[ResetChoice, int]:
    """`VecEnv`'s reset strategy and K for `num_envs` envs of `env` (`info`: its `EnvInfo`;
    `built`: made from `env_id` by a suite). `strict` (a training run) refuses a
    `reset_batch` the resolved strategy would ignore; the training's envs take it as written
    (the config holds it to num_envs), an evaluation's or a policy's fewer take at most one
    each."""
    if reset not in RESETS:
        raise ConfigError(f"config key 'reset': got {reset!r}; use one of {list(RESETS)}")
    choice = choose_reset(reset, *declared_reset(env, env_id if built else None),
                          lambda: reset_cost_ratio(env, params, info.state, info.action_in))
    if strict and reset_batch is not None and choice.mode != "optimistic":
        raise ConfigError(f"config key 'reset_batch': set to {reset_batch}, but reset: {reset} "
                          f"picks {choice.mode} for {env_id!r} ({choice.why}), which draws no "
                          "batch; remove reset_batch, or set reset: optimistic")
    return choice, min(num_envs, reset_batch or default_reset_batch(num_envs))


def note(choice: ResetChoice, reset_batch: int) -> str:
    """The choice as the run's header line states it, e.g. `resets: optimistic, 8 per step
    (costly reset, declared by the env)`; "" for `predrawn` picked by `auto` for a cheap reset,
    the default that needs no word (one XLA could not estimate is named)."""
    mode, why = choice
    if mode == "predrawn" and why.startswith("cheap reset"):
        return ""
    per_step = f", {reset_batch} per step" if mode == "optimistic" else ""
    return f"resets: {mode}{per_step} ({why})"


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
