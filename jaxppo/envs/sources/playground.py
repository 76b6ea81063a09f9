"""MuJoCo Playground's DM Control suite behind jaxppo's env protocol (`env_id: playground/<name>`,
e.g. `playground/CartpoleBalance`).

Playground's `env.step(state, action)` neither resets nor stops episodes, and its `done` is
termination only: in the DM Control suite it fires only when the simulation diverges (NaN in
qpos/qvel), so a DM Control episode in practice always ends by its time limit. The time limit
(`episode_length`, 1000 steps) and `action_repeat` live in the env's config but are applied by
Playground's training wrapper, not by the env; this adapter applies both the same way (the
limit as `max_episode_steps`, which `VecEnv` truncates and bootstraps at; repeats summing their
rewards), so a time limit is never taken for death.

`env_kwargs` take Playground's `registry.load(name, config_overrides=...)` argument:
`env_kwargs: {config_overrides: {impl: warp, episode_length: 500}}` (nested dicts are flattened
to Playground's dotted keys). Playground's default physics engine is MuJoCo Warp, whose fast
path needs CUDA; where JAX runs on the CPU the adapter picks `impl: jax` unless told otherwise.

Only the DM Control suite is offered: its MJCF files ship inside the package, whereas the
locomotion and manipulation environments `git clone` the MuJoCo Menagerie from GitHub at first
use, and jaxppo never downloads at run time. Playground is an optional dependency
(`pip install 'jaxppo[playground]'`), imported only for `playground/` ids.
"""

from __future__ import annotations

import contextlib
import io
import math
import re
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxppo.envs.sources.suite import require
from jaxppo.envs.spaces import Box
from jaxppo.errors import ConfigError

PREFIX = "playground/"
SUITE = "MuJoCo Playground"
INSTALL_HINT = "pip install 'jaxppo[playground]'"
MODULE = "mujoco_playground"

# Playground 0.x's DM Control suite, for "did you mean" hints without importing Playground
# (~5 s); a test checks it against the installed registry.
DM_CONTROL_NAMES = (
    "AcrobotSwingup", "AcrobotSwingupSparse", "BallInCup", "CartpoleBalance",
    "CartpoleBalanceSparse", "CartpoleSwingup", "CartpoleSwingupSparse", "CheetahRun",
    "FingerSpin", "FingerTurnEasy", "FingerTurnHard", "FishSwim", "HopperHop", "HopperStand",
    "HumanoidRun", "HumanoidStand", "HumanoidWalk", "PendulumSwingup", "PointMass",
    "ReacherEasy", "ReacherHard", "SwimmerSwimmer6", "WalkerRun", "WalkerStand", "WalkerWalk")


def _playground(env_id: str = ""):
    return require(MODULE, SUITE, INSTALL_HINT, env_id)


def env_ids() -> list[str]:
    """The DM Control suite as the installed Playground registers it (works offline)."""
    pg = _playground()
    return sorted(PREFIX + name for name in pg.dm_control_suite.ALL_ENVS)


def unsupported_reason(env_id: str) -> str | None:
    """Why a real Playground id outside `env_ids()` is refused (the locomotion and manipulation
    suites), or None: one line for the registry to show instead of "unknown id"."""
    name = env_id[len(PREFIX):] if env_id.startswith(PREFIX) else env_id
    pg = _playground(env_id)
    for suite in ("locomotion", "manipulation"):
        if name in getattr(pg, suite).ALL_ENVS:
            return (f"{PREFIX}{name} is a {SUITE} {suite} environment, which clones the MuJoCo "
                    "Menagerie robot assets from GitHub at first use; jaxppo supports only "
                    "Playground's DM Control suite (its assets ship with the package), e.g. "
                    f"{PREFIX}CartpoleBalance")
    return None


