"""XLA:CPU settings jaxppo needs.

XLA:CPU's concurrency-optimized thunk scheduler (on by default in jaxlib 0.10) deadlocks some
vmapped training programs at 0% CPU after compiling: 2 vmapped seeds of
`configs/minatar_breakout.yaml`, PureJaxRL's ppo.py at 16 seeds, and (2026-11-22) the default
CartPole config at 16 vmapped seeds, 2 times in 11. So `import jaxppo` turns it off for the
process (XLA_FLAGS, before JAX creates its CPU backend), which also protects the programs users
jit themselves. Passing the same option per program (`compile(compiler_options=...)`, which XLA
accepts) does not help: with it alone, the 16-seed program still hung (1 run in 7) and ran at the
scheduler-on speed, i.e. the option is not read per program (BENCHMARKS.md). The cost of the
flag is throughput on some shapes (16 CartPole seeds: ~135k instead of ~173k SPS, median of 5
interleaved; 1 seed: no difference). Set JAXPPO_KEEP_XLA_FLAGS=1 to leave XLA_FLAGS exactly as
you set them, hangs included.
"""

from __future__ import annotations

import os
import warnings
from importlib import metadata

import jax

FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler=false"


def _jaxlib_version() -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in metadata.version("jaxlib").split(".")[:2])
    except (metadata.PackageNotFoundError, ValueError):
        return (0, 0)


def apply_xla_cpu_flags() -> None:
    if os.environ.get("JAXPPO_KEEP_XLA_FLAGS"):
        return
    flags = os.environ.get("XLA_FLAGS", "")
    # XLA aborts on unknown flags, so only add it where it is known to exist.
    if "xla_cpu_enable_concurrency_optimized_scheduler" in flags or _jaxlib_version() < (0, 10):
        return
    os.environ["XLA_FLAGS"] = f"{flags} {FLAG}".strip()
    if _backend_started():
        # Some env suites (Jumanji, gymnax's env modules) create arrays at import, which starts
        # JAX's CPU backend; XLA_FLAGS set after that are not read.
        warnings.warn("jaxppo was imported after JAX started its CPU backend (e.g. after "
                      "`import jumanji`), so its XLA:CPU deadlock workaround is off for this "
                      "process; import jaxppo first", RuntimeWarning, stacklevel=3)


def _backend_started() -> bool:
    try:
        from jax._src import xla_bridge  # JAX's own record of it; private, so guarded

        return bool(xla_bridge.backends_are_initialized())
    except (ImportError, AttributeError):
        return False


def compiler_options(backend: str) -> dict | None:
    """Per-program XLA options for the training programs jaxppo compiles itself (CPU only).

    LLVM optimization level 2 instead of XLA's default 3 compiles CartPole's update scan in
    ~2.7 s instead of ~3.6 s with the same run time (BENCHMARKS.md). Users who set the level
    in XLA_FLAGS keep theirs."""
    if backend != "cpu" or "xla_backend_optimization_level" in os.environ.get("XLA_FLAGS", ""):
        return None
    return {"xla_backend_optimization_level": 2}


def setup_compilation_cache(enabled: bool = True) -> None:
    """JAX's persistent compilation cache (`JAXPPO_CACHE_DIR`, default ~/.cache/jaxppo/xla):
    a repeated command skips most of its compile. An unwritable cache is not worth failing for."""
    if not enabled:
        return
    cache_dir = os.environ.get("JAXPPO_CACHE_DIR",
                               os.path.join(os.path.expanduser("~"), ".cache", "jaxppo", "xla"))
    try:
        os.makedirs(cache_dir, exist_ok=True)
    except OSError:
        return
    jax.config.update("jax_compilation_cache_dir", cache_dir)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
