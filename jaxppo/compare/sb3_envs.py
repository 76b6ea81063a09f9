"""The environments the SB3 side of `jaxppo compare` builds, in code that needs neither JAX nor
jaxppo: `make_vec` hands these factories to SB3's SubprocVecEnv by value (cloudpickle), so its
worker processes import what a plain SB3 script's would (gymnasium, the game) and not jaxppo's
package with JAX, which each worker imported before: ~80 MB and seconds of setup per worker
counted on SB3's side (`tests/integration/test_compare.py` checks a worker's memory has no jaxlib).

MinAtar, the two implementations made equal: gymnax's MinAtar has no sticky actions (the
reference's default is 0.1), uses the game's minimal action set (Breakout: no-op, left, right =
reference actions 0, 1, 3), truncates episodes at its `max_steps_in_episode` (the reference has
no time limit) and gives float32 0/1 grids [10, 10, C] with the reference's channel order.
`MinAtarEnv` does all four.
"""

from __future__ import annotations

import gymnasium
import numpy as np
from gymnasium import spaces

from jaxppo.envs.imports import import_module  # by value too: `sb3.BY_VALUE`

ATARI_TIME_LIMIT_FRAMES = 108_000
"""27,000 agent steps x frame skip 4: EnvPool's Atari v5 default `max_episode_steps`, and ALE's
`max_num_frames_per_episode` for the NoFrameskip-v4 ids."""


class MinAtarEnv(gymnasium.Env):
    """The reference MinAtar game as gymnax's MinAtar presents it: minimal action set, no sticky
    actions, float32 observations [10, 10, C], truncation after `max_steps` steps."""

    metadata = {"render_modes": []}

    def __init__(self, game: str, max_steps: int | None):
        from minatar import Environment  # the compare extra's; kept off SB3-less imports

        self.game = Environment(game, sticky_action_prob=0.0)
        self.action_set = list(self.game.minimal_action_set())
        self.max_steps = max_steps
        self.action_space = spaces.Discrete(len(self.action_set))
        self.observation_space = spaces.Box(0.0, 1.0, tuple(self.game.state_shape()), np.float32)
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if seed is not None:
            self.game.seed(seed)
        self.game.reset()
        self.t = 0
        return self.game.state().astype(np.float32), {}

    def step(self, action):
        reward, terminal = self.game.act(self.action_set[int(action)])
        self.t += 1
        truncated = bool(self.max_steps is not None and self.t >= self.max_steps and not terminal)
        return (self.game.state().astype(np.float32), float(reward), bool(terminal), truncated, {})


def make_atari(gym_id: str) -> gymnasium.Env:
    """One raw ALE env (registered here too: SubprocVecEnv builds it in a fresh process)."""
    import ale_py

    gymnasium.register_envs(ale_py)
    return gymnasium.make(gym_id, max_num_frames_per_episode=ATARI_TIME_LIMIT_FRAMES)


def make_gym(gym_id: str, imports: tuple[str, ...] = ()) -> gymnasium.Env:
    """`gymnasium.make(gym_id)` after importing the modules that register it: in every
    SubprocVecEnv worker too (they do not share the parent's registrations). The parent
    imported them first (a config's `env_imports`), with one line for each way that fails."""
    for name in imports:
        import_module(name)
    return gymnasium.make(gym_id)
