"""A run's results at its end: `summary.json`'s contents (`build_summary`; the file's format is
`rundir/summary.py`) and `curve.png` (its returns from metrics.csv, one curve per setting in a
sweep)."""

from __future__ import annotations

import os
import time

import numpy as np

from jaxppo.config import PPOConfig
from jaxppo.labels import agents_label
from jaxppo.machine import peak_device_bytes
from jaxppo.plots import plot_curve
from jaxppo.run.events import Callback, Divergence, RunInfo, RunResult
from jaxppo.run.stats import RunStats, mean_std_or_none, returns_or_none
from jaxppo.rundir import names
from jaxppo.rundir.csv_log import gaps_summary
from jaxppo.rundir.metrics_csv import forward_fill, read_metrics_csv
from jaxppo.rundir.summary import write_summary


def build_summary(config: PPOConfig, stats: RunStats, *, num_runs: int, status: str,
                  wall_s: float, compile_s: float, diverged: Divergence | None,
                  diverged_runs: np.ndarray, divergences: list[Divergence],
                  env_steps_total: int, device, settings: list | None = None,
                  seeds: int | None = None, search: dict | None = None,
                  extra: dict | None = None, log_gaps=()) -> dict:
    """What summary.json holds for a run (`RunResult.summary`): the final returns (null for
    a run in which no episode ended; the mean and std over the others), speed, how far it
    went, its divergences, the device, and a sweep's settings and search."""
    returns = stats.final_return
    mean, std = mean_std_or_none(returns)
    summary = {
        "env_id": config.env_id,
        "num_runs": num_runs,
        "status": status,
        "final_return": returns_or_none(returns),
        "final_return_mean": mean,
        "final_return_std": std,
        "runs_without_return": int((stats.episodes == 0).sum()),
        # episodes ended, but the return is NaN/Inf: the run diverged (diverged_runs; or a
        # PBT member rescued since, whose own last return is from before)
        "runs_nonfinite_return": int((~np.isfinite(returns) & (stats.episodes > 0)).sum()),
        "wall_s": round(wall_s, 3),
        "compile_s": round(compile_s, 3),
        "sps": round(stats.sps_per_run * num_runs, 1),
        "sps_per_run": round(stats.sps_per_run, 1),
        # per agent (a halving sweep's: its furthest); the total over agents, each as far as
        # it trained (a halving sweep's stopped ones stop counting)
        "env_steps": int(stats.update * config.batch_size),
        "env_steps_total": int(env_steps_total),
        "episodes_per_run": [float(x) for x in stats.episodes],
        "solved": stats.solved,
        "threshold": stats.threshold,
        "finished": status == "finished",
        "diverged": None if diverged is None else diverged._asdict(),
        "diverged_runs": [int(i) for i in np.flatnonzero(diverged_runs)],
        "divergences": [d._asdict() for d in divergences],
        "device": device.device_kind,
        "platform": device.platform,
        "peak_device_bytes": peak_device_bytes(device),
        "written_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    if settings is not None:
        summary["settings"] = settings
        summary["seeds"] = seeds
        if search is not None:
            summary["search"] = search
        summary.update(extra or {})
    # lost from metrics.csv, recorded by a repair_log resume
    summary.update(gaps_summary(log_gaps, num_runs))
    return summary


class SummaryFile(Callback):
    """`summary.json` (what `RunResult.summary` holds) and `curve.png` (one curve per setting
    in a sweep) at the end of a run."""

    def on_start(self, info: RunInfo) -> None:
        self.info = info

    def on_end(self, result: RunResult) -> None:
        write_summary(self.info.run_dir, result.summary)
        write_curve(self.info, result.summary.get("threshold"), result.summary.get("settings"))


def write_curve(info: RunInfo, threshold: float | None, settings: list | None = None) -> None:
    """`curve.png` from the run's metrics.csv (nothing when it holds no rows); a sweep's
    curves labelled by agents and `settings` (summary.json's: PBT's final ones; default the
    run's)."""
    run_dir = info.run_dir
    # a halving sweep's stopped agents have no rows after their rung: their curves end there
    ragged = info.ragged
    m = (read_metrics_csv(run_dir, ragged) if os.path.exists(os.path.join(run_dir, names.METRICS))
         else {})
    if not m:
        return
    returns = forward_fill(m["episodic_return"], m["episodes"])
    if ragged:
        returns[np.isnan(m["update"])] = np.nan
    groups = None
    settings = settings if settings is not None else info.settings
    if settings is not None:
        seeds = info.num_runs // len(settings)
        groups = {agents_label(runs, s): runs for g, s in enumerate(settings)
                  for runs in [list(range(g * seeds, (g + 1) * seeds))]}
    plot_curve(os.path.join(run_dir, names.CURVE), np.nanmax(m["env_steps"], axis=0), returns,
               info.config.env_id, threshold, groups)
