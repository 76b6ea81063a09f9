"""`--checkpoint-every N` means N: chunks end where a checkpoint is due, so a stop (an env
fault, a kill -9) loses at most N updates. It used to save only at chunk boundaries, up to 40
updates apart (issue #54, item 3)."""

import os
import signal
import time

import gymnasium
import pytest
from faults_setup import CARTPOLE, LONG, LONG_UPDATES, child, cli, one_line
from test_host_env import Walk

from jaxppo import Experiment, PPOConfig, load_checkpoint
from jaxppo.run.callbacks import Checkpointer
from jaxppo.run.driver import chunk_for_checkpoints, pick_chunk
from jaxppo.rundir.metrics_csv import read_metrics_csv

pytestmark = pytest.mark.usefixtures("compile_cache")


def test_the_chunk_is_at_most_n_and_one_program_where_it_can_be():
    assert pick_chunk(240) > 7 and pick_chunk(1000) == 40
    assert chunk_for_checkpoints(240, 7, None) == 6  # a divisor of 240: one program
    assert chunk_for_checkpoints(1000, 5, None) == 5
    assert chunk_for_checkpoints(97, 7, None) == 1  # pick_chunk(97) is 1 already
    assert chunk_for_checkpoints(1000, None, None) == 40
    assert chunk_for_checkpoints(1000, 5, 8) == 8  # a length asked for is kept


def test_saves_are_never_more_than_n_updates_apart(tmp_path, monkeypatch):
    """Reproduction: every 7 updates asked, saves came every 10 (the default chunk of 240)."""
    saves, original = [], Checkpointer.save

    def record(self, good):
        saves.append(good.update)
        original(self, good)

    monkeypatch.setattr(Checkpointer, "save", record)
    config = PPOConfig(total_timesteps=240 * 32, num_envs=4, num_steps=8, num_minibatches=2,
                       update_epochs=1, hidden_sizes=(8,))
    Experiment(config, logdir=str(tmp_path), run_name="r", progress=False, checkpoint_every=7,
               checkpoint_every_s=None).run()
    gaps = [b - a for a, b in zip([0, *saves], saves, strict=False)]
    assert saves[-1] == 240 and max(gaps) <= 7, saves


def test_an_env_fault_after_n_updates_keeps_a_checkpoint(tmp_path, capsys):
    """Reproduction: an env fault at update 11 with --checkpoint-every 5 (1000 updates: chunks
    of 40) left no checkpoint, and the run directory was removed."""
    gymnasium.register("test/EveryFail-v0", entry_point=Walk, max_episode_steps=6,
                       kwargs={"fail_at": 83, "fault": "raise"})  # env 0: update 11, step 3
    env_id = "gymnasium/test/EveryFail-v0"
    code, _, err = cli(capsys, "train", "--config", CARTPOLE, "--set", f"env_id={env_id}",
                       "--set", "total_timesteps=32000", "--set", "num_envs=4",
                       "--set", "num_steps=8", "--set", "num_minibatches=2",
                       "--set", "update_epochs=1", "--set", "hidden_sizes=[8]",
                       "--logdir", str(tmp_path), "--run-name", "f", "--no-progress",
                       "--checkpoint-every", "5")
    assert code == 2
    one_line(err, "failed at update 11", "the checkpoint at update 10 is kept")
    assert load_checkpoint(tmp_path / "f").update == 10


def test_a_kill_9_loses_at_most_n_updates(tmp_path):
    run = str(tmp_path / "run")
    proc = child("train", "--config", CARTPOLE, *LONG, "--logdir", str(tmp_path),
                 "--run-name", "run", "--checkpoint-every", "7", "--no-progress")
    path = os.path.join(run, "checkpoint", "checkpoint.msgpack")
    t0 = time.time()
    while not os.path.exists(path) or load_update(run) < 50:
        assert proc.poll() is None, proc.communicate()
        assert time.time() - t0 < 300
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    out, _ = proc.communicate()
    saved = load_checkpoint(run).update
    if saved >= LONG_UPDATES:
        pytest.skip("the run finished before the kill")
    assert "(6 updates per chunk)" in out, out
    assert read_metrics_csv(run)["update"].max() - saved <= 7


def load_update(run):
    try:
        return load_checkpoint(run).update
    except Exception:  # noqa: BLE001 - a file mid-rename: look again
        return 0
