"""Whole episodes of a trained policy inside one jitted scan (evaluation, and the frames of a GIF).

Each of E envs plays exactly one episode (the first); steps after its end are masked, so the
scan has the static length of the env's time limit (`max_episode_steps`: 1000 where the env
states none, and an episode still running then is reported as cut off, never as finished).
`evaluate_runs` vmaps that over the R runs (seeds or sweep settings) of a checkpoint: one
program, one compile, for all of them.

Axis legend: R runs, E episodes, T = the env's time limit.

Keys: `key` splits into `(reset_key, run_key)`; episode e starts from
`env.reset(split(reset_key, E)[e])` and step t steps with `split(run_key, T)[t]`. Every run gets
the same `key` (common random numbers): the runs face the same start states, so their returns
differ by their policies, not by their luck.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxppo.config import PPOConfig
from jaxppo.core.batching import batched_like
from jaxppo.core.networks import initial_memory, is_recurrent, make_network
from jaxppo.core.normalize import rms_normalize
from jaxppo.core.train import TrainState
from jaxppo.envs import EnvState, HostVecEnv, VecEnv
from jaxppo.keys import as_key
from jaxppo.process import StopFlag, native_work


class EpisodeCarry(NamedTuple):
    """The carry of the episode scan: E envs, each playing its first episode."""

    state: EnvState
    obs: jax.Array  # [E, *obs_shape]
    ret: jax.Array  # [E] return so far; frozen once the episode is over
    length: jax.Array  # [E] int32 steps so far
    finished: jax.Array  # [E] bool: the first episode has ended
    hidden: Any = None  # recurrent policies: the cell's carry [E, H]
    start: jax.Array | None = None  # recurrent: [E] bool, obs begins an episode


def policy_action(network, ts: TrainState, obs: jax.Array, key: jax.Array | None, *,
                  deterministic: bool, normalize: bool, mask: jax.Array | None = None
                  ) -> jax.Array:
    """The action for `obs` [B, *obs_shape]: the distribution's mode, or a sample from `key`;
    `mask` [B, A] keeps a masked env's choice among its legal actions.

    With `normalize`, observations first go through the normalizer saved in `ts`, as in
    training; a policy fed raw observations acts on inputs it never saw."""
    if normalize:
        obs = rms_normalize(ts.normalizer.obs, obs)
    dist = network.apply(ts.params, obs, mask, method="policy")
    return dist.mode() if deterministic else dist.sample(key)


def recurrent_policy_action(network, ts: TrainState, obs: jax.Array, hidden, start: jax.Array,
                            key: jax.Array | None, *, deterministic: bool, normalize: bool,
                            mask: jax.Array | None = None):
    """`policy_action` for a recurrent policy: `(action, new hidden)`; the carry `hidden`
    [B, H] is reset first where `start` [B] marks an episode's first observation."""
    if normalize:
        obs = rms_normalize(ts.normalizer.obs, obs)
    dist, _, hidden = network.apply(ts.params, obs, hidden, start, mask)
    return (dist.mode() if deterministic else dist.sample(key)), hidden


def _episode_step(carry: EpisodeCarry, key: jax.Array, *, env: VecEnv, network, ts: TrainState,
                  deterministic: bool, normalize: bool, record: bool):
    act_key, step_key = jax.random.split(key)
    kw = dict(deterministic=deterministic, normalize=normalize, mask=env.action_mask(carry.state))
    hidden = start = None
    if is_recurrent(network):
        action, hidden = recurrent_policy_action(network, ts, carry.obs, carry.hidden,
                                                 carry.start, act_key, **kw)
    else:
        action = policy_action(network, ts, carry.obs, act_key, **kw)
    state, step = env.step(step_key, carry.state, action)
    live = ~carry.finished
    if step.game_over is None:
        ended = step.done
        ret = carry.ret + jnp.where(live, step.reward, 0.0)
    else:  # a host source's logged episode: its score, up to game over
        ended = step.game_over
        ret = jnp.where(live, jnp.where(ended, step.episode_return, state.episode_return),
                        carry.ret)
    if hidden is not None:
        start = step.done
    carry = EpisodeCarry(state, step.obs, ret, carry.length + live.astype(jnp.int32),
                         carry.finished | ended, hidden, start)
    return carry, ((state.inner, ret) if record else None)


