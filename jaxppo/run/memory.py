"""Estimate a config's device memory before compiling, and refuse what cannot fit.

XLA only learns that a program does not fit after compiling it (tens of seconds for a large
one), and then fails with a long allocator traceback. The estimate here is arithmetic on the
config plus the abstract shape of one environment state (`jax.eval_shape`, no compile), so a
config with a billion environments is refused in milliseconds with one line naming the knob.

Calibrated against XLA's own `Compiled.memory_analysis()` on the CPU (CartPole, Acrobot,
Pendulum, Breakout-MinAtar; 4 to 2048 envs; 64- to 512-wide networks): the estimate is within
0.6x-1.1x of what XLA reserves (a test keeps it there). It grows with the rollout
(`num_envs * num_steps`), the minibatch, the network and the number of runs, and only by the
O(num_updates) metrics with `total_timesteps`.
"""

from __future__ import annotations

import math
import os
from typing import Any, NamedTuple

import jax

from jaxppo.config import PPOConfig
from jaxppo.core.metrics import METRIC_NAMES
from jaxppo.core.networks import init_params, make_network
from jaxppo.core.rollout import values_after_scan
from jaxppo.core.torso_specs import CONV_STACKS
from jaxppo.envs import VecEnv
from jaxppo.envs.resets import default_reset_batch
from jaxppo.errors import ConfigError, UsageError
from jaxppo.keys import is_key

SKIP_ENV_VAR = "JAXPPO_SKIP_MEMORY_CHECK"
_METRICS_PER_UPDATE = len(METRIC_NAMES) + 2  # float32 scalars per update, and a little slack


class MemoryEstimate(NamedTuple):
    """Bytes per part for `num_runs` runs; `total` is what the check compares.

    What `estimate_memory` returns. The part that dominates names the knob to turn (state:
    `num_envs` or `hidden_sizes`; rollout: `num_envs` or `num_steps`; minibatch:
    `num_minibatches` or `hidden_sizes`; metrics: `total_timesteps`, or chunks).

    Attributes:
      state: params, Adam moments, normalizer, env states (held twice: in and out).
      rollout: pre-drawn randomness + the stored trajectory, GAE outputs, permutations.
      minibatch: one minibatch's data and the activations of its forward/backward pass.
      metrics: O(num_updates): the per-update scalars.
      num_runs: the runs the estimate is for (every part is already multiplied by it).
    """

    state: int
    rollout: int
    minibatch: int
    metrics: int
    num_runs: int

    @property
    def total(self) -> int:
        """Bytes in all: the sum of the four parts."""
        return self.state + self.rollout + self.minibatch + self.metrics


def _tree_bytes(tree) -> int:
    total = 0
    for x in jax.tree.leaves(tree):
        itemsize = 8 if is_key(x) else x.dtype.itemsize  # a threefry key is 2 x uint32
        total += math.prod(x.shape) * itemsize
    return total


def param_count(network, obs_shape: tuple[int, ...]) -> int:
    """The parameters of `network` (`make_network`'s), counted from its abstract init (conv
    torsos, a shared torso, recurrent cells and heads as built; nothing is computed)."""
    shapes = jax.eval_shape(lambda k: init_params(network, k, obs_shape), jax.random.key(0))
    return sum(math.prod(x.shape) for x in jax.tree.leaves(shapes))


def conv_floats(torso: str, obs_shape: tuple[int, ...]) -> int:
    """Floats in one observation's conv feature maps (0 for an MLP torso)."""
    if not CONV_STACKS.get(torso) or len(obs_shape) != 3:
        return 0
    h, w, total = obs_shape[0], obs_shape[1], 0
    for filters, kernel, stride in CONV_STACKS[torso]:
        h, w = (h - kernel) // stride + 1, (w - kernel) // stride + 1
        total += max(h, 0) * max(w, 0) * filters
    return total


