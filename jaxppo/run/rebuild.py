"""A finished run's lost results (summary.json, curve.png; a sweep's sweep.csv and
sweep.png), rebuilt from its checkpoint's running account and metrics.csv: a run killed
between its last checkpoint and writing them, or a file damaged since. Nothing compiles or
trains; what the checkpoint does not hold (compile time, device) is null."""

from __future__ import annotations

import os
import time

from jaxppo.errors import UsageError
from jaxppo.run.divergence import diverged_runs, logged_divergences
from jaxppo.run.events import RunInfo, RunResult
from jaxppo.run.loop import RunLoop
from jaxppo.run.summary import write_curve
from jaxppo.run.sweep_table import SweepTable, sweep_rows
from jaxppo.rundir import names
from jaxppo.rundir.files import free_name
from jaxppo.rundir.summary import write_summary


def rebuild(exp, write: bool = True) -> RunResult:
    """`exp` (an `Experiment.from_checkpoint` of a finished run) as its `RunResult`, writing
    the result files it lacks (`write=False`: none, a process other than 0)."""
    resume, c = exp._resume, exp.config
    resume.ran = True
    run_dir = resume.run_dir
    info = RunInfo(c, exp.num_runs, exp.run_names(), run_dir, resume.update, exp.seed,
                   exp.settings, 0, log_gaps=resume.log_gaps, search=exp.search,
                   ragged=exp.segmented)
    loop = RunLoop(exp, info, exp.initial_stats(), [], time.perf_counter())
    if exp.controller is not None:  # its summary: the members' settings now
        exp.controller.start(None, resume.update, resume.record.controller)
    loop.status = "finished"
    loop.divergences, loop.live = logged_divergences(run_dir, exp.num_runs, resume.update,
                                                     exp.renewed_since())
    loop.diverged_runs = diverged_runs(resume.runner, exp.num_runs, loop.live)
    result = loop.result(resume.runner)
    result.wall_s, result.compile_s = loop.stats.wall_before, None
    result.summary.update(wall_s=round(loop.stats.wall_before, 3), compile_s=None,
                          device=None, platform=None, peak_device_bytes=None,
                          rebuilt_from_checkpoint=True)
    missing = [n for n, _ in resume.rebuild] if write else []
    for name, why in resume.rebuild if write else []:
        if why:  # damaged: kept beside the one rebuilt
            path = os.path.join(run_dir, name)
            copy = free_name(path + ".damaged")
            os.replace(path, copy)
            exp.note(f"'{path}' was damaged ({why}); it is kept as '{copy}' and rebuilt from "
                     "the checkpoint")
    if exp.settings is not None:
        result.summary["ranked"] = sweep_rows(result)
        if names.SWEEP in missing or names.SWEEP_PNG in missing:
            table = SweepTable()
            table.on_start(info)
            table.on_end(result)
    if names.SUMMARY in missing:
        write_summary(run_dir, result.summary)
    if names.CURVE in missing:
        try:
            write_curve(info, result.summary.get("threshold"), result.summary.get("settings"))
        except UsageError as e:
            exp.note(f"{names.CURVE} not rebuilt: {e}")
    result.rebuilt = [n for n in missing if os.path.exists(os.path.join(run_dir, n))]
    result.notes = exp.notes
    return result
