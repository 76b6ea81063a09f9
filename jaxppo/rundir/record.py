"""What a checkpoint carries beside the learner state, as one typed record: the run's base
seed, its running account, a sweep's settings and search, a controller's state, the env
instance it trained on, and the rows its metrics.csv lost for good. Read and written here
only, so its layout (the checkpoint header's `extra`, a JSON object) has one owner.

Checkpoints written before a field existed lack it: every field has the default that such a
checkpoint means (a run before 0.2 kept its account in summary.json: `stats` None).
"""

from __future__ import annotations

import dataclasses
from typing import Any

VERSION = 3
"""The record's layout: 1 (before 0.2) had no `stats` (the account was in summary.json); 2 added
`stats`, `env`, `log_gaps`; 3 the per-agent `ledger`. A field absent from an older record reads
as its default (a ledger is then derived on read: `rundir.ledger.agent_ledger`)."""


@dataclasses.dataclass(frozen=True)
class RunRecord:
    """A checkpoint's record of its run (the header's `extra`).

    Attributes:
      seed: the run's base seed (every run's key derives from it).
      stats: the running account (`RunStats.to_dict`); None in a checkpoint from before 0.2.
      settings: a sweep's settings, one dict of float hyperparameters each; None: no sweep.
      env: the environment instance trained on (`envs.identity.describe_env`), if any.
      search: how a sweep's settings were found (strategy, space, trials, seed, ...); a
        halving sweep's record also holds its decisions so far (`kept`, `window`).
      controller: the state of the run's controller (PBT's members and return window).
      ledger: each agent's account (`rundir.ledger.Ledger.to_dict`: updates trained, the
        divergence that stands, the last renewal), written at every checkpoint; None in a
        checkpoint from before it (`rundir.ledger.agent_ledger` derives it).
      log_gaps: rows metrics.csv lacks for good, as (first, last) or (first, last, run)
        ranges of updates (`rundir/csv_log.encode_gaps`).
    """

    seed: int = 0
    stats: dict | None = None
    settings: list | None = None
    env: dict | None = None
    search: dict | None = None
    controller: dict | None = None
    log_gaps: tuple = ()
    ledger: dict | None = None

    @classmethod
    def from_extra(cls, extra: dict | None) -> RunRecord:
        """The record a checkpoint's `extra` holds (keys it does not know are ignored).

        Raises:
          ValueError: a field of another type than jaxppo writes (a header edited and signed
            again), naming the field.
        """
        extra = extra or {}
        _check_types(extra)
        return cls(seed=int(extra.get("seed", 0)), stats=extra.get("stats"),
                   settings=extra.get("settings"), env=extra.get("env"),
                   search=extra.get("search"), controller=extra.get("controller"),
                   log_gaps=tuple(tuple(g) for g in extra.get("log_gaps", [])),
                   ledger=extra.get("ledger"))

    def to_extra(self) -> dict[str, Any]:
        """The header's `extra`: the seed and account always, the rest only where set (the
        layout every jaxppo since 0.2 reads)."""
        extra: dict[str, Any] = {"seed": self.seed, "stats": self.stats}
        for key in ("settings", "env", "search", "controller", "ledger"):
            value = getattr(self, key)
            if value is not None:
                extra[key] = value
        if self.log_gaps:
            extra["log_gaps"] = [list(g) for g in self.log_gaps]
        return extra

    @property
    def controlled(self) -> bool:
        """A search strategy changes this run's population between chunks, so only that
        strategy can continue it: PBT keeps its `controller` state, a halving sweep its rungs
        in the search record."""
        return self.controller is not None or "rungs" in (self.search or {})

    @property
    def strategy(self) -> str | None:
        """The search strategy's name, if the run is a sweep that recorded one."""
        return (self.search or {}).get("strategy")


_STATS_NUMBERS = ("update", "wall_s", "run_s", "steps_timed")


def is_int(x) -> bool:
    """A whole number as JSON or msgpack gives it (a bool is not one)."""
    return isinstance(x, int) and not isinstance(x, bool)


def is_number(x) -> bool:
    """A number as JSON or msgpack gives it (a bool is not one)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _check_types(extra: dict) -> None:
    """Each field `from_extra` reads is of the type jaxppo writes, else a ValueError naming
    it: a traceback from deep inside a resume is no answer to an edited file."""
    wrong = []
    if "seed" in extra and not (is_int(extra["seed"]) and 0 <= extra["seed"] < 2**63):
        wrong.append("seed")
    stats = extra.get("stats")
    if stats is not None:
        if not isinstance(stats, dict):
            wrong.append("stats")
        else:
            wrong += [f"stats.{k}" for k in _STATS_NUMBERS
                      if k in stats and not (is_number(stats[k]) and abs(stats[k]) < 2**63)]
            wrong += [f"stats.{k}" for k in ("episodes", "final_return")
                      if k in stats and not (isinstance(stats[k], list) and all(
                          x is None or is_number(x) for x in stats[k]))]
    for key in ("env", "search", "controller", "ledger"):
        if extra.get(key) is not None and not isinstance(extra[key], dict):
            wrong.append(key)
    settings = extra.get("settings")
    if settings is not None and not (isinstance(settings, list) and all(
            isinstance(s, dict) and all(is_number(v) for v in s.values()) for s in settings)):
        wrong.append("settings")
    gaps = extra.get("log_gaps", [])
    if not (isinstance(gaps, list) and all(
            isinstance(g, list) and len(g) in (2, 3) and all(is_int(x) for x in g)
            for g in gaps)):
        wrong.append("log_gaps")
    if wrong:
        raise ValueError(f"{', '.join(wrong)} of another type than jaxppo writes")
