"""`jaxppo.sweep` and `jaxppo.resume_sweep`: a search's settings (drawn by its strategy,
`search/strategies.py`) x seeds as one `Experiment` (one compiled, vmapped program, with the
strategy's controller where it has one), returned as the ranked `SweepResult`. Settings that
differ in static keys run as a `StaticSweep` (`search/static_sweep.py`): one program per
static setting.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from jaxppo.config import PPOConfig
from jaxppo.errors import UsageError
from jaxppo.run.experiment import Experiment
from jaxppo.run.sweep_table import sweep_rows
from jaxppo.rundir.checkpoint import load_checkpoint
from jaxppo.rundir.layout import run_dir_of
from jaxppo.rundir.plan import is_static_sweep
from jaxppo.search.static import has_static
from jaxppo.search.static_sweep import StaticSweep
from jaxppo.search.strategies import OPTIONS, STRATEGIES, controller_for, draw
from jaxppo.search.table import SweepResult


def sweep(config: PPOConfig, grid: dict[str, Sequence] | None = None, seeds: int = 1, *,
          space: dict | None = None, search: str = "grid", trials: int | None = None,
          population: int | None = None, interval: int | None = None,
          quantile: float | None = None, eta: int | None = None, **kwargs: Any) -> SweepResult:
    """Every setting of `grid` (or `trials` settings drawn at random from `space`) x `seeds`
    seeds; the ranked table. The float hyperparameters (`Hparams`) of all settings run in one
    compiled program; a static key (`num_minibatches`, `hidden_sizes`, ...: any other config
    key) compiles one program per static setting, run one after another (`StaticSweep`).

    Args:
      config: the sweep's base config.
      grid: `{key: [values]}`; every combination runs (`search="grid"`).
      seeds: seeds per setting (common random numbers: every setting gets the same seeds).
      space: `{key: (low, high)}`, `(low, high, "log")` (log-uniform) or a list of choices,
        for `search="random"`, `"halving"` and `"pbt"` (a static key: choices only).
      search: `"grid"`, `"random"` (`trials` settings drawn once on the host from `seed`),
        `"halving"` (successive halving: the same draw trained in rungs, keeping the best
        1/`eta`, default 3, after each) or `"pbt"` (population-based training of `population`
        members, one seed each: every `interval` updates, default 20, the bottom `quantile`,
        default 0.25, copies a top member's learner and perturbs its hyperparameters). The
        options of each are in `jaxppo.search.strategies`; halving and PBT keep one compiled
        population, so their spaces take float hyperparameters only.
      trials: settings to draw (`random`, `halving`).
      population: members (`pbt`, at least 2).
      interval: updates between PBT's exploit steps (default 20).
      quantile: the share of PBT's members that copy a top member (default 0.25).
      eta: halving keeps the best 1/eta after each rung (default 3).
      **kwargs: `Experiment`'s (`checkpoint_every`, `logdir`, `callbacks`, `seed`, ...).

    Returns:
      The `SweepResult`: ranked rows (best first), the run's result and directory. With a run
        directory it holds `sweep.csv`, `sweep.png`, one checkpoint of every agent (`jaxppo
        eval RUN_DIR --agent M`, `load_policy(RUN_DIR, seed=M)` on a row's `runs`; with
        static keys, on the row's `run_dir`), metrics.csv and TensorBoard per agent,
        `curve.png` per setting, and `summary.json` with the ranked rows. A stopped sweep
        continues with `resume_sweep(run_dir)` (`jaxppo sweep --resume RUN_DIR`).

    Raises:
      ConfigError: an unknown `search`, an option the strategy does not take or cannot do
        without, no grid, a bad space, or a setting the config refuses; all before anything
        is written or compiled.
      UsageError: as `Experiment.run` (a run directory in use or not writable).
    """
    given = {"grid": grid, "space": space, "trials": trials, "population": population,
             "interval": interval, "quantile": quantile, "eta": eta}
    given |= {k: kwargs.pop(k) for k in list(kwargs) if k in OPTIONS}  # a newer strategy's
    options = {k: v for k, v in given.items() if v is not None}
    devices = kwargs.get("devices") if kwargs.get("mesh") is None else kwargs["mesh"]
    settings, record, controller = draw(search, config, options, seeds=seeds,
                                        seed=kwargs.get("seed", 0), devices=devices)
    if has_static(settings):
        return StaticSweep.start(config, settings, seeds, record, where=search, **kwargs).run()
    result = Experiment(config, seeds=seeds, hparams=settings, search=record,
                        controller=controller, **kwargs).run()
    return SweepResult(sweep_rows(result), result, result.run_dir)


def resume_sweep(path: str | os.PathLike, **kwargs: Any) -> SweepResult:
    """Continue a stopped sweep to its end (or rebuild a finished one's missing sweep.csv and
    summary.json); its ranked table. `kwargs` as `Experiment.from_checkpoint`'s (`repair_log`).

    What `jaxppo sweep --resume RUN_DIR` does, for every kind of sweep: a grid or random
    sweep continues as `Experiment.resume` would, a halving or PBT sweep with its strategy's
    controller rebuilt from the checkpoint, and a sweep over static keys group by group.

    Args:
      path: the sweep's run directory (or its `checkpoint/` directory or file).
      **kwargs: as `Experiment.from_checkpoint`'s (`progress`, `callbacks`, `repair_log`,
        ...); the options that define the sweep come from its checkpoint.

    Returns:
      The `SweepResult`, ranked over the whole sweep.

    Raises:
      CheckpointError: no checkpoint, or a corrupt or mismatched one.
      UsageError: `path` is a training run, not a sweep; the sweep is finished; an option
        that defines it is given; or a halving or PBT sweep is given `devices`.
    """
    if is_static_sweep(path):
        return StaticSweep.from_dir(path, **kwargs).run()
    result = sweep_from_checkpoint(path, **kwargs).run()
    return SweepResult(sweep_rows(result), result, result.run_dir)


def sweep_from_checkpoint(path: str | os.PathLike, **kwargs) -> Experiment:
    """The stopped sweep at `path` as an `Experiment` ready to run, with its strategy's
    controller attached (PBT's, halving's); `kwargs` as `Experiment.from_checkpoint`'s."""
    exp = resume_experiment(path, **kwargs)
    if exp.settings is None:
        raise UsageError(f"'{run_dir_of(path)}' is a training run, not a sweep; resume it with "
                         "jaxppo train --resume")
    return exp


def resume_experiment(path: str | os.PathLike, **kwargs) -> Experiment:
    """A stopped run or sweep at `path` as an `Experiment` ready to run, with the controller
    its search strategy needs (read from its checkpoint); `kwargs` as
    `Experiment.from_checkpoint`'s."""
    ckpt = load_checkpoint(path, env=kwargs.get("env"), env_params=kwargs.get("env_params"))
    record = ckpt.record
    controller = controller_for(ckpt.config, record, ckpt.num_runs)
    if controller is not None:
        strategy = STRATEGIES[record.strategy]
        if strategy.one_device and (kwargs.get("mesh") is not None
                                    or kwargs.get("devices") is not None):
            raise UsageError(f"--search {strategy.name} runs on one device; drop --devices")
    return Experiment.from_checkpoint(path, checkpoint=ckpt, controller=controller, **kwargs)
