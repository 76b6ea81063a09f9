"""What a vectorised environment carries and hands to the rollout, for device (`vec.py`) and
host (`host.py`) environments alike.

Axis legend: N = num_envs.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax

from jaxppo.envs.resets import ResetPool


class EnvState(NamedTuple):
    """Batched env state plus the running statistics of each env's current episode."""

    inner: Any  # the env's own state, leaves [N, ...]
    episode_return: jax.Array  # [N] undiscounted return so far
    episode_length: jax.Array  # [N] steps so far
    mask: jax.Array | None = None  # [N, A] bool legal actions at the current obs (masked envs)
    pool: ResetPool | None = None  # reset states drawn ahead (`reset: optimistic` only)


class EnvStep(NamedTuple):
    """What one vectorised step hands to the rollout. All arrays lead with N."""

    obs: jax.Array  # [N, *obs_shape] observation to act on next (reset obs where done)
    final_obs: jax.Array  # [N, *obs_shape] true next state s'_t (pre-reset where done)
    reward: jax.Array  # [N]
    terminated: jax.Array  # [N] bool: s'_t is terminal, its value is 0
    done: jax.Array  # [N] bool: the episode ended (terminated or truncated by a time limit)
    episode_return: jax.Array  # [N] return of the episode that ended here (valid where done)
    episode_length: jax.Array  # [N]
    metrics: dict[str, jax.Array] = {}  # name -> [N] the env's episode metrics at s'_t
    # [N] bool: the logged episode ended (episode_return/length valid here); None: `done`.
    # Host sources with Atari's conventions end a learner's episode at a lost life (`done`)
    # but log whole games.
    game_over: jax.Array | None = None
