"""`jaxppo.sweep` and `resume_sweep`: a search's settings x seeds as one `Experiment` (one
compiled, vmapped program), returned as the ranked `SweepResult`."""

from __future__ import annotations

import os
from collections.abc import Sequence

from jaxppo.config import PPOConfig
from jaxppo.errors import ConfigError, UsageError
from jaxppo.experiment import Experiment, run_dir_of
from jaxppo.search.halving import halving_search
from jaxppo.search.pbt import DEFAULT_INTERVAL, DEFAULT_QUANTILE, PBTController, pbt_search
from jaxppo.search.space import random_search
from jaxppo.search.table import SweepResult, grid_settings, sweep_rows


def sweep(config: PPOConfig, grid: dict[str, Sequence[float]] | None = None, seeds: int = 1, *,
          space: dict | None = None, search: str = "grid", trials: int | None = None,
          population: int | None = None, interval: int | None = None,
          quantile: float | None = None, eta: int | None = None, **kwargs) -> SweepResult:
    """Every setting of `grid` (or `trials` settings drawn at random from `space`) x `seeds`
    seeds in one compiled program; the ranked table.

    `search="random"` draws the settings once on the host from `seed` (default 0, also the
    runs' base seed): `space` maps a float hyperparameter to `(low, high)`, `(low, high,
    "log")` (log-uniform) or a list of choices; summary.json records it (`search`).
    `search="pbt"` trains a `population` drawn so from `space` (one seed each, their own
    keys) with population-based training: every `interval` updates (default 20) the bottom
    `quantile` (default 0.25) copies a top member's learner state and perturbs its
    hyperparameters (`jaxppo.search.pbt`); one row per member, with its final setting.
    `search="halving"` trains `trials` settings drawn as random search draws them in rungs and
    keeps the best 1/`eta` (default 3) of them after each (`jaxppo.search.halving`); the others
    stop there.
    With a run directory it holds `sweep.csv`, `sweep.png`, one checkpoint of every agent
    (`jaxppo eval RUN_DIR`, `load_policy(RUN_DIR, seed=run)` on a row's `runs`), metrics.csv
    and TensorBoard per agent, `curve.png` per setting, and `summary.json` with the ranked rows.
    A stopped sweep continues with `resume_sweep(run_dir)` (`jaxppo sweep --resume RUN_DIR`).
    `kwargs` are `Experiment`'s (`checkpoint_every`, `logdir`, `callbacks`, `seed`, ...)."""
    record = controller = None
    if search != "pbt" and (population, interval, quantile) != (None, None, None):
        raise ConfigError("population=/interval=/quantile= are for search='pbt'")
    if eta is not None and search != "halving":
        raise ConfigError(f"eta= is for search='halving', not search={search!r}")
    if search == "pbt":
        if grid is not None or trials is not None:
            raise ConfigError("search='pbt' trains population=N members drawn from space=...; "
                              "grid= and trials= are for the other searches")
        if seeds != 1:
            raise ConfigError(f"seeds: {seeds} with search='pbt': every member is one seed of "
                              "its own; size the search with population=N")
        if population is None:
            raise ConfigError("search='pbt' needs population=N (how many members, at least 2)")
        if kwargs.get("devices") is not None or kwargs.get("mesh") is not None:
            raise ConfigError("search='pbt' runs on one device; drop devices=/mesh=")
        settings, record = pbt_search(config, space, population,
                                      DEFAULT_INTERVAL if interval is None else interval,
                                      DEFAULT_QUANTILE if quantile is None else quantile,
                                      kwargs.get("seed", 0))
        controller = PBTController.from_record(config, record, settings)
    elif search in ("random", "halving"):
        if grid is not None:
            raise ConfigError(f"search={search!r} draws from space=...; a grid is search='grid'")
        if trials is None:
            raise ConfigError(f"search={search!r} needs trials=N (how many settings to draw)")
        if search == "halving":
            settings, record = halving_search(config, space, trials, 3 if eta is None else eta,
                                              kwargs.get("seed", 0))
        else:
            settings, record = random_search(config, space, trials, kwargs.get("seed", 0))
    elif search == "grid":
        if space is not None or trials is not None:
            raise ConfigError("space=/trials= are for search='random' or 'halving'; a grid sweep "
                              "takes grid")
        if not grid:
            raise ConfigError("sweep needs at least one hyperparameter with a list of values")
        settings = grid_settings({k: list(v) for k, v in grid.items()})
    else:
        raise ConfigError(f"search: got {search!r}; use 'grid', 'random', 'halving' or 'pbt'")
    result = Experiment(config, seeds=seeds, hparams=settings, search=record,
                        controller=controller, **kwargs).run()
    return SweepResult(sweep_rows(result), result, result.run_dir)


def resume_sweep(path: str | os.PathLike, **kwargs) -> SweepResult:
    """Continue a stopped sweep to its end (or rebuild a finished one's missing sweep.csv and
    summary.json); its ranked table. `kwargs` as `Experiment.from_checkpoint`'s (`repair_log`)."""
    result = sweep_from_checkpoint(path, **kwargs).run()
    return SweepResult(sweep_rows(result), result, result.run_dir)


def sweep_from_checkpoint(path: str | os.PathLike, **kwargs) -> Experiment:
    """The stopped sweep at `path` as an `Experiment` ready to run, with its search's
    controller (a PBT sweep's) attached; `kwargs` as `Experiment.from_checkpoint`'s."""
    exp = Experiment.from_checkpoint(path, **kwargs)
    if exp.settings is None:
        raise UsageError(f"'{run_dir_of(path)}' is a training run, not a sweep; resume it with "
                         "jaxppo train --resume")
    if (exp.search or {}).get("strategy") == "pbt":
        if exp.mesh is not None:
            raise UsageError("--search pbt runs on one device; drop --devices")
        exp.controller = PBTController.from_record(exp.config, exp.search, exp.settings)
    return exp
