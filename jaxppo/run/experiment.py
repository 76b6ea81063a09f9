"""`Experiment`, one owner for a run's life. A search strategy that changes the population while it
runs (PBT, halving) does so through a `Controller` (`run/controller.py`): this module knows none."""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from jaxppo.config import Hparams, PPOConfig, check_settings
from jaxppo.envs import HostVecEnv
from jaxppo.envs.identity import describe_env
from jaxppo.envs.registry import host_source_of
from jaxppo.errors import ConfigError, UsageError
from jaxppo.labels import run_names
from jaxppo.process import StopFlag
from jaxppo.run.builtins import run_callbacks
from jaxppo.run.controller import Controller
from jaxppo.run.distributed import is_main_process, make_mesh
from jaxppo.run.divergence import logged_divergences
from jaxppo.run.driver import Driver, chunk_for_checkpoints, pick_chunk
from jaxppo.run.events import Callback, RunInfo, RunResult, as_callback
from jaxppo.run.faults import host_fault, say_what_is_kept
from jaxppo.run.logs.csv_logger import CsvLogger
from jaxppo.run.loop import RunLoop, end_all
from jaxppo.run.memory import check_run_count
from jaxppo.run.placement import make_placement
from jaxppo.run.rebuild import rebuild
from jaxppo.run.resume import ResumePoint, check_resume
from jaxppo.run.segments import run_segments, segment_drivers
from jaxppo.run.stats import RunStats
from jaxppo.rundir import names
from jaxppo.rundir.checkpoint import ensure_run_id, load_checkpoint
from jaxppo.rundir.files import RunLock, check_run_name, free_name
from jaxppo.rundir.layout import make_run_dir, write_config
from jaxppo.rundir.summary import summary_stats

CHECKPOINT_EVERY_S = 120.0
"""A run checkpoints at least this often by default, so a hard stop (kill -9, an OOM kill, a
power cut) loses at most ~2 minutes; a save costs milliseconds (BENCHMARKS.md)."""


def print_note(note: str) -> None:
    """The default way a run's notes reach its user: one `note: ...` line on stderr."""
    print(f"note: {note}", file=sys.stderr, flush=True)


