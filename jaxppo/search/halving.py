"""Successive halving: the settings a random search draws, trained in rungs; after each rung
only the best 1/eta of them (by recent return) go on, and the rest stop costing compute.

How a halving sweep runs (`Experiment` with a halving `search` record, `_run_rungs`): one run
directory, one checkpoint and one metrics.csv for every agent, as a grid's; each rung is its
own `Driver`, compiled for that rung's survivors only (N x seeds runs, then N/eta x seeds, ...,
then seeds). The host keeps the whole state of every agent; a rung's program takes its
survivors' rows and each chunk's result is put back, so a stopped agent keeps its state at its
rung's end: the checkpoint always holds every agent (`jaxppo eval RUN --seed M` and
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

import math
from collections.abc import Sequence
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np

from jaxppo.config import PPOConfig
from jaxppo.errors import ConfigError, UsageError
from jaxppo.keys import is_key
from jaxppo.search.space import check_trials, random_search

WINDOW_FRACTION = 0.25
"""A rung's settings are ranked by their mean per-update return over the last quarter of the
rung's updates (at least one): recent enough to reflect where each one got to, long enough to
smooth one update's noise."""

# Filler for a stopped agent's cells in the [R, C] metrics of a later chunk: no episode, no
# fault; every other metric NaN (it was not computed). env_steps stays the update's own.
_ZERO_FILLED = ("episodes", "nonfinite", "nonfinite_source")


def is_halving(search: dict | None) -> bool:
    return isinstance(search, dict) and search.get("strategy") == "halving"


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


def setting_updates(record: dict, update: int) -> list[int]:
    """[N] how far each setting has trained at `update`: the end of the last rung it was kept
    for (no further than `update`)."""
    out = [0] * record["trials"]
    for end, kept in zip(record["rungs"], record["kept"], strict=False):
        for g in kept:
            out[g] = min(end, update)
    return out


def run_updates(record: dict, seeds: int, update: int) -> np.ndarray:
    """[R] updates each agent has trained (its setting's, for each seed)."""
    return np.repeat(setting_updates(record, update), seeds)


def checkpoint_run_updates(extra: dict, num_runs: int, update: int) -> np.ndarray | None:
    """[R] updates each run of a checkpoint (its `extra`, `num_runs`, `update`) trained if it
    holds a halving sweep, whose agents stopped at a rung keep their parameters from there;
    None for any other run (every run trained `update`)."""
    if not is_halving(extra.get("search")):
        return None
    seeds = num_runs // max(1, len(extra.get("settings") or ()))
    return run_updates(extra["search"], seeds, update)


class Rungs:
    """The halving decisions of one run, kept in its search `record` (mutated in place: the
    checkpoint carries it): which agents train in which rung, the current rung's window
    account, and the choice at each rung's end."""

    def __init__(self, record: dict, seeds: int, diverged: np.ndarray):
        self.record, self.seeds = record, seeds
        self.ends: list[int] = list(record["rungs"])
        self.sizes = rung_sizes(record["trials"], record["eta"])
        self.num_runs = record["trials"] * seeds
        self.diverged = np.array(diverged, bool)  # [R] any NaN/Inf so far

    def rung_at(self, update: int) -> int:
        """The rung that trains update `update + 1`."""
        return next(k for k, end in enumerate(self.ends) if update < end)

    def runs(self, rung: int) -> np.ndarray:
        """The agents (run indices) trained in `rung`."""
        kept = self.record["kept"][rung]
        return np.array([g * self.seeds + i for g in kept for i in range(self.seeds)], int)

    def window_start(self, rung: int) -> int:
        start = self.ends[rung - 1] if rung else 0
        return self.ends[rung] - max(1, round(WINDOW_FRACTION * (self.ends[rung] - start)))

    def observe(self, metrics: dict[str, np.ndarray], runs: np.ndarray, first: int) -> None:
        """Account for a chunk of the rung's agents `runs` (metrics [len(runs), C], updates
        `first + 1 ..`), and choose the next rung's settings if the chunk ends this rung."""
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


def expand_metrics(metrics: dict[str, np.ndarray], runs: np.ndarray, num_runs: int
                   ) -> dict[str, np.ndarray]:
    """A rung's chunk metrics [len(runs), C] as [R, C]: the stopped agents' cells NaN (0 for
    episodes and faults; env_steps the update's own)."""
    out = {}
    for k, v in metrics.items():
        v = np.asarray(v)
        fill = 0 if k in _ZERO_FILLED else (v[0] if k == "env_steps" else np.nan)
        dtype = v.dtype if k in _ZERO_FILLED or k == "env_steps" else np.result_type(v, np.float32)
        full = np.empty((num_runs, *v.shape[1:]), dtype)
        full[...] = fill
        full[runs] = v
        out[k] = full
    return out


def to_host(tree):
    """A runner state as NumPy (typed keys as their raw data)."""
    return jax.tree.map(lambda x: np.asarray(jax.random.key_data(x) if is_key(x) else x), tree)


def take_runs(host, runs: np.ndarray, template):
    """The rows `runs` of a host runner state, typed as `template` (keys wrapped again)."""
    return jax.tree.map(lambda t, x: jax.random.wrap_key_data(jnp.asarray(x[runs]))
                        if is_key(t) else jnp.asarray(x[runs], t.dtype), template, host)


def put_runs(host, runs: np.ndarray, part):
    """A copy of the host runner state `host` with rows `runs` replaced by `part`'s."""
    def put(x, y):
        x = np.array(x)
        x[runs] = y
        return x
    return jax.tree.map(put, host, to_host(part))
