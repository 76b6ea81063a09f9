"""A run killed (kill -9, SIGHUP) loses nothing already saved: it checkpoints periodically
whatever its number of updates, a resume finds its checkpoint from any path a user gives, and a
killed-and-resumed run equals the run never killed."""

import json
import os
import signal
import time

import numpy as np
import pytest
from conftest import compile_exactly
from faults_setup import CARTPOLE, LONG, LONG_UPDATES, child, cli, one_line

from jaxppo import Experiment, PPOConfig, load_checkpoint
from jaxppo._xla import setup_compilation_cache
from jaxppo.cli import main
from jaxppo.run.driver import chunk_lengths, pick_chunk
from jaxppo.rundir.metrics_csv import read_metrics_csv

pytestmark = pytest.mark.usefixtures("compile_cache")


@pytest.fixture(scope="module")
def long_whole(tmp_path_factory):
    """The uninterrupted LONG run every killed-and-resumed one must equal."""
    logdir = str(tmp_path_factory.mktemp("long"))
    setup_compilation_cache()
    with pytest.MonkeyPatch.context() as mp:  # the exact tests compare against it
        compile_exactly(mp)
        assert main(["train", "--config", CARTPOLE, *LONG, "--seeds", "2", "--logdir", logdir,
                     "--run-name", "whole", "--no-progress"]) == 0
    return os.path.join(logdir, "whole")


def wait_for_checkpoint(proc, run, timeout=300):
    t0 = time.time()
    path = os.path.join(run, "checkpoint", "checkpoint.msgpack")
    while not os.path.exists(path):
        assert proc.poll() is None, proc.communicate()
        assert time.time() - t0 < timeout
        time.sleep(0.05)


@pytest.mark.exact
def test_kill_9_then_resume_gives_the_uninterrupted_logs(tmp_path, long_whole):
    run = str(tmp_path / "run")
    proc = child("train", "--config", CARTPOLE, *LONG, "--seeds", "2", "--logdir", str(tmp_path),
                 "--run-name", "run", "--checkpoint-every", "400")
    wait_for_checkpoint(proc, run)
    # Let it log past its newest checkpoint (on a loaded machine a fixed sleep could land the
    # kill right at a checkpoint, leaving no rows to cut back), then kill it.
    t0 = time.time()
    while time.time() - t0 < 20 and proc.poll() is None:
        try:
            if read_metrics_csv(run)["update"].max() > load_checkpoint(run).update + 1:
                break
        except Exception:  # noqa: BLE001 - a file mid-write: look again
            pass
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    saved = load_checkpoint(run).update
    if saved >= LONG_UPDATES:
        pytest.skip("the run finished before the kill")
    # Rows past the checkpoint, as a kill usually leaves (cut back by the resume). A kill that
    # lands between a save and the next chunk's rows leaves none: rare, and the run must still
    # resume to the uninterrupted logs (test_faults_logs.py's damaged-log tests cut back too).
    assert read_metrics_csv(run)["update"].max() >= saved
    assert main(["train", "--resume", run, "--no-progress"]) == 0
    a, b = read_metrics_csv(long_whole), read_metrics_csv(run)
    assert b["update"].shape == (2, LONG_UPDATES)  # every update exactly once
    for k in ("update", "env_steps", "episodes", "episodic_return", "policy_loss"):
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    sa = json.load(open(os.path.join(long_whole, "summary.json")))
    sb = json.load(open(os.path.join(run, "summary.json")))
    assert sb["episodes_per_run"] == sa["episodes_per_run"] and sb["solved"] == sa["solved"]
    assert sb["final_return"] == sa["final_return"] and sb["wall_s"] > 0


