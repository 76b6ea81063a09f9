"""metrics.csv held against a checkpoint before a resume writes anything: which (update,
run) rows it must hold, which it lacks or holds twice, and the record of rows lost for good
(`log_gaps`: kept in the checkpoint and summary.json, never silently forgotten). Pure
functions on parsed rows, but `check_metrics_log`, which reads the file; notes for the user
are returned, not printed."""

from __future__ import annotations

import csv
import io
import os
from typing import NamedTuple

from jaxppo.errors import UsageError
from jaxppo.run.logs.metrics_csv import CSV_HEADER, parse_metrics_log


def as_ranges(updates) -> list[tuple[int, int]]:
    """Sorted update numbers as (first, last) ranges: [3, 4, 5, 9] -> [(3, 5), (9, 9)]."""
    out: list[tuple[int, int]] = []
    for u in sorted(set(updates)):
        if out and u == out[-1][1] + 1:
            out[-1] = (out[-1][0], u)
        else:
            out.append((u, u))
    return out


def ranges_text(ranges) -> str:
    """(first, last) ranges as text: `1-40, 45`."""
    return ", ".join(f"{a}-{b}" if b > a else f"{a}" for a, b in ranges) or "none"


class LogAudit(NamedTuple):
    """metrics.csv read against a checkpoint (see `audit_log`)."""

    rows: list[dict]  # one row per (update, run) present, sorted: what a resume keeps
    missing: set  # (update, run) pairs of 1..last x runs with no row
    conflicts: list  # (update, run) pairs with two different rows (the first is kept)
    alien: int  # rows for a run that does not exist (or update 0): dropped
    extra_columns: list  # columns jaxppo does not write: dropped


def _values(row: dict) -> tuple:
    """A row's numbers, compared as numbers (`1` is `1.0`; a NaN cell equals a NaN cell)."""
    return tuple(v and repr(float(v)) for v in row.values())


def _expected(last: int, num_runs: int, run_ends=None) -> set:
    """The (update, run) rows of updates 1..`last`; with `run_ends` [R], a run's only up to
    its own end (a halving sweep's stopped agents log nothing after their rung)."""
    ends = [last] * num_runs if run_ends is None else [min(last, int(e)) for e in run_ends]
    return {(u, r) for r in range(num_runs) for u in range(1, ends[r] + 1)}


def audit_log(rows: list[dict], last: int, num_runs: int, run_ends=None) -> LogAudit:
    """`parse_metrics_log`'s rows as a resume to update `last` keeps them: identical copies
    of a row collapse to one (nothing is lost), rows past `last` (logged before a hard stop)
    go, and so do rows no run of the checkpoint wrote; what is left is sorted. `run_ends`:
    see `_expected`."""
    seen: dict[tuple[int, int], dict] = {}
    conflicts, alien = [], 0
    for r in rows:
        key = (int(r["update"]), int(r["run"]))
        if key[0] < 1 or key[1] >= num_runs:
            alien += 1
        elif key[0] <= last and key not in seen:
            seen[key] = r
        elif key[0] <= last and _values(seen[key]) != _values(r) and key not in conflicts:
            conflicts.append(key)
    missing = _expected(last, num_runs, run_ends) - set(seen)
    extra = [k for k in (rows[0] if rows else {}) if k not in CSV_HEADER]
    return LogAudit([seen[k] for k in sorted(seen)], missing, conflicts, alien, extra)


def encode_gaps(missing, num_runs: int) -> list[tuple]:
    """Missing (update, run) pairs as the checkpoint records them: (first, last) ranges of
    updates with no run's row (as before 0.3), then (first, last, run) ranges of one run's."""
    runs: dict[int, set] = {}
    for u, r in missing:
        runs.setdefault(u, set()).add(r)
    whole = [u for u, rs in runs.items() if len(rs) == num_runs]
    part = [(r, u) for u, rs in runs.items() if len(rs) < num_runs for r in rs]
    return [*as_ranges(whole), *((a, b, r) for r in sorted({r for r, _ in part})
                                 for a, b in as_ranges(u for q, u in part if q == r))]


def decode_gaps(gaps, num_runs: int) -> set:
    """`encode_gaps`' record back as (update, run) pairs."""
    out = set()
    for g in gaps:
        runs = range(num_runs) if len(g) == 2 else [int(g[2])]
        out |= {(u, r) for u in range(int(g[0]), int(g[1]) + 1) for r in runs}
    return out


def gaps_summary(gaps, num_runs: int) -> dict:
    """summary.json's record of the rows metrics.csv lacks for good: `metrics_missing_updates`
    (updates missing any run's row) and, with several runs, `metrics_missing_by_run`."""
    missing = decode_gaps(gaps, num_runs)
    if not missing:
        return {}
    out = {"metrics_missing_updates": [list(g) for g in as_ranges(u for u, _ in missing)]}
    if num_runs > 1:
        out["metrics_missing_by_run"] = {
            str(r): [list(g) for g in as_ranges(u for u, q in missing if q == r)]
            for r in sorted({r for _, r in missing})}
    return out


