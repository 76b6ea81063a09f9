"""A thread that a user's `--import` module starts and never stops (issue #53): Python's
shutdown waits for every thread that is not a daemon, so the command hung after its run had
finished, until killed. Now it says which thread was still running and exits."""

import json
import os
import subprocess
import sys
import time

from conftest import ROOT

CARTPOLE = os.path.join(ROOT, "configs", "cartpole.yaml")
TINY = ["--set", "total_timesteps=512", "--set", "num_envs=4", "--set", "num_steps=16",
        "--set", "num_minibatches=2", "--set", "update_epochs=1", "--set",
        "hidden_sizes=[16, 16]"]
MODULE = '''"""Registers nothing; starts a poller that never stops (not a daemon) and a daemon."""
import threading
import time


def poll_forever():
    while True:
        time.sleep(0.05)


threading.Thread(target=poll_forever, name="leaky-poller").start()
threading.Thread(target=poll_forever, name="quiet-daemon", daemon=True).start()
'''


def test_a_thread_an_imported_module_leaves_running_does_not_keep_the_command_alive(tmp_path):
    """Reproduction: the run finished, then the process never exited (killed at the timeout)."""
    (tmp_path / "leaky_poller.py").write_text(MODULE, encoding="utf-8")
    path = os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH")) if p)
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "jaxppo.cli", "train", "--import", "leaky_poller",
                           "--config", CARTPOLE, *TINY, "--logdir", str(tmp_path / "runs"),
                           "--run-name", "r", "--no-progress"], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": path}, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert time.monotonic() - t0 < 100
    assert "final return" in proc.stdout
    assert json.load(open(tmp_path / "runs" / "r" / "summary.json"))["finished"]
    err = proc.stderr.strip().splitlines()
    notes = [line for line in err if "thread" in line]
    assert notes == ["jaxppo train: note: thread 'leaky-poller' (leaky_poller.poll_forever) was "
                     "still running after the command's work; exiting without waiting for it "
                     "(start it as a daemon thread, or stop it, for a clean exit)"], err
    assert "Traceback" not in proc.stderr
