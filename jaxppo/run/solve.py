"""The solve rule, on its own: a run counts as solved once the mean over seeds of each seed's
mean return over its last SOLVE_WINDOW episodes reaches the env's threshold. One lucky episode
is not a solve.

Apart from `stats.py` (which uses `SolveTracker` from here) because the PyTorch systems of
`jaxppo compare` are judged by this same code in processes that import no JAX
(`compare/torch_child.py`), and `stats.py` reads the env registry's thresholds, which imports
the suites' adapters.
"""

from __future__ import annotations

import functools

import numpy as np

SOLVE_WINDOW = 20
"""Episodes per seed in the solve window (Gymnasium defines its thresholds over 100 episodes;
20 keeps short runs meaningful)."""


def quiet_nonfinite(fn):
    """`fn` without numpy's RuntimeWarnings about NaN/Inf (the mean of a diverged run's
    returns): a run's non-finite numbers are reported once, in the divergence line."""
    @functools.wraps(fn)
    def quiet(*args, **kwargs):
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            return fn(*args, **kwargs)
    return quiet


class SolveTracker:
    """The solve rule, fed one update (or one SB3 rollout) at a time, so jaxppo and the PyTorch
    pipeline in `jaxppo compare` are judged by the same code."""

    def __init__(self, threshold: float | None, num_runs: int, history: list | None = None):
        self.threshold = threshold
        self.history: list[list[tuple[float, float]]] = (
            [[tuple(h) for h in run] for run in history] if history else [[] for _ in range(num_runs)])

    @quiet_nonfinite
    def add(self, mean_returns, counts) -> bool:
        """Record each run's (mean return, episode count) of one update; True once solved."""
        window = []
        for r, hist in enumerate(self.history):
            if counts[r] > 0:
                hist.append((float(mean_returns[r]), float(counts[r])))
                self._trim(hist)
            window.append(self._trailing_mean(hist))
        return (self.threshold is not None and all(w is not None for w in window)
                and float(np.mean(window)) >= self.threshold)

    @staticmethod
    def _trim(history: list) -> None:
        """Keep only the updates the window can still reach (O(window) memory, small state)."""
        count = 0.0
        for i in range(len(history) - 1, -1, -1):
            count += history[i][1]
            if count >= SOLVE_WINDOW:
                del history[:i]
                return

    @staticmethod
    def _trailing_mean(history: list[tuple[float, float]]) -> float | None:
        """Episode-weighted mean return over the last >= SOLVE_WINDOW episodes, or None."""
        total = count = 0.0
        for mean, n in reversed(history):
            total += mean * n
            count += n
            if count >= SOLVE_WINDOW:
                return total / count
        return None