def _missing_text(missing, num_runs: int) -> str:
    """`5 missing: 41-45`, naming the runs of an update that lacks only some runs' rows."""
    updates = as_ranges(u for u, _ in missing)
    text = f"{sum(b - a + 1 for a, b in updates)} missing: {ranges_text(updates)}"
    part = [(u, r) for u, r in missing if any((u, q) not in missing for q in range(num_runs))]
    if part:
        text += "; only some runs' rows: " + ", ".join(
            f"run {r} at {ranges_text(as_ranges(u for u, q in part if q == r))}"
            for r in sorted({r for _, r in part}))
    return text


def check_metrics_log(run_dir: str, update: int, num_runs: int, known_gaps=(),
                      repair: bool = False, run_ends=None
                      ) -> tuple[list[tuple], list[str], list[str]]:
    """Before a resume writes anything: does metrics.csv hold every update 1..`update` of the
    checkpoint (one row per run), apart from `known_gaps` (what an earlier repair recorded,
    `encode_gaps`)? Returns the gaps to record from now on (the known ones and any new ones)
    what a resume will drop from the file (worth keeping a copy of; empty when nothing), and
    notes for the user.

    A log with rows missing, or two different rows for one update and run, is refused
    (UsageError, one line saying what) unless `repair`: then every good row is kept (the first
    of two that differ) and the missing ones recorded, since they cannot be recreated. Rows
    for runs that do not exist and columns jaxppo does not write are dropped with a copy kept
    (no refusal: nothing of the run is lost). A missing metrics.csv starts a fresh one, with a
    note, the gap recorded."""
    path = os.path.join(run_dir, "metrics.csv")
    known = decode_gaps(known_gaps, num_runs)
    if not os.path.lexists(path):
        missing = _expected(update, num_runs, run_ends) - known
        notes = [f"'{path}' is missing; a fresh one starts at update {update + 1} and "
                 f"summary.json records updates {ranges_text(as_ranges(u for u, _ in missing))}"
                 " as missing from it"] if missing else []
        return encode_gaps(known | missing, num_runs), [], notes
    try:
        rows, problem = parse_metrics_log(path)
    except OSError as e:
        raise UsageError(f"cannot read '{path}' ({e.strerror}); restore it or move it away "
                         "to start a fresh log") from None
    audit = audit_log(rows, update, num_runs, run_ends)
    missing = audit.missing - known
    drops = []
    if audit.alien:
        drops.append(f"dropped {audit.alien} row(s) for runs that do not exist (run >= {num_runs})")
    if audit.extra_columns:
        drops.append(f"dropped columns jaxppo does not write ({', '.join(audit.extra_columns)})")
    conflict = ""
    if audit.conflicts:
        conflict = ("two different rows for the same update and run (update, run: "
                    f"{', '.join(f'{u} {r}' for u, r in audit.conflicts[:3])}"
                    f"{', ...' if len(audit.conflicts) > 3 else ''})")
    if not missing and not conflict:
        return encode_gaps(known, num_runs), drops, []
    if not repair:
        whole = as_ranges(u for u in range(1, update + 1)
                          if not any((u, r) in audit.missing for r in range(num_runs)))
        what = f"is damaged ({problem}) and " if problem else ""
        covered = f"updates {ranges_text(whole)}" if whole else "no update"
        parts = []
        if missing:
            parts.append(f"covers {covered} of the checkpoint's {update} "
                         f"({_missing_text(missing, num_runs)})")
        if conflict:
            parts.append(f"holds {conflict}")
        raise UsageError(
            f"'{path}' {what}{' and '.join(parts)}; resume with --repair-log (Python: "
            "repair_log=True) to keep its good rows (the first of two that differ) and record the "
            "missing ones, which cannot be recreated, or move the file away to start a fresh log")
    if conflict:
        drops.append(f"kept the first of {conflict}")
    if missing:
        drops.append(f"recorded the rows it lacks ({_missing_text(missing, num_runs)}) in "
                     "summary.json")
    return encode_gaps(known | missing, num_runs), drops, []


def kept_rows(path: str, start_update: int, num_runs: int) -> str:
    """metrics.csv cut back to the checkpoint's update, as CSV text with today's columns, one
    row per (update, run), sorted: rows after it (logged before a hard stop), rows a kill cut
    short, copies and rows of no run go; older files' missing columns stay empty. (A resume
    has checked before that nothing up to the checkpoint is lost here, or was told to repair.)"""
    rows, _ = parse_metrics_log(path)
    out = io.StringIO()
    w = csv.DictWriter(out, CSV_HEADER, restval="", extrasaction="ignore", lineterminator="\r\n")
    w.writeheader()
    w.writerows(audit_log(rows, start_update, num_runs).rows)
    return out.getvalue()
