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
import optax

from jaxppo.config import Hparams, PPOConfig
from jaxppo.core.collectives import axis_size, fold_device, mean_var, pmean, psum
from jaxppo.core.gae import compute_gae
from jaxppo.core.loss import LossInfo, Minibatch, ppo_loss
from jaxppo.core.metrics import ENV_METRIC_PREFIX
from jaxppo.core.networks import (
    ActorCritic,
    init_params,
    initial_memory,
    is_recurrent,
    make_network,
)
from jaxppo.core.normalize import NormalizerState, normalizer_init, rms_update
from jaxppo.core.rollout import (
    EnvCarry,
    RolloutSettings,
    all_finite,
    rollout,
    rollout_randomness,
    rollout_words,
)
from jaxppo.core.shuffle import permutations_from_bits
from jaxppo.envs import VecEnv
from jaxppo.envs.registry import CUSTOM_PREFIX
from jaxppo.errors import ConfigError

RESTART_SALT = 0x5E5E7
"""Folded into a run's key for the env reset of a resumed host-env run (`restart_episodes`)."""


class TrainState(NamedTuple):
    """What the learner owns; checkpoints and evaluation need exactly this."""

    params: Any
    opt_state: Any
    normalizer: NormalizerState
    step: jax.Array  # updates done so far (int32)


class RunnerState(NamedTuple):
    """The whole carry of the update scan: enough to continue a run bit-exactly."""

    train_state: TrainState
    env: EnvCarry
    last_return: jax.Array  # carried when no episode ends in an update; NaN until one has
    last_length: jax.Array
    key: jax.Array


class TrainOutput(NamedTuple):
    train_state: TrainState
    metrics: dict[str, jax.Array]  # each [U] (per seed under vmap)
    runner_state: RunnerState


def make_optimizer(hp: Hparams, config: PPOConfig) -> optax.GradientTransformation:
    """Global-norm clip then Adam's scaling; the learning rate is applied by the caller so it
    can be annealed per update from the update counter (exact on resume, sweepable by vmap)."""
    return optax.chain(optax.clip_by_global_norm(hp.max_grad_norm),
                       optax.scale_by_adam(eps=config.adam_eps))


def learning_rate(hp: Hparams, config: PPOConfig, step: jax.Array) -> jax.Array:
    """CleanRL's linear annealing: full rate at update 0, lr / U at the last update."""
    if not config.anneal_lr:
        return jnp.asarray(hp.lr, jnp.float32)
    return hp.lr * (1.0 - step.astype(jnp.float32) / config.num_updates)


