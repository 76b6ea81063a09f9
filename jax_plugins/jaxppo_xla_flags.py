"""jaxppo's opt-in XLA:CPU flag (JAXPPO_SAFE_SCHEDULER=1), set as JAX creates its backends,
whatever the process imported first.

XLA reads XLA_FLAGS once per process, when JAX creates its backends. gymnax, Jumanji, Navix and
XLand-MiniGrid create arrays at import, which creates them; so `import gymnax` before
`import jaxppo` used to leave the process without the flag (`jaxppo/_xla.py` says why it is
opt-in now). JAX imports each module of the `jax_plugins` namespace
(and each `jax_plugins` entry point) and calls its `initialize()` just before it creates its
backends: this module is jaxppo's, and registers no PJRT plugin. It adds the flag only in a
process that has imported jaxppo or one of those suites by then, so other JAX programs in the
same environment are left alone. It imports nothing heavy: it runs inside JAX's backend setup.
"""

from __future__ import annotations

import os
import sys
from importlib import metadata

FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler=false"
USERS = ("jaxppo", "gymnax", "jumanji", "navix", "xminigrid")
"""Modules whose presence means "this process trains with jaxppo": jaxppo, and the suites that
start JAX's backend at import (so before `import jaxppo` when imported first)."""

flags_at_backend_start: str | None = None
"""XLA_FLAGS as XLA read them (None until JAX created its backends with this module found)."""


def _jaxlib_version() -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in metadata.version("jaxlib").split(".")[:2])
    except (metadata.PackageNotFoundError, ValueError):
        return (0, 0)


def wanted() -> bool:
    """The user asked for the flag (JAXPPO_SAFE_SCHEDULER=1) and did not ask jaxppo to leave
    XLA_FLAGS alone (JAXPPO_KEEP_XLA_FLAGS)."""
    return (os.environ.get("JAXPPO_SAFE_SCHEDULER", "") not in ("", "0")
            and not os.environ.get("JAXPPO_KEEP_XLA_FLAGS"))


def add_flag() -> None:
    """Add FLAG to XLA_FLAGS where `wanted()`, unless the user set the option already, or jaxlib
    predates it (XLA aborts on unknown flags)."""
    if not wanted():
        return
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_cpu_enable_concurrency_optimized_scheduler" in flags or _jaxlib_version() < (0, 10):
        return
    os.environ["XLA_FLAGS"] = f"{flags} {FLAG}".strip()


def protected() -> bool:
    """Whether the backends JAX created read the option (ours or the user's own setting)."""
    return "xla_cpu_enable_concurrency_optimized_scheduler" in (flags_at_backend_start or "")


def initialize() -> None:
    """JAX's plugin hook: runs once, right before JAX creates its backends."""
    global flags_at_backend_start
    if any(name in sys.modules for name in USERS):
        add_flag()
    flags_at_backend_start = os.environ.get("XLA_FLAGS", "")
