"""The append-only CSVs of a run directory held against the checkpoint before a resume writes
anything: metrics.csv (a row per update per run), and a PBT sweep's pbt.csv (a row per exploit;
the checkpoint counts each member's) and hparams.csv (every member's hyperparameters at update 0
and each PBT update). One scan (`scan`) finds, for each, the rows a resume keeps, those it lacks
or holds twice and those no run wrote, driven by the file's description (`CsvLog`); what is
lost for good is recorded (metrics.csv's `log_gaps`, PBT's `log_missing`: in the checkpoint and
summary.json, never silently forgotten), and a log missing rows is refused in one line unless
the resume is told to repair it. Notes for the user are returned, not printed."""

from __future__ import annotations

import csv
import io
import os
from typing import NamedTuple

from jaxppo.errors import UsageError
from jaxppo.rundir import names
from jaxppo.rundir.files import free_name
from jaxppo.rundir.metrics_csv import CSV_HEADER, parse_metrics_log

VERSION = 1  # pbt.csv's and hparams.csv's layout (metrics.csv's: rundir/metrics_csv.VERSION)


class CsvLog(NamedTuple):
    """What an append-only CSV is, as its audit needs it: which cells are integers, what its
    key's second column counts, and which updates a row may be at."""

    name: str
    numeric: int  # leading integer cells: the key (update, owner) and any index after it
    refs: tuple = ()  # more cells that name an owner (pbt.csv's parent)
    at_zero: bool = False  # a row at update 0 belongs (hparams.csv's starting values)
    counted: bool = False  # the checkpoint counts its rows per owner (pbt.csv's exploits)


METRICS_LOG = CsvLog(names.METRICS, 2)
PBT_LOG = CsvLog(names.PBT, 3, refs=(2,), counted=True)
HPARAMS_LOG = CsvLog(names.HPARAMS, 2, at_zero=True)


class Scan(NamedTuple):
    """A log's rows read against the checkpoint (`scan`)."""

    kept: dict  # (update, owner) -> the first row with that key, up to the checkpoint
    conflicts: list  # keys with two different rows (the first is kept)
    alien: int  # rows no run of the checkpoint wrote: dropped
    extra: int  # a counted log's rows beyond the checkpoint's count for their owner


def scan(log: CsvLog, rows: list, last: int, owners: int, updates=None,
         limit: dict | None = None) -> Scan:
    """`rows` (cells as text: lists in the header's order, or dicts by column) as a resume to
    update `last` keeps them: identical copies collapse to one, rows past `last` (logged before
    a hard stop) are left to be written again, rows of no owner (`owners`: runs or members)
    or at an update the log never writes (`updates`: the PBT updates; None: any from 1) go.
    `limit` (a counted log's): the rows the checkpoint counts per owner."""
    kept: dict = {}
    conflicts, alien, extra = [], 0, 0
    counts = dict.fromkeys(range(owners), 0)
    allowed = None if updates is None else {*updates, *([0] if log.at_zero else [])}
    for r in rows:
        cells = r if isinstance(r, list) else [r["update"], r["run"]]
        key = (int(cells[0]), int(cells[1]))
        if key[0] > last:
            continue
        if key[1] >= owners or (key[0] < 1 if allowed is None else key[0] not in allowed) \
                or any(int(cells[i]) >= owners for i in log.refs):
            alien += 1
        elif key not in kept:
            if limit is not None and counts[key[1]] >= limit[key[1]]:
                extra += 1
                continue
            kept[key] = r
            counts[key[1]] += 1
        elif _numbers(kept[key]) != _numbers(r) and key not in conflicts:
            conflicts.append(key)
    return Scan(kept, conflicts, alien, extra)


def _numbers(row) -> tuple:
    """A row's cells compared as numbers (`1` is `1.0`; a NaN cell equals a NaN cell)."""
    cells = row.values() if isinstance(row, dict) else row
    return tuple(repr(float(c)) if c else "" for c in cells)


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
    found = scan(METRICS_LOG, rows, last, num_runs)
    seen = found.kept
    missing = _expected(last, num_runs, run_ends) - set(seen)
    extra = [k for k in (rows[0] if rows else {}) if k not in CSV_HEADER]
    return LogAudit([seen[k] for k in sorted(seen)], missing, found.conflicts, found.alien,
                    extra)


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
    path = os.path.join(run_dir, names.METRICS)
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


