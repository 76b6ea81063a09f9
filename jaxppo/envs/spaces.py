"""Action and observation spaces: jaxppo's own three, and the one reading of any source's space.

An environment may hand back gymnax's spaces, its own, or these; `action_spec` reads them by
what they have (`n`: discrete, `nvec`: multi-discrete, `low`/`high`/`shape`: a box), so a
gymnax `Environment` subclass works unchanged and an adapter only converts what is exotic.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from jaxppo.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class Discrete:
    """One choice among `n` actions; the action is an int scalar."""

    n: int
    shape: tuple[int, ...] = ()
    dtype: Any = np.int32


@dataclasses.dataclass(frozen=True)
class MultiDiscrete:
    """K independent choices, the k-th among `nvec[k]`; the action is an int vector [K]."""

    nvec: tuple[int, ...]
    dtype: Any = np.int32

    @property
    def shape(self) -> tuple[int, ...]:
        return (len(self.nvec),)


@dataclasses.dataclass(frozen=True)
class Box:
    """A real array of `shape` within `[low, high]` (bounds broadcast; inf for unbounded)."""

    low: Any
    high: Any
    shape: tuple[int, ...]
    dtype: Any = np.float32


KINDS = ("discrete", "multidiscrete", "continuous")


@dataclasses.dataclass(frozen=True, eq=False)
class ActionSpec:
    """What the policy head needs to know about an action space.

    `nvec` is `(n,)` for a discrete space and the per-sub-action sizes for a multi-discrete one;
    `logits_dim` is the width of the policy head (sum of `nvec`, or the box's size)."""

    kind: str
    shape: tuple[int, ...]  # one env's action: () discrete, (K,) multi-discrete, box shape
    nvec: tuple[int, ...] = ()
    low: np.ndarray | None = None  # float32, broadcast to `shape` (continuous only)
    high: np.ndarray | None = None

    @property
    def logits_dim(self) -> int:
        return sum(self.nvec) if self.nvec else max(1, math.prod(self.shape))


def action_spec(space: Any, where: str) -> ActionSpec:
    """Read any action space as an `ActionSpec`, or raise one line naming what is unsupported
    (`where` says whose space it is, e.g. "environment 'MyEnv-v0'"). Gymnasium's MultiBinary(n)
    is read exactly as n two-way choices; a nested MultiDiscrete or MultiBinary and an integer
    Box are refused rather than read as something they are not."""
    kind = type(space).__name__
    if kind == "MultiBinary":
        n = getattr(space, "n", None)
        if isinstance(n, (tuple, list, np.ndarray)) and len(n) != 1:
            raise ConfigError(f"{where}: MultiBinary action space of shape {tuple(n)}; jaxppo "
                              "takes a flat one (n,): flatten the action inside the environment")
        n = int(np.asarray(n).reshape(-1)[0])
        if n < 1:
            raise ConfigError(f"{where}: MultiBinary action space with n={n}; it needs n >= 1")
        return ActionSpec("multidiscrete", (n,), (2,) * n)
    nvec = getattr(space, "nvec", None)
    if nvec is not None:
        if np.ndim(nvec) != 1:
            raise ConfigError(f"{where}: MultiDiscrete action space of shape "
                              f"{np.shape(nvec)} (nested); jaxppo takes a flat one (K,): "
                              "flatten the action inside the environment")
        nvec = tuple(int(v) for v in np.asarray(nvec).reshape(-1))
        if not nvec or min(nvec) < 1:
            raise ConfigError(f"{where}: MultiDiscrete action space with sizes {nvec}; every "
                              "sub-action needs at least one choice")
        return ActionSpec("multidiscrete", (len(nvec),), nvec)
    n = getattr(space, "n", None)
    if n is not None and getattr(space, "low", None) is None:
        if int(n) < 1:
            raise ConfigError(f"{where}: Discrete action space with n={n}; it needs n >= 1")
        return ActionSpec("discrete", (), (int(n),))
    low, high, shape = (getattr(space, a, None) for a in ("low", "high", "shape"))
    if low is not None and high is not None and shape is not None:
        dtype = getattr(space, "dtype", None)
        if dtype is not None and not np.issubdtype(np.dtype(dtype), np.floating):
            raise ConfigError(f"{where}: Box action space of dtype {np.dtype(dtype)}: jaxppo's "
                              "Gaussian policy draws real actions; give integer actions as a "
                              "Discrete or MultiDiscrete space")
        shape = tuple(int(s) for s in shape)
        if len(shape) != 1:
            raise ConfigError(f"{where}: continuous action space of shape {shape}; jaxppo's "
                              "Gaussian policy takes a flat action vector (D,), so reshape "
                              "the action inside the environment")
        low = np.broadcast_to(np.asarray(low, np.float32), shape).copy()
        high = np.broadcast_to(np.asarray(high, np.float32), shape).copy()
        return ActionSpec("continuous", shape, low=low, high=high)
    raise ConfigError(f"{where}: action space {type(space).__name__} is not supported; use a "
                      "Discrete (n), MultiDiscrete (nvec) or Box (low, high, shape) space "
                      "(jaxppo.envs.spaces)")
