"""Where a run's programs execute: a placement builds the two compiled programs of a chunked run
(`init` and a chunk of updates, vmapped over runs) and puts their inputs where they run.

- `LocalPlacement`: every run on the default device (`jit` of `vmap`; one run alone `jit` of
  the run with its runs axis of 1 taken off and put back: the same state and metrics up to float
  rounding, from a program that traces and compiles in ~20% less time: no nested scans to batch).
- over a `jax.sharding.Mesh` (which may span processes, `distributed.py`):
  - `SeedsPlacement` (`shard="seeds"`): the vmapped runs axis (seeds, or settings x seeds of a
    sweep) is split over devices with `jax.jit` shardings. Runs never talk to each other, so
    the results equal the single-device run up to float rounding (tested on 4 CPU devices).
  - `EnvsPlacement` (`shard="envs"`): one agent's environments are split over devices with
    `jax.shard_map`. Each device steps `num_envs / D` envs and holds that share of every
    minibatch; gradients, loss statistics, advantage and observation/reward normalization
    statistics and episode counts are reduced over devices (`collectives.py`), so the devices
    together are one agent with `num_envs` envs. The minibatch is the same size as unsharded
    (`minibatch_size / D` each).

All three give the `Driver` one interface (`check`, `place_inputs`, `init_program`,
`run_program`, `place_state`, `pipelined`), so it has no mesh branches. The replicated outputs
of an env-sharded program (params, optimizer and normalizer state, metrics) are replicated by
construction; `shard_map`'s static replication check is off (`check_vma=False`) because it
cannot see that through the scans, and a test checks that every device holds the same params.

A checkpoint holds the global arrays (runs, or envs, concatenated over devices), so it restores
on another device count, as long as that count divides the runs (seeds) or `num_envs` (envs).

Axis legend: R = runs, D = devices in the mesh.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxppo.config import Hparams, PPOConfig
from jaxppo.core.train import RunnerState, Trainer, TrainOutput, make_train
from jaxppo.errors import ConfigError
from jaxppo.keys import run_keys
from jaxppo.run.distributed import AXIS, make_mesh, put_global
from jaxppo.run.memory import check_memory

SHARD_MODES = ("seeds", "envs")


class RunInputs(NamedTuple):
    """What the init program takes, placed: one key per run, the sweep's hparams (leaves [R],
    or None for the config's values) and, on a mesh, the initial params (else None)."""

    keys: jax.Array
    hparams: Hparams | None
    params: Any


def _hp_axis(hparams: Hparams | None) -> int | None:
    return None if hparams is None else 0


def _vmapped_init(trainer: Trainer, inputs: RunInputs):
    """`trainer.init` over the runs axis of `inputs` (params: per run, or built inside)."""
    params_axis = None if inputs.params is None else 0
    return jax.vmap(trainer.init, in_axes=(0, _hp_axis(inputs.hparams), params_axis))


def _vmapped_run(trainer: Trainer, inputs: RunInputs, num_updates: int):
    """`num_updates` updates of every run, as one program."""
    return jax.vmap(lambda r, hp: trainer.run(r, hp, num_updates),
                    in_axes=(0, _hp_axis(inputs.hparams)))


def _one_run(inputs: RunInputs) -> bool:
    return inputs.keys.shape[0] == 1 and inputs.params is None


def _alone(fn):
    """`fn` of one run, given and giving the runs axis of length 1 (R = 1): `jax.vmap(fn)`'s
    state and metrics (up to float rounding) from a program with no batching to trace (a
    vmapped program's nested scans cost as much to batch as to trace)."""
    def one(*args):
        return jax.tree.map(lambda a: a[None], fn(*jax.tree.map(lambda a: a[0], args)))
    return one


