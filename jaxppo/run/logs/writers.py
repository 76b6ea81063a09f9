"""Run-directory logging, as callbacks: `metrics.csv`, TensorBoard (CleanRL's tag names),
Weights & Biases (optional), and `summary.json` + `curve.png` at the end.

CSV and TensorBoard writes run on a writer thread each, overlapping the next chunk's compute
(XLA releases the GIL while it runs); a failed write (disk full, ...) is re-raised on the main
thread at the next chunk, so it stops the run loudly instead of being lost.

Logged per update. `episodic_return` / `episodic_length` are written only for updates in which
an episode ended (CleanRL's rule; an empty CSV cell otherwise), never a stale repeat.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import queue
import sys
import threading
from typing import Any, NamedTuple

import numpy as np
import yaml

from jaxppo.config import PPOConfig
from jaxppo.core.train import ENV_METRIC_PREFIX, METRIC_NAMES
from jaxppo.errors import UsageError
from jaxppo.plots import plot_curve
from jaxppo.run.callbacks import Callback, ChunkEvent, RunInfo, RunResult, setting_label
from jaxppo.run.files import write_atomic

TB_TAGS = {
    "episodic_return": "charts/episodic_return",
    "episodic_length": "charts/episodic_length",
    "episodes": "charts/episodes",
    "learning_rate": "charts/learning_rate",
    "policy_loss": "losses/policy_loss",
    "value_loss": "losses/value_loss",
    "entropy": "losses/entropy",
    "approx_kl": "losses/approx_kl",
    "old_approx_kl": "losses/old_approx_kl",
    "clipfrac": "losses/clipfrac",
    "explained_variance": "losses/explained_variance",
    "grad_norm": "losses/grad_norm",
    "minibatch_fraction": "losses/minibatch_fraction",
}
EPISODE_METRICS = ("episodic_return", "episodic_length")  # only where an episode ended
CSV_METRICS = tuple(k for k in METRIC_NAMES if k != "env_steps")
CSV_HEADER = ["update", "run", "env_steps", "wall_s", *CSV_METRICS]


def write_config(run_dir: str, config: PPOConfig) -> None:
    write_atomic(os.path.join(run_dir, "config.yaml"),
                 yaml.safe_dump(config.to_dict(), sort_keys=False))


def import_tensorboardx():
    """Import tensorboardX without torch. Where torch is installed, tensorboardX imports it
    (~1 s) only to accept torch tensors, which jaxppo never logs; that second would otherwise
    sit between compiling and the first update of every run."""
    if "tensorboardX" not in sys.modules and "torch" not in sys.modules:
        sys.modules["torch"] = None  # `import torch` raises ImportError during this import
        try:
            import tensorboardX  # noqa: F401
        finally:
            del sys.modules["torch"]
    import tensorboardX

    return tensorboardX


class _Background(Callback):
    """Runs `_write(event)` on a writer thread; errors surface on the main thread."""

    def _start_writer(self) -> None:
        self._queue: queue.Queue = queue.Queue()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                if self._error is None:
                    try:
                        self._write(item)
                    except BaseException as e:  # noqa: BLE001 - re-raised on the main thread
                        self._error = e
            finally:
                self._queue.task_done()

    def flush(self) -> None:
        """Wait until every chunk given so far is written. A failed write raises here: the
        checkpoint about to be saved would otherwise get ahead of the log."""
        if getattr(self, "_thread", None) is not None and self._thread.is_alive():
            self._queue.join()
        self._raise()

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error

    def on_chunk(self, event: ChunkEvent) -> None:
        self._raise()
        self._queue.put(event)

    def on_end(self, result: RunResult) -> None:
        self._queue.put(None)
        self._thread.join()
        self._close()
        self._raise()

    def _write(self, event: ChunkEvent) -> None:
        raise NotImplementedError

    def _close(self) -> None:
        pass


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


def _kept_rows(path: str, start_update: int, num_runs: int) -> str:
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


def check_metrics_log(run_dir: str, update: int, num_runs: int, known_gaps=(),
                      repair: bool = False, run_ends=None) -> tuple[list[tuple], list[str]]:
    """Before a resume writes anything: does metrics.csv hold every update 1..`update` of the
    checkpoint (one row per run), apart from `known_gaps` (what an earlier repair recorded,
    `encode_gaps`)? Returns the gaps to record from now on (the known ones and any new ones)
    and what a resume will drop from the file (worth keeping a copy of; empty when nothing).

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
        if missing:
            print(f"note: '{path}' is missing; a fresh one starts at update {update + 1} and "
                  f"summary.json records updates {ranges_text(as_ranges(u for u, _ in missing))}"
                  " as missing from it", file=sys.stderr)
        return encode_gaps(known | missing, num_runs), []
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
        return encode_gaps(known, num_runs), drops
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
    return encode_gaps(known | missing, num_runs), drops


