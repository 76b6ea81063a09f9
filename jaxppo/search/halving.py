"""Successive halving: the settings a random search draws, trained in rungs; after each rung
only the best 1/eta of them (by recent return) go on, and the rest stop costing compute.

How a halving sweep runs: one `Experiment` whose `HalvingController` cuts the run into
segments, one per rung (`run/controller.py`, `run/segments.py`): one run directory, one
checkpoint and one metrics.csv for every agent, as a grid's; each rung is its own `Driver`,
compiled for that rung's survivors only (N x seeds runs, then N/eta x seeds, ..., then seeds).
The host keeps the whole state of every agent, so a stopped agent keeps its state at its
rung's end: the checkpoint always holds every agent (`jaxppo eval RUN --agent M` and
`load_policy(RUN, seed=M)` work for any of them), and a stopped agent's metrics.csv rows end at
its rung. One Experiment for all rungs (rather than one per rung) keeps one owner of the run
directory, its lock, the running account, the logs and the resume.

The decisions are recorded as they are made, in the search record the checkpoint carries
(`kept`), together with the current rung's running score (`window`: per-agent sums of the
per-update returns over the rung's last updates, exact in JSON), so a resumed sweep, stopped
anywhere (across a rung boundary too), makes the same decisions bit-exactly.

Axis legend: N = settings (trials), S = seeds per setting, R = N * S runs (setting-major).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from jaxppo.config import PPOConfig
from jaxppo.errors import ConfigError, UsageError
from jaxppo.run.controller import Controller, Segment
from jaxppo.rundir.ledger import halving_run_updates
from jaxppo.search.space import check_trials, random_search

WINDOW_FRACTION = 0.25
"""A rung's settings are ranked by their mean per-update return over the last quarter of the
rung's updates (at least one): recent enough to reflect where each one got to, long enough to
smooth one update's noise."""

