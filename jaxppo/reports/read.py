"""Reading run directories into groups of scores: one group per run, or per setting of a sweep.

A run's score per seed is its mean return over `eval.json`'s completed episodes when `jaxppo
eval` was run, else its final return from training (`summary.json`, or `metrics.csv`'s latest
return when a kill left no summary); the group says which (`SOURCES`). A seed with no finished
episode has no score: NaN here, counted as missing by the report, never as 0. A file that
cannot be read, or that does not belong to the run, is one UsageError line naming the fix.
"""

from __future__ import annotations

import json
import os
from typing import Any, NamedTuple

import numpy as np
import yaml

from jaxppo.errors import UsageError
from jaxppo.labels import agents_label
from jaxppo.run.logs.metrics_csv import forward_fill, read_metrics_csv
from jaxppo.search.halving import is_halving, setting_updates

SOURCES = {"eval.json": "each seed's mean return over its `jaxppo eval` episodes (cut-off ones left out)",
           "summary.json": "each seed's final training return (its latest episodes; no "
                           "eval.json)",
           "metrics.csv": "each seed's latest training return in metrics.csv (no eval.json or "
                          "summary.json)"}


class Group(NamedTuple):
    """One row of the report: a run's seeds, or one sweep setting's seeds."""

    label: str
    run_dir: str
    env_id: str
    setting: dict | None
    runs: list[int]  # indices into the run's seeds axis
    scores: np.ndarray  # [S] raw scores, NaN where a seed has none
    source: str  # "eval.json", "summary.json" or "metrics.csv"
    curve_steps: np.ndarray | None  # [U] env steps per update, None without metrics.csv
    curve: np.ndarray | None  # [S, U] latest return per seed, NaN before its first episode
    updates: int | None = None  # updates its agents trained, where a sweep's differ (halving)


