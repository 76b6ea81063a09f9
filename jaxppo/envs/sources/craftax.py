"""Craftax environments behind jaxppo's env protocol (`env_id: craftax/<name>`).

Craftax (Matthews et al., 2024) builds its envs with `make_craftax_env_from_name(name,
auto_reset=False)`; the no-autoreset classes' `step_env` returns the true next observation and
one `done` that merges three things: death (health <= 0; in Classic also standing in lava),
beating the final boss (full Craftax only), and the time limit `params.max_timesteps` (10,000
steps in Classic, 100,000 in full Craftax). This adapter splits them: `terminated` is the game
being over for any reason but the clock, and `is_truncated` is the clock, so a timeout
bootstraps and a death does not.

Observations are flat float32 vectors in [0, 1] for the Symbolic ids (1,345 wide in Classic,
8,268 in full Craftax) and [H, W, 3] images in [0, 1] for the Pixels ids (jaxppo's MLP flattens
them). The reward is +1 per achievement unlocked for the first time in an episode plus 0.1 per
unit of health gained or lost. There is no action mask: all actions are always legal.

`env_kwargs` set fields of Craftax's `EnvParams` (`max_timesteps`, `day_length`, ...) or of its
`StaticEnvParams` (`map_size`, mob counts: these fix array shapes, so they go to the
constructor). Craftax is an optional dependency (`pip install 'jaxppo[craftax]'`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import re
import sys
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxppo.envs.sources.suite import require
from jaxppo.envs.spaces import Box, Discrete
from jaxppo.errors import ConfigError

PREFIX = "craftax/"
SUITE = "Craftax"
INSTALL_HINT = "pip install 'jaxppo[craftax]'"

# Craftax has no registry to list: `make_craftax_env_from_name` is an if-chain over these four
# (plus "-AutoReset-" spellings of the same envs, which reset inside step and so are not offered).
NAMES = ("Craftax-Classic-Symbolic-v1", "Craftax-Classic-Pixels-v1",
         "Craftax-Symbolic-v1", "Craftax-Pixels-v1")

# The 22 achievements of Crafter, indices 0..21 in both Classic's and full Craftax's
# `Achievement` enum (full Craftax appends 45 more, reported only through the count).
CLASSIC_ACHIEVEMENTS = (
    "collect_wood", "place_table", "eat_cow", "collect_sapling", "collect_drink",
    "make_wood_pickaxe", "make_wood_sword", "place_plant", "defeat_zombie", "collect_stone",
    "place_stone", "eat_plant", "defeat_skeleton", "make_stone_pickaxe", "make_stone_sword",
    "wake_up", "place_furnace", "collect_coal", "collect_iron", "collect_diamond",
    "make_iron_pickaxe", "make_iron_sword")

_NO_LIMIT = int(np.iinfo(np.int32).max)  # a `max_timesteps` the int32 step counter never reaches


def env_ids() -> list[str]:
    require("craftax", SUITE, INSTALL_HINT)
    return [PREFIX + n for n in NAMES]


def suggest_id(env_id: str) -> str | None:
    """`craftax/<name>` for a bare Craftax id typed without the prefix (any case, with or
    without Craftax's `-AutoReset` infix)."""
    squashed = re.sub(r"-autoreset(?=-v\d+$)", "", env_id.strip().lower())
    hit = next((n for n in NAMES if n.lower() == squashed), None)
    return PREFIX + hit if hit else None


def _fields(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls) if f.name != "fractal_noise_angles"]


def make(name: str, kwargs: dict[str, Any]) -> tuple[CraftaxEnv, Any]:
    """The adapter's entry point (`registry.make_env`): `kwargs` are `EnvParams` fields (the
    returned params) or `StaticEnvParams` fields (the constructor's)."""
    require("craftax", SUITE, INSTALL_HINT, PREFIX + name)
    if name not in NAMES:
        raise ConfigError(f"config key 'env_id': unknown {SUITE} environment {PREFIX + name!r}")
    probe = _base(name)
    params_cls = type(probe.default_params)
    static_cls = type(probe.static_env_params)
    dynamic, static = {}, {}
    for key, value in kwargs.items():
        if key in _fields(params_cls):
            dynamic[key] = value
        elif key in _fields(static_cls):
            # YAML gives lists; the static params must hash (they are jit-static shapes).
            static[key] = tuple(value) if isinstance(value, list) else value
        else:
            raise ConfigError(
                f"config key 'env_kwargs': {PREFIX + name!r} takes no {key!r}; it takes "
                f"{', '.join(_fields(params_cls) + _fields(static_cls))}")
    env = _build(name, tuple(sorted(static.items())), tuple(sorted(dynamic.items())))
    return env, env.default_params


