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
    """What a run is, given to `on_start`: fixed for the run's life.

    Every `ChunkEvent` carries it too (`event.info`). R = runs: seeds, or settings x seeds of a
    sweep.

    Attributes:
      config: the run's `PPOConfig`.
      num_runs: R.
      run_names: one per run: `seed_<i>`, or `<setting>_seed<i>` in a sweep (the names of
        its TensorBoard folders).
      run_dir: the run directory; None: a run without files (`logdir=None`).
      start_update: updates done before this session: > 0 when resumed.
      seed: the base seed.
      settings: a sweep's settings (dicts of float hyperparameters; run i has setting
        i // seeds), else None.
      chunk_updates: updates per compiled chunk (the callbacks' rhythm).
      description: where it runs, e.g. "seeds sharded over 4 devices" ("" on one device).
      env: the `env=` instance trained on, described (`envs.identity.describe_env`: its class
        and plain-data attributes), if any.
      log_gaps: rows metrics.csv lacks for good, as (first, last) ranges of updates (every
        run's rows) or (first, last, run) ranges (one run's): lost to a damaged log and
        recorded by a `repair_log` resume (checkpoints and summary.json carry them on;
        `rundir/csv_log.encode_gaps`).
      search: a random sweep's space, trials and seed (summary.json's `search`), else None.
      ragged: some runs stop before the end while others go on (a halving sweep's agents
        stop at their rung): their logs end early, and a curve of them is ragged.
      resets: how ended episodes get new initial states, where it is not the default
        (`VecEnv.reset_note`: `resets: optimistic, 8 per step (...)`), else "".
    """

    config: PPOConfig
    num_runs: int
    run_names: list[str]  # one per run (labels.run_names): seed_<i>, <g>_<setting>_seed<i>, agent_<i>
    run_dir: str | None  # None: a run without files
    start_update: int  # > 0 when resumed
    seed: int
    settings: list[dict] | None
    chunk_updates: int
    description: str = ""
    env: dict | None = None
    log_gaps: tuple = ()  # (first, last) or (first, last, run) ranges of updates
    search: dict | None = None
    ragged: bool = False
    resets: str = ""


@dataclasses.dataclass(frozen=True)
class ChunkEvent:
    """One chunk of updates, done. `runner` is the device state after it (leading axis R).

    What `on_chunk` (and a plain function callback) receives, on the host, at every chunk
    boundary. R = runs, C = updates in the chunk.

        def log(event):
            ret = event.metrics["episodic_return"]          # [R, C]
            print(event.update, ret[:, -1].mean(), event.sps)
            return event.update < 100                       # False stops the run here

    Attributes:
      info: the `RunInfo` of the run.
      first_update: updates done before this chunk.
      update: updates done after it (of `info.config.num_updates`).
      metrics: every metric by name (`jaxppo.core.metrics.METRICS`, and the env's own episode
        metrics under `env/`), each NumPy `[R, C]`; `episodic_return` is NaN until a run's
        first episode ends.
      wall_s: wall seconds of the whole run so far (earlier sessions and compile included).
      chunk_s: seconds this chunk took.
      compile_s: seconds spent compiling in this session.
      stats: the running account (`RunStats`: episodes, latest returns, the solve point,
        SPS), this chunk included.
      runner: the runner state after the chunk (leaves with leading axis R; a host copy when
        the chunk program donates its input).
      diverged: the first NaN/Inf update in this chunk, if any (`Divergence`: run, update,
        source).
      active: `[R]` bool, the agents this chunk stepped; None: all. A halving sweep's stopped
        agents are not stepped: their metrics cells are NaN (episodes 0) and no log writes
        rows for them.
    """

    info: RunInfo
    first_update: int
    update: int
    metrics: dict[str, np.ndarray]
    wall_s: float
    chunk_s: float
    compile_s: float
    stats: RunStats
    runner: Any
    diverged: Divergence | None
    active: np.ndarray | None = None

    @property
    def sps(self) -> float:
        """Environment steps per second over all runs, compiled chunks only."""
        return self.stats.sps_per_run * self.info.num_runs


