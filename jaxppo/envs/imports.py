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

from jaxppo.errors import ConfigError, UserCodeExit
from jaxppo.process import signals_seen, stop_point


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


def ended_by(name: str, where: str, e: BaseException, seen: int) -> UserCodeExit | None:
    """`e` raised while importing user module `name` as the one line that says so, if it is
    a SystemExit or a KeyboardInterrupt with no stop signal since `seen` (`signals_seen()` at
    the import's start); None for a real Ctrl-C, which stays the user's stop."""
    if isinstance(e, SystemExit):
        what = f"SystemExit({e.code!r})"
    elif isinstance(e, KeyboardInterrupt) and signals_seen() == seen:
        what = "KeyboardInterrupt (no Ctrl-C came: its own code raised it)"
    else:
        return None
    return UserCodeExit(f"{where}: importing module {name!r} raised {what}, which would end "
                        f"jaxppo; a module given to jaxppo must not exit when imported (guard "
                        f"its script part with `if __name__ == '__main__':`); run `python -c "
                        f"'import {name}'` to see where")


def missing_dependency(name: str, e: ModuleNotFoundError) -> str | None:
    """Why `name` failed to import when what is missing is not `name` itself but a module it
    imports (its own dependency), else None."""
    if e.name and e.name != name and not name.startswith(e.name + "."):
        return (f"module {name!r} was found, but it imports {e.name!r}, which is not "
                f"installed; pip install the package that provides {e.name!r}")
    return None


def import_env_modules(names: Iterable[str], where: str = "config key 'env_imports'") -> None:
    """Import each module (they register environments as they import), or raise one
    ConfigError line naming the module and why: not found (where to put it), a dependency of
    its own missing, or its own error at import; its SystemExit (or KeyboardInterrupt with no
    Ctrl-C) is a `UserCodeExit`."""
    for name in names:
        seen = signals_seen()
        try:
            import_module(name)
        except ModuleNotFoundError as e:
            dep = missing_dependency(name, e)
            if dep:
                raise ConfigError(f"{where}: {dep}") from None
            raise ConfigError(f"{where}: cannot import {name!r} ({e}); run from the folder that "
                              "holds it, add that folder to PYTHONPATH, or pip install its "
                              "package") from None
        except (SystemExit, KeyboardInterrupt) as e:
            ended = ended_by(name, where, e, seen)
            if ended is None:
                raise
            raise ended from None
        except Exception as e:  # noqa: BLE001 - the user's module failed at import: one line
            text = str(e).strip().splitlines()
            raise ConfigError(f"{where}: importing {name!r} failed ({type(e).__name__}: "
                              f"{text[0] if text else ''}); run `python -c 'import {name}'` to "
                              "see the traceback") from None
        stop_point("while starting")  # a held signal that came while it imported
