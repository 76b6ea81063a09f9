"""The train loop: `make_train(config)` returns a pure `train(key, hparams=None)`.

One update = rollout -> GAE -> `update_epochs` x `num_minibatches` clipped updates; the whole run
is one `lax.scan` over updates, so `jax.jit(jax.vmap(train))(keys)` compiles a many-seed run once.
Metrics leave each update as scalars: memory is O(num_updates), never O(steps); `update_step`
computes every row of `metrics.METRICS` (a new metric: a row there, its value here).

Axis legend: T = num_steps, N = num_envs, B = T * N, M = num_minibatches, U = num_updates.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from typing import Any, NamedTuple

import chex
import jax
import jax.numpy as jnp

from jaxppo.config import Hparams, PPOConfig
from jaxppo.core.batching import batched_like
from jaxppo.core.collectives import axis_size, fold_device, mean_var, psum
from jaxppo.core.epochs import STAT_FIELDS, make_optimizer, run_epochs
from jaxppo.core.gae import compute_gae
from jaxppo.core.loss import Minibatch
from jaxppo.core.metrics import ENV_METRIC_PREFIX
from jaxppo.core.networks import (
    ActorCritic,
    init_params,
    initial_memory,
    is_recurrent,
    make_network,
)
from jaxppo.core.normalize import NormalizerState, RunningMeanStd, normalizer_init, rms_update
from jaxppo.core.randomness import init_keys, update_randomness
from jaxppo.core.rollout import EnvCarry, RolloutSettings, all_finite, rollout
from jaxppo.core.shuffle import permutations_from_bits
from jaxppo.envs import HostVecEnv, VecEnv
from jaxppo.envs.registry import CUSTOM_PREFIX
from jaxppo.errors import ConfigError
from jaxppo.keys import as_key, is_key
from jaxppo.labels import tree_text

RESTART_SALT = 0x5E5E7
"""Folded into a run's key for the env reset of a resumed host-env run (`restart_episodes`)."""


class TrainState(NamedTuple):
    """What the learner owns; checkpoints and evaluation need exactly this.

    You meet it as `TrainOutput.train_state`, `RunResult.train_state`,
    `Checkpoint.train_state` and `Policy.train_state`. Of several runs (vmapped seeds or a
    sweep's settings), every leaf has a leading runs axis R.

    Attributes:
      params: the actor-critic's network parameters (a Flax params tree).
      opt_state: the optimizer's state: optax's global-norm clip, then Adam's moments.
      normalizer: the running mean/std of the observations and of the discounted return,
        updated only with `normalize_obs` / `normalize_reward`; evaluation and resumed runs
        apply exactly the statistics the policy trained with.
      step: updates done so far (int32).
    """

    params: Any
    opt_state: Any
    normalizer: NormalizerState
    step: jax.Array


class RunnerState(NamedTuple):
    """The whole carry of the update scan: enough to continue a run bit-exactly."""

    train_state: TrainState
    env: EnvCarry
    last_return: jax.Array  # carried when no episode ends in an update; NaN until one has
    last_length: jax.Array
    key: jax.Array


class TrainOutput(NamedTuple):
    """What `train(key, hparams)` (a `Trainer` called) returns: the whole run's outcome.

    Under `jax.vmap` over keys or `Hparams`, every leaf gains a leading runs axis R.

    Attributes:
      train_state: the learner after the last update (`TrainState`).
      metrics: every logged metric by name (`episodic_return`, `policy_loss`, `approx_kl`,
        `nonfinite`, ...; the env's own under `env/`), each `[U]` per run, one value per update
        (`[R, U]` under vmap). Memory is O(U), never O(steps). `episodic_return` is NaN until
        the first episode ends.
      runner_state: the whole carry of the update scan (learner, env states, the latest
        episodic return and length, PRNG key): enough to continue the run bit-exactly.
    """

    train_state: TrainState
    metrics: dict[str, jax.Array]
    runner_state: RunnerState

    def __repr__(self) -> str:
        shape = next((tuple(v.shape) for v in self.metrics.values()), ())
        return (f"TrainOutput(train_state: {tree_text(self.train_state)}, metrics: "
                f"{len(self.metrics)} of shape {shape}, runner_state: "
                f"{tree_text(self.runner_state)})")


