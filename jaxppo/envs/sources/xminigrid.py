"""XLand-MiniGrid environments behind jaxppo's env protocol (`env_id: xminigrid/<name>`).

XLand-MiniGrid's API takes its params first, `reset(params, key)` and `step(params, timestep,
action)`, and its `step` does not reset (only its `GymAutoResetWrapper` does), so the adapter
calls it as is and `VecEnv` does the resets. An episode ends where `step_type` is LAST; the
`discount` tells how: 0 for termination (the goal is reached, or a Memory task's wrong object:
value 0), 1 for truncation at `step_num == max_steps` (bootstrapped). `max_steps` defaults to
MiniGrid's 4 * height * width. The reward is MiniGrid's 1 - 0.9 * step / max_steps at the goal.
Observations are the agent's egocentric view, uint8 [view_size, view_size, 2] (tile, colour).

`env_kwargs` replace fields of the env's params (`xminigrid.make(id, **kwargs)`): `view_size`,
`max_steps`, `height`, `width`. The XLand-MiniGrid meta-RL benchmarks (`XLand-MiniGrid-R*`)
need rulesets that `xminigrid.load_benchmark` downloads, so they are refused here.

XLand-MiniGrid is an optional dependency (`pip install 'jaxppo[xminigrid]'`), imported only for
`xminigrid/` ids.
"""

from __future__ import annotations

import re
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxppo.envs.sources.suite import kwargs_error, require
from jaxppo.envs.spaces import Box, Discrete
from jaxppo.errors import ConfigError

PREFIX = "xminigrid/"
SUITE = "XLand-MiniGrid"
INSTALL_HINT = "pip install 'jaxppo[xminigrid]'"
_BENCHMARK = "XLand-MiniGrid-"  # ids whose rulesets are downloaded
LAST = 2  # xminigrid's StepType.LAST


def _xminigrid(env_id: str = "") -> Any:
    return require("xminigrid", SUITE, INSTALL_HINT, env_id)


def env_ids() -> list[str]:
    """The MiniGrid ports (`MiniGrid-*`); the downloaded-ruleset benchmarks are left out."""
    names = _xminigrid().registered_environments()
    return sorted(PREFIX + n for n in names if not n.startswith(_BENCHMARK))


def unsupported_reason(env_id: str) -> str | None:
    """Why a real XLand-MiniGrid id outside `env_ids()` is refused, or None: one line for the
    registry to show instead of "unknown id"."""
    name = env_id.removeprefix(PREFIX)
    if not name.startswith(_BENCHMARK):
        return None
    return (f"{PREFIX}{name} is an XLand-MiniGrid meta-RL benchmark, whose rulesets "
            "xminigrid.load_benchmark downloads from the internet; this adapter does not support "
            f"it offline. Use a MiniGrid port instead, e.g. {PREFIX}MiniGrid-Empty-8x8")


def suggest_id(env_id: str) -> str | None:
    """`xminigrid/<name>` for a bare XLand-MiniGrid id or a Gymnasium MiniGrid one
    (`MiniGrid-Empty-Random-6x6-v0` -> `xminigrid/MiniGrid-EmptyRandom-6x6`), compared without
    case, dashes or the version suffix. Other ids are not looked up (importing XLand-MiniGrid
    for every typo of a gymnax id costs time)."""
    if not env_id.lower().startswith(("minigrid-", "xland-")):
        return None

    def squash(name: str) -> str:
        return re.sub(r"-v\d+$", "", name.strip()).replace("-", "").lower()

    try:
        ids = env_ids()
    except ConfigError:  # not installed: no hint
        return None
    by_squashed = {squash(i[len(PREFIX):]): i for i in ids}
    return by_squashed.get(squash(env_id))


def make(name: str, kwargs: dict[str, Any]) -> tuple[XMiniGridEnv, Any]:
    """The adapter's entry point (`registry.make_env`): `xminigrid.make(name, **kwargs)`."""
    reason = unsupported_reason(name)
    if reason:
        raise ConfigError(f"config key 'env_id': {reason}")
    xminigrid = _xminigrid(PREFIX + name)
    try:
        env, params = xminigrid.make(name, **kwargs)
    except (TypeError, ValueError) as e:
        fields = "height, width, view_size, max_steps"
        raise kwargs_error(f"XLand-MiniGrid's {name!r}", kwargs, e,
                           f"its params are {fields}") from None
    return XMiniGridEnv(env), params


class XMiniGridEnv:
    """One XLand-MiniGrid environment with jaxppo's protocol; the state is its own `TimeStep`
    and the params its `EnvParams` (static: no array leaves)."""

    def __init__(self, env: Any):
        self.env = env
        self._default_params = env.default_params()

    @property
    def default_params(self) -> Any:
        return self._default_params

    def reset_env(self, key: jax.Array, params: Any):
        timestep = self.env.reset(params, key)
        return timestep.observation, timestep

    def step_env(self, key: jax.Array, state: Any, action: jax.Array, params: Any):
        del key  # the dynamics are deterministic; randomness enters through resets
        timestep = self.env.step(params, state, jnp.asarray(action, jnp.int32))
        terminated = (timestep.step_type == LAST) & (timestep.discount == 0.0)
        return timestep.observation, timestep, timestep.reward, terminated, {}

    def is_truncated(self, state: Any, params: Any) -> jax.Array:
        return (state.step_type == LAST) & (state.discount > 0.0)

    def episode_metrics(self, state: Any, params: Any) -> dict[str, jax.Array]:
        """`success`: the fraction of episodes that ended with the goal reached (a terminal
        reward; Memory tasks also terminate, unrewarded, on the wrong object)."""
        done_well = (state.step_type == LAST) & (state.discount == 0.0) & (state.reward > 0.0)
        return {"success": done_well.astype(jnp.float32)}

    def render(self, state: Any, params: Any) -> np.ndarray:
        """One frame (uint8 [H, W, 3]) for `jaxppo eval --gif`: XLand-MiniGrid's own RGB
        renderer, whatever `render_mode` the params name."""
        return np.asarray(self.env.render(params.replace(render_mode="rgb_array"), state))

    def observation_space(self, params: Any) -> Box:
        return Box(0, 255, tuple(int(s) for s in self.env.observation_shape(params)), np.uint8)

    def action_space(self, params: Any) -> Discrete:
        return Discrete(int(self.env.num_actions(params)))
