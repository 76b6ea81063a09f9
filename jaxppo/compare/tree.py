"""A compare run's whole process tree, watched while it runs (`Watch`): its peak memory (the sum of its
processes' proportional set sizes, so pages shared between them count once in all, not once
per process), and the most processes and threads it had at one time. Read from /proc every
quarter second; a tree that lives shorter than that, or an OS without /proc, gives None.
When the run ends (or is stopped), a process of its tree still alive, one the run left behind
(a forkserver of TorchRL's `ParallelEnv`, an env worker whose parent was killed), is ended:
SIGTERM, then SIGKILL after `GRACE_S`."""

from __future__ import annotations

import os
import signal
import threading
import time

INTERVAL_S = 0.25
GRACE_S = 3.0
SETTLE_S = 1.0


def children(pid: int) -> list[int]:
    """The direct children of `pid` (every thread's), [] where /proc cannot say."""
    out: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as f:
                out += [int(c) for c in f.read().split()]
    except (OSError, ValueError):
        pass
    return out


def tree(root: int) -> list[int]:
    """`root` and all its descendants."""
    seen, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid not in seen:
            seen.append(pid)
            todo += children(pid)
    return seen


def _field(path: str, names: tuple[str, ...]) -> dict[str, int]:
    out = {}
    try:
        with open(path, encoding="ascii") as f:
            for line in f:
                key = line.split(":", 1)[0]
                if key in names:
                    out[key] = int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return out


def sample(pids: list[int]) -> tuple[int, int, int] | None:
    """(bytes, processes, threads) of the processes `pids` (a tree: `tree(root)`) now; None
    where nothing is read."""
    total = procs = threads = 0
    for pid in pids:
        mem = _field(f"/proc/{pid}/smaps_rollup", ("Pss",)).get("Pss")
        status = _field(f"/proc/{pid}/status", ("VmRSS", "Threads"))
        kb = mem if mem is not None else status.get("VmRSS")
        if kb is None:
            continue
        total += kb * 1024
        procs += 1
        threads += status.get("Threads", 1)
    return (total, procs, threads) if procs else None


def _stat(pid: int) -> list[str]:
    """/proc/PID/stat's fields after the command name (field 3 on, so index i is field i + 3);
    [] for a process that is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rpartition(")")[2].split()
    except OSError:
        return []


def cpu_seconds(pid: int) -> float | None:
    """The CPU time `pid` has used so far (user + system: /proc/PID/stat's fields 14-15), None
    for a process that is gone."""
    try:
        fields = _stat(pid)
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (ValueError, IndexError):
        return None


def _started(pid: int) -> str | None:
    """When `pid` started (clock ticks since boot: /proc/PID/stat's field 22), so that a pid the
    kernel has since given to another process is never taken for it; None for a process that is
    gone or a zombie."""
    fields = _stat(pid)
    return None if not fields or fields[0] == "Z" else fields[19]


def _wait_gone(pids: list[int], members: dict[int, str], seconds: float) -> list[int]:
    """Those of `pids` still alive after up to `seconds`."""
    end = time.monotonic() + seconds
    while True:
        alive = [p for p in pids if _started(p) == members[p]]
        if not alive or time.monotonic() >= end:
            return alive
        time.sleep(0.05)


def end_leftovers(members: dict[int, str], grace_s: float = GRACE_S,
                  settle_s: float = SETTLE_S) -> list[int]:
    """End the processes of `members` (pid: start time) still alive once `settle_s` has let
    those already on their way out go (an env worker that saw its parent's pipe close):
    SIGTERM, then SIGKILL those alive after `grace_s`. Returns the pids that were ended."""
    alive = _wait_gone(list(members), members, settle_s)
    left = alive
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in left:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        left = _wait_gone(left, members, grace_s if sig == signal.SIGTERM else 0.0)
        if not left:
            break
    return alive


def process_bytes(pid: int) -> int | None:
    """A process's own memory: its private pages (what another copy of it adds), else its
    resident size; None where /proc has neither."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as f:
            private = [int(line.split()[1]) for line in f
                       if line.startswith(("Private_Clean:", "Private_Dirty:"))]
        if private:
            return sum(private) * 1024
    except (OSError, ValueError):
        pass
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return None


def holds_jax(pid: int) -> bool | None:
    """Whether process `pid` has JAX's compiled library mapped (None where /proc cannot say)."""
    try:
        with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as f:
            return "jaxlib" in f.read()
    except OSError:
        return None


def peak(samples: list[tuple[int, int, int]]) -> dict:
    """The run's peaks: memory, processes, threads (None each where nothing was sampled)."""
    if not samples:
        return {"peak_bytes": None, "procs": None, "tree_threads": None}
    return {"peak_bytes": max(s[0] for s in samples), "procs": max(s[1] for s in samples),
            "tree_threads": max(s[2] for s in samples)}


class Watch:
    """While in the `with` block, a thread samples the tree of this process's children started
    in it (a compare parent has one child at a time: the run; children it had before, such as a
    caller's own helper processes, are not the run's) every `INTERVAL_S`; `.peak` after. On
    leaving the block, the tree's processes still alive are ended (`.left_behind`: their pids)."""

    def __init__(self):
        self.samples: list[tuple[int, int, int]] = []
        self.peak: dict = peak([])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._before: set[int] = set()
        self.members: dict[int, str] = {}  # every process of the run's tree seen: start time
        self.cpu: dict[int, float] = {}  # every process of the run's tree: CPU seconds last seen
        self.left_behind: list[int] = []

    def _loop(self) -> None:
        me = os.getpid()
        while not self._stop.wait(INTERVAL_S):
            trees = [tree(pid) for pid in children(me) if pid not in self._before]
            for pid in (p for pids in trees for p in pids):  # walked once: members and sample
                if pid not in self.members and (t := _started(pid)) is not None:
                    self.members[pid] = t
                if (c := cpu_seconds(pid)) is not None:
                    self.cpu[pid] = max(c, self.cpu.get(pid, 0.0))
            found = [sample(pids) for pids in trees]
            found = [f for f in found if f is not None]
            if found:
                self.samples.append(tuple(sum(f[i] for f in found) for i in range(3)))

    def __enter__(self) -> Watch:
        self._before = set(children(os.getpid()))
        self._thread.start()
        return self

    @property
    def cpu_s(self) -> float:
        """The CPU seconds the run's processes used, as last sampled (a process reaped by no one
        of this process's, such as a worker the run left behind, counts here too)."""
        return sum(self.cpu.values())

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = peak(self.samples)
        self.left_behind = end_leftovers(self.members)
