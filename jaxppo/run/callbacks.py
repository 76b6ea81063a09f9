"""Callbacks: the host side of a run, called by `jaxppo.Experiment` at chunk boundaries.

A callback sees a run start (`on_start`, before compiling), the compile finish (`on_compiled`),
each chunk of updates (`on_chunk`: the chunk's per-update metrics as NumPy `[runs, updates]`)
and the end (`on_end`, with the `RunResult`). `on_chunk` returning a false value stops the run
at that chunk, as Ctrl-C does: False, NumPy's `np.False_`, 0 - anything falsy but None, which
(a function that returns nothing) goes on. A plain function `f(event) -> bool | None` is an
`on_chunk` callback.

Everything a run directory holds is written by callbacks (`logger.py`: CSV, TensorBoard, W&B,
summary; `Checkpointer` here), and so is the live progress, so a user can drop or add any one.
Nothing here runs inside jit.

Axis legend: R = runs (seeds, or settings x seeds of a sweep), C = updates in the chunk.
"""

from __future__ import annotations

import copy
import dataclasses
import numbers
import sys
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import numpy as np
from tqdm import tqdm

from jaxppo.config import PPOConfig
from jaxppo.keys import keys_as_data
from jaxppo.run.checkpoint import save_checkpoint
from jaxppo.run.distributed import from_process_0, gather, is_main_process
from jaxppo.run.stats import RunStats, mean_std_or_none


def setting_label(setting: dict) -> str:
    """A sweep setting as text: `lr=0.001,ent_coef=0.01` (run names, tables, curve legends);
    a static value as `--grid` takes it, but a tuple as `64x64` (`hidden_sizes=64x64`)."""
    return ",".join(f"{k}={value_text(v)}" for k, v in setting.items())


def value_text(v: Any) -> str:
    """One setting's value as short text: numbers `:g`, booleans and None as YAML spells them,
    sequences joined by `x`."""
    if isinstance(v, bool | np.bool_):
        return "true" if v else "false"
    if isinstance(v, numbers.Real):
        return f"{v:g}"
    if v is None:
        return "null"
    if isinstance(v, list | tuple):
        return "x".join(value_text(x) for x in v) if len(v) else "[]"
    if isinstance(v, dict):
        return "{" + ",".join(f"{k}:{value_text(x)}" for k, x in v.items()) + "}"
    return str(v)


class Divergence(NamedTuple):
    """Where a run first went non-finite: run index, update (from 1, as the CSV counts) and
    the source (`jaxppo.core.train.NONFINITE_SOURCES`: env_obs, env_reward, action_mask,
    normaliser, loss, params), which decides the fix."""

    run: int
    update: int
    source: str


@dataclasses.dataclass(frozen=True)
class RunInfo:
    """What a run is, given to `on_start`: fixed for the run's life."""

    config: PPOConfig
    num_runs: int
    run_names: list[str]  # one per run: seed_<i>, or <setting>_seed<i> in a sweep
    run_dir: str | None  # None: a run without files
    start_update: int  # > 0 when resumed
    seed: int
    settings: list[dict] | None  # a sweep's per-run hyperparameters, else None
    chunk_updates: int
    description: str = ""  # where it runs, e.g. "seeds sharded over 4 devices"
    env: dict | None = None  # the env= instance trained on (envs.identity.describe_env), if any
    # Rows metrics.csv lacks for good, as (first, last) ranges of updates (every run's rows)
    # or (first, last, run) ranges (one run's): lost to a damaged log and recorded by a
    # `repair_log` resume (checkpoints and summary.json carry them on; logger.encode_gaps).
    log_gaps: tuple = ()
    search: dict | None = None  # a random sweep's space, trials and seed (summary.json's)


@dataclasses.dataclass(frozen=True)
class ChunkEvent:
    """One chunk of updates, done. `runner` is the device state after it (leading axis R)."""

    info: RunInfo
    first_update: int  # updates done before this chunk
    update: int  # updates done after it (of info.config.num_updates)
    metrics: dict[str, np.ndarray]  # each [R, C]
    wall_s: float  # wall seconds of the whole run so far (earlier sessions and compile included)
    chunk_s: float  # seconds this chunk took
    compile_s: float
    stats: RunStats  # the running account, this chunk included
    runner: Any
    diverged: Divergence | None  # the first NaN/Inf update, if any
    # [R] the agents this chunk stepped; None: all. A halving sweep's stopped agents are not
    # stepped: their metrics cells are NaN (episodes 0) and no log writes rows for them.
    active: np.ndarray | None = None

    @property
    def sps(self) -> float:
        """Environment steps per second over all runs, compiled chunks only."""
        return self.stats.sps_per_run * self.info.num_runs


@dataclasses.dataclass
class RunResult:
    """What `Experiment.run()` returns (and `on_end` receives)."""

    config: PPOConfig
    num_runs: int
    status: str  # "finished", "stopped" (a signal or a callback), "diverged" or "error"
    update: int  # updates done
    final_return: np.ndarray  # [R] the latest mean episodic return per run; NaN: none ended
    solved: dict | None  # {"env_steps", "update", "episodes", "wall_s", "threshold"}
    sps: float  # env steps per second over all runs (compiled chunks only)
    compile_s: float | None  # None: a rebuild of a finished run's results (nothing compiled)
    wall_s: float
    metrics: dict[str, np.ndarray]  # each [R, updates run in this session]
    train_state: Any  # the final (or last good) learner state, leading axis R
    run_dir: str | None
    stop_signal: int | None = None  # the signal that stopped the run
    diverged: Divergence | None = None  # (run, update, source)
    good_update: int | None = None  # the newest finite state's update (what a checkpoint keeps)
    summary: dict = dataclasses.field(default_factory=dict)  # what summary.json holds
    started: float = 0.0  # time.perf_counter() when the run's clock (wall_s) started
    rebuilt: list = dataclasses.field(default_factory=list)  # files a resume of a finished run
    #                                  rebuilt from its checkpoint (nothing was trained)

    @property
    def env_steps(self) -> int:
        return self.update * self.config.batch_size