class LocalPlacement:
    """All runs on JAX's default device."""

    pipelined = True  # chunk k+1 may be in flight while the host handles chunk k
    can_donate = True
    description = ""

    def __init__(self, config: PPOConfig, env: Any = None, env_params: Any = None):
        self.config = config
        self.trainer = make_train(config, env=env, env_params=env_params)

    def check(self, num_runs: int, metrics_updates: int) -> None:
        """Refuse, before compiling, what cannot fit the device (one line, the knob to turn)."""
        check_memory(self.config, num_runs, env=self.trainer.env, metrics_updates=metrics_updates)

    def place_inputs(self, keys: jax.Array, hparams: Hparams | None) -> RunInputs:
        return RunInputs(keys, hparams, None)

    def init_program(self, inputs: RunInputs):
        if _one_run(inputs):
            return jax.jit(_alone(lambda k, hp, params: self.trainer.init(k, hp)))
        return jax.jit(_vmapped_init(self.trainer, inputs))

    def run_program(self, inputs: RunInputs, num_updates: int, donate: bool = False):
        program = (_alone(lambda r, hp: self.trainer.run(r, hp, num_updates))
                   if _one_run(inputs) else _vmapped_run(self.trainer, inputs, num_updates))
        return jax.jit(program, donate_argnums=(0,) if donate else ())

    def place_state(self, runner: RunnerState, sharding) -> RunnerState:
        return runner


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


class _MeshPlacement:
    """What both mesh placements share: inputs placed as global arrays (the same host values on
    every process), initial params built outside the mesh, and `make_train`'s interface over
    the mesh: `init(keys, hparams)`, `run(runner, hparams, n)`, `__call__(keys, hparams)`."""

    shard = ""
    can_donate = False  # the host-copy handoff is not done across processes

    def __init__(self, config: PPOConfig, mesh: Mesh, local: PPOConfig, trainer: Trainer,
                 inputs: NamedSharding):
        self.config, self.mesh, self.local, self.trainer = config, mesh, local, trainer
        self.inputs = inputs  # where per-run inputs (keys, hparams, initial params) go
        self.replicated = NamedSharding(mesh, P())
        self.runs = NamedSharding(mesh, P(AXIS))
        self._params_fn = jax.jit(jax.vmap(self.trainer.initial_params))
        self._programs: dict = {}  # (what, hp_axis, num_updates) -> jitted program
        # A precaution on XLA:CPU: programs with cross-device collectives (env-sharded ones, a
        # multi-process gather) run one at a time, never two in flight. (The hangs first seen
        # here came from the QR in the network init; see `initial_params`.)
        self.pipelined = not (jax.default_backend() == "cpu" and (
            self.shard == "envs" or jax.process_count() > 1))
        self.description = (f"{self.shard} sharded over {mesh.size} devices "
                            f"({jax.process_count()} process(es))")

    def initial_params(self, keys: jax.Array):
        """Each run's initial network params from the host `keys`, computed on one device and
        then placed on the mesh (replicated for envs, split for seeds).

        Not inside the sharded program: orthogonal init was a batched LAPACK QR, and jaxlib's
        CPU QR kernel, run by several host devices at once, deadlocked (it waits on a shared
        thread pool; seen in about half of the env-sharded runs on 4 host devices, 2 cores).
        `jaxppo.core.torsos.orthogonal` now draws one seed's QR at a time (tests/integration/test_hang.py).
        """
        return put_global(jax.device_get(self._params_fn(keys)), self.inputs)

    def check_runs(self, num_runs: int) -> None:
        pass

    def place_inputs(self, keys: jax.Array, hparams: Hparams | None) -> RunInputs:
        """Put host inputs on the mesh (every process passes the same values)."""
        keys = run_keys(keys, "make_sharded_train(config, mesh)(keys)")
        self.check_runs(keys.shape[0])
        params = self.initial_params(keys)
        keys = put_global(keys, self.inputs)
        if hparams is not None:
            hparams = put_global(hparams, self.inputs)
        return RunInputs(keys, hparams, params)

    def place_state(self, runner: RunnerState, sharding) -> RunnerState:
        """Put a restored (host) runner state where the compiled chunk expects it."""
        return put_global(runner, sharding)

    def _cached(self, what: str, inputs: RunInputs, num_updates: int, build):
        key = (what, _hp_axis(inputs.hparams), num_updates)
        if key not in self._programs:
            self._programs[key] = build()
        return self._programs[key]

    def _wait(self, out):
        return out if self.pipelined else jax.block_until_ready(out)

    def init(self, keys: jax.Array, hparams: Hparams | None = None) -> RunnerState:
        inputs = self.place_inputs(keys, hparams)
        program = self._cached("init", inputs, 0, lambda: self.init_program(inputs))
        return self._wait(program(*inputs))

    def run(self, runner: RunnerState, hparams: Hparams | None = None,
            num_updates: int | None = None):
        n = self.config.num_updates if num_updates is None else num_updates
        if hparams is not None:
            hparams = put_global(hparams, self.inputs)
        keys = jax.ShapeDtypeStruct(runner.key.shape, runner.key.dtype)
        inputs = RunInputs(keys, hparams, None)
        program = self._cached("run", inputs, n, lambda: self.run_program(inputs, n))
        return self._wait(program(runner, hparams))

    def __call__(self, keys: jax.Array, hparams: Hparams | None = None) -> TrainOutput:
        runner, metrics = self.run(self.init(keys, hparams), hparams)
        return TrainOutput(runner.train_state, metrics, runner)


