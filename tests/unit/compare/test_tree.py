"""`jaxppo compare`'s process-tree watch counts the run's processes only: a child the caller
had before the run (a pytest worker's W&B service, say) is not the run's (CI counted 3
processes for a one-process system so)."""

import subprocess
import sys

import pytest

from jaxppo.compare.tree import Watch

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
