"""The per-chunk decisions of one `Experiment.run()`: account for a chunk, record its
divergences, call the callbacks, and decide whether the run goes on (a signal, a callback's
"stop" or a divergence ends it at this chunk, the same on every process); then the run's
`RunResult`.

Axis legend: R = runs, C = updates in a chunk.
"""

from __future__ import annotations

import time
from typing import Any

import jax
import numpy as np

from jaxppo.process import StopNow
from jaxppo.run.callbacks import Checkpointer
from jaxppo.run.distributed import from_process_0, gather
from jaxppo.run.divergence import find_nonfinite, run_divergences
from jaxppo.run.driver import ChunkResult
from jaxppo.run.events import Callback, ChunkEvent, Divergence, RunInfo, RunResult, stack_metrics
from jaxppo.run.solve import quiet_nonfinite
from jaxppo.run.stats import RunStats
from jaxppo.run.summary import build_summary
from jaxppo.rundir.ledger import make_ledger

_STOP_BY_CALLBACK = -1


class RunLoop:
    """One run's account and decisions, chunk by chunk (`on_chunk`), and its `result`."""

    def __init__(self, exp, info: RunInfo, stats: RunStats, callbacks: list[Callback],
                 t_start: float):
        self.exp, self.info, self.stats, self.callbacks = exp, info, stats, callbacks
        self.compile_s, self.t_start = 0.0, t_start
        self.status = "running"
        self.ran = False  # a chunk reached the host (its logs may be on disk)
        self.stop_signal = None
        self.diverged: Divergence | None = None
        self.diverged_runs = np.zeros(info.num_runs, bool)
        self.divergences: dict[int, Divergence] = {}  # each run's first, by run (the record)
        self.live: dict[int, Divergence] = {}  # each run's first since a PBT renewal (if any)
        self.good_runner, self.good_update = None, (info.start_update or None)
        self.chunks: list[dict] = []
        self.stop_flag = None
        for cb in callbacks:  # every checkpoint records each agent's account
            if isinstance(cb, Checkpointer):
                cb.ledger = self.ledger

    def ledger(self, update: int) -> dict:
        """Each agent's account at `update` (the record's `ledger`): how far it trained, its
        divergence that stands (the first since its renewal), its last renewal."""
        return make_ledger(self.info.num_runs, update, self.exp.run_updates(update),
                           {r: d.update for r, d in self.live.items()},
                           self.exp.renewed_since()).to_dict()

    def stop_before_training(self, when: str) -> None:
        """A signal that came before the first chunk: stop now (every process alike)."""
        signum = from_process_0((self.stop_flag and self.stop_flag.signum) or 0)
        if signum:
            raise StopNow(signum, when)

    def stop_requested(self) -> bool:
        """A stop signal came (one process: with several, process 0 decides in `on_chunk`)."""
        return (jax.process_count() == 1 and self.stop_flag is not None
                and self.stop_flag.signum is not None)

    @quiet_nonfinite
    def on_chunk(self, runner, chunk: ChunkResult, active: np.ndarray | None = None) -> bool:
        """`active`: [R] the runs this chunk stepped (a segment's; None: all)."""
        fault = self.exp.host_fault(chunk.update, self.good_update)
        if fault is not None:  # nothing of this chunk is kept: it ran on zeros after the fault
            raise fault
        self.ran = True
        m = chunk.metrics
        self.stats.add_chunk(m, chunk.first_update, chunk.wall_s, chunk.chunk_s, active)
        self.chunks.append(m)
        bad = find_nonfinite(m, chunk.first_update)
        self.diverged_runs |= (np.asarray(m["nonfinite"]) > 0).any(axis=1)
        for d in run_divergences(m, chunk.first_update):
            self.divergences.setdefault(d.run, d)
            self.live.setdefault(d.run, d)
        since = self.exp.renewed_since()
        if since is not None:  # a PBT member renewed at this chunk's end is healthy again
            renewed = since == chunk.update
            self.diverged_runs &= ~renewed
            for run in np.flatnonzero(renewed):
                self.live.pop(int(run), None)
        event = ChunkEvent(self.info, chunk.first_update, chunk.update, m,
                           self.stats.wall_before + chunk.wall_s, chunk.chunk_s, self.compile_s,
                           self.stats, runner, bad, active)
        go_on = True
        for cb in self.callbacks:
            if says_stop(cb, cb.on_chunk(event)):
                go_on = False
        if bad is not None and self.exp.stop_on_divergence:  # the same on every process
            self.status, self.diverged = "diverged", bad
            return False
        self.good_runner, self.good_update = runner, chunk.update
        # Process 0 decides for every process (a signal, or one of its callbacks said stop),
        # so that all of them stop at the same chunk.
        signum = None if self.stop_flag is None else self.stop_flag.signum
        decision = from_process_0(signum or (0 if go_on else _STOP_BY_CALLBACK))
        if decision:
            self.status = "stopped"
            self.stop_signal = decision if decision > 0 else None
            return False
        return True

    @quiet_nonfinite
    def result(self, runner) -> RunResult:
        exp, stats = self.exp, self.stats
        wall = time.perf_counter() - self.t_start
        c = exp.config
        # After an error on one process the others are elsewhere: no collective then.
        lone = self.status == "error" and jax.process_count() > 1
        train_state = None if runner is None or lone else gather(runner.train_state)
        if self.diverged is None and self.live:  # a sweep goes on: its first, by update, of
            # the runs diverged now (a rescued PBT member's is only in `divergences`)
            self.diverged = min(self.live.values(), key=lambda d: (d.update, d.run))
        if self.status == "finished" and self.diverged_runs.all():
            self.status = "diverged"  # every agent: nothing in the run is a result
        run_updates = exp.run_updates(stats.update)
        ctrl = exp.controller
        summary = build_summary(
            c, stats, num_runs=exp.num_runs, status=self.status,
            wall_s=stats.wall_before + wall, compile_s=self.compile_s, diverged=self.diverged,
            diverged_runs=self.diverged_runs,
            divergences=[d for _, d in sorted(self.divergences.items())],
            env_steps_total=c.batch_size * (stats.update * exp.num_runs if run_updates is None
                                            else run_updates.sum()),
            device=jax.devices()[0], settings=exp.settings, seeds=exp.seeds,
            search=exp.search if ctrl is None else ctrl.search_record(exp.search),
            extra=None if ctrl is None else ctrl.summary(), log_gaps=self.info.log_gaps)
        return RunResult(c, exp.num_runs, self.status, stats.update, stats.final_return,
                         stats.solved, stats.sps_per_run * exp.num_runs, self.compile_s,
                         stats.wall_before + wall, stack_metrics(self.chunks), train_state,
                         self.info.run_dir, self.stop_signal, self.diverged, self.good_update,
                         summary, self.t_start, run_updates=run_updates, notes=exp.notes)


@quiet_nonfinite
def says_stop(cb: Callback, said: Any) -> bool:
    """False, np.False_, 0: stop; None or a true value: go on. An array (of any size) has no
    truth value: refused, naming the callback, rather than NumPy's error naming nothing."""
    if said is None:
        return False
    if np.ndim(said) == 0:
        try:
            return not bool(said)
        except (TypeError, ValueError):
            pass
    fn = getattr(cb, "fn", cb)  # a plain function, wrapped as a FunctionCallback
    name = getattr(fn, "__name__", type(fn).__name__)
    shape = f" of shape {np.shape(said)}" if np.ndim(said) else ""
    raise TypeError(f"callback {name} returned a {type(said).__name__}{shape}; an on_chunk "
                    "callback returns a bool (False stops the run) or None")


def end_all(callbacks: list[Callback], result: RunResult) -> BaseException | None:
    """Every callback's `on_end`, even after one fails (so the checkpoint is still saved and
    the other logs closed); returns the first failure."""
    first = None
    for cb in callbacks:
        try:
            cb.on_end(result)
        except Exception as e:  # noqa: BLE001 - re-raised by the caller
            first = first or e
    return first
