"""The episode bookkeeping every PyTorch system of `jaxppo compare` reports with, as SB3's
callback does (`sb3_run.run_sb3`): per update, the mean return of the episodes that ended in
its rollout goes into the same solve rule as jaxppo's (`solve.SolveTracker`); the final return
is that mean of the last update in which an episode ended."""

from __future__ import annotations

import time

import numpy as np

from jaxppo.run.solve import SolveTracker


class EpisodeLog:
    """Episode returns in, solve time and final return out (wall times from `t0`)."""

    def __init__(self, threshold: float | None, t0: float):
        self.tracker, self.t0 = SolveTracker(threshold, 1), t0
        self.episodes: list[float] = []
        self.final: float | None = None
        self.solve_s: float | None = None
        self.solve_steps: int | None = None

    def add(self, returns) -> None:
        """Returns of episodes that ended this step."""
        self.episodes += [float(r) for r in returns]

    def end_update(self, env_steps: int) -> None:
        """One update's rollout is over: feed the solve rule."""
        eps = self.episodes
        if eps:
            self.final = float(np.mean(eps))
        solved = self.tracker.add([np.mean(eps) if eps else 0.0], [len(eps)])
        if solved and self.solve_s is None:
            self.solve_s, self.solve_steps = time.perf_counter() - self.t0, env_steps
        self.episodes = []

    def result(self, setup_s: float, run_s: float, done: int, want: int, threads: int) -> dict:
        """The child's result line (`compare.run_system`'s keys)."""
        return {"setup_s": setup_s, "run_s": run_s, "env_steps": done,
                "status": "finished" if done >= want else "stopped", "sps": done / run_s,
                "threads": threads, "solve_s": self.solve_s, "solve_steps": self.solve_steps,
                "final_return": self.final}