def learning_rate(hp: Hparams, config: PPOConfig, step: jax.Array) -> jax.Array:
    """CleanRL's linear annealing: full rate at update 0, lr / U at the last update."""
    if not config.anneal_lr:
        return jnp.asarray(hp.lr, jnp.float32)
    return hp.lr * (1.0 - step.astype(jnp.float32) / config.num_updates)


def init_runner(key: jax.Array, hp: Hparams, *, config: PPOConfig, env: VecEnv,
                network: ActorCritic, axis_name: str | None = None, params=None) -> RunnerState:
    """The state before the first update. `params` may be passed in, initialized already from
    the same `key` (`train.init_params`): the sharded paths do that outside their mesh."""
    net_key, env_key, run_key = init_keys(key)
    if params is None:
        params = init_params(network, net_key, env.obs_shape)
    opt_state = make_optimizer(hp, config).init(params)
    obs, env_state = env.reset(fold_device(env_key, axis_name))
    hidden, start = initial_memory(network, env.num_envs)
    normalizer = normalizer_init(env.obs_shape)
    if config.normalize_obs:
        normalizer = normalizer._replace(obs=rms_update(normalizer.obs, obs, axis_name))
    train_state = TrainState(params, opt_state, normalizer, jnp.int32(0))
    env_carry = EnvCarry(env_state, obs, jnp.zeros((env.num_envs,), jnp.float32), hidden, start)
    # NaN, not 0: until an episode ends there is no return to report (a real 0.0 is a return).
    return RunnerState(train_state, env_carry, jnp.float32(jnp.nan), jnp.float32(jnp.nan),
                       run_key)


def _batched_carry(runner: RunnerState, hp: Hparams, config: PPOConfig,
                   host: bool) -> RunnerState:
    """`runner` with every leaf the update scan mixes with an agent's values batched, under a
    vmap that batches any of `runner` or `hp` (`core/batching.py` says why). Left as they are:
    the update counter and the normalizers' sample counts, which only ever add constants; a
    normalizer that is off and, with reward normalization off, the running discounted return
    (the loop passes them through: one for all agents); and a `host` env's state, whose pool
    holds one set of envs: settings vmapped over one key and one such env are refused in
    one line when the loop's first pass finds them (`envs/host.py`), not stepped as more."""

    def force(tree):
        return batched_like(tree, (runner, hp))

    def stats(rms: RunningMeanStd, on: bool) -> RunningMeanStd:
        return RunningMeanStd(*force(rms[:2]), rms.count) if on else rms

    ts, norm, env = runner.train_state, runner.train_state.normalizer, runner.env
    if not host:
        env = force(env._replace(discounted_return=None))._replace(
            discounted_return=env.discounted_return)
    if config.normalize_reward:
        env = env._replace(discounted_return=force(env.discounted_return))
    normalizer = NormalizerState(stats(norm.obs, config.normalize_obs),
                                 stats(norm.ret, config.normalize_reward))
    params, opt_state, *last = force((ts.params, ts.opt_state, runner.last_return,
                                      runner.last_length))
    return RunnerState(TrainState(params, opt_state, normalizer, ts.step), env, *last,
                       runner.key)


