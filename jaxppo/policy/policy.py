"""One agent's trained policy out of a run directory, to act from Python (every agent's
returns on fixed episodes: `evaluate.py`).

    policy = jaxppo.load_policy("runs/cartpole", seed=2)  # run 2 of a multi-seed run
    action = policy.act(obs)                               # obs [*obs_shape] or [B, *obs_shape]

`seed` picks a run out of the checkpoint's runs axis (a sweep's runs are setting-major: run i
is setting i // seeds, seed i % seeds).
"""

from __future__ import annotations

import functools
import os
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from jaxppo.config import PPOConfig
from jaxppo.core.networks import is_recurrent, make_network
from jaxppo.core.train import TrainState
from jaxppo.envs import VecEnv
from jaxppo.errors import UsageError
from jaxppo.keys import as_key
from jaxppo.labels import tree_text
from jaxppo.policy.diverged import DivergedAgent, diverged_agents, diverged_refusal
from jaxppo.policy.episodes import (
    cached,
    policy_action,
    recurrent_policy_action,
)
from jaxppo.rundir.checkpoint import load_checkpoint
from jaxppo.rundir.ledger import trained_updates


@cached
def _actor(config: PPOConfig, env_obj=None, env_params=None):
    """`(VecEnv, jitted policy_action)` for `config`, built once per config."""
    env = VecEnv.from_config(config, 1, env_obj, env_params, evaluation=True)
    network = make_network(config, env)
    if is_recurrent(network):
        def act(ts, obs, key, *, deterministic, mask, hidden):
            start = jnp.zeros((obs.shape[0],), bool)
            return recurrent_policy_action(network, ts, obs, hidden, start, key, mask=mask,
                                           deterministic=deterministic,
                                           normalize=config.normalize_obs)
    else:
        act = functools.partial(policy_action, network, normalize=config.normalize_obs)
    return env, network, jax.jit(act, static_argnames="deterministic")


