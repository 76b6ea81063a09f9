"""`VecEnv`: N copies of one environment (the protocol of `protocol.py`), vmapped and stepped in
lockstep on the device, with autoreset, action clipping and per-env episode statistics, so the
train loop can report episodic return and length without storing anything per step.

Episodes end on termination (s'_t is terminal: its value is 0) or truncation (a time limit:
the env's `is_truncated`, or `max_episode_steps` counted here; s'_t keeps its value, and the
rollout bootstraps from the true final observation that `EnvStep.final_obs` carries).

Axis legend: N = num_envs.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import chex
import jax
import jax.numpy as jnp
import numpy as np

import jaxppo.envs.resets as resets
from jaxppo.envs.host import HostVecEnv
from jaxppo.envs.protocol import EnvInfo, inspect_env
from jaxppo.envs.registry import host_source_of, make_env
from jaxppo.envs.resets import ResetPool, hand_out
from jaxppo.envs.spaces import ActionSpec
from jaxppo.envs.steps import EnvState, EnvStep
from jaxppo.errors import ConfigError
from jaxppo.keys import as_key
from jaxppo.labels import listed


def replace_params(params: Any, overrides: dict[str, Any], env_id: str) -> Any:
    """`params` with the fields in `overrides` replaced (config key `env_params`), or one line
    naming the fields it has."""
    fields = ([f.name for f in dataclasses.fields(params)] if dataclasses.is_dataclass(params)
              else [])
    unknown = sorted(set(overrides) - set(fields))
    if unknown:
        raise ConfigError(f"config key 'env_params': {env_id!r}'s params have no field "
                          f"{listed(unknown)}; its fields: {listed(fields, 40) or 'none'}")
    return dataclasses.replace(params, **overrides)


def own_time_limit(env: Any, env_id: str) -> int | None:
    """The env's own `max_episode_steps`, held to the config key's rule: a positive integer or
    None (no limit). 0 or a negative value would silently mean "no limit" or "every step"."""
    value = getattr(env, "max_episode_steps", None)
    if value is None:
        return None
    steps = int(value) if isinstance(value, (int, np.integer)) and not isinstance(
        value, (bool, np.bool_)) else None
    if steps is None or steps <= 0:
        raise ConfigError(f"environment {env_id!r}: its max_episode_steps is {value!r}; use a "
                          "positive integer, or None for no time limit")
    return steps


class StepRandomness(NamedTuple):
    """All the randomness of T vectorised steps, drawn up front in a few batched calls.

    On the CPU, XLA lowers each threefry call to a small loop of many tiny kernels; drawing
    it per step costs more than the CartPole physics. Drawing it per rollout is the same
    randomness `gymnax.Environment.step` would draw (per env: split the key into a step key
    and a reset key, reset with the latter), so results match gymnax step for step.

    The other reset strategies (`resets.py`: `cond`, `optimistic`) get only the reset keys,
    and `optimistic` K more keys per step for its fresh draws, instead of T x N reset states.
    """

    step_key: jax.Array  # [T, N] keys for `step_env`
    reset_key: jax.Array  # [T, N] keys for `reset_env`
    reset_obs: jax.Array | None  # [T, N, *obs_shape] the observation an autoreset would give
    reset_state: Any  # env state, leaves [T, N, ...]; None for lazy resets
    reset_mask: jax.Array | None = None  # [T, N, A] the reset state's action mask
    fresh_key: jax.Array | None = None  # [T, K] keys of `optimistic`'s fresh draws


class VecEnv:
    """`num_envs` vmapped copies of one environment, stepped in lockstep on the device.

    `VecEnv(env_id, num_envs)` builds the env from its id; `env=` (and `env_params=`) take an
    environment instance instead, `env_id` then only names it. `obs_field` picks the field of a
    dict/NamedTuple observation, `max_episode_steps` adds a time limit, `reset` and
    `reset_batch` pick how ended episodes get new initial states (`resets.py`); `strict`
    refuses a `reset_batch` the resolved reset would ignore (what a training run is built with).

    This is what the train loop steps (`Trainer.env`), with autoreset, action clipping and
    per-env episode statistics; build one yourself (usually with `VecEnv.from_config`) to step
    an environment exactly as training does. Episodes end on termination (the next state is
    terminal: its value is 0) or truncation (a time limit: the env's `is_truncated`, or
    `max_episode_steps`; the rollout bootstraps from the true final observation,
    `EnvStep.final_obs`). Arrays lead with N = `num_envs`.

    Args:
      env_id: the environment's id (see `PPOConfig.env_id`), or only its name when `env` is
        given.
      num_envs: the number of copies (N).
      env: an environment instance (the protocol of `jaxppo.envs.protocol`; any gymnax
        `Environment`) instead of building `env_id`'s; a class is refused.
      env_params: the environment's params (default: `env.default_params`, or those the id's
        environment comes with).
      env_kwargs: keyword arguments for the id's constructor (config key `env_kwargs`).
      obs_field: the field of a dict/NamedTuple observation to use (default: the env's
        `default_obs_field`, if it has one).
      max_episode_steps: truncate episodes after this many steps, on top of the env's own
        limit (the shorter one wins); None: the env's own only.
      params_overrides: fields of the params to replace (config key `env_params`).
      reset: `auto`, `predrawn`, `cond` or `optimistic` (config key `reset`); `auto` picks
        `optimistic` for envs whose reset is costly, else `predrawn`.
      reset_batch: fresh reset states drawn per step under `optimistic` (None: N / 8,
        rounded up; at most N).
      strict: refuse a `reset_batch` the resolved reset would ignore (a training run is built
        so; an evaluation of an older run is not).

    Attributes:
      env_id (str): the environment's id (or label).
      num_envs (int): N.
      env (Any): the single environment, as built or given.
      params (Any): its params.
      obs_field (str | None): the field of a dict/NamedTuple observation in use, or None.
      obs_shape: one observation's shape.
      obs_dtype (jnp.dtype): the observations' dtype: bool and uint8 stay so (image grids, 4x
        less memory until the network casts them), everything else is float32.
      action_spec (ActionSpec): the action space (kind, shape, sizes, bounds).
      action_shape: one env's action shape: `()` discrete, `(K,)` multi-discrete, the box's
        shape for continuous actions.
      action_dim (int): the width of the policy head (A): the number of actions (summed over
        sub-actions for multi-discrete), or the box's size.
      discrete (bool): the actions are discrete (or multi-discrete).
      multi_discrete (bool): the actions are multi-discrete (K sub-actions).
      nvec (tuple[int, ...]): the number of choices per sub-action (`(n,)` for a discrete
        space; `()` for continuous actions).
      action_low (jax.Array | None): a continuous action space's lower bounds (None for
        discrete actions).
      action_high (jax.Array | None): its upper bounds (None for discrete actions).
      masked (bool): the env gives an action mask (legal actions per step).
      max_episode_steps: the time limit in effect (the shorter of the argument and the env's
        own), or None.
      reset_mode (str): the reset strategy in effect (`auto` resolved).
      reset_batch (int): K, the fresh draws per step under `optimistic`.
      metric_names (tuple[str, ...]): the env's own episode metrics, logged per episode (e.g.
        Craftax's achievements).
      info: what inspecting the env found (`EnvInfo`: spaces, how to read observations and
        masks).

    Raises:
      ConfigError: `env` is a class, `reset` is unknown, `params_overrides` names a field the
        params lack, the env's own `max_episode_steps` is not a positive integer, or the env
        breaks the env protocol (one line naming it).
    """

    def __init__(self, env_id: str, num_envs: int, *, env: Any = None, env_params: Any = None,
                 env_kwargs: dict[str, Any] | None = None, obs_field: str | None = None,
                 max_episode_steps: int | None = None,
                 params_overrides: dict[str, Any] | None = None, reset: str = "auto",
                 reset_batch: int | None = None, strict: bool = False):
        self.env_id = env_id
        self.num_envs = num_envs
        if isinstance(env, type):
            raise ConfigError(f"env= got the class {env.__module__}.{env.__qualname__}, not an "
                              f"environment; pass an instance (env={env.__qualname__}(...)), or "
                              f"name the class in the config: env_id: "
                              f"{env.__module__}:{env.__qualname__}")
        built = env is None
        if env is None:
            env, params = make_env(env_id, env_kwargs)
            env_params = params if env_params is None else env_params
        elif env_params is None:
            env_params = getattr(env, "default_params", None)
        if params_overrides:
            env_params = replace_params(env_params, params_overrides, env_id)
        self.env, self.params = env, env_params
        self.obs_field = obs_field or getattr(env, "default_obs_field", None)
        label = f"environment {env_id!r}"
        self.info: EnvInfo = inspect_env(env, env_params, label, self.obs_field)
        self.reset_choice, self.reset_batch = resets.resolve(
            reset, reset_batch, num_envs, env, env_params, self.info,
            env_id=env_id, built=built, strict=strict)
        self.reset_mode = self.reset_choice.mode
        limits = [x for x in (max_episode_steps, own_time_limit(env, env_id)) if x is not None]
        self.max_episode_steps: int | None = min(limits) if limits else None
        self.obs_shape: tuple[int, ...] = self.info.obs_shape
        # bool/uint8 observations (image grids) stay so until the network casts them: 4x less
        # memory for the rollout's [T, N, H, W, C] batch; everything else is float32.
        compact = self.info.obs_dtype in (jnp.bool_, jnp.uint8)
        self.obs_dtype = jnp.dtype(self.info.obs_dtype) if compact else jnp.dtype(jnp.float32)
        spec: ActionSpec = self.info.action
        self.action_spec = spec
        self.discrete = spec.kind != "continuous"
        self.multi_discrete = spec.kind == "multidiscrete"
        self.nvec = spec.nvec
        self.action_shape: tuple[int, ...] = spec.shape
        self.action_dim = spec.logits_dim  # width of the policy head
        self.masked = self.info.mask_from is not None
        self.metric_names = self.info.metric_names
        if self.discrete:
            self.action_low = self.action_high = None
        else:
            self.action_low = jnp.asarray(spec.low)
            self.action_high = jnp.asarray(spec.high)

    @property
    def reset_note(self) -> str:
        """The reset strategy as the run's header line states it (`resets.note`)."""
        return resets.note(self.reset_choice, self.reset_batch)

    @property
    def lazy_reset(self) -> bool:
        """No T x N reset states are drawn ahead: resets happen inside the step (every reset
        mode but `predrawn`)."""
        return self.reset_mode != "predrawn"

    @classmethod
    def from_config(cls, config: Any, num_envs: int, env: Any = None,
                    env_params: Any = None, *, evaluation: bool = False) -> VecEnv | HostVecEnv:
        """The VecEnv a `PPOConfig` describes (its env keys), with `num_envs` copies; a
        `HostVecEnv` (same interface) for an id of a host source (`gymnasium/`, ...), in the
        source's evaluation setting with `evaluation` (JAX envs have one setting).

        Args:
          config: the `PPOConfig` whose env keys (`env_id`, `env_kwargs`, `env_params`,
            `obs_field`, `max_episode_steps`, `reset`, `reset_batch`) to follow.
          num_envs: the number of copies (N); not the config's `num_envs`, so evaluation can
            ask for another count.
          env: an environment instance instead of the one `config.env_id` names.
          env_params: that instance's params (default: its `default_params`).
          evaluation: a host source's evaluation setting (EnvPool's Atari: no episode end at a
            lost life, unclipped rewards).

        Returns:
          The `VecEnv`, or a `HostVecEnv` for a host source.
        """
        if env is None and host_source_of(config.env_id) is not None:
            return HostVecEnv.from_config(config, num_envs, evaluation=evaluation)
        return cls(config.env_id, num_envs, env=env, env_params=env_params,
                   env_kwargs=config.env_kwargs, obs_field=config.obs_field,
                   max_episode_steps=config.max_episode_steps,
                   params_overrides=config.env_params, reset=config.reset,
                   reset_batch=config.reset_batch, strict=not evaluation)

    # ---- one env's raw API, read through the protocol --------------------------------------
    def _read(self, raw_obs, state) -> tuple[jax.Array, jax.Array | None]:
        obs, mask = self.info.read_obs(raw_obs)
        obs = jnp.reshape(obs, self.obs_shape).astype(self.obs_dtype)
        if self.info.mask_from == "method":
            mask = self.env.action_mask(state, self.params)
        if mask is not None:
            mask = jnp.reshape(mask, (self.action_dim,)).astype(bool)
        return obs, mask

    def _reset_one(self, key):
        raw, state = self.env.reset_env(key, self.params)
        obs, mask = self._read(raw, state)
        return obs, state, mask

    def _step_one(self, key, state, action):
        raw, state, reward, terminated, _ = self.env.step_env(key, state, action, self.params)
        obs, mask = self._read(raw, state)
        truncated = (self.env.is_truncated(state, self.params) if self.info.truncates
                     else jnp.bool_(False))
        metrics = ({k: jnp.asarray(v, jnp.float32) for k, v in
                    self.env.episode_metrics(state, self.params).items()}
                   if self.metric_names else {})
        return (obs, state, jnp.reshape(reward, ()).astype(jnp.float32),
                jnp.reshape(terminated, ()).astype(bool), jnp.reshape(truncated, ()).astype(bool),
                mask, metrics)

    # ---- batched: keys typed (`jax.random.key`) or legacy (`PRNGKey`) ----------------------
    def reset(self, key: jax.Array) -> tuple[jax.Array, EnvState]:
        """Reset every env: the start of a run (or of an evaluation).

        Args:
          key: a PRNG key (typed or legacy), split into one per env (and, under `optimistic`,
            the keys of a full pool of reset states to start from).

        Returns:
          `(obs, state)`: the first observations `[N, *obs_shape]` and the batched `EnvState`
            (the envs' own states, zeroed episode statistics, the action mask if any).
        """
        key, pool_key = as_key(key, "VecEnv.reset(key)"), None
        if self.reset_mode == "optimistic":  # keys of its own for a full pool to start from
            key, pool_key = jax.random.split(key)
        obs, inner, mask = jax.vmap(self._reset_one)(jax.random.split(key, self.num_envs))
        zeros = jnp.zeros((self.num_envs,), jnp.float32)
        chex.assert_shape(obs, (self.num_envs, *self.obs_shape))
        pool = None
        if pool_key is not None:
            k = self.reset_batch
            pool = ResetPool(*jax.vmap(self._reset_one)(jax.random.split(pool_key, k)),
                             jnp.ones((k,), bool))
        return obs, EnvState(inner, zeros, jnp.zeros((self.num_envs,), jnp.int32), mask, pool)

    @property
    def keys_per_step(self) -> int:
        """Keys one vectorised step consumes: a step key and a reset key per env, and under
        `optimistic` K more for its fresh draws (`randomness_from_keys`)."""
        return 2 * self.num_envs + (self.reset_batch if self.reset_mode == "optimistic" else 0)

    def randomness_from_keys(self, keys: jax.Array) -> StepRandomness:
        """Randomness for T calls of `step_with` from T x `keys_per_step` distinct keys (the
        training program makes them from its one draw of an update's random bits): per step,
        N step keys, N reset keys, then `optimistic`'s K fresh-draw keys; under `predrawn`, the
        reset states of the reset keys, drawn for every step at once.

        Args:
          keys: `[T, keys_per_step]` PRNG keys, all distinct.

        Returns:
          A `StepRandomness` whose leaves lead with T, as `draw_randomness` returns.
        """
        n = self.num_envs
        step_key, reset_key, fresh_key = keys[:, :n], keys[:, n:2 * n], keys[:, 2 * n:]
        if self.reset_mode == "optimistic":
            return StepRandomness(step_key, reset_key, None, None, fresh_key=fresh_key)
        if self.lazy_reset:
            return StepRandomness(step_key, reset_key, None, None)
        obs, state, mask = jax.vmap(jax.vmap(self._reset_one))(reset_key)
        return StepRandomness(step_key, reset_key, obs, state, mask)

    def draw_randomness(self, key: jax.Array, num_steps: int) -> StepRandomness:
        """Randomness for `num_steps` calls of `step_with`, as gymnax's `step` draws it: env
        keys as `split(key, (T, N))`, each split into a step key and a reset key (under
        `optimistic`, of the first half of `split(key)`; the fresh draws', of the second: keys
        derived by `fold_in` could equal a split's, and a key split two ways repeats), so
        results match gymnax step for step. (Training draws its keys otherwise: one draw of
        random bits per update, `randomness_from_keys`.)

        Args:
          key: a PRNG key.
          num_steps: T, the steps to draw for.

        Returns:
          A `StepRandomness` whose leaves lead with T (`[T, N]` keys); under `predrawn`, also
            the T x N reset states an autoreset would use.
        """
        key, fresh = as_key(key, "VecEnv.draw_randomness(key, num_steps)"), []
        if self.reset_mode == "optimistic":
            key, fresh_root = jax.random.split(key)
            fresh = [jax.random.split(fresh_root, (num_steps, self.reset_batch))]
        env_keys = jax.random.split(key, (num_steps, self.num_envs))
        split = jax.vmap(jax.vmap(jax.random.split))(env_keys)  # [T, N, 2]
        return self.randomness_from_keys(
            jnp.concatenate([split[:, :, 0], split[:, :, 1], *fresh], axis=1))

    def step(self, key: jax.Array, state: EnvState, action: jax.Array) -> tuple[EnvState, EnvStep]:
        """Step every env once with fresh randomness (convenience; rollouts use `step_with`).

        Args:
          key: a PRNG key for this step.
          state: the batched `EnvState` (`reset`'s, or the previous step's).
          action: `[N, *action_shape]` actions; continuous ones are clipped to the bounds.

        Returns:
          `(state, step)`: the new `EnvState`, and the `EnvStep` (next observations, true final
            observations, rewards, `terminated`, `done`, the ended episodes' returns and
            lengths), all leading with N. Envs whose episode ended are already reset.
        """
        rand = jax.tree.map(lambda x: x[0], self.draw_randomness(key, 1))
        return self.step_with(rand, state, action)

    def clip_action(self, action: jax.Array) -> jax.Array:
        """A continuous action clipped to the action space's bounds (discrete ones as they are):
        what the env is stepped with, in training, evaluation and `Policy.act`.

        Args:
          action: actions of any leading shape, `[..., *action_shape]`.

        Returns:
          The actions, clipped (continuous) or unchanged (discrete).
        """
        return action if self.discrete else jnp.clip(action, self.action_low, self.action_high)

    def step_with(self, rand: StepRandomness, state: EnvState,
                  action: jax.Array) -> tuple[EnvState, EnvStep]:
        """Step every env once; episodes that end are reset in the same call (gymnax's rule:
        the reset state replaces the stepped one where terminated or truncated).

        Args:
          rand: one step's randomness: `draw_randomness(key, T)` indexed at a step.
          state: the batched `EnvState`.
          action: `[N, *action_shape]` actions (the learner keeps the sampled one for its
            log-prob; the env gets it clipped).

        Returns:
          `(state, step)` as `step` returns them.
        """
        # Step with the clipped action; the learner keeps the sampled one for its log-prob.
        action = self.clip_action(action)
        final_obs, inner_st, reward, terminated, truncated, mask_st, metrics = jax.vmap(
            self._step_one)(rand.step_key, state.inner, action)
        ep_return = state.episode_return + reward
        ep_length = state.episode_length + 1
        if self.max_episode_steps is not None:
            truncated = truncated | (ep_length >= self.max_episode_steps)
        done = terminated | truncated

        reset_obs, reset_state, reset_mask = rand.reset_obs, rand.reset_state, rand.reset_mask
        pool = state.pool
        reset_all = jax.vmap(self._reset_one)
        stepped = (final_obs, inner_st, mask_st)  # the structure of a reset, where none is used
        if self.reset_mode == "cond":
            reset_obs, reset_state, reset_mask = jax.lax.cond(
                jnp.any(done), lambda: reset_all(rand.reset_key), lambda: stepped)
        elif self.reset_mode == "optimistic":
            (reset_obs, reset_state, reset_mask), pool = hand_out(
                state.pool, reset_all(rand.fresh_key), done,
                lambda: reset_all(rand.reset_key), stepped)

        def pick(reset_leaf, step_leaf):
            where = done.reshape(done.shape + (1,) * (step_leaf.ndim - 1))
            return jnp.where(where, reset_leaf, step_leaf)

        inner = jax.tree.map(pick, reset_state, inner_st)
        obs = pick(reset_obs, final_obs)
        mask = None if mask_st is None else pick(reset_mask, mask_st)
        new_state = EnvState(inner, jnp.where(done, 0.0, ep_return),
                             jnp.where(done, 0, ep_length), mask, pool)
        step = EnvStep(obs, final_obs, reward, terminated, done, ep_return, ep_length, metrics)
        chex.assert_shape([step.obs, step.final_obs], (self.num_envs, *self.obs_shape))
        chex.assert_shape([step.reward, step.terminated, step.done], (self.num_envs,))
        return new_state, step

    def action_mask(self, state: EnvState) -> jax.Array | None:
        """[N, A] legal actions at the current observations, or None for unmasked envs.

        Args:
          state: the batched `EnvState`.

        Returns:
          `[N, A]` bool, or None.
        """
        return state.mask

    def allows_nothing(self, mask: jax.Array) -> jax.Array:
        """[N] bool: the mask `[N, A]` allows no action (for MultiDiscrete: some sub-action has
        no allowed value). No policy can act there: every logit is masked, so the categorical
        is uniform over illegal actions and its argmax is always action 0.

        Args:
          mask: `[N, A]` bool legal actions.

        Returns:
          `[N]` bool: True where no action is allowed.
        """
        parts = jnp.split(mask, np.cumsum(self.nvec)[:-1].tolist(), axis=-1)
        return jnp.any(jnp.stack([~jnp.any(p, axis=-1) for p in parts], axis=-1), axis=-1)