def update_step(runner: RunnerState, _: Any, *, hp: Hparams, config: PPOConfig, env: VecEnv,
                network: ActorCritic, axis_name: str | None = None):
    """One PPO update: rollout, GAE, then `update_epochs` shuffled passes of minibatches.

    With `axis_name`, `config` is one device's share of an agent whose envs are split over
    devices (see `sharding.py`); everything that must agree across devices is reduced."""
    ts = runner.train_state
    perm_size = env.num_envs if is_recurrent(network) else config.batch_size
    key, rand, perm_bits = update_randomness(runner.key, env, config, perm_size, axis_name)
    settings = RolloutSettings(config.num_steps, config.normalize_obs, config.normalize_reward,
                               axis_name, value_rows=config.minibatch_size)
    env_carry, normalizer, traj, next_values, stats = rollout(
        rand, runner.env, ts.normalizer, ts.params, env=env, network=network,
        gamma=hp.gamma, settings=settings)
    stats = psum(stats, axis_name)

    advantages, returns = compute_gae(traj.reward, traj.value, next_values, traj.terminated,
                                      traj.done, hp.gamma, hp.gae_lambda)

    if is_recurrent(network):
        # Minibatches are whole env sequences: env-major [N, T, ...], split on the env axis.
        em = lambda x: None if x is None else jnp.swapaxes(x, 0, 1)  # noqa: E731
        batch = Minibatch(em(traj.obs), em(traj.action), em(traj.logp), em(traj.value),
                          em(advantages), em(returns), em(traj.mask), em(traj.start),
                          runner.env.hidden)
        chex.assert_shape(batch.logp_old, (env.num_envs, config.num_steps))
    else:
        flat = lambda x: x.reshape((config.batch_size, *x.shape[2:]))  # noqa: E731
        batch = Minibatch(flat(traj.obs), flat(traj.action), flat(traj.logp), flat(traj.value),
                          flat(advantages), flat(returns),
                          None if traj.mask is None else flat(traj.mask))
        chex.assert_shape(batch.logp_old, (config.batch_size,))

    lr = learning_rate(hp, config, ts.step)
    params, opt_state, sums = run_epochs(ts.params, ts.opt_state, batch,
                                         permutations_from_bits(perm_bits), hp, lr,
                                         config=config, network=network, axis_name=axis_name)

    # Each statistic's mean over the minibatches applied (all of them but after a KL stop).
    stat = dict(zip(STAT_FIELDS, sums / jnp.maximum(sums[-1], 1.0), strict=True))
    ended = stats.count > 0
    ep_return = jnp.where(ended, stats.return_sum / jnp.maximum(stats.count, 1.0),
                          runner.last_return)
    ep_length = jnp.where(ended, stats.length_sum / jnp.maximum(stats.count, 1.0),
                          runner.last_length)
    _, var_returns = mean_var(returns, axis_name)
    _, var_residual = mean_var(returns - traj.value, axis_name)
    metrics = {
        # The mean over the episodes that ended in this update, else the latest such mean;
        # NaN until the first episode ends.
        "episodic_return": ep_return,
        "episodic_length": ep_length,
        "episodes": stats.count,
        **{name: stat[name] for name in STAT_FIELDS[:-2]},
        "explained_variance": jnp.where(var_returns > 0, 1.0 - var_residual / var_returns, 0.0),
        "learning_rate": lr,
        "grad_norm": stat["grad_norm"],
        "minibatch_fraction": sums[-1] / (config.update_epochs * config.num_minibatches),
        "env_steps": (ts.step + 1) * config.batch_size * axis_size(axis_name),
        # The env's own episode metrics (Craftax achievements, ...), mean over the episodes
        # that ended in this update; NaN when none did (the logs leave the cell empty).
        **{ENV_METRIC_PREFIX + k: jnp.where(ended, v / jnp.maximum(stats.count, 1.0), jnp.nan)
           for k, v in stats.metric_sums.items()},
    }
    # Divergence, by source (metrics.NONFINITE_SOURCES): the env's faults, then NaN/Inf in the
    # normaliser, the losses or gradients (the sums propagate any NaN/Inf of their terms),
    # the new params or optimizer state. Together they cover every float a checkpoint holds,
    # so the host, checking at chunk boundaries, stops the run before a bad state is saved.
    losses = sum(metrics[k] for k in ("policy_loss", "value_loss", "entropy", "grad_norm"))
    faults = jnp.stack([stats.faults.obs > 0, stats.faults.reward > 0, stats.faults.mask > 0,
                        ~all_finite(normalizer), ~jnp.isfinite(losses),
                        ~all_finite((params, opt_state))])
    bad = jnp.any(faults)
    metrics["nonfinite"] = bad.astype(jnp.float32)
    metrics["nonfinite_source"] = jnp.where(bad, jnp.argmax(faults) + 1, 0).astype(jnp.float32)
    new_ts = TrainState(params, opt_state, normalizer, ts.step + 1)
    return RunnerState(new_ts, env_carry, ep_return, ep_length, key), metrics


