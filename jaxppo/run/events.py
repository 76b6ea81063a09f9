"""What a run tells its callbacks, and the callback protocol itself: `RunInfo` (what the
run is), `ChunkEvent` (one chunk of updates done), `RunResult` (how it ended), `Divergence`
(where it first went NaN/Inf), and `Callback`.

A callback sees a run start (`on_start`, before compiling), the compile finish
(`on_compiled`), each chunk of updates (`on_chunk`: the chunk's per-update metrics as NumPy
`[runs, updates]`), each note the run has for its user (`on_note`) and the end (`on_end`, with
the `RunResult`). `on_chunk` returning a false value stops the run at that chunk, as Ctrl-C
does: False, NumPy's `np.False_`, 0 - anything falsy but None, which (a function that returns
nothing) goes on. A plain function `f(event) -> bool | None` is an `on_chunk` callback.

Axis legend: R = runs (seeds, or settings x seeds of a sweep), C = updates in the chunk.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from jaxppo.config import PPOConfig
from jaxppo.labels import returns_text
from jaxppo.run.stats import RunStats


class Divergence(NamedTuple):
    """Where a run first went non-finite: run index, update (from 1, as the CSV counts) and
    the source (`jaxppo.core.metrics.NONFINITE_SOURCES`: env_obs, env_reward, action_mask,
    normaliser, loss, params), which decides the fix."""

    run: int
    update: int
    source: str


@dataclasses.dataclass(frozen=True)
class RunInfo:
    """What a run is, given to `on_start`: fixed for the run's life."""

    config: PPOConfig
    num_runs: int
    run_names: list[str]  # one per run (labels.run_names): seed_<i>, <g>_<setting>_seed<i>, agent_<i>
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
    # Some runs stop before the end while others go on (a halving sweep's agents stop at
    # their rung): their logs end early, and a curve of them is ragged.
    ragged: bool = False


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
    # [R] how many updates each run trained, where runs differ (a halving sweep's agents stop
    # at their rung); None: every run trained `update`.
    run_updates: np.ndarray | None = None
    notes: list = dataclasses.field(default_factory=list)  # what the run told its user

    @property
    def env_steps(self) -> int:
        return self.update * self.config.batch_size

    def __repr__(self) -> str:
        c = self.config
        return (f"RunResult({c.env_id}, {self.status}, update {self.update}/{c.num_updates}, "
                f"{self.num_runs} run(s), final return {returns_text(self.final_return)}, "
                f"run_dir={self.run_dir!r})")


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

    def on_note(self, note: str) -> None:
        """Something the user should know that is not an error (a repaired log, a restarted
        episode, a rung's start): the library says it here and the caller decides where it
        goes (the CLI prints it to stderr as `note: ...`)."""

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


def stack_metrics(chunks: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Chunks' metrics `[R, C]` joined along the updates axis."""
    if not chunks:
        return {}
    return {k: np.concatenate([c[k] for c in chunks], axis=1) for k in chunks[0]}
