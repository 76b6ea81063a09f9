"""Probe environments: tiny tasks with a known value function or optimal action.

The standard way to debug an RL implementation (Andy Jones, "Debugging RL, Without the
Agonizing Pain"): if the critic cannot learn V on these, the bug is in the learner, not the task.
They register as `probe/<Name>-v0` and run through the same `make_train` as any gymnax env.

| id                     | what must be learned                                                    |
|------------------------|-------------------------------------------------------------------------|
| probe/Constant-v0      | V(s) = 1: one-step episodes, reward 1                                   |
| probe/ObsReward-v0     | V(s) = s: obs is +1 or -1 at random, reward = obs, one-step episodes     |
| probe/TwoStep-v0       | V(0) = gamma, V(1) = 1: reward arrives one step later (discounting)     |
| probe/Action-v0        | pick action 1 (reward +1; action 0 gives -1): the policy gradient works |
| probe/Truncation-v0    | V(s) = 1/(1-gamma): reward 1 forever, cut by a time limit of 5 steps    |
| probe/Memory-v0        | remember a cue: shown at step 0, acted on 4 steps later (+1 / -1)        |

And `StatelessCartPole-v1`: gymnax's CartPole with the two velocities hidden (POPGym's
"stateless CartPole"), solvable only by a policy that infers them from successive positions.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import environment, spaces


@struct.dataclass
class ProbeState(environment.EnvState):
    obs: jax.Array
    time: int


@struct.dataclass
class ProbeParams(environment.EnvParams):
    max_steps_in_episode: int = 1000


class _Probe(environment.Environment):
    num_actions_ = 1
    expensive_reset = False  # one number or two: `reset: auto` pre-draws them
    max_steps = 1000

    @property
    def default_params(self) -> ProbeParams:
        return ProbeParams(max_steps_in_episode=self.max_steps)

    def get_obs(self, state, params=None, key=None):
        return jnp.reshape(state.obs, (1,)).astype(jnp.float32)

    def observation_space(self, params):
        return spaces.Box(-2.0, 2.0, (1,), jnp.float32)

    def action_space(self, params):
        return spaces.Discrete(self.num_actions_)

    def is_terminated(self, state, params):
        return jnp.array(False)

    @property
    def num_actions(self) -> int:
        return self.num_actions_

    def _out(self, state, reward, terminated):
        return self.get_obs(state), state, jnp.float32(reward), jnp.asarray(terminated), {}


class Constant(_Probe):
    def reset_env(self, key, params):
        s = ProbeState(obs=jnp.float32(0.0), time=0)
        return self.get_obs(s), s

    def step_env(self, key, state, action, params):
        return self._out(state.replace(time=state.time + 1), 1.0, True)


class ObsReward(_Probe):
    def reset_env(self, key, params):
        s = ProbeState(obs=jnp.where(jax.random.bernoulli(key), 1.0, -1.0), time=0)
        return self.get_obs(s), s

    def step_env(self, key, state, action, params):
        return self._out(state.replace(time=state.time + 1), state.obs, True)


class TwoStep(_Probe):
    def reset_env(self, key, params):
        s = ProbeState(obs=jnp.float32(0.0), time=0)
        return self.get_obs(s), s

    def step_env(self, key, state, action, params):
        last = state.obs > 0.5
        nxt = state.replace(obs=jnp.float32(1.0), time=state.time + 1)
        return self._out(nxt, jnp.where(last, 1.0, 0.0), last)


class Action(_Probe):
    num_actions_ = 2

    def reset_env(self, key, params):
        s = ProbeState(obs=jnp.float32(0.0), time=0)
        return self.get_obs(s), s

    def step_env(self, key, state, action, params):
        reward = jnp.where(action == 1, 1.0, -1.0)
        return self._out(state.replace(time=state.time + 1), reward, True)


class Truncation(_Probe):
    max_steps = 5

    def reset_env(self, key, params):
        s = ProbeState(obs=jnp.float32(0.0), time=0)
        return self.get_obs(s), s

    def step_env(self, key, state, action, params):
        return self._out(state.replace(time=state.time + 1), 1.0, False)


class Memory(_Probe):
    """Step 0 shows the cue (+1 or -1) and asks nothing; steps 1..k-1 show 0; step k shows the
    query flag and rewards action 1 for cue +1, action 0 for cue -1 (+1 right, -1 wrong), then
    ends. A feedforward policy sees the same query observation either way, so it is at chance
    (mean return 0); a recurrent one can carry the cue to the query and earn 1."""

    num_actions_ = 2
    delay = 4

    def get_obs(self, state, params=None, key=None):
        shown = jnp.where(state.time == 0, state.obs, 0.0)
        return jnp.stack([shown, jnp.asarray(state.time == self.delay, jnp.float32)])

    def observation_space(self, params):
        return spaces.Box(-1.0, 1.0, (2,), jnp.float32)

    def reset_env(self, key, params):
        s = ProbeState(obs=jnp.where(jax.random.bernoulli(key), 1.0, -1.0), time=0)
        return self.get_obs(s), s

    def step_env(self, key, state, action, params):
        query = state.time == self.delay
        right = jnp.where(state.obs > 0, action == 1, action == 0)
        reward = jnp.where(query, jnp.where(right, 1.0, -1.0), 0.0)
        return self._out(state.replace(time=state.time + 1), reward, query)


class StatelessCartPole:
    """CartPole-v1 observing only cart position and pole angle (velocities hidden)."""

    expensive_reset = False  # gymnax's CartPole reset

    def __init__(self):
        import gymnax

        self.inner, self.default_params = gymnax.make("CartPole-v1")

    def _hide(self, obs):
        return obs[jnp.array([0, 2])]

    def reset_env(self, key, params):
        obs, state = self.inner.reset_env(key, params)
        return self._hide(obs), state

    def step_env(self, key, state, action, params):
        obs, state, reward, done, info = self.inner.step_env(key, state, action, params)
        return self._hide(obs), state, reward, done, info

    def is_truncated(self, state, params):
        return self.inner.is_truncated(state, params)

    def observation_space(self, params):
        return spaces.Box(-jnp.inf, jnp.inf, (2,), jnp.float32)

    def action_space(self, params):
        return self.inner.action_space(params)


PROBES = {f"probe/{cls.__name__}-v0": cls
          for cls in (Constant, ObsReward, TwoStep, Action, Truncation, Memory)}
PROBES["StatelessCartPole-v1"] = StatelessCartPole
"""The probe ids and their classes; `envs` registers them."""