def csv_text(rows: list[list]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\r\n").writerows(rows)
    return out.getvalue()


def gaps_from(record: dict | None) -> dict:
    """A checkpoint's `log_missing` record as `PBTController.log_missing`."""
    record = record or {}
    out = {}
    if record.get(names.PBT):
        out[names.PBT] = {int(m): int(n) for m, n in record[names.PBT].items()}
    if record.get(names.HPARAMS):
        out[names.HPARAMS] = {(int(u), int(m)) for u, m in record[names.HPARAMS]}
    return out


def gaps_record(gaps: dict) -> dict:
    """`log_missing` as JSON: pbt.csv's missing exploit rows per member, hparams.csv's
    missing (update, member) rows."""
    out = {}
    if gaps.get(names.PBT):
        out[names.PBT] = {str(m): int(n) for m, n in sorted(gaps[names.PBT].items())}
    if gaps.get(names.HPARAMS):
        out[names.HPARAMS] = [[u, m] for u, m in sorted(gaps[names.HPARAMS])]
    return out


class PBTLogAudit(NamedTuple):
    """pbt.csv and hparams.csv read against a checkpoint (`audit_pbt_logs`)."""

    rows: dict[str, list[list[str]]]  # by file: the rows a resume keeps, in order
    missing: dict  # `PBTController.log_missing`: the known gaps and any new ones
    copies: list[tuple[str, str]]  # (file, where its damaged self is kept) to copy first
    notes: list[str]


def _read_rows(path: str, header: list[str], numeric: int) -> tuple[list[list[str]], int, bool]:
    """A log's well-formed rows (cells as text), how many lines were not (cut short, not
    UTF-8, not numbers where numbers go) apart from a last line a kill cut mid-write, and
    whether its header is jaxppo's. `numeric`: the leading integer cells (update, member, ...)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise UsageError(f"cannot read '{path}' ({e.strerror}); restore it, or move it away to "
                         "continue without its rows (they are then recorded as missing)") from None
    lines = data.split(b"\n")
    cut_last = bool(lines[-1])  # no newline after it: a write a kill stopped
    if not cut_last:
        lines.pop()
    rows, bad, header_ok = [], 0, False
    for i, raw in enumerate(lines):
        try:
            cells = next(csv.reader([raw.decode("utf-8").rstrip("\r")]), [])
        except (UnicodeDecodeError, csv.Error):
            cells = None
        if i == 0:
            header_ok = cells == header
            if header_ok or cells is None or not cells or not _is_row(cells, header, numeric):
                continue
        if cells is not None and _is_row(cells, header, numeric):
            rows.append(cells)
        elif not (cut_last and i == len(lines) - 1) and raw.strip():
            bad += 1
    return rows, bad, header_ok


def _is_row(cells: list[str], header: list[str], numeric: int) -> bool:
    if len(cells) != len(header):
        return False
    try:
        if any(int(c) < 0 for c in cells[:numeric]):
            return False
        for c in cells[numeric:]:
            if c:
                float(c)
    except ValueError:
        return False
    return True


def audit_pbt_logs(run_dir: str, update: int, saved: dict, pop: int,
                   pbt_updates: list[int], headers: dict[str, list[str]],
                   repair: bool) -> PBTLogAudit:
    """What a resume from the checkpoint at `update` (its controller state `saved`) keeps of
    pbt.csv and hparams.csv of `pop` members (`headers`: their columns by file). The checkpoint
    accounts for every member's hyperparameters at update 0 and at each of `pbt_updates`
    (hparams.csv), and
    for each member's exploits (`saved["exploits"]`: pbt.csv's rows per member), apart from the
    rows an earlier repair recorded as lost (`saved["log_missing"]`). Rows past `update`
    (logged before a hard stop) go; a missing file starts afresh, its rows recorded as
    missing, with a note. Rows missing, or two different rows for one update and member, are
    refused (UsageError, one line) unless `repair`: every good row is kept (the first of two
    that differ) and the missing ones recorded. Lines that are not rows (cut short, not text)
    are dropped with the file kept as `<file>.damaged`, and a note."""
    known = gaps_from(saved.get("log_missing"))
    exploits = [int(x) for x in saved.get("exploits", [0] * pop)]
    rows_out, copies, notes, problems, fixed = {}, [], [], [], []
    missing = {names.PBT: dict(known.get(names.PBT, {})),
               names.HPARAMS: set(known.get(names.HPARAMS, set()))}
    for log in (PBT_LOG, HPARAMS_LOG):
        name, header = log.name, headers[log.name]
        path = os.path.join(run_dir, name)
        # what the checkpoint says the file holds: rows per member, or each (update, member)
        want = ({m: exploits[m] - missing[name].get(m, 0) for m in range(pop)} if log.counted
                else {(u, m) for u in (0, *pbt_updates) for m in range(pop)} - missing[name])
        if not os.path.lexists(path):
            lost = _lost(log, want, {}, pop)
            _record(log, missing[name], lost)
            rows_out[name] = []
            if lost:
                notes.append(f"'{path}' is missing; a fresh one starts at update {update + 1} "
                             f"and summary.json (pbt.log_missing) records the "
                             f"{_lost_text(log, lost, want, fresh=True)} it lacks")
            continue
        rows, bad, header_ok = _read_rows(path, header, log.numeric)
        found = scan(log, rows, update, pop, pbt_updates, want if log.counted else None)
        lost = _lost(log, want, found.kept, pop)
        lost_text = f"lacks {_lost_text(log, lost, want)}" if lost else ""
        conflicts = found.conflicts
        pairs = ", ".join(f"{u} {m}" for u, m in conflicts[:3])
        clash = (f"two different rows for the same update and member (update, member: {pairs}"
                 f"{', ...' if len(conflicts) > 3 else ''})" if conflicts else "")
        if found.extra:
            clash = "; ".join(filter(None, [clash, f"{found.extra} exploit row(s) more than the "
                                                   "checkpoint counts"]))
        if (lost or clash) and not repair:
            held = f"holds {clash}" if clash else ""
            problems.append(f"'{path}' is damaged: it {' and '.join(filter(None, [lost_text, held]))}")
            continue
        drops = []
        if bad:
            drops.append(f"dropped {bad} line(s) that are not rows (cut short or not text)")
        if not header_ok:
            drops.append("wrote its header again")
        if found.alien:
            drops.append(f"dropped {found.alien} row(s) no PBT step of this run wrote")
        if clash:
            drops.append(f"kept the first of {clash}")
        if lost:
            drops.append(f"recorded what it {lost_text} in summary.json (pbt.log_missing)")
            _record(log, missing[name], lost)
        if drops:
            copy = free_name(path + ".damaged")
            copies.append((path, copy))
            fixed.append(f"'{path}' was repaired: {'; '.join(drops)}; the file as it was is "
                         f"kept as '{copy}'")
        rows_out[name] = [r for r in rows if found.kept.get((int(r[0]), int(r[1]))) is r]
    if problems:
        raise UsageError(f"{'; '.join(problems)} (checkpoint at update {update}); resume with "
                         "--repair-log (Python: repair_log=True) to keep the good rows and "
                         "record the missing ones, which cannot be recreated, in summary.json, "
                         "or move the file away to start it afresh (its rows then recorded as "
                         "missing)")
    return PBTLogAudit(rows_out, {k: v for k, v in missing.items() if v}, copies,
                       notes + fixed)


def _lost(log: CsvLog, want, kept: dict, pop: int):
    """What the checkpoint accounts for that the file lacks: per member (a counted log's),
    else the (update, member) keys."""
    if not log.counted:
        return want - set(kept)
    counts = dict.fromkeys(range(pop), 0)
    for _, m in kept:
        counts[m] += 1
    return {m: want[m] - counts[m] for m in range(pop) if counts[m] < want[m]}


def _lost_text(log: CsvLog, lost, want, fresh: bool = False) -> str:
    if log.counted:
        n = sum(lost.values())
        return (f"{n} exploit row(s)" if fresh else f"{n} of the checkpoint's "
                f"{sum(want.values())} exploit rows (member(s) {_short(sorted(lost))})")
    updates = sorted({u for u, _ in lost})
    return (f"{len(lost)} member rows of {len(updates)} PBT update(s)" if fresh
            else f"{len(lost)} member row(s) (update(s) {_short(updates)})")


def _record(log: CsvLog, missing, lost) -> None:
    """Add `lost` to a log's record of rows missing for good (`log_missing`)."""
    if log.counted:
        for m, n in lost.items():
            missing[m] = missing.get(m, 0) + n
    else:
        missing |= lost


def _short(values: list[int]) -> str:
    """At most 6 values named, so a line stays a line."""
    return ", ".join(map(str, values[:6])) + (f", ... ({len(values)} in all)"
                                               if len(values) > 6 else "")
