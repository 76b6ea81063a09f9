"""Whole-file writes: a file jaxppo writes (a checkpoint, eval.json, compare's and report's
tables and figures, a summary) is written whole or not at all, so a kill or a full disk leaves
the previous version; a failed write is one line naming the file and the fix. On the ground
floor so the plots can use it too: one helper, not copies."""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile

from jaxppo.errors import UsageError

WRITE_FIXES = {
    errno.ENOSPC: "free some disk space",
    errno.EDQUOT: "free some space within your disk quota",
    errno.EFBIG: "raise the file-size limit (ulimit -f)",
    errno.EMFILE: "raise the open-file limit (ulimit -n)",
    errno.ENFILE: "close other programs' files (the system's open-file table is full)",
    errno.EROFS: "the file system is read-only: remount it writable (or copy the run "
                 "directory to a writable disk)",
    errno.EIO: "check the disk (the system's log names the fault)",
    errno.EACCES: "make the run directory writable",
}
"""What to do about a failed write, by its errno."""


def write_atomic(path: str, data: str | bytes) -> None:
    """Write a whole file or nothing: a temp file in the same folder, fsync, rename over the
    old one (a kill mid-write leaves the previous version). Never follows a symlink at `path`."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=os.path.basename(path))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_failed(path: str | os.PathLike, what: str, error: OSError) -> UsageError:
    """A write that failed after `check_writable` passed (a disk full, a file-size limit, a
    path such as /proc that looks writable and is not): the path's fault, said as one line,
    with the fix for its cause."""
    fix = (WRITE_FIXES.get(error.errno) if error.errno != errno.EACCES else None)
    return UsageError(f"cannot write {what} to '{os.fspath(path)}' "
                      f"({error.strerror or error}); {fix or 'pass a writable path'}")


def write_whole(path: str, data: str | bytes, what: str) -> None:
    """`write_atomic`, with a failed write as `write_failed`'s one line (and the earlier file,
    if any, left as it was: said in the line)."""
    existed = os.path.exists(path)
    try:
        write_atomic(path, data)
    except OSError as e:
        err = write_failed(path, what, e)
        kept = "; the earlier one is unchanged" if existed else ""
        raise UsageError(f"{err}{kept}") from None
