"""Scale-out with JAX's own machinery: one training program over a `jax.sharding.Mesh`.

Two ways to split the work over the mesh's devices (the mesh may span several processes
joined by `jax.distributed.initialize`; see `init_distributed`):

- `shard="seeds"`: the vmapped runs axis (seeds, or settings x seeds of a sweep) is split over
  devices with `jax.jit` shardings. Runs never talk to each other, so the results equal the
  single-device run (tested on 4 CPU devices).
- `shard="envs"`: one agent's environments are split over devices with `jax.shard_map`. Each
  device steps `num_envs / D` envs and holds that share of every minibatch; gradients, loss
  statistics, advantage and observation/reward normalization statistics and episode counts are
  reduced over devices (`collectives.py`), so every device applies the same update and the
  devices together are one agent with `num_envs` envs. The minibatch is the same size as
  unsharded (each device takes `minibatch_size / D` of it).

The replicated outputs (params, optimizer and normalizer state, metrics) are replicated by
construction, every device reducing the same values; `shard_map`'s static replication check is
off (`check_vma=False`) because it cannot see that through the scans, and a test checks that
every device holds the same params instead.

A checkpoint holds the global arrays (runs, or envs, concatenated over devices), so it restores
on another device count, as long as that count divides the runs (seeds) or `num_envs` (envs).

Axis legend: R = runs, D = devices in the mesh.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxppo.checkpoint import is_key
from jaxppo.config import ConfigError, Hparams, PPOConfig
from jaxppo.train import RunnerState, TrainOutput, make_train

AXIS = "devices"
SHARD_MODES = ("seeds", "envs")


def make_mesh(devices: int | str | None = None) -> Mesh:
    """A 1-D mesh over the first `devices` of `jax.devices()` ("all" or None: every device,
    of every process when `jax.distributed` is initialized)."""
    available = jax.devices()
    if devices in (None, "all"):
        n = len(available)
    else:
        try:
            n = int(devices)
        except (TypeError, ValueError):
            n = 0
        if not 1 <= n <= len(available):
            raise ConfigError(
                f"--devices {devices}: {len(available)} {available[0].platform} device(s) "
                f"available; use 1..{len(available)} or 'all' (on a CPU, "
                "XLA_FLAGS=--xla_force_host_platform_device_count=N makes N devices)")
    return Mesh(np.array(available[:n]), (AXIS,))


def local_config(config: PPOConfig, num_devices: int) -> PPOConfig:
    """One device's share of an env-sharded agent: `num_envs / D` envs, the same number of
    updates and minibatches (so each device holds `1/D` of every minibatch)."""
    where = f"--shard envs over {num_devices} devices"
    if config.num_envs % num_devices:
        raise ConfigError(f"config key 'num_envs': {config.num_envs} envs do not split over "
                          f"{num_devices} devices ({where}); use a multiple of {num_devices}")
    n = config.num_envs // num_devices
    try:
        return dataclasses.replace(config, num_envs=n,
                                   total_timesteps=config.num_updates * n * config.num_steps)
    except ConfigError as e:
        raise ConfigError(f"{where}, each device's share: {e}") from None


class ShardedTrain:
    """`make_train` for a mesh: `init(keys, hparams)`, `run(runner, hparams, n)` (jitted,
    sharded; runs lead every leaf) and `__call__(keys, hparams) -> TrainOutput`."""

    def __init__(self, config: PPOConfig, mesh: Mesh, shard: str = "seeds"):
        if shard not in SHARD_MODES:
            raise ConfigError(f"--shard {shard!r}: use one of {', '.join(SHARD_MODES)}")
        self.config, self.mesh, self.shard = config, mesh, shard
        self.replicated = NamedSharding(mesh, P())
        self.runs = NamedSharding(mesh, P(AXIS))
        if shard == "seeds":
            self.local = config
            self.train = make_train(config, memory_check=False)
        else:
            self.local = local_config(config, mesh.size)
            self.train = make_train(self.local, memory_check=False, axis_name=AXIS)
        # Where per-run inputs (keys, hparams, initial params) go: split with the runs, or
        # replicated for envs (every device holds all runs, a share of each one's envs).
        self.inputs = self.runs if shard == "seeds" else self.replicated
        self._runs_jit: dict[Any, Any] = {}
        # A precaution on XLA:CPU: programs with cross-device collectives (env-sharded ones, a
        # multi-process gather) run one at a time, never two in flight. (The hangs first seen
        # here came from the QR in the network init; see `initial_params`.)
        self.serial = jax.default_backend() == "cpu" and (
            shard == "envs" or jax.process_count() > 1)

    def check_runs(self, num_runs: int) -> None:
        if self.shard == "seeds" and num_runs % self.mesh.size:
            raise ConfigError(f"--seeds {num_runs}: with --shard seeds the runs split evenly "
                              f"over the {self.mesh.size} devices; use a multiple of "
                              f"{self.mesh.size} (or --shard envs)")

    # -- the sharding of each piece ---------------------------------------------------------
    def _runner_specs(self, num_runs: int, hp_axis):
        """PartitionSpecs of a runner state (env leaves split on their env axis)."""
        # The structure only: traced without the mesh axis (same tree as the sharded init).
        plain = make_train(self.local, memory_check=False)
        shape = jax.eval_shape(jax.vmap(plain.init, in_axes=(0, hp_axis)),
                               jax.random.split(jax.random.key(0), num_runs),
                               None if hp_axis is None else Hparams.from_config(self.config))
        env = jax.tree.map(lambda _: P(None, AXIS), shape.env)
        rest = jax.tree.map(lambda _: P(), shape._replace(env=None))
        return rest._replace(env=env)

    def hp_axis(self, hparams):
        return None if hparams is None else 0

    def place(self, keys: jax.Array, hparams: Hparams | None):
        """Put host inputs on the mesh (every process passes the same values)."""
        self.check_runs(keys.shape[0])
        keys = put_global(keys, self.inputs)
        if hparams is not None:
            hparams = put_global(hparams, self.inputs)
        return keys, hparams

    def initial_params(self, keys: jax.Array):
        """Each run's initial network params from the host `keys` (before `place`), computed
        on one device and then placed on the mesh (replicated for envs, split for seeds).

        Not inside the sharded program: orthogonal init is a batched LAPACK QR, and jaxlib's
        CPU QR kernel, run by several host devices at once, deadlocked (it waits on a shared
        thread pool; seen in about half of the env-sharded runs on 4 host devices, 2 cores).
        """
        if not hasattr(self, "_params_fn"):
            self._params_fn = jax.jit(jax.vmap(self.train.initial_params))
        return put_global(jax.device_get(self._params_fn(keys)), self.inputs)

    def init_fn(self, num_runs: int, hp_axis):
        vinit = jax.vmap(self.train.init, in_axes=(0, hp_axis, 0))
        if self.shard == "seeds":
            return jax.jit(vinit, out_shardings=self.runs)
        spec = self._runner_specs(num_runs, hp_axis)
        return jax.jit(jax.shard_map(vinit, mesh=self.mesh, in_specs=(P(), P(), P()),
                                     out_specs=spec, check_vma=False))

    def run_fn(self, num_runs: int, hp_axis, num_updates: int):
        key = (num_runs, hp_axis, num_updates)
        if key not in self._runs_jit:
            vrun = jax.vmap(lambda r, hp: self.train.run(r, hp, num_updates),
                            in_axes=(0, hp_axis))
            if self.shard == "seeds":
                fn = jax.jit(vrun, out_shardings=self.runs)
            else:
                spec = self._runner_specs(num_runs, hp_axis)
                fn = jax.jit(jax.shard_map(vrun, mesh=self.mesh, in_specs=(spec, P()),
                                           out_specs=(spec, P()), check_vma=False))
            self._runs_jit[key] = fn
        return self._runs_jit[key]

    # -- the train(key) interface, over the mesh -------------------------------------------
    def init(self, keys: jax.Array, hparams: Hparams | None = None) -> RunnerState:
        params = self.initial_params(keys)
        keys, hparams = self.place(keys, hparams)
        return self._wait(self.init_fn(keys.shape[0], self.hp_axis(hparams))(keys, hparams, params))

    def _wait(self, out):
        return jax.block_until_ready(out) if self.serial else out

    def run(self, runner: RunnerState, hparams: Hparams | None = None,
            num_updates: int | None = None):
        n = self.config.num_updates if num_updates is None else num_updates
        num_runs = runner.train_state.step.shape[0]
        if hparams is not None:
            hparams = put_global(hparams, self.inputs)
        return self._wait(self.run_fn(num_runs, self.hp_axis(hparams), n)(runner, hparams))

    def __call__(self, keys: jax.Array, hparams: Hparams | None = None) -> TrainOutput:
        runner, metrics = self.run(self.init(keys, hparams), hparams)
        return TrainOutput(runner.train_state, metrics, runner)


def put_global(tree, sharding):
    """Host values (the same on every process) as global arrays with `sharding`, which may
    span devices of other processes (`jax.device_put` only takes addressable ones). Typed PRNG
    keys go as their raw data and are wrapped again on the mesh."""
    def put(x, where):
        if is_key(x):
            data = put(jax.random.key_data(x), where)
            return jax.jit(jax.random.wrap_key_data, out_shardings=where)(data)
        host = np.asarray(x)
        return jax.make_array_from_callback(host.shape, where, lambda index: host[index])

    if isinstance(sharding, jax.sharding.Sharding):
        return jax.tree.map(lambda x: put(x, sharding), tree)
    return jax.tree.map(put, tree, sharding)


def make_sharded_train(config: PPOConfig, mesh: Mesh | None = None,
                       shard: str = "seeds") -> ShardedTrain:
    """`make_train` over a device mesh (default: every device). Call the result with a batch
    of keys (one per run): `make_sharded_train(config, make_mesh(4))(jax.random.split(key, 8))`.
    With `shard="seeds"` the runs split over devices; with `shard="envs"` each run's envs do."""
    return ShardedTrain(config, mesh if mesh is not None else make_mesh("all"), shard)


