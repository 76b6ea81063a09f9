"""A line that says a checkpoint is kept is true when printed: read back from the files after
the run's last save, not from what the run meant to save (issue #54, item 2)."""

import errno
import os

import gymnasium
import pytest
from faults_setup import CARTPOLE, TINY, cli, one_line
from test_host_env import Walk

import jaxppo.rundir.checkpoint as checkpoint
from jaxppo import Experiment, PPOConfig
from jaxppo.errors import EnvError

pytestmark = pytest.mark.usefixtures("compile_cache")


def test_a_failed_first_checkpoint_is_not_said_to_be_kept(tmp_path, capsys, monkeypatch):
    """Reproduction: the first checkpoint's write failed (a full disk), the line said 'the
    newest checkpoint is kept; ... continue with --resume', and the resume found none."""
    original = checkpoint.write_atomic

    def full(path, data):
        if path.endswith("checkpoint.msgpack"):  # the disk fills as the checkpoint is written
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
        original(path, data)

    monkeypatch.setattr(checkpoint, "write_atomic", full)
    code, _, err = cli(capsys, "train", "--config", CARTPOLE, *TINY, "--logdir", str(tmp_path),
                       "--run-name", "r", "--no-progress", "--checkpoint-every", "1")
    assert code == 1
    one_line(err, "No space left on device", "no checkpoint had been saved yet",
             "free some disk space")
    assert "is kept;" not in err[0] and "--resume" not in err[0]
    assert not os.path.exists(tmp_path / "r" / "checkpoint" / "checkpoint.msgpack")


def test_an_env_fault_in_a_run_without_a_run_directory_keeps_nothing(tmp_path):
    """Reproduction: with logdir=None (as compare runs) an env fault said 'the checkpoint at
    update 5 is kept', of a run that writes no files."""
    gymnasium.register("test/KeptFail-v0", entry_point=Walk, max_episode_steps=6,
                       kwargs={"fail_at": 45, "fault": "raise"})
    config = PPOConfig(env_id="gymnasium/test/KeptFail-v0", total_timesteps=256, num_envs=4,
                       num_steps=8, num_minibatches=2, update_epochs=1, hidden_sizes=(8,))
    with pytest.raises(EnvError) as e:
        Experiment(config, logdir=None, progress=False, chunk_updates=1).run()
    assert "failed at update 6" in str(e.value)
    assert "no run directory, so nothing of it was saved" in str(e.value)
    assert "is kept" not in str(e.value)