class Policy(NamedTuple):
    """One run's trained policy, ready to act; `load_policy` builds it.

        policy = jaxppo.load_policy("runs/cartpole", seed=2)
        action = policy.act(obs)                  # the mode; act(obs, key, False) samples

    It acts as the run was trained: observations go through the saved normalizer, continuous
    actions are clipped to the action space, and a masked env's mask restricts the choice.

    Attributes:
      config: the run's `PPOConfig`.
      train_state: this run's `TrainState`, without the runs axis.
      update: updates the checkpoint had done.
      seed: the run's index in the checkpoint's runs axis (a sweep's runs are setting-major:
        run i is setting i // seeds, seed i % seeds).
      env: the environment instance the run trained on, if not `config.env_id`'s.
      env_params: that instance's params.
      trained_updates: the updates this run itself trained: fewer than `update` for a
        halving sweep's agent stopped at a rung.
    """

    config: PPOConfig
    train_state: TrainState
    update: int
    seed: int
    env: Any = None
    env_params: Any = None
    trained_updates: int | None = None

    def __repr__(self) -> str:
        c = self.config
        env = c.env_id if self.env is None else f"{type(self.env).__name__} ({c.env_id})"
        return (f"Policy({env}, run {self.seed}, update {self.update}, {c.network} "
                f"{c.torso} {list(c.hidden_sizes)} {c.activation}, params: "
                f"{tree_text(self.train_state.params)})")

    @property
    def recurrent(self) -> bool:
        """The policy has memory (`network: gru | lstm`): `act` takes and returns a state."""
        return self.config.network != "feedforward"

    def initial_state(self, batch: int | None = None) -> Any:
        """A recurrent policy's state at an episode's start, for one observation (`batch`
        None) or a batch of B; pass it to `act` and go on with the state `act` returns.

        Args:
          batch: B, the number of observations `act` will get at once; None for one.

        Returns:
          The recurrent cell's carry: leaves `[H]` for one observation, `[B, H]` for a batch.

        Raises:
          UsageError: the policy is feedforward (it has no state), or `batch` is not an
            int >= 0.
        """
        if not self.recurrent:
            raise UsageError(f"this policy ({self.config.network}) has no state; call act(obs)")
        if batch is not None and not (is_int(batch) and batch >= 0):
            raise UsageError(f"batch {batch!r}: initial_state(B) takes the number of "
                             "observations act gets (an int >= 0), or initial_state() for one")
        _, network, _ = _actor(self.config, self.env, self.env_params)
        carry = network.initial_carry(1 if batch is None else batch)
        return jax.tree.map(lambda c: c[0], carry) if batch is None else carry

    def act(self, obs: ArrayLike, key: jax.Array | None = None, deterministic: bool = True,
            mask: ArrayLike | None = None, state: Any = None,
            clip: bool = True) -> jax.Array | tuple[jax.Array, Any]:
        """The action for one observation `[*obs_shape]` (-> `[*action_shape]`) or a batch
        `[B, *obs_shape]` (-> `[B, *action_shape]`), through the saved observation normalizer
        when the run trained with one. Deterministic: the distribution's mode; else a sample, which
        needs `key`. Continuous actions are clipped to the action space's bounds, as the env
        was stepped in training and evaluation (and as SB3's `predict` does); `clip=False`
        gives the raw Gaussian sample or mean, which may lie outside them. `mask` ([A] or
        [B, A] bool) restricts a masked env's policy to its legal actions, as in training.

        A recurrent policy (`network: gru | lstm`) also takes its `state` (`initial_state()` at
        an episode's start) and returns `(action, state)`: feed the state back each step.

        The policy is jitted: the first call with a new batch size compiles.

        Args:
          obs: one observation `[*obs_shape]` or a batch `[B, *obs_shape]` (B may be 0).
          key: a JAX PRNG key (`jax.random.key(...)` or `jax.random.PRNGKey(...)`, split for each
            step); needed only to sample.
          deterministic: act with the distribution's mode (True) or sample from it (False).
          mask: legal actions, `[A]` or `[B, A]` bool (masked discrete envs only).
          state: a recurrent policy's state (required for one, refused for a feedforward one).
          clip: clip continuous actions to the action space's bounds.

        Returns:
          The action(s) `[*action_shape]` or `[B, *action_shape]`; a recurrent policy returns
            `(action, state)`.

        Raises:
          UsageError: a sample asked for without a valid key, an observation or mask of the
            wrong shape, a mask for continuous actions, or a state missing, given to a
            feedforward policy, or of the wrong shape.
        """
        if not deterministic and key is None:
            raise UsageError("Policy.act(obs, deterministic=False) samples and needs a PRNG key: "
                             "act(obs, key, deterministic=False)")
        if not deterministic and key is not None:
            try:
                key = as_key(key, "Policy.act(obs, key, deterministic=False)")
            except TypeError as e:
                raise UsageError(str(e)) from None
        env, _, act = _actor(self.config, self.env, self.env_params)
        if self.recurrent and state is None:
            raise UsageError("a recurrent policy acts from its state: "
                             "state = policy.initial_state(); action, state = "
                             "policy.act(obs, state=state)")
        if not self.recurrent and state is not None:
            raise UsageError(f"this policy ({self.config.network}) has no state; call act(obs) "
                             "without state=")
        if mask is not None and not env.discrete:
            raise UsageError(f"{self.config.env_id} has continuous actions, which an action "
                             "mask cannot restrict; call act(obs) without mask=")
        obs_shape = env.obs_shape
        # uint8 frames stay uint8: the network scales them to [0, 1] as in training
        obs = jnp.asarray(obs, jnp.uint8 if env.obs_dtype == jnp.uint8 else jnp.float32)
        single = obs.shape == obs_shape
        if not single and obs.shape[1:] != obs_shape:
            raise UsageError(f"observation of shape {obs.shape}: {self.config.env_id} takes "
                             f"{obs_shape} or a batch (B, *{obs_shape})")
        if mask is not None:
            mask = jnp.asarray(mask, bool)
            mask = mask[None] if single else mask
            if mask.shape != (obs.shape[0] if not single else 1, env.action_dim):
                raise UsageError(f"action mask of shape {mask.shape}: {self.config.env_id} "
                                 f"takes ({env.action_dim},) per observation")
        batch_obs = obs[None] if single else obs
        if batch_obs.shape[0] == 0:  # nothing to act on: no actions (the network divides by B)
            return self._no_actions(act, batch_obs, key, deterministic, mask, state)
        if self.recurrent:
            self._check_state(state, None if single else obs.shape[0])
            hidden = jax.tree.map(lambda c: c[None], state) if single else state
            action, hidden = act(self.train_state, batch_obs, key, deterministic=deterministic,
                                 mask=mask, hidden=hidden)
            action = env.clip_action(action) if clip else action
            if single:
                return action[0], jax.tree.map(lambda c: c[0], hidden)
            return action, hidden
        action = act(self.train_state, batch_obs, key, deterministic=deterministic, mask=mask)
        action = env.clip_action(action) if clip else action
        return action[0] if single else action

    def _no_actions(self, act, obs, key, deterministic: bool, mask, state):
        """An empty batch's actions: [0, *action_shape] of the actions' dtype (and the empty
        state it was given, checked), without running the network."""
        one = obs.shape[1:]
        args = dict(deterministic=deterministic,
                    mask=None if mask is None else jax.ShapeDtypeStruct((1, *mask.shape[1:]),
                                                                        bool))
        if self.recurrent:
            self._check_state(state, 0)
            args["hidden"] = self.initial_state(1)
        out = jax.eval_shape(functools.partial(act, **args), self.train_state,
                             jax.ShapeDtypeStruct((1, *one), obs.dtype), key)
        action = out[0] if self.recurrent else out
        empty = jnp.zeros((0, *action.shape[1:]), action.dtype)
        return (empty, state) if self.recurrent else empty

    def _check_state(self, state, batch: int | None) -> None:
        """A recurrent state that does not fit the observation(s) is one line naming the
        shape it must have, not an error from inside the network."""
        expected = jax.tree.map(jnp.shape, self.initial_state(batch))
        try:
            given = jax.tree.map(jnp.shape, state)
        except (TypeError, ValueError):
            given = None
        if given != expected:
            what = "one observation" if batch is None else f"a batch of {batch}"
            call = "initial_state()" if batch is None else f"initial_state({batch})"
            shown = given if given is not None else type(state).__name__
            raise UsageError(f"state of shape {shown}: this {self.config.network} policy's state "
                             f"for {what} has shape {expected} (policy.{call}); pass the state "
                             "act returned for the same observations")


