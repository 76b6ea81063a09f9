"""The environment adapter: the only module that knows gymnax's API.

`VecEnv` vmaps `num_envs` copies of a gymnax environment, autoresets them (gymnax >= 1.0 does
this inside `step` and hands back the pre-reset observation as `info["final_observation"]`),
clips continuous actions to the action bounds, and keeps per-env episode statistics so the
train loop can report episodic return and length without storing anything per step.

Axis legend: N = num_envs.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any, NamedTuple

import chex
import jax
import jax.numpy as jnp

import jaxppo.brax_env as brax_env
from jaxppo.errors import ConfigError

_EXTRA_ENVS: dict[str, Callable[[], Any]] = {}


def register_env(env_id: str, factory: Callable[[], Any]) -> None:
    """Make a gymnax-style environment (an object with gymnax's `Environment` API) available
    under `env_id`, e.g. for tests or custom tasks. `factory()` returns the environment."""
    _EXTRA_ENVS[env_id] = factory


def _registered() -> dict[str, Callable[[], Any]]:
    """User-registered ids and the probe envs. gymnax and the probes are imported here, not at
    module level: importing a gymnax env module creates arrays, which starts JAX's backend, and
    that must wait for `jax.distributed.initialize` in a multi-process run."""
    from jaxppo.probes import PROBES

    return {**PROBES, **_EXTRA_ENVS}


def available_env_ids() -> list[str]:
    import gymnax

    return sorted(set(gymnax.registered_envs) | set(_registered()))


def check_env_id(env_id: str) -> None:
    """Raise `ConfigError` naming close matches when `env_id` is not a known environment
    (a gymnax or registered id, or `brax/<name>` for Brax's registry)."""
    brax = brax_env.is_brax_id(env_id)
    ids = brax_env.brax_env_ids() if brax else available_env_ids()
    if env_id not in ids:
        close = difflib.get_close_matches(env_id, ids, n=3, cutoff=0.5)
        hint = f"did you mean {', '.join(repr(c) for c in close)}?" if close else (
            f"known ids: {', '.join(ids)}")
        brax_id = None if brax else brax_env.suggest_brax_id(env_id)
        if brax_id:
            hint = f"did you mean the Brax environment {brax_id!r}?"
        what = "Brax environment" if brax else "environment"
        raise ConfigError(f"config key 'env_id': unknown {what} {env_id!r}; {hint}")


def make_gymnax_env(env_id: str) -> tuple[Any, Any]:
    """Return `(env, env_params)` for a gymnax or registered environment id."""
    check_env_id(env_id)
    if brax_env.is_brax_id(env_id):
        env = brax_env.make_brax_env(env_id)
        return env, env.default_params
    registered = _registered()
    if env_id in registered:
        env = registered[env_id]()
        return env, env.default_params
    import gymnax

    return gymnax.make(env_id)


class EnvState(NamedTuple):
    """Batched env state plus the running statistics of each env's current episode."""

    inner: Any  # gymnax state, leaves [N, ...]
    episode_return: jax.Array  # [N] undiscounted return so far
    episode_length: jax.Array  # [N] steps so far


class EnvStep(NamedTuple):
    """What one vectorised step hands to the rollout. All arrays lead with N."""

    obs: jax.Array  # [N, *obs_shape] observation to act on next (reset obs where done)
    final_obs: jax.Array  # [N, *obs_shape] true next state s'_t (pre-reset where done)
    reward: jax.Array  # [N]
    terminated: jax.Array  # [N] bool: s'_t is terminal, its value is 0
    done: jax.Array  # [N] bool: the episode ended (terminated or truncated by a time limit)
    episode_return: jax.Array  # [N] return of the episode that ended here (valid where done)
    episode_length: jax.Array  # [N]


class StepRandomness(NamedTuple):
    """All the randomness of T vectorised steps, drawn up front in a few batched calls.

    On the CPU, XLA lowers each threefry call to a small loop of many tiny kernels; drawing
    it per step costs more than the CartPole physics. Drawing it per rollout is the same
    randomness `gymnax.Environment.step` would draw (per env: split the key into a step key
    and a reset key, reset with the latter), so results match gymnax step for step.

    Envs whose reset is a physics computation (Brax: `expensive_reset`) get only the reset keys;
    `step_with` then resets all N envs inside a `lax.cond` on the steps where one ended,
    instead of T x N reset states per rollout.
    """

    step_key: jax.Array  # [T, N] keys for `step_env`
    reset_key: jax.Array  # [T, N] keys for `reset_env`
    reset_obs: jax.Array | None  # [T, N, *obs_shape] the observation an autoreset would give
    reset_state: Any  # gymnax state, leaves [T, N, ...]; None for lazy resets


class VecEnv:
    """`num_envs` vmapped copies of one environment, stepped in lockstep on the device."""

    def __init__(self, env_id: str, num_envs: int):
        self.env_id = env_id
        self.num_envs = num_envs
        self.env, self.params = make_gymnax_env(env_id)
        self.lazy_reset = bool(getattr(self.env, "expensive_reset", False))
        obs_space = self.env.observation_space(self.params)
        act_space = self.env.action_space(self.params)
        self.obs_shape: tuple[int, ...] = tuple(obs_space.shape)
        self.discrete = hasattr(act_space, "n") and not hasattr(act_space, "low")
        if self.discrete:
            self.action_dim = int(act_space.n)
            self.action_shape: tuple[int, ...] = ()
            self.action_low = self.action_high = None
        else:
            self.action_shape = tuple(act_space.shape)
            self.action_dim = int(jnp.prod(jnp.array(self.action_shape)))
            self.action_low = jnp.broadcast_to(jnp.asarray(act_space.low, jnp.float32),
                                               self.action_shape)
            self.action_high = jnp.broadcast_to(jnp.asarray(act_space.high, jnp.float32),
                                                self.action_shape)

    def reset(self, key: jax.Array) -> tuple[jax.Array, EnvState]:
        keys = jax.random.split(key, self.num_envs)
        obs, inner = jax.vmap(self.env.reset, in_axes=(0, None))(keys, self.params)
        zeros = jnp.zeros((self.num_envs,), jnp.float32)
        obs = obs.astype(jnp.float32)
        chex.assert_shape(obs, (self.num_envs, *self.obs_shape))
        return obs, EnvState(inner, zeros, jnp.zeros((self.num_envs,), jnp.int32))

    def draw_randomness(self, key: jax.Array, num_steps: int) -> StepRandomness:
        """Randomness for `num_steps` calls of `step_with`: env keys as `split(key, (T, N))`."""
        env_keys = jax.random.split(key, (num_steps, self.num_envs))
        split = jax.vmap(jax.vmap(jax.random.split))(env_keys)  # [T, N, 2]
        step_key, reset_key = split[:, :, 0], split[:, :, 1]
        if self.lazy_reset:
            return StepRandomness(step_key, reset_key, None, None)
        reset = jax.vmap(jax.vmap(self.env.reset_env, in_axes=(0, None)), in_axes=(0, None))
        reset_obs, reset_state = reset(reset_key, self.params)
        return StepRandomness(step_key, reset_key, reset_obs.astype(jnp.float32), reset_state)

    def step(self, key: jax.Array, state: EnvState, action: jax.Array) -> tuple[EnvState, EnvStep]:
        """Step every env once with fresh randomness (convenience; rollouts use `step_with`)."""
        rand = jax.tree.map(lambda x: x[0], self.draw_randomness(key, 1))
        return self.step_with(rand, state, action)

    def step_with(self, rand: StepRandomness, state: EnvState,
                  action: jax.Array) -> tuple[EnvState, EnvStep]:
        """Step every env once; episodes that end are reset in the same call (gymnax's rule:
        the reset state replaces the stepped one where terminated or truncated)."""
        if not self.discrete:
            # Step with the clipped action; the learner keeps the sampled one for its log-prob.
            action = jnp.clip(action, self.action_low, self.action_high)
        obs_st, inner_st, reward, terminated, _ = jax.vmap(
            self.env.step_env, in_axes=(0, 0, 0, None)
        )(rand.step_key, state.inner, action, self.params)
        truncated = jax.vmap(self.env.is_truncated, in_axes=(0, None))(inner_st, self.params)
        terminated = jnp.asarray(terminated).astype(bool)
        done = jnp.logical_or(terminated, jnp.asarray(truncated).astype(bool))

        final_obs = obs_st.astype(jnp.float32)
        reset_obs, reset_state = rand.reset_obs, rand.reset_state
        if self.lazy_reset:
            reset_all = jax.vmap(self.env.reset_env, in_axes=(0, None))
            reset_obs, reset_state = jax.lax.cond(
                jnp.any(done),
                lambda: reset_all(rand.reset_key, self.params),
                lambda: (final_obs, inner_st))

        def pick(reset_leaf, step_leaf):
            mask = done.reshape(done.shape + (1,) * (step_leaf.ndim - 1))
            return jnp.where(mask, reset_leaf, step_leaf)

        inner = jax.tree.map(pick, reset_state, inner_st)
        obs = pick(reset_obs.astype(jnp.float32), final_obs)
        reward = jnp.asarray(reward).astype(jnp.float32)
        ep_return = state.episode_return + reward
        ep_length = state.episode_length + 1
        new_state = EnvState(inner, jnp.where(done, 0.0, ep_return), jnp.where(done, 0, ep_length))
        step = EnvStep(obs, final_obs, reward, terminated, done, ep_return, ep_length)
        chex.assert_shape([step.obs, step.final_obs], (self.num_envs, *self.obs_shape))
        chex.assert_shape([step.reward, step.terminated, step.done], (self.num_envs,))
        return new_state, step
