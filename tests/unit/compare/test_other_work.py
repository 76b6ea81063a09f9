"""Whether other work shared the CPUs while `jaxppo compare` measured a run: the machine's
busy CPU time less the run's own, over the wall time. The 1-minute load average, read before a
run, still held the previous run's own processes (TorchRL's 4 env processes: load 2.8 on a
quiet 2-core machine) and called that other work."""

import subprocess
import sys

import pytest

from jaxppo.compare.fit import BUSY_CORES, cores, cpu_times, other_work, other_work_note
from jaxppo.compare.tree import Watch

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def test_other_work_is_the_machines_busy_time_less_the_runs_own():
    # 10 s of wall: the machine busy 14 CPU s, this process and its waited children 9 s
    assert other_work((100.0, 50.0, 0.0), (114.0, 59.0, 10.0)) == pytest.approx(0.5)
    # the run's watch saw more (a worker nobody waited for): 12 s of its own
    assert other_work((100.0, 50.0, 0.0), (114.0, 59.0, 10.0), run_cpu_s=12.0) == \
        pytest.approx(0.2)
    # never below zero (ticks and rusage round differently); no reading, no figure
    assert other_work((100.0, 50.0, 0.0), (108.0, 59.0, 10.0)) == 0.0
    assert other_work(None, (1.0, 1.0, 1.0)) is None
    assert other_work((1.0, 1.0, 1.0), (1.0, 1.0, 1.0)) is None


def test_the_note_names_other_work_only_above_the_threshold():
    assert other_work_note([0.1, None, BUSY_CORES]) is None
    assert other_work_note([None]) is None and other_work_note([]) is None
    note = other_work_note([0.2, 1.26])
    assert note.startswith(f"figures unreliable: other work kept 1.3 of {cores()} cores busy")


@linux
def test_a_busy_process_beside_the_run_is_other_work_and_the_runs_own_is_not():
    """A process burning a core beside a run shows as other work; the run's own burning does
    not (the watch and rusage count it as the run's)."""
    # 2 s of CPU, not of wall time: on a busy machine a wall-time loop got less (0.97 s)
    burn = [sys.executable, "-c",
            "import time\nt = time.process_time()\nwhile time.process_time() - t < 2.0: pass"]
    other = subprocess.Popen(burn)
    try:
        before = cpu_times()
        with Watch() as tree:
            subprocess.run([sys.executable, "-c", "import time; time.sleep(1.5)"], check=True)
        during = other_work(before, cpu_times(), tree.cpu_s)
    finally:
        other.wait()
    assert during > 0.6, during  # about one core (a busy test machine adds its own)
    before = cpu_times()
    with Watch() as tree:
        subprocess.run(burn, check=True)
    after = cpu_times()
    assert tree.cpu_s > 1.0, tree.cpu  # the run's own CPU, as the watch saw it
    own = other_work(before, after, tree.cpu_s)
    # The run's burning is taken out of the machine's busy time, whatever else ran meanwhile
    # (it was `own < during`, which another test's process busy in this window failed).
    wall = after[2] - before[2]
    busy = (after[0] - before[0]) / wall
    assert own is not None and busy - own >= 0.9 * tree.cpu_s / wall, (own, busy, tree.cpu_s)
