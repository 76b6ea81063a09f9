"""The process jaxppo runs in: when jaxppo's code began in it (the CLI's wall time counts from
there), the stop signals it holds, and how it ends.

Importing jaxppo takes seconds (JAX, the env suites). A Ctrl-C then would raise a
KeyboardInterrupt inside some library's import and print its traceback; for the command
(`jaxppo ...` or `python -m jaxppo.cli`), `hold_signals` records it instead and the CLI's
`main` says one line (`interrupted; nothing was run`) and exits with 128 + the signal. A
library user's import is left alone.

While XLA compiles, a KeyboardInterrupt raised in JAX leaves the compile running in a thread
of its own, and Python's shutdown then crashes under it (a segmentation fault, not 128 + N).
So whatever compiles holds the signals (`StopFlag`: a run, an evaluation) and stops where it
is safe (`StopFlag.check`); a second signal stops at once (`StopNow`), and work cut short in
XLA is recorded (`native_work`), so that `exit_process` ends the process without Python's
shutdown. No JAX here: this module is imported first.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
import time
from typing import NoReturn

IMPORTED = time.perf_counter()
"""`time.perf_counter()` when jaxppo's import began: the command's start (`command_started`)."""

SIGNALS = tuple(s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None))
                if s is not None)

_signals_seen = [0]  # stop signals this process's jaxppo handlers took (Ctrl-C, TERM, HUP)
_held: dict[int, object] = {}  # signal -> the handler it had before `hold_signals`
_pending: list[int] = []


def command_started() -> float:
    """`time.perf_counter()` when the command began: for the `jaxppo` command, the moment
    jaxppo's own code began to run (this module is the first it imports, before JAX), so
    start-up counts jaxppo's imports, the env and the checks; now for `main()` called in a
    process of its own (a test, a notebook). Not the process's start: a shell that ran other
    work first and then exec'd jaxppo (`bash -c "pip install ... && jaxppo train ..."`) gives
    the process its own start time, and start-up read 196.9 s of pip."""
    return IMPORTED if is_command() else time.perf_counter()


def is_command() -> bool:
    """This process is the `jaxppo` command (the console script, `python -m jaxppo` or
    `python -m jaxppo.cli`)."""
    argv = getattr(sys, "orig_argv", sys.argv)
    if "-m" in argv[:-1] and argv[argv.index("-m") + 1] in ("jaxppo", "jaxppo.cli"):
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
    """The first signal is kept for `main()`; a second stops at once, as in a run: the process
    ends here, in one line. Not by raising KeyboardInterrupt: a library being imported may
    swallow it (a bare `except:` around an optional import) and go on, the signal lost and the
    command run to the end (seen once in 20 random moments on a busy machine)."""
    note_signal()
    if _pending:
        stop_at_once(signum, "while starting; nothing was run")
    _pending.append(signum)


def takes(sig: int, old) -> bool:
    """Whether jaxppo's command takes stop signal `sig` from handler `old`: Python's default
    ones, and an inherited SIG_IGN of SIGINT or SIGTERM (a shell starts a background job with
    SIGINT ignored; `kill -INT` of it was lost while starting, and the run trained to the end),
    but not of SIGHUP (`nohup` asks for it to be ignored, and it is)."""
    if old in (signal.default_int_handler, signal.SIG_DFL):
        return True
    return old == signal.SIG_IGN and sig != getattr(signal, "SIGHUP", None)


def hold_signals() -> None:
    """For the `jaxppo` command only: record SIGINT, SIGTERM and SIGHUP instead of acting on
    them, until `release_signals`, and watch for a second one that the main thread cannot
    answer (`start_watchdog`)."""
    if not is_command() or threading.current_thread() is not threading.main_thread():
        return
    for sig in SIGNALS:
        old = signal.getsignal(sig)
        if takes(sig, old):
            _held[sig] = signal.signal(sig, _record)
    start_watchdog()
    _quiet_unraisable[:] = [sys.unraisablehook]
    sys.unraisablehook = _unraisable


_quiet_unraisable: list = []  # the hook `_unraisable` stands in front of


def _unraisable(args) -> None:
    """A stop signal's KeyboardInterrupt raised where Python cannot raise it (a finalizer, a
    weakref's callback) was printed as a traceback and lost, and the command went on: it ends
    the command at once instead, in one line. Anything else goes to the hook as before."""
    e = args.exc_value
    if isinstance(e, KeyboardInterrupt) and signals_seen():
        stop_at_once(getattr(e, "signum", signal.SIGINT))
    (_quiet_unraisable[0] if _quiet_unraisable else sys.__unraisablehook__)(args)


def held_handlers() -> dict:
    """The handlers `hold_signals` replaced (signal -> handler), for a `StopFlag` to put back."""
    return dict(_held)


def release_signals(restore: bool = True) -> int | None:
    """Put back the handlers `hold_signals` replaced (unless `restore` is false: a `StopFlag`
    took the signals over); the first signal that came meanwhile."""
    for sig, old in _held.items():
        if restore:
            signal.signal(sig, old)
    _held.clear()
    first = _pending[0] if _pending else None
    _pending.clear()
    return first


# -- a stop at once, even where the main thread cannot answer ---------------------------------

GRACE_S = 5.0
"""After a second stop signal, how long the main thread has to end the command itself (its own
line, its exit handlers) before the watchdog ends it."""

def _named_verb() -> str:
    """The command's name as its argv gives it ("jaxppo train"), for a line said before the CLI
    has parsed it (a stop while jaxppo imports); "jaxppo" where argv names no verb."""
    word = sys.argv[1] if len(sys.argv) > 1 else ""
    return f"jaxppo {word}" if is_command() and word.isalpha() and word.islower() \
        and len(word) <= 12 else "jaxppo"


_command = [_named_verb()]  # the command's name in a line said for it ("jaxppo train")
_last_words: list = []  # a function (signum -> what is kept and how to go on), or empty
_ending = [False]  # the main thread is ending the process (exit_process)
_watchdog: list[threading.Thread] = []
_native: list[str] = []  # what native work the main thread is in now (`native_work`), if any


def set_command(command: str) -> None:
    _command[0] = command


def set_last_words(fn) -> None:
    """What a stop at once says is kept (`fn(signum) -> str`, e.g. "the newest checkpoint is
    kept (update 6); continue with: ..."); None: nothing to say beyond the stop."""
    _last_words[:] = [fn] if fn is not None else []


def stop_at_once(signum: int, default: str = "") -> NoReturn:
    """End the process now, in one line naming the signal and what is kept (`set_last_words`,
    else `default`), with 128 + the signal: no exit handler and no Python shutdown run (either
    may wait on the thread that hangs)."""
    kept = default
    if _last_words:
        try:
            kept = _last_words[0](signum) or default
        except Exception:  # noqa: BLE001 - a file it reads is gone: the stop itself still ends
            pass
    sep = " " if kept.startswith(("while", "(")) else "; " if kept else ""
    try:
        _flush()
        sys.stderr.write(f"{_command[0]}: error: stopped at once by "
                         f"{signal.Signals(signum).name}{sep}{kept}\n")
        _flush()
    finally:
        os._exit(128 + signum)


def _watch(fd: int) -> None:
    """The watchdog's thread: Python runs signal handlers in the main thread only, and one
    blocked in native code (a host env's `step` that never returns, inside XLA's callback)
    runs none, so the process ignored every signal. The C-level handler still writes each
    signal's number to the wakeup fd: after a second stop signal, the main thread gets
    `GRACE_S` to end the command; then the command ends here."""
    numbers = {int(s) for s in SIGNALS}  # two at once are one to the main thread's handler
    seen = 0
    while True:
        try:
            data = os.read(fd, 64)
        except OSError:
            return
        if not data:
            return
        for b in data:
            seen += b in numbers
            if b in numbers and seen == 1 and _native and _native[-1] and not _ending[0]:
                _acknowledge(b, _native[-1])
            if b not in numbers or seen < 2:
                continue
            time.sleep(GRACE_S)
            if _ending[0]:  # its own line is said: its exit handlers may still hang
                time.sleep(GRACE_S)
                _flush()
                os._exit(128 + b)
            starting = _held or (StopFlag._held is not None and StopFlag._held.starting)
            stop_at_once(b, "while starting; nothing was run" if starting else
                         f"(the command did not stop within {GRACE_S:.0f} s of a second signal)")


def _acknowledge(signum: int, what: str) -> None:
    """Say at once that a first stop signal was taken while the main thread is in native work
    (a compile of 30 s on a busy machine answered nothing until it ended): the command stops
    when that work ends; a second signal ends it sooner."""
    _flush()
    sys.stderr.write(f"{_command[0]}: note: {signal.Signals(signum).name} taken while "
                     f"{what} runs: stopping when it ends (a second signal stops within "
                     f"{GRACE_S:.0f} s)\n")
    _flush()


def start_watchdog() -> None:
    """Start `_watch` (once, from the main thread; the command only)."""
    if _watchdog:
        return
    try:
        r, w = os.pipe()
        os.set_blocking(w, False)
        signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    except (OSError, ValueError):  # not the main thread, no pipes: no watchdog
        return
    _watchdog.append(threading.Thread(target=_watch, args=(r,), name="jaxppo-stop-watchdog",
                                      daemon=True))
    _watchdog[0].start()


class StopNow(KeyboardInterrupt):
    """Stop at once, not at a chunk boundary: a second stop signal, or one that came before
    the work could stop cleanly (`when`: "while compiling", ...; None: a second signal)."""

    def __init__(self, signum: int, when: str | None = None):
        super().__init__(signal.Signals(signum).name)
        self.signum, self.when = signum, when


class StopFlag:
    """Set by SIGINT, SIGTERM or SIGHUP (a closed terminal) instead of raising, so that
    nothing is interrupted inside XLA; the holder checks it where a stop is clean (`check`,
    or a run's chunk boundaries). A second signal stops at once (`StopNow`). A flag entered
    while another is held is that one (`with StopFlag() as stop` gives the outer flag): an
    evaluation inside the `jaxppo eval` command shares the command's.

    `starting`: the command's own flag, held from its start (`main`) until its work holds one
    (a run, an evaluation): a second signal before then ends the process at once in one line
    (`stop_at_once`), never a KeyboardInterrupt that a library's code could swallow. A SIGHUP
    ignored when the flag is entered (`nohup`) stays ignored."""

    SIGNALS = SIGNALS
    _held: StopFlag | None = None  # the flag whose handlers are installed

    def __init__(self, starting: bool = False, restore: dict | None = None):
        self.signum: int | None = None
        self.starting = starting
        self._restore = restore or {}  # handlers to put back at exit instead of those found
        self._old = {}
        self._outer: StopFlag | None = None

    def __enter__(self) -> StopFlag:
        main = threading.current_thread() is threading.main_thread()
        if main and StopFlag._held is not None:
            self._outer = StopFlag._held
            self._outer.starting = False  # the work began: a second signal is its StopNow
            return self._outer
        for sig in self.SIGNALS:
            if sig == getattr(signal, "SIGHUP", None) and signal.getsignal(sig) == signal.SIG_IGN:
                continue
            try:
                old = signal.signal(sig, self._handle)
            except ValueError:  # not the main thread: leave signals alone
                continue
            self._old[sig] = old
        if self._old:
            StopFlag._held = self
        return self

    def _handle(self, signum, frame):
        note_signal()
        if self.signum is not None and self.starting:
            stop_at_once(signum, "while starting; nothing was run")
        if self.signum is not None:
            raise StopNow(signum)
        self.signum = signum

    def check(self, when: str) -> None:
        """Stop (`StopNow(signum, when)`) if a signal came."""
        if self.signum is not None:
            raise StopNow(self.signum, when)

    def __exit__(self, *exc):
        if self._outer is not None:
            self._outer = None
            return False
        for sig, old in self._old.items():
            signal.signal(sig, self._restore.get(sig, old))
        self._old = {}
        if StopFlag._held is self:
            StopFlag._held = None
        return False


def stop_point(when: str) -> None:
    """Where held work can stop cleanly: `StopNow(signum, when)` if a signal came while a
    `StopFlag` holds them (nothing without one)."""
    if StopFlag._held is not None:
        StopFlag._held.check(when)


_abandoned: list[str] = []


def abandoned(what: str) -> None:
    """Record native work left running in a thread of its own (XLA's compile, interrupted):
    the command then exits without Python's shutdown, which would crash under it."""
    _abandoned.append(what)


def work_abandoned() -> bool:
    return bool(_abandoned)


@contextlib.contextmanager
def native_work(what: str = "XLA's compile", acknowledge: bool = False):
    """Around JAX work that may compile: a KeyboardInterrupt (a second signal's `StopNow`)
    raised out of it may have left XLA compiling in a thread of its own: recorded, so that
    `exit_process` ends the process without Python's shutdown. With `acknowledge` (a run's
    compile, which the first signal lets finish), a first stop signal is answered at once by
    the watchdog (`_acknowledge`)."""
    _native.append(what if acknowledge else "")
    try:
        yield
    except KeyboardInterrupt:
        abandoned(what)
        raise
    finally:
        _native.pop()


THREAD_GRACE_S = 1.0
"""How long the command waits for threads still running after its work (a last write)."""


def leftover_threads() -> list[threading.Thread]:
    """Threads that would keep Python's shutdown waiting: alive and not daemons."""
    return [t for t in threading.enumerate()
            if t is not threading.main_thread() and not t.daemon and t.is_alive()]


def thread_origin(thread: threading.Thread) -> str:
    """`'NAME' (module.function)`: the thread and the code it runs, for a note."""
    fn = getattr(thread, "_target", None) or type(thread).run
    where = ".".join(x for x in (getattr(fn, "__module__", None),
                                 getattr(fn, "__qualname__", None)) if x)
    return f"'{thread.name}'" + (f" ({where})" if where else "")


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe
            pass


def _exit_now(signum, frame) -> None:
    """A stop signal once the work is done: the process ends at once (no traceback from
    inside Python's shutdown)."""
    _flush()
    os._exit(128 + signum)


def exit_process(code: int | None, command: str = "jaxppo") -> NoReturn:
    """End the command with `code`. Python's shutdown would crash under an abandoned compile
    and wait forever for a thread a user's module left running (not a daemon): then the
    process ends at once, its output flushed, after a note naming each such thread. Else the
    exit handlers run (`atexit`: logging's, JAX's) and the process ends without Python's
    teardown of its modules, in which signal handling is already off (a Ctrl-C there killed
    the process, -2): a stop signal from here on ends it at once with 128 + N."""
    code = 0 if code is None else int(code)  # as sys.exit reads it
    _ending[0] = True
    if threading.current_thread() is threading.main_thread():
        for sig in SIGNALS:
            signal.signal(sig, _exit_now)
    if not work_abandoned():
        deadline = time.monotonic() + THREAD_GRACE_S
        for t in leftover_threads():
            t.join(max(0.0, deadline - time.monotonic()))
    threads = leftover_threads()
    for t in threads:
        print(f"{command}: note: thread {thread_origin(t)} was still running after the "
              "command's work; exiting without waiting for it (start it as a daemon thread, "
              "or stop it, for a clean exit)", file=sys.stderr)
    if not threads and not work_abandoned():
        atexit._run_exitfuncs()
    _flush()
    os._exit(code)


def run_child(main, argv: list[str], command: str) -> NoReturn:
    """A child process's work, `main(argv)`, ended as the `jaxppo` command ends
    (`exit_process`): a stop signal it ended on (Ctrl-C; a run's `StopNow`, which says when) is
    one line and 128 + N, not a traceback."""
    try:
        main(argv)
        code = 0
    except KeyboardInterrupt as e:
        signum = getattr(e, "signum", signal.SIGINT)
        when = getattr(e, "when", None) or "at once"
        print(f"stopped by {signal.Signals(signum).name} {when}", file=sys.stderr)
        code = 128 + signum
    exit_process(code, command)
