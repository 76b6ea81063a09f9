"""Collect one rollout of `num_steps` x `num_envs` transitions with a `lax.scan`.

`logp_old` and `values_old` are stored as the actions are taken, so the update never needs a
forward pass over the whole batch: its memory is bounded by the minibatch.

All randomness of the rollout (action noise, env step keys, autoreset states) comes before the
scan, not per step: from the update's one draw of random bits (`RolloutRandomness`, made by
`rollout_randomness`), or drawn here from a key. See `envs.StepRandomness`.

The value of the true next state V(s'_t) (the final observation where an episode ended, so that
truncated episodes bootstrap) is computed one step late, in the same critic call as V(s_{t+1}):
one batched forward of 2N rows instead of two calls. Only the last step's needs a call of its own.

Where the critic is a network of its own over observation vectors (`values_after_scan`), no
step calls it: the step keeps the observations it read, and critic calls after the scan give
every V(s_t) and V(s'_{t-1}), `RolloutSettings.value_rows` transitions at a time (the update
passes its minibatch size, so this pass's memory stays bounded as the update's is). The
parameters do not change during a rollout, so the values are the same, within float rounding
(calls of 2 x value_rows rows instead of T calls of 2N). On the 2-core CPU a step of one seed's
CartPole then runs the actor alone, without the critic's kernels to hand to XLA's second pool
thread: +6% SPS at 1 seed (docs/benchmarks/purejaxrl.md, "The critic after the rollout"); an
H100's program launches 11% fewer kernels per update.

Axis legend: T = num_steps, N = num_envs.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import chex
import jax
import jax.numpy as jnp

from jaxppo.core.batching import batched_like
from jaxppo.core.collectives import fold_device
from jaxppo.core.distributions import action_noise_from_bits
from jaxppo.core.networks import is_recurrent
from jaxppo.core.normalize import NormalizerState, rms_normalize, rms_update
from jaxppo.envs import EnvState, EnvStep, StepRandomness, VecEnv


class Transition(NamedTuple):
    obs: jax.Array  # [T, N, *obs_shape] as the policy saw it (normalized if enabled)
    action: jax.Array  # [T, N] or [T, N, D]
    logp: jax.Array  # [T, N] log-prob of the action at rollout time
    value: jax.Array  # [T, N] V(s_t) at rollout time
    reward: jax.Array  # [T, N] (scaled if normalize_reward)
    terminated: jax.Array  # [T, N]
    done: jax.Array  # [T, N]
    mask: jax.Array | None = None  # [T, N, A] legal actions at obs (masked envs only)
    start: jax.Array | None = None  # [T, N] bool: obs begins an episode (recurrent only)
    hidden: Any = None  # [T, N, H] the carry after each step; only with `record_hidden`


class EnvCarry(NamedTuple):
    """Everything about the environments that persists across updates."""

    env_state: EnvState
    obs: jax.Array  # [N, *obs_shape] raw observation to act on next
    discounted_return: jax.Array  # [N] running discounted return, for reward scaling
    hidden: Any = None  # recurrent policies: the cell's carry after the last step [N, H]
    start: jax.Array | None = None  # recurrent: [N] bool, `obs` begins an episode


class EnvFaults(NamedTuple):
    """Env output of one rollout that cannot be trained on (counts of NaN/Inf values, summed
    like the episode sums): the update's divergence check names the env before anything
    downstream."""

    obs: jax.Array  # NaN/Inf observation values (acted on, or the true final ones)
    reward: jax.Array  # NaN/Inf rewards
    mask: jax.Array  # steps x envs whose action mask allowed no action (masked envs only)


class EpisodeStats(NamedTuple):
    """Sums over the episodes that ended during one rollout, and the env's faults over all its
    steps (scalars).

    Inside the scan they are kept per env (`_StepCarry.sums`, [K, N]): each step's bookkeeping
    is then elementwise, and XLA fuses it into the kernel that updates the env state. A sum
    over envs every step was 5 more kernels per step on an H100, and the reduction in the
    state's kernel kept the state from being updated in place (a copy of each state leaf per
    step). The sums over envs are taken once, after the scan."""

    return_sum: jax.Array
    length_sum: jax.Array
    count: jax.Array
    metric_sums: dict[str, jax.Array]  # the env's episode metrics, summed the same way
    faults: EnvFaults


class RolloutRandomness(NamedTuple):
    """Everything random about one rollout, drawn before its scan."""

    action_noise: jax.Array  # [T, N, A or D] for `sample_from_noise`
    env: Any  # `StepRandomness` (leaves [T, ...]); a host env's: [T] zeros


def rollout_words(env: VecEnv, num_steps: int, key_words: int) -> int:
    """Random uint32 words one rollout consumes: one per action-noise value, `key_words` per
    env key (`VecEnv.keys_per_step` per step)."""
    return num_steps * (env.num_envs * env.action_dim + env.keys_per_step * key_words)


def rollout_randomness(bits: jax.Array, env: VecEnv, num_steps: int, impl: Any,
                       key_words: int) -> RolloutRandomness:
    """A rollout's randomness from `rollout_words(...)` random uint32 `bits`: the noise from
    the first words, the env keys (of PRNG implementation `impl`, `key_words` words each) from
    the rest (none for a host env)."""
    t, n, a = num_steps, env.num_envs, env.action_dim
    noise = action_noise_from_bits(bits[:t * n * a].reshape(t, n, a), env.discrete)
    data = bits[t * n * a:].reshape(t, env.keys_per_step, key_words)
    return RolloutRandomness(noise, env.randomness_from_keys(
        jax.random.wrap_key_data(data, impl=impl)))


def draw_rollout_randomness(key: jax.Array, env: VecEnv, num_steps: int) -> RolloutRandomness:
    """`rollout_randomness` of one draw from `key`."""
    words = jax.random.key_data(key).shape[-1]
    bits = jax.random.bits(key, (rollout_words(env, num_steps, words),), jnp.uint32)
    return rollout_randomness(bits, env, num_steps, jax.random.key_impl(key), words)


class RolloutSettings(NamedTuple):
    """Static switches for the rollout (fixed at trace time)."""

    num_steps: int
    normalize_obs: bool
    normalize_reward: bool
    axis_name: str | None = None  # set when one agent's envs are split over devices
    record_hidden: bool = False  # keep a recurrent policy's carry per step (tests, analysis)
    value_rows: int = 0  # transitions per critic call when values come after the scan; 0: all


class _StepCarry(NamedTuple):
    env: EnvCarry
    prev_final_obs: jax.Array
    norm: NormalizerState
    sums: jax.Array  # [K, N] per env: `_step_sums`'s rows, summed over the steps so far
    bad_obs: jax.Array  # [N, *obs_shape] NaN/Inf observation values so far ([N] zeros: integer obs)


class _StepOut(NamedTuple):
    """What each step stacks. The float32 per-env values travel as one [F, N] block
    (`FLOAT_FIELDS`, or `LATE_FLOAT_FIELDS` where the values come after the scan): one in-place
    write per step instead of one each (on an H100, five kernels fewer per step), and one
    buffer to initialize (XLA gave each of its zeros-filled outputs of one shape a copy of the
    same zeros, per update)."""

    obs: jax.Array
    action: jax.Array
    floats: jax.Array  # [F, N]
    mask: jax.Array | None
    start: jax.Array | None
    hidden: Any
    prev_final: jax.Array | None = None  # [N, *obs_shape] as the critic reads it: values after


FLOAT_FIELDS = ("logp", "value", "reward", "terminated", "done", "prev_next_value")
LATE_FLOAT_FIELDS = ("logp", "reward", "terminated", "done")


def values_after_scan(network, obs_shape: tuple[int, ...]) -> bool:
    """Whether a rollout computes its values after the scan, in batched critic calls: a
    feed-forward network whose critic has a torso of its own, over observation vectors. A
    recurrent critic needs the carry of each step; a shared torso is read in the step anyway
    (for the actor), so its values cost the step little; an image observation kept a second
    time per step would double the rollout's largest buffer."""
    return (not is_recurrent(network) and not getattr(network, "shared_torso", False)
            and len(obs_shape) == 1)


