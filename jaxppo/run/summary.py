"""A run's results at its end: `summary.json` (its schema is `build_summary`; strict JSON,
NaN/Inf as null) and `curve.png` (its returns from metrics.csv, one curve per setting in a
sweep), and how a finished run's summary is checked before it is trusted."""

from __future__ import annotations

import json
import math
import os
import time
from typing import Any

import numpy as np

from jaxppo.config import PPOConfig
from jaxppo.labels import agents_label
from jaxppo.machine import peak_device_bytes
from jaxppo.plots import plot_curve
from jaxppo.run.events import Callback, Divergence, RunInfo, RunResult
from jaxppo.run.files import write_atomic
from jaxppo.run.logs.audit import gaps_summary
from jaxppo.run.logs.metrics_csv import forward_fill, read_metrics_csv
from jaxppo.run.stats import RunStats, mean_std_or_none, returns_or_none

REQUIRED = ("env_id", "num_runs", "status", "final_return", "env_steps")
"""The keys without which a finished run's summary.json is rebuilt from its checkpoint."""


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


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def summary_problem(path: str, settings=None, num_runs: int | None = None,
                    env_steps: int | None = None) -> str:
    """What makes a finished run's summary.json unusable ("" when nothing): what its readers
    (a resume, a static sweep's table, `jaxppo report`) take from it, checked against the
    checkpoint's `num_runs` and the config's `env_steps` where given."""
    try:
        with open(path, encoding="utf-8") as f:
            summary = json.load(f)
    except (OSError, ValueError) as e:
        return f"it is not JSON: {e}"
    if not isinstance(summary, dict):
        return "it is not a JSON object"
    lacks = [k for k in REQUIRED if k not in summary]
    if lacks:
        return f"it lacks {', '.join(lacks)}"
    status, runs = summary["status"], summary["num_runs"]
    if status not in ("finished", "diverged") or (summary.get("finished") is False
                                                  and status == "finished"):
        return "it says the run did not finish"
    if not _is_int(runs) or runs < 1 or (num_runs is not None and runs != num_runs):
        return f"its num_runs is {runs!r}, not the checkpoint's {num_runs or 'count'}"
    returns = summary["final_return"]
    if (not isinstance(returns, list) or len(returns) != runs
            or not all(r is None or _is_number(r) for r in returns)):
        return f"its final_return is not one number (or null) for each of its {runs} runs"
    steps = summary["env_steps"]
    if not _is_int(steps) or steps < 0 or (env_steps is not None and steps != env_steps):
        return f"its env_steps is {steps!r}, not the run's {env_steps or 'count'}"
    diverged = summary.get("diverged_runs", [])
    if not isinstance(diverged, list) or not all(_is_int(r) and 0 <= r < runs
                                                 for r in diverged):
        return "its diverged_runs is not a list of its runs"
    if not all(summary.get(k) is None or _is_number(summary[k])
               for k in ("wall_s", "compile_s")):
        return "its wall_s or compile_s is not a number"
    return ""


def summary_stats(run_dir: str, update: int) -> dict | None:
    """The running account of a checkpoint written before checkpoints carried it (0.1): its
    summary.json's, if that is readable."""
    try:
        with open(os.path.join(run_dir, "summary.json"), encoding="utf-8") as f:
            s = json.load(f)
        return {"update": update, "episodes": s["episodes_per_run"],
                "final_return": s["final_return"], "solved": s.get("solved"),
                "wall_s": s["wall_s"], "run_s": 0.0, "steps_timed": 0}
    except (OSError, ValueError, KeyError, TypeError):
        return None


class SummaryFile(Callback):
    """`summary.json` (what `RunResult.summary` holds) and `curve.png` (one curve per setting
    in a sweep) at the end of a run."""

    def on_start(self, info: RunInfo) -> None:
        self.info = info

    def on_end(self, result: RunResult) -> None:
        write_summary(self.info.run_dir, result.summary)
        write_curve(self.info, result.summary.get("threshold"), result.summary.get("settings"))


def write_summary(run_dir: str, summary: dict) -> None:
    """`summary.json`: strict JSON, a NaN/Inf written as null."""
    write_atomic(os.path.join(run_dir, "summary.json"),
                 json.dumps(json_safe(summary), indent=2, allow_nan=False))


def write_curve(info: RunInfo, threshold: float | None, settings: list | None = None) -> None:
    """`curve.png` from the run's metrics.csv (nothing when it holds no rows); a sweep's
    curves labelled by agents and `settings` (summary.json's: PBT's final ones; default the
    run's)."""
    run_dir = info.run_dir
    # a halving sweep's stopped agents have no rows after their rung: their curves end there
    ragged = info.ragged
    m = (read_metrics_csv(run_dir, ragged) if os.path.exists(os.path.join(run_dir, "metrics.csv"))
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
    plot_curve(os.path.join(run_dir, "curve.png"), np.nanmax(m["env_steps"], axis=0), returns,
               info.config.env_id, threshold, groups)


def json_safe(x: Any) -> Any:
    """`x` with NaN/Inf floats as None (null): JSON has no such numbers, and Python's `NaN`
    would make the file unreadable to strict parsers."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    return x
