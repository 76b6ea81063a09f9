"""Divergence, read on the host: which runs' updates went NaN/Inf and from which source
(`core/metrics.NONFINITE_SOURCES`), from a chunk's metrics, from metrics.csv or from a
checkpoint's parameters, and the one line that says what happened and what to do about it.

Axis legend: R = runs, C = updates in a chunk.
"""

from __future__ import annotations

import jax
import numpy as np

from jaxppo.config import PPOConfig
from jaxppo.core.metrics import NONFINITE_SOURCES
from jaxppo.run.events import Divergence
from jaxppo.rundir.metrics_csv import nonfinite_rows

DIVERGENCE_HINT = ("lower lr or max_grad_norm, or turn on normalize_obs / normalize_reward "
                   "(see docs/reference/errors.md)")


def source_name(code: float) -> str:
    """`metrics["nonfinite_source"]`'s code as its source's name (an unknown code: "loss")."""
    code = int(code)
    return NONFINITE_SOURCES[code - 1] if 1 <= code <= len(NONFINITE_SOURCES) else "loss"


def run_divergences(metrics: dict[str, np.ndarray], first_update: int) -> list[Divergence]:
    """Each run's first non-finite update in a chunk (`update` counts from 1, as the CSV
    does), with its source: a sweep goes on past a diverged agent and records each one's."""
    bad = np.asarray(metrics["nonfinite"]) > 0  # [R, C]
    codes = np.asarray(metrics["nonfinite_source"])
    out = []
    for run in np.flatnonzero(bad.any(axis=1)):
        j = int(np.argmax(bad[run]))
        out.append(Divergence(int(run), first_update + j + 1, source_name(codes[run, j])))
    return out


def find_nonfinite(metrics: dict[str, np.ndarray], first_update: int) -> Divergence | None:
    """The chunk's earliest divergence (the first run at the earliest update); None when the
    chunk is clean."""
    found = run_divergences(metrics, first_update)
    return min(found, key=lambda d: (d.update, d.run)) if found else None


def describe_divergence(d: Divergence, config: PPOConfig, who: str | None = None
                        ) -> tuple[str, str]:
    """`(what happened, the fix)` for a diverged run, by its source: an env's NaN/Inf output
    or empty mask is the env's bug (no lr hint); a normaliser overflows on huge inputs.
    `who` names the run (a sweep's agent); by default its seed index."""
    at = f"at update {d.update} ({who or f'seed {d.run}'})"
    env = f"environment {config.env_id!r}"
    if d.source in ("env_obs", "env_reward"):
        what = "observations" if d.source == "env_obs" else "rewards"
        return (f"{env} returned NaN/Inf {what} {at}",
                "fix the env (jaxppo trains on what it returns; see docs/reference/errors.md)")
    if d.source == "action_mask":
        return (f"{env} gave an action mask that allows no action {at}",
                "every state must allow at least one action (MultiDiscrete: one value of each "
                "sub-action): fix the env's action mask")
    if d.source == "normaliser":
        keys = [k for k in ("normalize_obs", "normalize_reward") if getattr(config, k)]
        return (f"training diverged: NaN/Inf in the {' and '.join(keys)} statistics {at} (the "
                "env's values are too large for float32 running statistics: above ~1e19 their "
                "square overflows)",
                f"scale the env's values down, or turn off {' / '.join(keys)}")
    what = ("the loss, gradients or parameters" if d.source == "loss"
            else "the parameters or optimizer state")
    return f"training diverged: NaN/Inf in {what} {at}", DIVERGENCE_HINT


def logged_divergences(run_dir: str, num_runs: int, upto: int, after: np.ndarray | None
                       ) -> tuple[dict[int, Divergence], dict[int, Divergence]]:
    """Each run's first divergence as metrics.csv recorded it up to the checkpoint's update
    `upto` (what a resumed or rebuilt sweep knew before its checkpoint), and each run's first
    after update `after[run]` (a PBT member's renewal; with `after` None, the same), from one
    read of the log."""
    first: dict[int, Divergence] = {}
    live: dict[int, Divergence] = {}
    for run, update, code in nonfinite_rows(run_dir, num_runs, upto):
        d = Divergence(run, update, source_name(code))
        kept = [first] if after is not None and d.update <= after[d.run] else [first, live]
        for out in kept:
            if d.run not in out or d.update < out[d.run].update:
                out[d.run] = d
    return first, live


def diverged_runs(runner, num_runs: int, live: dict[int, Divergence]) -> np.ndarray:
    """[R] runs that went NaN/Inf: with a divergence in `live` (metrics.csv's, since a PBT
    member's renewal) or holding non-finite parameters in the checkpoint."""
    bad = np.zeros(num_runs, bool)
    for x in jax.tree.leaves(jax.device_get(runner.train_state)):
        x = np.asarray(x)
        if np.issubdtype(x.dtype, np.floating):
            bad |= ~np.isfinite(x.reshape(num_runs, -1)).all(axis=1)
    bad[list(live)] = True
    return bad