@functools.cache
def _base(name: str) -> Any:
    """Craftax's own env with default settings, built once per process."""
    from craftax.craftax_env import make_craftax_env_from_name

    # Pixels envs render their textures on first use (minutes, then cached on disk) and say so
    # on stdout; send that to stderr, where it explains the wait without mixing into output.
    with contextlib.redirect_stdout(sys.stderr):
        return make_craftax_env_from_name(name, auto_reset=False)


@functools.cache
def _build(name: str, static: tuple, dynamic: tuple) -> CraftaxEnv:
    """One env per (name, settings); static settings fix array shapes, so they need their own
    Craftax env object."""
    base = _base(name)
    inner = type(base)(base.static_env_params.replace(**dict(static))) if static else base
    return CraftaxEnv(name, inner, inner.default_params.replace(**dict(dynamic)))


class CraftaxEnv:
    """One Craftax env with jaxppo's protocol: its own `reset_env`/`step_env`, with the time
    limit taken out of `terminated` and reported by `is_truncated`."""

    # Generating a world costs ~100 steps' worth (~1 ms on a CPU core): VecEnv resets only on
    # steps where an episode ended instead of pre-drawing a world for every env and step of
    # the rollout (under a vmap over seeds that `lax.cond` runs both sides, so seeds are best
    # run one after another on a CPU).
    expensive_reset = True

    def __init__(self, name: str, inner: Any, params: Any):
        self.name = name
        self.inner = inner  # craftax's NoAutoReset env
        self._params = params

    @property
    def default_params(self) -> Any:
        return self._params

    def reset_env(self, key, params):
        return self.inner.reset_env(key, params)

    def step_env(self, key, state, action, params):
        obs, state, reward, _, _ = self.inner.step_env(key, state, action, params)
        # Craftax's own game-over test with a clock that never runs out: death, lava, the boss.
        terminated = self.inner.is_terminal(state, params.replace(max_timesteps=_NO_LIMIT))
        return obs, state, reward, terminated, {}

    def is_truncated(self, state, params):
        return state.timestep >= params.max_timesteps

    def episode_metrics(self, state, params) -> dict[str, Any]:
        """Achievements unlocked by the episode's last state: the count, and each of Crafter's
        22 as 0/1 (their mean over episodes is the success rate the Crafter score is built
        from). Full Craftax's other 45 would crowd the log; the count covers them."""
        unlocked = state.achievements.astype(jnp.float32)
        return {"num_achievements": unlocked.sum(),
                **{f"achievements/{n}": unlocked[i] for i, n in enumerate(CLASSIC_ACHIEVEMENTS)}}

    def render(self, state, params) -> np.ndarray:
        """One frame (uint8 [H, W, 3]) for `jaxppo eval --gif`: Craftax's own pixel renderer
        (the agent's view and inventory; its textures are built once, cached by Craftax)."""
        return np.asarray(self._draw(state))

    @functools.cached_property
    def _draw(self):
        classic = "Classic" in self.name
        renderer = importlib.import_module(
            "craftax.craftax_classic.renderer" if classic else "craftax.craftax.renderer")
        constants = importlib.import_module(
            "craftax.craftax_classic.constants" if classic else "craftax.craftax.constants")
        with contextlib.redirect_stdout(sys.stderr):  # "Loading Craftax textures ..."
            draw = renderer.make_craftax_pixel_renderer(constants.BLOCK_PIXEL_SIZE_IMG)
        return jax.jit(lambda s: jnp.clip(draw(s), 0, 255).astype(jnp.uint8))

    def observation_space(self, params) -> Box:
        return Box(0.0, 1.0, tuple(int(s) for s in self.inner.observation_space(params).shape))

    def action_space(self, params) -> Discrete:
        return Discrete(int(self.inner.num_actions))