class SeedsPlacement(_MeshPlacement):
    """The runs axis split over the mesh with `jax.jit` shardings: runs never talk to each
    other, so each device simply holds `R / D` whole runs."""

    shard = "seeds"

    def __init__(self, config: PPOConfig, mesh: Mesh, env: Any = None, env_params: Any = None):
        super().__init__(config, mesh, config,
                         make_train(config, env=env, env_params=env_params),
                         NamedSharding(mesh, P(AXIS)))

    def check_runs(self, num_runs: int) -> None:
        if num_runs % self.mesh.size:
            raise ConfigError(f"--seeds {num_runs}: with --shard seeds the runs split evenly "
                              f"over the {self.mesh.size} devices; use a multiple of "
                              f"{self.mesh.size} (or --shard envs)")

    def check(self, num_runs: int, metrics_updates: int) -> None:
        self.check_runs(num_runs)
        check_memory(self.local, num_runs // self.mesh.size, env=self.trainer.env,
                     metrics_updates=metrics_updates)

    def init_program(self, inputs: RunInputs):
        return jax.jit(_vmapped_init(self.trainer, inputs), out_shardings=self.runs)

    def run_program(self, inputs: RunInputs, num_updates: int, donate: bool = False):
        return jax.jit(_vmapped_run(self.trainer, inputs, num_updates), out_shardings=self.runs)


class EnvsPlacement(_MeshPlacement):
    """Each run's envs split over the mesh with `jax.shard_map`: every device holds all runs,
    a share of each one's envs, and the collectives make them one agent per run."""

    shard = "envs"

    def __init__(self, config: PPOConfig, mesh: Mesh, env: Any = None, env_params: Any = None):
        local = local_config(config, mesh.size)
        env_kw = dict(env=env, env_params=env_params)
        super().__init__(config, mesh, local, make_train(local, axis_name=AXIS, **env_kw),
                         NamedSharding(mesh, P()))
        self._plain = make_train(local, **env_kw)  # the same program without the mesh axis: the tree

    def check(self, num_runs: int, metrics_updates: int) -> None:
        check_memory(self.local, num_runs, env=self.trainer.env, metrics_updates=metrics_updates)

    def _runner_specs(self, inputs: RunInputs):
        """PartitionSpecs of a runner state (env leaves split on their env axis)."""
        shape = jax.eval_shape(_vmapped_init(self._plain, inputs._replace(params=None)),
                               inputs.keys, inputs.hparams, None)
        env = jax.tree.map(lambda _: P(None, AXIS), shape.env)
        rest = jax.tree.map(lambda _: P(), shape._replace(env=None))
        return rest._replace(env=env)

    def init_program(self, inputs: RunInputs):
        return jax.jit(jax.shard_map(_vmapped_init(self.trainer, inputs), mesh=self.mesh,
                                     in_specs=(P(), P(), P()),
                                     out_specs=self._runner_specs(inputs), check_vma=False))

    def run_program(self, inputs: RunInputs, num_updates: int, donate: bool = False):
        spec = self._runner_specs(inputs)
        return jax.jit(jax.shard_map(_vmapped_run(self.trainer, inputs, num_updates),
                                     mesh=self.mesh, in_specs=(spec, P()),
                                     out_specs=(spec, P()), check_vma=False))


