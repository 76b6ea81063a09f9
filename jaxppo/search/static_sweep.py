"""A sweep whose settings differ in static keys (`jaxppo.search.static`): one `Experiment`
(one compile) per static setting, one after another, each in a run directory of its own
inside the sweep's, and one table over all of them.

A static sweep's directory:

    SWEEP_DIR/static_sweep.json       the plan: config, settings, seeds, groups (what resume reads)
    SWEEP_DIR/000_num_minibatches=2/  a normal sweep run dir per static setting (checkpoint,
    SWEEP_DIR/001_num_minibatches=4/  metrics.csv, config.yaml, its own sweep.csv, ...)
    SWEEP_DIR/sweep.csv, sweep.png, summary.json   the table over every setting (`group`
                                      names the run dir that holds a row's `runs`)
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from jaxppo.config import PPOConfig, config_from_dict
from jaxppo.errors import CheckpointError, ConfigError, UsageError
from jaxppo.labels import listed, setting_label
from jaxppo.run.driver import Driver
from jaxppo.run.experiment import Experiment, print_note
from jaxppo.run.placement import make_placement
from jaxppo.run.solve import quiet_nonfinite
from jaxppo.run.sweep_table import rank_settings
from jaxppo.rundir import names
from jaxppo.rundir.checkpoint import checkpoint_path, read_checkpoint
from jaxppo.rundir.files import RunLock, free_name
from jaxppo.rundir.layout import check_config_file, make_run_dir, read_yaml
from jaxppo.rundir.plan import FILE as PLAN_FILE
from jaxppo.rundir.plan import checksum_fails, edited_plan, load_plan, table_problems, write_plan
from jaxppo.rundir.summary import summary_problem, write_summary
from jaxppo.rundir.sweep_csv import sweep_title, write_sweep_files
from jaxppo.search.static import (
    Group,
    group_config,
    group_rows,
    group_settings,
    normalize,
    traced_settings,
)
from jaxppo.search.table import SweepResult


class Outcome(NamedTuple):
    """What one group's run left: from its `RunResult`, or from its summary.json when it had
    finished before this session."""

    status: str  # the group's: finished, diverged (every agent), stopped, error
    final_return: np.ndarray  # [R] NaN where no episode ended
    diverged: np.ndarray  # [R] bool
    summary: dict  # its summary.json


class StaticSweep:
    """A sweep whose settings differ in static keys: one `Experiment` (one compile) per
    static setting, run one after another in the same process, each in a run directory of
    its own inside the sweep's (its plan, static_sweep.json, lists them); then one table over all settings.
    A resume skips the finished groups, resumes the stopped one and starts the rest."""

    def __init__(self, config: PPOConfig, settings: list[dict], seeds: int, seed: int,
                 search: dict | None, run_dir: str | None, kwargs: dict,
                 resume_kwargs: dict | None = None):
        self.config, self.settings, self.seeds, self.seed = config, settings, seeds, seed
        self.search, self.run_dir, self.kwargs = search, run_dir, kwargs
        self.resume_kwargs = resume_kwargs or {}
        self.groups: list[Group] = group_settings(settings)
        self.rebuild: list[tuple[str, str]] = []  # (file, why): the table's, damaged

    @classmethod
    def start(cls, config: PPOConfig, settings: Sequence[dict], seeds: int = 1,
              search: dict | None = None, *, where: str = "grid", cli: bool = False,
              seed: int = 0, logdir: str | None = "runs", run_name: str | None = None,
              **kwargs) -> StaticSweep:
        """Check every static setting and every group's `Experiment` (before anything is
        written or compiled), then make the sweep's directory and write its plan."""
        name = "space" if where == "random" else "grid"
        name = f"--{name}" if cli else name
        settings = normalize(config, settings, name, UsageError if cli else ConfigError)
        sw = cls(config, settings, int(seeds), int(seed), search, None, kwargs)
        for g in sw.groups:  # seeds, seed, options, memory: refused now, not after a group ran
            exp = Experiment(group_config(config, g), seeds=sw.seeds, seed=sw.seed, logdir=None,
                             hparams=traced_settings(settings, g), **kwargs)
            placement = make_placement(exp.config, exp.mesh, exp.shard, env=exp.env,
                                       env_params=exp.env_params)
            try:
                Driver(placement, exp.num_runs, exp.config.num_updates,
                       chunk_updates=exp.chunk_updates)
            except ConfigError as e:
                raise ConfigError(f"static setting {setting_label(g.static)}: {e}") from None
        if logdir is not None:
            sw.run_dir = make_run_dir(logdir, run_name, config, sw.num_runs)
            write_plan(sw.run_dir, sw.plan())
        return sw

    @classmethod
    def from_dir(cls, path: str | os.PathLike, **kwargs) -> StaticSweep:
        """The static sweep at `path`, ready to `run()` on; `kwargs` as `Experiment`'s for the
        groups not started yet, and `repair_log` for the stopped one."""
        for key in ("seeds", "hparams", "seed", "logdir", "run_name", "search"):
            if key in kwargs:
                raise UsageError(f"resume continues a sweep with its own {key}; drop it")
        run_dir = os.fspath(path)
        plan_path = os.path.join(run_dir, PLAN_FILE)
        repair = {"repair_log": kwargs.pop("repair_log", False)}  # for the stopped group only
        plan = None
        try:
            plan = load_plan(plan_path)
            config = config_from_dict(plan["config"], source=plan_path)
            sw = cls(config, plan["settings"], int(plan["seeds"]), int(plan["seed"]),
                     plan.get("search"), run_dir, kwargs, repair)
            listed_groups = [g["name"] for g in plan.get("groups", [])]
        except (OSError, ValueError, KeyError, TypeError, AttributeError, ConfigError) as e:
            if checksum_fails(plan):  # an edit that broke its form
                raise edited_plan(plan_path) from None
            raise UsageError(f"'{plan_path}' is not a static sweep's plan ({type(e).__name__}: "
                             f"{e}); it cannot be resumed") from None
        if [g.name for g in sw.groups] != listed_groups:
            if checksum_fails(plan):
                raise edited_plan(plan_path)
            raise UsageError(f"'{plan_path}' does not list the groups of its own settings; "
                             "it cannot be resumed")
        sw.check_plan(plan, plan_path)
        sw.check_finished_groups()
        if not sw.pending():
            sw.rebuild = table_problems(run_dir, sw.settings)
            if not sw.rebuild:
                raise UsageError(f"sweep '{run_dir}' is finished ({len(sw.groups)} static "
                                 "settings); nothing to resume (evaluate a group's agents with: "
                                 f"jaxppo eval {os.path.join(run_dir, sw.groups[0].name)})")
        return sw

    def check_finished_groups(self) -> None:
        """The finished groups' files as train's resume reads a run's (their table rows come
        from their summary.json, checked in `finished`): config.yaml, and the checkpoint eval
        loads; a damaged one is refused, one line naming it."""
        for g in self.groups:
            path = self.group_dir(g)
            if self.finished(g) is None:
                continue  # the group's own resume checks it
            check_config_file(path, group_config(self.config, g))
            if not os.path.exists(checkpoint_path(path)):
                continue  # none to load (removed to save space): its results stand
            try:
                read_checkpoint(path)
            except CheckpointError as e:
                raise CheckpointError(f"{e} (static setting {g.name} had finished: to go on "
                                      f"with the sweep without it, move '{path}' aside and that "
                                      "setting trains again)") from None

    def check_plan(self, plan: dict, plan_path: str) -> None:
        """The plan as the sweep started it, as config.yaml is for a run: its checksum, and
        every started group's config.yaml against the config the plan now gives that group;
        an edit is refused, naming what differs. A plan whose checksum holds is as it was: a
        difference is then the group's config.yaml's, which that group's own check names."""
        if plan.get("sha256") is not None and not checksum_fails(plan):
            return
        edited = []
        for g in self.groups:
            path = os.path.join(self.run_dir, g.name, names.CONFIG)
            if not os.path.isfile(path):
                continue
            ran = read_yaml(path)
            if ran is None:
                continue  # the group's own resume says what is wrong with it
            want = group_config(self.config, g).to_dict()
            if isinstance(ran, dict):
                edited += [f"{g.name}: {k}" for k in want if k in ran and
                           json.dumps(ran[k], sort_keys=True) != json.dumps(want[k],
                                                                             sort_keys=True)]
        if edited:
            raise edited_plan(plan_path, f"{listed(edited, 4)}: not what the group trained with")
        if checksum_fails(plan):
            raise edited_plan(plan_path)

    @property
    def num_runs(self) -> int:
        return len(self.settings) * self.seeds

    def plan(self) -> dict:
        return {"config": self.config.to_dict(), "settings": self.settings, "seeds": self.seeds,
                "seed": self.seed, "search": self.search,
                "groups": [{"name": g.name, "static": g.static, "settings": g.indices}
                           for g in self.groups]}

    def group_dir(self, group: Group) -> str | None:
        return None if self.run_dir is None else os.path.join(self.run_dir, group.name)

    def finished(self, group: Group) -> Outcome | None:
        """A group that ran to its end in an earlier session, as its summary.json says. One
        whose summary.json is damaged is not: its resume rebuilds that from its checkpoint
        (the same test, `summary_problem`), keeping the damaged file aside."""
        path = os.path.join(self.group_dir(group), names.SUMMARY)
        runs = len(group.indices) * self.seeds
        if not os.path.isfile(path) or summary_problem(
                path, num_runs=runs, env_steps=group_config(self.config, group).env_steps):
            return None
        try:
            with open(path, encoding="utf-8") as f:
                s = json.load(f)
        except (OSError, ValueError):  # changed since it was checked
            return None
        final = np.array([np.nan if x is None else x for x in s["final_return"]], float)
        diverged = np.isin(np.arange(runs), s.get("diverged_runs", []))
        return Outcome(s["status"], final, diverged, s)

    def experiment(self, group: Group) -> Experiment:
        """The group's `Experiment`: resumed from its checkpoint, or a new one."""
        path = self.group_dir(group)
        if path is not None and os.path.isdir(os.path.join(path, names.CHECKPOINT_DIR)):
            return Experiment.from_checkpoint(path, **self.kwargs, **self.resume_kwargs)
        if path is not None and os.path.lexists(path):  # killed before its first checkpoint
            aside = free_name(path + ".unfinished")
            os.replace(path, aside)
            self.note(f"'{path}' had no checkpoint (stopped before its first); it is kept as "
                      f"'{aside}' and the group starts again")
        return Experiment(group_config(self.config, group), seeds=self.seeds,
                          hparams=traced_settings(self.settings, group), seed=self.seed,
                          logdir=self.run_dir, run_name=group.name, **self.kwargs)

    def note(self, text: str) -> None:
        """A note for the user, where the groups' `Experiment`s send theirs (`on_note`)."""
        on_note = self.kwargs.get("on_note", print_note)
        if on_note is not None:
            on_note(text)

    def pending(self) -> list[Group]:
        """The groups still to run (all of them, without a run directory)."""
        return [g for g in self.groups if self.run_dir is None or self.finished(g) is None]

    def run(self, run_group: Callable[[Experiment, Group], Any] | None = None
            ) -> SweepResult | None:
        """Run the groups not finished yet, one after another, then write the table over all
        settings; a group that stops (a signal, a callback) stops the sweep there, resumable.
        `run_group(exp, group)` runs one (default `exp.run()`); its None ends the sweep (the
        caller has said why) and this returns None."""
        run_group = run_group or (lambda exp, group: exp.run())
        lock = RunLock(self.run_dir).acquire() if self.run_dir is not None else None
        for text in [] if lock is None else lock.notes:
            self.note(text)
        try:
            for name, why in self.rebuild:  # a damaged table: kept aside, then written again
                if why:
                    path = os.path.join(self.run_dir, name)
                    copy = free_name(path + ".damaged")
                    os.replace(path, copy)
                    self.note(f"'{path}' was damaged ({why}); it is kept as '{copy}' and "
                              "rebuilt from the groups' results")
            outcomes, last = [], None
            for g in self.groups:
                done = None if self.run_dir is None else self.finished(g)
                if done is None:
                    result = run_group(self.experiment(g), g)
                    if result is None:
                        return None
                    last = result
                    done = Outcome(result.status, np.asarray(result.final_return, float),
                                   np.isin(np.arange(result.num_runs),
                                           result.summary.get("diverged_runs", [])),
                                   result.summary)
                    if result.update < result.config.num_updates:  # stopped: resumable
                        outcomes.append(done)
                        return self.table(outcomes, last, "stopped")
                outcomes.append(done)
            diverged = all(o.diverged.all() for o in outcomes)
            return self.table(outcomes, last, "diverged" if diverged else "finished")
        finally:
            if lock is not None:
                lock.release()

    @quiet_nonfinite
    def table(self, outcomes: list[Outcome], last, status: str) -> SweepResult:
        """The ranked table over the settings of the groups in `outcomes` (every group once
        the sweep has finished: then sweep.csv, sweep.png and summary.json are written)."""
        groups = self.groups[:len(outcomes)]
        order = sorted(i for g in groups for i in g.indices)  # the settings run, grid order
        place = {i: p for p, i in enumerate(order)}
        final = np.full(len(order) * self.seeds, np.nan)
        diverged = np.zeros(len(order) * self.seeds, bool)
        s = self.seeds
        for g, o in zip(groups, outcomes, strict=True):
            for j, i in enumerate(g.indices):
                p = place[i]
                final[p * s:(p + 1) * s] = o.final_return[j * s:(j + 1) * s]
                diverged[p * s:(p + 1) * s] = o.diverged[j * s:(j + 1) * s]
        ranked = rank_settings([self.settings[i] for i in order], final, diverged, s)
        # each setting's own update count (groups may differ in num_updates: not a rank key)
        went = {i: o.summary.get("env_steps", 0) // group_config(self.config, g).batch_size
                for g, o in zip(groups, outcomes, strict=True) for i in g.indices}
        ranked = [{**r, "updates": went[order[r["runs"][0] // s]]} for r in ranked]
        in_grid = sorted(ranked, key=lambda r: r["runs"][0])
        rows = group_rows(ranked, self.groups, s, order)
        summary = {
            "env_id": self.config.env_id,
            "status": status,
            "finished": status == "finished",
            "num_runs": self.num_runs,
            "seeds": s,
            "settings": self.settings,
            **({"search": self.search} if self.search is not None else {}),
            "static_settings": len(self.groups),
            "groups": [{"run_dir": g.name, "static": g.static, "settings": len(g.indices),
                        "status": o.status, "compile_s": o.summary.get("compile_s"),
                        "wall_s": o.summary.get("wall_s"),
                        "diverged_runs": o.summary.get("diverged_runs", [])}
                       for g, o in zip(groups, outcomes, strict=True)],
            "wall_s": round(sum(o.summary.get("wall_s") or 0.0 for o in outcomes), 3),
            "ranked": rows,
            "written_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        }
        if self.run_dir is not None and status != "stopped":
            write_sweep_files(self.run_dir, rows, in_grid,
                              f"{sweep_title(self.config.env_id, s)}, "
                              f"{len(self.groups)} static settings")
            write_summary(self.run_dir, summary)
        rows = [{**r, "run_dir": None if self.run_dir is None
                 else os.path.join(self.run_dir, r["group"])} for r in rows]
        return SweepResult(rows, last, self.run_dir, outcomes, summary)