def estimate_memory(config: PPOConfig, num_runs: int = 1, *, env: Any = None,
                    metrics_updates: int | None = None) -> MemoryEstimate:
    """Estimate the device memory of `num_runs` vmapped runs of `config`, without compiling.

    `metrics_updates` is how many updates' metrics one call returns (default: the whole run,
    as `train` does; the CLI's chunked driver returns one chunk at a time).

    XLA learns that a program does not fit only after compiling it; this is arithmetic on the
    config plus the abstract shape of one environment state (`jax.eval_shape`), so it takes
    milliseconds. Calibrated against XLA's own `memory_analysis()` on the CPU: within
    0.6x-1.1x of what XLA reserves. `Experiment.run()` refuses a config whose estimate
    exceeds the device's free memory (`JAXPPO_SKIP_MEMORY_CHECK=1` turns that off);
    `make_train` checks nothing, so call this before vmapping it over many runs.

        est = jaxppo.estimate_memory(config, num_runs=64)
        print(est.total / 2**30, "GiB")

    Args:
      config: the run's `PPOConfig`.
      num_runs: runs vmapped in one program (seeds x settings).
      env: the vectorised environment to measure (default: built from `config`, one copy).
      metrics_updates: updates whose metrics one call returns (default: the whole run).

    Returns:
      The `MemoryEstimate`: bytes per part, for all `num_runs` runs together.
    """
    env = env if env is not None else VecEnv.from_config(config, 1)
    T, N, B = config.num_steps, config.num_envs, config.batch_size
    obs_b = 4 * math.prod(env.obs_shape)
    act_dim = env.action_dim
    act_b = 4 * max(1, math.prod(env.action_shape))
    one_state = _tree_bytes(jax.eval_shape(env.env.reset_env, jax.random.key(0), env.params))

    hidden = list(config.hidden_sizes)
    network = make_network(config, env)
    params = 4 * param_count(network, env.obs_shape)
    per_env = one_state + obs_b + 16  # env state, next obs, episode stats, discounted return
    state = 2 * (3 * params + N * per_env)  # params + two Adam moments; input and output copies

    # Pre-drawn reset states/obs (not for lazy-reset envs, which reset N at a time, and under
    # `reset: optimistic` also hold a pool of K and draw K more per step), keys, noise.
    resets = N * (one_state + obs_b) if env.lazy_reset else T * N * (one_state + obs_b)
    if env.reset_mode == "optimistic":  # K of the training's N envs (env may hold fewer)
        k = min(N, config.reset_batch or default_reset_batch(N))
        resets += 2 * k * (one_state + obs_b)
    randomness = resets + T * N * (16 + 4 * act_dim)
    trajectory = T * N * (obs_b + act_b + 32)  # obs, action, logp, value, reward, flags, GAE
    if values_after_scan(network, env.obs_shape):
        trajectory += T * N * obs_b  # the final observations, for the values after the scan
    permutations = config.update_epochs * B * 12
    rollout = randomness + trajectory + permutations + N * (obs_b * 2 + 4 * sum(hidden) * 4)

    # Masks (1 byte per action per step, in the trajectory and the pre-drawn resets), a
    # recurrent policy's carry (state) and per-step cell activations kept for the replay's
    # backward pass, and a conv torso's feature maps (actor and critic each, or one shared).
    if env.masked:
        rollout += 2 * T * N * act_dim
    rnn = config.rnn_size * (2 if config.network == "lstm" else 1)
    if config.network != "feedforward":
        state += 2 * N * rnn * 4
        rollout += 2 * N * rnn * 4 * 3
    conv = conv_floats(config.torso, env.obs_shape)

    mb = config.minibatch_size
    minibatch = mb * (obs_b + act_b + 16) + mb * sum(hidden) * 8
    torsos = 1 if config.shared_torso else 2
    minibatch += mb * conv * 4 * torsos * 3  # activations, gradients, temporaries
    # the gradient and Adam's update of every parameter, live at once under XLA:CPU's default
    # (concurrency-optimized) thunk scheduler
    minibatch += 2 * params
    # the update's divergence check reads params and both Adam moments as one float32 vector
    minibatch += 3 * params
    if config.network != "feedforward":
        minibatch += mb * rnn * 4 * 8  # carries and gates of every replayed step

    updates = config.num_updates if metrics_updates is None else metrics_updates
    metrics = updates * _METRICS_PER_UPDATE * 4
    r = num_runs
    return MemoryEstimate(r * state, r * rollout, r * minibatch, r * metrics, num_runs)


