"""The statistics of a report, as Agarwal et al. (2021, "Deep RL at the edge of the statistical
precipice"; the `rliable` library) define them: mean, median, interquartile mean (IQM) and
optimality gap, stratified-bootstrap percentile intervals, performance profiles.

Pure NumPy functions of score arrays whose last axis is seeds, so one call evaluates every
bootstrap resample at once; no files. They match rliable's definitions (rliable itself is not a
dependency: its `arch` needs a pandas older than the pinned one); tests/unit/reports/test_report.py checks
them against hand-computed values and rliable's own numbers.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

CI = 0.95


# statistics over the last axis (seeds): [..., N] -> [...]
def iqm(scores: np.ndarray) -> np.ndarray:
    """Interquartile mean: the mean of the scores left after cutting int(N / 4) from each end,
    as `scipy.stats.trim_mean(x, 0.25)` and rliable's `aggregate_iqm` do (no fractional
    weighting: N = 10 keeps the middle 6). For N < 4 nothing is cut: the plain mean."""
    x = np.sort(np.asarray(scores, float), axis=-1)
    n = x.shape[-1]
    cut = int(0.25 * n)
    return x[..., cut:n - cut].mean(axis=-1)


def optimality_gap(scores: np.ndarray, gamma: float) -> np.ndarray:
    """How far the scores fall short of `gamma` on average, scores above it counting as
    `gamma`: mean(max(0, gamma - x)), rliable's `aggregate_optimality_gap`."""
    return np.maximum(0.0, gamma - np.asarray(scores, float)).mean(axis=-1)


def aggregate(parts: Sequence[np.ndarray], gamma: float | None) -> dict[str, np.ndarray]:
    """The four statistics of scores split into parts (runs or settings, each [..., N_g]), as
    rliable defines them over tasks: IQM and optimality gap pool every seed; mean and median
    are over the parts' means (each part weighs the same). Of one part, the median is its
    seeds' median (rliable's median of one task's mean would only repeat the mean)."""
    parts = [np.asarray(p, float) for p in parts]
    pooled = np.concatenate(parts, axis=-1)
    means = np.stack([p.mean(axis=-1) for p in parts], axis=-1)
    out = {"mean": means.mean(axis=-1),
           "median": np.median(parts[0] if len(parts) == 1 else means, axis=-1),
           "iqm": iqm(pooled)}
    if gamma is not None:
        out["optimality_gap"] = optimality_gap(pooled, gamma)
    return out


def stratified_resamples(groups: Sequence[np.ndarray], reps: int,
                         rng: np.random.Generator) -> list[np.ndarray]:
    """[reps, N_g] per group: each group's N_g seeds drawn with replacement, independently per
    group (the strata): rliable's StratifiedBootstrap over runs, per task."""
    return [np.asarray(g, float)[rng.integers(0, len(g), (reps, len(g)))] for g in groups]


def percentile_interval(samples: np.ndarray, ci: float = CI) -> np.ndarray:
    """[2, ...]: the percentile interval of bootstrap `samples` [reps, ...] (arch's
    'percentile' method, which rliable uses: numpy's linear-interpolated percentiles)."""
    tail = round(100 * (1 - ci) / 2, 9)  # 2.5, not 2.5000000000000022
    return np.percentile(samples, [tail, 100 - tail], axis=0)


def interval_estimates(groups: Sequence[np.ndarray], gamma: float | None, reps: int,
                       rng: np.random.Generator) -> dict[str, dict]:
    """Every statistic of the joined `groups` (each a 1-D array of finite scores) with its
    stratified-bootstrap interval: {name: {"value", "ci": [low, high] or None}}. A single seed
    per group has no interval (every resample is the same: a zero width that says nothing)."""
    point = aggregate(groups, gamma)
    boot = aggregate(stratified_resamples(groups, reps, rng), gamma)
    spread = max(len(g) for g in groups) > 1
    return {k: {"value": float(v),
                "ci": percentile_interval(boot[k]).tolist() if spread else None}
            for k, v in point.items()}


def profile(groups: Sequence[np.ndarray], taus: np.ndarray, reps: int,
            rng: np.random.Generator) -> dict[str, list]:
    """A performance profile: the fraction of seeds scoring above each tau ([T]), with its
    stratified-bootstrap band (rliable's `run_score_distribution`)."""
    point = _fraction_above(np.concatenate(groups)[None], taus)[0]
    boot = _fraction_above(np.concatenate(stratified_resamples(groups, reps, rng), axis=1), taus)
    low, high = percentile_interval(boot)
    return {"fraction": point.tolist(), "ci_low": low.tolist(), "ci_high": high.tolist()}


def _fraction_above(x: np.ndarray, taus: np.ndarray) -> np.ndarray:
    """[B, T]: per row of x [B, N], the fraction of its N scores above each tau (one tau at a
    time: [B, N, T] at once would be reps x seeds x taus booleans)."""
    return np.stack([(x > t).mean(axis=-1) for t in taus], axis=-1)


__all__ = ["CI", "aggregate", "interval_estimates", "iqm", "optimality_gap",
           "percentile_interval", "profile", "stratified_resamples"]
