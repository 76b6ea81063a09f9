"""Importing a user's module by name, as Python would from the working directory, with one
line for each way it fails. Modules that register environments when imported
(`gymnasium.register`, `jaxppo.register_env`) are how an env of your own reaches a config:
`env_id: gymnasium/mymod:MyEnv-v0`, `env_id: mymod:MyTask-v0`, or the config key
`env_imports` (`--import mymod`), which a run records so that `eval` and `--resume` import the
modules again."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterable
from types import ModuleType

from jaxppo.errors import ConfigError


def import_module(name: str) -> ModuleType:
    """Import `name` as Python would from the current directory: the `jaxppo` console script,
    unlike `python -m`, does not put the working directory on `sys.path`."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        cwd = os.getcwd()
        if e.name != name.split(".")[0] or cwd in sys.path or "" in sys.path:
            raise
        sys.path.append(cwd)
        return importlib.import_module(name)


def import_env_modules(names: Iterable[str], where: str = "config key 'env_imports'") -> None:
    """Import each module (they register environments as they import), or raise one
    ConfigError line naming the module and why: not found (where to put it), or its own error
    at import."""
    for name in names:
        try:
            import_module(name)
        except ModuleNotFoundError as e:
            raise ConfigError(f"{where}: cannot import {name!r} ({e}); run from the folder that "
                              "holds it, add that folder to PYTHONPATH, or pip install its "
                              "package") from None
        except Exception as e:  # noqa: BLE001 - the user's module failed at import: one line
            text = str(e).strip().splitlines()
            raise ConfigError(f"{where}: importing {name!r} failed ({type(e).__name__}: "
                              f"{text[0] if text else ''}); run `python -c 'import {name}'` to "
                              "see the traceback") from None
