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
      log_gaps: rows metrics.csv lacks for good, as (first, last) or (first, last, run)
        ranges of updates (`run/logs/audit.encode_gaps`).
    """

    seed: int = 0
    stats: dict | None = None
    settings: list | None = None
    env: dict | None = None
    search: dict | None = None
    controller: dict | None = None
    log_gaps: tuple = ()

    @classmethod
    def from_extra(cls, extra: dict | None) -> RunRecord:
        """The record a checkpoint's `extra` holds (keys it does not know are ignored)."""
        extra = extra or {}
        return cls(seed=int(extra.get("seed", 0)), stats=extra.get("stats"),
                   settings=extra.get("settings"), env=extra.get("env"),
                   search=extra.get("search"), controller=extra.get("controller"),
                   log_gaps=tuple(tuple(g) for g in extra.get("log_gaps", [])))

    def to_extra(self) -> dict[str, Any]:
        """The header's `extra`: the seed and account always, the rest only where set (the
        layout every jaxppo since 0.2 reads)."""
        extra: dict[str, Any] = {"seed": self.seed, "stats": self.stats}
        for key in ("settings", "env", "search", "controller"):
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
