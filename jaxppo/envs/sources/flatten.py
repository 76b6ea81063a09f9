"""A host env's non-Box observation space read as one array (`ObsReader`), so that an SB3 user's
Dict observations (`MultiInputPolicy`) train unchanged.

The order is fixed and documented (docs/how-to/gymnasium-env.md): a Dict's keys sorted, each
sub-space flattened and the pieces joined, as `gymnasium.spaces.flatten` reads them:

    Box, MultiBinary   its values, raveled (row-major), as float32 (an image is not rescaled)
    Discrete(n, start) a one-hot of n (x - start)
    MultiDiscrete      one one-hot per sub-action, joined (raveled order)
    Dict               its keys sorted, each flattened, joined
    Tuple              its items in order, each flattened, joined

`obs_field` picks instead: one key keeps its sub-space as it is (a Box image stays an image,
uint8 stays uint8) or is flattened if it is no Box; `"a,b"` flattens and joins those keys in
that order; `"*"` (or no `obs_field`) all of them, sorted. Pure NumPy, on the host.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from jaxppo.envs.spaces import Box
from jaxppo.errors import ConfigError

Flat = Callable[[Any], np.ndarray]  # a batched sub-observation [M, ...] -> [M, size]


def _kind(space: Any) -> str:
    return type(space).__name__


def _sub_spaces(space: Any) -> list[tuple[Any, Any]]:
    """`(key, sub-space)` of a Dict (keys sorted) or a Tuple (in order)."""
    if _kind(space) == "Dict":
        return sorted(space.spaces.items(), key=lambda kv: str(kv[0]))
    return list(enumerate(space.spaces))


def _one_hot(x: np.ndarray, n: int, what: str) -> np.ndarray:
    x = np.asarray(x).astype(np.int64)
    if x.size and (x.min() < 0 or x.max() >= n):
        bad = x[(x < 0) | (x >= n)].flat[0]
        raise ValueError(f"observation {what} is {bad}, outside its space's 0..{n - 1}")
    out = np.zeros((*x.shape, n), np.float32)
    np.put_along_axis(out, x[..., None], 1.0, axis=-1)
    return out


def flattener(space: Any, what: str) -> tuple[int, Flat]:
    """`(size, flat)`: `flat` reads a batch [M, ...] of `space`'s values as float32 [M, size];
    one line naming `what` for a space that has no flat form (Text, Graph, Sequence, ...)."""
    kind = _kind(space)
    if kind in ("Box", "MultiBinary"):
        size = int(np.prod(space.shape))
        return size, lambda x: np.asarray(x).reshape(np.shape(x)[0], size).astype(np.float32)
    if kind == "Discrete":
        n, start = int(space.n), int(getattr(space, "start", 0) or 0)
        return n, lambda x: _one_hot(np.asarray(x) - start, n, what)
    if kind == "MultiDiscrete":
        nvec = np.asarray(space.nvec).reshape(-1)
        start = getattr(space, "start", None)
        start = np.broadcast_to(np.asarray(0 if start is None else start), np.shape(space.nvec)
                                ).reshape(-1)

        def flat_md(x):
            x = np.asarray(x).reshape(np.shape(x)[0], -1) - start
            return np.concatenate([_one_hot(x[:, i], int(n), what)
                                   for i, n in enumerate(nvec)], axis=1)

        return int(nvec.sum()), flat_md
    if kind in ("Dict", "Tuple"):
        parts = [(key, *flattener(sub, f"{what}[{key!r}]")) for key, sub in _sub_spaces(space)]
        size = sum(p[1] for p in parts)
        return size, lambda x: np.concatenate([f(x[k]) for k, _, f in parts], axis=1) \
            if parts else np.zeros((_batch(x), 0), np.float32)
    raise ConfigError(f"{what}: a {kind} space has no flat form jaxppo can train on; use Box, "
                      "Discrete, MultiDiscrete, MultiBinary, Dict or Tuple spaces")


def _batch(x: Any) -> int:
    while isinstance(x, (dict, tuple, list)):
        x = next(iter(x.values())) if isinstance(x, dict) else x[0]
    return int(np.shape(x)[0])


def _one_as_batch(x: Any) -> Any:
    """One env's observation (a dict/tuple of values) as a batch of one."""
    if isinstance(x, dict):
        return {k: _one_as_batch(v) for k, v in x.items()}
    if isinstance(x, tuple):
        return tuple(_one_as_batch(v) for v in x)
    return np.asarray(x)[None]


class ObsReader:
    """How to read a host env's non-Box observations as one array: `space` is the Box the
    policy sees (`shape`, `dtype`), `batch` reads the vector env's [M] observations, `one`
    a single env's (a final observation in `info`). `layout` says, for a deployment that must
    build the same array without jaxppo (an export's sidecar), which field fills which columns
    (`columns: [start, end)`), or that one field is kept as it is (`kept`)."""

    def __init__(self, space: Any, obs_field: str | None, label: str):
        kind = _kind(space)
        if kind != "Dict":
            if obs_field:
                raise ConfigError(f"config key 'obs_field': {label} gives {kind} observations, "
                                  f"so there is no field {obs_field!r} to pick; remove obs_field")
            size, self._flat = flattener(space, f"{label}'s observation")
            self.space = Box(0.0, 1.0, (size,), np.float32)
            self.layout = [{"field": None, "space": kind, "columns": [0, size]}]
            return
        keys = [str(k) for k, _ in _sub_spaces(space)]
        names = keys if obs_field in (None, "", "*") else [
            n.strip() for n in obs_field.split(",") if n.strip()]
        missing = [n for n in names if n not in keys]
        if missing or not names:
            raise ConfigError(f"config key 'obs_field': {label}'s Dict observations have no key "
                              f"{', '.join(repr(m) for m in missing) or repr(obs_field)}; use "
                              f"one of {', '.join(keys)}, several joined by commas, or '*'")
        subs = dict(_sub_spaces(space))
        one = subs[names[0]] if len(names) == 1 else None
        if one is not None and _kind(one) == "Box" and len(one.shape) > 0:
            key = names[0]  # kept as it is: an image stays an image (and uint8)
            self.space = Box(one.low, one.high, tuple(int(s) for s in one.shape),
                             np.dtype(one.dtype))
            self._flat = lambda x: np.asarray(x[key])
            self.layout = [{"field": key, "space": "Box", "kept": True}]
            return
        parts = [(n, *flattener(subs[n], f"{label}'s observation {n!r}")) for n in names]
        ends = np.cumsum([0] + [p[1] for p in parts])
        self.layout = [{"field": n, "space": _kind(subs[n]), "columns": [int(a), int(b)]}
                       for (n, _, _), a, b in zip(parts, ends[:-1], ends[1:], strict=True)]
        self.space = Box(-np.inf, np.inf, (sum(p[1] for p in parts),), np.float32)
        self._flat = lambda x: np.concatenate([f(x[n]) for n, _, f in parts], axis=1)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.space.shape

    @property
    def dtype(self) -> Any:
        return self.space.dtype

    def batch(self, obs: Any) -> np.ndarray:
        """The vector env's observations of M envs as [M, *shape]."""
        return self._flat(obs)

    def one(self, obs: Any) -> np.ndarray:
        """One env's observation as [*shape]."""
        return self._flat(_one_as_batch(obs))[0]
