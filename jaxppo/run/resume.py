"""Where a stopped run picks up: its checkpoint read and checked against its run directory
before anything is written (a config.yaml edited since, a metrics.csv that lost rows, a
finished run with nothing to rebuild, a sweep only its strategy can continue), as one
`ResumePoint` for `Experiment.from_checkpoint`."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from jaxppo.errors import UsageError
from jaxppo.run.distributed import is_main_process
from jaxppo.rundir.checkpoint import Checkpoint
from jaxppo.rundir.csv_log import check_metrics_log
from jaxppo.rundir.files import check_no_symlinks
from jaxppo.rundir.layout import check_config_file, missing_results, run_dir_of
from jaxppo.rundir.ledger import trained_updates
from jaxppo.rundir.record import RunRecord


@dataclasses.dataclass
class ResumePoint:
    """A checked checkpoint, ready to continue from."""

    run_dir: str
    update: int  # the checkpoint's
    runner: Any  # its runner state (leading axis: runs)
    record: RunRecord
    log_gaps: tuple  # rows metrics.csv lacks for good, the new ones included
    keep_damaged_log: list  # what a repair drops from metrics.csv (a copy is kept first)
    rebuild: list  # (file, why) a finished run lacks: rebuilt, nothing trained
    notes: list  # for the user
    ran: bool = False  # continued already (its runner state may have been donated)


def check_resume(path: str | os.PathLike, ckpt: Checkpoint, *, controller=None,
                 repair_log: bool = False, writes_log: bool = True) -> ResumePoint:
    """`ckpt` (read from `path`) checked against its run directory, one line per refusal.

    metrics.csv must hold every update up to the checkpoint (`writes_log`: this run will write
    it), else this refuses saying what is missing; `repair_log` keeps its good rows instead
    and records the missing ones. A finished run is refused unless a result file is missing or
    damaged (then it is rebuilt). A sweep whose strategy changes its population needs that
    strategy's `controller`."""
    config, update, record = ckpt.config, ckpt.update, ckpt.record
    run_dir = run_dir_of(path)
    if record.controlled and controller is None:
        raise UsageError(f"'{run_dir}' is a {record.strategy or 'controlled'} sweep, whose "
                         "members change between chunks; continue it with: jaxppo sweep "
                         f"--resume {run_dir} (Python: jaxppo.resume_sweep)")
    check_no_symlinks(run_dir)
    check_config_file(run_dir, config)
    gaps, damaged, notes, rebuild = list(record.log_gaps), [], [], []
    if update >= config.num_updates:
        rebuild = missing_results(run_dir, record.settings, ckpt.num_runs, config.env_steps)
        if not rebuild:
            raise UsageError(f"run '{run_dir}' is finished (update {update}/"
                             f"{config.num_updates}); nothing to resume (evaluate it with: "
                             f"jaxppo eval {run_dir})")
    if not rebuild and writes_log and is_main_process():
        # a segmented sweep's runs left out of a segment have no rows after it: how far each
        # agent went is the record's ledger (derived for a record from before it)
        ends = trained_updates(record, ckpt.num_runs, update)
        gaps, damaged, notes = check_metrics_log(run_dir, update, ckpt.num_runs, gaps,
                                                 repair_log, run_ends=ends)
    if not rebuild and controller is not None and is_main_process():  # its own logs (PBT's)
        notes += controller.check_logs(run_dir, update, record.controller, repair_log)
    return ResumePoint(run_dir, update, ckpt.runner_state, record, tuple(gaps), damaged,
                       rebuild, notes)
