"""`summary.json`, how a run ended: strict JSON (NaN/Inf as null), read back and checked before
it is trusted. Its schema is `run.summary.build_summary`; a summary from before a key existed
lacks it, and every reader takes the key's absence as what such a run meant."""

from __future__ import annotations

import json
import math
import os
from typing import Any

from jaxppo.rundir import names
from jaxppo.rundir.files import write_atomic
from jaxppo.rundir.record import is_int, is_number

FILE = names.SUMMARY
VERSION = 1
"""The layout's version: 1 (every summary.json jaxppo has written; keys are only added)."""

REQUIRED = ("env_id", "num_runs", "status", "final_return", "env_steps")
"""The keys without which a finished run's summary.json is rebuilt from its checkpoint."""


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
    if not is_int(runs) or runs < 1 or (num_runs is not None and runs != num_runs):
        return f"its num_runs is {runs!r}, not the checkpoint's {num_runs or 'count'}"
    returns = summary["final_return"]
    if (not isinstance(returns, list) or len(returns) != runs
            or not all(r is None or is_number(r) for r in returns)):
        return f"its final_return is not one number (or null) for each of its {runs} runs"
    steps = summary["env_steps"]
    if not is_int(steps) or steps < 0 or (env_steps is not None and steps != env_steps):
        return f"its env_steps is {steps!r}, not the run's {env_steps or 'count'}"
    diverged = summary.get("diverged_runs", [])
    if not isinstance(diverged, list) or not all(is_int(r) and 0 <= r < runs
                                                 for r in diverged):
        return "its diverged_runs is not a list of its runs"
    if not all(summary.get(k) is None or is_number(summary[k])
               for k in ("wall_s", "compile_s")):
        return "its wall_s or compile_s is not a number"
    return ""


def summary_stats(run_dir: str, update: int) -> dict | None:
    """The running account of a checkpoint written before checkpoints carried it (0.1): its
    summary.json's, if that is readable."""
    try:
        with open(os.path.join(run_dir, FILE), encoding="utf-8") as f:
            s = json.load(f)
        return {"update": update, "episodes": s["episodes_per_run"],
                "final_return": s["final_return"], "solved": s.get("solved"),
                "wall_s": s["wall_s"], "run_s": 0.0, "steps_timed": 0}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_summary(run_dir: str, summary: dict) -> None:
    """`summary.json`: strict JSON, a NaN/Inf written as null."""
    write_atomic(os.path.join(run_dir, FILE),
                 json.dumps(json_safe(summary), indent=2, allow_nan=False))


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


def read_summary(run_dir: str) -> dict | None:
    """`run_dir`'s summary.json as a dict; None where there is none or it is not a JSON object."""
    try:
        with open(os.path.join(run_dir, FILE), encoding="utf-8") as f:
            s = json.load(f)
    except (OSError, ValueError):
        return None
    return s if isinstance(s, dict) else None
