"""Several processes, one run: joining them (`jax.distributed`), the device mesh, and the
collectives the host side needs (who writes, global values on every process, one stop decision).

Nothing here runs inside a compiled program. With one process every helper is the plain local
operation, so single-process runs pay nothing for it.
"""

from __future__ import annotations

import os

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh

from jaxppo.errors import ConfigError, UsageError
from jaxppo.keys import is_key

AXIS = "devices"


def init_distributed(coordinator_address: str | None = None, num_processes: int | None = None,
                     process_id: int | None = None) -> None:
    """`jax.distributed.initialize`, before any JAX computation. With no arguments JAX detects
    SLURM / Open MPI clusters itself; on a plain machine the three arguments are needed.

    Call it once in every process of a multi-process run, then build the mesh
    (`make_mesh("all")` spans every process's devices) and run as usual: every process runs
    the same program, and only process 0 writes logs and checkpoints. The CLI's
    `--coordinator-address`, `--num-processes` and `--process-id` call it.

    Args:
      coordinator_address: `HOST:PORT` of the coordinator (process 0).
      num_processes: the number of processes, P.
      process_id: this process's index, 0..P-1.

    Raises:
      ConfigError: `jax.distributed.initialize` failed (its first line, and the arguments to
        pass).
    """
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


def join_processes(coordinator_address: str | None = None, num_processes: int | None = None,
                   process_id: int | None = None) -> None:
    """What the CLI's `--coordinator-address/--num-processes/--process-id` do: all three start
    a multi-process run; none joins one only under SLURM or Open MPI with several tasks (JAX
    reads the cluster's own variables); otherwise this is one process."""
    explicit = [coordinator_address, num_processes, process_id]
    if any(v is not None for v in explicit):
        if any(v is None for v in explicit):
            raise UsageError("multi-process runs need all of --coordinator-address HOST:PORT, "
                             "--num-processes P and --process-id I (or none, under SLURM / Open "
                             "MPI)")
        init_distributed(*explicit)
    elif int(os.environ.get("SLURM_NTASKS", "1")) > 1 or \
            int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1")) > 1:
        init_distributed()


def make_mesh(devices: int | str | None = None) -> Mesh:
    """A 1-D mesh over the first `devices` of `jax.devices()` ("all" or None: every device,
    of every process when `jax.distributed` is initialized).

    What `Experiment(mesh=...)` and `make_sharded_train` split the work over
    (`Experiment(devices=N)` and the CLI's `--devices N` build it themselves). On a CPU,
    `XLA_FLAGS=--xla_force_host_platform_device_count=N` makes N devices.

    Args:
      devices: how many devices (1 up to the number available), "all", or None (all).

    Returns:
      A `jax.sharding.Mesh` with one axis, named "devices".

    Raises:
      ConfigError: `devices` is not a number from 1 to the number of devices available.
    """
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


def is_main_process() -> bool:
    """Only process 0 writes logs and checkpoints."""
    return jax.process_index() == 0


def gather(tree):
    """The global value of (possibly multi-process) sharded arrays, as NumPy on every process.
    A collective: every process must call it at the same point."""
    if jax.process_count() == 1:
        return jax.device_get(tree)
    return multihost_utils.process_allgather(tree, tiled=True)


def from_process_0(value: int) -> int:
    """Process 0's `value` on every process (a collective), so that every process takes the
    same decision (stop here, checkpoint now) at the same chunk."""
    if jax.process_count() == 1:
        return int(value)
    return int(multihost_utils.broadcast_one_to_all(np.int32(value)))


def put_global(tree, sharding):
    """Host values (the same on every process) as global arrays with `sharding` (one for every
    leaf, or a tree of them), which may span devices of other processes (`jax.device_put` only
    takes addressable ones). Typed PRNG keys go as their raw data and are wrapped on the mesh."""
    def put(x, where):
        if is_key(x):
            data = put(jax.random.key_data(x), where)
            return jax.jit(jax.random.wrap_key_data, out_shardings=where)(data)
        host = np.asarray(x)
        return jax.make_array_from_callback(host.shape, where, lambda index: host[index])

    if isinstance(sharding, jax.sharding.Sharding):
        return jax.tree.map(lambda x: put(x, sharding), tree)
    return jax.tree.map(put, tree, sharding)
