"""Brax environments behind gymnax's `Environment` API, so `VecEnv`, the rollout and the whole
compiled train loop run them unchanged (`env_id: brax/<name>`).

Brax's own `env.step` neither resets nor stops episodes: its `done` is termination only (the
hopper fell, the pole dropped). This adapter counts steps and truncates at Brax's and Gym's
episode length of 1000, so a time limit bootstraps like gymnax's and is never taken for death.
Resets happen in `VecEnv` with a fresh key each time (Brax's training wrapper instead replays the
first reset state of each env forever).

Brax is an optional dependency (`pip install 'jaxppo[brax]'`); it is imported only for
`brax/` ids.
"""

from __future__ import annotations

import contextlib
import functools
import io
import re
import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxppo.envs.spaces import Box
from jaxppo.errors import ConfigError

PREFIX = "brax/"
SUITE = "Brax"
EPISODE_LENGTH = 1000
INSTALL_HINT = "pip install 'jaxppo[brax]'"

SOLVE_THRESHOLDS: dict[str, float] = {
    # The reward_threshold of Gymnasium's MuJoCo counterpart (same reward terms and 1000-step
    # episodes): InvertedDoublePendulum-v4, InvertedPendulum-v4, Hopper-v4, Ant-v4.
    PREFIX + "inverted_double_pendulum": 9100.0,
    PREFIX + "inverted_pendulum": 950.0,
    PREFIX + "hopper": 3800.0,
    PREFIX + "ant": 6000.0,
}


def _config_error(message: str):
    return ConfigError(f"config key 'env_id': {message}")


def import_brax_envs(env_id: str = PREFIX):
    """`brax.envs`, or a one-line `ConfigError` saying how to install Brax."""
    try:
        # mujoco.mjx prints "Failed to import warp" to stdout on import when the optional
        # NVIDIA Warp backend is absent, which it is everywhere jaxppo runs; keep stdout clean.
        with contextlib.redirect_stdout(io.StringIO()):
            from brax import envs
    except ImportError as e:
        raise _config_error(f"{env_id!r} needs Brax, which is not installed ({e}); "
                            f"install it with: {INSTALL_HINT}") from None
    return envs


def brax_env_ids() -> list[str]:
    envs = import_brax_envs()
    return sorted(PREFIX + name for name in envs._envs)  # noqa: SLF001 - Brax's registry


env_ids = brax_env_ids


def make(name: str, kwargs: dict[str, Any]) -> tuple[BraxEnv, BraxParams]:
    """The adapter's entry point (`registry.make_env`); `kwargs` go to Brax's
    `get_environment` (e.g. `backend`)."""
    env = make_brax_env(PREFIX + name, tuple(sorted(kwargs.items())))
    return env, env.default_params


def suggest_id(env_id: str) -> str | None:
    """`brax/<name>` for a Gymnasium-style MuJoCo id (`InvertedDoublePendulum-v4`, `hopper`,
    `HalfCheetah-v5`) that Brax has, so a user who typed the PyTorch tutorial's id is pointed
    at it. Names are compared without case, underscores or the version suffix, from Brax's
    names as jaxppo knows them: importing Brax (MuJoCo's MJX) costs ~2 s for every typo."""
    def squash(name: str) -> str:
        return re.sub(r"-v\d+$", "", name.strip()).replace("_", "").replace("-", "").lower()

    by_squashed = {squash(n): n for n in sorted(BRAX_NAMES)}
    name = by_squashed.get(squash(env_id))
    return PREFIX + name if name else None


# Brax's registered environments (brax 0.14; its test-only `fast` left out), for suggestions
# without importing Brax (tests/integration/test_brax.py holds it to Brax's registry).
BRAX_NAMES = frozenset({"ant", "halfcheetah", "hopper", "humanoid", "humanoidstandup",
                         "inverted_pendulum", "inverted_double_pendulum", "pusher", "reacher",
                         "swimmer", "walker2d"})


@struct.dataclass
class BraxParams:
    max_steps_in_episode: int = EPISODE_LENGTH


