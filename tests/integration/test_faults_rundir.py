"""A run directory that is not as the run left it: a second writer, stale temp files, an edited
checkpoint header or config.yaml, flags a resume would ignore, a run name leaving the logdir,
symlinks, a full disk mid-run, a deleted directory, a run stopped before its first checkpoint,
and `load_policy` given the wrong thing: one line naming the problem, the run resumable."""

import glob
import os

import numpy as np
import pytest
from faults_setup import CARTPOLE, TINY, cli, copy_of, edit_header, one_line

from jaxppo import Experiment, PPOConfig, load_checkpoint
from jaxppo.cli import main
from jaxppo.run.logs.csv_logger import CsvLogger
from jaxppo.rundir.files import RunLock
from jaxppo.rundir.metrics_csv import read_metrics_csv

pytestmark = pytest.mark.usefixtures("compile_cache")


def test_a_second_writer_is_refused_with_the_holder_named(stopped_run, tmp_path, capsys):
    run = copy_of(stopped_run, tmp_path)
    with RunLock(run):  # another process holds the run (flock: per open file, so this counts)
        code, _, err = cli(capsys, "train", "--resume", run)
    assert code == 2
    one_line(err, "in use by process", str(os.getpid()))
    code, _, err = cli(capsys, "train", "--resume", run, "--no-progress")  # released: it runs
    assert code == 0, err


def test_stale_temp_files_are_removed_by_the_next_save(tmp_path, capsys):
    code, _, _ = cli(capsys, "train", "--config", CARTPOLE, *TINY, "--logdir", str(tmp_path),
                     "--run-name", "r", "--no-progress")
    from jaxppo.rundir.checkpoint import save_checkpoint

    run = str(tmp_path / "r")
    stale = os.path.join(run, "checkpoint", ".tmp-killed.msgpack")
    open(stale, "wb").write(b"half a checkpoint")
    ckpt = load_checkpoint(run)
    save_checkpoint(run, ckpt.runner_state, ckpt.config, ckpt.update, ckpt.num_runs,
                    extra=ckpt.extra)
    assert not glob.glob(os.path.join(run, "checkpoint", ".tmp-*"))
    assert load_checkpoint(run).update == ckpt.update


@pytest.mark.parametrize("changes,words", [
    ({"config": {"gamma": 0.98}}, ["fails its checksum", "edited"]),
    ({"update": 3}, ["fails its checksum"]),
    ({"extra": {"seed": 7}}, ["fails its checksum"]),
    ({"header": [1, 2, 3]}, ["corrupt"]),
    ({"update": "twelve"}, ["corrupt"]),
    ({"num_runs": None}, ["corrupt"]),
], ids=["gamma", "update", "seed", "header-list", "update-text", "runs-null"])
def test_the_checksum_covers_the_header(stopped_run, tmp_path, capsys, changes, words):
    run = copy_of(stopped_run, tmp_path)
    edit_header(run, **changes)
    for argv in (["train", "--resume", run], ["eval", run]):
        code, _, err = cli(capsys, *argv)
        assert code == 2
        one_line(err, *words)


def test_an_edited_config_yaml_is_refused_on_resume(stopped_run, tmp_path, capsys):
    run = copy_of(stopped_run, tmp_path)
    path = os.path.join(run, "config.yaml")
    text = open(path).read()
    assert "lr: 0.00025" in text
    open(path, "w").write(text.replace("lr: 0.00025", "lr: 0.001"))
    code, _, err = cli(capsys, "train", "--resume", run)
    assert code == 2
    one_line(err, "config.yaml", "edited", "lr")


@pytest.mark.parametrize("flag", [["--seed", "3"], ["--run-name", "x"], ["--logdir", "elsewhere"],
                                  ["--seeds", "2"]])
def test_flags_that_resume_would_ignore_are_refused(stopped_run, capsys, flag):
    code, _, err = cli(capsys, "train", "--resume", stopped_run, *flag)
    assert code == 2
    one_line(err, "--resume", flag[0])


