"""Evaluate a trained policy: whole episodes inside one jitted scan, and an optional GIF.

Each of E envs plays exactly one episode (the first); steps after its end are masked, so the
scan has the static length of the env's time limit. `evaluate_runs` vmaps that over the R runs
(seeds or sweep settings) of a checkpoint: one program, one compile, for all of them.

Axis legend: R runs, E episodes, T = the env's time limit.

Keys: `key` splits into `(reset_key, run_key)`; episode e starts from
`env.reset(split(reset_key, E)[e])` and step t steps with `split(run_key, T)[t]`. Every run gets
the same `key` (common random numbers): the runs face the same start states, so their returns
differ by their policies, not by their luck.
"""

from __future__ import annotations

import functools
import os
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxppo import brax_env
from jaxppo.config import PPOConfig
from jaxppo.envs import EnvState, VecEnv
from jaxppo.errors import UsageError
from jaxppo.networks import make_network
from jaxppo.normalize import rms_normalize
from jaxppo.train import TrainState

_CLASSIC_CONTROL = ("Acrobot-v1", "CartPole-v1", "Pendulum-v1", "MountainCar-v0",
                    "MountainCarContinuous-v0")


class EpisodeCarry(NamedTuple):
    """The carry of the episode scan: E envs, each playing its first episode."""

    state: EnvState
    obs: jax.Array  # [E, *obs_shape]
    ret: jax.Array  # [E] return so far; frozen once the episode is over
    length: jax.Array  # [E] int32 steps so far
    finished: jax.Array  # [E] bool: the first episode has ended


def policy_action(network, ts: TrainState, obs: jax.Array, key: jax.Array | None, *,
                  deterministic: bool, normalize: bool) -> jax.Array:
    """The action for `obs` [B, *obs_shape]: the distribution's mode, or a sample from `key`.

    With `normalize`, observations first go through the normalizer saved in `ts`, as in
    training; a policy fed raw observations acts on inputs it never saw."""
    if normalize:
        obs = rms_normalize(ts.normalizer.obs, obs)
    dist = network.apply(ts.params, obs, method="policy")
    return dist.mode() if deterministic else dist.sample(key)


def _episode_step(carry: EpisodeCarry, key: jax.Array, *, env: VecEnv, network, ts: TrainState,
                  deterministic: bool, normalize: bool, record: bool):
    act_key, step_key = jax.random.split(key)
    action = policy_action(network, ts, carry.obs, act_key, deterministic=deterministic,
                           normalize=normalize)
    state, step = env.step(step_key, carry.state, action)
    live = ~carry.finished
    ret = carry.ret + jnp.where(live, step.reward, 0.0)
    carry = EpisodeCarry(state, step.obs, ret, carry.length + live.astype(jnp.int32),
                         carry.finished | step.done)
    return carry, ((state.inner, ret) if record else None)


def max_episode_steps(env: VecEnv) -> int:
    return int(getattr(env.params, "max_steps_in_episode", 1000))


def _play(env: VecEnv, network, ts: TrainState, key: jax.Array, *, deterministic: bool,
          normalize: bool, record: bool = False):
    """Reset `env`'s E envs and step them for the time limit in one scan. Returns the reset
    state, the final `EpisodeCarry` and, with `record`, per step `(env state, return so far)`."""
    reset_key, run_key = jax.random.split(key)
    obs, state = env.reset(reset_key)
    n = env.num_envs
    carry = EpisodeCarry(state, obs, jnp.zeros((n,)), jnp.zeros((n,), jnp.int32),
                         jnp.zeros((n,), bool))
    step = functools.partial(_episode_step, env=env, network=network, ts=ts,
                             deterministic=deterministic, normalize=normalize, record=record)
    final, per_step = jax.lax.scan(step, carry, jax.random.split(run_key, max_episode_steps(env)))
    return state, final, per_step


def _returns(ts: TrainState, key: jax.Array, *, env: VecEnv, network, deterministic: bool,
             normalize: bool) -> tuple[jax.Array, jax.Array]:
    _, final, _ = _play(env, network, ts, key, deterministic=deterministic, normalize=normalize)
    return final.ret, final.length


@functools.lru_cache(maxsize=16)
def _evaluator(config: PPOConfig, num_episodes: int, deterministic: bool, batched: bool):
    """One jitted evaluation per (config, E, mode): later calls reuse its compiled program."""
    env = VecEnv(config.env_id, num_episodes)
    run = functools.partial(_returns, env=env, network=make_network(config, env),
                            deterministic=deterministic, normalize=config.normalize_obs)
    return jax.jit(jax.vmap(run, in_axes=(0, None)) if batched else run)