def max_episode_steps(env: VecEnv) -> int:
    """How long the evaluation scan runs: the env's time limit, under the names the sources
    use for it (1000 if it states none)."""
    names = ("max_steps_in_episode", "max_timesteps", "max_steps", "time_limit",
             "episode_length")
    limits = [env.max_episode_steps]
    limits += [getattr(obj, n, None) for obj in (env.params, env.env) for n in names]
    limits = [int(x) for x in limits if isinstance(x, (int, np.integer)) and x > 0]
    return min(limits) if limits else 1000


def _play(env: VecEnv, network, ts: TrainState, key: jax.Array, *, deterministic: bool,
          normalize: bool, record: bool = False):
    """Reset `env`'s E envs and step them for the time limit in one scan. Returns the reset
    state, the final `EpisodeCarry` and, with `record`, per step `(env state, return so far)`."""
    reset_key, run_key = jax.random.split(key)
    obs, state = env.reset(reset_key)
    n = env.num_envs
    hidden, start = initial_memory(network, n)
    carry = EpisodeCarry(state, obs, jnp.zeros((n,)), jnp.zeros((n,), jnp.int32),
                         jnp.zeros((n,), bool), hidden, start)
    carry = batched_like(carry, (ts, key))  # every step mixes the policy's actions in
    step = functools.partial(_episode_step, env=env, network=network, ts=ts,
                             deterministic=deterministic, normalize=normalize, record=record)
    final, per_step = jax.lax.scan(step, carry, jax.random.split(run_key, max_episode_steps(env)))
    return state, final, per_step


def _returns(ts: TrainState, key: jax.Array, *, env: VecEnv, network, deterministic: bool,
             normalize: bool) -> tuple[jax.Array, jax.Array, jax.Array]:
    _, final, _ = _play(env, network, ts, key, deterministic=deterministic, normalize=normalize)
    return final.ret, final.length, final.finished


def cached(fn):
    """A cache of the 16 latest results keyed by the arguments, unhashable ones (an env instance
    whose params hold arrays) by identity; the arguments are kept with the result, so an id is
    never reused while it is a key."""
    memo: dict = {}

    def key_of(a):
        try:
            hash(a)
            return a
        except TypeError:
            return ("id", id(a))

    @functools.wraps(fn)
    def call(*args):
        key = tuple(key_of(a) for a in args)
        if key not in memo:
            if len(memo) >= 16:
                memo.pop(next(iter(memo)))
            memo[key] = (fn(*args), args)
        return memo[key][0]

    call.cache_clear = memo.clear  # as functools.lru_cache has
    return call


@cached
def _evaluator(config: PPOConfig, num_episodes: int, deterministic: bool, batched: bool,
               env_obj=None, env_params=None):
    """One jitted evaluation per (config, E, mode): later calls reuse its compiled program."""
    env = VecEnv.from_config(config, num_episodes, env_obj, env_params, evaluation=True)
    run = functools.partial(_returns, env=env, network=make_network(config, env),
                            deterministic=deterministic, normalize=config.normalize_obs)
    if not isinstance(env, HostVecEnv):
        return compiled_first(jax.jit(jax.vmap(run, in_axes=(0, None)) if batched else run))
    # every run its own envs in the host pool: the key is mapped too (the same for each run)
    program = compiled_first(jax.jit(functools.partial(_each_run, jax.vmap(run)) if batched
                                     else run))

    def checked(*args):  # a fault of the host env during the episodes: one line
        out = jax.device_get(program(*args))
        env.check()
        return out

    return checked


