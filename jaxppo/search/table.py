"""A sweep's table: settings from a grid, their ranking by final return over seeds, and the
files a finished sweep writes (`sweep.csv`, `sweep.png`, `ranked` in summary.json). Every search
(grid, random, halving, PBT) ends in this one table."""

from __future__ import annotations

import csv
import dataclasses
import itertools
import json
import os
from collections.abc import Sequence

import numpy as np

from jaxppo.errors import UsageError
from jaxppo.plots import plot_sweep
from jaxppo.run.callbacks import Callback, RunInfo, RunResult, setting_label
from jaxppo.run.stats import mean_std_or_none, quiet_nonfinite
from jaxppo.search.halving import is_halving, setting_updates
from jaxppo.search.static import check_key, parse_values


@dataclasses.dataclass
class SweepResult:
    """`jaxppo.sweep`'s ranked table: one row per setting, best first (ties keep grid order);
    in a halving sweep, settings that trained further first."""

    rows: list[dict]  # rank, setting, label, updates (how far it trained), final_return_mean,
    #                   final_return_std (None where no seed has a return), seeds,
    #                   diverged_seeds, seeds_without_return, runs (indices into the run's
    #                   seeds axis); with static keys also
    #                   group (the run directory's name) and run_dir (its path) of the runs
    result: RunResult | None  # with static keys: the last group run in this session
    run_dir: str | None
    groups: list | None = None  # with static keys: each group's outcome (jaxppo.search.sweep)
    summary: dict | None = None  # with static keys: what the sweep's summary.json holds

    @property
    def best(self) -> dict:
        return self.rows[0]

    def table(self) -> str:
        """The table the CLI prints."""
        width = max(len(r["label"]) for r in self.rows)
        ragged = len({r.get("updates") for r in self.rows}) > 1  # halving: how far each went
        lines = [f"{'rank':>4}  {'setting':<{width}}  {'updates  ' if ragged else ''}final return"]
        for r in self.rows:
            flag = (f"  (diverged: {r['diverged_seeds']}/{r['seeds']} seeds)"
                    if r["diverged_seeds"] else "")
            if r["seeds_without_return"]:
                flag += f"  (no episode ended: {r['seeds_without_return']}/{r['seeds']} seeds)"
            ret = ("    none" if r["final_return_mean"] is None else
                   f"{r['final_return_mean']:8.2f} ± {r['final_return_std']:.2f}")
            went = f"{r.get('updates')!s:>7}  " if ragged else ""
            lines.append(f"{r['rank']:>4}  {r['label']:<{width}}  {went}{ret}{flag}")
        return "\n".join(lines)


def parse_grid(items: list[str]) -> dict[str, list]:
    """`KEY=V1,V2,...` items (the CLI's `--grid`) as a grid: numbers for the float
    hyperparameters, YAML values (as `--set` reads them) for static keys, which compile once
    per static setting."""
    grid, given = {}, {}
    for item in items or []:
        key, sep, values = item.partition("=")
        key = key.strip()
        if not sep or not key or not values:
            raise UsageError(f"--grid expects KEY=V1,V2,..., got {item!r} (e.g. --grid lr=1e-4,3e-4)")
        check_key(key, f"--grid {key}")
        if key in grid:  # argparse would keep only the last: one --grid per key
            raise UsageError(f"--grid {key} is given twice; give all its values in one: "
                             f"--grid {key}={given[key]},{values}")
        given[key] = values
        grid[key] = parse_values(key, values, f"--grid {key}")
    if not grid:
        raise UsageError("sweep needs at least one --grid KEY=V1,V2,...")
    return grid


def grid_settings(grid: dict[str, Sequence]) -> list[dict]:
    """Every combination of a grid `{key: [values]}`, in grid order."""
    return [dict(zip(grid, values, strict=True)) for values in itertools.product(*grid.values())]


