"""Population-based training (Jaderberg et al., 2017) over one vmapped population: every
`interval` updates the bottom quantile of members, ranked by recent return, copies the learner
state of a member drawn from the top quantile (exploit) and perturbs that member's
hyperparameters inside the search space (explore).

Pure functions on NumPy/JAX arrays (`recent_return`, `choose_exploits`, `explore`,
`copy_members`) and `PBTController`, the host side that `Experiment` hands to the chunk loop:
the driver drains its pipeline at every PBT update, so the next chunk runs with the new state
and hyperparameters. The draws at update U come from `default_rng([seed, U])`, so a resumed
run redraws them exactly; the checkpoint keeps the members' current hyperparameters and the
return window (`PBTController.state`).

Axis legend: R = members (runs), C = updates in a chunk.
"""

from __future__ import annotations

import csv
import math
import os
import shutil
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxppo.config import Hparams, PPOConfig, divisors
from jaxppo.errors import ConfigError, UsageError
from jaxppo.run.controller import Controller
from jaxppo.run.solve import quiet_nonfinite
from jaxppo.rundir import names
from jaxppo.rundir.csv_log import audit_pbt_logs, csv_text, gaps_from, gaps_record
from jaxppo.rundir.files import write_atomic
from jaxppo.search.space import Entry, check_space, draw_settings, space_record

DEFAULT_INTERVAL = 20
DEFAULT_QUANTILE = 0.25
PERTURB = (0.8, 1.2)  # a continuous hyperparameter's explore step: one of these factors


def pbt_search(config: PPOConfig, space: dict, population: int,
               interval: int = DEFAULT_INTERVAL, quantile: float = DEFAULT_QUANTILE,
               seed: int = 0, *, cli: bool = False) -> tuple[list[dict], dict]:
    """The members' initial hyperparameters (drawn from `space` with `seed`, as a random
    search draws) and the search's record for summary.json and the checkpoint (`search`).
    Every fault is one line, before anything is written."""
    error = UsageError if cli else ConfigError
    flag = (lambda f: f"--{f}") if cli else (lambda f: f"{f}:")  # noqa: E731
    if isinstance(population, bool) or not isinstance(population, int | np.integer) or \
            population < 2:
        raise error(f"{flag('population')} {population}: PBT needs at least 2 members (one to "
                    "copy from, one to replace)")
    if isinstance(interval, bool) or not isinstance(interval, int | np.integer) or \
            not 1 <= interval < config.num_updates:
        raise error(f"{flag('interval')} {interval}: use an integer in 1..{config.num_updates - 1}"
                    f" (the run has {config.num_updates} updates; PBT acts every interval)")
    if isinstance(quantile, bool) or not isinstance(quantile, int | float) or \
            not 0 < quantile <= 0.5:
        raise error(f"{flag('quantile')} {quantile}: use a fraction in (0, 0.5] (the bottom "
                    "and top quantiles must not overlap)")
    checked = check_space(space, config, cli=cli, population="pbt")
    settings = draw_settings(checked, int(population), seed)
    record = {"strategy": "pbt", "population": int(population), "interval": int(interval),
              "quantile": float(quantile), "space": space_record(checked), "seed": int(seed)}
    return settings, record


def space_from_record(record: dict) -> dict[str, Entry]:
    """`space_record`'s JSON back as a checked space (what a resumed PBT explores)."""
    out = {}
    for key, value in record.items():
        if isinstance(value, dict):
            out[key] = ("choice", [float(v) for v in value["choices"]])
        else:
            out[key] = ("log" if len(value) == 3 else "uniform", float(value[0]),
                        float(value[1]))
    return out


@quiet_nonfinite
def recent_return(ret_sum: np.ndarray, ret_count: np.ndarray, bad: np.ndarray) -> np.ndarray:
    """[R] each member's mean return over the window's updates that had one; NaN for a member
    with none, or one that went NaN/Inf in the window (both rank last)."""
    mean = np.asarray(ret_sum, float) / np.maximum(np.asarray(ret_count), 1)
    return np.where((np.asarray(ret_count) == 0) | np.asarray(bad, bool), np.nan, mean)


