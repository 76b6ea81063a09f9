"""A sweep setting as short text (`lr=0.001,hidden_sizes=64x64`) and its agents' ids (`agent
3`, `agents 4-7`: the indices `--agent M` and `load_policy(..., seed=M)` take): run names,
TensorBoard folders, tables and legends all label them the same way, so it lives on the
ground floor where every layer can read it."""

from __future__ import annotations

import numbers
from typing import Any

import jax
import numpy as np


def setting_label(setting: dict) -> str:
    """A sweep setting as text: `lr=0.001,ent_coef=0.01`; a static value as `--grid` takes
    it, but a tuple as `64x64` (`hidden_sizes=64x64`)."""
    return ",".join(f"{k}={value_text(v)}" for k, v in setting.items())


def agents_text(runs) -> str:
    """The agents (run indices) a row stands for: `agent 3`, `agents 4-7`, `agents 1, 5`."""
    runs = [int(r) for r in runs]
    if len(runs) == 1:
        return f"agent {runs[0]}"
    if runs == list(range(runs[0], runs[0] + len(runs))):
        return f"agents {runs[0]}-{runs[-1]}"
    return "agents " + ", ".join(map(str, runs))


def agents_label(runs, setting: dict, updates: int | None = None) -> str:
    """A sweep row as text: `agent 3: lr=0.001` (`agent 3, 40 updates: ...` where the rows
    trained different lengths: a halving sweep's)."""
    went = "" if updates is None else f", {updates} updates"
    return f"{agents_text(runs)}{went}: {setting_label(setting)}"


def run_names(num_runs: int, settings: list[dict] | None, seeds: int,
              by_agent: bool = False) -> list[str]:
    """Each run's name in its logs (`tb/<name>/`, W&B): `seed_<i>`; in a sweep
    `<setting index>_<setting>_seed<i>`; `by_agent` (a run whose hyperparameters change as it
    trains: PBT's) `agent_<run index>`, as the tables name it with its final setting."""
    if settings is None:
        return [f"seed_{i}" for i in range(num_runs)]
    if by_agent:
        return [f"agent_{r:03d}" for r in range(num_runs)]
    return [f"{g:03d}_{setting_label(s)}_seed{i}" for g, s in enumerate(settings)
            for i in range(seeds)]


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


def tree_text(tree) -> str:
    """A pytree's size as text, for short reprs: `12 arrays, 9,348 values` (never the values:
    a repr that prints every parameter floods a notebook)."""
    leaves = [x for x in jax.tree.leaves(tree) if hasattr(x, "shape")]
    return f"{len(leaves)} arrays, {sum(int(np.prod(x.shape)) for x in leaves):,} values"


def returns_text(values) -> str:
    """Finite returns as `mean ± std` (`none` without one), for short reprs."""
    x = np.asarray(values, float).ravel()
    x = x[np.isfinite(x)]
    if not len(x):
        return "none"
    return f"{x.mean():.4g}" + (f" ± {x.std():.3g}" if len(x) > 1 else "")


def plural(n: int, noun: str) -> str:
    """`1 update`, `5 updates`, `1,024 updates`: a count that reads as a user would write it."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"
