"""`jaxppo compare`'s process-tree watch counts the run's processes only: a child the caller
had before the run (a pytest worker's W&B service, say) is not the run's (CI counted 3
processes for a one-process system so)."""

import os
import subprocess
import sys
import time

import pytest

from jaxppo.compare.tree import Watch, end_leftovers

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def test_the_watch_counts_the_runs_process_not_the_callers_other_children():
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with Watch() as tree:
            subprocess.run([sys.executable, "-c", "import time; time.sleep(1.5)"], check=True)
        assert tree.peak["procs"] == 1, tree.samples
        assert tree.peak["peak_bytes"] > 1e6 and tree.peak["tree_threads"] >= 1
    finally:
        other.kill()
        other.wait()


LEAVES_ONE = ("import subprocess, sys, time; "
              "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], "
              "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
              "print(p.pid, flush=True); time.sleep(1.0)")
"""A run that starts a worker and exits without ending it (as a forkserver is left)."""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def test_a_process_the_run_left_behind_is_ended_when_it_ends():
    with Watch() as tree:
        out = subprocess.run([sys.executable, "-c", LEAVES_ONE], capture_output=True, text=True)
    worker = int(out.stdout.split()[0])
    assert tree.left_behind == [worker]
    deadline = time.monotonic() + 5
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(worker)


def test_a_stop_while_the_run_runs_ends_its_whole_tree():
    """A Ctrl-C (or SIGTERM) in compare's parent: subprocess.run kills its child; the child's
    own children must not outlive it."""
    proc = None
    with pytest.raises(KeyboardInterrupt), Watch() as tree:
        proc = subprocess.Popen([sys.executable, "-c", LEAVES_ONE.replace("1.0", "30")],
                                stdout=subprocess.PIPE, text=True)
        worker = int(proc.stdout.readline())
        time.sleep(3 * 0.25)  # sampled
        proc.kill()  # as subprocess.run does on an exception
        proc.wait()
        raise KeyboardInterrupt
    proc.stdout.close()
    assert worker in tree.left_behind
    time.sleep(0.2)
    assert not _alive(worker)


def test_a_pid_reused_by_another_process_is_never_signalled():
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert end_leftovers({other.pid: "1"}, grace_s=0.1) == []  # another start time
        assert other.poll() is None
        assert end_leftovers({os.getpid() + 10**7: "1"}, grace_s=0.1) == []  # no such pid
    finally:
        other.kill()
        other.wait()


def test_a_worker_on_its_way_out_is_not_counted_as_left_behind():
    """An env worker that ends itself as the run ends (it sees its parent's pipe close) is
    neither ended nor reported: only one still alive after the settle time is."""
    # ends 0.3 s after EOF (an env's teardown), well inside the settle time (1 s)
    worker = "import sys, time; print('ready', flush=True); sys.stdin.read(); time.sleep(0.3)"
    run = ("import subprocess, sys, time; "
           f"p = subprocess.Popen([sys.executable, '-c', {worker!r}], stdin=subprocess.PIPE, "
           "stdout=subprocess.PIPE, stderr=subprocess.DEVNULL); "
           "p.stdout.readline(); time.sleep(3 * 0.25)")  # sampled; its exit closes the pipe
    with Watch() as tree:
        subprocess.run([sys.executable, "-c", run], capture_output=True, text=True)
    assert tree.left_behind == [] and len(tree.members) == 2, tree.members
