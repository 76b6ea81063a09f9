"""gymnax environments: they already are the protocol (`protocol.py` is gymnax's single-env
API), so this adapter only lists and builds them (`env_id: CartPole-v1`, no prefix: the
registry asks it last, after the prefixed suites, probes and registered ids).

gymnax is imported inside the functions: importing its environment modules creates arrays,
which starts JAX's backend, and that must wait for `jax.distributed.initialize` in a
multi-process run (and for jaxppo's XLA flags)."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import Any

from jaxppo.envs.sources.suite import kwargs_error

PREFIX = ""
SUITE = "gymnax"
INSTALL_HINT = "pip install jaxppo"  # gymnax is one of jaxppo's own dependencies
EXPENSIVE_RESET = False  # a few random numbers (measured: at most 2.3x a step's time)

SOLVE_THRESHOLDS: dict[str, float] = {
    # Gymnasium's reward_threshold where it has one; MinAtar has none.
    "CartPole-v1": 475.0,
    "Acrobot-v1": -100.0,
    "MountainCar-v0": -110.0,
    "MountainCarContinuous-v0": 90.0,
    # Gymnasium gives Pendulum-v1 no reward_threshold; -200 is jaxppo's own mark (gymnax-blines
    # reports -130 for PPO).
    "Pendulum-v1": -200.0,
}


RENDER_ONLY = ("seaborn",)
"""What gymnax imports at import only for renders jaxppo never asks of it: gymnax 1.0.1's Pong
module imports seaborn (with pandas and scipy.stats: ~0.9 s of CPU quiet, seconds on a busy
machine) at its top, for its `render`. Upstream: gymnax/environments/misc/pong.py."""


class _Deferred(types.ModuleType):
    """What gymnax's own modules hold for a `RENDER_ONLY` module: it imports the real module at
    its first attribute use and forwards to it. Not `importlib.util.LazyLoader`: the import
    statement itself reads a lazy module's `__spec__`, which loads it (Python 3.11-3.13)."""

    def __getattr__(self, attr: str):  # only for attributes the stand-in lacks
        real = self.__dict__.get("_real")
        if real is None:
            real = importlib.import_module(self.__name__)
            self.__dict__["_real"] = real
        return getattr(real, attr)


def import_gymnax() -> types.ModuleType:
    """`gymnax`, imported with its `RENDER_ONLY` modules deferred: stand-ins sit in
    `sys.modules` only while gymnax imports, so gymnax's modules keep them and everyone else
    (a user's `import seaborn`, `from seaborn import *`) gets the real module. A gymnax already
    imported, or a module already imported or not installed, is left alone."""
    if "gymnax" in sys.modules:
        return sys.modules["gymnax"]
    stand_ins = {}
    for name in RENDER_ONLY:
        spec = None if name in sys.modules else importlib.util.find_spec(name)
        if spec is not None:
            stand_ins[name] = sys.modules[name] = _Deferred(name)
            stand_ins[name].__spec__ = spec
    try:
        return importlib.import_module("gymnax")
    finally:
        for name, stand_in in stand_ins.items():
            if sys.modules.get(name) is stand_in:
                del sys.modules[name]


def env_ids() -> list[str]:
    return sorted(import_gymnax().registered_envs)


def make(env_id: str, kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """`gymnax.make(env_id, **kwargs)`: `(env, default params)` (the name is the whole id)."""
    gymnax = import_gymnax()
    try:
        return gymnax.make(env_id, **kwargs)
    except TypeError as e:
        raise kwargs_error(f"gymnax's {env_id!r}", kwargs, e) from None
