"""Random play on a host env (`envpool/`, `gymnasium/`): the floor a learning curve is read
against. Uniform random actions through the same source and settings the config trains with,
scored as training logs it: whole games (Atari: all lives, unclipped), game over by game over.

    python scripts/random_play.py --config configs/atari_breakout.yaml --games 100

BENCHMARKS.md ("Game scores of Breakout and Pong on this CPU") quotes its numbers.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from gymnasium import spaces

from jaxppo import load_config
from jaxppo.envs.host import HostVecEnv
from jaxppo.envs.registry import HOST_SOURCES
from jaxppo.errors import ConfigError


def random_actions(space, rng: np.random.Generator, m: int) -> np.ndarray:
    """[M, *action_shape] uniform random actions of a gymnasium action space."""
    if isinstance(space, spaces.Discrete):
        return rng.integers(0, space.n, m)
    if isinstance(space, spaces.MultiDiscrete):
        return rng.integers(0, space.nvec, (m, *space.nvec.shape))
    if isinstance(space, spaces.Box):
        return rng.uniform(space.low, space.high, (m, *space.shape)).astype(space.dtype)
    raise ConfigError(f"random play: action space {space} is not Discrete, MultiDiscrete or Box")


def play(config_path: str, games: int, seed: int) -> tuple[str, np.ndarray]:
    """The env id, and the scores of the first `games` whole games to end over the config's
    num_envs envs."""
    config = load_config(config_path)
    if not config.env_id.startswith(tuple(HOST_SOURCES)):
        raise ConfigError(f"random play: {config.env_id} is not a host env; it plays "
                          f"{' and '.join(HOST_SOURCES)} ids only")
    env = HostVecEnv.from_config(config, config.num_envs)  # env_kwargs, max_episode_steps
    try:
        source, m = env.source, config.num_envs
        rng = np.random.default_rng(seed)
        source.reset(np.arange(seed, seed + m, dtype=np.int64))
        score, done = np.zeros(m), []
        while len(done) < games:
            out = source.step(random_actions(source.action_space, rng, m))
            score += out.score
            for i in np.flatnonzero(out.game_over):
                done.append(score[i])
                score[i] = 0.0
        return config.env_id, np.asarray(done[:games])
    finally:
        env.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", required=True)
    p.add_argument("--games", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    if a.games < 1:
        p.error("--games: use a positive integer")
    try:
        env_id, scores = play(a.config, a.games, a.seed)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{env_id}: random play, {len(scores)} whole games: mean {scores.mean():.2f} "
          f"± {scores.std():.2f} (min {scores.min():g}, max {scores.max():g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
