"""XLA:CPU settings jaxppo sets.

Vmapped training programs deadlocked at 0% CPU after compiling (vmapped Craftax every time; 2
seeds of `configs/minatar_breakout.yaml`, PureJaxRL's ppo.py at 16 seeds and the default
CartPole config at 16 seeds now and then). The cause is jaxlib 0.10's CPU LAPACK kernels: a
batched QR (orthogonal init under a vmap over seeds) hands its batch to XLA:CPU's thread pool
from inside a thread of that pool and blocks; two at once on a 2-thread pool wait forever
(native stacks, BENCHMARKS.md). jaxppo's init no longer batches a QR
(`jaxppo.core.torsos.orthogonal`; `tests/integration/test_hang.py` checks every vmapped program and runs a
watchdog), so its programs need nothing here.

Turning off the concurrency-optimized thunk scheduler (the flag below, which `import jaxppo`
set until 2026-11-25) does not prevent that deadlock (Craftax hung with it) but makes it rarer
(the smallest hanging program: 3 runs in 3 without it, 0 in 5 with it), and it costs throughput
(quiet machine, CartPole: -8% at 1 seed, -20% at 32 seeds, interleaved medians). So it is
opt-in: JAXPPO_SAFE_SCHEDULER=1 sets it for a process whose own vmapped code has batched
`jnp.linalg` calls. JAX's plugin hook (`jax_plugins/jaxppo_xla_flags.py`) sets it at backend
creation, so importing a suite (gymnax starts the backend at import) before jaxppo loses
nothing. Passed per program (`compile(compiler_options=...)`, which XLA accepts) the option is
not read. JAXPPO_KEEP_XLA_FLAGS=1 leaves XLA_FLAGS exactly as you set them.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import os
import warnings
from types import ModuleType

import jax

try:  # JAX's persistent cache: private modules, so guarded (`_drop_damaged_cache_entries`)
    from jax._src import compilation_cache as _jax_cache
    from jax._src import lru_cache as _jax_lru
except ImportError:
    _jax_cache = _jax_lru = None

HOOK = "jax_plugins.jaxppo_xla_flags"


def _load_hook() -> ModuleType:
    """The hook module JAX imports (the same object, so its record of the backend's flags is
    read); from its file next to this package where `jax_plugins/` is not on the path (an
    editable install made before the hook existed), in which case JAX never ran it."""
    try:
        return importlib.import_module(HOOK)
    except ImportError:
        path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            *HOOK.split(".")) + ".py"
        spec = importlib.util.spec_from_file_location("_jaxppo_xla_flags", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module


hook = _load_hook()
FLAG = hook.FLAG


def apply_xla_cpu_flags() -> None:
    """Where asked for (JAXPPO_SAFE_SCHEDULER=1), add the flag for the backends JAX has yet to
    create; warn where they were created without it. JAX's plugin hook
    (`jax_plugins/jaxppo_xla_flags.py`) adds it too, at backend creation, so a suite imported
    before jaxppo (gymnax starts JAX's backend at import) is covered."""
    hook.add_flag()
    if _backend_started() and FLAG in os.environ.get("XLA_FLAGS", "") and not hook.protected():
        warnings.warn("jaxppo was imported after JAX started its CPU backend, which it did "
                      "without the scheduler flag JAXPPO_SAFE_SCHEDULER asks for (JAX ran "
                      "before jaxppo or an env suite was imported, or jaxppo's jax_plugins hook "
                      "is not installed: pip install -e .), so the flag is off for this "
                      "process; import jaxppo first", RuntimeWarning, stacklevel=3)


def quiet_cuda_plugins() -> None:
    """Keep the `gpu-profile` extra's CUDA compiler plugin from printing a traceback where it
    can do nothing (no GPU, no CUDA runtime): `jax_plugins/jaxppo_xla_flags.py` says how and
    when. Called at `import jaxppo`, before JAX initializes its plugins (in no fixed order)."""
    if not _backend_started():
        hook.quiet_cuda_plugins()


def _backend_started() -> bool:
    try:
        from jax._src import xla_bridge  # JAX's own record of it; private, so guarded

        return bool(xla_bridge.backends_are_initialized())
    except (ImportError, AttributeError):
        return False


CPU_LEVEL = 2
"""The LLVM optimization level jaxppo compiles its CPU training programs at."""


def compiler_options(backend: str) -> dict | None:
    """Per-program XLA options for the training programs jaxppo compiles itself (CPU only).

    LLVM optimization level 2 instead of XLA's default 3 compiles CartPole's update scan in
    ~2.7 s instead of ~3.6 s with the same run time (BENCHMARKS.md). Users who set the level
    in XLA_FLAGS keep theirs."""
    if backend != "cpu" or "xla_backend_optimization_level" in os.environ.get("XLA_FLAGS", ""):
        return None
    return {"xla_backend_optimization_level": CPU_LEVEL}


def setup_compilation_cache(enabled: bool = True) -> None:
    """JAX's persistent compilation cache (`JAXPPO_CACHE_DIR`, default ~/.cache/jaxppo/xla):
    a repeated command skips most of its compile. An unwritable cache is not worth failing for;
    an entry that cannot be read is removed and compiled again (`take_damaged_cache_entries`)."""
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
    _drop_damaged_cache_entries()


_DAMAGED: list[str] = []
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"  # a zstd frame's first bytes (a zlib stream's: 0x78)


_FAULTS: list[tuple[str, str, OSError]] = []  # (cache dir, "read"/"written", the error)


def take_cache_faults() -> list[tuple[str, str, OSError]]:
    """The compile cache's read and write failures since the last call (a full or read-only
    cache disk, an entry that is a directory): JAX warned per program; the CLI says one note."""
    taken = list(_FAULTS)
    del _FAULTS[:]
    return taken


_UNVERIFIED: list[str] = []
DIGEST_SUFFIX = ".jaxppo-sha256"


def digest_path(entry: str) -> str:
    """The SHA-256 file beside a compile-cache entry jaxppo wrote (JAX reads `*-cache` only)."""
    return entry + DIGEST_SUFFIX


def _write_digest(entry: str, value: bytes) -> None:
    tmp = f"{digest_path(entry)}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="ascii") as f:
        f.write(hashlib.sha256(value).hexdigest())
    os.replace(tmp, digest_path(entry))


def _digest_matches(entry: str, value: bytes) -> bool:
    """An entry decompresses, but XLA would run its code as it is (a damaged executable
    crashes the process): only an entry whose bytes jaxppo wrote, by its digest, is used."""
    try:
        with open(digest_path(entry), encoding="ascii") as f:
            return f.read().strip() == hashlib.sha256(value).hexdigest()
    except (OSError, UnicodeDecodeError):
        return False


def take_unverified_cache_entries() -> list[str]:
    """The compile-cache entries removed since the last call because jaxppo had not written
    them (no digest, or another one): an older jaxppo's, or a hand-made or damaged one."""
    taken = list(_UNVERIFIED)
    del _UNVERIFIED[:]
    return taken


def take_damaged_cache_entries() -> list[str]:
    """The compile-cache files found unreadable and removed since the last call (for the
    CLI's note)."""
    taken = list(_DAMAGED)
    del _DAMAGED[:]
    return taken


def _drop_damaged_cache_entries() -> None:
    """JAX never rewrites a cache entry whose file exists, so one cut short (kill -9 mid-write, a
    full disk) warned and recompiled in every later run: read back, it is removed and misses."""
    try:
        cache, decompress = _jax_lru.LRUCache, _jax_cache.decompress_executable
        suffix = _jax_lru._CACHE_SUFFIX
    except AttributeError:  # another JAX's cache, or none imported
        return
    local_zstd = any(getattr(_jax_cache, m, None) is not None for m in ("zstd", "zstandard"))
    read = cache.get
    if getattr(read, "drops_damaged", False):
        return

    write = cache.put

    def put(self, key: str, value: bytes) -> None:
        path = os.path.join(str(self.path), f"{key}{suffix}")
        existed = os.path.lexists(path)
        try:
            if not existed:
                # first: a reader (another process) that sees the entry sees its digest too
                _write_digest(path, value)  # what `get` checks before XLA reads the code
            write(self, key, value)
        except OSError as e:  # the program is compiled; only its entry is lost: said once
            if not existed:  # never leave half an entry (a full disk) for the next run
                for p in (path, digest_path(path)):
                    with contextlib.suppress(OSError):
                        os.remove(p)
            _FAULTS.append((str(self.path), "written", e))

    def get(self, key: str) -> bytes | None:
        try:
            value = read(self, key)
        except OSError as e:  # unreadable (a directory, no permission): a miss, said once
            _FAULTS.append((str(self.path), "read", e))
            return None
        if value is None:
            return value
        evicting = getattr(self, "eviction_enabled", True)  # JAX's lock guards its files
        try:
            decompress(value)
        except Exception:  # noqa: BLE001 - zstd's and zlib's errors alike: not a whole entry
            if evicting or len(value) >= 4 and (value[:4] == ZSTD_MAGIC) != local_zstd:
                return value  # another codec's, so another JAX's (a shared cache): JAX's call
                # (it fails to decompress it too, and warns: nothing reaches XLA)
            path = os.path.join(str(self.path), f"{key}{suffix}")
            try:
                os.remove(path)
            except FileNotFoundError:
                pass
            except OSError:
                return value  # cannot be removed (a read-only cache): JAX warns as before
            _DAMAGED.append(path)
            return None
        path = os.path.join(str(self.path), f"{key}{suffix}")
        if not _digest_matches(path, value):  # not what jaxppo wrote: its code is never run
            if evicting:  # JAX's lock and LRU own its files: refused (a miss), not removed
                return None
            for p in (path, digest_path(path)):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(p)
            _UNVERIFIED.append(path)
            return None
        return value

    get.drops_damaged = True
    cache.get, cache.put = get, put
