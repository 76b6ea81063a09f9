"""Files a user names: check them before work is spent, and fail with one line naming the path."""

from __future__ import annotations

import os

from jaxppo.errors import UsageError


def check_writable(path: str | os.PathLike, what: str) -> None:
    """Fail on a path that cannot be written before an episode is played, naming the path
    (and not the renderer that would otherwise fail on it)."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        reason = "it is a directory"
    elif not os.path.exists(folder):
        reason = f"directory '{folder}' does not exist"
    elif not os.path.isdir(folder):
        reason = f"'{folder}' is not a directory"
    elif not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        reason = "permission denied"
    else:
        return
    raise UsageError(f"cannot write {what} to '{path}': {reason}; pass a writable path")
