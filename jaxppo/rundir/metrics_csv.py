"""`metrics.csv`, one row per update per run: its columns and its readers (the writer is
`csv_logger.CsvLogger`).

Logged per update. `episodic_return` / `episodic_length` are written only for updates in which
an episode ended (CleanRL's rule; an empty CSV cell otherwise), never a stale repeat. The
readers never trust the file: a row a kill cut short, bytes that are not text or another
program's header are found and reported, never a traceback.
"""

from __future__ import annotations

import csv
import io
import os

import numpy as np

from jaxppo.core.metrics import METRIC_NAMES
from jaxppo.errors import UsageError
from jaxppo.rundir import names

FILE = names.METRICS
VERSION = 1
"""The columns may grow at the end (`CSV_HEADER`): an older file reads with the columns it has."""

CSV_METRICS = tuple(k for k in METRIC_NAMES if k != "env_steps")
CSV_HEADER = ["update", "run", "env_steps", "wall_s", *CSV_METRICS]
"""The file's columns, in order (a resume cuts the file back to them)."""


def _row_ok(row: dict) -> bool:
    """A whole row as jaxppo writes it: integer update and run, every other cell a number or
    empty (a row a kill cut short, or bytes that are not text, fail this)."""
    if None in row or None in row.values():
        return False
    if not all(row[k].isascii() and row[k].isdigit() for k in ("update", "run")):
        return False
    try:
        for v in row.values():
            if v != "":
                float(v)
    except ValueError:
        return False
    return True


def parse_metrics_log(path: str) -> tuple[list[dict], str | None]:
    """metrics.csv's well-formed rows, and what is wrong with the file as a whole (None when
    nothing): bytes that are not UTF-8 (their rows are dropped, the rest kept) or a header that
    is not jaxppo's (no row can be read). Never raises on the file's content."""
    with open(path, "rb") as f:
        data = f.read()
    problem = None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        text = data.decode("utf-8", "replace")  # U+FFFD spoils only the rows it lands in
        problem = f"it is not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start})"
    lines = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(lines)
    except (StopIteration, csv.Error):
        return [], problem or "it has no header"
    if "update" not in header or "run" not in header or len(set(header)) != len(header):
        return [], problem or f"its header is not jaxppo's ({','.join(header)[:40]!r}...)"
    rows = []
    while True:
        try:
            cells = next(lines)
        except StopIteration:
            break
        except csv.Error:
            continue  # an unparseable line is a damaged row
        row = dict(zip(header, cells, strict=False))
        if len(cells) == len(header) and _row_ok(row):
            rows.append(row)
    return rows, problem


def complete_updates(rows: list[dict], last: int, num_runs: int) -> tuple[list[dict], list[int]]:
    """The rows of updates 1..`last` that have exactly one row per run, and the updates in
    1..`last` that do not (missing, cut short or duplicated)."""
    runs: dict[int, list[int]] = {}
    for r in rows:
        u = int(r["update"])
        if 1 <= u <= last:
            runs.setdefault(u, []).append(int(r["run"]))
    whole = {u for u, rs in runs.items() if sorted(rs) == list(range(num_runs))}
    return ([r for r in rows if int(r["update"]) in whole],
            [u for u in range(1, last + 1) if u not in whole])


def read_metrics_csv(run_dir: str, ragged: bool = False) -> dict[str, np.ndarray]:
    """metrics.csv back as arrays [R, U] per column (NaN where a cell is empty), the updates
    with a row for every run (`ragged`: every update with a row, NaN where a run has none, as a
    halving sweep's stopped agents). A file that is not jaxppo's log (not UTF-8 text, another
    header) is a UsageError, one line."""
    path = os.path.join(run_dir, names.METRICS)
    rows, problem = parse_metrics_log(path)
    if problem:
        raise UsageError(f"'{path}' is not a readable metrics log: {problem}")
    if not rows:
        return {}
    runs = max(int(r["run"]) for r in rows) + 1
    if ragged:
        cells = {(int(r["update"]), int(r["run"])): r for r in rows}
        updates = sorted({u for u, _ in cells})
        return {k: np.array([[float(cells[u, r][k]) if (u, r) in cells and cells[u, r][k] != ""
                              else np.nan for u in updates] for r in range(runs)])
                for k in rows[0]}
    rows, _ = complete_updates(rows, max(int(r["update"]) for r in rows), runs)
    rows.sort(key=lambda r: (int(r["update"]), int(r["run"])))
    if not rows:
        return {}
    return {k: np.array([float(r[k]) if r[k] != "" else np.nan for r in rows]).reshape(-1, runs).T
            for k in rows[0]}


def forward_fill(x: np.ndarray, episodes: np.ndarray) -> np.ndarray:
    """[R, U] returns with each update in which no episode ended (`episodes` [R, U] == 0, an
    empty CSV cell) given the run's previous return (NaN before the first: no return is drawn
    before an episode has ended). A NaN/Inf logged where episodes did end (a run that
    diverged) stays as it is: it is not a return to carry on."""
    out = np.array(x, float)
    for row, ended in zip(out, np.asarray(episodes) > 0, strict=True):
        last = np.nan
        for j, v in enumerate(row):
            if ended[j] or np.isfinite(v):
                last = v
            row[j] = last
    return out


def nonfinite_rows(run_dir: str, num_runs: int, upto: int) -> list[tuple[int, int, float]]:
    """(run, update, `nonfinite_source` code) of each row up to update `upto` that logged a
    NaN/Inf, for runs below `num_runs`; none where there is no log or it cannot be read (the
    checkpoint's parameters then speak alone)."""
    path = os.path.join(run_dir, FILE)
    try:
        rows = parse_metrics_log(path)[0] if os.path.isfile(path) else []
    except OSError:
        return []
    return [(int(r["run"]), int(r["update"]), float(r.get("nonfinite_source") or 0))
            for r in rows if r.get("nonfinite") and float(r["nonfinite"]) > 0
            and int(r["run"]) < num_runs and int(r["update"]) <= upto]
