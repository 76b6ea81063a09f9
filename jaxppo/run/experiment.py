"""One owner for a run's life: `Experiment(config, ...).run()` starts (or resumes) a run,
compiles it, steps it chunk by chunk, calls the callbacks, honours signals, stops on divergence,
checkpoints, and returns a `RunResult`. The CLI, `jaxppo compare` and the benchmarks are thin
users of it; so is a notebook:

    result = jaxppo.Experiment(config, seeds=8, callbacks=[my_fn]).run()
    result = jaxppo.Experiment.resume("runs/CartPole-v1__...")      # after Ctrl-C or kill -9
    table = jaxppo.sweep(config, {"lr": [1e-4, 3e-4]}, seeds=4)
    table = jaxppo.sweep(config, space={"lr": (1e-4, 1e-2, "log")}, search="random", trials=16)
    table = jaxppo.sweep(config, space={"lr": (1e-4, 1e-2, "log")}, search="halving", trials=9)

With `logdir=None` nothing is written: the same code, no files (a notebook, a benchmark).
A run directory has one writer at a time (an OS lock held for the run's life).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import sys
import time
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import yaml

from jaxppo.config import Hparams, PPOConfig, config_from_dict
from jaxppo.core.train import NONFINITE_SOURCES
from jaxppo.envs import HostVecEnv
from jaxppo.envs.identity import describe_env
from jaxppo.envs.registry import host_source_of
from jaxppo.errors import ConfigError, EnvError, UsageError
from jaxppo.machine import peak_device_bytes
from jaxppo.run.callbacks import (
    Callback,
    Checkpointer,
    ChunkEvent,
    Divergence,
    Progress,
    RunInfo,
    RunResult,
    as_callback,
    setting_label,
    stack_metrics,
)
from jaxppo.run.checkpoint import checkpoint_path, load_checkpoint
from jaxppo.run.distributed import from_process_0, gather, is_main_process, make_mesh
from jaxppo.run.driver import ChunkResult, Driver, StopFlag, pick_chunk
from jaxppo.run.files import RunLock, check_no_symlinks, check_run_name, free_name
from jaxppo.run.logs.writers import (
    CsvLogger,
    SummaryFile,
    TensorBoardLogger,
    check_metrics_log,
    gaps_summary,
    parse_metrics_log,
    write_config,
    write_curve,
    write_summary,
)
from jaxppo.run.placement import make_placement
from jaxppo.run.stats import RunStats, mean_std_or_none, quiet_nonfinite, returns_or_none
from jaxppo.search.halving import (
    Rungs,
    checkpoint_run_updates,
    expand_metrics,
    is_halving,
    put_runs,
    run_updates,
    rung_sizes,
    take_runs,
    to_host,
)
from jaxppo.search.table import SweepTable, sweep_csv_problem, sweep_rows

DIVERGENCE_HINT = ("lower lr or max_grad_norm, or turn on normalize_obs / normalize_reward "
                   "(see README: when things go wrong)")
CHECKPOINT_EVERY_S = 120.0
"""A run checkpoints at least this often by default, so a hard stop (kill -9, an OOM kill, a
power cut) loses at most ~2 minutes; a save costs milliseconds (BENCHMARKS.md)."""
_STOP_BY_CALLBACK = -1


def find_nonfinite(metrics: dict[str, np.ndarray], first_update: int) -> Divergence | None:
    """The earliest update in a chunk whose env output, normaliser, loss, gradients or params
    went non-finite (`update` counts from 1, as the CSV does), with its first run and source;
    None when the chunk is clean."""
    bad = np.asarray(metrics["nonfinite"]) > 0  # [R, C]
    if not bad.any():
        return None
    j = int(np.argmax(bad.any(axis=0)))
    run = int(np.argmax(bad[:, j]))
    code = int(np.asarray(metrics["nonfinite_source"])[run, j])
    source = NONFINITE_SOURCES[code - 1] if 1 <= code <= len(NONFINITE_SOURCES) else "loss"
    return Divergence(run, first_update + j + 1, source)


def run_divergences(metrics: dict[str, np.ndarray], first_update: int) -> list[Divergence]:
    """Each run's first non-finite update in a chunk, with its source: a sweep goes on past a
    diverged agent, and records every agent's own cause."""
    bad = np.asarray(metrics["nonfinite"]) > 0  # [R, C]
    codes = np.asarray(metrics["nonfinite_source"])
    out = []
    for run in np.flatnonzero(bad.any(axis=1)):
        j = int(np.argmax(bad[run]))
        code = int(codes[run, j])
        source = NONFINITE_SOURCES[code - 1] if 1 <= code <= len(NONFINITE_SOURCES) else "loss"
        out.append(Divergence(int(run), first_update + j + 1, source))
    return out


def describe_divergence(d: Divergence, config: PPOConfig, who: str | None = None
                        ) -> tuple[str, str]:
    """`(what happened, the fix)` for a diverged run, by its source: an env's NaN/Inf output
    or empty mask is the env's bug (no lr hint); a normaliser overflows on huge inputs.
    `who` names the run (a sweep's agent); by default its seed index."""
    at = f"at update {d.update} ({who or f'seed {d.run}'})"
    env = f"environment {config.env_id!r}"
    if d.source in ("env_obs", "env_reward"):
        what = "observations" if d.source == "env_obs" else "rewards"
        return (f"{env} returned NaN/Inf {what} {at}",
                "fix the env (jaxppo trains on what it returns; see README: when things go wrong)")
    if d.source == "action_mask":
        return (f"{env} gave an action mask that allows no action {at}",
                "every state must allow at least one action (MultiDiscrete: one value of each "
                "sub-action): fix the env's action mask")
    if d.source == "normaliser":
        keys = [k for k in ("normalize_obs", "normalize_reward") if getattr(config, k)]
        return (f"training diverged: NaN/Inf in the {' and '.join(keys)} statistics {at} (the "
                "env's values are too large for float32 running statistics: above ~1e19 their "
                "square overflows)",
                f"scale the env's values down, or turn off {' / '.join(keys)}")
    what = ("the loss, gradients or parameters" if d.source == "loss"
            else "the parameters or optimizer state")
    return f"training diverged: NaN/Inf in {what} {at}", DIVERGENCE_HINT