def _observe(norm: NormalizerState, obs: jax.Array, enabled: bool) -> jax.Array:
    return rms_normalize(norm.obs, obs) if enabled else obs


def all_finite(tree: Any) -> jax.Array:
    """True when every float leaf of `tree` is free of NaN/Inf (integer and bool leaves, an
    env's discrete observations included, always are). The leaves are checked as one vector:
    one reduction, not one kernel pair per leaf (a params + Adam tree has dozens of leaves, and
    each kernel costs dispatch time on the CPU and a launch on a GPU). The price is one float32
    copy of the tree (per agent under a vmap), which `memory.estimate_memory` counts; a
    reduction per leaf instead (`max |x|`) ran as many kernels as the pairs it replaced."""
    leaves = [jnp.ravel(x).astype(jnp.float32) for x in jax.tree.leaves(tree)
              if jnp.issubdtype(jnp.asarray(x).dtype, jnp.inexact)]
    return jnp.all(jnp.isfinite(jnp.concatenate(leaves))) if leaves else jnp.bool_(True)


def _nonfinite(x: jax.Array) -> jax.Array:
    """1.0 where `x` is NaN/Inf, else 0.0, elementwise."""
    return 1.0 - jnp.isfinite(x).astype(jnp.float32)


def _obs_faults(bad_obs: jax.Array, *observations: jax.Array) -> jax.Array:
    """Add the NaN/Inf values of raw observations, per env and value. Integer and bool
    observations (image grids) are always finite: `bad_obs` stays as it is."""
    for obs in observations:
        if jnp.issubdtype(obs.dtype, jnp.inexact):
            bad_obs = bad_obs + _nonfinite(obs)
    return bad_obs


