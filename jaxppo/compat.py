"""Where the JAX lines jaxppo supports differ (JAX 0.10.2 on Python 3.11 through 0.12.x on
Python 3.12-3.13), bridged in this one module: each shim says which versions it bridges, so
it goes when the older line is dropped. Read from package metadata: nothing here imports JAX
or starts its backend, so XLA flags can still be chosen from it."""

from __future__ import annotations

import importlib.metadata


def version_of(dist: str) -> tuple[int, ...]:
    """`dist`'s installed release as integers (`0.12.0.1` -> (0, 12, 0, 1)); () if absent."""
    try:
        text = importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return ()
    parts = []
    for part in text.split("+")[0].split("."):
        digits = "".join(c for c in part if c.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


JAXLIB = version_of("jaxlib")
"""The installed jaxlib (XLA's flags go with it, not with jax)."""

XLA_CPU_LOOP_EMITTERS = bool(JAXLIB) and JAXLIB < (0, 11)
"""jaxlib 0.10: XLA:CPU still has its older loop emitters (`--xla_cpu_use_fusion_emitters=false`,
about half the compile of its MLIR fusion emitters; the test suite uses them). jaxlib 0.11's
and 0.12's XLA removed the flag, and an unknown flag in XLA_FLAGS aborts the process (0.12.0.1
tried; 0.11.2's binary no longer parses it)."""


def cuda_pjrt_mismatch() -> str | None:
    """Why the `gpu-profile` extra's CUDA compiler plugin cannot serve this JAX, or None. JAX
    loads only a plugin of its own jaxlib release; the extra pins the plugin per Python line
    (jaxlib 0.10.2 on 3.11, 0.11.2 where pip resolves 3.12+ today, 0.12.0.1 in the 3.12 lock),
    so a JAX upgraded by hand can leave it behind."""
    plugin, jaxlib = version_of("jax-cuda12-pjrt"), JAXLIB
    if not plugin or plugin[:3] == jaxlib[:3]:
        return None
    want = ".".join(map(str, jaxlib))
    have = ".".join(map(str, plugin))
    return (f"the CUDA compiler plugin jax-cuda12-pjrt {have} does not match jaxlib {want}; "
            f"pip install jax-cuda12-pjrt=={want}")
