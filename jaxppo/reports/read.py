"""Reading run directories into groups of scores: one group per run, or per setting of a sweep.

A run's score per seed is its mean return over `eval.json`'s completed episodes when `jaxppo
eval` was run, else its final return from training (`summary.json`, or `metrics.csv`'s latest
return when a kill left no summary); the group says which (`SOURCES`). A seed with no finished
episode has no score: NaN here, counted as missing by the report, never as 0. A file that
cannot be read, or that does not belong to the run, is one UsageError line naming the fix.
"""

from __future__ import annotations

import os
from typing import NamedTuple

import numpy as np

from jaxppo.errors import UsageError
from jaxppo.labels import agents_label
from jaxppo.rundir import names
from jaxppo.rundir.eval import as_scores, eval_scores, run_list
from jaxppo.rundir.files import lock_holder
from jaxppo.rundir.ledger import halving_run_updates, is_halving
from jaxppo.rundir.metrics_csv import forward_fill
from jaxppo.rundir.reader import RunDir

SOURCES = {names.EVAL: "each seed's mean return over its `jaxppo eval` episodes (cut-off ones left out)",
           f"{names.EVAL} (greedy)": "each seed's mean return over its `jaxppo eval` episodes, played "
                                 "greedily (the policy's most likely action; cut-off ones left "
                                 "out)",
           f"{names.EVAL} (sampled)": "each seed's mean return over its `jaxppo eval --stochastic` "
                                  "episodes, actions sampled from the policy (cut-off ones left "
                                  "out)",
           names.SUMMARY: "each seed's final training return (its latest episodes)",
           names.METRICS: f"each seed's latest training return in {names.METRICS} (the run has no "
                          f"{names.SUMMARY})"}


class Group(NamedTuple):
    """One row of the report: a run's seeds, or one sweep setting's seeds."""

    label: str
    run_dir: str
    env_id: str
    setting: dict | None
    runs: list[int]  # indices into the run's seeds axis
    scores: np.ndarray  # [S] raw scores, NaN where a seed has none
    source: str  # "eval.json (greedy)" or "(sampled)", "summary.json" or "metrics.csv"
    curve_steps: np.ndarray | None  # [U] env steps per update, None without metrics.csv
    curve: np.ndarray | None  # [S, U] latest return per seed, NaN before its first episode
    diverged: tuple = ()  # entries of `runs` that diverged: no policy, so no score (NaN)
    updates: int | None = None  # updates its agents trained (a halving rung's, a group's own)


