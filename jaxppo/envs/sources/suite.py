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


def kwargs_error(what: str, kwargs: dict, e: BaseException, fix: str = "") -> ConfigError:
    """A suite's constructor refused its keyword arguments (a TypeError or ValueError): one
    line naming them, or, where none were given, the argument it asked for (a required one:
    "does not take []" named nothing)."""
    text = str(e).strip().splitlines()
    why = f"{type(e).__name__}: {text[0]}" if text else type(e).__name__
    if not kwargs:
        return ConfigError(f"config key 'env_kwargs': building {what} raised {why}; give the "
                           "arguments its constructor needs in env_kwargs" + (f"; {fix}" if fix else ""))
    return ConfigError(f"config key 'env_kwargs': {what} does not take {sorted(kwargs)} ({why})"
                       + (f"; {fix}" if fix else ""))