def suggest_id(env_id: str) -> str | None:
    """`playground/<name>` for a bare Playground name or a DM Control style id
    (`CartpoleBalance`, `cartpole-balance`, `cartpole/balance`), compared without case or
    separators."""
    def squash(name: str) -> str:
        return re.sub(r"[-_/ ]", "", re.sub(r"-v\d+$", "", name.strip())).lower()

    by_squashed = {squash(n): n for n in DM_CONTROL_NAMES}
    name = by_squashed.get(squash(env_id))
    return PREFIX + name if name else None


def _flatten(overrides: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts (as YAML writes them) -> Playground's dotted keys (`vision_config.nworld`)."""
    flat: dict[str, Any] = {}
    for key, value in overrides.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def make(name: str, kwargs: dict[str, Any]) -> tuple[PlaygroundEnv, None]:
    """The adapter's entry point (`registry.make_env`): `kwargs` may hold `config_overrides`,
    passed to Playground's `registry.load`."""
    env_id = PREFIX + name
    reason = unsupported_reason(env_id)
    if reason:
        raise ConfigError(f"config key 'env_id': {reason}")
    pg = _playground(env_id)
    if name not in pg.dm_control_suite.ALL_ENVS:
        raise ConfigError(f"config key 'env_id': unknown {SUITE} environment {env_id!r}")
    unknown = sorted(set(kwargs) - {"config_overrides"})
    if unknown:
        raise ConfigError(f"config key 'env_kwargs': {env_id!r} takes only config_overrides "
                          f"(Playground's registry.load argument), not {', '.join(unknown)}")
    overrides = kwargs.get("config_overrides") or {}
    if not isinstance(overrides, dict):
        raise ConfigError(f"config key 'env_kwargs': config_overrides must be a mapping of "
                          f"Playground config keys, got {type(overrides).__name__}")
    overrides = _flatten(overrides)
    if "impl" not in overrides and jax.default_backend() == "cpu":
        overrides["impl"] = "jax"  # MuJoCo Warp's fast path needs CUDA
    default = pg.registry.get_default_config(name)
    missing = [k for k in overrides if not _has_key(default, k)]
    if missing:
        raise ConfigError(f"config key 'env_kwargs': {env_id!r}'s Playground config has no key "
                          f"{', '.join(repr(k) for k in missing)}; its keys are "
                          f"{', '.join(sorted(default.keys()))}")
    try:
        env = pg.registry.load(name, config_overrides=overrides)
    except Exception as e:  # noqa: BLE001 - a bad override value fails deep in MuJoCo: one line
        text = str(e).strip().splitlines()
        raise ConfigError(f"config key 'env_kwargs': Playground could not build {env_id!r} with "
                          f"config_overrides {overrides} ({type(e).__name__}: "
                          f"{text[0] if text else ''})") from None
    return PlaygroundEnv(env_id, env), None


def _has_key(config: Any, dotted: str) -> bool:
    for part in dotted.split("."):
        if not hasattr(config, "keys") or part not in config.keys():
            return False
        config = config[part]
    return True


def _positive(env_id: str, config: Any, key: str, default: int) -> int:
    """A Playground config's `episode_length` or `action_repeat`, refused unless a positive
    integer (the config key `max_episode_steps`'s rule): 0 or -3 would mean "no time limit" or
    "truncate every step" without a word."""
    value = config.get(key, default)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ConfigError(f"config key 'env_kwargs': {env_id!r}'s config_overrides {key} is "
                          f"{value!r}; use a positive integer (Playground's default: {default})")
    return int(value)


def _finite(x: jax.Array) -> jax.Array:
    """Non-finite values (a diverged simulation) -> 0, so NaN never reaches the learner: the
    step that diverged is terminal, and `0 * NaN` would still poison GAE and the normalizers."""
    return jnp.where(jnp.isfinite(x), x, jnp.zeros_like(x))


@struct.dataclass
class PlaygroundState:
    """Playground's own `State` (mjx `data`, obs, reward, done, metrics, info) kept as its
    leaves: checkpoints save the env state with flax's serialization, which knows tuples of
    arrays but not MJX's `Data` class. `.playground` is the `State` itself."""

    leaves: tuple
    treedef: Any = struct.field(pytree_node=False)

    @classmethod
    def wrap(cls, state: Any) -> PlaygroundState:
        leaves, treedef = jax.tree.flatten(state)
        return cls(tuple(leaves), treedef)

    @property
    def playground(self) -> Any:
        return jax.tree.unflatten(self.treedef, self.leaves)


class PlaygroundEnv:
    """One Playground environment with jaxppo's env protocol: Playground's `State` (wrapped in
    a `PlaygroundState`) is the state; params are unused (None)."""

    expensive_reset = True  # reset runs mjx.forward: reset lazily, only where episodes end
    default_params = None

    def __init__(self, env_id: str, env: Any):
        self.env_id = env_id
        self.playground_env = env
        config = env._config  # noqa: SLF001 - episode_length/action_repeat: Playground's wrapper's
        self.action_repeat = _positive(env_id, config, "action_repeat", 1)
        self.max_episode_steps = math.ceil(_positive(env_id, config, "episode_length", 1000)
                                           / self.action_repeat)
        self.action_size = int(env.action_size)
        model = env.mj_model
        limited = np.asarray(model.actuator_ctrllimited, bool)
        ctrl = np.asarray(model.actuator_ctrlrange, np.float32).reshape(-1, 2)
        if ctrl.shape[0] == self.action_size and limited.all():
            self.action_low, self.action_high = ctrl[:, 0], ctrl[:, 1]
        else:  # Playground's convention (its PPO squashes actions to [-1, 1])
            self.action_low = -np.ones(self.action_size, np.float32)
            self.action_high = np.ones(self.action_size, np.float32)
        obs = jax.eval_shape(env.reset, jax.random.key(0)).obs
        self.obs_shape = tuple(obs.shape) if hasattr(obs, "shape") else None

    def render(self, state: PlaygroundState, params: Any = None) -> np.ndarray:
        """One frame (uint8 [H, W, 3]) for `jaxppo eval --gif`: Playground's MuJoCo renderer,
        which needs an OpenGL context (headless: MUJOCO_GL=egl on a GPU, or osmesa)."""
        try:
            with contextlib.redirect_stderr(io.StringIO()):  # a progress bar per frame
                frames = self.playground_env.render([state.playground], height=240, width=320)
        except Exception as e:  # noqa: BLE001 - no GL context: say so, the evaluation stands
            why = str(e).strip().split(",")[0]
            raise NotImplementedError(
                f"MuJoCo cannot draw here ({type(e).__name__}: {why}); it needs OpenGL: set "
                "MUJOCO_GL=egl (EGL: a GPU, or Mesa's) or MUJOCO_GL=osmesa") from None
        return np.asarray(frames[0])

    def reset_env(self, key: jax.Array, params: Any = None):
        state = self.playground_env.reset(key)
        return state.obs, PlaygroundState.wrap(state)

    def _step(self, state: Any, action: jax.Array) -> Any:
        if self.action_repeat == 1:
            return self.playground_env.step(state, action)

        def repeat(s, _):  # Brax's EpisodeWrapper: step again with the action, sum the rewards
            s = self.playground_env.step(s, action)
            return s, s.reward

        state, rewards = jax.lax.scan(repeat, state, None, length=self.action_repeat)
        return state.replace(reward=jnp.sum(rewards))

    def step_env(self, key: jax.Array, state: PlaygroundState, action: jax.Array,
                 params: Any = None):
        del key  # the physics is deterministic; randomness enters through resets only
        nxt = self._step(state.playground, action)
        terminated = nxt.done > 0.5
        obs = jax.tree.map(_finite, nxt.obs)
        return obs, PlaygroundState.wrap(nxt), _finite(nxt.reward), terminated, {}

    def observation_space(self, params: Any = None) -> Box:
        return Box(-np.inf, np.inf, self.obs_shape or ())

    def action_space(self, params: Any = None) -> Box:
        return Box(self.action_low, self.action_high, (self.action_size,))