def read_run(run_dir: str, source: str = "auto") -> tuple[list[Group], list[str]]:
    """A run directory's groups (one, or one per sweep setting; a static sweep's: its groups'
    run directories') and notes on what was used."""
    if not os.path.isdir(run_dir):
        raise UsageError(f"'{run_dir}' is not a directory; pass run directories (runs/<name>)")
    if os.path.isfile(os.path.join(run_dir, names.PLAN)):
        return _read_static_sweep(run_dir, source)
    if not os.path.isfile(os.path.join(run_dir, names.CONFIG)) and run_dirs_in(run_dir):
        raise UsageError(no_scores(run_dir))  # a folder of runs (a --logdir), not a run
    notes: list[str] = []
    rd = RunDir(run_dir)
    summary_path = rd.file(names.SUMMARY)
    summary = rd.summary
    env_id = _env_id(rd, summary)
    key = env_key(run_dir, env_id)  # what the env is: a module of the run's may shadow the id
    metrics_path = os.path.join(run_dir, names.METRICS)
    # a halving sweep's stopped agents have no rows past their rung: every update is read,
    # and their curves end where they stopped (not the others' where the first one stopped)
    ragged = is_halving((summary or {}).get("search"))
    metrics = rd.curves(ragged)
    if not os.path.exists(metrics_path):
        notes.append(f"{run_dir}: no {names.METRICS}, so no sample-efficiency curve")
    curve = (forward_fill(metrics["episodic_return"], metrics["episodes"]) if metrics
             else None)
    if ragged and curve is not None:
        curve[np.isnan(metrics["update"])] = np.nan
    steps = np.nanmax(metrics["env_steps"], axis=0) if metrics else None
    last = int(np.nanmax(metrics["update"])) if metrics else None
    eval_path = os.path.join(run_dir, names.EVAL)
    if source == "eval" and not os.path.exists(eval_path):
        raise UsageError(f"'{run_dir}' has no {names.EVAL}; run jaxppo eval {run_dir} first, or "
                         "drop --source eval to use the final training returns")
    diverged = None  # the runs that diverged, as the file the scores come from says
    trained = None  # [R] the updates each run trained, where the file says
    if source != "final" and os.path.exists(eval_path):
        scores, info = rd.eval
        used, diverged, trained = names.EVAL, info["diverged"], info["updates_per_run"]
        if info["env_id"] not in (None, env_id):
            raise UsageError(f"'{eval_path}' evaluated {info['env_id']}, but the run trained on "
                             f"{env_id}; re-run jaxppo eval {run_dir}")
        if last is not None and isinstance(info["update"], int) and info["update"] < last:
            notes.append(f"{run_dir}: {names.EVAL} was played at update {info['update']}; the run "
                         f"has since reached update {last} (re-run jaxppo eval for the latest "
                         "policy)")
        if info["cut_off"]:
            notes.append(f"{run_dir}: {info['cut_off']} eval episode(s) were cut off at the step "
                         "cap and left out of the scores")
    elif summary is not None and "final_return" in summary:
        scores = as_scores(summary["final_return"], f"'{summary_path}' final_return")
        used = names.SUMMARY
    elif curve is not None:
        scores = curve[:, -1]
        used = names.METRICS
        # a run whose latest update is NaN/Inf diverged (a PBT member renewed since is not)
        diverged = [int(r) for r in np.flatnonzero(metrics["nonfinite"][:, -1] > 0)] \
            if "nonfinite" in metrics else []
        holder = lock_holder(run_dir)
        why = (f"the run is still training ({holder} holds it)" if holder
               else "the run was killed before writing it")
        notes.append(f"{run_dir}: no {names.SUMMARY} ({why}): scores are each seed's latest "
                     f"return in {names.METRICS}")
    else:
        raise UsageError(no_scores(run_dir))
    # the source as the report shows it: eval scores say how they were played
    shown = f"{used} ({info['actions']})" if used == names.EVAL and info["actions"] else used
    counts = {names.METRICS: None if curve is None else curve.shape[0],
              names.SUMMARY: summary.get("num_runs") if summary else None}
    for name, n in counts.items():
        if isinstance(n, int) and n != len(scores):
            fix = f"re-run jaxppo eval {run_dir}" if used == names.EVAL else \
                "move the file that does not belong to this run away"
            raise UsageError(f"'{run_dir}': {used} holds {len(scores)} seed(s) but {name} "
                             f"{n}; {fix}")
    if diverged is None:  # summary.json's, or an eval.json from before it recorded them
        diverged = run_list(summary.get("diverged_runs") or [], len(scores),
                             f"'{summary_path}' diverged_runs") if summary else []
    scores = np.array(scores, float)
    scores[diverged] = np.nan  # no policy, no score: named by the report, never averaged
    settings = summary.get("settings") if summary else None
    if settings is None and os.path.exists(os.path.join(run_dir, names.SWEEP)):
        raise UsageError(f"'{run_dir}' is a sweep without its {names.SUMMARY}, which names each "
                         f"agent's setting; rebuild it with: jaxppo sweep --resume {run_dir}")
    if trained is None and summary is not None and isinstance(summary.get("ranked"), list):
        trained = _ranked_updates(summary["ranked"], len(scores))
    if trained is None and ragged and last is not None and settings:  # before its ranked table
        try:
            trained = [int(u) for u in halving_run_updates(summary["search"],
                                                           len(scores) // len(settings), last)]
        except (KeyError, TypeError, ValueError, IndexError):
            trained = None
        if trained is not None and len(trained) != len(scores):
            trained = None
    if trained is None:  # every agent as far as the run went
        went = (last if metrics else
                (info["update"] if used == names.EVAL and isinstance(info["update"], int)
                 else None))
        trained = [went] * len(scores)
    if settings is None:
        return [Group(os.path.normpath(run_dir), run_dir, key, None, list(range(len(scores))),
                      scores, shown, steps, curve, tuple(diverged), _one(trained))], notes
    if not isinstance(settings, list) or not settings or len(scores) % len(settings):
        raise UsageError(f"'{summary_path}': its {len(scores)} seed(s) do not split into its "
                         f"settings; move it away and rebuild it with jaxppo sweep --resume "
                         f"{run_dir}")
    seeds = len(scores) // len(settings)
    groups = []
    for g, s in enumerate(settings):
        runs = list(range(g * seeds, (g + 1) * seeds))
        groups.append(Group(agents_label(runs, s), run_dir, key, dict(s), runs, scores[runs],
                            shown, steps, None if curve is None else curve[runs],
                            tuple(r for r in runs if r in diverged),
                            _one([trained[r] for r in runs])))
    if (summary.get("search") or {}).get("strategy") == "pbt":
        notes.append(f"{run_dir}: a PBT sweep: each member's hyperparameters changed while it "
                     "trained and its learner was copied from better members at exploits "
                     f"({names.HPARAMS}, {names.PBT}); the labels show its final hyperparameters")
    return groups, notes


def _one(updates: list) -> int | None:
    """A group's updates: its runs' most (they train alike; None where unknown)."""
    known = [u for u in updates if isinstance(u, int)]
    return max(known) if known else None


def _ranked_updates(ranked: list, num_runs: int) -> list | None:
    """[R] updates per run from a sweep summary's ranked rows (`runs`, `updates`)."""
    out = [None] * num_runs
    for row in ranked:
        if not isinstance(row, dict) or not isinstance(row.get("updates"), int):
            return None
        for r in row.get("runs") or []:
            if isinstance(r, int) and 0 <= r < num_runs:
                out[r] = row["updates"]
    return out if all(u is not None for u in out) else None


def _read_static_sweep(sweep_dir: str, source: str) -> tuple[list[Group], list[str]]:
    """A sweep over static settings: each group's run directory read as a run of its own, its
    settings labelled with the group's static values."""
    groups, notes, empty = [], [], []
    for name in run_dirs_in(sweep_dir):
        path = os.path.join(sweep_dir, name)
        try:
            inner, more = read_run(path, source)
        except UsageError as e:
            if f"holds no {names.EVAL}" not in str(e):
                raise
            empty.append(name)  # a group not started yet
            continue
        static = name.split("_", 1)[1] if name[:3].isdigit() and "_" in name else name
        groups += [g._replace(label=f"{static} / {g.label}" if g.setting is not None else static,
                              setting=({"group": name, **g.setting} if g.setting is not None
                                       else {"group": name}))
                   for g in inner]
        notes += more
    if not groups:
        raise UsageError(no_scores(sweep_dir))
    if empty:
        notes.append(f"{sweep_dir}: group(s) {', '.join(empty)} have nothing to score yet "
                     "(not started): left out")
    return groups, notes


def run_dirs_in(folder: str) -> list[str]:
    """The run directories directly inside `folder` (a static sweep's groups), sorted."""
    try:
        entries = sorted(os.listdir(folder))
    except OSError:
        return []
    return [n for n in entries if os.path.isfile(os.path.join(folder, n, names.CONFIG))]


def no_scores(run_dir: str) -> str:
    """The line for a directory with nothing to score: what it holds instead, if it holds run
    directories (a static sweep's groups, a --logdir)."""
    inner = run_dirs_in(run_dir)
    if inner:
        shown = " ".join(os.path.join(run_dir, n) for n in inner[:3])
        more = f" ... ({len(inner)} in all)" if len(inner) > 3 else ""
        static = os.path.isfile(os.path.join(run_dir, names.PLAN))
        why = ("a static sweep none of whose groups has anything to score yet" if static
               else "not a run")
        return (f"'{run_dir}' holds run directories ({why}); pass the runs to report: "
                f"jaxppo report {shown}{more}")
    return (f"'{run_dir}' holds no {names.EVAL}, {names.SUMMARY} or {names.METRICS}; is it a "
            "jaxppo run directory?")


def _env_id(rd: RunDir, summary: dict | None) -> str:
    """config.yaml's env first (what the run trained on); summary.json's when it is unreadable."""
    env_id = (rd.config or {}).get("env_id")
    if env_id is None and summary is not None:
        env_id = summary.get("env_id")
    if not isinstance(env_id, str):
        raise UsageError(f"'{rd.path}' has no readable {names.CONFIG} or {names.SUMMARY} naming its "
                         "env; is it a jaxppo run directory?")
    return env_id


def env_key(run_dir: str, env_id: str) -> str:
    """The env as a report keys it: its id, plus the modules the run imported first
    (`env_imports`, `--import`), which may register their own env under a known id (a
    `gymnasium/CartPole-v1` of yours is not Gymnasium's): runs pool only when both agree."""
    imports = (RunDir(run_dir).config or {}).get("env_imports") or []
    if not isinstance(imports, list) or not imports:
        return env_id
    return f"{env_id} (with --import {','.join(map(str, imports))})"


__all__ = ["SOURCES", "Group", "env_key", "eval_scores", "read_run"]