def available_memory(device=None) -> tuple[int | None, str]:
    """Free bytes on `device` (default: JAX's first device) and a label naming it.

    Accelerators report their allocator's limit; on the CPU it is the host's available RAM.
    """
    device = device if device is not None else jax.devices()[0]
    stats = None
    try:
        stats = device.memory_stats()
    except Exception:  # noqa: BLE001 - backends without allocator statistics
        stats = None
    if stats and "bytes_limit" in stats:
        free = int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))
        return free, f"{device.platform.upper()} {device.id} ({device.device_kind})"
    free = host_available()
    return (free, "host RAM (CPU backend)") if free is not None else (None, "unknown device")


def host_available() -> int | None:
    """The host's available RAM in bytes (None where the OS does not say)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:,.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    raise AssertionError  # unreachable


def check_memory(config: PPOConfig, num_runs: int = 1, *, env=None, device=None,
                 metrics_updates: int | None = None) -> MemoryEstimate:
    """Raise `ConfigError` (one line: how much, and which knob to turn) when the estimate
    exceeds the device's free memory. `JAXPPO_SKIP_MEMORY_CHECK=1` turns the check off."""
    est = estimate_memory(config, num_runs, env=env, metrics_updates=metrics_updates)
    if os.environ.get(SKIP_ENV_VAR, "") not in ("", "0"):
        return est
    free, where = available_memory(device)
    if free is None or est.total <= free:
        return est
    parts = {"state": est.state, "rollout": est.rollout, "minibatch": est.minibatch,
             "metrics": est.metrics}
    biggest = max(parts, key=parts.get)
    knob = {
        "state": "lower num_envs or hidden_sizes",
        "rollout": f"lower num_envs or num_steps (the rollout holds {config.batch_size:,} "
                   "transitions)",
        "minibatch": "raise num_minibatches or lower hidden_sizes",
        "metrics": "lower total_timesteps, or drive the run in chunks",
    }[biggest]
    runs = f" for {num_runs} runs" if num_runs > 1 else ""
    fewer = " or run fewer seeds at once" if num_runs > 1 else ""
    raise ConfigError(
        f"this config needs about {fmt_bytes(est.total)} of memory{runs} ({biggest} "
        f"{fmt_bytes(parts[biggest])}) but {where} has {fmt_bytes(free)} free; {knob}{fewer} "
        f"(or set {SKIP_ENV_VAR}=1 to try anyway)")


MAX_RUNS = 1_000_000
"""Agents (seeds x settings) in one program at most: each one's setting, key, log rows and
summary entries live on the host too, whatever the device holds."""


def check_run_count(num_runs: int, what: str, error: type = ConfigError,
                    fix: str = "sweep fewer settings or seeds, in several runs") -> None:
    """Refuse more than `MAX_RUNS` agents (in one program, or one sweep of several), in one
    line naming `what` asked for them."""
    if num_runs > MAX_RUNS:
        raise error(f"{what}: {num_runs:,} agents; jaxppo runs at most {MAX_RUNS:,} in one "
                    f"run or sweep (each also lives on the host: its setting, key, log rows); "
                    f"{fix}")


def check_eval_memory(config: PPOConfig, num_runs: int, episodes: int, *, env=None) -> int:
    """Refuse (one line) an evaluation whose `num_runs x episodes` parallel episodes cannot fit:
    each holds an env state, an observation and a few scalars, about three times over (the
    scan's carry in and out, and one step's temporaries). Returns the estimate in bytes."""
    env = env if env is not None else VecEnv.from_config(config, 1)
    one_state = _tree_bytes(jax.eval_shape(env.env.reset_env, jax.random.key(0), env.params))
    per_episode = one_state + 4 * math.prod(env.obs_shape) + 32
    total = 3 * num_runs * episodes * per_episode
    free, where = available_memory()
    if os.environ.get(SKIP_ENV_VAR, "") in ("", "0") and free is not None and total > free:
        raise UsageError(f"evaluating {episodes:,} episodes for each of {num_runs} seed(s) at "
                         f"once needs about {fmt_bytes(total)} but {where} has "
                         f"{fmt_bytes(free)} free; lower --episodes")
    return total
