"""The `jaxppo` command: the parser over one module per verb, and the exit codes.

    jaxppo train --config configs/cartpole.yaml [--seeds 8] [--set lr=1e-3]
    jaxppo sweep --config configs/cartpole.yaml --grid lr=1e-4,3e-4,1e-3 --seeds 4
    jaxppo sweep --config configs/cartpole.yaml --search random --trials 16 --space lr=1e-4:1e-2:log
    jaxppo sweep --config configs/cartpole.yaml --search pbt --population 16 --space lr=1e-4:1e-2:log
    jaxppo sweep --config configs/cartpole.yaml --search halving --trials 9 --space lr=1e-4:1e-2:log
    jaxppo eval runs/<run-name> --episodes 20 --gif cartpole.gif
    jaxppo export runs/<run-name> --format onnx                  (or jax; runs without jaxppo)
    jaxppo compare --config configs/cartpole.yaml --repeats 3   (needs jaxppo[compare])
    jaxppo report runs/a runs/b --out report                     (IQM etc. with 95% CIs)
    jaxppo profile --config configs/cartpole.yaml --target h100  (kernels per update, deviceless)
    jaxppo config --list                                         (every config key)

Bad input exits with status 2 and one line on stderr; Ctrl-C (or SIGTERM, SIGHUP) saves a
checkpoint at the next chunk boundary and exits with 128 + the signal; `--resume RUN_DIR`
continues. A run whose env output, normaliser, loss, gradients or parameters turn NaN/Inf (or
whose env's action mask allows nothing) stops at the next chunk boundary with status 3, keeping
its logs and the last good checkpoint; the line names the source and its fix.

A verb is a module with `add_parser(sub)` (which sets `func`): add it to `VERBS`.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib.metadata
import os
import platform
import signal
import sys
import threading

import jax

import jaxppo
import jaxppo.cli.compare as compare
import jaxppo.cli.config as config
import jaxppo.cli.eval as evaluate
import jaxppo.cli.export as export
import jaxppo.cli.profile as profile
import jaxppo.cli.report as report
import jaxppo.cli.sweep as sweep
import jaxppo.cli.train as train
from jaxppo._xla import (
    setup_compilation_cache,
    take_cache_faults,
    take_damaged_cache_entries,
    take_unverified_cache_entries,
)
from jaxppo.errors import USER_CODE_EXIT, CheckpointError, ConfigError, EnvError, UsageError, UserCodeExit
from jaxppo.labels import plural
from jaxppo.process import (
    SIGNALS,
    StopFlag,
    StopNow,
    command_started,
    ctrl_c,
    exit_process,
    held_handlers,
    note_signal,
    release_signals,
    set_command,
    stop_point,
    takes,
)
from jaxppo.rundir.files import PipeSafe
from jaxppo.writes import WRITE_FIXES

VERBS = (train, sweep, compare, evaluate, export, report, profile, config)
"""The verbs, in the order `jaxppo --help` lists them."""

HOLDING = ("train", "sweep", "eval")
"""The verbs whose stop signals are held from the command's start (a `StopFlag`): one stops
at the next safe point (`stop_point`, a run's chunk boundary), a second at once. The others'
signals raise (KeyboardInterrupt) as Python's do."""


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (the full usage is one `--help` away)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


MAX_LINE = 2000
"""An error line's length at most: whatever a message quotes (a file's keys, a user's value),
it stays one readable line."""


def one_line(text: str) -> str:
    """`text` on one line, its middle cut past `MAX_LINE` characters (saying how much)."""
    text = " ".join(text.splitlines())
    if len(text) <= MAX_LINE:
        return text
    cut = len(text) - MAX_LINE
    return f"{text[:MAX_LINE - 500]} [... {cut:,} characters cut ...] {text[-500:]}"


def version_text() -> str:
    """`jaxppo --version`: this jaxppo's version and the JAX it runs on."""
    try:
        jaxlib = importlib.metadata.version("jaxlib")
    except importlib.metadata.PackageNotFoundError:
        jaxlib = "not installed"
    return (f"jaxppo {jaxppo.__version__} (JAX {jax.__version__}, jaxlib {jaxlib}, Python "
            f"{platform.python_version()})")


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: `jaxppo VERB ...`."""
    p = _Parser(prog="jaxppo", description="PPO compiled into one lax.scan.")
    p.add_argument("--version", action="version", version=version_text(),
                   help="print jaxppo's version (and JAX's, jaxlib's, Python's) and exit")
    p.add_argument("--no-cache", action="store_true",
                   help="skip JAX's persistent compilation cache")
    sub = p.add_subparsers(dest="command", required=True)
    for verb in VERBS:
        verb.add_parser(sub)
    return p


def _interrupt(signum, frame):
    """SIGTERM and SIGHUP outside a run act as Ctrl-C does (a run holds them itself)."""
    note_signal()
    raise StopNow(signum)


def _note_cache_faults(command: str) -> None:
    """One note per command for the compile cache's read/write failures (JAX warned per
    program, 16 lines a run), naming the cache and the fix."""
    faults = take_cache_faults()
    if not faults:
        return
    folder, how, e = faults[0]
    fix = ("remove it" if isinstance(e, IsADirectoryError) else
           WRITE_FIXES.get(e.errno, "check its folder") if e.errno != errno.EACCES else
           "make it writable")
    where = f" ({e.filename})" if isinstance(e, IsADirectoryError) and e.filename else ""
    n = len(faults)
    print(f"jaxppo {command}: note: the compile cache {folder} could not be {how}{where} "
          f"({e.strerror or e}; {plural(n, 'program')} compiled without it): {fix}, set "
          "JAXPPO_CACHE_DIR to another folder, or pass --no-cache", file=sys.stderr)


def _note_removed(command: str, entries: list[str], why: str) -> None:
    """One note for the compile-cache entries jaxppo removed (and compiled again), and why."""
    if entries:
        what = "1 entry" if len(entries) == 1 else f"{len(entries)} entries"
        print(f"jaxppo {command}: note: {what} of the compile cache "
              f"{os.path.dirname(entries[0])} {why}", file=sys.stderr)


def _note_damaged_cache(command: str) -> None:
    _note_cache_faults(command)
    _note_removed(command, take_unverified_cache_entries(),
                  "had no digest jaxppo wrote (an older jaxppo's, or made or changed by hand): "
                  "removed unrun, and compiled again")
    _note_removed(command, take_damaged_cache_entries(),
                  "could not be read (cut short by a kill or a full disk, or still being written "
                  "by another process): removed, and compiled again")


def main(argv: list[str] | None = None) -> int:
    started = command_started()
    parser = build_parser()
    args = parser.parse_args(argv)  # argparse itself exits 2 with one usage line on bad flags
    args.started = started
    holding = contextlib.ExitStack()
    if args.command in HOLDING:  # takes the signals over from the import's hold, no gap
        holding.enter_context(StopFlag(starting=True, restore=held_handlers()))
    held = release_signals(restore=args.command not in HOLDING)  # one while jaxppo imported
    old = {}
    if threading.current_thread() is threading.main_thread() and args.command not in HOLDING:
        old = {s: signal.signal(s, _interrupt) for s in SIGNALS if s != signal.SIGINT
               and takes(s, signal.getsignal(s))}
        if takes(signal.SIGINT, signal.getsignal(signal.SIGINT)):  # counted, so a module's
            old[signal.SIGINT] = signal.signal(signal.SIGINT, ctrl_c)  # own is told apart
    stdout, sys.stdout = sys.stdout, PipeSafe(sys.stdout)
    try:
        with holding:
            if held is not None:
                raise StopNow(held)
            take_damaged_cache_entries()  # an earlier caller's in this process: not this command's
            take_cache_faults()
            take_unverified_cache_entries()
            setup_compilation_cache(not args.no_cache)
            stop_point("while starting")
            try:
                return args.func(args)
            finally:  # before a fault's line, which stays the last
                _note_damaged_cache(args.command)
    except (ConfigError, UsageError, CheckpointError, EnvError) as e:
        print(f"jaxppo {args.command}: error: {one_line(str(e))}", file=sys.stderr)
        return 2
    except UserCodeExit as e:  # a module of yours exited: neither success nor divergence
        print(f"jaxppo {args.command}: error: {one_line(str(e))}", file=sys.stderr)
        return USER_CODE_EXIT
    except MemoryError:  # the host ran out (a limit below what the estimate assumed free)
        print(f"jaxppo {args.command}: error: the host ran out of memory (MemoryError); "
              "give it fewer settings, seeds or episodes at once, or more memory",
              file=sys.stderr)
        return 1
    except KeyboardInterrupt as e:  # before a run started (a run's own: common.run_experiment)
        print(f"jaxppo {args.command}: interrupted; nothing was run", file=sys.stderr)
        return 128 + getattr(e, "signum", signal.SIGINT)
    finally:
        sys.stdout.flush()  # while a closed reader is still caught
        sys.stdout = stdout
        for s, handler in old.items():
            signal.signal(s, handler)


def entry() -> None:
    """The `jaxppo` command (console script and `python -m jaxppo.cli`): `main`, and its exit
    status. After a compile abandoned by a second signal, XLA compiles on in a thread of its
    own and Python's shutdown would crash under it (a core dump instead of 128 + N); a thread
    an `--import` module left running would keep it waiting for ever: the process then ends
    at once, its output flushed (`exit_process`)."""
    command = f"jaxppo {_verb(sys.argv[1:])}".rstrip()
    set_command(command)
    try:
        code = main()
    except KeyboardInterrupt as e:  # in the instant after main's own handlers: said nothing
        code = 128 + getattr(e, "signum", signal.SIGINT)
    exit_process(code, command)


def _verb(argv: list[str]) -> str:
    """The verb of a command line (for a note after `main`), "" if it has none."""
    verbs = {v.__name__.rsplit(".", 1)[-1] for v in VERBS}
    return next((a for a in argv if a in verbs), "")


__all__ = ["main", "entry", "build_parser"]