def _load_json(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise UsageError(f"cannot read '{path}' ({getattr(e, 'strerror', None) or e}); restore "
                         f"it or move it away") from None


def _as_scores(values, what: str) -> np.ndarray:
    """A JSON list of numbers/nulls as floats, null (or NaN/Inf) as NaN."""
    if not isinstance(values, list) or not all(
            v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in values):
        raise UsageError(f"{what} is not a list of numbers; it was not written by this jaxppo: "
                         "re-run the command that writes it")
    x = np.array([np.nan if v is None else v for v in values], float)
    x[~np.isfinite(x)] = np.nan
    return x


def eval_scores(path: str) -> tuple[np.ndarray, dict]:
    """Per-seed mean return over an eval.json's completed episodes ([R], NaN where none
    completed) and what else it says (episodes, cut-off counts, update). Reads both the format
    with `cut_off` (episodes still running at the step cap, left out) and the one without."""
    data = _load_json(path)
    what = f"'{path}'"
    if not isinstance(data, dict):
        raise UsageError(f"{what} is not an eval.json; re-run jaxppo eval")
    returns = data.get("returns")
    if isinstance(returns, list) and returns and all(isinstance(r, list) for r in returns):
        cut = data.get("cut_off")
        rows = []
        for i, r in enumerate(returns):
            x = _as_scores(r, f"{what} returns[{i}]")
            if isinstance(cut, list) and i < len(cut) and isinstance(cut[i], list) \
                    and len(cut[i]) == len(x):
                x[np.asarray(cut[i], bool)] = np.nan
            rows.append(np.nanmean(x) if np.isfinite(x).any() else np.nan)
        scores = np.array(rows, float)
    elif "mean_per_run" in data:
        scores = _as_scores(data["mean_per_run"], f"{what} mean_per_run")
    else:
        raise UsageError(f"{what} holds no per-seed returns; re-run jaxppo eval")
    cut_total = None
    if isinstance(data.get("cut_off_per_run"), list):
        cut_total = int(sum(c for c in data["cut_off_per_run"] if isinstance(c, (int, float))))
    return scores, {"episodes": data.get("episodes"), "update": data.get("update"),
                    "env_id": data.get("env_id"), "cut_off": cut_total}


def read_run(run_dir: str, source: str = "auto") -> tuple[list[Group], list[str]]:
    """A run directory's groups (one, or one per sweep setting) and notes on what was used."""
    if not os.path.isdir(run_dir):
        raise UsageError(f"'{run_dir}' is not a directory; pass run directories (runs/<name>)")
    notes: list[str] = []
    summary_path = os.path.join(run_dir, "summary.json")
    summary = _load_json(summary_path) if os.path.exists(summary_path) else None
    if summary is not None and not isinstance(summary, dict):
        raise UsageError(f"'{summary_path}' is not a run summary; move it away or resume the "
                         "run to rebuild it")
    env_id = _env_id(run_dir, summary)
    metrics_path = os.path.join(run_dir, "metrics.csv")
    # a halving sweep's stopped agents have no rows past their rung: every update is read,
    # and their curves end where they stopped (not the others' where the first one stopped)
    ragged = is_halving((summary or {}).get("search"))
    metrics = _read_metrics(run_dir, ragged) if os.path.exists(metrics_path) else {}
    if not os.path.exists(metrics_path):
        notes.append(f"{run_dir}: no metrics.csv, so no sample-efficiency curve")
    curve = (forward_fill(metrics["episodic_return"], metrics["episodes"]) if metrics
             else None)
    if ragged and curve is not None:
        curve[np.isnan(metrics["update"])] = np.nan
    steps = np.nanmax(metrics["env_steps"], axis=0) if metrics else None
    eval_path = os.path.join(run_dir, "eval.json")
    if source == "eval" and not os.path.exists(eval_path):
        raise UsageError(f"'{run_dir}' has no eval.json; run jaxppo eval {run_dir} first, or "
                         "drop --source eval to use the final training returns")
    if source != "final" and os.path.exists(eval_path):
        scores, info = eval_scores(eval_path)
        used = "eval.json"
        if info["env_id"] not in (None, env_id):
            raise UsageError(f"'{eval_path}' evaluated {info['env_id']}, but the run trained on "
                             f"{env_id}; re-run jaxppo eval {run_dir}")
        last = int(np.nanmax(metrics["update"])) if metrics else None
        if last is not None and isinstance(info["update"], int) and info["update"] < last:
            notes.append(f"{run_dir}: eval.json was played at update {info['update']}; the run "
                         f"has since reached update {last} (re-run jaxppo eval for the latest "
                         "policy)")
        if info["cut_off"]:
            notes.append(f"{run_dir}: {info['cut_off']} eval episode(s) were cut off at the step "
                         "cap and left out of the scores")
    elif summary is not None and "final_return" in summary:
        scores = _as_scores(summary["final_return"], f"'{summary_path}' final_return")
        used = "summary.json"
    elif curve is not None:
        scores = curve[:, -1]
        used = "metrics.csv"
        notes.append(f"{run_dir}: no summary.json (the run was killed before writing it): "
                     "scores are each seed's latest return in metrics.csv")
    else:
        raise UsageError(f"'{run_dir}' holds no eval.json, summary.json or metrics.csv; is it "
                         "a jaxppo run directory?")
    counts = {"metrics.csv": None if curve is None else curve.shape[0],
              "summary.json": summary.get("num_runs") if summary else None}
    for name, n in counts.items():
        if isinstance(n, int) and n != len(scores):
            fix = f"re-run jaxppo eval {run_dir}" if used == "eval.json" else \
                "move the file that does not belong to this run away"
            raise UsageError(f"'{run_dir}': {used} holds {len(scores)} seed(s) but {name} "
                             f"{n}; {fix}")
    diverged = summary.get("diverged_runs") if summary else None
    if diverged:
        notes.append(f"{run_dir}: run(s) {', '.join(map(str, diverged))} diverged (summary.json's "
                     "diverged_runs); their scores are included as logged")
    settings = summary.get("settings") if summary else None
    if settings is None and os.path.exists(os.path.join(run_dir, "sweep.csv")):
        raise UsageError(f"'{run_dir}' is a sweep without its summary.json, which names each "
                         f"agent's setting; rebuild it with: jaxppo sweep --resume {run_dir}")
    if settings is None:
        return [Group(os.path.normpath(run_dir), run_dir, env_id, None, list(range(len(scores))),
                      scores, used, steps, curve)], notes
    if not isinstance(settings, list) or not settings or len(scores) % len(settings):
        raise UsageError(f"'{summary_path}': its {len(scores)} seed(s) do not split into its "
                         f"settings; move it away and rebuild it with jaxppo sweep --resume "
                         f"{run_dir}")
    seeds = len(scores) // len(settings)
    last = int(np.nanmax(metrics["update"])) if metrics else None
    updates = _setting_updates(summary, len(settings), last)
    groups = []
    for g, s in enumerate(settings):
        runs = list(range(g * seeds, (g + 1) * seeds))
        went = None if updates is None else updates[g]
        groups.append(Group(agents_label(runs, s, went), run_dir, env_id, dict(s), runs,
                            scores[runs], used, steps, None if curve is None else curve[runs],
                            went))
    if updates is not None and min(updates) < max(updates):
        short = sorted({u for u in updates if u < max(updates)})
        notes.append(f"{run_dir}: {sum(u < max(updates) for u in updates)} of {len(updates)} "
                     f"settings stopped at an early rung of successive halving (after "
                     f"{', '.join(map(str, short))} of {max(updates)} updates; each label says "
                     "how far): their scores are from shorter training, and 'all runs' pools "
                     "them with the settings that trained to the end")
    if (summary.get("search") or {}).get("strategy") == "pbt":
        notes.append(f"{run_dir}: a PBT sweep: each member's hyperparameters changed while it "
                     "trained and its learner was copied from better members at exploits "
                     "(hparams.csv, pbt.csv); the labels show its final hyperparameters")
    return groups, notes


def _setting_updates(summary: dict, n: int, last_update: int | None) -> list[int] | None:
    """[N] updates each setting trained, where a sweep's differ (halving: its rungs), from
    summary.json's ranked table, else from its search record at `last_update` (metrics.csv's
    last; None: all trained alike, or no record of it)."""
    ranked = summary.get("ranked")
    if isinstance(ranked, list) and all(isinstance(r, dict) for r in ranked):
        went = {}
        for r in ranked:
            runs, u = r.get("runs"), r.get("updates")
            if isinstance(runs, list) and runs and isinstance(u, int):
                went[min(runs)] = u
        if len(went) == n and len(set(went.values())) > 1:
            return [went[k] for k in sorted(went)]
    search = summary.get("search")
    if is_halving(search) and last_update is not None:
        try:  # a stopped sweep has no ranked table: how far each got, from its rungs
            updates = setting_updates(search, last_update)
        except (KeyError, TypeError, ValueError, IndexError):
            return None
        return updates if len(updates) == n and len(set(updates)) > 1 else None
    return None


def _read_metrics(run_dir: str, ragged: bool = False) -> dict[str, np.ndarray]:
    """metrics.csv through the logger's reader; a damaged or unreadable file is one line."""
    path = os.path.join(run_dir, "metrics.csv")
    fix = ("move it away (e.g. to metrics.csv.damaged) to report this run without its "
           "sample-efficiency curve")
    try:
        return read_metrics_csv(run_dir, ragged)
    except UsageError as e:
        raise UsageError(f"{e}; {fix}") from None
    except OSError as e:
        raise UsageError(f"cannot read '{path}' ({e.strerror}); {fix}") from None


def _env_id(run_dir: str, summary: dict | None) -> str:
    """config.yaml's env first (what the run trained on); summary.json's when it is unreadable."""
    config_path = os.path.join(run_dir, "config.yaml")
    env_id = None
    if os.path.exists(config_path):
        try:
            with open(config_path, encoding="utf-8") as f:
                env_id = (yaml.safe_load(f) or {}).get("env_id")
        except (OSError, UnicodeDecodeError, yaml.YAMLError, AttributeError):
            env_id = None
    if env_id is None and summary is not None:
        env_id = summary.get("env_id")
    if not isinstance(env_id, str):
        raise UsageError(f"'{run_dir}' has no readable config.yaml or summary.json naming its "
                         "env; is it a jaxppo run directory?")
    return env_id


__all__ = ["SOURCES", "Group", "eval_scores", "read_run"]
