"""The built-in callbacks that are not files of logs: live progress (`Progress`), early
stopping (`StopAtReturn`) and checkpoints (`Checkpointer`). Everything a run directory holds
is written by callbacks (these and `run/logs/`), so a user can drop or add any one. Nothing
here runs inside jit.

Axis legend: R = runs (seeds, or settings x seeds of a sweep), C = updates in the chunk.
"""

from __future__ import annotations

import copy
import sys
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
from tqdm import tqdm

from jaxppo.keys import keys_as_data
from jaxppo.labels import plural
from jaxppo.run.distributed import from_process_0, gather, is_main_process
from jaxppo.run.events import Callback, ChunkEvent, RunInfo, RunResult
from jaxppo.run.stats import mean_std_or_none
from jaxppo.rundir.checkpoint import save_checkpoint
from jaxppo.rundir.record import RunRecord


class StopAtReturn(Callback):
    """Early stopping: stop once the mean over runs of the latest return reaches `target`
    (over the runs that have a return; never before any episode has ended).

    Checked at chunk boundaries, so the run stops at the end of the chunk in which the target
    was reached (status "stopped", checkpoint kept), e.g.
    `Experiment(config, callbacks=[jaxppo.StopAtReturn(475)])`.

    Args:
      target: the mean episodic return to stop at.
    """

    def __init__(self, target: float):
        self.target = target

    def on_chunk(self, event: ChunkEvent) -> bool:
        ret, _ = mean_std_or_none(event.stats.final_return)
        return ret is None or ret < self.target


class Progress(Callback):
    """Live progress: a tqdm bar when stderr is a terminal, plain flushed lines on stdout
    otherwise (CI logs, pipes). Says "compiling" while compiling; the one speed shown is
    jaxppo's SPS (compile excluded).

    `Experiment(progress=True)` (the default) adds one on process 0. Each chunk shows the env
    steps done, SPS, the mean over runs of the latest return ("none" until an episode has
    ended) and, on the bar, the time left.
    """

    def on_start(self, info: RunInfo) -> None:
        self.total = info.config.env_steps
        self.bar = None
        if sys.stderr.isatty():
            self.bar = tqdm(total=self.total, initial=info.start_update * info.config.batch_size,
                            unit="step", unit_scale=True, dynamic_ncols=True, file=sys.stderr,
                            desc="compiling…",
                            bar_format="{desc} {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} "
                                       "[{elapsed}{postfix}]")
        else:
            print("compiling ...", flush=True)

    def on_compiled(self, info: RunInfo, compile_s: float) -> None:
        if self.bar is not None:
            self.bar.set_description_str("training", refresh=True)
        else:
            print(f"compiled in {compile_s:.1f} s ({plural(info.chunk_updates, 'update')} per chunk)",
                  flush=True)

    def on_chunk(self, event: ChunkEvent) -> None:
        steps = event.update * event.info.config.batch_size
        ret, _ = mean_std_or_none(event.stats.final_return)  # None until an episode has ended
        if self.bar is not None:
            self.bar.n = steps
            left = (self.total - steps) / max(event.stats.sps_per_run, 1e-9)
            shown = "none" if ret is None else f"{ret:.1f}"
            self.bar.set_postfix_str(f"{event.sps:,.0f} SPS, return {shown}, "
                                     f"ETA {left:.0f} s", refresh=True)
        else:
            shown = "none" if ret is None else f"{ret:.2f}"
            print(f"[{100.0 * steps / self.total:5.1f}%] steps {steps:,} | SPS {event.sps:,.0f} "
                  f"| mean return {shown} | t={event.wall_s:.1f}s", flush=True)

    def on_end(self, result: RunResult) -> None:
        if getattr(self, "bar", None) is not None:
            self.bar.close()


class _Good(NamedTuple):
    """The newest state whose every update was finite, with the run's record at that point."""

    runner: Any
    update: int
    record: RunRecord


