"""The one way a search strategy changes a running population: a `Controller` handed to
`Experiment(controller=...)`. `run/` knows only this interface, never a strategy, so the
strategies (`search/`) sit above the run and plug in from there.

Two kinds of change go through it, and a controller may use either:
- between chunks (PBT): at every update where `due` is true the driver drains its pipeline
  and `replace` returns the new runner state and hyperparameters;
- in segments (successive halving): the run is cut at `segments()`' ends, and each segment
  trains only the runs `segment_runs(k)` names, in a program compiled for that many; the host
  keeps every run's state, so a run left out keeps it from where it stopped.

The controller sees every chunk (`observe`) before any callback does, and is asked for what
a checkpoint keeps (`search_record`, `state`) at every chunk, so a resumed run decides the
same as an uninterrupted one.

Axis legend: R = runs.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np


class Segment(NamedTuple):
    """A stretch of a segmented run: `size` runs train from update `start` to `end`."""

    size: int
    start: int
    end: int


class Controller:
    """What `Experiment` and the driver ask of a search strategy. Every method has a default
    that changes nothing, so a controller overrides only what it does."""

    common_seeds: bool = True
    """Every setting trains on the same seeds' keys (common random numbers); False: every run
    its own key (PBT's members)."""

    changes_hparams: bool = False
    """A run's hyperparameters change while it trains (PBT's explore): its logs are named by
    the agent, not by the setting it started with."""

    # -- Experiment's side ---------------------------------------------------------------
    def start(self, run_dir: str | None, start_update: int, saved: dict | None) -> Any:
        """Begin (`saved` None) or continue from a checkpoint's `state()`; the `Hparams` the
        first chunk runs with (None: the settings' own). `run_dir` None: write no files."""
        return None

    def check_logs(self, run_dir: str, update: int, saved: dict | None,
                   repair: bool = False) -> list[str]:
        """Before a resume from the checkpoint at `update` writes anything: the strategy's own
        logs held against it (`saved`: the checkpoint's `state()`); one line (UsageError) for
        what is missing, unless `repair` (keep the good rows, record the rest). Notes back."""
        return []

    def diverged_before(self, runs: np.ndarray) -> None:
        """[R] the runs whose NaN/Inf before a resume metrics.csv recorded (told once, after
        `start`), so a resumed run judges them as an uninterrupted one would."""

    def chunk_length(self, want: int, start_update: int) -> int:
        """The chunk length to use when `want` updates per chunk would be picked: chunk
        boundaries must fall where the controller acts."""
        return want

    def search_record(self, search: dict | None) -> dict | None:
        """The sweep's search record as a checkpoint keeps it now (`search`: as it started);
        a controller whose decisions are part of it returns them."""
        return search

    def state(self) -> dict | None:
        """The controller's own state, kept in each checkpoint (plain JSON-like values)."""
        return None

    def summary(self) -> dict:
        """What summary.json adds for this strategy."""
        return {}

    def renewed_since(self) -> np.ndarray | None:
        """[R] the update after which each run's learner was replaced by a healthy one (-1:
        never): a NaN/Inf it had before no longer makes it diverged. None: never replaced."""
        return None

    def run_updates(self, update: int) -> np.ndarray | None:
        """[R] how many updates each run has trained at `update`, where runs differ (None:
        every run trained `update`)."""
        return None

    # -- the driver's side ---------------------------------------------------------------
    def due(self, update: int) -> bool:
        """Replace the state after `update` (the pipeline drains first)."""
        return False

    def observe(self, chunk) -> None:
        """A chunk's result (`driver.ChunkResult`: metrics [runs stepped, C]), before the
        callbacks see it."""

    def replace(self, runner, hparams, update: int) -> tuple[Any, Any]:
        """The runner state and hyperparameters the next chunk starts from."""
        return runner, hparams

    # -- segments ------------------------------------------------------------------------
    def segments(self, start_update: int) -> list[tuple[int, Segment]] | None:
        """(index, Segment) for each segment still to run from `start_update`; None: one
        segment of every run (no segmenting)."""
        return None

    def segment_runs(self, index: int) -> np.ndarray:
        """The runs segment `index` trains, asked when it starts (decided by then)."""
        raise NotImplementedError

    def segment_label(self, index: int, runs: np.ndarray) -> str:
        """How the segment's start line names it."""
        return f"segment {index + 1}: {len(runs)} runs"
