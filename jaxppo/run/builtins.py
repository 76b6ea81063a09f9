"""The callbacks a run gets besides the user's: the progress line, and on a run with files the
writers of its directory (metrics.csv, TensorBoard, checkpoints, sweep.csv, summary.json), in
the order that keeps a checkpoint from getting ahead of the logs written before it."""

from __future__ import annotations

from jaxppo.run.callbacks import Checkpointer, Progress
from jaxppo.run.events import Callback
from jaxppo.run.logs.csv_logger import CsvLogger
from jaxppo.run.logs.tensorboard import TensorBoardLogger
from jaxppo.run.summary import SummaryFile
from jaxppo.run.sweep_table import SweepTable


def run_callbacks(exp, files: bool, main: bool) -> list[Callback]:
    """`exp`'s (an `Experiment`) callbacks, the progress, then the built-in file writers on
    process 0 (the checkpointer on every process: saving gathers, a collective). A built-in
    the user passed an instance of is not added twice."""
    out = list(exp.callbacks)
    if exp.progress and main:
        out.append(Progress())
    if not (files and exp.builtin_callbacks):
        return out
    builtin = [Checkpointer(exp.checkpoint_every, exp.checkpoint_every_s,
                            allow_nonfinite=not exp.stop_on_divergence)]
    if main:
        sweep_files = [SweepTable()] if exp.settings is not None else []
        builtin = [CsvLogger(), *([TensorBoardLogger()] if exp.tensorboard else []),
                   *builtin, *sweep_files, SummaryFile()]
    out += [b for b in builtin if not any(type(c) is type(b) for c in out)]
    for cb in out:  # a checkpoint never gets ahead of the logs written before it
        if isinstance(cb, Checkpointer):
            cb.before_save = [c.flush for c in out if c is not cb]
            if exp.controller is not None:
                cb.snapshot = exp.snapshot
    return out
