"""One episode as a picture: a GIF (the env's own `render(state, params)` hook, which the
Navix, Craftax, Jumanji, XLand-MiniGrid and Playground adapters provide from their library's
renderer; gymnasium's classic-control renderer; gymnax's Visualizer for MinAtar; an adapter's
own whole-episode `write_gif`, Brax's side view) or an adapter's `write_html` (Brax's
interactive viewer).

The hook, for your own environment: `render(state, params) -> uint8 [H, W, 3]`, called on the
host once per frame with one (unbatched) state; raising `NotImplementedError("why")` says it
cannot draw here (then `NoRenderer`, as for an env without a hook)."""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from PIL import Image, ImageDraw

from jaxppo.config import PPOConfig
from jaxppo.core.networks import make_network
from jaxppo.core.train import TrainState
from jaxppo.envs import HostVecEnv
from jaxppo.envs.registry import host_source_of, source_of
from jaxppo.errors import UsageError
from jaxppo.plots import pyplot
from jaxppo.policy.episodes import max_episode_steps, play_episode, policy_action
from jaxppo.process import stop_point
from jaxppo.rundir.files import check_writable, write_failed

_CLASSIC_CONTROL = ("Acrobot-v1", "CartPole-v1", "Pendulum-v1", "MountainCar-v0",
                    "MountainCarContinuous-v0")


class NoRenderer(RuntimeError):
    """The environment cannot draw frames (it has no renderer, or none that works here). Not a
    fault of the run: `jaxppo eval` says so in one line and exits as the evaluation did."""


def _installed(module: str) -> bool:
    if module in sys.modules:
        return sys.modules[module] is not None
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing_renderer(env_id: str) -> str | None:
    """Why a GIF of `env_id` cannot be drawn on this install (the render extra missing), or
    None: asked before anything is evaluated, so `eval --gif` refuses in one line with nothing
    written instead of failing after the evaluation."""
    name = env_id.removeprefix("gymnasium/")
    if name in _CLASSIC_CONTROL and not all(map(_installed, ("gymnasium", "pygame"))):
        return (f"rendering {env_id} needs gymnasium's classic-control renderer: pip install "
                "'jaxppo[render]'")
    return None


def render_gif(config: PPOConfig, train_state: TrainState, key: jax.Array, path: str,
               deterministic: bool = True, *, env: Any = None, env_params: Any = None) -> int:
    """Render one episode to a GIF (the env's `render` hook, gymnasium's renderer for classic
    control, gymnax's Visualizer for the others, the adapter's `write_gif` where it draws whole
    episodes: Brax's side view); returns the episode length. `env`: the environment instance
    the run trained on, if not `config.env_id`'s."""
    check_writable(path, "GIF")
    if host_source_of(config.env_id) is not None and env is None:
        return _host_gif(config, train_state, key, path, deterministic)
    venv, states, rewards, length = play_episode(config, train_state, key, deterministic,
                                                 env=env, env_params=env_params)
    writer = _episode_writer(config.env_id, "write_gif")  # a suite's own (Brax's side view)
    if writer is not None:
        try:
            writer(venv.env, states, rewards, path)
        except OSError as e:
            if e.filename not in (None, path):
                raise
            raise write_failed(path, "GIF", e) from None
        return length
    # gymnax's env modules create arrays on import: not before jax.distributed starts
    from gymnax.environments.environment import Environment

    # gymnax's own envs' `render` (some have one) returns a matplotlib figure for gymnax's
    # Visualizer, not a frame: the hook is any other `render`, a gymnax subclass's included.
    hook = getattr(venv.env, "render", None)
    classic = config.env_id in _CLASSIC_CONTROL
    if (callable(hook) and not classic
            and not getattr(hook, "__module__", "").startswith("gymnax.")):
        _save_gif(_hook_frames(venv, states, rewards, config.env_id), path, 100)
        return length
    if not classic and not isinstance(venv.env, Environment):
        raise NoRenderer(f"no renderer for {config.env_id}: its environment has no "
                         "render(state, params) method returning a uint8 [H, W, 3] frame (the "
                         "optional hook; see the README's 'Your own environment')")
    # pygame (under gymnasium's renderer) opens an audio device and a display on init; headless
    # machines then print thousands of ALSA/XDG errors. Drawing needs neither.
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    try:
        if config.env_id in _CLASSIC_CONTROL:
            frames = _classic_control_frames(config.env_id, venv.params, states, rewards)
            _save_gif(frames, path, 50)
        else:
            from gymnax.visualize import Visualizer

            write_gif(Visualizer(venv.env, venv.params, states, np.array(rewards)), len(states),
                      path)
    except UsageError:  # the GIF could not be written: the path's fault, not the renderer's
        raise
    except Exception as e:  # noqa: BLE001 - a missing visualizer must not crash eval
        if type(e).__name__ in ("DependencyNotInstalled", "ModuleNotFoundError"):
            raise RuntimeError(f"rendering {config.env_id} needs gymnasium's classic-control "
                               "renderer: pip install 'jaxppo[render]'") from None
        raise NoRenderer(f"no renderer for {config.env_id}: gymnax's visualizer cannot draw it "
                         f"({type(e).__name__}: {e})") from None
    return length


