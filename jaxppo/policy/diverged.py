"""Agents that diverged are not policies: a sweep keeps training past a diverged agent (and
checkpoints its NaN parameters), so evaluation and `load_policy` ask here which agents of a
checkpoint went NaN/Inf (in their parameters, or in metrics.csv up to the checkpoint, since
their last PBT exploit) and refuse to play them unless asked to."""

from __future__ import annotations

import os

import numpy as np

from jaxppo.errors import UsageError
from jaxppo.run.divergence import diverged_runs, logged_divergences
from jaxppo.rundir import names
from jaxppo.rundir.layout import run_dir_of
from jaxppo.search.strategies import controller_for


class DivergedAgent(UsageError):
    """An agent that diverged was asked for as a policy (`load_policy`): its parameters are
    NaN/Inf, or it went NaN/Inf before its checkpoint."""


def diverged_agents(ckpt, run_dir: str | os.PathLike) -> dict[int, str]:
    """{run: how it diverged} for the checkpoint's runs that are no policy: a sweep goes on
    past a diverged agent and checkpoints it as it is (NaN/Inf parameters), and one whose
    metrics.csv records a divergence up to the checkpoint (since its last PBT renewal) is no
    more trustworthy where its parameters stayed finite."""
    controller = controller_for(ckpt.config, ckpt.record, ckpt.num_runs)
    renewed = None
    if controller is not None:  # a PBT member renewed by an exploit is healthy again
        controller.start(None, ckpt.update, ckpt.record.controller)
        renewed = controller.renewed_since()
    folder = run_dir_of(os.fspath(run_dir))
    after = None if renewed is None else tuple(int(u) for u in renewed)
    try:
        live = _logged(folder, ckpt.num_runs, ckpt.update, after)
    except (UsageError, OSError):  # an unreadable log: the parameters alone say
        live = {}
    bad = diverged_runs(ckpt.runner_state, ckpt.num_runs, live)
    return {int(r): (f"diverged at update {live[int(r)].update}" if int(r) in live
                     else "diverged (its parameters are NaN/Inf)")
            for r in np.flatnonzero(bad)}


_LOGGED: dict = {}


def _logged(folder: str, num_runs: int, update: int, after: tuple | None) -> dict:
    """`logged_divergences`' live ones, read once per version of metrics.csv (a notebook
    loading every agent of a big sweep does not parse its log again for each)."""
    log = os.path.join(folder, names.METRICS)
    try:
        st = os.stat(log)
        key = (os.path.realpath(log), st.st_mtime_ns, st.st_size, num_runs, update, after)
    except OSError:
        key = None
    if key is not None and key in _LOGGED:
        return _LOGGED[key]
    _, live = logged_divergences(folder, num_runs, update,
                                 None if after is None else np.asarray(after, int))
    if key is not None:
        if len(_LOGGED) >= 8:
            _LOGGED.pop(next(iter(_LOGGED)))
        _LOGGED[key] = live
    return live


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
