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

It also keeps the CUDA compiler plugin of the `gpu-profile` extra (`jax-cuda12-pjrt`, which
`jaxppo profile --target h100` compiles with on a machine with no GPU) quiet where it
can do nothing: JAX calls every installed plugin's `initialize()`, and without a CUDA runtime
that one raises, and JAX prints the traceback. `quiet_cuda_plugins` wraps it so that it runs
only where JAX could use it (a visible NVIDIA GPU, JAX's own test) or where the process asks
for CUDA compiles without one (JAX_SKIP_CUDA_CONSTRAINTS_CHECK, which the profile sets, or
JAXPPO_CUDA_PLUGIN=1). Nowhere else could JAX start a CUDA backend anyway (it skips CUDA
without a visible GPU, JAX_PLATFORMS or not), so no platform choice changes: only the
traceback goes. JAX initializes its plugins in no fixed order, so `import jaxppo` wraps it
before the backend starts (`jaxppo/_xla.py`); a process that starts JAX before importing
jaxppo is covered only when this hook happens to run first.
"""

from __future__ import annotations

import importlib
import importlib.util
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


CUDA_PLUGINS = ("jax_plugins.xla_cuda12", "jax_plugins.xla_cuda13")
"""The modules of JAX's CUDA PJRT plugins (`jax-cuda12-pjrt`, `jax-cuda13-pjrt`)."""


def cuda_plugin_wanted() -> bool:
    """Whether a CUDA plugin's `initialize()` can do anything in this process: a visible
    NVIDIA GPU, or a process that asks for CUDA compiles without one."""
    if os.environ.get("JAX_SKIP_CUDA_CONSTRAINTS_CHECK") or os.environ.get("JAXPPO_CUDA_PLUGIN"):
        return True
    try:
        from jax._src import hardware_utils  # JAX's own test; private, so guarded

        return bool(hardware_utils.has_visible_nvidia_gpu())
    except (ImportError, AttributeError):
        return True  # cannot tell: leave the plugin alone


def quiet_cuda_plugins() -> None:
    """Wrap each installed CUDA plugin's `initialize()` to run only where
    `cuda_plugin_wanted()` (decided when JAX calls it, so a process may still ask after
    importing jaxppo). Importing the plugin module loads no CUDA library; its initialize does."""
    for name in CUDA_PLUGINS:
        try:
            if importlib.util.find_spec(name) is None:
                continue
            module = importlib.import_module(name)
        except Exception:  # a broken plugin install is JAX's to report, not ours
            continue
        real = getattr(module, "initialize", None)
        if real is None or getattr(real, "jaxppo_guard", False):
            continue

        def initialize(real=real) -> None:
            if cuda_plugin_wanted():
                real()

        initialize.jaxppo_guard = True
        module.initialize = initialize


def initialize() -> None:
    """JAX's plugin hook: runs once, right before JAX creates its backends."""
    global flags_at_backend_start
    if any(name in sys.modules for name in USERS):
        add_flag()
        quiet_cuda_plugins()
    flags_at_backend_start = os.environ.get("XLA_FLAGS", "")