def _hook_frames(venv: Any, states: list, rewards: list[float], env_id: str) -> list:
    """Each state drawn by the env's own `render(state, params)`, enlarged towards 160 pixels
    on its short side (grid worlds draw small tiles) and kept within 480 on its long side, and
    captioned with the step and return."""
    frames = []
    for t, state in enumerate(states):
        stop_point("while rendering")  # a held stop signal (`jaxppo eval`): per frame
        try:
            frame = np.asarray(venv.env.render(state, venv.params))
        except NotImplementedError as e:
            raise NoRenderer(f"no renderer for {env_id}: {e}") from None
        frames.append(_caption(frame, t, rewards[t], env_id))
    return frames


def _caption(frame: np.ndarray, t: int, ret: float, env_id: str,
             what: str = "render(state, params)"):
    """One frame enlarged towards 160 pixels on its short side (grid worlds draw small
    tiles), kept within 480 on its long side, and captioned with the step and return."""
    if frame.ndim == 3 and frame.shape[2] == 4:
        frame = frame[..., :3]  # RGBA (matplotlib canvases)
    if frame.ndim != 3 or frame.shape[2] != 3 or frame.dtype != np.uint8:
        raise RuntimeError(f"{env_id}: {what} returned {frame.dtype} {frame.shape}; it must "
                           "return one frame, uint8 [H, W, 3]")
    scale = max(1, min(-(-160 // min(frame.shape[:2])), 480 // max(frame.shape[:2])))
    picture = Image.fromarray(np.repeat(np.repeat(frame, scale, axis=0), scale, axis=1))
    if max(picture.size) > 480:  # matplotlib viewers (Jumanji) draw 1000 x 1000 figures
        picture.thumbnail((480, 480))
    w, h = picture.size
    image = Image.new("RGB", (w, h + 14), (255, 255, 255))
    image.paste(picture, (0, 0))
    ImageDraw.Draw(image).text((4, h + 1), f"step {t + 1}  return {ret:.2f}", fill=(0, 0, 0))
    return image


def _host_gif(config: PPOConfig, train_state: TrainState, key: jax.Array, path: str,
              deterministic: bool) -> int:
    """One episode of a host env (in its evaluation setting), played from the host step by
    step with the jitted policy: drawn by the source's `render`, else from image observations
    themselves ([H, W, 1 or 3])."""
    env = HostVecEnv.from_config(config, 1, evaluation=True, render=True)
    act = jax.jit(functools.partial(policy_action, make_network(config, env),
                                    deterministic=deterministic,
                                    normalize=config.normalize_obs))
    frames, total = [], 0.0
    try:
        source = env.source
        obs = source.reset(np.array([int(jax.random.bits(key, dtype=jnp.uint32))]))
        for t in range(max_episode_steps(env)):
            stop_point("while rendering")
            frames.append(_caption(_host_frame(source, obs[0], config.env_id), t, total,
                                   config.env_id, "the source's render"))
            action = act(train_state, jnp.asarray(obs, env.obs_dtype), jax.random.fold_in(key, t))
            step = source.step(np.asarray(action))
            total += float(step.score[0])
            if step.game_over[0]:
                break
            obs = step.obs
    finally:
        env.close()
    _save_gif(frames, path, 50)
    return len(frames)


def _host_frame(source: Any, obs: np.ndarray, env_id: str) -> np.ndarray:
    try:
        return np.asarray(source.render(0))
    except NotImplementedError as e:
        if obs.ndim == 3 and obs.shape[2] in (1, 3) and obs.dtype == np.uint8:
            return np.repeat(obs, 3 // obs.shape[2], axis=2)
        raise NoRenderer(f"no renderer for {env_id}: {e}") from None


def render_html(config: PPOConfig, train_state: TrainState, key: jax.Array, path: str,
                deterministic: bool = True) -> int:
    """Write one episode as its adapter's interactive viewer (`write_html`: Brax's 3D viewer);
    returns the episode length."""
    write_html = _episode_writer(config.env_id, "write_html")
    if write_html is None:
        raise RuntimeError(f"HTML rendering is for Brax environments; {config.env_id} is a "
                           "gymnax environment (use --gif)")
    check_writable(path, "HTML")
    venv, states, _, length = play_episode(config, train_state, key, deterministic)
    try:
        write_html(venv.env, states, path)
    except OSError as e:
        raise write_failed(path, "HTML", e) from None
    return length


def _episode_writer(env_id: str, name: str) -> Any:
    """The adapter's optional whole-episode writer (`write_gif`, `write_html`), or None."""
    source = source_of(env_id)
    return getattr(source, name, None) if source is not None else None


def _classic_control_frames(env_id: str, params: Any, states: list, rewards: list[float]) -> list:
    """Draw each state with one gymnasium env at `rgb_array` (gymnax's Visualizer makes a new
    gymnasium env, and so a new pygame surface, per frame, and redraws a matplotlib figure:
    about 35x slower)."""
    import gymnasium as gym  # the optional render extra
    from gymnax.visualize.vis_gym import get_gym_state, set_gym_params

    gym_env = gym.make(env_id, render_mode="rgb_array")
    frames = []
    try:
        gym_env.reset(seed=0)
        inner = gym_env.unwrapped
        set_gym_params(inner, env_id, params)
        for t, state in enumerate(states):
            stop_point("while rendering")
            inner.state = get_gym_state(state, env_id)
            if env_id == "Pendulum-v1":
                inner.last_u = np.asarray(state.last_u, np.float64)
            frame = Image.fromarray(np.asarray(gym_env.render()))
            ImageDraw.Draw(frame).text((8, 8), f"{env_id}  step {t + 1}  return {rewards[t]:.1f}",
                                       fill=(0, 0, 0))
            frames.append(frame)
    finally:
        gym_env.close()
    return frames


def write_gif(vis, num_frames: int, path: str) -> None:
    """Draw each frame with gymnax's Visualizer and save with Pillow (matplotlib's animation
    writer produced empty GIFs with it on matplotlib 3.11)."""
    vis.init()
    frames = []
    for i in range(num_frames):
        stop_point("while rendering")
        vis.update(i)
        vis.fig.canvas.draw()
        frames.append(Image.fromarray(np.asarray(vis.fig.canvas.buffer_rgba())[..., :3]))
    pyplot().close(vis.fig)
    _save_gif(frames, path, vis.interval)


def _save_gif(frames: list, path: str, interval_ms: int) -> None:
    """Save RGB frames with one palette, taken from the first, middle and last frames: Pillow
    otherwise quantizes each frame on its own, 7 of the 8 s a 500-frame CartPole GIF took."""
    picks = sorted({0, len(frames) // 2, len(frames) - 1})
    sample = np.concatenate([np.asarray(frames[i]) for i in picks], axis=0)
    palette = Image.fromarray(sample).quantize(colors=128)
    frames = [f.quantize(palette=palette, dither=Image.Dither.NONE) for f in frames]
    try:
        frames[0].save(path, save_all=True, append_images=frames[1:], duration=interval_ms,
                       loop=0)
    except OSError as e:  # drawing is done: only the file can have failed
        raise write_failed(path, "GIF", e) from None
