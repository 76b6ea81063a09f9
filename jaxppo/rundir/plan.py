"""`static_sweep.json`, a static sweep's plan: its config, settings, seeds and groups (one run
directory each), written once at the sweep's start with a checksum, read by `--resume`. The
sweep itself is `search/static_sweep.py`.

Versions: 1 had no `sha256` (read as it is: nothing to check); 2 holds the checksum of its
canonical JSON, so an edit is refused.
"""

from __future__ import annotations

import hashlib
import json
import os

from jaxppo.errors import UsageError
from jaxppo.rundir import names
from jaxppo.rundir.files import write_atomic
from jaxppo.rundir.sweep_csv import sweep_csv_problem

FILE = names.PLAN
VERSION = 2


def is_static_sweep(path: str | os.PathLike) -> bool:
    """A static sweep's directory (it holds the plan, not a checkpoint)."""
    return isinstance(path, str | os.PathLike) and os.path.isfile(os.path.join(path, FILE))


def write_plan(run_dir: str, plan: dict) -> None:
    """The plan, its checksum added, as `run_dir`'s static_sweep.json."""
    plan = {**plan, "sha256": plan_digest(plan)}
    write_atomic(os.path.join(run_dir, FILE), json.dumps(plan, indent=2))


def load_plan(path: str):
    """The plan's JSON as data (checked by the caller, which knows what a plan must hold).

    Raises:
      OSError, ValueError: the file cannot be read or is not JSON.
    """
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def checksum_fails(plan) -> bool:
    """A plan whose checksum fails: edited (one from before plans had one: not)."""
    return isinstance(plan, dict) and plan.get("sha256") not in (None, plan_digest(plan))


def edited_plan(plan_path: str, what: str = "its checksum fails") -> UsageError:
    return UsageError(f"'{plan_path}' was edited since the sweep started ({what}); restore it: "
                      "a sweep goes on with the plan it started with (each group's config.yaml "
                      "holds what that group trained on)")


def plan_digest(plan: dict) -> str:
    """The plan's checksum: SHA-256 of its canonical JSON, the checksum itself left out."""
    body = {k: v for k, v in plan.items() if k != "sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode("utf-8")).hexdigest()


def table_problems(run_dir: str, settings: list[dict]) -> list[tuple[str, str]]:
    """What a finished static sweep's summary.json and sweep.csv lack: (file, why; "" when
    it is missing). Both are written from the groups' results, so a resume rebuilds them."""
    problems = []
    path = os.path.join(run_dir, names.SUMMARY)
    try:
        with open(path, encoding="utf-8") as f:
            s = json.load(f)
        if not isinstance(s, dict):
            problems.append((names.SUMMARY, "it is not a JSON object"))
        elif s.get("status") not in ("finished", "diverged"):
            problems.append((names.SUMMARY, "it says the sweep did not finish"))
        elif not isinstance(s.get("ranked"), list) or len(s["ranked"]) != len(settings):
            problems.append((names.SUMMARY, f"it does not rank its {len(settings)} settings"))
    except FileNotFoundError:
        problems.append((names.SUMMARY, ""))
    except (OSError, ValueError) as e:
        problems.append((names.SUMMARY, f"it is not JSON: {e}"))
    path = os.path.join(run_dir, names.SWEEP)
    if not os.path.isfile(path):
        problems.append((names.SWEEP, ""))
    else:
        why = sweep_csv_problem(path, settings, grouped=True)
        problems += [(names.SWEEP, why)] if why else []
    return problems