@struct.dataclass
class BraxState:
    inner: Any  # brax.envs.base.State: pipeline_state, obs, reward, done, metrics, info
    time: jax.Array  # steps taken in this episode


class BraxEnv:
    """One Brax environment with the part of gymnax's single-env API that `VecEnv` uses
    (`reset`/`reset_env`, `step_env`, `is_truncated`, spaces, `default_params`).

    Not a subclass of gymnax's `Environment`: importing gymnax's environment modules creates
    arrays, which would start JAX's backend before `jax.distributed.initialize` can run.
    """

    expensive_reset = True  # tells VecEnv to reset lazily instead of pre-drawing T x N resets

    def __init__(self, env_id: str, brax_env: Any):
        self.env_id = env_id
        self.brax_env = brax_env
        # Brax's `observation_size` runs a reset op by op (~7 s of tiny compiles); trace instead.
        obs = jax.eval_shape(brax_env.reset, jax.random.key(0)).obs
        self.obs_size = int(obs.shape[-1])
        self.action_size = int(brax_env.action_size)
        ctrl = getattr(getattr(getattr(brax_env, "sys", None), "actuator", None), "ctrl_range",
                       None)
        ctrl = np.asarray(ctrl, np.float32) if ctrl is not None else None
        if ctrl is None or ctrl.shape != (self.action_size, 2):
            ctrl = np.tile(np.array([[-1.0, 1.0]], np.float32), (self.action_size, 1))
        self.action_low, self.action_high = ctrl[:, 0], ctrl[:, 1]

    @property
    def default_params(self) -> BraxParams:
        return BraxParams()

    def reset_env(self, key: jax.Array, params: BraxParams):
        inner = self.brax_env.reset(key)
        return inner.obs.astype(jnp.float32), BraxState(inner, jnp.int32(0))

    reset = reset_env

    def step_env(self, key: jax.Array, state: BraxState, action: jax.Array, params: BraxParams):
        del key  # Brax's dynamics are deterministic; randomness enters through resets only
        inner = self.brax_env.step(state.inner, action)
        terminated = inner.done > 0.5
        return (inner.obs.astype(jnp.float32), BraxState(inner, state.time + 1), inner.reward,
                terminated, {})

    def is_truncated(self, state: BraxState, params: BraxParams) -> jax.Array:
        return state.time >= params.max_steps_in_episode

    def observation_space(self, params: BraxParams) -> Box:
        return Box(-np.inf, np.inf, (self.obs_size,))

    def action_space(self, params: BraxParams) -> Box:
        return Box(self.action_low, self.action_high, (self.action_size,))


@functools.cache
def make_brax_env(env_id: str, kwargs: tuple[tuple[str, Any], ...] = ()) -> BraxEnv:
    """Build (once per process: parsing the MJCF model takes seconds) the Brax env `env_id`,
    a known id (`envs.check_env_id`)."""
    envs = import_brax_envs(env_id)
    with warnings.catch_warnings():
        # "Brax System, pipelines and environments are not actively being maintained": known,
        # and said once in the README rather than on every run.
        warnings.simplefilter("ignore", UserWarning)
        try:
            return BraxEnv(env_id, envs.get_environment(env_id[len(PREFIX):], **dict(kwargs)))
        except TypeError as e:
            raise _config_error(f"Brax's {env_id!r} does not take env_kwargs "
                                f"{[k for k, _ in kwargs]} ({e})") from None
        except Exception as e:  # noqa: BLE001 - a bad value (backend: nope) fails inside Brax
            text = str(e).strip().splitlines()
            raise ConfigError(f"config key 'env_kwargs': Brax could not build {env_id!r} with "
                              f"{dict(kwargs)} ({type(e).__name__}: {text[0] if text else ''})"
                              ) from None


def pipeline_states(states: list[BraxState]) -> list[Any]:
    return [s.inner.pipeline_state for s in states]


