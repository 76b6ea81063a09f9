"""The process jaxppo runs in: when it started (the CLI's wall time counts from there), and a
stop signal to the `jaxppo` command held while jaxppo imports.

Importing jaxppo takes seconds (JAX, the env suites). A Ctrl-C then would raise a
KeyboardInterrupt inside some library's import and print its traceback; for the command
(`jaxppo ...` or `python -m jaxppo.cli`), `hold_signals` records it instead and the CLI's
`main` says one line (`interrupted; nothing was run`) and exits with 128 + the signal. A
library user's import is left alone. No JAX here: this module is imported first.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

IMPORTED = time.perf_counter()
"""`time.perf_counter()` when jaxppo's import began."""

SIGNALS = tuple(s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None))
                if s is not None)

_signals_seen = [0]  # stop signals this process's jaxppo handlers took (Ctrl-C, TERM, HUP)
_held: dict[int, object] = {}  # signal -> the handler it had before `hold_signals`
_pending: list[int] = []


def _since_process_start() -> float | None:
    """Seconds since this process started, from the kernel's record (Linux; 10 ms ticks);
    None where it cannot be read."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        start = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22: starttime, since boot
        return time.clock_gettime(time.CLOCK_BOOTTIME) - start
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def process_started() -> float:
    """`time.perf_counter()` at this process's start: the kernel's record where it is
    plausible (it includes the interpreter's own start-up), else the start of jaxppo's
    import."""
    now = time.perf_counter()
    since = _since_process_start()
    if since is not None and now - IMPORTED <= since <= now - IMPORTED + 600:
        return now - since
    return IMPORTED


def command_started() -> float:
    """`time.perf_counter()` when the command began: the process's start for the `jaxppo`
    command, now for `main()` called in a process of its own (a test, a notebook)."""
    return process_started() if is_command() else time.perf_counter()


def is_command() -> bool:
    """This process is the `jaxppo` command (the console script or `python -m jaxppo.cli`)."""
    argv = getattr(sys, "orig_argv", sys.argv)
    if "-m" in argv[:-1] and argv[argv.index("-m") + 1] == "jaxppo.cli":
        return True
    return os.path.basename(sys.argv[0] or "") in ("jaxppo", "jaxppo.exe")


def note_signal() -> None:
    """A jaxppo handler took a stop signal: a KeyboardInterrupt after it is the signal's."""
    _signals_seen[0] += 1


def signals_seen() -> int:
    """How many stop signals jaxppo's handlers took: a KeyboardInterrupt raised with no new
    one since a module's code began is that code's own (`raise KeyboardInterrupt`), no Ctrl-C."""
    return _signals_seen[0]


def ctrl_c(signum, frame) -> None:
    """Python's own SIGINT handler (raise KeyboardInterrupt), counted (`signals_seen`)."""
    note_signal()
    raise KeyboardInterrupt


def _record(signum, frame) -> None:
    """The first signal is kept for `main()`; a second stops at once, as in a run."""
    note_signal()
    if _pending:
        release_signals()
        raise KeyboardInterrupt(signal.Signals(signum).name)
    _pending.append(signum)


def hold_signals() -> None:
    """For the `jaxppo` command only: record SIGINT, SIGTERM and SIGHUP instead of acting on
    them, until `release_signals` (where a handler is Python's default)."""
    if not is_command() or threading.current_thread() is not threading.main_thread():
        return
    for sig in SIGNALS:
        old = signal.getsignal(sig)
        if old in (signal.default_int_handler, signal.SIG_DFL):
            _held[sig] = signal.signal(sig, _record)


def release_signals() -> int | None:
    """Put back the handlers `hold_signals` replaced; the first signal that came meanwhile."""
    for sig, old in _held.items():
        signal.signal(sig, old)
    _held.clear()
    first = _pending[0] if _pending else None
    _pending.clear()
    return first


_abandoned: list[str] = []


def abandoned(what: str) -> None:
    """Record native work left running in a thread of its own (XLA's compile, interrupted):
    the command then exits without Python's shutdown, which would crash under it."""
    _abandoned.append(what)


def work_abandoned() -> bool:
    return bool(_abandoned)
