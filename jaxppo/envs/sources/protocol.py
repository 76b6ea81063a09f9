"""What an environment that lives on the host (EnvPool's C++ pools, Gymnasium's vector envs)
gives jaxppo: the contract between a source adapter (`envpool_env.py`, `gymnasium_env.py`) and
the bridge that steps it inside the compiled training program (`host.py`).

A source is already vectorised: one `step` moves all M of its environments. It hides its own
auto-reset: where an episode ended, `obs` is the first observation of the next episode and
`final_obs` the true last one, exactly as `VecEnv.step_with` reports it for JAX envs, so the
auto-reset transition EnvPool and Gymnasium's vector envs produce (an ignored action, reward 0)
never reaches the learner nor the episode statistics.

Two notions of "an episode ended" are kept apart, for Atari's published conventions:
`terminated | truncated` is what the learner sees (a lost life is terminal under episodic life),
`game_over` is what the logged return counts (a whole game, all lives), and `score` is the reward
that return adds up (the game score, unclipped) while `reward` is the one trained on (clipped).
Every other source sets `score = reward` and `game_over = terminated | truncated`.

A source module exposes `PREFIX` ("gymnasium/"), `SUITE`, `INSTALL_HINT`, `env_ids()` (or
`check_id(name)`, raising one ConfigError line), `make_source(name, num_envs, kwargs,
evaluation) -> HostSource` and optionally `RENDER_KWARGS`; `registry.HOST_SOURCES` lists the
modules by prefix.

Axis legend: M = the source's environments (num_envs x the vmapped agents sharing one pool).
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

import numpy as np


class HostStep(NamedTuple):
    """One step of all M environments, as numpy arrays on the host."""

    obs: np.ndarray  # [M, *obs_shape] observation to act on next (a reset one where ended)
    final_obs: np.ndarray  # [M, *obs_shape] the true next observation s'_t (pre-reset)
    reward: np.ndarray  # [M] float32 the reward the learner trains on
    terminated: np.ndarray  # [M] bool s'_t is terminal (its value is 0)
    truncated: np.ndarray  # [M] bool a time limit ended the episode (bootstrap from final_obs)
    score: np.ndarray  # [M] float32 the reward the logged episodic return adds up
    game_over: np.ndarray  # [M] bool the logged episode ended (a whole game for Atari)


class HostSource(Protocol):
    """M environments on the host, stepped together. Built by a source module's
    `make_source(name, num_envs, kwargs, evaluation)`; `evaluation=True` asks for the setting a
    score is measured under (Atari: no episodic life, no reward clipping). `kwargs` are the
    config's `env_kwargs`, plus `max_episode_steps` where the config sets it (the source
    truncates there) and, for `jaxppo eval --gif`, the module's optional `RENDER_KWARGS`.
    A refusal (a bad kwarg, a num_envs it cannot give, a missing package) is one
    `ConfigError` line. The bridge builds a pool at the size it is stepped with (num_envs, or
    S x num_envs for S vmapped agents) and checks every array's shape and dtype."""

    env_id: str  # e.g. "envpool/Breakout-v5"
    num_envs: int  # M
    observation_space: Any  # a gymnasium Box: shape and dtype of one env's observation
    action_space: Any  # a gymnasium Discrete, MultiDiscrete or Box
    max_episode_steps: int | None  # the source's own time limit, if it states one

    def reset(self, seed: int | np.ndarray) -> np.ndarray:
        """Start every env afresh; returns obs [M, *obs_shape]. `seed` is an int (env i from
        `seed + i`) or, as the bridge passes it, an int array [M] (env i from `seed[i]`): agents
        sharing one pool each seed their own N envs (agent a: seed_a + 0..N-1), so a pool of
        S agents plays what each would alone. A source that can only seed a whole pool takes
        `int(seed[0])`: right for one agent, and still one run per seed for several.
        May be called again (a resumed run, a new evaluation): every env restarts."""
        ...

    def step(self, action: np.ndarray) -> HostStep:
        """Step every env with `action` [M, *action_shape]; ended episodes restart."""
        ...

    def render(self, index: int) -> np.ndarray:
        """uint8 [H, W, 3] the current frame of env `index`, for GIFs (NotImplementedError if the
        source cannot draw)."""
        ...

    def close(self) -> None:
        ...
