"""Files and streams as data, not trust: one writer at a time (an OS lock), writes
confined to the run directory (no `..`, no symlinks followed out of it), whole-file writes that a
kill cannot leave half-done, and paths checked before work is spent. Every refusal is one line
naming the path and the fix."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import io
import os
import stat

from jaxppo.errors import UsageError
from jaxppo.rundir import names
from jaxppo.writes import write_atomic, write_failed, write_whole  # noqa: F401 - their old home

LOCK_FILE = names.LOCK


def check_writable(path: str | os.PathLike, what: str) -> None:
    """Fail on a path that cannot be written before any work is done for it, naming the path
    (and not the renderer or writer that would otherwise fail on it later)."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    if not path:
        reason = "the path is empty"
    elif os.path.isdir(path):
        reason = "it is a directory"
    elif not os.path.exists(folder):
        reason = f"directory '{folder}' does not exist"
    elif not os.path.isdir(folder):
        reason = f"'{folder}' is not a directory"
    elif read_only(folder):
        reason = "the file system is read-only"
    elif not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        reason = "permission denied"
    else:
        return
    raise UsageError(f"cannot write {what} to '{path}': {reason}; pass a writable path")


def read_only(folder: str) -> bool:
    """`folder` is on a file system mounted read-only (no permission could make it writable)."""
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):
        return False


def check_run_name(name: str) -> str:
    """A run directory's name is one path component: `../x`, `a/b` or `/abs` would write
    outside `--logdir`."""
    if (not name or name in (".", "..") or os.sep in name or (os.altsep and os.altsep in name)
            or name.startswith("~")):
        raise UsageError(f"--run-name {name!r}: a run name is one directory name inside "
                         "--logdir (no '/', '..' or '~'); use --logdir to choose where")
    return name


def check_no_symlinks(run_dir: str, links: bool = True) -> None:
    """Refuse a run directory whose files are symbolic links: writing through them (logs,
    checkpoints, summary) would overwrite whatever they point at; or a FIFO, socket or device,
    which reading would wait on for ever (a FIFO waits for a writer). `links` false: only the
    latter (a reader's check)."""
    for folder, dirs, files in os.walk(run_dir):
        for name in dirs + files:
            path = os.path.join(folder, name)
            if os.path.islink(path):
                if not links:
                    continue
                raise UsageError(f"run directory '{run_dir}' holds a symbolic link ({path} -> "
                                 f"{os.readlink(path)}); jaxppo writes only real files inside "
                                 "its run directory: replace the link with a copy")
            mode = os.lstat(path).st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                kind = "a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a socket or device"
                raise UsageError(f"'{path}' is {kind}, not a regular file; jaxppo writes only "
                                 "regular files inside its run directory: put the file it "
                                 "replaced back, or remove it")


def free_name(path: str) -> str:
    """`path`, or `path-2`, `path-3`, ...: the first that does not exist yet (where a damaged
    or unfinished file is moved aside)."""
    out, i = path, 1
    while os.path.lexists(out):
        i += 1
        out = f"{path}-{i}"
    return out


def remove_stale_temps(folder: str) -> None:
    """Temp files a killed write left behind (`.tmp-*`): the rename never happened, so they
    hold nothing that was safe."""
    with contextlib.suppress(OSError):
        for name in os.listdir(folder):
            path = os.path.join(folder, name)
            if name.startswith(".tmp-") and stat.S_ISREG(os.lstat(path).st_mode):
                os.unlink(path)


class RunLock:
    """One writer per run directory: an exclusive OS file lock on `RUN_DIR/.lock`, held for
    the run's life. The OS releases it when the process dies (kill -9 included), so a stale
    lock never blocks a resume; a second live writer gets one line naming the holder. On a
    file system without locks (some NFS / Lustre mounts) the run goes on unlocked, and says so."""

    def __init__(self, run_dir: str):
        self.path = os.path.join(run_dir, LOCK_FILE)
        self.fd: int | None = None
        self.notes: list[str] = []  # for the run's owner to pass on (an unlockable file system)

    def acquire(self) -> RunLock:
        run_dir = os.path.dirname(self.path)
        flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
        try:
            fd = os.open(self.path, flags, 0o644)
        except OSError as e:
            raise UsageError(f"cannot lock run directory '{run_dir}': {e.strerror}; check that "
                             "it is writable") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                os.close(fd)
                self.notes.append(f"run directory '{run_dir}' cannot be locked ({e.strerror}); "
                                  "running without the one-writer check")
                return self
            holder = os.read(fd, 64).decode("ascii", "replace").strip()
            os.close(fd)
            who = f"process {holder}" if holder.isdigit() else "another process"
            raise UsageError(f"run directory '{run_dir}' is in use by {who} (a run still "
                             "going?); wait for it to end or stop it first, then resume") from None
        try:
            os.ftruncate(fd, 0)
            os.write(fd, str(os.getpid()).encode("ascii"))
        except OSError:
            pass  # the lock holds without the pid in it
        self.fd = fd
        return self

    def release(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self.fd, fcntl.LOCK_UN)
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def lock_holder(run_dir: str) -> str | None:
    """Who holds `run_dir`'s lock now ("process 4242"), or None: a run still writing it. Only
    tested (a shared lock taken and given back at once), never waited for."""
    path = os.path.join(run_dir, LOCK_FILE)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return None
            holder = os.read(fd, 64).decode("ascii", "replace").strip()
            return f"process {holder}" if holder.isdigit() else "another process"
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


class PipeSafe(io.TextIOBase):
    """stdout that a closed reader (`jaxppo train ... | head -1`) cannot kill: after a broken
    pipe, output goes to /dev/null and the run goes on to its checkpoint and summary."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except BrokenPipeError:
            self._to_devnull()
            return len(text)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except BrokenPipeError:
            self._to_devnull()

    def _to_devnull(self) -> None:
        with contextlib.suppress(OSError, ValueError):  # the interpreter's final flush too
            os.dup2(os.open(os.devnull, os.O_WRONLY), self.stream.fileno())
        self.stream = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process

    def isatty(self) -> bool:
        return self.stream.isatty()
