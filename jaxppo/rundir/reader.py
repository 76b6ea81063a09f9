"""`RunDir`: one run directory read through its format modules, each file read once, when first
asked. The one reader of a run's facts for evaluation, `load_policy`, reports and resume: its
config, its checkpoint's record, each agent's status (how far it trained, whether it diverged,
whether it was renewed: the record's ledger, derived for a checkpoint from before it), its
scores by source (eval.json, summary.json) and its curves (metrics.csv). It never builds a
search's controller.

Axis legend: R = agents (runs), U = updates.
"""

from __future__ import annotations

import functools
import os
from typing import NamedTuple

import numpy as np

from jaxppo.errors import UsageError
from jaxppo.rundir import names
from jaxppo.rundir.checkpoint import checkpoint_path, read_checkpoint
from jaxppo.rundir.eval import as_scores, eval_scores, load_json
from jaxppo.rundir.layout import read_yaml, run_dir_of
from jaxppo.rundir.ledger import Ledger, agent_ledger, is_halving
from jaxppo.rundir.metrics_csv import read_metrics_csv
from jaxppo.rundir.record import RunRecord


class AgentStatus(NamedTuple):
    """One agent of a run at its checkpoint."""

    run: int  # its index on the runs axis
    updates: int  # how far it trained
    diverged: int | None  # the update of its divergence that stands (None: healthy)
    renewed: int | None  # the update of its last renewal, a PBT exploit (None: never)


class RunDir:
    """A run directory, read through its files' format modules, each file once, when first
    asked: as `jaxppo eval` and `jaxppo report` read it (`load_policy` and a resume, which load
    the whole checkpoint anyway, read the same ledger from it).

    A file that is not there reads as None (a path that holds no run reads as empty: `config`
    and `record` None, `status()` []); a checkpoint that is there but damaged raises its
    one-line `CheckpointError` when the record is first asked for.

    Args:
        path: the run directory (what `jaxppo train` or a sweep's group wrote), its
            `checkpoint/` folder or the checkpoint file.
    """

    def __init__(self, path: str | os.PathLike):
        path = os.fspath(path)
        inside = os.path.basename(os.path.normpath(path)) == names.CHECKPOINT_DIR
        self.path = path if os.path.isdir(path) and not inside else run_dir_of(path)

    def file(self, name: str) -> str:
        """The path of one of its files (`names.*`)."""
        return os.path.join(self.path, name)

    @functools.cached_property
    def config(self) -> dict | None:
        """config.yaml as data (None where it is missing or unreadable)."""
        path = self.file(names.CONFIG)
        data = read_yaml(path) if os.path.isfile(path) else None
        return data if isinstance(data, dict) else None

    @functools.cached_property
    def header(self) -> dict | None:
        """The checkpoint's header, checked (None: no checkpoint was written)."""
        if not os.path.isfile(checkpoint_path(self.path)):
            return None
        return read_checkpoint(self.path, decode=False)[0]

    @property
    def record(self) -> RunRecord | None:
        """The checkpoint's record of the run (None: no checkpoint)."""
        return None if self.header is None else RunRecord.from_extra(self.header.get("extra"))

    @property
    def update(self) -> int | None:
        return None if self.header is None else int(self.header["update"])

    @property
    def num_runs(self) -> int | None:
        return None if self.header is None else int(self.header["num_runs"])

    @functools.cached_property
    def ledger(self) -> Ledger | None:
        """Each agent's account at the checkpoint: the record's, or derived once for a record
        from before it (None: no checkpoint)."""
        if self.header is None:
            return None
        return agent_ledger(self.record, self.num_runs, self.update, self.path)

    def status(self) -> list[AgentStatus]:
        """Every agent's status at the checkpoint (none without a checkpoint)."""
        led = self.ledger
        if led is None:
            return []
        return [AgentStatus(r, *cols) for r, cols in
                enumerate(zip(led.updates, led.diverged, led.renewed, strict=True))]

    @functools.cached_property
    def summary(self) -> dict | None:
        """summary.json (None where there is none); one that cannot be read, or is not a run
        summary, is a one-line UsageError naming the fix."""
        path = self.file(names.SUMMARY)
        if not os.path.exists(path):
            return None
        summary = load_json(path)
        if not isinstance(summary, dict):
            raise UsageError(f"'{path}' is not a run summary; move it away or resume the run "
                             "to rebuild it")
        return summary

    @functools.cached_property
    def eval(self) -> tuple[np.ndarray, dict] | None:
        """eval.json's per-agent scores and what else it says (`rundir.eval.eval_scores`);
        None where there is none. An unreadable one is a one-line UsageError."""
        path = self.file(names.EVAL)
        return eval_scores(path) if os.path.isfile(path) else None

    def scores(self) -> dict[str, np.ndarray]:
        """[R] scores per agent by source, for the sources the directory holds: eval.json's
        mean return over completed episodes, summary.json's final training return (NaN where
        an agent has none)."""
        out = {}
        if self.eval is not None:
            out[names.EVAL] = self.eval[0]
        if self.summary is not None and "final_return" in self.summary:
            out[names.SUMMARY] = as_scores(self.summary["final_return"],
                                           f"'{self.file(names.SUMMARY)}' final_return")
        return out

    @property
    def ragged(self) -> bool:
        """Its agents trained to different updates (a halving sweep's): each curve ends where
        its agent stopped."""
        search = (self.summary or {}).get("search")
        if search is None and self.header is not None:
            search = self.record.search
        return is_halving(search)

    def curves(self, ragged: bool | None = None) -> dict[str, np.ndarray]:
        """metrics.csv by column, [R, U] each ({} where it holds no rows or is missing; every
        update with a row where `ragged`, default `self.ragged`); a file that is not jaxppo's
        log, or cannot be read, is a one-line UsageError naming the fix."""
        path = self.file(names.METRICS)
        if not os.path.exists(path):
            return {}
        fix = (f"move it away (e.g. to {names.METRICS}.damaged) to report this run without "
               "its sample-efficiency curve")
        try:
            return read_metrics_csv(self.path, self.ragged if ragged is None else ragged)
        except UsageError as e:
            raise UsageError(f"{e}; {fix}") from None
        except OSError as e:
            raise UsageError(f"cannot read '{path}' ({e.strerror}); {fix}") from None