@pytest.mark.parametrize("name", ["../../escape", "/tmp/absolute", "a/b", ".."])
def test_run_names_cannot_leave_the_logdir(tmp_path, capsys, name):
    code, _, err = cli(capsys, "train", "--config", CARTPOLE, *TINY, "--logdir",
                       str(tmp_path / "runs"), "--run-name", name)
    assert code == 2
    one_line(err, "--run-name")
    assert not os.path.exists(str(tmp_path / "escape")) and not os.path.exists("/tmp/absolute")


def test_symlinks_in_a_run_directory_are_not_followed(stopped_run, tmp_path, capsys):
    run = copy_of(stopped_run, tmp_path)
    target = tmp_path / "precious.txt"
    target.write_text("do not overwrite")
    os.remove(os.path.join(run, "metrics.csv"))
    os.symlink(target, os.path.join(run, "metrics.csv"))
    code, _, err = cli(capsys, "train", "--resume", run)
    assert code == 2
    one_line(err, "symbolic link", "metrics.csv")
    assert target.read_text() == "do not overwrite"


def test_a_full_disk_mid_run_is_one_line_and_resumable(tmp_path, capsys, monkeypatch):
    calls = {"n": 0}
    original = CsvLogger._write

    def fill_up(self, event):
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError(28, "No space left on device", os.path.join(str(tmp_path), "r"))
        original(self, event)

    monkeypatch.setattr(CsvLogger, "_write", fill_up)
    code, _, err = cli(capsys, "train", "--config", CARTPOLE, *TINY, "--logdir", str(tmp_path),
                       "--run-name", "r", "--no-progress", "--checkpoint-every", "1")
    assert code == 1
    one_line(err, "No space left on device", "--resume")
    monkeypatch.setattr(CsvLogger, "_write", original)
    run = str(tmp_path / "r")
    assert 0 < load_checkpoint(run).update < 24
    # The checkpoint never got ahead of the log it could not write: nothing is missing.
    assert main(["train", "--resume", run, "--no-progress"]) == 0
    np.testing.assert_array_equal(read_metrics_csv(run)["update"][0], np.arange(1, 25))


def test_a_deleted_run_directory_is_one_line(tmp_path, capsys):
    import shutil

    from jaxppo import Callback

    class Delete(Callback):
        def on_chunk(self, event):
            if event.update == 6:
                shutil.rmtree(event.info.run_dir)

    config = PPOConfig(total_timesteps=1536, num_envs=4, num_steps=16, num_minibatches=2,
                       update_epochs=2, hidden_sizes=(16, 16))
    with pytest.raises(OSError, match="run directory"):
        Experiment(config, logdir=str(tmp_path), run_name="r", progress=False, chunk_updates=6,
                   checkpoint_every=6, callbacks=[Delete()]).run()
    assert not os.path.exists(str(tmp_path / "r"))  # not silently recreated


@pytest.mark.parametrize("argv", [["train", "--resume"], ["sweep", "--resume"], ["eval"]])
def test_a_run_stopped_before_its_first_checkpoint_says_so(stopped_run, tmp_path, capsys, argv):
    import shutil

    run = copy_of(stopped_run, tmp_path)
    shutil.rmtree(os.path.join(run, "checkpoint"))
    code, _, err = cli(capsys, *argv, run)
    assert code == 2
    one_line(err, "no checkpoint was written before the run stopped", "start it again",
             os.path.join(run, "config.yaml"))
    assert "looked for" not in err[0] and "jaxppo train`" not in err[0]


def test_load_policy_names_what_it_was_given(stopped_run, capsys):
    from jaxppo import CheckpointError, UsageError, load_policy

    with pytest.raises(CheckpointError, match="is not a checkpoint; pass the run directory") as e:
        load_policy(os.path.join(stopped_run, "metrics.csv"))
    assert f"('{stopped_run}')" in str(e.value) and "corrupt" not in str(e.value)
    code, _, err = cli(capsys, "eval", os.path.join(stopped_run, "config.yaml"))
    assert code == 2
    one_line(err, "is not a checkpoint", stopped_run)
    with pytest.raises(UsageError, match="logdir=None"):
        load_policy(None)
    for seed in (1.7, True, "0"):
        with pytest.raises(UsageError, match="seed") as e:
            load_policy(stopped_run, seed=seed)
        assert "\n" not in str(e.value)
    assert load_policy(stopped_run, seed=np.int64(0)).seed == 0
