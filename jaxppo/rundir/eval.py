"""`eval.json`, what `jaxppo eval` played: every agent's returns on fixed episodes, written
whole and read back without trust (a file another program wrote, or an older jaxppo's, is one
line naming the fix).

Versions, each read as it is: 1 held `mean_per_run` only; 2 added `returns` and `cut_off`
(episodes still running at the step cap, left out of a score); 3 added `diverged_runs`,
`updates_per_run` and `actions` (absent: the reader takes what the checkpoint or summary says).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from jaxppo.errors import UsageError
from jaxppo.rundir import names
from jaxppo.writes import write_whole

FILE = names.EVAL
VERSION = 3


def write_eval(path: str, data: dict) -> None:
    """`data` (`EvalResult.to_dict()`) as `path`, whole or not at all."""
    write_whole(path, json.dumps(data, indent=1), FILE)


def load_json(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise UsageError(f"cannot read '{path}' ({getattr(e, 'strerror', None) or e}); restore "
                         f"it or move it away") from None


def as_scores(values, what: str) -> np.ndarray:
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
    data = load_json(path)
    what = f"'{path}'"
    if not isinstance(data, dict):
        raise UsageError(f"{what} is not an eval.json; re-run jaxppo eval")
    returns = data.get("returns")
    if isinstance(returns, list) and returns and all(isinstance(r, list) for r in returns):
        cut = data.get("cut_off")
        rows = []
        for i, r in enumerate(returns):
            x = as_scores(r, f"{what} returns[{i}]")
            if isinstance(cut, list) and i < len(cut) and isinstance(cut[i], list) \
                    and len(cut[i]) == len(x):
                x[np.asarray(cut[i], bool)] = np.nan
            rows.append(np.nanmean(x) if np.isfinite(x).any() else np.nan)
        scores = np.array(rows, float)
    elif "mean_per_run" in data:
        scores = as_scores(data["mean_per_run"], f"{what} mean_per_run")
    else:
        raise UsageError(f"{what} holds no per-seed returns; re-run jaxppo eval")
    cut_total = None
    if isinstance(data.get("cut_off_per_run"), list):
        cut_total = int(sum(c for c in data["cut_off_per_run"] if isinstance(c, (int, float))))
    diverged = data.get("diverged_runs")  # absent in an eval.json from before it was written
    if diverged is not None:
        diverged = run_list(diverged, len(scores), f"{what} diverged_runs")
    per_run = data.get("updates_per_run")
    per_run = per_run if isinstance(per_run, list) and len(per_run) == len(scores) and all(
        isinstance(u, int) for u in per_run) else None
    actions = data.get("actions") if data.get("actions") in ("greedy", "sampled") else {
        True: "greedy", False: "sampled"}.get(data.get("deterministic"))
    return scores, {"episodes": data.get("episodes"), "update": data.get("update"),
                    "actions": actions,
                    "env_id": data.get("env_id"), "cut_off": cut_total, "diverged": diverged,
                    "updates_per_run": per_run}


def run_list(values, num_runs: int, what: str) -> list[int]:
    """A JSON list of run indices below `num_runs`, or one line naming the file."""
    if not isinstance(values, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) and 0 <= v < num_runs for v in values):
        raise UsageError(f"{what} is not a list of this run's agents (0..{num_runs - 1}); it "
                         "was not written by this jaxppo: re-run the command that writes it")
    return sorted(set(values))
