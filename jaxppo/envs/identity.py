"""What an environment instance handed over as `env=` was, as plain data a checkpoint can keep,
so a run is never resumed, loaded or evaluated on another environment without a word.

A config names a built environment fully (`env_id`, `env_kwargs`, `env_params`); an instance
is named only by its `custom/<label>`. So the run also records the instance's class
(`module:qualname`), its public attributes that are plain data (what constructors usually
keep: `Corridor(length=12).length`) and its params' plain fields. Anything else (arrays larger
than `_MAX_ARRAY`, objects, private attributes) is not recorded and so not compared: two
instances that differ only there pass.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

_MAX_ARRAY = 64  # elements: small arrays (action bounds) are kept as lists
_SKIP = object()


def _plain(value: Any) -> Any:
    """`value` as msgpack/YAML-ready data, or `_SKIP` where it is not plain data."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if hasattr(value, "shape") and hasattr(value, "dtype"):  # numpy or jax array
        try:
            array = np.asarray(value)
        except Exception:  # noqa: BLE001 - a tracer or an abstract value: not data
            return _SKIP
        return array.tolist() if array.size <= _MAX_ARRAY else _SKIP
    if isinstance(value, (list, tuple)):
        items = [_plain(v) for v in value]
        return _SKIP if any(v is _SKIP for v in items) else items
    if isinstance(value, dict):
        return _fields({str(k): v for k, v in value.items()})
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _fields({f.name: getattr(value, f.name) for f in dataclasses.fields(value)})
    return _SKIP


def _fields(values: dict[str, Any]) -> dict[str, Any]:
    out = {k: _plain(v) for k, v in values.items()}
    return {k: v for k, v in out.items() if v is not _SKIP}


def class_name(env: Any) -> str:
    cls = type(env)
    return f"{cls.__module__}:{cls.__qualname__}"


def describe_env(env: Any, env_params: Any = None) -> dict[str, Any]:
    """`{"class", "attrs", "params"}` of an environment instance, as plain data."""
    params = getattr(env, "default_params", None) if env_params is None else env_params
    attrs = {k: v for k, v in vars(env).items() if not k.startswith("_")} if hasattr(
        env, "__dict__") else {}
    plain_params = _plain(params)
    return {"class": class_name(env), "attrs": _fields(attrs),
            "params": None if plain_params is _SKIP else plain_params}


def _differences(saved: Any, now: Any, prefix: str) -> list[str]:
    if isinstance(saved, dict) and isinstance(now, dict):
        out = []
        for k in sorted(set(saved) | set(now)):
            out += _differences(saved.get(k, "(none)"), now.get(k, "(none)"), f"{prefix}{k}.")
        return out
    return [] if _same(saved, now) else [f"{prefix.rstrip('.')}: {saved!r} in the run, {now!r} now"]


def _same(a: Any, b: Any) -> bool:
    """Equal plain data, a NaN equal to a NaN (an env's NaN default is the same env)."""
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def env_mismatch(saved: dict[str, Any], env: Any, env_params: Any = None) -> str | None:
    """What differs between the recorded instance `saved` and `env` (one phrase), or None."""
    now = describe_env(env, env_params)
    if saved.get("class") != now["class"]:
        return f"the run trained on a {saved.get('class')}, but env= is a {now['class']}"
    diffs = (_differences(saved.get("attrs", {}), now["attrs"], "")
             + _differences(saved.get("params"), now["params"], "params."))
    if diffs:
        more = f" (and {len(diffs) - 3} more)" if len(diffs) > 3 else ""
        return f"env= is another {now['class']} ({'; '.join(diffs[:3])}{more})"
    return None
