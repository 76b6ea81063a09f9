"""Navix environments (MiniGrid in JAX) behind jaxppo's env protocol (`env_id: navix/<name>`).

Navix's `Environment.step` autoresets: handed a timestep that ended, it returns a reset one.
The adapter calls the transition beneath it, `Environment._step`, so `step_env` gives the true
final observation and `VecEnv` does the resets. Navix says how an episode ended in the
timestep's `step_type`: 2 TERMINATION (goal reached, lava, a ball hit: value 0), 1 TRUNCATION
(`t >= max_steps`, bootstrapped); termination wins when both happen on one step. `navix.make`
sets `max_steps=100` unless `env_kwargs` give another.

`env_kwargs` go to `navix.make`. `observation_fn` (default `symbolic_first_person`: MiniGrid's
7x7x3 egocentric view) and `reward_fn`, `termination_fn`, `transitions_fn` may be given by
name, looked up in navix's modules of the same name. Navix's default observation is
`symbolic`, the whole grid. Randomness (starts, moving balls) comes from the key navix keeps in
its state, seeded at reset; `step_env`'s key is unused.

Navix is an optional dependency (`pip install 'jaxppo[navix]'`), imported only for `navix/` ids.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxppo.envs.sources.suite import kwargs_error, require
from jaxppo.envs.spaces import Box, Discrete
from jaxppo.errors import ConfigError

PREFIX = "navix/"
SUITE = "Navix"
INSTALL_HINT = "pip install 'jaxppo[navix]'"
DEFAULT_OBSERVATION = "symbolic_first_person"
TRUNCATION, TERMINATION = 1, 2  # navix's StepType
# env_kwargs that name a function in the navix module of the same name
_BY_NAME = {"observation_fn": "observations", "reward_fn": "rewards",
            "termination_fn": "terminations", "transitions_fn": "transitions"}
_RGB = ("rgb", "rgb_first_person")  # the observations that draw from the rendering cache


def _navix(env_id: str = "") -> Any:
    return require("navix", SUITE, INSTALL_HINT, env_id)


def env_ids() -> list[str]:
    return sorted(PREFIX + name for name in _navix().registry())


def suggest_id(env_id: str) -> str | None:
    """`navix/Navix-...` for navix's bare id or a MiniGrid one (`MiniGrid-Empty-8x8-v0`).
    Other ids are not looked up: navix's import pulls its agents and W&B (~2 s of CPU)."""
    if not env_id.startswith(("Navix-", "MiniGrid-")):
        return None
    try:
        ids = set(env_ids())
    except ConfigError:
        return None
    name = env_id.removeprefix("MiniGrid-")
    for candidate in (PREFIX + env_id, PREFIX + "Navix-" + name):
        if candidate in ids:
            return candidate
    return None


def _resolve(navix: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Functions named by string (YAML) -> navix's functions; anything else unchanged."""
    out = dict(kwargs)
    for key, module_name in _BY_NAME.items():
        value = out.get(key)
        if not isinstance(value, str):
            continue
        module = getattr(navix, module_name)
        fn = getattr(module, value, None)
        if not callable(fn):
            names = sorted(n for n, f in vars(module).items()
                           if callable(f) and not n.startswith(("_", "set_"))
                           and f.__module__ == module.__name__)
            raise ConfigError(f"config key 'env_kwargs': navix has no {key} {value!r}; use one "
                              f"of {', '.join(names)}")
        out[key] = fn
    return out


def make(name: str, kwargs: dict[str, Any]) -> tuple[NavixEnv, None]:
    """The adapter's entry point (`registry.make_env`): `navix.make(name, **kwargs)`."""
    navix = _navix(PREFIX + name)
    full = {"observation_fn": DEFAULT_OBSERVATION, **kwargs}
    obs_name = full["observation_fn"] if isinstance(full["observation_fn"], str) else None
    try:
        env = navix.make(name, **_resolve(navix, full))
    except (TypeError, NotImplementedError, ValueError) as e:
        if isinstance(e, ConfigError):
            raise
        raise kwargs_error(f"navix's {name!r}", kwargs, e) from None
    return NavixEnv(env, keep_cache=obs_name is None or obs_name in _RGB), None


class NavixEnv:
    """One navix `Environment` with jaxppo's protocol; the state is navix's own `Timestep`.

    Navix's reset draws every tile of the map (the rendering cache) for its RGB observations;
    for other observations the adapter resets with a one-pixel cache instead, which nothing
    reads, so the state `VecEnv` pre-draws T x N of is small."""

    default_params = None

    def __init__(self, env: Any, keep_cache: bool = True):
        self.env = env
        self.keep_cache = keep_cache
        obs = jax.eval_shape(self.reset_env, jax.random.key(0), None)[0]
        self.obs_shape, self.obs_dtype = tuple(obs.shape), obs.dtype

    def _cache(self) -> Any:
        if self.keep_cache:
            return None
        from navix.rendering.cache import RenderingCache

        return RenderingCache(patches=jnp.zeros((1, 1, 1, 3), jnp.uint8))

    def reset_env(self, key: jax.Array, params: Any = None):
        timestep = self.env.reset(key, self._cache())
        return timestep.observation, timestep

    def step_env(self, key: jax.Array, state: Any, action: jax.Array, params: Any = None):
        del key  # navix steps with the key in its state
        timestep = self.env._step(state, jnp.asarray(action, jnp.int32))  # noqa: SLF001 - no autoreset
        return (timestep.observation, timestep, timestep.reward,
                timestep.step_type == TERMINATION, {})

    def is_truncated(self, state: Any, params: Any = None) -> jax.Array:
        return state.step_type == TRUNCATION

    def episode_metrics(self, state: Any, params: Any = None) -> dict[str, jax.Array]:
        """`goal_reached`: the fraction of episodes that ended on the goal (navix's event)."""
        return {"goal_reached": state.state.events.goal_reached.happened.astype(jnp.float32)}

    def render(self, state: Any, params: Any = None) -> np.ndarray:
        """One frame (uint8 [H, W, 3]) for `jaxppo eval --gif`: navix's own RGB view of the
        whole grid (`observations.rgb`), its tile cache drawn afresh (the adapter's reset may
        have left it out)."""
        return np.asarray(self._draw(state))

    @functools.cached_property
    def _draw(self):
        from navix.observations import rgb
        from navix.rendering.cache import RenderingCache

        def draw(timestep):
            s = timestep.state
            return rgb(s.replace(cache=RenderingCache.init(s.grid)))
        return jax.jit(draw)

    def observation_space(self, params: Any = None) -> Box:
        high = 255 if self.obs_dtype == jnp.uint8 else np.inf
        return Box(0, high, self.obs_shape, np.dtype(self.obs_dtype))

    def action_space(self, params: Any = None) -> Discrete:
        return Discrete(len(self.env.action_set))