class Callback:
    """Override what you need; every hook is optional."""

    def on_start(self, info: RunInfo) -> None:
        pass

    def on_compiled(self, info: RunInfo, compile_s: float) -> None:
        pass

    def on_chunk(self, event: ChunkEvent) -> bool | None:
        pass

    def on_end(self, result: RunResult) -> None:
        pass

    def flush(self) -> None:
        """Finish writing what `on_chunk` has been given (a checkpoint is about to be saved)."""


class FunctionCallback(Callback):
    """A plain function as an `on_chunk` callback."""

    def __init__(self, fn: Callable[[ChunkEvent], bool | None]):
        self.fn = fn

    def on_chunk(self, event: ChunkEvent) -> bool | None:
        return self.fn(event)


def as_callback(cb) -> Callback:
    if isinstance(cb, Callback):
        return cb
    if callable(cb):
        return FunctionCallback(cb)
    raise TypeError(f"a callback is a jaxppo.Callback or a function of a ChunkEvent, got "
                    f"{type(cb).__name__}")


class StopAtReturn(Callback):
    """Early stopping: stop once the mean over runs of the latest return reaches `target`
    (over the runs that have a return; never before any episode has ended)."""

    def __init__(self, target: float):
        self.target = target

    def on_chunk(self, event: ChunkEvent) -> bool:
        ret, _ = mean_std_or_none(event.stats.final_return)
        return ret is None or ret < self.target


class Progress(Callback):
    """Live progress: a tqdm bar when stderr is a terminal, plain flushed lines on stdout
    otherwise (CI logs, pipes). Says "compiling" while compiling; the one speed shown is
    jaxppo's SPS (compile excluded)."""

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
            print(f"compiled in {compile_s:.1f} s ({info.chunk_updates} updates per chunk)",
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
    """The newest state whose every update was finite, with the account at that point."""

    runner: Any
    update: int
    stats: dict
    search: dict | None = None  # the search record as it was then (halving's decisions so far)
    controller: dict | None = None  # the run's controller's state at that update (PBT)


class Checkpointer(Callback):
    """Saves the whole runner state (and the running account) into `run_dir/checkpoint/`:
    every `every` updates and/or every `every_s` seconds, and at the end the newest good state
    (finished, stopped, a callback's exception, or the last finite state before divergence).

    Runs on every process of a multi-process run (gathering is a collective, and process 0's
    clock decides when a save is due); only process 0 writes. `allow_nonfinite` keeps a
    sweep's checkpoints although some of its agents diverged.
    """

    def __init__(self, every: int | None = None, every_s: float | None = None,
                 allow_nonfinite: bool = False):
        self.every, self.every_s = every, every_s
        self.allow_nonfinite = allow_nonfinite
        self.good: _Good | None = None
        self.saved_update: int | None = None
        self.before_save: list = []  # the other callbacks' flush: logs reach disk first
        self.extra_state = None  # the run's controller's `state`, saved with each runner

    def on_start(self, info: RunInfo) -> None:
        self.info = info
        self.saved_update = info.start_update if info.start_update else None
        self.last_save = time.perf_counter()

    def on_chunk(self, event: ChunkEvent) -> None:
        if event.diverged is not None and not self.allow_nonfinite:
            return  # never a NaN state; on_end saves the last good one
        self.good = _Good(event.runner, event.update, event.stats.to_dict(event.wall_s),
                          copy.deepcopy(self.info.search),
                          None if self.extra_state is None else self.extra_state())
        due_updates = self.every and event.update // self.every > event.first_update // self.every
        due_time = self.every_s and time.perf_counter() - self.last_save >= self.every_s
        if from_process_0(int(bool(due_updates or due_time))):
            self.save(self.good)

    def save(self, good: _Good) -> None:
        for flush in self.before_save:
            flush()
        host = gather(keys_as_data(good.runner))
        if is_main_process():
            extra = {"seed": self.info.seed, "stats": good.stats}
            if self.info.settings is not None:
                extra["settings"] = self.info.settings
            if self.info.env is not None:
                extra["env"] = self.info.env
            if good.search is not None:
                extra["search"] = good.search
            if good.controller is not None:
                extra["controller"] = good.controller
            if self.info.log_gaps:
                extra["log_gaps"] = [list(g) for g in self.info.log_gaps]
            save_checkpoint(self.info.run_dir, host, self.info.config, good.update,
                            self.info.num_runs, extra=extra, allow_nonfinite=self.allow_nonfinite)
        self.saved_update = good.update
        self.last_save = time.perf_counter()

    def on_end(self, result: RunResult) -> None:
        # After an error on one process the others are not at this point: no collective then.
        lone_error = result.status == "error" and jax.process_count() > 1
        if self.good is not None and not lone_error and (
                self.saved_update is None or self.good.update > self.saved_update):
            self.save(self.good)
        self.good = None


def stack_metrics(chunks: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Chunks' metrics `[R, C]` joined along the updates axis."""
    if not chunks:
        return {}
    return {k: np.concatenate([c[k] for c in chunks], axis=1) for k in chunks[0]}
