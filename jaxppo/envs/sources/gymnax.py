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
    """A stand-in in `sys.modules` that imports the real module at its first attribute use and
    forwards to it. Not `importlib.util.LazyLoader`: the import statement itself reads a lazy
    module's `__spec__`, which loads it (Python 3.11-3.13); the stand-in has a spec of its own."""

    def __getattr__(self, attr: str):  # only for attributes the stand-in lacks
        real = self.__dict__.get("_real")
        if real is None:
            if sys.modules.get(self.__name__) is self:
                del sys.modules[self.__name__]
            real = importlib.import_module(self.__name__)
            self.__dict__["_real"] = real
        return getattr(real, attr)


def defer_render_only_imports() -> None:
    """Put a `_Deferred` stand-in for each `RENDER_ONLY` module in `sys.modules`: `import seaborn`
    then costs nothing, and the module runs at its first attribute use, by whoever uses it (a
    user's own `sns.lineplot` works as before). Modules already imported, or not installed,
    are left alone."""
    for name in RENDER_ONLY:
        if name in sys.modules:
            continue
        spec = importlib.util.find_spec(name)
        if spec is None:
            continue
        stand_in = _Deferred(name)
        stand_in.__spec__ = spec
        sys.modules[name] = stand_in


def env_ids() -> list[str]:
    import gymnax

    return sorted(gymnax.registered_envs)


def make(env_id: str, kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """`gymnax.make(env_id, **kwargs)`: `(env, default params)` (the name is the whole id)."""
    import gymnax

    try:
        return gymnax.make(env_id, **kwargs)
    except TypeError as e:
        raise kwargs_error(f"gymnax's {env_id!r}", kwargs, e) from None
