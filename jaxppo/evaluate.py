"""Evaluate a trained policy: whole episodes inside one jitted scan, and an optional GIF.

Each of E envs plays exactly one episode (the first); steps after its end are masked, so the
scan has the static length of the env's time limit.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxppo import brax_env
from jaxppo.config import PPOConfig
from jaxppo.envs import VecEnv
from jaxppo.networks import make_network
from jaxppo.normalize import rms_normalize
from jaxppo.train import TrainState


def _policy_action(network, ts: TrainState, obs, key, deterministic: bool, normalize: bool):
    if normalize:
        obs = rms_normalize(ts.normalizer.obs, obs)
    dist = network.apply(ts.params, obs, method="policy")
    return dist.mode() if deterministic else dist.sample(key)


def _episode_step(carry, key, *, env: VecEnv, network, ts, deterministic, normalize):
    state, obs, ret, length, finished = carry
    act_key, step_key = jax.random.split(key)
    action = _policy_action(network, ts, obs, act_key, deterministic, normalize)
    state, step = env.step(step_key, state, action)
    live = ~finished
    ret = ret + jnp.where(live, step.reward, 0.0)
    length = length + live.astype(jnp.int32)
    finished = finished | step.done
    return (state, step.obs, ret, length, finished), (state.inner, ret)


def max_episode_steps(env: VecEnv) -> int:
    return int(getattr(env.params, "max_steps_in_episode", 1000))


def _play(env: VecEnv, network, ts, reset_key, run_key, *, deterministic, normalize):
    """Reset `env`'s E envs and step them for the time limit in one scan. Returns the reset
    state, the final `(state, obs, return [E], length [E], finished [E])` and per step
    `(env state, return so far)`."""
    obs, state = env.reset(reset_key)
    n = env.num_envs
    carry = (state, obs, jnp.zeros((n,)), jnp.zeros((n,), jnp.int32), jnp.zeros((n,), bool))
    step = functools.partial(_episode_step, env=env, network=network, ts=ts,
                             deterministic=deterministic, normalize=normalize)
    final, per_step = jax.lax.scan(step, carry, jax.random.split(run_key, max_episode_steps(env)))
    return state, final, per_step


def evaluate(config: PPOConfig, train_state: TrainState, key: jax.Array, num_episodes: int = 10,
             deterministic: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Return `(returns [E], lengths [E])` of `num_episodes` episodes, played in parallel."""
    env = VecEnv(config.env_id, num_episodes)
    network = make_network(config, env)

    @jax.jit
    def run(ts, key):
        reset_key, run_key = jax.random.split(key)
        _, (_, _, ret, length, _), _ = _play(env, network, ts, reset_key, run_key,
                                             deterministic=deterministic,
                                             normalize=config.normalize_obs)
        return ret, length

    ret, length = run(train_state, key)
    return np.asarray(ret), np.asarray(length)


def play_episode(config: PPOConfig, train_state: TrainState, key: jax.Array,
                 deterministic: bool = True) -> tuple[VecEnv, list, list[float], int]:
    """Play one episode in one jitted scan; returns `(env, states, cumulative returns, length)`
    with one unbatched env state per frame (the reset state first, the terminal one excluded)."""
    env = VecEnv(config.env_id, 1)
    network = make_network(config, env)

    @jax.jit
    def run(ts, key):
        first, (_, _, _, length, _), (inner, returns) = _play(
            env, network, ts, key, key, deterministic=deterministic,
            normalize=config.normalize_obs)
        return first.inner, inner, returns, length

    first, inner, returns, length = jax.device_get(run(train_state, key))
    length = int(length[0])
    states = [jax.tree.map(lambda x: x[0], first)]
    states += [jax.tree.map(lambda x, t=t: x[t, 0], inner) for t in range(length - 1)]
    rewards = [0.0] + [float(r) for r in returns[: length - 1, 0]]
    return env, states, rewards, length


def render_gif(config: PPOConfig, train_state: TrainState, key: jax.Array, path: str,
               deterministic: bool = True) -> int:
    """Render one episode to a GIF (gymnax's Visualizer, or a side view for Brax); returns
    the episode length."""
    env, states, rewards, length = play_episode(config, train_state, key, deterministic)
    if brax_env.is_brax_id(config.env_id):
        brax_env.write_gif(env.env, states, rewards, path)
        return length
    from gymnax.visualize import Visualizer

    try:
        write_gif(Visualizer(env.env, env.params, states, np.array(rewards)), len(states), path)
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
    env, states, _, length = play_episode(config, train_state, key, deterministic)
    brax_env.write_html(env.env, states, path)
    return length


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
    frames[0].save(path, save_all=True, append_images=frames[1:], duration=vis.interval, loop=0)