def make_run_dir(logdir: str, name: str | None, config: PPOConfig, runs: int) -> str:
    """A new directory under `logdir` (never an existing one: `-2`, `-3`, ... are appended)."""
    if os.path.exists(logdir) and not os.path.isdir(logdir):
        raise UsageError(f"--logdir {logdir!r} is a file; pass a directory")
    if name is None:
        name = f"{re.sub(r'[/:]', '_', config.env_id)}__{time.strftime('%Y%m%d-%H%M%S')}__{runs}seed"
        name += "s" if runs > 1 else ""
    run_dir = os.path.join(logdir, check_run_name(name))
    base, i = run_dir, 1
    while os.path.lexists(run_dir):
        i += 1
        run_dir = f"{base}-{i}"
    try:
        os.makedirs(run_dir)
    except OSError as e:
        raise UsageError(f"cannot create run directory {run_dir!r}: {e.strerror}; "
                         "pass a writable --logdir") from None
    return run_dir


def run_dir_of(path: str | os.PathLike) -> str:
    """The run directory of a path given to resume or eval: the run dir itself, its
    `checkpoint/` folder or the checkpoint file (relative paths stay relative)."""
    return os.path.dirname(os.path.dirname(checkpoint_path(path))) or "."


class Experiment:
    """A run of `config` for `seeds` seeds (x `hparams` settings), with files or without.

    Args:
      config: a validated `PPOConfig`.
      seeds: seeds vmapped in one compiled program.
      hparams: a sweep: a list of settings, each a dict of float hyperparameters
        (`Hparams` fields: lr, gamma, gae_lambda, clip_eps, ent_coef, vf_coef, max_grad_norm);
        every setting runs with the same `seeds` seeds (common random numbers), one compile.
      seed: the base seed.
      logdir: parent of the run directory; None writes nothing at all.
      run_name: the run directory's name (default: env, time and seed count).
      checkpoint_every: also checkpoint every this many updates (a run always checkpoints
        every `checkpoint_every_s` seconds and keeps its newest good state when it ends).
      progress: live progress (a bar on a terminal, lines otherwise).
      tensorboard: write `tb/<run>/` event files.
      devices / mesh / shard: split the runs (`"seeds"`) or each run's envs (`"envs"`) over
        `devices` (an int or "all") or a given `jax.sharding.Mesh`.
      callbacks: `jaxppo.Callback`s or functions of a `ChunkEvent` (return False, or any
        false value but None, to stop; an array is refused: it has no truth value).
        A `CsvLogger`, `TensorBoardLogger`, `Checkpointer` or `SummaryFile` given here replaces
        the built-in one; `builtin_callbacks=False` keeps only yours (and the progress).
      stop_on_divergence: stop at the first NaN/Inf update (a sweep flags it and goes on).
      donate: the chunk program donates the runner state it consumes (default: on a GPU/TPU);
        callbacks then see each chunk's state as a host copy.
      env / env_params: an environment instance to train on instead of the one
        `config.env_id` names (which then only labels the run); resuming such a run needs the
        same instance again: `Experiment.resume(run_dir, env=..., env_params=...)`.
      search: how a sweep's `hparams` were found (a random search's space, trials and seed),
        recorded in the checkpoint and summary.json (`search`); a halving record
        (`search.halving.halving_search`) trains them in rungs, keeping the best after each.
      controller: replaces the runner state and hparams between chunks (PBT:
        `jaxppo.search.pbt.PBTController`): the driver's `due`/`observe`/`replace`, plus
        `chunk_length(want, start_update)`, `start(run_dir, start_update, saved) -> Hparams`,
        `state()` (kept in every checkpoint, given back as `saved` on resume), `summary()`
        (added to summary.json), `common_seeds` (False: every run its own seed key) and
        optionally `renewed_since()` ([R] the update after which a run's learner was replaced
        by a healthy one, -1 for none: its earlier NaN/Inf no longer makes it diverged).
    """

    def __init__(self, config: PPOConfig, *, seeds: int = 1, hparams: Sequence[dict] | None = None,
                 seed: int = 0, logdir: str | None = "runs", run_name: str | None = None,
                 checkpoint_every: int | None = None,
                 checkpoint_every_s: float | None = CHECKPOINT_EVERY_S, progress: bool = True,
                 tensorboard: bool = True, devices: int | str | None = None, mesh=None,
                 shard: str = "seeds", callbacks: Sequence[Any] = (),
                 builtin_callbacks: bool = True, stop_on_divergence: bool | None = None,
                 chunk_updates: int | None = None, donate: bool | None = None,
                 env: Any = None, env_params: Any = None, search: dict | None = None,
                 controller: Any = None):
        if not isinstance(config, PPOConfig):
            raise TypeError(f"Experiment expects a PPOConfig, got {type(config).__name__}")
        if int(seeds) < 1:
            raise ConfigError(f"seeds: got {seeds}; use a positive integer")
        if not 0 <= int(seed) < 2**32:
            raise UsageError(f"--seed {seed}: use an integer in 0..{2**32 - 1}")
        self.config, self.seeds, self.seed = config, int(seeds), int(seed)
        self.env, self.env_params = env, env_params
        self.settings = None if hparams is None else [dict(s) for s in hparams]
        if self.settings is not None:
            _check_settings(config, self.settings)
            # Plain floats: they go into checkpoints and summary.json (numpy scalars would not).
            self.settings = [{k: float(v) for k, v in s.items()} for s in self.settings]
        self.num_runs = self.seeds * (1 if self.settings is None else len(self.settings))
        self.search = search
        self.controller = controller
        self.logdir = logdir
        self.run_name = None if run_name is None else check_run_name(run_name)
        self.checkpoint_every, self.checkpoint_every_s = checkpoint_every, checkpoint_every_s
        self.progress, self.tensorboard = progress, tensorboard
        self.mesh = mesh if mesh is not None or devices is None else make_mesh(devices)
        self.shard = shard
        self.callbacks = [as_callback(c) for c in callbacks]
        self.builtin_callbacks = builtin_callbacks
        self.stop_on_divergence = (self.settings is None if stop_on_divergence is None
                                   else stop_on_divergence)
        self.chunk_updates = chunk_updates
        # On an accelerator the chunk program donates the state it consumes (one copy on the
        # device, not two); on the CPU memory is host RAM and the copy is not worth a sync.
        self.donate = jax.default_backend() != "cpu" if donate is None else donate
        self._resume: dict | None = None  # set by from_checkpoint
        self._host_env: HostVecEnv | None = None  # the run's env, if it lives on the host
        self.last_run_dir: str | None = None  # the directory of the latest `run()`

    # -- resume ------------------------------------------------------------------------------
    @classmethod
    def from_checkpoint(cls, path: str | os.PathLike, **kwargs) -> Experiment:
        """The stopped run at `path` (its run dir, `checkpoint/` or the file), ready to `run()`
        on from its checkpoint, bit-exactly as if it had never stopped. `kwargs` are the
        run-independent options (progress, callbacks, devices, shard, checkpoint_every) and,
        for a run trained on an environment instance, that `env` (and `env_params`).

        metrics.csv must hold every update up to the checkpoint, else this refuses (one line
        saying what is missing); `repair_log=True` keeps its good rows instead and records the
        missing ones (in the checkpoint and `summary.json`: `metrics_missing_updates`, and
        per run `metrics_missing_by_run`). A
        finished run whose `summary.json` (or a sweep's `sweep.csv`) is missing or unreadable
        gets them rebuilt from the checkpoint's running account by `run()`, without training
        (a damaged one kept as `summary.json.damaged`)."""
        for key in ("seeds", "hparams", "seed", "logdir", "run_name", "search"):
            if key in kwargs:
                raise UsageError(f"resume continues a run with its own {key}; drop it")
        repair_log = bool(kwargs.pop("repair_log", False))
        ckpt = load_checkpoint(path, env=kwargs.get("env"), env_params=kwargs.get("env_params"))
        config, update, extra = ckpt.config, ckpt.update, ckpt.extra or {}
        run_dir = run_dir_of(path)
        check_no_symlinks(run_dir)
        _check_config_file(run_dir, config)
        settings = extra.get("settings")
        gaps = [tuple(g) for g in extra.get("log_gaps", [])]
        rebuild = []
        if update >= config.num_updates:
            rebuild = _missing_results(run_dir, settings)
            if not rebuild:
                raise UsageError(f"run '{run_dir}' is finished (update {update}/"
                                 f"{config.num_updates}); nothing to resume (evaluate it with: "
                                 "jaxppo eval RUN_DIR)")
        damaged = []
        writes_log = kwargs.get("builtin_callbacks", True) or any(
            isinstance(c, CsvLogger) for c in kwargs.get("callbacks", ()))
        seeds = ckpt.num_runs // (len(settings) if settings else 1)
        if not rebuild and writes_log and is_main_process():
            # a halving sweep's stopped agents have no rows after their rung
            ends = checkpoint_run_updates(extra, ckpt.num_runs, update)
            gaps, damaged = check_metrics_log(run_dir, update, ckpt.num_runs, gaps, repair_log,
                                              run_ends=ends)
        exp = cls(config, seeds=seeds, hparams=settings, seed=int(extra.get("seed", 0)),
                  logdir=os.path.dirname(os.path.abspath(run_dir)),
                  run_name=os.path.basename(os.path.abspath(run_dir)),
                  search=extra.get("search"), **kwargs)
        exp._resume = {"run_dir": run_dir, "update": update, "runner": ckpt.runner_state,
                       "extra": extra, "log_gaps": tuple(gaps), "keep_damaged_log": damaged,
                       "rebuild": rebuild}
        return exp

    @classmethod
    def resume(cls, path: str | os.PathLike, **kwargs) -> RunResult:
        """Continue the stopped run at `path` to its end; returns its `RunResult`."""
        return cls.from_checkpoint(path, **kwargs).run()

    # -- the run -----------------------------------------------------------------------------
    def keys(self) -> jax.Array:
        """One key per run. A sweep gives every setting the same seeds' keys."""
        if self.settings is None or not getattr(self.controller, "common_seeds", True):
            return jax.random.split(jax.random.key(self.seed), self.num_runs)
        seed_keys = jax.random.split(jax.random.key(self.seed), self.seeds)
        return jnp.tile(seed_keys, len(self.settings))

    def renewed_since(self) -> np.ndarray | None:
        """[R] the controller's `renewed_since()` (PBT), or None (no run is ever renewed)."""
        renewed = getattr(self.controller, "renewed_since", None)
        return None if renewed is None else np.asarray(renewed(), int)

    def stacked_hparams(self) -> Hparams | None:
        """The sweep's settings as one `Hparams` with leaves [R] (None: the config's)."""
        if self.settings is None:
            return None
        return Hparams.stack([dataclasses.replace(self.config, **s)
                              for s in self.settings for _ in range(self.seeds)])

    def run_names(self) -> list[str]:
        if self.settings is None:
            return [f"seed_{i}" for i in range(self.num_runs)]
        return [f"{g:03d}_{setting_label(s)}_seed{i}"
                for g, s in enumerate(self.settings) for i in range(self.seeds)]

    def run(self) -> RunResult:
        """Train to the configured total (or until stopped) and return the `RunResult`."""
        config, resume = self.config, self._resume
        if resume is not None and resume.get("ran"):
            raise UsageError("this Experiment already continued its run; resume it again with "
                             f"Experiment.resume({resume['run_dir']!r})")
        if resume is not None and "controller" in resume["extra"] and self.controller is None:
            strategy = (self.search or {}).get("strategy", "controlled")
            raise UsageError(f"'{resume['run_dir']}' is a {strategy} sweep, whose members change "
                             "between chunks; continue it with: jaxppo sweep --resume "
                             f"{resume['run_dir']} (Python: jaxppo.search.sweep.resume_sweep)")
        if resume is not None and resume.get("rebuild"):
            self.last_run_dir = resume["run_dir"]
            if not is_main_process():  # only process 0 writes a run directory
                return self._rebuild(write=False)
            with RunLock(resume["run_dir"]):
                return self._rebuild()
        if self.mesh is not None and host_source_of(config.env_id) is not None:
            raise ConfigError(f"config key 'env_id': {config.env_id!r} lives on the host and "
                              "trains on one device; drop --devices")
        placement = make_placement(config, self.mesh, self.shard, env=self.env,
                                   env_params=self.env_params)
        host = getattr(getattr(placement, "trainer", None), "env", None)
        self._host_env = host if isinstance(host, HostVecEnv) else None
        if self._host_env is not None and (self.controller is not None
                                           or is_halving(self.search)):
            self._host_env.close()
            raise ConfigError(f"config key 'env_id': {config.env_id!r} lives on the host, whose "
                              "episodes cannot follow agents copied or dropped between chunks; "
                              "use --search grid or random")
        chunk = self.chunk_updates
        if self.controller is not None:  # chunk boundaries on the controller's updates
            chunk = self.controller.chunk_length(chunk or pick_chunk(config.num_updates),
                                                 resume["update"] if resume else 0)
        # Refuses a config that cannot fit, before any file is written or anything compiles.
        driver = Driver(placement, self.num_runs, config.num_updates,
                        chunk_updates=chunk, donate=self.donate)
        rung_drivers = None
        if is_halving(self.search):  # each rung's program, checked (not compiled) up front
            rung_drivers = self._rung_drivers(placement, resume["update"] if resume else 0)
            driver = rung_drivers[0][1]
        main = is_main_process()
        if resume:
            run_dir, fresh = resume["run_dir"], False
            resume["ran"] = True  # its runner state may be donated to the first chunk
        elif self.logdir is not None and main:
            run_dir, fresh = make_run_dir(self.logdir, self.run_name, config, self.num_runs), True
        elif self.logdir is not None:
            run_dir, fresh = os.path.join(self.logdir, self.run_name or "(process 0's run dir)"), False
        else:
            run_dir, fresh = None, False
        self.last_run_dir = run_dir
        self._loop = None
        lock = RunLock(run_dir) if run_dir is not None and main else None
        try:
            if lock is not None:
                lock.acquire()  # a second writer is refused here, before anything is written
            if fresh:
                write_config(run_dir, config)
            if resume and resume.get("keep_damaged_log") and main:  # before the repair drops rows
                log = os.path.join(run_dir, "metrics.csv")
                copy = free_name(log + ".damaged")
                shutil.copyfile(log, copy)
                print(f"note: '{log}' was repaired: {'; '.join(resume['keep_damaged_log'])}; the file "
                      f"as it was is kept as '{copy}'", file=sys.stderr)
            return self._run(placement, driver, run_dir, main, rung_drivers)
        except BaseException:
            # Only a run dir in which nothing ran goes (no orphan after Ctrl-C while compiling);
            # once a chunk has run, its logs (and any checkpoint) are the run's and are kept.
            ran = self._loop is not None and self._loop.ran
            if fresh and not ran and not os.path.exists(os.path.join(run_dir, "checkpoint")):
                shutil.rmtree(run_dir, ignore_errors=True)
            raise
        finally:
            if self._host_env is not None:  # its pool (an async one's subprocesses) goes now
                self._host_env.close()
            if lock is not None:
                lock.release()

    def _run(self, placement, driver: Driver, run_dir: str | None, main: bool,
             rung_drivers: list | None = None) -> RunResult:
        config, resume = self.config, self._resume
        start_update = resume["update"] if resume else 0
        info = RunInfo(config, self.num_runs, self.run_names(), run_dir, start_update, self.seed,
                       self.settings, driver.chunk_updates, placement.description,
                       env=None if self.env is None else describe_env(self.env, self.env_params),
                       log_gaps=resume["log_gaps"] if resume else (), search=self.search)
        callbacks = self._callbacks(run_dir is not None, main)
        hparams = self.stacked_hparams()
        if self.controller is not None:
            hparams = self.controller.start(run_dir if main else None, start_update,
                                            resume["extra"].get("controller") if resume else None)
        inputs = placement.place_inputs(self.keys(), hparams)
        t_start = time.perf_counter()
        loop = self._loop = _Loop(self, info, self._initial_stats(), callbacks, t_start)
        if resume and run_dir is not None and not self.stop_on_divergence:  # a sweep's record
            # rows past the checkpoint are cut, not replayed as such
            loop.divergences, loop.live = _logged_divergences(
                run_dir, self.num_runs, resume["update"], self.renewed_since())
            loop.diverged_runs[list(loop.live)] = True
        try:
            for cb in callbacks:
                cb.on_start(info)
            if rung_drivers is not None:
                final = self._run_rungs(placement, rung_drivers, inputs, loop, info, t_start)
            else:
                driver.compile(inputs, start_update)
                loop.compile_s = driver.compile_s
                for cb in callbacks:
                    cb.on_compiled(info, driver.compile_s)
                runner = (driver.place(self._restart(placement, resume))
                          if resume else driver.init(inputs))
                with StopFlag() as stop:
                    loop.stop_flag = stop
                    final = driver.run(runner, inputs.hparams, start_update, loop.on_chunk,
                                       t_start, self.controller)
        except BaseException:
            loop.status = "error"
            _end_all(callbacks, loop.result(loop.good_runner))  # save, close; then re-raise
            raise
        if loop.status == "running":
            loop.status = "finished"
        result = loop.result(final if loop.status == "finished" else loop.good_runner)
        error = _end_all(callbacks, result)
        if error is not None:
            raise error
        return result

    def _restart(self, placement, resume: dict):
        """The checkpoint's runner state; on a host env, with the episodes started afresh (the
        host's state is in no checkpoint) and the learner exactly as saved."""
        if self._host_env is None:
            return resume["runner"]
        print(f"note: {self.config.env_id} lives on the host, outside the checkpoint: the "
              f"learner continues exactly from update {resume['update']}, with every episode "
              "started afresh", file=sys.stderr)
        return jax.jit(jax.vmap(placement.trainer.restart_episodes))(resume["runner"])

    def host_fault(self, update: int, good_update: int | None) -> EnvError | None:
        """The host env's fault as one line, if it happened in the updates up to `update`
        (a pipelined later chunk's is reported after this one is handled)."""
        host = self._host_env
        fault = None if host is None else host.fault
        if fault is None:
            return None
        start = self._resume["update"] if self._resume else 0
        T = self.config.num_steps
        failed = start + fault.step // T + 1
        if fault.where != "reset" and failed > update:
            return None
        where = ("reset" if fault.where == "reset" else
                 f"update {failed}, env step {fault.step % T + 1} of {T}")
        kept = ("nothing before it was checkpointed" if not good_update else
                f"the checkpoint at update {good_update} is kept")
        return EnvError(f"environment {self.config.env_id!r} failed at {where} ({fault.what}); "
                        f"the run stopped, {kept}")

    def _rung_drivers(self, placement, start_update: int) -> list:
        """(rung, Driver) for each rung still to run, each for its survivors only (N x seeds
        agents, N/eta x seeds, ...) and ending at the rung's end. Its chunk length is picked
        for the rung's own updates, so that it is one program where it can be (not two)."""
        rec = self.search
        sizes = rung_sizes(rec["trials"], rec["eta"])
        starts = [0, *rec["rungs"][:-1]]
        return [(k, Driver(placement, sizes[k] * self.seeds, end, donate=self.donate,
                           chunk_updates=self.chunk_updates or pick_chunk(
                               end - max(start, start_update))))
                for k, (start, end) in enumerate(zip(starts, rec["rungs"], strict=True))
                if end > start_update]

    def _run_rungs(self, placement, rung_drivers: list, inputs, loop: _Loop, info: RunInfo,
                   t_start: float):
        """A halving sweep (`search/halving.py`): rung by rung, each rung's survivors in the
        program compiled for them; every agent's state is kept on the host between rungs (and
        is what callbacks and checkpoints see), a stopped agent's as its rung left it."""
        rungs = Rungs(self.search, self.seeds, loop.diverged_runs)
        keys, hparams = self.keys(), self.stacked_hparams()
        full = self._resume["runner"] if self._resume else None
        update = info.start_update
        with StopFlag() as stop:
            loop.stop_flag = stop
            for k, driver in rung_drivers:
                runs = rungs.runs(k)
                whole = len(runs) == self.num_runs
                part = inputs if whole else placement.place_inputs(
                    keys[runs], jax.tree.map(lambda x, r=runs: x[r], hparams))
                driver.compile(part, update, init=full is None)
                loop.compile_s += driver.compile_s
                if k == rung_drivers[0][0]:
                    for cb in loop.callbacks:
                        cb.on_compiled(info, loop.compile_s)
                if self.progress and is_main_process():
                    print(f"rung {k + 1}/{len(rungs.ends)}: {len(runs) // self.seeds} settings x "
                          f"{self.seeds} seeds = {len(runs)} agents, updates {update + 1}-"
                          f"{rungs.ends[k]} ({driver.num_programs} program(s) for "
                          f"{len(runs)} runs, {driver.chunk_updates} updates per chunk, compiled "
                          f"in {driver.compile_s:.1f} s)", flush=True)
                if full is None:
                    runner = driver.init(part)
                elif whole:
                    runner = driver.place(full)
                else:
                    runner = driver.place(take_runs(to_host(full), runs, driver.template(part)))

                def on_chunk(state, chunk: ChunkResult, runs=runs, whole=whole) -> bool:
                    nonlocal full
                    rungs.observe(chunk.metrics, runs, chunk.first_update)  # before a checkpoint
                    if whole:
                        full = state
                        return loop.on_chunk(state, chunk)
                    full = put_runs(to_host(full), runs, state)
                    metrics = expand_metrics(chunk.metrics, runs, self.num_runs)
                    return loop.on_chunk(full, chunk._replace(metrics=metrics),
                                         np.isin(np.arange(self.num_runs), runs))

                driver.run(runner, part.hparams, update, on_chunk, t_start)
                update = loop.stats.update
                if loop.status != "running":
                    break
        return full

    def _rebuild(self, write: bool = True) -> RunResult:
        """A finished run's missing results (summary.json, curve.png; a sweep's sweep.csv and
        sweep.png) from its checkpoint's running account and metrics.csv; nothing compiles or
        trains. What the checkpoint does not hold (compile time, device) is null."""
        resume, c = self._resume, self.config
        resume["ran"] = True
        run_dir = resume["run_dir"]
        info = RunInfo(c, self.num_runs, self.run_names(), run_dir, resume["update"], self.seed,
                       self.settings, 0, log_gaps=resume["log_gaps"], search=self.search)
        loop = _Loop(self, info, self._initial_stats(), [], time.perf_counter())
        if self.controller is not None:  # its summary: the members' settings now
            self.controller.start(None, resume["update"], resume["extra"].get("controller"))
        loop.status = "finished"
        loop.divergences, loop.live = _logged_divergences(run_dir, self.num_runs,
                                                          resume["update"], self.renewed_since())
        loop.diverged_runs = _diverged_runs(resume["runner"], self.num_runs, loop.live)
        result = loop.result(resume["runner"])
        result.wall_s, result.compile_s = loop.stats.wall_before, None
        result.summary.update(wall_s=round(loop.stats.wall_before, 3), compile_s=None,
                              device=None, platform=None, peak_device_bytes=None,
                              rebuilt_from_checkpoint=True)
        missing = [n for n, _ in resume["rebuild"]] if write else []
        for name, why in resume["rebuild"] if write else []:
            if why:  # damaged: kept beside the one rebuilt
                path = os.path.join(run_dir, name)
                copy = free_name(path + ".damaged")
                os.replace(path, copy)
                print(f"note: '{path}' was damaged ({why}); it is kept as '{copy}' and rebuilt "
                      "from the checkpoint", file=sys.stderr)
        if self.settings is not None:
            result.summary["ranked"] = sweep_rows(result)
            if "sweep.csv" in missing or "sweep.png" in missing:
                table = SweepTable()
                table.on_start(info)
                table.on_end(result)
        if "summary.json" in missing:
            write_summary(run_dir, result.summary)
        if "curve.png" in missing:
            try:
                write_curve(info, result.summary.get("threshold"))
            except UsageError as e:
                print(f"note: curve.png not rebuilt: {e}", file=sys.stderr)
        result.rebuilt = [n for n in missing if os.path.exists(os.path.join(run_dir, n))]
        return result

    def _initial_stats(self) -> RunStats:
        c, resume = self.config, self._resume or {}
        saved = resume.get("extra", {}).get("stats")
        if saved is None and resume:  # a checkpoint from before 0.2: its summary.json, if any
            saved = _summary_stats(resume["run_dir"], resume["update"])
        if saved:
            return RunStats.from_dict(saved, c.env_id, self.num_runs, c.batch_size)
        return RunStats(c.env_id, self.num_runs, c.batch_size, update=resume.get("update", 0))

    def _callbacks(self, files: bool, main: bool) -> list[Callback]:
        """The user's callbacks, the progress, then the built-in file writers on process 0
        (the checkpointer on every process: saving gathers, a collective)."""
        out = list(self.callbacks)
        if self.progress and main:
            out.append(Progress())
        if not (files and self.builtin_callbacks):
            return out
        builtin = [Checkpointer(self.checkpoint_every, self.checkpoint_every_s,
                                allow_nonfinite=not self.stop_on_divergence)]
        if main:
            sweep_files = [SweepTable()] if self.settings is not None else []
            builtin = [CsvLogger(), *([TensorBoardLogger()] if self.tensorboard else []),
                       *builtin, *sweep_files, SummaryFile()]
        out += [b for b in builtin if not any(type(c) is type(b) for c in out)]
        for cb in out:  # a checkpoint never gets ahead of the logs written before it
            if isinstance(cb, Checkpointer):
                cb.before_save = [c.flush for c in out if c is not cb]
                if self.controller is not None:
                    cb.extra_state = self.controller.state
        return out