def evaluate(config: PPOConfig, train_state: TrainState, key: jax.Array, num_episodes: int = 10,
             deterministic: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Return `(returns [E], lengths [E])` of one run's `num_episodes` episodes, played in
    parallel."""
    ret, length = _evaluator(config, num_episodes, deterministic, False)(train_state, key)
    return np.asarray(ret), np.asarray(length)


def evaluate_runs(config: PPOConfig, train_states: TrainState, key: jax.Array,
                  num_episodes: int = 10, deterministic: bool = True
                  ) -> tuple[np.ndarray, np.ndarray]:
    """`evaluate` for R runs at once (`train_states` leaves lead with R), vmapped in one
    program; every run plays with the same `key`. Returns `(returns [R, E], lengths [R, E])`."""
    ret, length = _evaluator(config, num_episodes, deterministic, True)(train_states, key)
    return np.asarray(ret), np.asarray(length)


@functools.lru_cache(maxsize=16)
def _episode_player(config: PPOConfig, deterministic: bool):
    env = VecEnv(config.env_id, 1)
    network = make_network(config, env)

    def run(ts, key):
        first, final, (inner, returns) = _play(env, network, ts, key, deterministic=deterministic,
                                               normalize=config.normalize_obs, record=True)
        return first.inner, inner, returns, final.length

    return env, jax.jit(run)


def play_episode(config: PPOConfig, train_state: TrainState, key: jax.Array,
                 deterministic: bool = True) -> tuple[VecEnv, list, list[float], int]:
    """Play one episode in one jitted scan; returns `(env, states, cumulative returns, length)`
    with one unbatched env state per frame (the reset state first, the terminal one excluded)."""
    env, run = _episode_player(config, deterministic)
    first, inner, returns, length = jax.device_get(run(train_state, key))
    length = int(length[0])
    states = [jax.tree.map(lambda x: x[0], first)]
    states += [jax.tree.map(lambda x, t=t: x[t, 0], inner) for t in range(length - 1)]
    rewards = [0.0] + [float(r) for r in returns[: length - 1, 0]]
    return env, states, rewards, length


def check_writable(path: str | os.PathLike, what: str) -> None:
    """Fail on a path that cannot be written before an episode is played, naming the path
    (and not the renderer that would otherwise fail on it)."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        reason = "it is a directory"
    elif not os.path.exists(folder):
        reason = f"directory '{folder}' does not exist"
    elif not os.path.isdir(folder):
        reason = f"'{folder}' is not a directory"
    elif not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        reason = "permission denied"
    else:
        return
    raise UsageError(f"cannot write {what} to '{path}': {reason}; pass a writable path")


def render_gif(config: PPOConfig, train_state: TrainState, key: jax.Array, path: str,
               deterministic: bool = True) -> int:
    """Render one episode to a GIF (gymnasium's renderer for classic control, gymnax's
    Visualizer for the others, a side view for Brax); returns the episode length."""
    check_writable(path, "GIF")
    env, states, rewards, length = play_episode(config, train_state, key, deterministic)
    if brax_env.is_brax_id(config.env_id):
        brax_env.write_gif(env.env, states, rewards, path)
        return length
    # pygame (under gymnasium's renderer) opens an audio device and a display on init; headless
    # machines then print thousands of ALSA/XDG errors. Drawing needs neither.
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    try:
        if config.env_id in _CLASSIC_CONTROL:
            frames = _classic_control_frames(config.env_id, env.params, states, rewards)
            _save_gif(frames, path, 50)
        else:
            from gymnax.visualize import Visualizer

            write_gif(Visualizer(env.env, env.params, states, np.array(rewards)), len(states),
                      path)
    except Exception as e:  # noqa: BLE001 - a missing visualizer must not crash eval
        if type(e).__name__ in ("DependencyNotInstalled", "ModuleNotFoundError"):
            raise RuntimeError(f"rendering {config.env_id} needs gymnasium's classic-control "
                               "renderer: pip install 'jaxppo[render]'") from None
        raise RuntimeError(f"gymnax has no working visualizer for {config.env_id}: "
                           f"{type(e).__name__}: {e}") from None
    return length


def render_html(config: PPOConfig, train_state: TrainState, key: jax.Array, path: str,
                deterministic: bool = True) -> int:
    """Write one episode as Brax's interactive 3D viewer (HTML); returns the episode length."""
    if not brax_env.is_brax_id(config.env_id):
        raise RuntimeError(f"HTML rendering is for Brax environments; {config.env_id} is a "
                           "gymnax environment (use --gif)")
    check_writable(path, "HTML")
    env, states, _, length = play_episode(config, train_state, key, deterministic)
    brax_env.write_html(env.env, states, path)
    return length


def _classic_control_frames(env_id: str, params: Any, states: list, rewards: list[float]) -> list:
    """Draw each state with one gymnasium env at `rgb_array` (gymnax's Visualizer makes a new
    gymnasium env, and so a new pygame surface, per frame, and redraws a matplotlib figure:
    about 35x slower)."""
    import gymnasium as gym
    from gymnax.visualize.vis_gym import get_gym_state, set_gym_params
    from PIL import Image, ImageDraw

    gym_env = gym.make(env_id, render_mode="rgb_array")
    frames = []
    try:
        gym_env.reset(seed=0)
        inner = gym_env.unwrapped
        set_gym_params(inner, env_id, params)
        for t, state in enumerate(states):
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
    import matplotlib.pyplot as plt
    from PIL import Image

    vis.init()
    frames = []
    for i in range(num_frames):
        vis.update(i)
        vis.fig.canvas.draw()
        frames.append(Image.fromarray(np.asarray(vis.fig.canvas.buffer_rgba())[..., :3]))
    plt.close(vis.fig)
    _save_gif(frames, path, vis.interval)


def _save_gif(frames: list, path: str, interval_ms: int) -> None:
    """Save RGB frames with one palette, taken from the first, middle and last frames: Pillow
    otherwise quantizes each frame on its own, 7 of the 8 s a 500-frame CartPole GIF took."""
    from PIL import Image

    picks = sorted({0, len(frames) // 2, len(frames) - 1})
    sample = np.concatenate([np.asarray(frames[i]) for i in picks], axis=0)
    palette = Image.fromarray(sample).quantize(colors=128)
    frames = [f.quantize(palette=palette, dither=Image.Dither.NONE) for f in frames]
    frames[0].save(path, save_all=True, append_images=frames[1:], duration=interval_ms, loop=0)