def test_sighup_is_a_clean_stop(tmp_path):
    run = str(tmp_path / "run")
    proc = child("train", "--config", CARTPOLE, *LONG, "--logdir", str(tmp_path), "--run-name",
                 "run")
    for line in proc.stdout:  # the first progress line: the run is past its compile
        if line.startswith("["):
            break
    proc.send_signal(signal.SIGHUP)
    _, err = proc.communicate(timeout=300)
    if proc.returncode == 0:
        pytest.skip("the run finished before the signal")
    assert proc.returncode == 128 + signal.SIGHUP, err
    assert "stopped by SIGHUP" in err and "Traceback" not in err
    assert 0 < load_checkpoint(run).update < LONG_UPDATES


def test_runs_checkpoint_periodically_by_default(tmp_path):
    events = []
    exp = Experiment(PPOConfig(total_timesteps=1536, num_envs=4, num_steps=16, num_minibatches=2,
                               update_epochs=2, hidden_sizes=(16, 16)),
                     logdir=str(tmp_path), run_name="r", progress=False, chunk_updates=6,
                     checkpoint_every_s=1e-9,
                     callbacks=[lambda e: events.append(load_checkpoint(e.info.run_dir).update
                                                        if e.update > 6 else None)])
    exp.run()
    assert [u for u in events if u is not None] == [6, 12, 18]  # saved at every chunk before


def test_any_number_of_updates_gets_progress_and_checkpoints():
    for n in (4001, 97, 1, 24, 10_007):
        lengths = chunk_lengths(n, pick_chunk(n))
        assert sum(lengths) == n and len(set(lengths)) <= 2  # one extra program at most
        assert len(lengths) >= min(n, 12), (n, lengths)  # never one chunk for the whole run
    assert pick_chunk(24) == 1 and pick_chunk(100) == 4  # divisors when they fit: one program
    # 1e6 steps of 4096 (244 updates; 292 for 1.2e6): no divisor within 2x of 1/25 of the
    # run, but 4 gives 61 and 73 chunks: one program, not a second for a remainder
    assert pick_chunk(244) == 4 and pick_chunk(292) == 4 and pick_chunk(97) == 1
    assert chunk_lengths(4001, pick_chunk(4001)) == [160] * 25 + [1]  # a prime: no divisor


def test_resume_resolves_the_checkpoint_dir_and_file(tmp_path, capsys):
    def stop_at_6(event):
        return event.update < 6

    config = PPOConfig(total_timesteps=1536, num_envs=4, num_steps=16, num_minibatches=2,
                       update_epochs=2, hidden_sizes=(16, 16))
    Experiment(config, logdir=str(tmp_path), run_name="r", progress=False, chunk_updates=6,
               callbacks=[stop_at_6]).run()
    run = str(tmp_path / "r")
    file = os.path.join(run, "checkpoint", "checkpoint.msgpack")
    code, out, err = cli(capsys, "train", "--resume", file, "--no-progress")
    assert code == 0, err
    assert not os.path.exists(os.path.join(run, "checkpoint", "checkpoint"))  # no nested run
    assert load_checkpoint(run).update == 24
    code, _, err = cli(capsys, "train", "--resume", os.path.join(run, "checkpoint"))
    assert code == 2
    one_line(err, "is finished", "jaxppo eval")  # and its results are left as they are
    # Killed between its last checkpoint and summary.json: the resume rebuilds it, no training.
    summary = json.load(open(os.path.join(run, "summary.json")))
    os.remove(os.path.join(run, "summary.json"))
    code, out, err = cli(capsys, "train", "--resume", run, "--no-progress")
    assert code == 0, err
    assert "rebuilt summary.json" in out and "nothing was trained" in out
    rebuilt = json.load(open(os.path.join(run, "summary.json")))
    for k in ("final_return", "episodes_per_run", "solved", "env_steps", "sps"):
        assert rebuilt[k] == summary[k], k
    # The checkpoint's clock stopped at the last update, the summary's just after it.
    assert rebuilt["wall_s"] == pytest.approx(summary["wall_s"], abs=2.0)
    assert rebuilt["finished"] and rebuilt["rebuilt_from_checkpoint"]