def compiled_first(program):
    """`program` (a jitted function), compiled before it runs, with the stop signals held (the
    jit keeps what `lower().compile()` built: the call compiles nothing more). A Ctrl-C while
    XLA compiles then stops once the compile is done, before any episode is played
    (`StopNow(signum, "while compiling")`), not inside XLA; a second one at once."""

    @functools.wraps(program)
    def call(*args):
        with StopFlag() as stop, native_work():
            stop.check("while starting")  # one that came while the checkpoint loaded
            program.lower(*args).compile()
            stop.check("while compiling")
            return program(*args)

    return call


def _each_run(run, train_states: TrainState, key: jax.Array):
    """`run` with `key` repeated for each of the R runs of `train_states`."""
    runs = jax.tree.leaves(train_states)[0].shape[0]
    return run(train_states, jax.random.clone(jnp.stack([key] * runs)))


def evaluate(config: PPOConfig, train_state: TrainState, key: jax.Array, num_episodes: int = 10,
             deterministic: bool = True, *, env=None, env_params=None
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return `(returns [E], lengths [E], finished [E] bool)` of one run's `num_episodes`
    episodes, played in parallel (on `env`, an environment instance, when the run trained on
    one); `finished` is False for an episode cut off at `max_episode_steps` (its return is the
    sum so far)."""
    key = as_key(key, "evaluate(config, train_state, key)")
    ret, length, finished = _evaluator(config, num_episodes, deterministic, False, env,
                                       env_params)(train_state, key)
    return np.asarray(ret), np.asarray(length), np.asarray(finished)


def evaluate_runs(config: PPOConfig, train_states: TrainState, key: jax.Array,
                  num_episodes: int = 10, deterministic: bool = True, *, env=None,
                  env_params=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`evaluate` for R runs at once (`train_states` leaves lead with R), vmapped in one
    program; every run plays with the same `key`. Returns `(returns, lengths, finished)`,
    each [R, E]."""
    key = as_key(key, "evaluate_runs(config, train_states, key)")
    if jax.tree.leaves(train_states)[0].shape[0] == 1:  # one run: no vmap to trace (batching
        # a physics step's inner loops costs a Brax eval more to trace than the step itself)
        one = jax.tree.map(lambda x: x[0], train_states)
        return tuple(a[None] for a in evaluate(config, one, key, num_episodes, deterministic,
                                               env=env, env_params=env_params))
    ret, length, finished = _evaluator(config, num_episodes, deterministic, True, env,
                                       env_params)(train_states, key)
    return np.asarray(ret), np.asarray(length), np.asarray(finished)


@cached
def _episode_player(config: PPOConfig, deterministic: bool, env_obj=None, env_params=None):
    env = VecEnv.from_config(config, 1, env_obj, env_params, evaluation=True)
    network = make_network(config, env)

    def run(ts, key):
        first, final, (inner, returns) = _play(env, network, ts, key, deterministic=deterministic,
                                               normalize=config.normalize_obs, record=True)
        return first.inner, inner, returns, final.length

    return env, compiled_first(jax.jit(run))


def play_episode(config: PPOConfig, train_state: TrainState, key: jax.Array,
                 deterministic: bool = True, *, env=None, env_params=None
                 ) -> tuple[VecEnv, list, list[float], int]:
    """Play one episode in one jitted scan; returns `(env, states, cumulative returns, length)`
    with one unbatched env state per frame (the reset state first, the terminal one excluded)."""
    env, run = _episode_player(config, deterministic, env, env_params)
    key = as_key(key, "play_episode(config, train_state, key)")
    first, inner, returns, length = jax.device_get(run(train_state, key))
    length = int(length[0])
    states = [jax.tree.map(lambda x: x[0], first)]
    states += [jax.tree.map(lambda x, t=t: x[t, 0], inner) for t in range(length - 1)]
    rewards = [0.0] + [float(r) for r in returns[: length - 1, 0]]
    return env, states, rewards, length