class Checkpointer(Callback):
    """Saves the whole runner state (and the running account) into `run_dir/checkpoint/`:
    every `every` updates and/or every `every_s` seconds, and at the end the newest good state
    (finished, stopped, a callback's exception, or the last finite state before divergence).

    Runs on every process of a multi-process run (gathering is a collective, and process 0's
    clock decides when a save is due); only process 0 writes. `allow_nonfinite` keeps a
    sweep's checkpoints although some of its agents diverged.

    `Experiment` adds one to every run with a run directory (`checkpoint_every`,
    `checkpoint_every_s`: 120 s by default); one given in `callbacks` replaces it. A save is
    atomic (a kill during it leaves the previous checkpoint), never holds a NaN/Inf state
    (unless `allow_nonfinite`), and comes after the other callbacks' `flush`, so a checkpoint
    never gets ahead of the logs. `jaxppo.load_checkpoint` reads it back.

    Args:
      every: save every this many updates (at the first chunk boundary past each multiple,
        and at any boundary after which more than `every` would be unsaved); None: not by
        updates.
      every_s: save when this many seconds have passed since the last save; None: not by
        time.
      allow_nonfinite: save although some agents diverged (a sweep flags them and goes on).
    """

    def __init__(self, every: int | None = None, every_s: float | None = None,
                 allow_nonfinite: bool = False):
        self.every, self.every_s = every, every_s
        self.allow_nonfinite = allow_nonfinite
        self.good: _Good | None = None
        self.saved_update: int | None = None
        self.before_save: list = []  # the other callbacks' flush: logs reach disk first
        # () -> (search record, controller state) as of now: a run's controller changes both
        # (halving's decisions, PBT's members); None: the search as the run started, no state.
        self.snapshot: Callable[[], tuple[dict | None, dict | None]] | None = None
        # update -> each agent's account as of now (`rundir.ledger.Ledger.to_dict`), set by
        # the run loop; None: no ledger (a checkpointer outside a run loop)
        self.ledger: Callable[[int], dict] | None = None

    def on_start(self, info: RunInfo) -> None:
        self.info = info
        self.saved_update = info.start_update if info.start_update else None
        self.last_save = time.perf_counter()

    def on_chunk(self, event: ChunkEvent) -> None:
        if event.diverged is not None and not self.allow_nonfinite:
            return  # never a NaN state; on_end saves the last good one
        search, state = (self.info.search, None) if self.snapshot is None else self.snapshot()
        info = self.info
        record = RunRecord(info.seed, event.stats.to_dict(event.wall_s), info.settings,
                           info.env, copy.deepcopy(search), state, info.log_gaps,
                           None if self.ledger is None else self.ledger(event.update))
        self.good = _Good(event.runner, event.update, record)
        # due at each multiple of `every`, and before the unsaved updates could pass `every`
        # by the end of the next chunk (a kill then loses at most `every`)
        nxt = max(self.info.chunk_updates, event.update - event.first_update)
        due_updates = self.every and (
            event.update // self.every > event.first_update // self.every
            or event.update + nxt - (self.saved_update or 0) > self.every)
        due_time = self.every_s and time.perf_counter() - self.last_save >= self.every_s
        if from_process_0(int(bool(due_updates or due_time))):
            self.save(self.good)

    def save(self, good: _Good) -> None:
        for flush in self.before_save:
            flush()
        host = gather(keys_as_data(good.runner))
        if is_main_process():
            save_checkpoint(self.info.run_dir, host, self.info.config, good.update,
                            self.info.num_runs, extra=good.record.to_extra(),
                            allow_nonfinite=self.allow_nonfinite)
        self.saved_update = good.update
        self.last_save = time.perf_counter()

    def on_end(self, result: RunResult) -> None:
        # After an error on one process the others are not at this point: no collective then.
        lone_error = result.status == "error" and jax.process_count() > 1
        if self.good is not None and not lone_error and (
                self.saved_update is None or self.good.update > self.saved_update):
            self.save(self.good)
        self.good = None