def write_html(env: BraxEnv, states: list[BraxState], path: str) -> None:
    """Brax's three.js viewer as one HTML file (the viewer script loads from a CDN)."""
    from brax.io import html

    sys = env.brax_env.sys.tree_replace({"opt.timestep": env.brax_env.dt})
    with open(path, "w") as f:
        f.write(html.render(sys, pipeline_states(states), colab=False))


def _rotate(quat: np.ndarray, vec: np.ndarray) -> np.ndarray:
    """Rotate `vec [..., 3]` by unit quaternions `quat [..., 4]` (w, x, y, z)."""
    w, u = quat[..., :1], quat[..., 1:]
    return vec + 2.0 * np.cross(u, np.cross(u, vec) + w * vec)


def _geom_segments(sys: Any, x_pos: np.ndarray, x_rot: np.ndarray):
    """World-frame `(start [G, 3], end [G, 3], radius [G])` of the capsules, cylinders and
    spheres (a sphere is a segment of length 0); body 0 is the world, body b is link b - 1."""
    types = np.asarray(sys.geom_type)
    keep = np.isin(types, (2, 3, 5))  # mjGEOM_SPHERE, CAPSULE, CYLINDER
    body = np.asarray(sys.geom_bodyid)[keep]
    size = np.asarray(sys.geom_size)[keep]
    half = np.where(types[keep] == 2, 0.0, size[:, 1])
    axis = _rotate(np.asarray(sys.geom_quat)[keep], np.stack(
        [np.zeros_like(half), np.zeros_like(half), half], -1))
    centre = np.asarray(sys.geom_pos)[keep]
    link_pos = np.concatenate([np.zeros((1, 3)), x_pos])[body]
    link_rot = np.concatenate([np.array([[1.0, 0, 0, 0]]), x_rot])[body]
    start = link_pos + _rotate(link_rot, centre - axis)
    end = link_pos + _rotate(link_rot, centre + axis)
    return start, end, size[:, 0]


def write_gif(env: BraxEnv, states: list[BraxState], returns: list[float], path: str,
              fps: int = 30) -> None:
    """A side view (the x-z plane) of the bodies' capsules, drawn with matplotlib: the whole
    episode at once, for axes that fit every frame (`jaxppo eval --gif`).

    Brax's own image renderer needs an OpenGL context (MuJoCo's renderer), which headless
    machines and CI lack; this one needs nothing but matplotlib and Pillow.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from PIL import Image

    sys = env.brax_env.sys
    segs = [_geom_segments(sys, np.asarray(p.x.pos), np.asarray(p.x.rot))
            for p in pipeline_states(states)]
    pts = np.concatenate([np.concatenate([a, b]) for a, b, _ in segs])
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    pad = 0.15 * max(float(np.max(hi - lo)), 1.0)
    xlim, zlim = (lo[0] - pad, hi[0] + pad), (lo[2] - pad, hi[2] + pad)
    fig, ax = plt.subplots(figsize=(5, 4), dpi=80)
    points_per_unit = 5 * 72 * 0.75 / (xlim[1] - xlim[0])  # ~75% of the width is the axes
    every = max(1, round(1.0 / (float(env.brax_env.dt) * fps)))
    frames = []
    for f in range(0, len(states), every):
        ax.clear()
        ax.set_xlim(*xlim)
        ax.set_ylim(*zlim)
        ax.set_aspect("equal", adjustable="box")
        ax.axhline(0.0, color="0.6", lw=1)
        for a, b, r in zip(*segs[f], strict=True):
            ax.plot([a[0], b[0]], [a[2], b[2]], "-", color="tab:blue", solid_capstyle="round",
                    lw=max(1.0, 2 * r * points_per_unit))
        ax.set_title(f"{env.env_id}  step {f}  return {returns[f]:.1f}", fontsize=9)
        fig.canvas.draw()
        frames.append(Image.fromarray(np.asarray(fig.canvas.buffer_rgba())[..., :3]))
    plt.close(fig)
    frames[0].save(path, save_all=True, append_images=frames[1:], duration=1000 // fps, loop=0)