@dataclasses.dataclass
class RunResult:
    """What `Experiment.run()` returns (and `on_end` receives).

    Also `Experiment.resume(...)`'s result and `SweepResult.result`. R = runs: seeds, or
    settings x seeds of a sweep.

    Attributes:
      config: the run's `PPOConfig`.
      num_runs: R.
      status: "finished", "stopped" (a signal or a callback), "diverged" or "error" (seen
        only by `on_end`: the error is then raised). A sweep in which every agent diverged
        is "diverged".
      update: updates done.
      final_return: `[R]` the latest mean episodic return per run; NaN: none ended.
      solved: where the run first counted as solved (the mean over seeds of each seed's mean
        return over its last 20 episodes reached the env's threshold), as `{"env_steps",
        "update", "episodes", "wall_s", "threshold"}`; None: not solved, or no threshold.
      sps: env steps per second over all runs (compiled chunks only).
      compile_s: seconds spent compiling in this session; None: a rebuild of a finished run's
        results (nothing compiled).
      wall_s: wall seconds of the whole run (earlier sessions included).
      metrics: every metric by name, each `[R, updates run in this session]`.
      train_state: the final (or last good) learner state, leading axis R.
      run_dir: the run directory; None: a run without files.
      stop_signal: the signal that stopped the run, if one did.
      diverged: where a run first went NaN/Inf (`Divergence`: run, update, source), if any.
      good_update: the newest finite state's update (what a checkpoint keeps).
      summary: what summary.json holds.
      started: `time.perf_counter()` when the run's clock (`wall_s`) started.
      rebuilt: files a resume of a finished run rebuilt from its checkpoint (nothing was
        trained).
      run_updates: `[R]` how many updates each run trained, where runs differ (a halving
        sweep's agents stop at their rung); None: every run trained `update`.
      notes: what the run told its user (`on_note`), in order.
    """

    config: PPOConfig
    num_runs: int
    status: str
    update: int
    final_return: np.ndarray
    solved: dict | None
    sps: float
    compile_s: float | None
    wall_s: float
    metrics: dict[str, np.ndarray]
    train_state: Any
    run_dir: str | None
    stop_signal: int | None = None
    diverged: Divergence | None = None
    good_update: int | None = None
    summary: dict = dataclasses.field(default_factory=dict)
    started: float = 0.0
    rebuilt: list = dataclasses.field(default_factory=list)
    run_updates: np.ndarray | None = None
    notes: list = dataclasses.field(default_factory=list)

    @property
    def env_steps(self) -> int:
        """Environment steps per run: `update * config.batch_size`."""
        return self.update * self.config.batch_size

    def __repr__(self) -> str:
        c = self.config
        return (f"RunResult({c.env_id}, {self.status}, update {self.update}/{c.num_updates}, "
                f"{self.num_runs} run(s), final return {returns_text(self.final_return)}, "
                f"run_dir={self.run_dir!r})")


class Callback:
    """Override what you need; every hook is optional.

    A callback watches a run from the host (never inside jit): pass it as
    `Experiment(config, callbacks=[...])` (or to `sweep`, `Experiment.resume`). A plain
    function `f(event) -> bool | None` is an `on_chunk` callback. Everything a run directory
    holds is written by callbacks (`CsvLogger`, `TensorBoardLogger`, `Checkpointer`, ...), so
    yours see what they see. An exception raised in a hook stops the run, keeps a checkpoint
    and reaches the caller with its own message.
    """

    def on_start(self, info: RunInfo) -> None:
        """Called once as the run starts (or resumes), before compiling.

        Args:
          info: what the run is (`info.start_update > 0` when resumed).
        """

    def on_compiled(self, info: RunInfo, compile_s: float) -> None:
        """Called once the run's program is compiled, before its first chunk runs.

        Args:
          info: what the run is.
          compile_s: seconds the compile took.
        """

    def on_chunk(self, event: ChunkEvent) -> bool | None:
        """Called on the host after every chunk of updates: log, plot, or decide to stop.

        Args:
          event: the chunk's per-update metrics (NumPy `[R, C]`), the running account and the
            runner state after it.

        Returns:
          A false value (False, NumPy's `np.False_`, 0: anything falsy but None) stops the run
            at this chunk, as Ctrl-C does (status "stopped", checkpoint kept); None (a function
            that returns nothing) or a true value goes on. An array is refused with a
            `TypeError`: it has no truth value. In a multi-process run, process 0's answer
            decides for every process.
        """

    def on_end(self, result: RunResult) -> None:
        """Called once as the run ends, however it ends (finished, stopped, diverged, or an
        error: then `result.status` is "error" and the error is raised after every
        callback's `on_end` has run). Close files here.

        Args:
          result: the run's outcome, as `Experiment.run()` returns it.
        """

    def on_note(self, note: str) -> None:
        """Something the user should know that is not an error (a repaired log, a restarted
        episode, a rung's start): the library says it here and the caller decides where it
        goes (the CLI prints it to stderr as `note: ...`).

        Args:
          note: the note, one line of text.
        """

    def flush(self) -> None:
        """Finish writing what `on_chunk` has been given (a checkpoint is about to be saved).

        The `Checkpointer` calls every other callback's `flush` before each save, so a
        checkpoint never gets ahead of the logs written before it. A callback that writes on
        a thread of its own waits for it here (and raises its failure).
        """


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
