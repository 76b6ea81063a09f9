"""A compare run's whole process tree, watched while it runs (`Watch`): its peak memory (the sum of its
processes' proportional set sizes, so pages shared between them count once in all, not once
per process), and the most processes and threads it had at one time. Read from /proc every
quarter second; a tree that lives shorter than that, or an OS without /proc, gives None."""

from __future__ import annotations

import os
import threading

INTERVAL_S = 0.25


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


def sample(root: int) -> tuple[int, int, int] | None:
    """(bytes, processes, threads) of the tree under `root` now; None where nothing is read."""
    total = procs = threads = 0
    for pid in tree(root):
        mem = _field(f"/proc/{pid}/smaps_rollup", ("Pss",)).get("Pss")
        status = _field(f"/proc/{pid}/status", ("VmRSS", "Threads"))
        kb = mem if mem is not None else status.get("VmRSS")
        if kb is None:
            continue
        total += kb * 1024
        procs += 1
        threads += status.get("Threads", 1)
    return (total, procs, threads) if procs else None


def peak(samples: list[tuple[int, int, int]]) -> dict:
    """The run's peaks: memory, processes, threads (None each where nothing was sampled)."""
    if not samples:
        return {"peak_bytes": None, "procs": None, "tree_threads": None}
    return {"peak_bytes": max(s[0] for s in samples), "procs": max(s[1] for s in samples),
            "tree_threads": max(s[2] for s in samples)}


class Watch:
    """While in the `with` block, a thread samples the tree of this process's children started
    in it (a compare parent has one child at a time: the run; children it had before, such as a
    caller's own helper processes, are not the run's) every `INTERVAL_S`; `.peak` after."""

    def __init__(self):
        self.samples: list[tuple[int, int, int]] = []
        self.peak: dict = peak([])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._before: set[int] = set()

    def _loop(self) -> None:
        me = os.getpid()
        while not self._stop.wait(INTERVAL_S):
            found = [sample(pid) for pid in children(me) if pid not in self._before]
            found = [f for f in found if f is not None]
            if found:
                self.samples.append(tuple(sum(f[i] for f in found) for i in range(3)))

    def __enter__(self) -> Watch:
        self._before = set(children(os.getpid()))
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = peak(self.samples)
