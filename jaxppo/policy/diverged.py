"""Agents that diverged are not policies: a sweep keeps training past a diverged agent (and
checkpoints its NaN parameters), so evaluation and `load_policy` ask here which agents of a
checkpoint went NaN/Inf (in their parameters, or as the checkpoint's ledger records, since
their last PBT exploit) and refuse to play them unless asked to."""

from __future__ import annotations

import os

import numpy as np

from jaxppo.errors import UsageError
from jaxppo.run.divergence import diverged_runs
from jaxppo.rundir.layout import run_dir_of
from jaxppo.rundir.ledger import agent_ledger


class DivergedAgent(UsageError):
    """An agent that diverged was asked for as a policy (`load_policy`): its parameters are
    NaN/Inf, or it went NaN/Inf before its checkpoint."""


def diverged_agents(ckpt, run_dir: str | os.PathLike) -> dict[int, str]:
    """{run: how it diverged} for the checkpoint's runs that are no policy: a sweep goes on
    past a diverged agent and checkpoints it as it is (NaN/Inf parameters), and one whose
    divergence stands at the checkpoint (its record's ledger; since its last PBT renewal) is
    no more trustworthy where its parameters stayed finite."""
    ledger = agent_ledger(ckpt.record, ckpt.num_runs, ckpt.update,
                          run_dir_of(os.fspath(run_dir)))
    live = {r: u for r, u in enumerate(ledger.diverged) if u is not None}
    bad = diverged_runs(ckpt.runner_state, ckpt.num_runs, live)
    return {int(r): (f"diverged at update {live[int(r)]}" if int(r) in live
                     else "diverged (its parameters are NaN/Inf)")
            for r in np.flatnonzero(bad)}


def diverged_refusal(run_dir, seed: int, how: str, num_runs: int, bad: dict) -> str:
    healthy = [r for r in range(num_runs) if r not in bad]
    other = (f"pick one that did not: {_runs_text(healthy)}" if healthy
             else "every agent of this run diverged")
    return (f"agent {seed} of '{os.fspath(run_dir)}' {how}: it is no policy; {other} (or "
            "pass include_diverged=True, --include-diverged, to play it anyway)")


def _runs_text(runs: list[int]) -> str:
    """0, 2, 5 (at most 8 named)."""
    shown = ", ".join(map(str, runs[:8]))
    return shown + (f", ... ({len(runs)} in all)" if len(runs) > 8 else "")
