"""A custom environment in ~35 lines, trained by jaxppo: walk right along a corridor.

    python scripts/corridor.py                       # make_train on an instance
    jaxppo train --config configs/corridor.yaml      # env_id: scripts.corridor:Corridor
"""

import jax
import jax.numpy as jnp
from flax import struct

from jaxppo.envs.spaces import Box, Discrete


@struct.dataclass
class State:
    pos: jax.Array  # int32 cell, 0 .. length - 1
    time: jax.Array  # int32 steps taken


class Corridor:
    """Start at a random cell left of the middle; action 1 steps right, 0 steps left. Reaching
    the last cell pays +1 and ends the episode (terminated); each step costs 0.01; after 4 x
    length steps the episode is cut off (truncated: the value of where you stand remains)."""

    def __init__(self, length: int = 8):
        self.length = length
        self.default_params = None

    def reset_env(self, key, params):
        s = State(jax.random.randint(key, (), 0, self.length // 2), jnp.int32(0))
        return jax.nn.one_hot(s.pos, self.length), s

    def step_env(self, key, state, action, params):
        pos = jnp.clip(state.pos + 2 * action - 1, 0, self.length - 1)
        s = State(pos.astype(jnp.int32), state.time + 1)
        at_goal = pos == self.length - 1
        reward = jnp.where(at_goal, 1.0, -0.01)
        return jax.nn.one_hot(pos, self.length), s, reward, at_goal, {}

    def is_truncated(self, state, params):
        return state.time >= 4 * self.length

    def observation_space(self, params):
        return Box(0.0, 1.0, (self.length,))

    def action_space(self, params):
        return Discrete(2)

    def render(self, state, params):  # optional: a frame for `jaxppo eval --gif`
        cells = jnp.full((self.length, 3), 230, jnp.uint8).at[-1].set(jnp.uint8([60, 180, 75]))
        cells = cells.at[state.pos].set(jnp.uint8([0, 90, 200]))  # you, in blue; the goal, green
        return jnp.repeat(jnp.repeat(cells[None], 24, axis=0), 24, axis=1)  # [24, 24 * length, 3]


if __name__ == "__main__":
    from jaxppo import PPOConfig, make_train

    config = PPOConfig(env_id="custom/Corridor", total_timesteps=20_000, num_envs=8, num_steps=32,
                       hidden_sizes=(32,))
    out = jax.jit(make_train(config, env=Corridor(length=8)))(jax.random.key(0))
    print(f"return: first update {out.metrics['episodic_return'][0]:.2f}, "
          f"last {out.metrics['episodic_return'][-1]:.2f} (the best possible is ~0.95)")
