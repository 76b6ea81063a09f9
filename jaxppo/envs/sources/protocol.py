"""The contracts between a source adapter and jaxppo: what an adapter module offers the registry
(`JaxSuite` for a JAX suite, `HostSuite` for one on the host), and what a host suite's pool
gives the bridge that steps it (`HostSource`, `HostStep`).

Adapters are modules, not classes: a module has the members of a runtime-checkable protocol or
it does not (`isinstance(jaxppo.envs.sources.navix, JaxSuite)`), and `registry.py` refuses one
that lacks any at import. Optional members are not in the protocols (a protocol member is
required); each is documented where it belongs and read with `getattr`.

Recipe: add an env source. Write `jaxppo/envs/sources/<lib>.py` with the members below (import
the library inside functions, through `suite.require`, so it stays an optional extra), add the
module to `SOURCES` (or `HOST_SOURCES`) in `registry.py`, and add its row to the conformance
test `tests/integration/test_env_sources.py` (plus a test file of its own for what is special about it).
Nothing else needs an edit: what jaxppo does per suite (hints, thresholds, drawing) it asks
the adapter for.

A host source is already vectorised: one `step` moves all M of its environments. It hides its
own auto-reset: where an episode ended, `obs` is the first observation of the next episode and
`final_obs` the true last one, exactly as `VecEnv.step_with` reports it for JAX envs, so the
auto-reset transition EnvPool and Gymnasium's vector envs produce (an ignored action, reward 0)
never reaches the learner nor the episode statistics.

Two notions of "an episode ended" are kept apart, for Atari's published conventions:
`terminated | truncated` is what the learner sees (a lost life is terminal under episodic life),
`game_over` is what the logged return counts (a whole game, all lives), and `score` is the reward
that return adds up (the game score, unclipped) while `reward` is the one trained on (clipped).
Every other source sets `score = reward` and `game_over = terminated | truncated`.

Axis legend: M = the source's environments (num_envs x the vmapped agents sharing one pool).
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class JaxSuite(Protocol):
    """A JAX suite's adapter module (`registry.SOURCES`): it lists and builds the suite's
    environments, each behind jaxppo's env protocol (`jaxppo/envs/protocol.py`).

    Optional members, read with `getattr` where they are used:

        unsupported_reason(env_id) -> str | None   why a real id of the suite outside
                                    `env_ids()` is refused (its assets download at first use):
                                    one line shown instead of "unknown id"
        suggest_id(env_id) -> str | None   this suite's id for an id typed without the prefix
                                    or in another library's spelling (`MiniGrid-Empty-8x8-v0`),
                                    for the "did you mean" of an unknown id; never raises
        SOLVE_THRESHOLDS: dict[str, float]   the mean return that counts a run of an id as
                                    solved (`run/stats.py`)
        write_gif(env, states, returns, path)   draws a whole episode (the env's states and
                                    running returns) as a GIF, in place of the per-frame
                                    `env.render` hook (`jaxppo eval --gif`)
        write_html(env, states, path)   an episode as an interactive HTML viewer (`--html`)
        EXPENSIVE_RESET: bool   whether its envs' resets are costly next to a step, from
                                    measurement; `reset: auto` resets such envs lazily
                                    (`jaxppo/envs/resets.py`); an env's own `expensive_reset`
                                    attribute wins; neither: XLA's estimate decides
    """

    PREFIX: str
    """What its ids start with (`"brax/"`); `""` for gymnax's bare ids, asked last."""
    SUITE: str
    """The suite's name in messages (`"Brax"`)."""
    INSTALL_HINT: str
    """The `pip install` that brings the suite, named when its package is missing."""

    def env_ids(self) -> list[str]:
        """Every id it offers, prefix included (`brax/hopper`), read from the installed
        package's registry; a missing package is one ConfigError line naming INSTALL_HINT."""
        ...

    def make(self, name: str, kwargs: dict[str, Any]) -> tuple[Any, Any]:
        """`(env, env_params)` for the id `PREFIX + name` (a known one: `registry.check_env_id`
        ran first); `kwargs` are the config's `env_kwargs`, refused in one ConfigError line
        where the suite cannot take them."""
        ...


@runtime_checkable
class HostSuite(Protocol):
    """A host suite's adapter module (`registry.HOST_SOURCES`): it builds pools of the suite's
    environments that run on the host (`HostSource`), stepped from inside the compiled program
    by the bridge (`host.py`).

    Optional members:

        check_id(name) -> None   raises one ConfigError line (close matches, the missing
                                    package) for an id it does not offer; without it, the
                                    registry checks `name in env_ids()`
        suggest_id(env_id) -> str | None   as for `JaxSuite`
        SOLVE_THRESHOLDS: dict[str, float]   as for `JaxSuite`
        RENDER_KWARGS: dict[str, Any]   what `jaxppo eval --gif` adds to `make_source`'s kwargs
                                    for pools that draw frames
    """

    PREFIX: str
    """What its ids start with (`"gymnasium/"`)."""
    SUITE: str
    """The suite's name in messages (`"Gymnasium"`)."""
    INSTALL_HINT: str
    """The `pip install` that brings the suite, named when its package is missing."""

    def env_ids(self) -> list[str]:
        """Every id it offers, WITHOUT the prefix (`CartPole-v1`); a missing package is one
        ConfigError line naming INSTALL_HINT."""
        ...

    def make_source(self, name: str, num_envs: int, kwargs: dict[str, Any],
                    evaluation: bool) -> HostSource:
        """A pool of `num_envs` envs of `PREFIX + name` (see `HostSource`)."""
        ...


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
