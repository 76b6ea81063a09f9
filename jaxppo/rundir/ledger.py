"""Each agent's account of a run, as its checkpoint records it (the record's `ledger`): how far
it trained, the update of its divergence that still stands (the first since its last renewal),
and the update of its last renewal (a PBT exploit that copied a healthy parent into it). The
run loop writes it at every checkpoint, so a reader (evaluation, `load_policy`, a report) asks
the record, never a search's controller.

A checkpoint from before the ledger (layout 0) has it derived once on read (`agent_ledger`):
from the search record (a halving sweep's rungs: how far each setting went), PBT's saved
controller state (`last_exploit`) and metrics.csv up to the checkpoint (the divergences).

Axis legend: R = agents (runs).
"""

from __future__ import annotations

import dataclasses
import os

from jaxppo.rundir import names
from jaxppo.rundir.metrics_csv import nonfinite_rows
from jaxppo.rundir.record import is_int

VERSION = 1
"""1: `updates`, `diverged`, `renewed` (R each). 0: no ledger in the record (derived)."""


@dataclasses.dataclass(frozen=True)
class Ledger:
    """Per agent: `updates` trained; `diverged`, the update of its first NaN/Inf since its last
    renewal (None: it has none standing); `renewed`, the update of its last renewal (None:
    never renewed)."""

    updates: tuple
    diverged: tuple
    renewed: tuple

    def to_dict(self) -> dict:
        return {"version": VERSION, "updates": list(self.updates),
                "diverged": list(self.diverged), "renewed": list(self.renewed)}

    @classmethod
    def from_dict(cls, d, num_runs: int) -> Ledger | None:
        """The ledger a record holds; None where it holds none, or one not of `num_runs`
        agents of whole numbers (then it is derived as for an older record)."""
        if not isinstance(d, dict):
            return None
        cols = [d.get(k) for k in ("updates", "diverged", "renewed")]
        if not all(isinstance(c, list) and len(c) == num_runs for c in cols):
            return None
        if not all(is_int(u) for u in cols[0]) or not all(
                u is None or is_int(u) for c in cols[1:] for u in c):
            return None
        return cls(*(tuple(c) for c in cols))

    @property
    def diverged_runs(self) -> list[int]:
        """The agents whose divergence stands (each one's first since its last renewal)."""
        return [r for r, u in enumerate(self.diverged) if u is not None]


def make_ledger(num_runs: int, update: int, run_updates=None, diverged: dict | None = None,
                renewed=None) -> Ledger:
    """A ledger from what a live run knows: `run_updates` [R] (None: every agent `update`),
    `diverged` {agent: update of its standing divergence}, `renewed` [R] (-1: never; None: no
    agent is ever renewed)."""
    updates = ([int(update)] * num_runs if run_updates is None
               else [int(u) for u in run_updates])
    diverged = diverged or {}
    return Ledger(tuple(updates),
                  tuple(None if r not in diverged else int(diverged[r]) for r in range(num_runs)),
                  tuple(None if renewed is None or int(renewed[r]) < 0 else int(renewed[r])
                        for r in range(num_runs)))


def is_halving(search: dict | None) -> bool:
    """A successive-halving sweep's search record."""
    return isinstance(search, dict) and search.get("strategy") == "halving"


def setting_updates(record: dict, update: int) -> list[int]:
    """[N] how far each setting of a halving sweep has trained at `update`: the end of the last
    rung it was kept for (no further than `update`)."""
    out = [0] * record["trials"]
    for end, kept in zip(record["rungs"], record["kept"], strict=False):
        for g in kept:
            out[g] = min(end, update)
    return out


def halving_run_updates(record: dict, seeds: int, update: int) -> list[int]:
    """[R] updates each agent of a halving sweep has trained (its setting's, for each seed)."""
    return [u for u in setting_updates(record, update) for _ in range(seeds)]


def trained_updates(record, num_runs: int, update: int) -> list[int]:
    """[R] how far each agent of a checkpoint trained: its ledger's, or (a record from before
    the ledger) the checkpoint's update, a halving sweep's from its rungs."""
    ledger = Ledger.from_dict(record.ledger, num_runs)
    if ledger is not None:
        return list(ledger.updates)
    search = record.search
    if is_halving(search) and "rungs" in search and record.settings:
        try:
            went = halving_run_updates(search, num_runs // len(record.settings), update)
            if len(went) == num_runs:
                return [int(u) for u in went]
        except (KeyError, TypeError, ValueError, IndexError):
            pass
    return [int(update)] * num_runs


def _renewed(record, num_runs: int) -> list:
    """[R] a PBT record's last exploit per member (its saved controller state; -1, or a state
    from before it was kept: never)."""
    last = (record.controller or {}).get("last_exploit") if record.strategy == "pbt" else None
    if not (isinstance(last, list) and len(last) == num_runs and all(map(is_int, last))):
        return [-1] * num_runs
    return last


_DERIVED: dict = {}


def agent_ledger(record, num_runs: int, update: int, run_dir: str | None) -> Ledger:
    """The checkpoint's ledger (`record`: its `RunRecord`); for a record from before the
    ledger, derived from the record and `run_dir`'s metrics.csv up to `update` (read once per
    version of the file: a notebook loading every agent of a big sweep does not parse it again
    for each)."""
    ledger = Ledger.from_dict(record.ledger, num_runs)
    if ledger is not None:
        return ledger
    updates = trained_updates(record, num_runs, update)
    renewed = _renewed(record, num_runs)
    key = None
    if run_dir is not None:
        try:
            st = os.stat(os.path.join(run_dir, names.METRICS))
            key = (os.path.realpath(run_dir), st.st_mtime_ns, st.st_size, num_runs, update,
                   tuple(renewed))
        except OSError:
            key = None
    if key is not None and key in _DERIVED:
        return _DERIVED[key]
    diverged: dict[int, int] = {}
    if run_dir is not None:
        for run, u, _ in nonfinite_rows(run_dir, num_runs, update):
            if u > renewed[run] and (run not in diverged or u < diverged[run]):
                diverged[run] = u
    ledger = make_ledger(num_runs, update, updates, diverged, renewed)
    if key is not None:
        if len(_DERIVED) >= 8:
            _DERIVED.pop(next(iter(_DERIVED)))
        _DERIVED[key] = ledger
    return ledger