def _step_sums(env: VecEnv, step: EnvStep, mask: jax.Array | None) -> jax.Array:
    """One step's [K, N] rows, per env: the ended episodes' return, length and count (a whole
    game where the source says so, `game_over`, else `done`), the env's episode metrics, then
    the faults: a NaN/Inf raw reward, a mask (the one to act on next) that allows nothing."""
    done = (step.done if step.game_over is None else step.game_over).astype(jnp.float32)
    no_action = (jnp.zeros_like(done) if mask is None
                 else env.allows_nothing(mask).astype(jnp.float32))
    return jnp.stack([done * step.episode_return, done * step.episode_length, done,
                      *(done * step.metrics[k] for k in env.metric_names),
                      _nonfinite(step.reward), no_action])


def _total(env: VecEnv, sums: jax.Array, bad_obs: jax.Array) -> EpisodeStats:
    """The rollout's per-env sums, summed over envs (and observation values)."""
    t = jnp.sum(sums, axis=1)
    m = len(env.metric_names)
    return EpisodeStats(t[0], t[1], t[2], {k: t[3 + i] for i, k in enumerate(env.metric_names)},
                        EnvFaults(jnp.sum(bad_obs), t[3 + m], t[4 + m]))


def _rollout_step(carry: _StepCarry, xs: tuple[jax.Array, StepRandomness], *, env: VecEnv,
                  network, params, gamma, settings: RolloutSettings, late: bool = False):
    action_noise, env_rand = xs
    n = env.num_envs
    obs = _observe(carry.norm, carry.env.obs, settings.normalize_obs)
    prev_final = _observe(carry.norm, carry.prev_final_obs, settings.normalize_obs)
    mask = env.action_mask(carry.env.env_state)
    hidden = start = None
    if is_recurrent(network):
        # Rows 0..N-1: this step, the carry reset where an episode starts. Rows N..2N-1: the
        # true final observation of the previous step, read with the carry it had (no reset),
        # whose value a truncated episode bootstraps from.
        start = carry.env.start
        x = network.apply(params, jnp.concatenate([obs, prev_final]), method="encode")
        twice = jax.tree.map(lambda h: jnp.concatenate([h, h]), carry.env.hidden)
        new, y = network.apply(params, twice, x, jnp.concatenate([start, jnp.zeros_like(start)]),
                               method="cell_step")
        hidden = jax.tree.map(lambda h: h[:n], new)
        dist = network.apply(params, y[:n], mask, method="policy_head")
        both = network.apply(params, y, method="value_head")
    elif getattr(network, "shared_torso", False):  # the torso once over obs and final obs
        dist, both = network.apply(params, obs, prev_final, mask, method="act_and_values")
    else:
        dist = network.apply(params, obs, mask, method="policy")
        both = None if late else network.apply(params, jnp.concatenate([obs, prev_final]),
                                                method="value")
    action = dist.sample_from_noise(action_noise)
    logp = dist.log_prob(action)

    env_state, step = env.step_with(env_rand, carry.env.env_state, action)

    norm = carry.norm
    if settings.normalize_obs:
        norm = norm._replace(obs=rms_update(norm.obs, step.obs, settings.axis_name))
    reward = step.reward
    disc = carry.env.discounted_return
    if settings.normalize_reward:
        disc = disc * gamma + step.reward
        norm = norm._replace(ret=rms_update(norm.ret, disc, settings.axis_name))
        reward = jnp.clip(step.reward / jnp.sqrt(norm.ret.var + 1e-8), -10.0, 10.0)
        disc = jnp.where(step.done, 0.0, disc)

    # Bookkeeping reads this step's outputs only (the observation and mask to act on next, the
    # true final observation): reading the carry this step overwrites kept XLA from updating
    # it in place (a copy per step). The first observation is checked before the scan.
    sums = carry.sums + _step_sums(env, step, env.action_mask(env_state))
    bad_obs = _obs_faults(carry.bad_obs, step.obs, step.final_obs)
    per_env = {"logp": logp, "reward": reward, "terminated": step.terminated.astype(jnp.float32),
               "done": step.done.astype(jnp.float32)}
    if not late:
        per_env |= {"value": both[:n], "prev_next_value": both[n:]}
    floats = jnp.stack([per_env[k] for k in (LATE_FLOAT_FIELDS if late else FLOAT_FIELDS)])
    out = _StepOut(obs, action, floats, mask, start, hidden if settings.record_hidden else None,
                   prev_final if late else None)
    env_carry = EnvCarry(env_state, step.obs, disc, hidden,
                         None if start is None else step.done)
    return _StepCarry(env_carry, step.final_obs, norm, sums, bad_obs), out