@quiet_nonfinite
def rank_settings(settings: list[dict], final_return: np.ndarray, diverged: np.ndarray,
                  seeds: int, updates: Sequence[int] | None = None) -> list[dict]:
    """Settings best first by their mean final return over the seeds that have a finite one
    (NaN: no episode ended; NaN/Inf of a diverged seed, flagged apart); a setting none of whose
    seeds has one ranks last, its mean None. With `updates` [N] (how far each trained: a
    halving sweep's), the settings that went further rank first."""
    went = [0] * len(settings) if updates is None else [int(u) for u in updates]
    final = np.asarray(final_return, float).reshape(len(settings), seeds)
    bad = np.asarray(diverged, bool).reshape(len(settings), seeds)
    stats = [mean_std_or_none(row) for row in final]
    order = sorted(range(len(settings)),  # stable on ties; no return at all ranks last
                   key=lambda g: (-went[g], stats[g][0] is None, -(stats[g][0] or 0.0), g))
    return [{"rank": rank, "setting": settings[g], "label": setting_label(settings[g]),
             "updates": went[g] if updates is not None else None,
             "final_return_mean": stats[g][0], "final_return_std": stats[g][1],
             "seeds": seeds, "diverged_seeds": int(bad[g].sum()),
             # NaN with no divergence: no episode ended (a diverged seed is counted above)
             "seeds_without_return": int((~np.isfinite(final[g]) & ~bad[g]).sum()),
             "runs": list(range(g * seeds, (g + 1) * seeds))}
            for rank, g in enumerate(order, 1)]


def sweep_rows(result: RunResult) -> list[dict]:
    """The ranked rows of a sweep's result (a run with `hparams`)."""
    s = result.summary
    diverged = np.isin(np.arange(result.num_runs), s["diverged_runs"])
    search = s.get("search")
    updates = (setting_updates(search, result.update) if is_halving(search)
               else [result.update] * len(s["settings"]))
    return rank_settings(s["settings"], result.final_return, diverged, s["seeds"], updates)


def _cell(x: float | None) -> str:
    """A CSV cell: empty where there is no return (as metrics.csv leaves it)."""
    return "" if x is None else f"{x:.4f}"


class SweepTable(Callback):
    """A sweep's run directory, once it finishes: `sweep.csv` (the ranked settings and each
    one's agents), `sweep.png`, and the ranking in `summary.json` (`ranked`, written by the
    `SummaryFile` after it). Added by `Experiment` to every run with `hparams`, so a resumed
    sweep writes them too."""

    def on_start(self, info: RunInfo) -> None:
        self.info = info

    def on_end(self, result: RunResult) -> None:
        # a sweep whose every agent diverged ran to its end too: its table says so
        if (result.status not in ("finished", "diverged")
                or result.update < result.config.num_updates):
            return
        rows = result.summary["ranked"] = sweep_rows(result)
        write_sweep_files(self.info.run_dir, rows, sorted(rows, key=lambda r: r["runs"][0]),
                          f"{result.config.env_id}: {rows[0]['seeds']} seed(s) per setting")


def write_sweep_files(run_dir: str, rows: list[dict], in_grid: list[dict], title: str) -> None:
    """`sweep.csv` (the ranked rows; with static keys a `group` column names the run
    directory that holds each setting's `runs`) and `sweep.png` (the rows `in_grid` order)."""
    seeds, keys = rows[0]["seeds"], list(rows[0]["setting"])
    grouped = "group" in rows[0]
    with open(os.path.join(run_dir, "sweep.csv"), "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow([*_header(keys), *(["group"] if grouped else [])])
        for r in rows:
            w.writerow([r["rank"], *map(_value_cell, r["setting"].values()),
                        "" if r.get("updates") is None else r["updates"],
                        _cell(r["final_return_mean"]), _cell(r["final_return_std"]), seeds,
                        " ".join(map(str, r["runs"])), r["diverged_seeds"],
                        *([r["group"]] if grouped else [])])
    nan = lambda x: np.nan if x is None else x  # noqa: E731 - no bar for no return
    plot_sweep(os.path.join(run_dir, "sweep.png"), [r["label"] for r in in_grid],
               np.array([nan(r["final_return_mean"]) for r in in_grid]),
               np.array([nan(r["final_return_std"]) for r in in_grid]), title)


def _value_cell(v) -> object:
    """A setting's value in sweep.csv: a float as it is, a static value as `--set` reads it
    (`[64, 64]`, `true`, `relu`)."""
    return v if isinstance(v, float | str) else json.dumps(v)


def _header(keys) -> list[str]:
    return ["rank", *keys, "updates", "final_return_mean", "final_return_std", "seeds", "runs",
            "diverged_seeds"]


def sweep_csv_problem(path: str, settings) -> str:
    """What makes a finished sweep's sweep.csv unusable: not jaxppo's header, or not one
    whole row per setting ("" when nothing)."""
    header = _header(settings[0])
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
