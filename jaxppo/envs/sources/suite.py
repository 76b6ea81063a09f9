"""What every suite adapter shares: importing its optional package with a one-line hint."""

from __future__ import annotations

import contextlib
import importlib
import io
from types import ModuleType

from jaxppo.errors import ConfigError


def require(module: str, suite: str, install_hint: str, env_id: str = "") -> ModuleType:
    """Import `module` (a suite's package), or raise one ConfigError line with the `pip install`
    that brings it. Anything the package prints at import (MuJoCo's "Failed to import warp")
    is kept off stdout."""
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            return importlib.import_module(module)
    except ImportError as e:
        what = f"{env_id!r} needs {suite}" if env_id else f"{suite} is needed"
        raise ConfigError(f"config key 'env_id': {what}, which is not installed ({e}); "
                          f"install it with: {install_hint}") from None
