"""What the CLI's verbs share: argument types, the flags of the verbs that start runs, the
header lines, running an `Experiment` with one line for every way it can end early, and the
text of returns. Library code returns notes; here they become `note: ...` lines on stderr."""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import sys
import time

import jax

from jaxppo.config import PPOConfig, load_config, parse_overrides
from jaxppo.envs.imports import import_env_modules
from jaxppo.errors import UsageError
from jaxppo.labels import plural
from jaxppo.process import set_last_words, stop_point
from jaxppo.run.distributed import is_main_process, join_processes, make_mesh
from jaxppo.run.divergence import describe_divergence
from jaxppo.run.events import Callback, RunInfo
from jaxppo.run.experiment import Experiment
from jaxppo.run.logs.wandb import WandbLogger
from jaxppo.rundir import names
from jaxppo.rundir.checkpoint import saved_update
from jaxppo.search.strategies import OPTIONS
from jaxppo.writes import WRITE_FIXES

EXAMPLE_CONFIG = os.path.join("configs", "cartpole.yaml")


def print_note(note: str) -> None:
    """A run's note, as the CLI shows it: one `note: ...` line on stderr."""
    print(f"note: {note}", file=sys.stderr, flush=True)


def positive_int(name: str):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{name} must be a positive integer, got {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{name} must be a positive integer, got {value}")
        return value
    return parse


def require_config(args) -> str:
    if not args.config:
        raise UsageError(f"--config is required (e.g. --config {EXAMPLE_CONFIG})")
    return args.config


def setup_devices(args):
    """Join a multi-process run if asked (before any JAX computation), then build the device
    mesh for `--devices`; None means one device, no sharding."""
    join_processes(args.coordinator_address, args.num_processes, args.process_id)
    if args.devices is None and jax.process_count() == 1:
        if args.shard != "seeds":
            raise UsageError("--shard needs --devices N|all")
        return None
    return make_mesh(args.devices or "all")


def num_text(x: float) -> str:
    """A return to print: one decimal for CartPole's 500.0, three digits for MiniGrid's 0.961."""
    return f"{x:.1f}" if abs(x) >= 10 or x == 0 else f"{x:.3g}"


def final_return_text(s: dict, unit: str = "seeds") -> str:
    """summary.json's final return as text; "none" for seeds in which no episode ended.
    `unit`: what its runs are ("agents" for a sweep's settings x seeds)."""
    n, missing = len(s["final_return"]), s["runs_without_return"]
    bad = s.get("runs_nonfinite_return", 0)
    none = f"no episode ended in {s['env_steps']:,} steps"
    why = [f"none for {missing} of {n} {unit}: {none}"] if missing else []
    why += [f"NaN/Inf for {bad} of {n} {unit}: diverged"] if bad else []
    if s["final_return_mean"] is None:
        return f"none ({'; '.join(why) if bad else none})"
    have = n - missing - bad
    text = num_text(s["final_return_mean"])
    if have > 1:
        text += f" ± {num_text(s['final_return_std'])} over {have} {unit}"
    return text + (f" ({'; '.join(why)})" if why else "")


class Header(Callback):
    """The CLI's first lines: what runs where, the compile time (when no progress display says
    it), and where a resumed run picks up."""

    def __init__(self, what: str, progress: bool):
        self.what, self.progress = what, progress

    def on_start(self, info: RunInfo) -> None:
        c = info.config
        where = "".join(f" | {x}" for x in (info.description, info.resets) if x)
        print(f"{self.what} | {c.env_steps:,} steps ({c.num_updates} updates of "
              f"{c.batch_size}){where} | run dir {info.run_dir}", flush=True)

    def on_compiled(self, info: RunInfo, compile_s: float) -> None:
        if not self.progress:
            print(f"compiled in {compile_s:.1f} s ({plural(info.chunk_updates, 'update')} per chunk)",
                  flush=True)
        if info.start_update:
            print(f"resuming at update {info.start_update}/{info.config.num_updates}", flush=True)


OS_FIXES = WRITE_FIXES
"""What to do about a failed write, by its errno: said before `continue with`."""


def kept_words(args, run_dir: str | None, resume_dir: str | None = None,
               fix: str | None = None) -> str:
    """What a run stopped short keeps, read back from its run directory, and how to go on:
    said after the stop's problem (by `run_experiment`, and by the watchdog of a stop at once
    that the main thread could not answer)."""
    then = f"{fix}, then " if fix else ""
    sweep_rest = (f"; the groups before it are kept: continue with: jaxppo {args.command} "
                  f"--resume {resume_dir}" if resume_dir else "")
    kept = saved_update(run_dir)  # read back: a first save that failed left none
    if kept is not None:
        return (f"the newest checkpoint is kept (update {kept}); {then}continue with: "
                f"jaxppo {args.command} --resume {resume_dir or run_dir}")
    if run_dir and os.path.exists(os.path.join(run_dir, names.METRICS)):
        return (f"the logs are kept in {run_dir} (no checkpoint had been saved yet)"
                f"{sweep_rest}{'; ' + fix if fix else ''}")
    gone = "" if run_dir and os.path.exists(run_dir) else " (no run directory is left)"
    group = " in this group" if resume_dir else ""
    return f"nothing had run yet{group}{gone}{sweep_rest}{'; ' + fix if fix else ''}"


def run_experiment(exp: Experiment, args, what: str, resume_dir: str | None = None):
    """Run `exp` with the CLI's own callbacks; `(result, None)`, or `(None, exit status)` after
    one line for a run stopped at once (a second signal) or a file system failure. `resume_dir`:
    what `--resume` continues, when not the run's own directory (a static sweep's)."""
    if is_main_process():
        extra = [WandbLogger(project=args.wandb_project)] if args.wandb else []
        exp.callbacks = [Header(what, exp.progress), *exp.callbacks, *extra]
    fix = None
    set_last_words(lambda signum: kept_words(args, exp.last_run_dir, resume_dir))
    try:
        return exp.run(), None
    except KeyboardInterrupt as e:  # a second signal, or one before training (StopNow)
        signum = getattr(e, "signum", signal.SIGINT)
        name, when = signal.Signals(signum).name, getattr(e, "when", None)
        during = f" while {e.during}" if getattr(e, "during", None) else ""
        problem = f"stopped by {name} {when}" if when else f"stopped at once by {name}{during}"
        code = 128 + signum
    except OSError as e:
        where = e.filename or exp.last_run_dir
        problem, code = f"cannot write the run directory ({e.strerror or e}: {where})", 1
        fix = OS_FIXES.get(e.errno)
    finally:
        set_last_words(None)
    print(f"jaxppo {args.command}: error: {problem}; "
          f"{kept_words(args, exp.last_run_dir, resume_dir, fix)}", file=sys.stderr)
    return None, code


def stopped(result, command: str, resume_dir: str | None = None) -> int | None:
    """The exit status (after one line) of a run that stopped early; None if it finished.
    `resume_dir`: what `--resume` continues, when not the run's own directory."""
    if result.diverged is not None and command == "train":  # a sweep goes on: cmd_sweep
        what, fix = describe_divergence(result.diverged, result.config)
        saved = saved_update(result.run_dir)
        kept = (f"the last good checkpoint (update {saved}) is kept in {result.run_dir}"
                if saved is not None and result.good_update else
                f"no finite state was reached to checkpoint (the logs are in {result.run_dir})"
                if not result.good_update else "no checkpoint of it was saved")
        print(f"jaxppo {command}: error: {what}; {kept}; {fix}", file=sys.stderr)
        return 3
    if result.stop_signal is not None:
        name = signal.Signals(result.stop_signal).name
        print(f"stopped by {name} at update {result.update}/{result.config.num_updates}; "
              f"checkpoint saved. Continue with: jaxppo {command} --resume "
              f"{resume_dir or result.run_dir}",
              file=sys.stderr)
        return 128 + result.stop_signal
    return None


def runs_text(exp: Experiment) -> str:
    """What a run's agents are: `3 seed(s)`, or a sweep's `2 settings x 2 seed(s)` (not 4
    seeds: its agents differ by setting too)."""
    if exp.settings is None:
        return f"{exp.num_runs} seed(s)"
    return f"{len(exp.settings)} settings x {exp.seeds} seed(s)"


def since_start(args) -> float:
    """Seconds since the command started (jaxppo's own start: its imports included, not what
    the process ran before jaxppo: `process.command_started`)."""
    return time.perf_counter() - getattr(args, "started", time.perf_counter())


def timing_text(args, result) -> str:
    """The last line's times: start-up (jaxppo's start to the run's clock: imports, the env,
    placing), compile, and the wall time since the command started, which holds them all."""
    startup = max(0.0, result.started - getattr(args, "started", result.started))
    compile_s = result.summary.get("compile_s") or 0.0
    return (f"start-up {startup:.1f} s | compile {compile_s:.1f} s | wall {since_start(args):.1f} "
            "s since the command started")


def refuse_repair_log(args) -> None:
    if args.repair_log:
        raise UsageError(f"--repair-log repairs the {names.METRICS} of a run being resumed; use it "
                         "with --resume RUN_DIR")


def say_rebuilt(result) -> None:
    """The line for a resume of a finished run that only rebuilt its missing results."""
    print(f"run '{result.run_dir}' had finished (update {result.update}/"
          f"{result.config.num_updates}); rebuilt {', '.join(result.rebuilt)} from its "
          "checkpoint's running account, nothing was trained")


def refuse_with_resume(args) -> None:
    """`--resume` with a flag that would start something else: one line naming the flags."""
    flags = ("config", "set", "seeds", "seed", "run_name", "logdir", "search", *OPTIONS)
    given = [f"--{f.replace('_', '-')}" for f in flags if getattr(args, f, None)]
    if given:
        raise UsageError(f"--resume continues a run with its own config, seeds and run "
                         f"directory: drop {', '.join(given)}")


def add_resume_args(sp, what: str) -> None:
    """`--checkpoint-every`, `--resume` and `--repair-log`: train's and sweep's alike."""
    sp.add_argument("--checkpoint-every", type=positive_int("--checkpoint-every"), default=None,
                    metavar="UPDATES", help="save a checkpoint every this many updates (chunks "
                    "end where one is due: a kill loses at most this many)")
    sp.add_argument("--resume", metavar="RUN_DIR", help=f"continue a stopped {what}")
    sp.add_argument("--repair-log", action="store_true",
                    help=f"with --resume: keep a damaged {names.METRICS}'s good rows and record the "
                         "rows it lost (they cannot be recreated) instead of refusing")


def add_run_args(sp) -> None:
    """The flags every verb that starts runs takes (train, sweep)."""
    add_import_arg(sp)
    sp.add_argument("--config", help=f"YAML config, e.g. {EXAMPLE_CONFIG}")
    sp.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a config key (repeatable)")
    sp.add_argument("--seeds", type=positive_int("--seeds"), default=None,
                    help="number of seeds, vmapped in one compiled program")
    sp.add_argument("--seed", type=int, default=None, help="base seed (default 0)")
    sp.add_argument("--logdir", default=None, help="parent of run directories (default runs)")
    sp.add_argument("--run-name", default=None, help="run directory name")
    sp.add_argument("--no-progress", action="store_true", help="no live progress output")
    sp.add_argument("--no-tensorboard", action="store_true",
                    help=f"write no TensorBoard event files ({names.TB_DIR}/); {names.METRICS} has every "
                         "value")
    sp.add_argument("--help-config", action="store_true",
                    help="list every config key (type, default, meaning) and exit")
    add_no_cache(sp, shown=True)
    sp.add_argument("--wandb", action="store_true",
                    help="also log to Weights & Biases (pip install 'jaxppo[wandb]')")
    sp.add_argument("--wandb-project", default="jaxppo", help="W&B project (default jaxppo)")
    g = sp.add_argument_group("devices and hosts (jax.sharding, jax.distributed)")
    g.add_argument("--devices", default=None, metavar="N|all",
                   help="shard over this many devices (default: one device, no sharding)")
    g.add_argument("--shard", choices=("seeds", "envs"), default="seeds",
                   help="split the seeds over devices, or each seed's envs (one agent)")
    g.add_argument("--coordinator-address", default=None, metavar="HOST:PORT",
                   help="process 0's address, for jax.distributed.initialize")
    g.add_argument("--num-processes", type=positive_int("--num-processes"), default=None)
    g.add_argument("--process-id", type=int, default=None)


def add_no_cache(sp, shown: bool = False) -> None:
    """`--no-cache` after the verb too (`jaxppo train --no-cache`), as before it."""
    sp.add_argument("--no-cache", action="store_true", default=argparse.SUPPRESS,
                    help="skip JAX's persistent compilation cache" if shown else argparse.SUPPRESS)


def add_import_arg(sp) -> None:
    """`--import MODULE`: modules that register environments, imported first (rl-zoo's
    `--gym-packages`); recorded in the run's config (`env_imports`)."""
    sp.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                    help="import MODULE before the environment is built: a module of yours that "
                         "registers environments (gymnasium.register, jaxppo.register_env); "
                         "recorded in the run, so eval and --resume import it again (repeatable)")


def import_modules(args) -> None:
    """Import `--import`'s modules now (before a config or checkpoint names their envs)."""
    import_env_modules(getattr(args, "imports", []) or [], "--import")


def load_run_config(args, overrides: dict | None = None) -> PPOConfig:
    """The config `--config` and `--set` give, with `--import`'s modules imported first and
    recorded in `env_imports`."""
    import_modules(args)
    config = load_config(require_config(args), overrides if overrides is not None
                         else parse_overrides(args.set))
    stop_point("while starting")
    if getattr(args, "imports", None):
        config = dataclasses.replace(config, env_imports=tuple(dict.fromkeys(
            [*config.env_imports, *args.imports])))
    return config