@dataclasses.dataclass(frozen=True, eq=False)
class Trainer:
    """What `make_train` returns: `trainer(key, hparams=None) -> TrainOutput` is the pure
    whole-run function; `init` and `run` are its two halves, for callers that drive the update
    scan in chunks (live logging, checkpoints); `env` and `network` are what they were built
    from. A frozen value: nothing here probes a device or touches a file.

        train = jaxppo.make_train(config)
        out = jax.jit(jax.vmap(train))(jax.random.split(jax.random.key(0), 8))  # 8 seeds

        runner = train.init(jax.random.key(0))           # the same run, in chunks of 10
        runner, metrics = train.run(runner, num_updates=10)

    Attributes:
      config: the run's `PPOConfig` (with `axis_name`: one device's share of it).
      env: the vectorised environment, `config.num_envs` copies (`VecEnv`, or the same
        interface over a host source such as `gymnasium/`).
      network: the actor-critic Flax module.
      axis_name: the mesh axis an env-sharded program runs over, or None.
    """

    config: PPOConfig
    env: VecEnv
    network: ActorCritic
    axis_name: str | None = None

    def _hp(self, hparams: Hparams | None) -> Hparams:
        return Hparams.from_config(self.config) if hparams is None else hparams.check()

    def _precision(self):
        """The config's matmul precision, for the ops traced inside (TF32 or full float32)."""
        p = self.config.matmul_precision
        return contextlib.nullcontext() if p == "default" else jax.default_matmul_precision(p)

    def init(self, key: jax.Array, hparams: Hparams | None = None,
             params: Any = None) -> RunnerState:
        """The state before the first update: network params (orthogonal init), optimizer and
        normalizer state, and `env.num_envs` freshly reset envs, all from `key`.

        Args:
          key: the run's PRNG key (one seed): `jax.random.key(seed)` or the legacy
            `jax.random.PRNGKey(seed)`; the same seed gives the same run either way.
          hparams: the float hyperparameters (None: the config's), checked as
            `Hparams.check` does.
          params: network params built already from the same `key` (`initial_params(key)`):
            the sharded paths build them outside their mesh. None builds them here.

        Returns:
          The `RunnerState` (the update scan's carry) to pass to `run`.
        """
        key = as_key(key, "train.init(key)")
        with self._precision():
            return init_runner(key, self._hp(hparams), config=self.config, env=self.env,
                               network=self.network, axis_name=self.axis_name, params=params)

    def initial_params(self, key: jax.Array) -> Any:
        """The network parameters `init(key)` starts from (orthogonal init).

        Args:
          key: the run's PRNG key, as given to `init`.

        Returns:
          The params tree (`TrainState.params` before the first update).
        """
        key = as_key(key, "train.initial_params(key)")
        with self._precision():
            return init_params(self.network, init_keys(key)[0], self.env.obs_shape)

    def restart_episodes(self, runner: RunnerState) -> RunnerState:
        """`runner` with every env reset and its episode accumulators zeroed, the learner
        (train state, key, last return) untouched: how a run on a host env resumes, since the
        host's own state is in no checkpoint. The reset key is derived, never split off.

        Args:
          runner: the state to restart the episodes of (a restored checkpoint's).

        Returns:
          The same state with fresh episodes.
        """
        with self._precision():
            obs, env_state = self.env.reset(jax.random.fold_in(runner.key, RESTART_SALT))
            hidden, start = initial_memory(self.network, self.env.num_envs)
            zeros = jnp.zeros((self.env.num_envs,), jnp.float32)
            return runner._replace(env=EnvCarry(env_state, obs, zeros, hidden, start))

    def run(self, runner: RunnerState, hparams: Hparams | None = None,
            num_updates: int | None = None) -> tuple[RunnerState, dict[str, jax.Array]]:
        """`num_updates` PPO updates from `runner`, as one `lax.scan`: the second half of
        `train`, for callers that drive a run in chunks.

        Each update is a rollout of `num_steps` steps in every env, GAE, then `update_epochs`
        shuffled passes of `num_minibatches` clipped updates. A call continues exactly where
        the previous one stopped (the learning-rate schedule reads the update counter in the
        state), so chunks of a run together equal the run in one call.

        Args:
          runner: the state to continue from (`init`'s, or a previous `run`'s).
          hparams: the float hyperparameters (None: the config's); pass the same ones to every
            chunk.
          num_updates: updates in this call (None: the whole run, `config.num_updates`).

        Returns:
          `(runner, metrics)`: the state after the last update, and every metric by name as a
            `[num_updates]` array (as in `TrainOutput.metrics`).
        """
        hp = self._hp(hparams)
        step = functools.partial(update_step, hp=hp, config=self.config,
                                 env=self.env, network=self.network, axis_name=self.axis_name)
        length = self.config.num_updates if num_updates is None else num_updates
        if not is_key(runner.key):  # a runner built or kept with legacy key data
            runner = runner._replace(key=as_key(runner.key, "train.run(runner): runner.key"))
        runner = _batched_carry(runner, hp, self.config, isinstance(self.env, HostVecEnv))
        with self._precision():
            return jax.lax.scan(step, runner, None, length=length)

    def __call__(self, key: jax.Array, hparams: Hparams | None = None) -> TrainOutput:
        """The whole run: `init(key, hparams)`, then `run` for `config.num_updates` updates.

        Pure: jit it, vmap it over keys (seeds) or over `Hparams` (a sweep), or both.

        Args:
          key: the run's PRNG key, `jax.random.key(seed)` or `jax.random.PRNGKey(seed)`
            (one seed; a batch of `split` keys under `jax.vmap`). Both forms give the same run.
          hparams: the float hyperparameters (None: the config's; `Hparams.stack` of several
            settings under `jax.vmap(train, in_axes=(None, 0))`).

        Returns:
          The `TrainOutput`: final learner state, metrics `[U]` (`[R, U]` under vmap), and
            the final runner state.
        """
        runner, metrics = self.run(self.init(as_key(key), hparams), hparams)
        return TrainOutput(runner.train_state, metrics, runner)


