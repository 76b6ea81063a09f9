"""Compiling for a GPU this machine does not have: XLA's GPU compiler (the `gpu-profile` extra,
JAX's CUDA PJRT plugin, no CUDA libraries) on a written-down description of the device.

The program is the one a real GPU would run but for autotuning (which needs the device: XLA
keeps its default kernels) and the init's QR (`_lower_qr_without_cusolver`). JAX reads
JAX_SKIP_CUDA_CONSTRAINTS_CHECK as it starts its backends: `gpu_device` sets it when JAX has
not started yet, and says how to start again when it has.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import logging
import os
import warnings

import jax
from jax._src import xla_bridge  # private: which plugins registered, and whether JAX started
from jax._src.interpreters import mlir  # private: the QR's lowering, below
from jax._src.lax import linalg
from jax.experimental import topologies  # compile-only devices

from jaxppo.compat import cuda_pjrt_mismatch
from jaxppo.errors import UsageError

INSTALL_HINT = ("needs the CUDA compiler plugin: pip install -e '.[gpu-profile]' "
                "(JAX's CUDA PJRT plugin; no GPU or CUDA libraries needed)")

# Datasheet figures: SMs ("cores"), HBM bandwidth and size, L2, boost clock, and the per-SM
# limits of the architecture. XLA's fusion and tiling choices read these; nothing else does.
_SM90 = dict(cc=(9, 0), fpus=128, smem_core=233472, smem_optin=232448)  # Hopper
_SM80 = dict(cc=(8, 0), fpus=64, smem_core=167936, smem_optin=166912)  # Ampere A100
GPUS = {
    "h100": dict(_SM90, name="NVIDIA H100 80GB HBM3", cores=132, bandwidth=3.35e12,
                 memory=80 * 2**30, l2=50 * 2**20, ghz=1.98),
    "h200": dict(_SM90, name="NVIDIA H200", cores=132, bandwidth=4.8e12, memory=141 * 10**9,
                 l2=50 * 2**20, ghz=1.98),
    "a100": dict(_SM80, name="NVIDIA A100-SXM4-80GB", cores=108, bandwidth=2.039e12,
                 memory=80 * 2**30, l2=40 * 2**20, ghz=1.41),
}


def target_config(target: str) -> str:
    """The GPU's description in the text format XLA reads (`--target`'s device)."""
    g = GPUS[target]
    return f"""gpu_device_info {{
  threads_per_block_limit: 1024
  threads_per_warp: 32
  shared_memory_per_block: 49152
  shared_memory_per_core: {g['smem_core']}
  shared_memory_per_block_optin: {g['smem_optin']}
  threads_per_core_limit: 2048
  core_count: {g['cores']}
  fpus_per_core: {g['fpus']}
  block_dim_limit_x: 2147483647
  block_dim_limit_y: 65535
  block_dim_limit_z: 65535
  memory_bandwidth: {int(g['bandwidth'])}
  l2_cache_size: {g['l2']}
  clock_rate_ghz: {g['ghz']}
  device_memory_size: {g['memory']}
  registers_per_core_limit: 65536
  registers_per_block_limit: 65536
  cuda_compute_capability {{ major: {g['cc'][0]} minor: {g['cc'][1]} }}
}}
platform_name: "CUDA"
dnn_version_info {{ major: 9 minor: 8 }}
device_description_str: "{g['name']}"
"""


@contextlib.contextmanager
def _stderr_silenced():
    """The CUDA plugin's C++ side logs "no CUDA driver" to fd 2 as it loads: expected here."""
    fd = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(fd, 2)
        os.close(fd)


def ask_for_cuda_compiles(target: str) -> None:
    """Let JAX start its CUDA plugin without a CUDA runtime (for compiles only), or UsageError
    naming the extra where it is not installed. JAX reads JAX_SKIP_CUDA_CONSTRAINTS_CHECK as it
    starts its backends, so this must come first (an `--import` module or an env suite may
    start them)."""
    if importlib.util.find_spec("jax_plugins.xla_cuda12") is None:
        raise UsageError(f"--target {target} {INSTALL_HINT}")
    if (mismatch := cuda_pjrt_mismatch()) is not None:
        raise UsageError(f"--target {target}: {mismatch}")
    if not xla_bridge.backends_are_initialized():
        os.environ.setdefault("JAX_SKIP_CUDA_CONSTRAINTS_CHECK", "1")


@functools.cache
def gpu_device(target: str):
    """A compile-only device of `target` (no GPU needed); UsageError naming the extra without it.
    Made once per target and process (the CLI asks first, so that JAX starts quiet; the
    profile then asks again)."""
    ask_for_cuda_compiles(target)
    logging.getLogger("jax_plugins.xla_cuda12").setLevel(logging.ERROR)
    with _stderr_silenced():
        jax.devices()  # JAX initializes its plugins (the CUDA one loads here)
    if "cuda" not in xla_bridge._backend_factories:
        raise UsageError(f"--target {target}: the CUDA plugin did not register: JAX had "
                         "started before this process asked for CUDA compiles; set "
                         "JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1 before anything imports JAX, or "
                         "use the `jaxppo profile` command")
    _lower_qr_without_cusolver()
    topo = topologies.get_topology_desc(target, "cuda", target_config=target_config(target),
                                        topology="1x1x1")
    return topo.devices[0]


def _lower_qr_without_cusolver() -> None:
    """Orthogonal init's QR lowers to cuSOLVER, whose handlers come with `jax-cuda12-plugin`
    (not installed: its extension modules log at every `import jax` on a machine without a CUDA
    driver). Without them it lowers to XLA's own expansion (as on a TPU). The QR runs once, in
    the init before the update loop: no per-update figure changes."""
    if importlib.util.find_spec("jax_cuda12_plugin") is not None:
        return
    mlir.register_lowering(linalg.geqrf_p, linalg._geqrf_lowering_rule, platform="cuda")
    mlir.register_lowering(linalg.householder_product_p,
                           linalg._householder_product_lowering, platform="cuda")


def compiled_text(fn, args, device=None) -> str:
    """The optimized HLO of `jax.jit(fn)` on `args` (arrays or `ShapeDtypeStruct`s), compiled
    for this machine (`device` None) or for a compile-only `device` from `gpu_device`."""
    if device is None:
        return jax.jit(fn).lower(*args).compile().as_text()
    sharding = jax.sharding.SingleDeviceSharding(device)
    specs = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding),
                         args)
    lowered = jax.jit(fn, in_shardings=sharding).lower(*specs)
    # A compile-only client cannot load an entry of the persistent cache back (JAX warned so
    # and compiled again), so none is written (~0.5 MB a config): no compile is long enough
    # to be kept. An entry an earlier version wrote is still looked up: its warning is kept
    # quiet.
    key = "jax_persistent_cache_min_compile_time_secs"
    before = getattr(jax.config, key)
    jax.config.update(key, float("inf"))
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Error reading persistent compilation cache")
            return lowered.compile().as_text()
    finally:
        jax.config.update(key, before)
