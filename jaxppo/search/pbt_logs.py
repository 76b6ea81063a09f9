"""PBT's own logs held against a checkpoint on resume, as `run/logs/audit.py` holds
metrics.csv: `pbt.csv` (one row per exploit; the checkpoint counts each member's) and
`hparams.csv` (every member's hyperparameters at update 0 and each PBT update). What a resume
keeps, what it records as lost (`log_missing`, in the checkpoint and summary.json), and the one
line that refuses a log missing rows unless told to repair it.
"""

from __future__ import annotations

import csv
import io
import os
from typing import Any, NamedTuple

from jaxppo.errors import UsageError
from jaxppo.run.files import free_name


def csv_text(rows: list[list]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\r\n").writerows(rows)
    return out.getvalue()


def gaps_from(record: dict | None) -> dict:
    """A checkpoint's `log_missing` record as `PBTController.log_missing`."""
    record = record or {}
    out = {}
    if record.get("pbt.csv"):
        out["pbt.csv"] = {int(m): int(n) for m, n in record["pbt.csv"].items()}
    if record.get("hparams.csv"):
        out["hparams.csv"] = {(int(u), int(m)) for u, m in record["hparams.csv"]}
    return out


def gaps_record(gaps: dict) -> dict:
    """`log_missing` as JSON: pbt.csv's missing exploit rows per member, hparams.csv's
    missing (update, member) rows."""
    out = {}
    if gaps.get("pbt.csv"):
        out["pbt.csv"] = {str(m): int(n) for m, n in sorted(gaps["pbt.csv"].items())}
    if gaps.get("hparams.csv"):
        out["hparams.csv"] = [[u, m] for u, m in sorted(gaps["hparams.csv"])]
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


def audit_pbt_logs(run_dir: str, update: int, saved: dict, pbt: Any,
                   repair: bool) -> PBTLogAudit:
    """What a resume from the checkpoint at `update` (its controller state `saved`) keeps of
    pbt.csv and hparams.csv. The checkpoint accounts for every member's hyperparameters at
    update 0 and at each PBT update up to `update` (hparams.csv), and for each member's
    exploits (`saved["exploits"]`: pbt.csv's rows per member), apart from the rows an earlier
    repair recorded as lost (`saved["log_missing"]`). Rows past `update` (logged before a hard
    stop) go; a missing file starts afresh, its rows recorded as missing, with a note. Rows
    missing, or two different rows for one update and member, are refused (UsageError, one
    line) unless `repair`: every good row is kept (the first of two that differ) and the
    missing ones recorded. Lines that are not rows (cut short, not text) are dropped with
    the file kept as `<file>.damaged`, and a note."""
    known = gaps_from(saved.get("log_missing"))
    exploits = [int(x) for x in saved.get("exploits", [0] * pbt.population)]
    pop = pbt.population
    pbt_updates = [u for u in range(1, update + 1) if pbt.due(u)]
    headers = pbt.headers()
    rows_out, copies, notes, problems, fixed = {}, [], [], [], []
    missing = {"pbt.csv": dict(known.get("pbt.csv", {})),
               "hparams.csv": set(known.get("hparams.csv", set()))}
    for name, header in headers.items():
        path = os.path.join(run_dir, name)
        numeric = 3 if name == "pbt.csv" else 2
        if name == "hparams.csv":
            want = {(u, m) for u in (0, *pbt_updates) for m in range(pop)} - missing[name]
        else:
            want_count = {m: exploits[m] - missing[name].get(m, 0) for m in range(pop)}
        if not os.path.lexists(path):
            if name == "hparams.csv":
                lost = want
                missing[name] |= lost
                what = f"{len(lost)} member rows of {len({u for u, _ in lost})} PBT update(s)"
            else:
                lost = {m: n for m, n in want_count.items() if n > 0}
                for m, n in lost.items():
                    missing[name][m] = missing[name].get(m, 0) + n
                what = f"{sum(lost.values())} exploit row(s)"
            rows_out[name] = []
            if lost:
                notes.append(f"'{path}' is missing; a fresh one starts at update {update + 1} "
                             f"and summary.json (pbt.log_missing) records the {what} it lacks")
            continue
        rows, bad, header_ok = _read_rows(path, header, numeric)
        seen: dict[tuple[int, int], list[str]] = {}
        conflicts, alien, extra = [], 0, 0
        counts = dict.fromkeys(range(pop), 0)
        for r in rows:
            key = (int(r[0]), int(r[1]))
            if key[0] > update:
                continue  # logged before a hard stop: written again as the run goes on
            if key[1] >= pop or (key[0] not in pbt_updates and (name == "pbt.csv" or key[0])) \
                    or (name == "pbt.csv" and int(r[2]) >= pop):
                alien += 1
            elif key not in seen:
                if name == "pbt.csv" and counts[key[1]] >= want_count[key[1]]:
                    extra += 1
                    continue
                seen[key] = r
                counts[key[1]] += 1
            elif _numbers(seen[key]) != _numbers(r) and key not in conflicts:
                conflicts.append(key)
        if name == "hparams.csv":
            lost = want - set(seen)
            lost_text = (f"lacks {len(lost)} member row(s) (update(s) "
                         f"{_short(sorted({u for u, _ in lost}))})" if lost else "")
        else:
            lost = {m: want_count[m] - counts[m] for m in range(pop) if counts[m] < want_count[m]}
            lost_text = (f"lacks {sum(lost.values())} of the checkpoint's "
                         f"{sum(want_count.values())} exploit rows (member(s) "
                         f"{_short(sorted(lost))})" if lost else "")
        pairs = ", ".join(f"{u} {m}" for u, m in conflicts[:3])
        clash = (f"two different rows for the same update and member (update, member: {pairs}"
                 f"{', ...' if len(conflicts) > 3 else ''})" if conflicts else "")
        if extra:
            clash = "; ".join(filter(None, [clash, f"{extra} exploit row(s) more than the "
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
        if alien:
            drops.append(f"dropped {alien} row(s) no PBT step of this run wrote")
        if clash:
            drops.append(f"kept the first of {clash}")
        if lost:
            drops.append(f"recorded what it {lost_text} in summary.json (pbt.log_missing)")
            if name == "hparams.csv":
                missing[name] |= lost
            else:
                for m, n in lost.items():
                    missing[name][m] = missing[name].get(m, 0) + n
        if drops:
            copy = free_name(path + ".damaged")
            copies.append((path, copy))
            fixed.append(f"'{path}' was repaired: {'; '.join(drops)}; the file as it was is "
                         f"kept as '{copy}'")
        rows_out[name] = [r for r in rows if seen.get((int(r[0]), int(r[1]))) is r]
    if problems:
        raise UsageError(f"{'; '.join(problems)} (checkpoint at update {update}); resume with "
                         "--repair-log (Python: repair_log=True) to keep the good rows and "
                         "record the missing ones, which cannot be recreated, in summary.json, "
                         "or move the file away to start it afresh (its rows then recorded as "
                         "missing)")
    return PBTLogAudit(rows_out, {k: v for k, v in missing.items() if v}, copies,
                       notes + fixed)


def _numbers(row: list[str]) -> tuple:
    """A row's cells compared as numbers (`1` is `1.0`)."""
    return tuple(repr(float(c)) if c else "" for c in row)


def _short(values: list[int]) -> str:
    """At most 6 values named, so a line stays a line."""
    return ", ".join(map(str, values[:6])) + (f", ... ({len(values)} in all)"
                                               if len(values) > 6 else "")
