"""`evaluate`: every agent of a checkpoint played on the same fixed episodes in one compiled
program, as `EvalResult` (and `eval.json`), for per-agent and aggregate statistics."""

from __future__ import annotations

import json
import os
from typing import Any, NamedTuple

import jax
import numpy as np

from jaxppo.envs import VecEnv
from jaxppo.errors import UsageError
from jaxppo.labels import returns_text
from jaxppo.policy.diverged import diverged_agents
from jaxppo.policy.episodes import (
    evaluate_runs,
    max_episode_steps,
)
from jaxppo.policy.policy import is_int, updates_per_run
from jaxppo.process import StopFlag, native_work
from jaxppo.run.memory import check_eval_memory
from jaxppo.rundir.checkpoint import load_checkpoint
from jaxppo.rundir.eval import write_eval
from jaxppo.rundir.files import check_writable


def _zero_runs(x, runs: np.ndarray):
    """A [R, ...] leaf with the float entries of `runs` set to zero."""
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.floating):
        return x
    return np.where(runs.reshape((-1,) + (1,) * (x.ndim - 1)), np.zeros((), x.dtype), x)


class EvalResult(NamedTuple):
    """What `evaluate` returns: every run's episodes, for per-run and aggregate statistics.

    An episode still running at the evaluation's step cap (`max_steps`: the env's time limit,
    1000 where it states none) is cut off: `cut_off` marks it, its return is only the sum so
    far, and `mean_per_run` leaves it out. R = runs of the checkpoint, E = episodes.

    Attributes:
      returns: `[R, E]` float undiscounted returns (of a cut-off episode: the sum up to the
        cap).
      lengths: `[R, E]` int episode lengths.
      env_id: the environment evaluated on.
      update: updates the checkpoint had done.
      seed: the evaluation seed (the same episodes for every run).
      deterministic: the actions were the policy's mode (False: sampled).
      cut_off: `[R, E]` bool: still running at `max_steps`.
      max_steps: the step cap the episodes were played to.
      updates_per_run: `[R]` the updates each run itself trained (fewer than `update` for a
        halving agent stopped early).
    """

    returns: np.ndarray
    lengths: np.ndarray
    env_id: str
    update: int
    seed: int
    deterministic: bool
    cut_off: np.ndarray | None = None  # [R, E] bool: still running at `max_steps`
    max_steps: int | None = None  # the step cap the episodes were played to
    updates_per_run: list[int] | None = None  # [R] each run's own (a halving agent stopped early)
    # {run: how it diverged}: no policy; unless played anyway (`include_diverged`), its
    # returns are NaN, it has no mean and eval.json holds nulls for it
    diverged: dict[int, str] | None = None
    diverged_included: bool = False

    def __repr__(self) -> str:
        r, e = np.shape(self.returns)
        mean = [m for m in self.mean_per_run() if m is not None]
        how = "deterministic" if self.deterministic else "sampled"
        return (f"EvalResult({self.env_id}, {r} run(s) x {e} episodes, {how}, update "
                f"{self.update}, mean return per run {returns_text(mean)})")

    @property
    def scored(self) -> np.ndarray:
        """[R] bool: the runs that have returns (all but the diverged ones not played)."""
        ok = np.ones(self.returns.shape[0], bool)
        if self.diverged and not self.diverged_included:
            ok[list(self.diverged)] = False
        return ok

    @property
    def completed(self) -> np.ndarray:
        """[R, E] bool: the episodes that ended (terminated or hit the env's own limit)."""
        return (np.ones(self.returns.shape, bool) if self.cut_off is None
                else ~np.asarray(self.cut_off, bool))

    def mean_per_run(self) -> list[float | None]:
        """Each run's mean return over its completed episodes; None if none completed.

        Returns:
          `[R]` means, in the order of the checkpoint's runs.
        """
        done = self.completed
        return [float(r[d].mean()) if d.any() and ok else None
                for r, d, ok in zip(self.returns, done, self.scored, strict=True)]

    def to_dict(self) -> dict:
        """The JSON record `evaluate(..., out=path)` writes (what aggregate plots read).

        Returns:
          A JSON-able dict: `env_id`, `update`, `eval_seed`, `updates_per_run`,
            `deterministic` and `actions` (`"greedy"`, the default, or `"sampled"`),
            `episodes` (E), `returns` and `lengths` (`[R, E]` lists),
            `mean_per_run` (over completed episodes; null if none), `max_steps`, `cut_off`
            (`[R, E]`, true: still running at `max_steps`, its return the sum so far) and
            `cut_off_per_run` (`[R]` counts).
        """
        cut = ~self.completed
        ok = self.scored
        return {
            "env_id": self.env_id, "update": self.update, "eval_seed": self.seed,
            "updates_per_run": self.updates_per_run,
            "deterministic": self.deterministic,
            "actions": "greedy" if self.deterministic else "sampled",  # said in words too
            "episodes": int(self.returns.shape[1]),
            # a diverged agent not played: nulls (it has no return)
            "returns": [r.tolist() if k else [None] * len(r) for r, k in zip(
                self.returns, ok, strict=True)],
            "lengths": [r.tolist() if k else [None] * len(r) for r, k in zip(
                self.lengths, ok, strict=True)],
            "diverged_runs": sorted(self.diverged or {}),
            "diverged_included": bool(self.diverged_included and self.diverged),
            "mean_per_run": self.mean_per_run(),  # over completed episodes; null if none
            "max_steps": self.max_steps,
            "cut_off": cut.tolist(),  # true: still running at max_steps (return: sum so far)
            "cut_off_per_run": cut.sum(axis=1).tolist(),
        }


