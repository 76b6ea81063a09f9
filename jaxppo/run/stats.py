"""A run's running account, kept on the host chunk by chunk: episodes, the solve point, SPS
and the latest returns. It is what `summary.json` reports and what a checkpoint carries, so a
resumed run continues the account instead of restarting it.

The solve rule itself (`SolveTracker`, `SOLVE_WINDOW`) is in `solve.py`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from jaxppo.envs.registry import is_replaced_builtin, solve_thresholds
from jaxppo.run.solve import SolveTracker

SOLVE_THRESHOLDS: dict[str, float] = solve_thresholds()
"""Env id -> the mean return that counts as solved, as each suite's adapter states it (its
`SOLVE_THRESHOLDS`: gymnax's from Gymnasium's reward_threshold, Brax's from its MuJoCo twin's)."""


def solve_threshold(env_id: str) -> float | None:
    """The env's solve threshold; none for a built-in id replaced by `register_env(...,
    overwrite=True)` (the threshold belongs to the built-in env)."""
    return None if is_replaced_builtin(env_id) else SOLVE_THRESHOLDS.get(env_id)


def returns_or_none(returns) -> list[float | None]:
    """Returns as JSON: NaN (no episode ended, so no return) becomes None (null)."""
    return [None if np.isnan(x) else float(x) for x in np.asarray(returns, float)]


def mean_std_or_none(returns) -> tuple[float | None, float | None]:
    """Mean and std over the runs that have a finite return (no episode ended: NaN; a run
    that diverged: NaN/Inf, flagged as such elsewhere); `(None, None)` if none has."""
    have = np.asarray(returns, float)
    have = have[np.isfinite(have)]
    if have.size == 0:
        return None, None
    return float(np.mean(have)), float(np.std(have))


@dataclasses.dataclass
class RunStats:
    """The running account of `num_runs` runs. `wall_s` and `run_s` include earlier sessions of
    a resumed run; SPS counts compiled chunks only (compile and host work excluded)."""

    env_id: str
    num_runs: int
    batch_size: int
    update: int = 0
    episodes: np.ndarray | None = None  # [R] episodes finished so far
    final_return: np.ndarray | None = None  # [R] the latest mean episodic return; NaN: none ended
    solved: dict | None = None
    wall_before: float = 0.0  # wall seconds of earlier sessions
    run_s: float = 0.0  # seconds spent in compiled chunks
    steps_timed: int = 0  # env steps per run in those seconds
    tracker: SolveTracker | None = None

    def __post_init__(self):
        if self.episodes is None:
            self.episodes = np.zeros(self.num_runs)
        if self.final_return is None:
            self.final_return = np.full(self.num_runs, np.nan)
        if self.tracker is None:
            self.tracker = SolveTracker(solve_threshold(self.env_id), self.num_runs)

    @property
    def threshold(self) -> float | None:
        return self.tracker.threshold

    @property
    def sps_per_run(self) -> float:
        return self.steps_timed / max(self.run_s, 1e-9)

    def add_chunk(self, metrics: dict[str, np.ndarray], first: int, wall_s: float,
                  chunk_s: float, active: np.ndarray | None = None) -> None:
        """Account for one chunk: `metrics` leaves [R, C] of updates `first + 1 .. first + C`;
        `wall_s` is this session's wall time at its end. `active` [R]: the runs the chunk
        stepped (None: all); the others keep their account (a halving sweep's stopped ones)."""
        C = metrics["episodes"].shape[1]
        update = first + C
        share = 1.0 if active is None else float(np.mean(active))
        self.steps_timed += round(C * self.batch_size * share)  # the average run's: SPS is true
        self.run_s += chunk_s
        if self.solved is None and self.threshold is not None:
            for c in range(C):
                if self.tracker.add(metrics["episodic_return"][:, c], metrics["episodes"][:, c]):
                    # The wall second inside a chunk is interpolated: updates take equal time.
                    wall = self.wall_before + wall_s - chunk_s * (C - c - 1) / C
                    episodes = self.episodes + metrics["episodes"][:, : c + 1].sum(1)
                    self.solved = {"env_steps": int(metrics["env_steps"][0, c]),
                                   "update": first + c + 1, "episodes": float(np.mean(episodes)),
                                   "wall_s": round(float(wall), 3), "threshold": self.threshold}
                    break
        self.episodes = self.episodes + metrics["episodes"].sum(1)
        # A run none of whose episodes has ended has no return (the runner of a checkpoint
        # from before NaN marked that carried 0.0).
        final = np.where(self.episodes > 0,
                         np.asarray(metrics["episodic_return"][:, -1], float), np.nan)
        self.final_return = final if active is None else np.where(active, final, self.final_return)
        self.update = update

    def to_dict(self, wall_s: float) -> dict[str, Any]:
        """What a checkpoint carries (JSON-able, a copy): `wall_s` is the run's total so far.
        A run without a return is None (JSON's null), not NaN (which JSON lacks)."""
        return {"update": self.update, "episodes": self.episodes.tolist(),
                "final_return": returns_or_none(self.final_return), "solved": self.solved,
                "wall_s": wall_s, "run_s": self.run_s, "steps_timed": self.steps_timed,
                "solve_history": [[list(h) for h in run] for run in self.tracker.history]}

    @classmethod
    def from_dict(cls, d: dict, env_id: str, num_runs: int, batch_size: int) -> RunStats:
        episodes = np.asarray(d["episodes"], float)
        final = np.array([np.nan if x is None else x for x in d["final_return"]], float)
        # Accounts saved before "no episode" was NaN/None hold 0.0 for such runs.
        final = np.where(episodes > 0, final, np.nan)
        return cls(env_id, num_runs, batch_size, update=int(d["update"]), episodes=episodes,
                   final_return=final, solved=d.get("solved"),
                   wall_before=float(d["wall_s"]), run_s=float(d["run_s"]),
                   steps_timed=int(d["steps_timed"]),
                   tracker=SolveTracker(solve_threshold(env_id), num_runs,
                                        d.get("solve_history")))