def choose_exploits(recent: np.ndarray, quantile: float, rng: np.random.Generator
                    ) -> list[tuple[int, int]]:
    """`(member, parent)` pairs: each of the bottom `max(1, int(quantile * R))` members (worst
    first; NaN ranks last, ties by index) gets a parent drawn uniformly from the top as many
    that have a return. None when no member has one (nothing to prefer)."""
    recent = np.asarray(recent, float)
    n = recent.size
    k = max(1, int(quantile * n))
    valid = np.isfinite(recent)
    best_first = sorted(range(n), key=lambda i: (not valid[i], -recent[i] if valid[i] else 0.0,
                                                 i))
    top = [i for i in best_first[:k] if valid[i]]
    if not top:
        return []
    bottom = best_first[n - k:][::-1]
    parents = rng.choice(top, size=len(bottom))
    return [(int(c), int(p)) for c, p in zip(bottom, parents, strict=True)]


def explore(setting: dict, space: dict[str, Entry], rng: np.random.Generator) -> dict:
    """`setting` perturbed inside `space`, key by key in the space's order: a continuous value
    times 0.8 or 1.2 (a multiplicative step: for a `log` entry, a step in log space), clipped
    into [LOW, HIGH]; a choice moves to a neighbouring value (in sorted order)."""
    out = dict(setting)
    for key, entry in space.items():
        x = float(setting[key])
        if entry[0] == "choice":
            values = sorted(entry[1])
            i = int(np.argmin([abs(v - x) for v in values]))
            step = int(rng.choice((-1, 1)))
            j = i + step if 0 <= i + step < len(values) else i - step
            out[key] = float(values[min(max(j, 0), len(values) - 1)])
        else:
            factor = PERTURB[int(rng.integers(len(PERTURB)))]
            out[key] = float(min(max(x * factor, entry[1]), entry[2]))
    return out


def copy_members(tree: Any, source: jax.Array) -> Any:
    """Every leaf's row i replaced by its row `source[i]` (leading axis R): the exploit of a
    `TrainState` (params, optimizer state, normaliser, step), nothing else."""
    return jax.tree.map(lambda x: x[source], tree)


_copy_members = jax.jit(copy_members)


def settings_hparams(config: PPOConfig, settings: list[dict]) -> Hparams:
    """The members' settings as one `Hparams` with leaves [R] (float32, as `Hparams.stack`
    gives), every field not in a setting from `config`; checked by Hparams' rules."""
    return Hparams.of_settings(config, settings).check()


def _cell(x: float) -> str:
    """A CSV cell: the float exactly (repr), empty where there is no number."""
    return "" if x is None or not math.isfinite(x) else repr(float(x))


