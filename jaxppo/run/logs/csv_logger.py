"""`metrics.csv`'s writer: one row per update per run, on a thread of its own. A resumed run
first cuts the file back to its checkpoint's update, so a run stopped hard (kill -9) and
resumed has each update once."""

from __future__ import annotations

import csv
import os

import numpy as np

from jaxppo.core.metrics import EPISODE_METRICS
from jaxppo.run.events import ChunkEvent, RunInfo
from jaxppo.run.logs.background import BackgroundWriter
from jaxppo.rundir import names
from jaxppo.rundir.csv_log import kept_rows
from jaxppo.rundir.files import write_atomic
from jaxppo.rundir.metrics_csv import CSV_HEADER, CSV_METRICS


def _fmt(metric: str, value: float, episodes: float) -> str:
    if metric in EPISODE_METRICS and episodes <= 0:
        return ""
    return f"{value:.6g}"


class CsvLogger(BackgroundWriter):
    """`metrics.csv`: one row per update per run. A resumed run first cuts the file back to the
    checkpoint's update, so a run stopped hard (kill -9) and resumed has each update once.

    Columns: `update` (from 1), `run` (the index in the runs axis), `env_steps`, `wall_s`,
    then every metric (`jaxppo.core.metrics.METRICS`; the
    [metrics table](../../how-to/logging.md) lists them). `episodic_return` and
    `episodic_length` are written only for updates in which an episode ended (CleanRL's rule;
    an empty cell otherwise), never a stale repeat. A halving sweep's stopped agents get no
    rows. Rows are written on a thread of their own, overlapping the next chunk; a failed
    write stops the run at the next chunk.

    `Experiment` adds one to every run with a run directory, on process 0; one given in
    `callbacks` replaces it. It takes no arguments.
    """

    def on_start(self, info: RunInfo) -> None:
        path = os.path.join(info.run_dir, names.METRICS)
        if info.start_update > 0 and os.path.exists(path):
            write_atomic(path, kept_rows(path, info.start_update, info.num_runs))
            self._file = open(path, "a", newline="", encoding="utf-8")
            self._csv = csv.writer(self._file)
        else:
            self._file = open(path, "w", newline="", encoding="utf-8")
            self._csv = csv.writer(self._file)
            self._csv.writerow(CSV_HEADER)
            self._file.flush()
        self._start_writer()

    def _write(self, event: ChunkEvent) -> None:
        try:
            self._write_rows(event)
        except OSError as e:
            if e.filename is None:  # name the file: a write's error does not
                raise OSError(e.errno, e.strerror, self._file.name) from None
            raise

    def _write_rows(self, event: ChunkEvent) -> None:
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
        if getattr(self, "_file", None) is not None:
            self._file.close()