def rung_sizes(trials: int, eta: int) -> list[int]:
    """Settings trained in each rung: N, floor(N/eta), ... down to 1."""
    sizes = [trials]
    while sizes[-1] > 1:
        sizes.append(max(1, sizes[-1] // eta))
    return sizes


def rung_ends(num_updates: int, trials: int, eta: int) -> list[int] | None:
    """The update at which each rung ends: U / eta^(K-k), rounded (half up) to whole updates,
    the last at U. None when `num_updates` is too small for them to be at least 1 and strictly
    increasing."""
    K = len(rung_sizes(trials, eta)) - 1
    ends = [math.floor(Fraction(num_updates, eta ** (K - k)) + Fraction(1, 2)) for k in range(K + 1)]
    ok = ends[0] >= 1 and all(a < b for a, b in zip(ends, ends[1:], strict=False))
    return ends if ok else None


def min_updates(trials: int, eta: int) -> int:
    """The fewest updates whose rungs are all whole and distinct (for the refusal's fix)."""
    u = 1
    while rung_ends(u, trials, eta) is None:
        u += 1
    return u


def check_halving(config: PPOConfig, trials, eta, *, cli: bool = False) -> list[int]:
    """`eta` and `trials` checked against each other and the config's updates (one line each,
    before anything is written); the rungs' ends."""
    error = UsageError if cli else ConfigError
    flag = (lambda f: f"--{f}") if cli else (lambda f: f"{f}:")
    if isinstance(eta, bool) or not isinstance(eta, int | np.integer) or eta < 2:
        raise error(f"{flag('eta')} {eta}: use an integer >= 2 (keep the best 1/eta after each "
                    "rung; 3 is the usual)")
    check_trials(trials, cli=cli)
    if trials < eta:
        raise error(f"{flag('trials')} {trials} is below {flag('eta')} {eta}: halving keeps the "
                    f"best 1/eta after a rung; draw at least {eta} settings")
    ends = rung_ends(config.num_updates, int(trials), int(eta))
    if ends is None:
        need = min_updates(int(trials), int(eta))
        raise error(f"{config.num_updates} updates are too few for {len(rung_sizes(trials, eta))} "
                    f"rungs of halving ({trials} settings, eta {eta}): each rung needs at least "
                    f"one update of its own; raise total_timesteps to {need * config.batch_size} "
                    f"({need} updates) or lower --trials")
    return ends


def halving_search(config: PPOConfig, space: dict, trials: int, eta: int = 3, seed: int = 0, *,
                   cli: bool = False) -> tuple[list[dict], dict]:
    """A halving sweep's settings (the same `trials` a random search draws with `seed`) and its
    record: the rungs' ends, and `kept`, the settings trained in each rung so far (rung 0: all;
    the run appends the next as it decides)."""
    ends = check_halving(config, trials, eta, cli=cli)
    settings, drawn = random_search(config, space, int(trials), seed, cli=cli,
                                    population="halving")
    return settings, {"strategy": "halving", "trials": int(trials), "eta": int(eta),
                      "rungs": ends, "kept": [list(range(int(trials)))],
                      "space": drawn["space"], "seed": seed}


def select(scores: Sequence[float], bad: Sequence[bool], keep: int) -> list[int]:
    """The `keep` best of the candidates (their positions, in draw order): by score, highest
    first; one with no score (NaN) or flagged `bad` (diverged) ranks last; ties keep draw
    order."""
    scores = np.asarray(scores, float)
    order = sorted(range(len(scores)), key=lambda i: (
        bool(bad[i]) or not np.isfinite(scores[i]), -scores[i] if np.isfinite(scores[i]) else 0.0, i))
    return sorted(order[:keep])


def setting_scores(window_sum, window_count, seeds: int) -> np.ndarray:
    """[N] each setting's mean over its seeds of each seed's mean per-update return in the
    window; a seed with none is left out, a setting with none is NaN."""
    s = np.asarray(window_sum, float).reshape(-1, seeds)
    n = np.asarray(window_count, float).reshape(-1, seeds)
    with np.errstate(invalid="ignore", divide="ignore"):
        per_seed = np.where(n > 0, s / np.maximum(n, 1), np.nan)
        have = np.isfinite(per_seed)
        return np.where(have.any(1), np.nansum(per_seed, 1) / np.maximum(have.sum(1), 1), np.nan)


def run_updates(record: dict, seeds: int, update: int) -> np.ndarray:
    """[R] updates each agent has trained (its setting's, for each seed)."""
    return np.asarray(halving_run_updates(record, seeds, update), int)


class HalvingController(Controller):
    """Successive halving through the controller protocol: each rung is a segment of the run
    that trains only its survivors. The decisions are kept in the search record (`kept`, and
    the current rung's return `window`), which every checkpoint carries, so a resume anywhere
    decides the same."""

    def __init__(self, record: dict, seeds: int):
        self.record = copy.deepcopy(record)
        self.seeds = int(seeds)
        self.ends: list[int] = list(record["rungs"])
        self.sizes = rung_sizes(record["trials"], record["eta"])
        self.num_runs = record["trials"] * self.seeds
        self.diverged = np.zeros(self.num_runs, bool)  # [R] any NaN/Inf so far
        self.runs = self.segment_runs(0)

    def diverged_before(self, runs: np.ndarray) -> None:
        """A resumed sweep's earlier divergences (from its metrics.csv) rank their settings
        last, as they would have without the stop."""
        self.diverged |= np.asarray(runs, bool)

    def search_record(self, search):
        return self.record

    def run_updates(self, update: int) -> np.ndarray:
        return run_updates(self.record, self.seeds, update)

    def segments(self, start_update: int) -> list[tuple[int, Segment]]:
        starts = [0, *self.ends[:-1]]
        return [(k, Segment(self.sizes[k] * self.seeds, start, end))
                for k, (start, end) in enumerate(zip(starts, self.ends, strict=True))
                if end > start_update]

    def segment_runs(self, index: int) -> np.ndarray:
        """The agents (run indices) rung `index` trains: its kept settings' seeds."""
        kept = self.record["kept"][index]
        self.runs = np.array([g * self.seeds + i for g in kept for i in range(self.seeds)], int)
        return self.runs

    def segment_label(self, index: int, runs: np.ndarray) -> str:
        return (f"rung {index + 1}/{len(self.ends)}: {len(runs) // self.seeds} settings x "
                f"{self.seeds} seeds = {len(runs)} agents")

    def rung_at(self, update: int) -> int:
        """The rung that trains update `update + 1`."""
        return next(k for k, end in enumerate(self.ends) if update < end)

    def window_start(self, rung: int) -> int:
        start = self.ends[rung - 1] if rung else 0
        return self.ends[rung] - max(1, round(WINDOW_FRACTION * (self.ends[rung] - start)))

    def observe(self, chunk) -> None:
        """Account for a chunk of the rung's agents (metrics [len(runs), C], updates
        `first_update + 1 ..`), and choose the next rung's settings if it ends the rung."""
        metrics, first, runs = chunk.metrics, chunk.first_update, self.runs
        C = metrics["episodes"].shape[1]
        rung = self.rung_at(first)
        self.diverged[runs] |= (np.asarray(metrics["nonfinite"]) > 0).any(axis=1)
        if rung == len(self.ends) - 1:
            return  # the last rung: the table ranks its agents by final return
        start = self.window_start(rung)
        cols = [j for j in range(C) if first + j + 1 > start]
        if cols:
            w = self.record.setdefault("window", {"sum": [0.0] * self.num_runs,
                                                  "count": [0] * self.num_runs})
            ret = np.asarray(metrics["episodic_return"], np.float64)
            for j in cols:  # in update order: the same sums whatever the chunking
                for i, r in enumerate(runs):
                    if np.isfinite(ret[i, j]):
                        w["sum"][r] = float(w["sum"][r] + ret[i, j])
                        w["count"][r] += 1
        if first + C == self.ends[rung]:
            self._decide(rung)

    def _decide(self, rung: int) -> None:
        kept = self.record["kept"][rung]
        w = self.record.pop("window", {"sum": [0.0] * self.num_runs, "count": [0] * self.num_runs})
        scores = setting_scores(w["sum"], w["count"], self.seeds)
        bad = self.diverged.reshape(-1, self.seeds).any(axis=1)
        best = select(scores[kept], bad[kept], self.sizes[rung + 1])
        self.record["kept"].append([kept[i] for i in best])