class _Loop:
    """The per-chunk decisions of one `Experiment.run()`: account, log, stop or go on."""

    def __init__(self, exp: Experiment, info: RunInfo, stats: RunStats, callbacks, t_start):
        self.exp, self.info, self.stats, self.callbacks = exp, info, stats, callbacks
        self.compile_s, self.t_start = 0.0, t_start
        self.status = "running"
        self.ran = False  # a chunk reached the host (its logs may be on disk)
        self.stop_signal = None
        self.diverged: Divergence | None = None
        self.diverged_runs = np.zeros(info.num_runs, bool)
        self.divergences: dict[int, Divergence] = {}  # each run's first, by run (the record)
        self.live: dict[int, Divergence] = {}  # each run's first since a PBT renewal (if any)
        self.good_runner, self.good_update = None, (info.start_update or None)
        self.chunks: list[dict] = []
        self.stop_flag = None

    @quiet_nonfinite
    def on_chunk(self, runner, chunk: ChunkResult, active: np.ndarray | None = None) -> bool:
        """`active`: [R] the agents this chunk stepped (a halving sweep's survivors; None: all)."""
        fault = self.exp.host_fault(chunk.update, self.good_update)
        if fault is not None:  # nothing of this chunk is kept: it ran on zeros after the fault
            raise fault
        self.ran = True
        m = chunk.metrics
        self.stats.add_chunk(m, chunk.first_update, chunk.wall_s, chunk.chunk_s, active)
        self.chunks.append(m)
        bad = find_nonfinite(m, chunk.first_update)
        self.diverged_runs |= (np.asarray(m["nonfinite"]) > 0).any(axis=1)
        for d in run_divergences(m, chunk.first_update):
            self.divergences.setdefault(d.run, d)
            self.live.setdefault(d.run, d)
        since = self.exp.renewed_since()
        if since is not None:  # a PBT member renewed at this chunk's end is healthy again
            renewed = since == chunk.update
            self.diverged_runs &= ~renewed
            for run in np.flatnonzero(renewed):
                self.live.pop(int(run), None)
        event = ChunkEvent(self.info, chunk.first_update, chunk.update, m,
                           self.stats.wall_before + chunk.wall_s, chunk.chunk_s, self.compile_s,
                           self.stats, runner, bad, active)
        go_on = True
        for cb in self.callbacks:
            if _says_stop(cb, cb.on_chunk(event)):
                go_on = False
        if bad is not None and self.exp.stop_on_divergence:  # the same on every process
            self.status, self.diverged = "diverged", bad
            return False
        self.good_runner, self.good_update = runner, chunk.update
        # Process 0 decides for every process (a signal, or one of its callbacks said stop),
        # so that all of them stop at the same chunk.
        decision = from_process_0(self.stop_flag.signum or (0 if go_on else _STOP_BY_CALLBACK))
        if decision:
            self.status = "stopped"
            self.stop_signal = decision if decision > 0 else None
            return False
        return True

    @quiet_nonfinite
    def result(self, runner) -> RunResult:
        exp, stats = self.exp, self.stats
        wall = time.perf_counter() - self.t_start
        c = exp.config
        # After an error on one process the others are elsewhere: no collective then.
        lone = self.status == "error" and jax.process_count() > 1
        train_state = None if runner is None or lone else gather(runner.train_state)
        returns = stats.final_return
        mean, std = mean_std_or_none(returns)
        dev = jax.devices()[0]
        if self.diverged is None and self.live:  # a sweep goes on: its first, by update, of
            # the runs diverged now (a rescued PBT member's is only in `divergences`)
            self.diverged = min(self.live.values(), key=lambda d: (d.update, d.run))
        if self.status == "finished" and self.diverged_runs.all():
            self.status = "diverged"  # every agent: nothing in the run is a result
        summary = {
            "env_id": c.env_id,
            "num_runs": exp.num_runs,
            "status": self.status,
            # null for a run in which no episode has ended; mean and std over the others
            "final_return": returns_or_none(returns),
            "final_return_mean": mean,
            "final_return_std": std,
            "runs_without_return": int((stats.episodes == 0).sum()),
            # episodes ended, but the return is NaN/Inf: the run diverged (diverged_runs; or a
            # PBT member rescued since, whose own last return is from before)
            "runs_nonfinite_return": int((~np.isfinite(returns) & (stats.episodes > 0)).sum()),
            "wall_s": round(stats.wall_before + wall, 3),
            "compile_s": round(self.compile_s, 3),
            "sps": round(stats.sps_per_run * exp.num_runs, 1),
            "sps_per_run": round(stats.sps_per_run, 1),
            # per agent (a halving sweep's: its furthest); the total over agents, each as far
            # as it trained (a halving sweep's stopped ones stop counting)
            "env_steps": int(stats.update * c.batch_size),
            "env_steps_total": int(c.batch_size * (
                run_updates(exp.search, exp.seeds, stats.update).sum()
                if is_halving(exp.search) else stats.update * exp.num_runs)),
            "episodes_per_run": [float(x) for x in stats.episodes],
            "solved": stats.solved,
            "threshold": stats.threshold,
            "finished": self.status == "finished",
            "diverged": None if self.diverged is None else self.diverged._asdict(),
            "diverged_runs": [int(i) for i in np.flatnonzero(self.diverged_runs)],
            "divergences": [d._asdict() for _, d in sorted(self.divergences.items())],
            "device": dev.device_kind,
            "platform": dev.platform,
            "peak_device_bytes": peak_device_bytes(dev),
            "written_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        }
        if exp.settings is not None:
            summary["settings"] = exp.settings
            summary["seeds"] = exp.seeds
            if exp.search is not None:
                summary["search"] = exp.search
            if exp.controller is not None:
                summary.update(exp.controller.summary())
        # lost from metrics.csv, recorded by a repair_log resume
        summary.update(gaps_summary(self.info.log_gaps, exp.num_runs))
        return RunResult(c, exp.num_runs, self.status, stats.update, returns, stats.solved,
                         stats.sps_per_run * exp.num_runs, self.compile_s,
                         stats.wall_before + wall, stack_metrics(self.chunks), train_state,
                         self.info.run_dir, self.stop_signal, self.diverged, self.good_update,
                         summary, self.t_start)


@quiet_nonfinite
def _says_stop(cb: Callback, said: Any) -> bool:
    """False, np.False_, 0: stop; None or a true value: go on. An array (of any size) has no
    truth value: refused, naming the callback, rather than NumPy's error naming nothing."""
    if said is None:
        return False
    if np.ndim(said) == 0:
        try:
            return not bool(said)
        except (TypeError, ValueError):
            pass
    fn = getattr(cb, "fn", cb)  # a plain function, wrapped as a FunctionCallback
    name = getattr(fn, "__name__", type(fn).__name__)
    shape = f" of shape {np.shape(said)}" if np.ndim(said) else ""
    raise TypeError(f"callback {name} returned a {type(said).__name__}{shape}; an on_chunk "
                    "callback returns a bool (False stops the run) or None")


def _end_all(callbacks: list[Callback], result: RunResult) -> BaseException | None:
    """Every callback's `on_end`, even after one fails (so the checkpoint is still saved and
    the other logs closed); returns the first failure."""
    first = None
    for cb in callbacks:
        try:
            cb.on_end(result)
        except Exception as e:  # noqa: BLE001 - re-raised by the caller
            first = first or e
    return first


def _check_settings(config: PPOConfig, settings: list[dict]) -> None:
    if not settings:
        raise ConfigError("hparams: an empty list of settings; give at least one dict")
    for s in settings:
        bad = [k for k in s if k not in Hparams._fields]
        if bad:
            raise ConfigError(f"hparams: {bad[0]!r} is static (fixed when compiled), and one "
                              f"Experiment is one program: its hparams take "
                              f"{', '.join(Hparams._fields)}; jaxppo.sweep(config, "
                              f"{{{bad[0]!r}: [...]}}) compiles one program per static setting")
        dataclasses.replace(config, **s)  # validate every setting on the host before compiling


def _check_config_file(run_dir: str, config: PPOConfig) -> None:
    """A resumed run continues with its checkpoint's config; a `config.yaml` edited since would
    be silently ignored, so it is refused (one line, naming the keys that differ)."""
    path = os.path.join(run_dir, "config.yaml")
    if not os.path.isfile(path):
        return
    try:
        with open(path, encoding="utf-8") as f:
            on_disk = yaml.safe_load(f)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        on_disk = None
    saved = config.to_dict()
    if not isinstance(on_disk, dict):
        raise UsageError(f"'{path}' is not the config this run was started with (unreadable); "
                         "restore it (the checkpoint holds the run's config) or delete it")
    try:  # a file from an older jaxppo lacks newer keys: compare with defaults filled in
        on_disk = config_from_dict(on_disk, source=path).to_dict()
    except ConfigError:
        pass  # compared raw: every key that differs is named
    changed = sorted(k for k in set(saved) | set(on_disk) if on_disk.get(k) != saved.get(k))
    if changed:
        raise UsageError(f"'{path}' was edited since the run started ({', '.join(changed)}); a "
                         "resumed run keeps its own config: undo the edit, or start a new run "
                         "with --config")


def _missing_results(run_dir: str, settings: list | None) -> list[tuple[str, str]]:
    """The result files a finished run lacks, as (name, what is wrong with the one there, ""
    when there is none), when its summary.json (or a sweep's sweep.csv) is among them: a run
    killed between its last checkpoint and writing them, or a file damaged since."""
    names = ["summary.json", "curve.png", *(["sweep.csv", "sweep.png"] if settings else [])]
    missing = [(n, "") for n in names if not os.path.exists(os.path.join(run_dir, n))]
    for name, check in (("summary.json", _summary_problem), ("sweep.csv", sweep_csv_problem)):
        path = os.path.join(run_dir, name)
        if name in names and os.path.exists(path):
            why = check(path, settings)
            missing += [(name, why)] if why else []
    return missing if {"summary.json", "sweep.csv"} & {n for n, _ in missing} else []


def _summary_problem(path: str, settings) -> str:
    """What makes a finished run's summary.json unusable ("" when nothing)."""
    try:
        with open(path, encoding="utf-8") as f:
            summary = json.load(f)
    except (OSError, ValueError) as e:
        return f"it is not JSON: {e}"
    if not isinstance(summary, dict):
        return "it is not a JSON object"
    lacks = [k for k in ("env_id", "num_runs", "status", "final_return", "env_steps")
             if k not in summary]
    if lacks:
        return f"it lacks {', '.join(lacks)}"
    return "it says the run did not finish" if summary.get("finished") is False else ""


def _diverged_runs(runner, num_runs: int, live: dict[int, Divergence]) -> np.ndarray:
    """[R] runs that went NaN/Inf: with a divergence in `live` (metrics.csv's, since a PBT
    member's renewal) or holding non-finite parameters in the checkpoint."""
    bad = np.zeros(num_runs, bool)
    for x in jax.tree.leaves(jax.device_get(runner.train_state)):
        x = np.asarray(x)
        if np.issubdtype(x.dtype, np.floating):
            bad |= ~np.isfinite(x.reshape(num_runs, -1)).all(axis=1)
    bad[list(live)] = True
    return bad


def _logged_divergences(run_dir: str, num_runs: int, upto: int, after: np.ndarray | None
                        ) -> tuple[dict[int, Divergence], dict[int, Divergence]]:
    """Each run's first divergence as metrics.csv recorded it (`nonfinite`,
    `nonfinite_source`) up to the checkpoint's update `upto` (what a resumed or rebuilt sweep
    knew before its checkpoint), and each run's first after update `after[run]` (a PBT
    member's renewal; with `after` None, the same), from one read of the log."""
    first: dict[int, Divergence] = {}
    live: dict[int, Divergence] = {}
    log = os.path.join(run_dir, "metrics.csv")
    if not os.path.isfile(log):
        return first, live
    for r in parse_metrics_log(log)[0]:
        if not (r.get("nonfinite") and float(r["nonfinite"]) > 0 and int(r["run"]) < num_runs):
            continue
        if int(r["update"]) > upto:
            continue
        code = int(float(r.get("nonfinite_source") or 0))
        source = NONFINITE_SOURCES[code - 1] if 1 <= code <= len(NONFINITE_SOURCES) else "loss"
        d = Divergence(int(r["run"]), int(r["update"]), source)
        kept = [first] if after is not None and d.update <= after[d.run] else [first, live]
        for out in kept:
            if d.run not in out or d.update < out[d.run].update:
                out[d.run] = d
    return first, live


def _summary_stats(run_dir: str, update: int) -> dict | None:
    """The running account of a checkpoint written before checkpoints carried it."""
    try:
        with open(os.path.join(run_dir, "summary.json"), encoding="utf-8") as f:
            s = json.load(f)
        return {"update": update, "episodes": s["episodes_per_run"],
                "final_return": s["final_return"], "solved": s.get("solved"),
                "wall_s": s["wall_s"], "run_s": 0.0, "steps_timed": 0}
    except (OSError, ValueError, KeyError, TypeError):
        return None
