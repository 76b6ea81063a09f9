"""A sweep setting as short text (`lr=0.001,hidden_sizes=64x64`): run names, TensorBoard
folders, tables and legends all label settings the same way, so it lives on the ground floor
where every layer can read it."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np


def setting_label(setting: dict) -> str:
    """A sweep setting as text: `lr=0.001,ent_coef=0.01`; a static value as `--grid` takes
    it, but a tuple as `64x64` (`hidden_sizes=64x64`)."""
    return ",".join(f"{k}={value_text(v)}" for k, v in setting.items())


def value_text(v: Any) -> str:
    """One setting's value as short text: numbers `:g`, booleans and None as YAML spells them,
    sequences joined by `x`."""
    if isinstance(v, bool | np.bool_):
        return "true" if v else "false"
    if isinstance(v, numbers.Real):
        return f"{v:g}"
    if v is None:
        return "null"
    if isinstance(v, list | tuple):
        return "x".join(value_text(x) for x in v) if len(v) else "[]"
    if isinstance(v, dict):
        return "{" + ",".join(f"{k}:{value_text(x)}" for k, x in v.items()) + "}"
    return str(v)


def listed(items, limit: int = 8) -> str:
    """Items as `a, b, c`, at most `limit` of them named (`a, b, ... (700,000 in all)`): what a
    one-line message quotes stays a line, whatever it was given."""
    items = [str(i) for i in items]
    shown = ", ".join(items[:limit])
    return shown + (f", ... ({len(items):,} in all)" if len(items) > limit else "")