def _fmt(metric: str, value: float, episodes: float) -> str:
    if metric in EPISODE_METRICS and episodes <= 0:
        return ""
    return f"{value:.6g}"


class CsvLogger(_Background):
    """`metrics.csv`: one row per update per run. A resumed run first cuts the file back to the
    checkpoint's update, so a run stopped hard (kill -9) and resumed has each update once."""

    def on_start(self, info: RunInfo) -> None:
        path = os.path.join(info.run_dir, "metrics.csv")
        if info.start_update > 0 and os.path.exists(path):
            write_atomic(path, _kept_rows(path, info.start_update, info.num_runs))
            self._file = open(path, "a", newline="", encoding="utf-8")
            self._csv = csv.writer(self._file)
        else:
            self._file = open(path, "w", newline="", encoding="utf-8")
            self._csv = csv.writer(self._file)
            self._csv.writerow(CSV_HEADER)
            self._file.flush()
        self._start_writer()

    def _write(self, event: ChunkEvent) -> None:
        m = event.metrics
        R, C = m["episodes"].shape
        runs = range(R) if event.active is None else np.flatnonzero(event.active)
        for j in range(C):
            for r in runs:
                self._csv.writerow([event.first_update + j + 1, r, int(m["env_steps"][r, j]),
                                    f"{event.wall_s:.3f}",
                                    *(_fmt(k, float(m[k][r, j]), m["episodes"][r, j])
                                      for k in CSV_METRICS)])
        self._file.flush()

    def _close(self) -> None:
        self._file.close()


class TensorBoardLogger(_Background):
    """`tb/<run name>/`: one event file per run, CleanRL's tags, x-axis = env steps. A resumed
    run marks its restart step, so TensorBoard hides events a hard stop left after it."""

    def on_start(self, info: RunInfo) -> None:
        tbx = import_tensorboardx()
        from tensorboardX.proto.event_pb2 import Event, SessionLog
        from tensorboardX.proto.summary_pb2 import Summary

        self._summary = Summary
        self.writers = []
        batch = info.config.batch_size
        for name in info.run_names:
            w = tbx.FileWriter(os.path.join(info.run_dir, "tb", name))
            if info.start_update == 0:
                rows = "\n".join(f"|{k}|{v}|" for k, v in info.config.to_dict().items())
                w.add_summary(tbx.summary.text("hyperparameters", f"|param|value|\n|-|-|\n{rows}"))
            else:  # TensorBoard's purge: events at steps >= this one, from earlier, are hidden
                purge = info.start_update * batch + 1
                w.add_event(Event(step=purge, file_version="brain.Event:2"))
                w.add_event(Event(step=purge, session_log=SessionLog(status=SessionLog.START)))
            self.writers.append(w)
        self._start_writer()

    def _write(self, event: ChunkEvent) -> None:
        m = event.metrics
        sps = event.stats.sps_per_run
        C = m["episodes"].shape[1]
        for r, w in enumerate(self.writers):
            if event.active is not None and not event.active[r]:
                continue  # a halving sweep's stopped agent: not stepped, nothing to log
            for j in range(C):
                # One event per update carrying every scalar: ~12x fewer events than add_scalar.
                ended = m["episodes"][r, j] > 0
                values = [self._summary.Value(tag=tag, simple_value=float(m[k][r, j]))
                          for k, tag in TB_TAGS.items() if ended or k not in EPISODE_METRICS]
                if ended:  # the env's own episode metrics (Craftax achievements, ...)
                    values += [self._summary.Value(tag=k, simple_value=float(m[k][r, j]))
                               for k in m if k.startswith(ENV_METRIC_PREFIX)]
                values.append(self._summary.Value(tag="charts/SPS", simple_value=sps))
                w.add_summary(self._summary(value=values), int(m["env_steps"][r, j]))
            w.flush()

    def _close(self) -> None:
        for w in self.writers:
            w.close()