def is_int(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _check_seed(seed: int, num_runs: int, run_dir) -> None:
    if not 0 <= seed < num_runs:
        valid = "0" if num_runs == 1 else f"0..{num_runs - 1}"
        raise UsageError(f"seed {seed} is out of range: '{os.fspath(run_dir)}' holds {num_runs} "
                         f"run(s); pass a seed in {valid}")


def updates_per_run(ckpt) -> list[int]:
    """[R] the updates each run of a checkpoint trained: the checkpoint's, except where its
    search strategy stopped some early (a halving sweep's agents keep the parameters they had
    at their rung), as its record's ledger says."""
    return trained_updates(ckpt.record, ckpt.num_runs, ckpt.update)


def load_policy(run_dir: str | os.PathLike, seed: int = 0, *, env: Any = None,
                env_params: Any = None, include_diverged: bool = False) -> Policy:
    """Load run `seed` of the checkpoint in `run_dir` (a run dir, its `checkpoint/` dir or the
    file). A missing or corrupt checkpoint raises `CheckpointError`; an agent that diverged
    (a sweep keeps training past one and checkpoints it) raises `DivergedAgent` unless
    `include_diverged`. A run trained on an environment instance needs it again as `env` (and
    `env_params`).

    Args:
      run_dir: the run directory, its `checkpoint/` directory or the checkpoint file.
      seed: the run's index in the checkpoint's runs axis (0 for the first run; a sweep row's
        `runs` entries: a sweep's runs are setting-major, run i is setting i // seeds, seed
        i % seeds). Not a PRNG seed.
      env: the environment instance the run trained on, if it trained on one.
      env_params: that instance's params (default: its `default_params`).
      include_diverged: load an agent whose parameters or logged updates went NaN/Inf anyway.

    Returns:
      The run's `Policy`, with its learner state at the checkpoint's update.

    Raises:
      CheckpointError: no checkpoint, or a corrupt or mismatched one (including another
        `env` than the run trained on).
      UsageError: `seed` is not an int, or is out of the checkpoint's range of runs.
      DivergedAgent: the agent diverged (and `include_diverged` is False).
    """
    if not is_int(seed):
        raise UsageError(f"seed {seed!r}: load_policy's seed is a run's index in the checkpoint "
                         "(an int: 0 for the first run, a sweep row's `runs` entries)")
    seed = int(seed)
    ckpt = load_checkpoint(run_dir, env=env, env_params=env_params)
    _check_seed(seed, ckpt.num_runs, run_dir)
    if not include_diverged:
        bad = diverged_agents(ckpt, run_dir)
        if seed in bad:
            raise DivergedAgent(diverged_refusal(run_dir, seed, bad[seed], ckpt.num_runs, bad))
    ts = jax.tree.map(lambda x: x[seed], ckpt.runner_state.train_state)
    return Policy(ckpt.config, ts, ckpt.update, seed, env, env_params,
                  updates_per_run(ckpt)[seed])