def MeshPlacement(config: PPOConfig, mesh: Mesh, shard: str = "seeds", *,  # noqa: N802
                  env: Any = None, env_params: Any = None) -> _MeshPlacement:
    """The placement for `shard` ("seeds" or "envs") over `mesh`.

    What `make_sharded_train` returns, for an explicit mesh (also under its older name
    `ShardedTrain`); see there.

    Args:
      config: the run's `PPOConfig`.
      mesh: the 1-D `jax.sharding.Mesh` to split over (`make_mesh`).
      shard: "seeds" (the runs) or "envs" (each run's envs).
      env: an environment instance to train on instead of the one `config.env_id` names.
      env_params: that instance's params (default: its `default_params`).

    Returns:
      `make_train`'s interface over the mesh, as `make_sharded_train` describes it.

    Raises:
      ConfigError: an unknown `shard`, or (`envs`) `num_envs` does not split over the devices.
    """
    if shard not in SHARD_MODES:
        raise ConfigError(f"--shard {shard!r}: use one of {', '.join(SHARD_MODES)}")
    return (SeedsPlacement if shard == "seeds" else EnvsPlacement)(config, mesh, env, env_params)


ShardedTrain = MeshPlacement  # the name `make_sharded_train` has returned since 0.1
"""The name of `MeshPlacement` (what `make_sharded_train` returns) since jaxppo 0.1."""


def make_sharded_train(config: PPOConfig, mesh: Mesh | None = None, shard: str = "seeds", *,
                       env: Any = None, env_params: Any = None) -> _MeshPlacement:
    """`make_train` over a device mesh (default: every device). Call the result with a batch
    of keys (one per run): `make_sharded_train(config, make_mesh(4))(jax.random.split(key, 8))`.
    With `shard="seeds"` the runs split over devices; with `shard="envs"` each run's envs do.

    `seeds`: the vmapped runs axis (seeds, or settings x seeds) is split over the D devices,
    each holding R / D whole runs; runs never talk to each other, so the results equal the
    single-device run up to float rounding. `envs`: each run's `num_envs` envs are split
    (`num_envs / D` per device); gradients, loss statistics, advantage and normalizer
    statistics and episode counts are reduced over devices, so the devices together are one
    agent with `num_envs` envs, and its minibatch is the same size as unsharded. The mesh may
    span processes (`init_distributed`). Unlike `train`, the result is no pure function to
    jit or vmap: it compiles and places its own programs. Like `make_train`, it checks no device
    memory (`estimate_memory` says what a run needs).

    Args:
      config: the run's `PPOConfig`.
      mesh: a 1-D `jax.sharding.Mesh` (`make_mesh`); None: every device.
      shard: "seeds" or "envs".
      env: an environment instance to train on instead of the one `config.env_id` names.
      env_params: that instance's params (default: its `default_params`).

    Returns:
      `make_train`'s interface over the mesh: `train(keys, hparams=None) -> TrainOutput` with
        one key per run (`keys` `[R]`; `hparams` leaves `[R]`, or None for the config's);
        `train.init(keys, hparams)` and `train.run(runner, hparams, num_updates)` are its
        two halves, for driving it in chunks. Every process passes the same host values.

    Raises:
      ConfigError: an unknown `shard`, (`envs`) `num_envs` that does not split over the
        devices, or (`seeds`, when called) runs that do not split evenly over them.
    """
    return MeshPlacement(config, mesh if mesh is not None else make_mesh("all"), shard,
                         env=env, env_params=env_params)


def make_placement(config: PPOConfig, mesh: Mesh | None = None, shard: str = "seeds", *,
                   env: Any = None, env_params: Any = None):
    """`LocalPlacement` without a mesh, `MeshPlacement` with one; `env`/`env_params` are an
    environment instance to train on instead of the one `config.env_id` names."""
    if mesh is None:
        if shard != "seeds":
            raise ConfigError("--shard envs needs a mesh: pass --devices N|all")
        return LocalPlacement(config, env, env_params)
    return MeshPlacement(config, mesh, shard, env=env, env_params=env_params)


__all__ = ["EnvsPlacement", "LocalPlacement", "MeshPlacement", "RunInputs", "SeedsPlacement",
           "ShardedTrain", "local_config", "make_placement", "make_sharded_train"]