class Experiment:
    """A run of `config` for `seeds` seeds (x `hparams` settings), with files or without.

    One owner for a run's life: `run()` starts (or resumes) it, compiles it, steps it chunk by chunk,
    calls the callbacks, honours signals, stops on divergence, checkpoints, and returns a `RunResult`.
    The CLI, `jaxppo compare` and the benchmarks are thin users of it; so is a notebook. A run
    directory has one writer at a time (an OS lock held for the run's life).

    Args:
      config: a validated `PPOConfig`.
      seeds: seeds vmapped in one compiled program.
      hparams: a sweep: a list of settings, each a dict of float hyperparameters
        (`Hparams` fields: lr, gamma, gae_lambda, clip_eps, ent_coef, vf_coef, max_grad_norm);
        every setting runs with the same `seeds` seeds (common random numbers), one compile.
      seed: the base seed.
      logdir: parent of the run directory; None writes nothing at all (the same code, no files).
      run_name: the run directory's name (default: env, time and seed count).
      checkpoint_every: also checkpoint every this many updates (a run always checkpoints
        every `checkpoint_every_s` seconds and keeps its newest good state when it ends); the
        default chunk is then at most this long, so a stop loses at most this many updates.
      checkpoint_every_s: seconds between checkpoints (120; None: only `checkpoint_every` and the end).
      progress: live progress (a bar on a terminal, lines otherwise).
      tensorboard: write `tb/<run>/` event files.
      devices: split the runs (`shard="seeds"`) or each run's envs (`"envs"`) over this many
        devices (an int or "all").
      mesh: a given `jax.sharding.Mesh` to split over, instead of `devices`.
      shard: what is split over the devices: `"seeds"` (the runs) or `"envs"` (each run's).
      builtin_callbacks: write the run directory's files (False: only your callbacks).
      callbacks: `jaxppo.Callback`s or functions of a `ChunkEvent` (return False, or any
        false value but None, to stop; an array is refused: it has no truth value).
        A `CsvLogger`, `TensorBoardLogger`, `Checkpointer` or `SummaryFile` given here replaces
        the built-in one.
      stop_on_divergence: stop at the first NaN/Inf update (a sweep flags it and goes on).
      chunk_updates: updates per compiled chunk (default: about 1/25 of the run).
      donate: the chunk program donates the runner state it consumes (default: on a GPU/TPU);
        callbacks then see each chunk's state as a host copy.
      env: an environment instance to train on instead of the one `config.env_id` names
        (which then only labels the run); resuming such a run needs the same instance again:
        `Experiment.resume(run_dir, env=..., env_params=...)`.
      env_params: that environment's params (default: its `default_params`).
      search: how a sweep's `hparams` were found (a random search's space, trials and seed),
        recorded in the checkpoint and summary.json (`search`).
      controller: a search strategy that changes the population while it runs (PBT's
        exploits, successive halving's rungs): a `jaxppo.run.controller.Controller`.
      on_note: where the run's notes go (a repaired log, a restarted episode, a rung's
        start): a function of the text; default one `note: ...` line on stderr; None keeps
        them only in `RunResult.notes`.

    Raises:
      ConfigError: `seeds` below 1, a bad `hparams` setting, or more `devices` than there are.
      UsageError: `seed` outside 0..2**32-1, or a `run_name` that is not one directory name.
    """

    def __init__(self, config: PPOConfig, *, seeds: int = 1, hparams: Sequence[dict] | None = None,
                 seed: int = 0, logdir: str | None = "runs", run_name: str | None = None,
                 checkpoint_every: int | None = None,
                 checkpoint_every_s: float | None = CHECKPOINT_EVERY_S, progress: bool = True,
                 tensorboard: bool = True, devices: int | str | None = None,
                 mesh: Mesh | None = None,
                 shard: str = "seeds", callbacks: Sequence[Any] = (),
                 builtin_callbacks: bool = True, stop_on_divergence: bool | None = None,
                 chunk_updates: int | None = None, donate: bool | None = None,
                 env: Any = None, env_params: Any = None, search: dict | None = None,
                 controller: Controller | None = None,
                 on_note: Callable[[str], None] | None = print_note):
        if not isinstance(config, PPOConfig):
            raise TypeError(f"Experiment expects a PPOConfig, got {type(config).__name__}")
        if int(seeds) < 1:
            raise ConfigError(f"seeds: got {seeds}; use a positive integer")
        if hparams is None:
            check_run_count(int(seeds), f"seeds={int(seeds)}", fix="run fewer seeds, in several runs")
        if not 0 <= int(seed) < 2**32:
            raise UsageError(f"--seed {seed}: use an integer in 0..{2**32 - 1}")
        self.config, self.seeds, self.seed = config, int(seeds), int(seed)
        self.env, self.env_params = env, env_params
        self.settings = None if hparams is None else [dict(s) for s in hparams]
        if self.settings is not None:
            check_run_count(len(self.settings) * self.seeds,
                            f"{len(self.settings):,} settings x {self.seeds} seeds")
            check_settings(config, self.settings)
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
        self.on_note = on_note
        self.notes: list[str] = []  # every note of this Experiment, in order
        self._listeners: list[Callback] = []  # the running callbacks, which hear notes too
        self._resume: ResumePoint | None = None  # set by from_checkpoint
        self._host_env: HostVecEnv | None = None  # the run's env, if it lives on the host
        self._loop: RunLoop | None = None
        self._stop: StopFlag | None = None  # the signals held while `run()` runs
        self.last_run_dir: str | None = None  # the directory of the latest `run()`

    # -- resume ------------------------------------------------------------------------------
    @classmethod
    def from_checkpoint(cls, path: str | os.PathLike, **kwargs: Any) -> Experiment:
        """The stopped run at `path` (its run dir, `checkpoint/` or the file), ready to `run()`
        on from its checkpoint, bit-exactly as if it had never stopped. `kwargs` are the
        run-independent options (progress, callbacks, devices, shard, checkpoint_every,
        on_note), `controller` for a sweep whose strategy changes its population (built from
        the checkpoint's record: `jaxppo.resume_sweep` does it), and, for a run trained on an
        environment instance, that `env` (and `env_params`).

        metrics.csv must hold every update up to the checkpoint, else this refuses (one line
        saying what is missing); `repair_log=True` keeps its good rows instead and records the
        missing ones (in the checkpoint and `summary.json`: `metrics_missing_updates`, and
        per run `metrics_missing_by_run`). A finished run whose `summary.json` (or a sweep's
        `sweep.csv`) is missing or unreadable gets them rebuilt from the checkpoint's running
        account by `run()`, without training (a damaged one kept as `summary.json.damaged`).

        Raises:
          CheckpointError: no checkpoint, or a corrupt or mismatched one.
          UsageError: a run-defining option (`seeds`, `seed`, ...), a finished run, a short
            `metrics.csv`, an edited `config.yaml`, or a halving/PBT sweep (`resume_sweep`).
        """
        for key in ("seeds", "hparams", "seed", "logdir", "run_name", "search"):
            if key in kwargs:
                raise UsageError(f"resume continues a run with its own {key}; drop it")
        repair_log = bool(kwargs.pop("repair_log", False))
        ckpt = kwargs.pop("checkpoint", None) or load_checkpoint(
            path, env=kwargs.get("env"), env_params=kwargs.get("env_params"))
        writes_log = kwargs.get("builtin_callbacks", True) or any(
            isinstance(c, CsvLogger) for c in kwargs.get("callbacks", ()))
        point = check_resume(path, ckpt, controller=kwargs.get("controller"),
                             repair_log=repair_log, writes_log=writes_log)
        settings = point.record.settings
        exp = cls(ckpt.config, seeds=ckpt.num_runs // (len(settings) if settings else 1),
                  hparams=settings, seed=point.record.seed,
                  logdir=os.path.dirname(os.path.abspath(point.run_dir)),
                  run_name=os.path.basename(os.path.abspath(point.run_dir)),
                  search=point.record.search, **kwargs)
        exp._resume = point
        exp.note(*point.notes)
        return exp

    @classmethod
    def resume(cls, path: str | os.PathLike, **kwargs: Any) -> RunResult:
        """Continue the stopped run at `path` to its end; returns its `RunResult`:
        `from_checkpoint(path, **kwargs).run()` (`jaxppo train --resume`), with their arguments and errors."""
        return cls.from_checkpoint(path, **kwargs).run()

    # -- what the run is ---------------------------------------------------------------------
    def keys(self) -> jax.Array:
        """One key per run. A sweep gives every setting the same seeds' keys."""
        if self.settings is None or not getattr(self.controller, "common_seeds", True):
            return jax.random.split(jax.random.key(self.seed), self.num_runs)
        seed_keys = jax.random.split(jax.random.key(self.seed), self.seeds)
        return jnp.tile(seed_keys, len(self.settings))

    def stacked_hparams(self) -> Hparams | None:
        """The sweep's settings as one `Hparams` with leaves [R] (None: the config's)."""
        if self.settings is None:
            return None
        return Hparams.of_settings(self.config, self.settings, self.seeds)

    def run_names(self) -> list[str]:
        """`labels.run_names` (PBT's by agent); a resumed run keeps its `tb/` folders' names."""
        older = run_names(self.num_runs, self.settings, self.seeds)
        tb = None if self._resume is None else os.path.join(self._resume.run_dir, names.TB_DIR)
        if tb is not None and all(os.path.isdir(os.path.join(tb, n)) for n in older):
            return older  # older jaxppo named PBT members by their first setting
        return run_names(self.num_runs, self.settings, self.seeds,
                         getattr(self.controller, "changes_hparams", False))

    @property
    def segmented(self) -> bool:
        """The controller runs some runs less far than others (halving's rungs)."""
        return self.controller is not None and self.controller.segments(0) is not None

    def renewed_since(self) -> np.ndarray | None:
        """[R] the controller's `renewed_since()` (PBT), or None (no run is ever renewed)."""
        renewed = None if self.controller is None else self.controller.renewed_since()
        return None if renewed is None else np.asarray(renewed, int)

    def run_updates(self, update: int) -> np.ndarray | None:
        """[R] updates each run trained at `update` where runs differ (None: all `update`)."""
        return None if self.controller is None else self.controller.run_updates(update)

    def resume_state(self):
        """The checkpoint's runner state a resumed run starts from (None: a new run)."""
        return None if self._resume is None else self._resume.runner

    def note(self, *texts: str) -> None:
        """Tell the user something that is not an error: each text kept in `notes`, passed to
        `on_note` and to every running callback's `on_note`."""
        for text in texts:
            self.notes.append(text)
            if self.on_note is not None:
                self.on_note(text)
            for cb in self._listeners:
                cb.on_note(text)

    def initial_stats(self) -> RunStats:
        c, resume = self.config, self._resume
        saved = resume.record.stats if resume else None
        if saved is None and resume:  # a checkpoint from before 0.2: its summary.json, if any
            saved = summary_stats(resume.run_dir, resume.update)
        if saved:
            return RunStats.from_dict(saved, c.env_id, self.num_runs, c.batch_size)
        return RunStats(c.env_id, self.num_runs, c.batch_size,
                        update=resume.update if resume else 0)

    # -- the run -----------------------------------------------------------------------------
    def run(self) -> RunResult:
        """Train to the configured total (or until stopped) and return the `RunResult`. A signal
        (Ctrl-C, SIGTERM, SIGHUP) or a callback's false answer stops it at the next chunk boundary
        ("stopped"), a NaN/Inf update as "diverged"; either way the newest good state is
        checkpointed. The signals are held for the whole call, never raised inside XLA's compile
        (which compiles on in a thread and crashes the exit): one while starting or compiling
        stops before training (`StopNow`, a KeyboardInterrupt); a second one at once.

        Raises:
          ConfigError: the config (times its runs) cannot fit the device's free memory.
          UsageError: the run directory is in use or cannot be written.
        """
        with StopFlag() as stop:
            self._stop = stop
            return self._start()

    def _start(self) -> RunResult:
        config, resume = self.config, self._resume
        if resume is not None and resume.ran:
            raise UsageError("this Experiment already continued its run; resume it again with "
                             f"Experiment.resume({resume.run_dir!r})")
        if resume is not None and resume.rebuild:
            self.last_run_dir = resume.run_dir
            if not is_main_process():  # only process 0 writes a run directory
                return rebuild(self, write=False)
            with RunLock(resume.run_dir) as lock:
                self.note(*lock.notes)
                return rebuild(self)
        if self.mesh is not None and host_source_of(config.env_id) is not None:
            raise ConfigError(f"config key 'env_id': {config.env_id!r} lives on the host and "
                              "trains on one device; drop --devices")
        placement = make_placement(config, self.mesh, self.shard, env=self.env,
                                   env_params=self.env_params)
        host = getattr(getattr(placement, "trainer", None), "env", None)
        self._host_env = host if isinstance(host, HostVecEnv) else None
        if self._host_env is not None and self.controller is not None:
            self._host_env.close()
            raise ConfigError(f"config key 'env_id': {config.env_id!r} lives on the host, whose "
                              "episodes cannot follow agents copied or dropped between chunks; "
                              "use --search grid or random")
        start = resume.update if resume else 0
        chunk = chunk_for_checkpoints(config.num_updates, self.checkpoint_every,
                                      self.chunk_updates)
        if self.controller is not None:  # chunk boundaries where the controller acts
            chunk = self.controller.chunk_length(chunk or pick_chunk(config.num_updates), start)
        # Refuses a config that cannot fit, before any file is written or anything compiles.
        driver = Driver(placement, self.num_runs, config.num_updates,
                        chunk_updates=chunk, donate=self.donate)
        segments = None
        if self.controller is not None:  # each segment's program, checked (not compiled) now
            segments = segment_drivers(placement, self.controller, start, donate=self.donate,
                                       chunk_updates=self.chunk_updates,
                                       every=self.checkpoint_every)
            driver = segments[0][1] if segments else driver
        main = is_main_process()
        if resume:
            run_dir, fresh = resume.run_dir, False
            resume.ran = True  # its runner state may be donated to the first chunk
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
                self.note(*lock.notes)
            if fresh:
                write_config(run_dir, config)
            if (fresh or resume) and main:  # before any save; one from before ids gets one
                ensure_run_id(run_dir)
            if resume and resume.keep_damaged_log and main:  # before the repair drops rows
                log = os.path.join(run_dir, names.METRICS)
                copy = free_name(log + ".damaged")
                shutil.copyfile(log, copy)
                self.note(f"'{log}' was repaired: {'; '.join(resume.keep_damaged_log)}; the "
                          f"file as it was is kept as '{copy}'")
            return self._run(placement, driver, run_dir, main, segments)
        except BaseException:
            # Only a run dir in which nothing ran goes (no orphan after Ctrl-C while compiling);
            # once a chunk has run, its logs (and any checkpoint) are the run's and are kept.
            ran = self._loop is not None and self._loop.ran
            if fresh and not ran and not os.path.exists(os.path.join(run_dir, names.CHECKPOINT_DIR)):
                shutil.rmtree(run_dir, ignore_errors=True)
            raise
        finally:
            self._listeners = []
            if self._host_env is not None:  # its pool (an async one's subprocesses) goes now
                self._host_env.close()
            if lock is not None:
                lock.release()

    def snapshot(self) -> tuple[dict | None, dict | None]:
        """What a checkpoint keeps of the controller now: the search record and its state."""
        return self.controller.search_record(self.search), self.controller.state()

    def _run(self, placement, driver: Driver, run_dir: str | None, main: bool,
             segments: list | None) -> RunResult:
        config, resume = self.config, self._resume
        start_update = resume.update if resume else 0
        info = RunInfo(config, self.num_runs, self.run_names(), run_dir, start_update, self.seed,
                       self.settings, driver.chunk_updates, placement.description,
                       env=None if self.env is None else describe_env(self.env, self.env_params),
                       log_gaps=resume.log_gaps if resume else (), search=self.search,
                       ragged=self.segmented, resets=placement.trainer.env.reset_note)
        callbacks = run_callbacks(self, run_dir is not None, main)
        loop = self._loop = RunLoop(self, info, self.initial_stats(), callbacks,
                                    time.perf_counter())
        hparams = self.stacked_hparams()
        if self.controller is not None:
            started = self.controller.start(run_dir if main else None, start_update,
                                            resume.record.controller if resume else None)
            hparams = hparams if started is None else started
        if resume and run_dir is not None and not self.stop_on_divergence:  # a sweep's record
            # rows past the checkpoint are cut, not replayed as such
            loop.divergences, loop.live = logged_divergences(
                run_dir, self.num_runs, resume.update, self.renewed_since())
            loop.diverged_runs[list(loop.live)] = True
            if self.controller is not None:
                self.controller.diverged_before(loop.diverged_runs.copy())
        inputs = placement.place_inputs(self.keys(), hparams)
        try:
            for cb in callbacks:
                cb.on_start(info)
            self._listeners = callbacks
            for text in self.notes:  # what was said before the callbacks started
                for cb in callbacks:
                    cb.on_note(text)
            loop.stop_flag = self._stop
            loop.stop_before_training("while the run started")
            if segments is not None:
                final = run_segments(self, placement, segments, inputs, loop, info, loop.t_start)
            else:
                driver.compile(inputs, start_update)
                loop.compile_s = driver.compile_s
                loop.stop_before_training("while compiling")
                for cb in callbacks:
                    cb.on_compiled(info, driver.compile_s)
                runner = (driver.place(self._restart(placement, resume))
                          if resume else driver.init(inputs))
                final = driver.run(runner, inputs.hparams, start_update, loop.on_chunk,
                                   loop.t_start, self.controller, stop=loop.stop_requested)
        except BaseException as e:
            loop.status = "stopped" if isinstance(e, KeyboardInterrupt) else "error"
            end_all(callbacks, loop.result(loop.good_runner))  # save, close; then re-raise
            say_what_is_kept(e, run_dir)
            raise
        if loop.status == "running":
            loop.status = "finished"
        result = loop.result(final if loop.status == "finished" else loop.good_runner)
        error = end_all(callbacks, result)
        if error is not None:
            raise error
        return result

    def _restart(self, placement, resume: dict):
        """The checkpoint's runner state; on a host env, with the episodes started afresh (the
        host's state is in no checkpoint) and the learner exactly as saved."""
        if self._host_env is None:
            return resume.runner
        self.note(f"{self.config.env_id} lives on the host, outside the checkpoint: the "
                  f"learner continues exactly from update {resume.update}, with every "
                  "episode started afresh")
        return jax.jit(jax.vmap(placement.trainer.restart_episodes))(resume.runner)

    def host_fault(self, update: int, good_update: int | None) -> BaseException | None:
        """The host env's fault as one line, if it happened in the updates up to `update`."""
        start = self._resume.update if self._resume else 0
        return host_fault(self._host_env, self.config, start, update, good_update)