class WandbLogger(Callback):
    """Weights & Biases (`pip install 'jaxppo[wandb]'`), off unless asked for (CleanRL's
    `--track`): one W&B run per jaxppo run, the mean over runs of every metric per update
    under CleanRL's tags, and each run's return as `charts/episodic_return/<run name>`."""

    def __init__(self, project: str = "jaxppo", **init_kwargs):
        try:  # at construction: a missing extra is refused before a run directory exists
            import wandb
        except ImportError:
            raise UsageError("logging to Weights & Biases needs wandb: "
                             "pip install 'jaxppo[wandb]'") from None
        self.wandb, self.project, self.init_kwargs = wandb, project, init_kwargs

    def on_start(self, info: RunInfo) -> None:
        self.run = self.wandb.init(project=self.project, config=info.config.to_dict(),
                                   dir=info.run_dir, resume="allow", **self.init_kwargs)
        self.names = info.run_names

    def on_chunk(self, event: ChunkEvent) -> None:
        m = event.metrics
        stepped = slice(None) if event.active is None else event.active  # not stopped agents
        for j in range(m["episodes"].shape[1]):
            ended = m["episodes"][:, j] > 0
            row = {tag: float(np.mean(m[k][stepped, j])) for k, tag in TB_TAGS.items()
                   if k not in EPISODE_METRICS}
            if ended.any():
                for k in (*EPISODE_METRICS, *(k for k in m if k.startswith(ENV_METRIC_PREFIX))):
                    row[TB_TAGS.get(k, k)] = float(np.mean(m[k][ended, j]))
                for r in np.flatnonzero(ended):
                    row[f"charts/episodic_return/{self.names[r]}"] = float(m["episodic_return"][r, j])
            row["charts/SPS"] = event.sps
            self.run.log(row, step=int(m["env_steps"][0, j]))

    def on_end(self, result: RunResult) -> None:
        self.run.summary.update({k: v for k, v in result.summary.items()
                                 if isinstance(v, (int, float, str))})
        self.run.finish()


class SummaryFile(Callback):
    """`summary.json` (what `RunResult.summary` holds) and `curve.png` (one curve per setting
    in a sweep) at the end of a run."""

    def on_start(self, info: RunInfo) -> None:
        self.info = info

    def on_end(self, result: RunResult) -> None:
        write_summary(self.info.run_dir, result.summary)
        write_curve(self.info, result.summary.get("threshold"))


def write_summary(run_dir: str, summary: dict) -> None:
    """`summary.json`: strict JSON, a NaN/Inf written as null."""
    write_atomic(os.path.join(run_dir, "summary.json"),
                 json.dumps(json_safe(summary), indent=2, allow_nan=False))


def write_curve(info: RunInfo, threshold: float | None) -> None:
    """`curve.png` from the run's metrics.csv (nothing when it holds no rows)."""
    run_dir = info.run_dir
    # a halving sweep's stopped agents have no rows after their rung: their curves end there
    ragged = isinstance(info.search, dict) and info.search.get("strategy") == "halving"
    m = (read_metrics_csv(run_dir, ragged) if os.path.exists(os.path.join(run_dir, "metrics.csv"))
         else {})
    if not m:
        return
    returns = forward_fill(m["episodic_return"], m["episodes"])
    if ragged:
        returns[np.isnan(m["update"])] = np.nan
    groups = None
    if info.settings is not None:
        seeds = info.num_runs // len(info.settings)
        groups = {setting_label(s): list(range(g * seeds, (g + 1) * seeds))
                  for g, s in enumerate(info.settings)}
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


def read_metrics_csv(run_dir: str, ragged: bool = False) -> dict[str, np.ndarray]:
    """metrics.csv back as arrays [R, U] per column (NaN where a cell is empty), the updates
    with a row for every run (`ragged`: every update with a row, NaN where a run has none, as a
    halving sweep's stopped agents). A file that is not jaxppo's log (not UTF-8 text, another
    header) is a UsageError, one line."""
    path = os.path.join(run_dir, "metrics.csv")
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