def make_train(config: PPOConfig, *, env: Any = None, env_params: Any = None,
               axis_name: str | None = None) -> Trainer:
    """Build `train(key, hparams=None) -> TrainOutput` for `config` (validated already).

    `train` is pure: jit it, vmap it over keys (seeds) or over `Hparams` (a sweep), or both;
    `jax.jit(jax.vmap(train))(keys)` compiles a many-seed run once. It checks no device memory
    (a run started by `jaxppo.Experiment` or the CLI does that;
    `jaxppo.estimate_memory(config, num_runs)` says what `num_runs` vmapped runs need), and
    writes nothing: for logs, checkpoints and resume, use `Experiment`.

    Args:
      config: the run's `PPOConfig`.
      env: an environment instance to train on instead of the one `config.env_id` names (any
        gymnax `Environment`, or anything with the protocol of `jaxppo.envs.protocol`);
        `config.env_id` then only labels the run and must be `custom/<name>`. None: the
        environment `config.env_id` names.
      env_params: the environment's params (default: `env.default_params`, or the params
        `config.env_id`'s environment comes with).
      axis_name: for `make_sharded_train(..., shard="envs")`: `config` is then one device's
        share of the agent, and `train` must run inside a `shard_map` over that mesh axis.
        None: a plain program.

    Returns:
      The `Trainer`: call it as `train(key, hparams=None)`, or drive it in chunks with
        `init` and `run`.

    Raises:
      TypeError: `config` is not a `PPOConfig`.
      ConfigError: `env` is given but `config.env_id` is not a `custom/<name>` label (so a
        checkpoint is never resumed or evaluated on the id's environment instead of yours),
        or the environment cannot be built or breaks the env protocol.
    """
    if not isinstance(config, PPOConfig):
        raise TypeError(f"make_train expects a PPOConfig, got {type(config).__name__}")
    if env is not None and not config.env_id.startswith(CUSTOM_PREFIX):
        raise ConfigError(f"config key 'env_id': {config.env_id!r} names an environment of its "
                          f"own, but an instance was passed as env=; label it env_id: "
                          f"{CUSTOM_PREFIX}<name> (so a checkpoint is never resumed or evaluated "
                          "on the id's environment instead of yours)")
    venv = VecEnv.from_config(config, config.num_envs, env, env_params)
    return Trainer(config, venv, make_network(config, venv), axis_name)