def init_keys(key: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """`(network, env, run)` keys of a run's initial state, from its seed key."""
    net_key, env_key, run_key = jax.random.split(key, 3)
    return net_key, env_key, run_key


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


STAT_FIELDS = (*(f for f in LossInfo._fields if f != "total_loss"), "grad_norm", "applied")
"""What `_minibatch_step` adds up over an update's minibatches, in its [S] vector: each loss
statistic and the gradient norm times `applied` (1.0 where the minibatch was applied), and
`applied` itself; the metrics are their means over the applied minibatches."""


def _minibatch_step(carry, idx, *, batch: Minibatch, hp: Hparams, lr, tx, network,
                    config: PPOConfig, axis_name: str | None = None):
    """One clipped update on the minibatch `batch[idx]`, skipped once the KL stop has fired.

    Its statistics are added into the carry's [S] vector (`STAT_FIELDS`) rather than stacked
    per minibatch: on an H100 the stacked outputs were 8 in-place writes and 7 copies of their
    zeros per epoch, and their sums more kernels after the epochs.

    Sharded over devices, every device holds its share of the minibatch; gradients and loss
    statistics are averaged, so every device applies the same update (one agent)."""
    params, opt_state, stopped, sums = carry
    mb = jax.tree.map(lambda x: jnp.take(x, idx, axis=0), batch)
    grad_fn = jax.value_and_grad(ppo_loss, has_aux=True)
    (_, info), grads = grad_fn(params, network, mb, hp, clip_vloss=config.clip_vloss,
                               norm_adv=config.norm_adv, axis_name=axis_name)
    grads, info = pmean((grads, info), axis_name)
    grad_norm = optax.tree.norm(grads)
    updates, new_opt_state = tx.update(grads, opt_state, params)
    new_params = jax.tree.map(lambda p, u: p - lr * u, params, updates)
    if config.target_kl is None:
        params, opt_state = new_params, new_opt_state
    else:
        # SB3's rule: a minibatch whose KL to the rollout policy is already too large is not
        # applied, and neither is any later one in this update.
        stopped = jnp.logical_or(stopped, info.approx_kl > config.target_kl)
        keep = lambda new, old: jnp.where(stopped, old, new)  # noqa: E731
        params = jax.tree.map(keep, new_params, params)
        opt_state = jax.tree.map(keep, new_opt_state, opt_state)
    applied = 1.0 - stopped.astype(jnp.float32)
    stats = jnp.stack([*(getattr(info, f) for f in STAT_FIELDS[:-2]), grad_norm, 1.0])
    return (params, opt_state, stopped, sums + applied * stats), None


def _epoch(carry, perm, *, batch: Minibatch, minibatch_step, config: PPOConfig):
    idx = perm.reshape(config.num_minibatches, -1)
    carry, _ = jax.lax.scan(functools.partial(minibatch_step, batch=batch), carry, idx)
    return carry, None


def update_randomness(key: jax.Array, env: VecEnv, config: PPOConfig, perm_size: int,
                      axis_name: str | None = None):
    """`(next key, the rollout's randomness, the epochs' shuffle bits [E, perm_size])`, from one
    draw of random bits: threefry was 7 loops per update on the CPU (the key split, the
    rollout's split, its noise, env keys and reset states, the shuffle), ~7% of CartPole's
    kernels. The next key is the first words of the draw (random bits are what a split makes).
    Sharded, the learner's next key must agree across devices and the rest must not: there
    the key is split, and the rest drawn from this device's fold of it."""
    words = jax.random.key_data(key).shape[-1]
    impl = jax.random.key_impl(key)
    n_rollout = rollout_words(env, config.num_steps, words)
    n_rest = n_rollout + config.update_epochs * perm_size
    if axis_name is None:
        bits = jax.random.bits(key, (words + n_rest,), jnp.uint32)
        next_key, bits = jax.random.wrap_key_data(bits[:words], impl=impl), bits[words:]
    else:
        next_key, sub = jax.random.split(key)
        bits = jax.random.bits(fold_device(sub, axis_name), (n_rest,), jnp.uint32)
    rand = rollout_randomness(bits[:n_rollout], env, config.num_steps, impl, words)
    return next_key, rand, bits[n_rollout:].reshape(config.update_epochs, perm_size)


def update_step(runner: RunnerState, _: Any, *, hp: Hparams, config: PPOConfig, env: VecEnv,
                network: ActorCritic, axis_name: str | None = None):
    """One PPO update: rollout, GAE, then `update_epochs` shuffled passes of minibatches.

    With `axis_name`, `config` is one device's share of an agent whose envs are split over
    devices (see `sharding.py`); everything that must agree across devices is reduced."""
    ts = runner.train_state
    perm_size = env.num_envs if is_recurrent(network) else config.batch_size
    key, rand, perm_bits = update_randomness(runner.key, env, config, perm_size, axis_name)
    settings = RolloutSettings(config.num_steps, config.normalize_obs, config.normalize_reward,
                               axis_name)
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
    tx = make_optimizer(hp, config)
    minibatch_step = functools.partial(_minibatch_step, hp=hp, lr=lr, tx=tx, network=network,
                                       config=config, axis_name=axis_name)
    epoch = functools.partial(_epoch, batch=batch, minibatch_step=minibatch_step, config=config)
    perms = permutations_from_bits(perm_bits)
    sums = jnp.zeros((len(STAT_FIELDS),), jnp.float32)
    (params, opt_state, _, sums), _ = jax.lax.scan(
        epoch, (ts.params, ts.opt_state, jnp.bool_(False), sums), perms)

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
    from. A frozen value: nothing here probes a device or touches a file."""

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

    def init(self, key: jax.Array, hparams: Hparams | None = None, params=None) -> RunnerState:
        with self._precision():
            return init_runner(key, self._hp(hparams), config=self.config, env=self.env,
                               network=self.network, axis_name=self.axis_name, params=params)

    def initial_params(self, key: jax.Array):
        """The network parameters `init(key)` starts from (orthogonal init)."""
        with self._precision():
            return init_params(self.network, init_keys(key)[0], self.env.obs_shape)

    def restart_episodes(self, runner: RunnerState) -> RunnerState:
        """`runner` with every env reset and its episode accumulators zeroed, the learner
        (train state, key, last return) untouched: how a run on a host env resumes, since the
        host's own state is in no checkpoint. The reset key is derived, never split off."""
        with self._precision():
            obs, env_state = self.env.reset(jax.random.fold_in(runner.key, RESTART_SALT))
            hidden, start = initial_memory(self.network, self.env.num_envs)
            zeros = jnp.zeros((self.env.num_envs,), jnp.float32)
            return runner._replace(env=EnvCarry(env_state, obs, zeros, hidden, start))

    def run(self, runner: RunnerState, hparams: Hparams | None = None,
            num_updates: int | None = None) -> tuple[RunnerState, dict[str, jax.Array]]:
        step = functools.partial(update_step, hp=self._hp(hparams), config=self.config,
                                 env=self.env, network=self.network, axis_name=self.axis_name)
        length = self.config.num_updates if num_updates is None else num_updates
        with self._precision():
            return jax.lax.scan(step, runner, None, length=length)

    def __call__(self, key: jax.Array, hparams: Hparams | None = None) -> TrainOutput:
        runner, metrics = self.run(self.init(key, hparams), hparams)
        return TrainOutput(runner.train_state, metrics, runner)


def make_train(config: PPOConfig, *, env: Any = None, env_params: Any = None,
               axis_name: str | None = None) -> Trainer:
    """Build `train(key, hparams=None) -> TrainOutput` for `config` (validated already).

    `env` is an environment instance to train on instead of the one `config.env_id` names (any
    gymnax `Environment`, or anything with the protocol of `jaxppo.envs.protocol`), with
    `env_params` (default: `env.default_params`); `config.env_id` then only labels the run.

    `train` is pure: jit it, vmap it over keys (seeds) or over `Hparams` (a sweep), or both.
    It checks no device memory (a run started by `jaxppo.Experiment` or the CLI does that;
    `jaxppo.estimate_memory(config, num_runs)` says what `num_runs` vmapped runs need).

    `axis_name` is for `make_sharded_train(..., shard="envs")`: `config` is then one device's
    share of the agent, and `train` must run inside a `shard_map` over that mesh axis.
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