def value_steps(num_steps: int, num_envs: int, value_rows: int) -> int:
    """Steps per critic call after the scan: the most that divide `num_steps` and hold at most
    `value_rows` transitions (at least one step; all of them where `value_rows` is 0)."""
    if value_rows <= 0:
        return num_steps
    fit = [c for c in range(1, num_steps + 1) if num_steps % c == 0 and c * num_envs <= value_rows]
    return max(fit, default=1)


def _values_after(network, params, obs: jax.Array, prev_final: jax.Array,
                  value_rows: int) -> tuple[jax.Array, jax.Array]:
    """V(s_t) and V(s'_{t-1}) ([T, N] each, float32) of a rollout's observations `obs` and
    `prev_final` ([T, N, D]), in calls of `value_steps` steps."""
    T, n = obs.shape[:2]
    c = value_steps(T, n, value_rows)
    x = jnp.concatenate([obs, prev_final], axis=1).reshape(T // c, c * 2 * n, -1)
    value = lambda rows: network.apply(params, rows, method="value")  # noqa: E731
    v = value(x[0])[None] if c == T else jax.lax.map(value, x)
    v = v.astype(jnp.float32).reshape(T, 2 * n)
    return v[:, :n], v[:, n:]


def _last_next_value(network, params, hidden, last_final: jax.Array) -> jax.Array:
    """V(s'_T), the last step's true next state, read with the carry it had (no reset)."""
    if not is_recurrent(network):
        return network.apply(params, last_final, method="value")
    x = network.apply(params, last_final, method="encode")
    _, y = network.apply(params, hidden, x, jnp.zeros((last_final.shape[0],), bool),
                         method="cell_step")
    return network.apply(params, y, method="value_head")


def rollout(rand: RolloutRandomness | jax.Array, env_carry: EnvCarry, norm: NormalizerState,
            params, *, env: VecEnv, network, gamma, settings: RolloutSettings):
    """Run T steps with `rand` (or randomness drawn from `rand`, a key; this device's own when
    sharded). Returns `(env_carry, norm, transitions [T, N], next_values [T, N], stats)`."""
    T, n = settings.num_steps, env.num_envs
    if not isinstance(rand, RolloutRandomness):
        rand = draw_rollout_randomness(fold_device(rand, settings.axis_name), env, T)
    # The first observation and mask's faults (each step checks the ones it hands on).
    mask0 = env.action_mask(env_carry.env_state)
    sums = jnp.zeros((5 + len(env.metric_names), n), jnp.float32)
    if mask0 is not None:
        sums = sums.at[-1].set(env.allows_nothing(mask0).astype(jnp.float32))
    float_obs = jnp.issubdtype(env_carry.obs.dtype, jnp.inexact)
    bad_obs = _obs_faults(jnp.zeros(env_carry.obs.shape if float_obs else (n,), jnp.float32),
                          env_carry.obs)
    sums, bad_obs = batched_like((sums, bad_obs), env_carry)
    init = _StepCarry(env_carry, env_carry.obs, norm, sums, bad_obs)
    late = values_after_scan(network, env_carry.obs.shape[1:])
    step_fn = functools.partial(_rollout_step, env=env, network=network, params=params,
                                gamma=gamma, settings=settings, late=late)
    carry, out = jax.lax.scan(step_fn, init, (rand.action_noise, rand.env))
    last_final = _observe(carry.norm, carry.prev_final_obs, settings.normalize_obs)
    fields = LATE_FLOAT_FIELDS if late else FLOAT_FIELDS
    f = {k: out.floats[:, i] for i, k in enumerate(fields)}
    if late:
        f["value"], f["prev_next_value"] = _values_after(network, params, out.obs,
                                                         out.prev_final, settings.value_rows)
    # prev_next_value[t] = V(s'_{t-1}); the last step's true next state needs one more call.
    last_next_value = _last_next_value(network, params, carry.env.hidden, last_final)
    traj = Transition(out.obs, out.action, f["logp"], f["value"], f["reward"],
                      f["terminated"] > 0, f["done"] > 0, out.mask, out.start, out.hidden)
    next_values = jnp.concatenate([f["prev_next_value"][1:], last_next_value[None]], axis=0)
    chex.assert_equal_shape([traj.value, next_values, traj.reward, traj.done])
    chex.assert_shape(traj.value, (settings.num_steps, env.num_envs))
    return carry.env, carry.norm, traj, next_values, _total(env, carry.sums, carry.bad_obs)
