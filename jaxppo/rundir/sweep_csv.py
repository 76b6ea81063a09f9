"""`sweep.csv`, a sweep's settings ranked (one row each, best first), and `sweep.png` beside
it: written, and checked before a resume trusts them. The ranking itself is
`run/sweep_table.rank_settings`."""

from __future__ import annotations

import csv
import io
import json
import os

import numpy as np

from jaxppo.labels import agents_label
from jaxppo.plots import plot_sweep
from jaxppo.rundir import names
from jaxppo.writes import write_atomic

FILE = names.SWEEP
VERSION = 2
"""2: an `updates` column (how far each setting trained); 1, before it, still reads as a whole
table (`sweep_csv_problem` takes either header)."""


def _cell(x: float | None) -> str:
    """A CSV cell: empty where there is no return (as metrics.csv leaves it)."""
    return "" if x is None else f"{x:.4f}"


def sweep_title(env_id: str, seeds: int) -> str:
    """sweep.png's title: the env and what each bar is."""
    return (f"{env_id}: final return per setting, mean ± std over {seeds} seeds" if seeds > 1
            else f"{env_id}: final return per setting (1 seed each)")


def write_sweep_files(run_dir: str, rows: list[dict], in_grid: list[dict], title: str) -> None:
    """`sweep.csv` (the ranked rows; with static keys a `group` column names the run
    directory that holds each setting's `runs`) and `sweep.png` (the rows `in_grid` order)."""
    seeds, keys = rows[0]["seeds"], list(rows[0]["setting"])
    grouped = "group" in rows[0]
    ragged = len({r.get("updates") for r in rows}) > 1  # halving: how far each went
    f = io.StringIO(newline="")
    w = csv.writer(f)
    w.writerow([*_header(keys), *(["group"] if grouped else [])])
    for r in rows:
        w.writerow([r["rank"], *map(_value_cell, r["setting"].values()),
                    "" if r.get("updates") is None else r["updates"],
                    _cell(r["final_return_mean"]), _cell(r["final_return_std"]), seeds,
                    " ".join(map(str, r["runs"])), r["diverged_seeds"],
                    *([r["group"]] if grouped else [])])
    write_atomic(os.path.join(run_dir, FILE), f.getvalue())  # whole, or the old one
    nan = lambda x: np.nan if x is None else x  # noqa: E731 - no bar for no return
    plot_sweep(os.path.join(run_dir, names.SWEEP_PNG),
               [agents_label(r["runs"], r["setting"], r.get("updates") if ragged else None)
                for r in in_grid],
               np.array([nan(r["final_return_mean"]) for r in in_grid]),
               np.array([nan(r["final_return_std"] if seeds > 1 else None) for r in in_grid]),
               title)


def _value_cell(v) -> object:
    """A setting's value in sweep.csv: a float as it is, a static value as `--set` reads it
    (`[64, 64]`, `true`, `relu`)."""
    return v if isinstance(v, float | str) else json.dumps(v)


def _header(keys) -> list[str]:
    return ["rank", *keys, "updates", "final_return_mean", "final_return_std", "seeds", "runs",
            "diverged_seeds"]


def sweep_csv_problem(path: str, settings, grouped: bool = False) -> str:
    """What makes a finished sweep's sweep.csv unusable: not jaxppo's header, or not one
    whole row per setting ("" when nothing). `grouped`: a static sweep's (a `group` column)."""
    header = _header(settings[0]) + (["group"] if grouped else [])
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
    except (OSError, ValueError, csv.Error) as e:
        return f"it is not a CSV table: {e}"
    older = [h for h in header if h != "updates"]  # before `updates`: still a whole table
    if not rows or rows[0] not in (header, older):
        return "its header is not jaxppo's"
    if len(rows) - 1 != len(settings) or any(len(r) != len(rows[0]) for r in rows[1:]):
        return f"it does not hold one whole row for each of the {len(settings)} settings"
    return ""
