"""A sweep's ranked table, the result files of a run with several settings: the settings
ranked by final return over their seeds, `sweep.csv`, `sweep.png` and `ranked` in
summary.json. Every search (grid, random, halving, PBT) ends in this one table; a static sweep
ranks its groups' settings with the same `rank_settings`."""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Sequence

import numpy as np

from jaxppo.labels import agents_label, setting_label
from jaxppo.plots import plot_sweep
from jaxppo.run.events import Callback, RunInfo, RunResult
from jaxppo.run.stats import mean_std_or_none, quiet_nonfinite
from jaxppo.writes import write_atomic


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
    """The ranked rows of a sweep's result (a run with `hparams`); where its runs trained
    different numbers of updates (a halving sweep's), the settings that went further first."""
    s = result.summary
    diverged = np.isin(np.arange(result.num_runs), s["diverged_runs"])
    n = len(s["settings"])
    updates = ([result.update] * n if result.run_updates is None
               else np.asarray(result.run_updates).reshape(n, -1).max(axis=1).tolist())
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
                          sweep_title(result.config.env_id, rows[0]["seeds"]))


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
    write_atomic(os.path.join(run_dir, "sweep.csv"), f.getvalue())  # whole, or the old one
    nan = lambda x: np.nan if x is None else x  # noqa: E731 - no bar for no return
    plot_sweep(os.path.join(run_dir, "sweep.png"),
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