def evaluate(run_dir: str | os.PathLike, episodes: int = 10, *, seed: int = 0,
             deterministic: bool = True, out: str | os.PathLike | None = None,
             env: Any = None, env_params: Any = None,
             include_diverged: bool = False) -> EvalResult:
    """Play `episodes` episodes with every run of the checkpoint in `run_dir`, in one vmapped,
    jitted program; the episodes are fixed by `seed` and the same for every run. With `out`,
    also write `EvalResult.to_dict()` there as JSON. Episodes still running at the step cap are
    marked `cut_off` and left out of `mean_per_run()`.

    Every run faces the same start states and step randomness (common random numbers), so
    their returns differ by their policies, not by their luck: what per-seed aggregate
    statistics (`jaxppo.report`) need. Each of the E envs plays exactly one episode, up to the
    env's time limit (1000 steps where it states none).

    Args:
      run_dir: the run directory, its `checkpoint/` directory or the checkpoint file.
      episodes: E, the episodes each run plays (at least 1).
      seed: the evaluation seed, an integer in 0..2**32-1 (not a run index).
      deterministic: act with each policy's mode (True) or sample from it (False).
      out: a path to write the JSON record to (`EvalResult.to_dict()`); None writes nothing.
      env: the environment instance the run trained on, if it trained on one.
      env_params: that instance's params (default: its `default_params`).
      include_diverged: load an agent whose parameters or logged updates went NaN/Inf anyway.

    Returns:
      The `EvalResult`: returns and lengths `[R, E]` for every run of the checkpoint.

    Raises:
      CheckpointError: no checkpoint, or a corrupt or mismatched one.
      UsageError: `episodes` below 1, a bad `seed`, an `out` that cannot be written, or more
        parallel episodes (`runs x episodes`) than the device's free memory holds.
      StopNow: a stop signal (Ctrl-C, SIGTERM, SIGHUP) came: held while XLA compiles (a
        KeyboardInterrupt inside it crashes the process's exit), then raised before the
        episodes are played or `out` is written; a second signal at once.
    """
    with StopFlag() as stop, native_work():
        result = _evaluate(run_dir, episodes, seed, deterministic, out, env, env_params,
                           include_diverged)
        stop.check("while playing the episodes")
    if out is not None:
        with open(out, "w") as f:
            json.dump(result.to_dict(), f, indent=1)
    return result


def _evaluate(run_dir, episodes: int, seed: int, deterministic: bool, out, env, env_params,
              include_diverged: bool) -> EvalResult:
    if episodes < 1:
        raise UsageError(f"episodes must be at least 1, got {episodes}")
    if not is_int(seed) or not 0 <= int(seed) < 2**32:
        raise UsageError(f"evaluation seed {seed!r}: use an integer in 0..{2**32 - 1}")
    ckpt = load_checkpoint(run_dir, env=env, env_params=env_params)
    venv = VecEnv.from_config(ckpt.config, 1, env, env_params, evaluation=True)
    check_eval_memory(ckpt.config, ckpt.num_runs, episodes, env=venv)
    if out is not None:
        check_writable(out, "evaluation JSON")
    bad = diverged_agents(ckpt, run_dir)
    states = ckpt.runner_state.train_state
    skip = np.zeros(ckpt.num_runs, bool)
    if bad and not include_diverged:  # played with zeros (a uniform policy), then dropped:
        skip[list(bad)] = True  # NaN actions could make the env itself fail
        states = jax.tree.map(lambda x: _zero_runs(x, skip), states)
    returns, lengths, finished = evaluate_runs(ckpt.config, states, jax.random.key(seed),
                                               episodes, deterministic, env=env,
                                               env_params=env_params)
    returns = np.where(skip[:, None], np.nan, returns)
    lengths = np.where(skip[:, None], 0, lengths)
    finished = np.where(skip[:, None], True, finished)
    result = EvalResult(returns, lengths, ckpt.config.env_id, ckpt.update, seed, deterministic,
                        ~finished, max_episode_steps(venv), updates_per_run(ckpt), bad,
                        include_diverged)
    if out is not None:
        write_eval(out, result.to_dict())
    return result