class PBTController(Controller):
    """The host side of PBT, handed to `Experiment(controller=...)`.

    The driver calls `observe` on every chunk and, at every update where `due` is true (a
    multiple of `interval` before the end), `replace`: it ranks the members, copies the
    parents' `TrainState` into the bottom members (their env state, RNG key and last return
    stay their own, so a diverged member is rescued with a good learner) and explores the
    parents' hyperparameters. `Experiment` calls `start` (the hyperparameters the first chunk
    runs with), `state` (kept in each checkpoint) and `summary` (added to summary.json).
    Files: `pbt.csv` (one row per exploit) and `hparams.csv` (every member's hyperparameters at
    update 0 and after every PBT step)."""

    common_seeds = False  # every member its own seed key, not common random numbers
    changes_hparams = True  # explore: tb/agent_003, not the member's first setting

    def __init__(self, config: PPOConfig, space: dict[str, Entry], settings: list[dict],
                 interval: int, quantile: float = DEFAULT_QUANTILE, seed: int = 0):
        self.config, self.space = config, space
        self.settings = [dict(s) for s in settings]  # current, float64 as drawn
        self.interval, self.quantile, self.seed = int(interval), float(quantile), int(seed)
        self.population = len(self.settings)
        self.run_dir: str | None = None
        self._reset_window()
        self.exploits = np.zeros(self.population, int)
        self.last_exploit = np.full(self.population, -1)  # update of each member's last, or -1
        # rows the logs lack for good: {names.PBT: {member: count}, names.HPARAMS: {(u, m)}}
        self.log_missing: dict = {}
        self._audit = None

    @classmethod
    def from_record(cls, config: PPOConfig, record: dict, settings: list[dict]
                    ) -> PBTController:
        """The controller of a PBT search recorded as `pbt_search` records it."""
        return cls(config, space_from_record(record["space"]), settings, record["interval"],
                   record["quantile"], record["seed"])

    def _reset_window(self) -> None:
        self.ret_sum = np.zeros(self.population)
        self.ret_count = np.zeros(self.population, int)
        self.bad = np.zeros(self.population, bool)

    # -- Experiment's side ---------------------------------------------------------------------
    def chunk_length(self, want: int, start_update: int = 0) -> int:
        """The chunk nearest `want` (by ratio; the longer one on a tie) whose boundaries fall
        on every PBT update from `start_update` on: a divisor of the interval (`want` 4 with
        an interval of 5 is 5, not 1: a chunk per update costs a dispatch per update)."""
        g = math.gcd(self.interval, start_update)
        want = max(1, want)
        return min(divisors(g), key=lambda d: (abs(math.log(d / want)), -d))

    def headers(self) -> dict[str, list[str]]:
        """The columns of the two logs, by file name."""
        keys = list(self.space)
        return {names.PBT: ["update", "member", "parent", "member_return", "parent_return",
                            *(f"{k}_{w}" for k in keys for w in ("before", "after"))],
                names.HPARAMS: ["update", "member", *Hparams._fields]}

    def check_logs(self, run_dir: str, update: int, saved: dict | None,
                   repair: bool = False) -> list[str]:
        """Before a resume writes anything: do pbt.csv and hparams.csv hold every row the
        checkpoint at `update` accounts for (`audit_pbt_logs`)? Refused in one line if not,
        unless `repair`: then their good rows are kept and the missing ones recorded (in the
        checkpoints and summary.json, `pbt.log_missing`). Returns notes for the user; `start`
        then writes what was kept."""
        self._audit = self._audit_logs(run_dir, update, saved or {}, repair)
        return self._audit.notes

    def _audit_logs(self, run_dir: str, update: int, saved: dict, repair: bool):
        return audit_pbt_logs(run_dir, update, saved, self.population,
                              [u for u in range(1, update + 1) if self.due(u)], self.headers(),
                              repair)

    def start(self, run_dir: str | None, start_update: int, saved: dict | None) -> Hparams:
        """Begin (saved None) or continue from a checkpoint's `state()`; the hyperparameters
        the first chunk runs with. A resumed run's CSVs are checked against the checkpoint
        (`check_logs`, unless done already) and rewritten whole (atomically) with the rows up
        to it; rows after it are written again, identically."""
        self.run_dir = run_dir
        if saved is not None:
            self.settings = [dict(s) for s in saved["settings"]]
            self.ret_sum = np.asarray(saved["ret_sum"], float)
            self.ret_count = np.asarray(saved["ret_count"], int)
            self.bad = np.asarray(saved["bad"], bool)
            self.exploits = np.asarray(saved["exploits"], int)
            # a checkpoint from before it was kept: unknown (-1), so no divergence is undone
            self.last_exploit = np.asarray(saved.get("last_exploit", [-1] * self.population), int)
            self.log_missing = gaps_from(saved.get("log_missing"))
        if run_dir is None:
            return settings_hparams(self.config, self.settings)
        headers = self.headers()
        if saved is None:
            for name, header in headers.items():
                write_atomic(os.path.join(run_dir, name), csv_text([header]))
            self._write_hparams(0)
        else:
            audit = getattr(self, "_audit", None) or self._audit_logs(run_dir, start_update,
                                                                      saved, repair=False)
            self._audit = None
            for path, copy in audit.copies:  # the damaged file as it was, before the rewrite
                shutil.copyfile(path, copy)
            for name, header in headers.items():
                write_atomic(os.path.join(run_dir, name), csv_text([header, *audit.rows[name]]))
            self.log_missing = audit.missing
        return settings_hparams(self.config, self.settings)

    def _append(self, name: str, rows: list[list]) -> None:
        if self.run_dir is not None and rows:
            with open(os.path.join(self.run_dir, name), "a", newline="", encoding="utf-8") as f:
                csv.writer(f).writerows(rows)

    def _write_hparams(self, update: int) -> None:
        self._append(names.HPARAMS, [
            [update, m, *(_cell(s.get(k, getattr(self.config, k))) for k in Hparams._fields)]
            for m, s in enumerate(self.settings)])

    def state(self) -> dict:
        """What a checkpoint keeps (plain lists: msgpack): enough to continue exactly, and the
        rows its logs lack for good (a repaired resume's)."""
        out = {"settings": [dict(s) for s in self.settings],
               "ret_sum": [float(x) for x in self.ret_sum],
               "ret_count": [int(x) for x in self.ret_count],
               "bad": [bool(x) for x in self.bad],
               "exploits": [int(x) for x in self.exploits],
               "last_exploit": [int(x) for x in self.last_exploit]}
        if self.log_missing:
            out["log_missing"] = gaps_record(self.log_missing)
        return out

    def summary(self) -> dict:
        """summary.json's additions: each member's hyperparameters now (the sweep table's
        settings), the exploit counts, and the rows pbt.csv / hparams.csv lack for good."""
        pbt = {"exploits": int(self.exploits.sum()),
               "exploits_per_member": [int(x) for x in self.exploits]}
        if self.log_missing:
            pbt["log_missing"] = gaps_record(self.log_missing)
        return {"settings": [dict(s) for s in self.settings], "pbt": pbt}

    # -- the driver's side ---------------------------------------------------------------------
    def due(self, update: int) -> bool:
        return 0 < update < self.config.num_updates and update % self.interval == 0

    def observe(self, chunk) -> None:
        """Add a chunk's per-update returns `[R, C]` to the window: only the updates in which
        an episode ended (metrics.csv's non-empty `episodic_return` cells; the metric carries
        the last return through the others, which after an exploit is the member's old
        learner's), so the window's mean is the mean of what metrics.csv logs over it."""
        ret = np.asarray(chunk.metrics["episodic_return"], float)
        ended = np.asarray(chunk.metrics["episodes"]) > 0
        ok = ended & np.isfinite(ret)
        self.ret_sum += np.where(ok, ret, 0.0).sum(axis=1)
        self.ret_count += ok.sum(axis=1)
        self.bad |= (np.asarray(chunk.metrics["nonfinite"]) > 0).any(axis=1) | \
            (ended & np.isinf(ret)).any(axis=1)

    def renewed_since(self) -> np.ndarray:
        """[R] the update after which each member's learner is a healthy parent's copy (its
        last exploit; -1: never): a NaN/Inf it had before is gone, so it counts as diverged
        only if it goes non-finite again after that update."""
        return self.last_exploit.copy()

    def replace(self, runner, hparams: Hparams, update: int) -> tuple[Any, Hparams]:
        """One PBT step at `update`: the runner with the exploited members' `TrainState`
        copied from their parents, and the members' new hyperparameters."""
        recent = recent_return(self.ret_sum, self.ret_count, self.bad)
        rng = np.random.default_rng([self.seed, update])
        pairs = choose_exploits(recent, self.quantile, rng)
        before = [dict(s) for s in self.settings]
        source = np.arange(self.population)
        rows = []
        for member, parent in pairs:
            source[member] = parent
            self.settings[member] = explore(before[parent], self.space, rng)
            self.exploits[member] += 1
            self.last_exploit[member] = update
            rows.append([update, member, parent, _cell(recent[member]), _cell(recent[parent]),
                         *(_cell(v) for k in self.space
                           for v in (before[member][k], self.settings[member][k]))])
        if pairs:
            runner = runner._replace(train_state=_copy_members(runner.train_state,
                                                               jnp.asarray(source)))
        self._append(names.PBT, rows)
        self._write_hparams(update)
        self._reset_window()
        return runner, settings_hparams(self.config, self.settings)


__all__ = ["DEFAULT_INTERVAL", "DEFAULT_QUANTILE", "PBTController", "choose_exploits",
           "copy_members", "explore", "pbt_search", "recent_return", "settings_hparams",
           "space_from_record"]