def init_distributed(coordinator_address: str | None = None, num_processes: int | None = None,
                     process_id: int | None = None) -> None:
    """`jax.distributed.initialize`, before any JAX computation. With no arguments JAX detects
    SLURM / Open MPI clusters itself; on a plain machine the three arguments are needed."""
    kwargs = {k: v for k, v in (("coordinator_address", coordinator_address),
                                ("num_processes", num_processes),
                                ("process_id", process_id)) if v is not None}
    try:
        jax.distributed.initialize(**kwargs)
    except (ValueError, RuntimeError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ConfigError(f"jax.distributed.initialize failed: {first}; pass --coordinator-address "
                          "HOST:PORT --num-processes P --process-id I (or run under SLURM / "
                          "Open MPI)") from None


def is_main_process() -> bool:
    """Only process 0 writes logs and checkpoints."""
    return jax.process_index() == 0


def gather(tree):
    """The global value of (possibly multi-process) sharded arrays, as NumPy on every process.
    A collective: every process must call it at the same point."""
    if jax.process_count() == 1:
        return jax.device_get(tree)
    from jax.experimental import multihost_utils

    return multihost_utils.process_allgather(tree, tiled=True)



def agree(signum: int | None) -> int | None:
    """Process 0's stop request, on every process (a collective), so all stop at one chunk."""
    if jax.process_count() == 1:
        return signum
    from jax.experimental import multihost_utils

    value = int(multihost_utils.broadcast_one_to_all(np.int32(signum or 0)))
    return value or None
