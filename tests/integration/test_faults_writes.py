"""Files written beside the checkpoint (eval.json, compare's table, CSV and figure, sweep.csv)
are written whole or not at all: a full disk or a file-size limit leaves the earlier file as it
was, and the write error is one line naming the file and the fix, never a traceback."""

import errno
import glob
import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import ROOT, tiny_stopped_run
from faults_setup import CARTPOLE, TINY, cli, one_line

import jaxppo.compare.compare as cmp
from jaxppo import PPOConfig, load_checkpoint
from jaxppo.cli import main
from jaxppo.compare.table import aggregate
from jaxppo.rundir.metrics_csv import read_metrics_csv

pytestmark = pytest.mark.usefixtures("compile_cache")


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    return tiny_stopped_run(tmp_path_factory.mktemp("done"), 99)


def test_eval_json_past_a_file_size_limit_keeps_the_earlier_one(finished_run, tmp_path, capsys):
    """Reproduction: eval.json was written in place; past `ulimit -f` the earlier one was cut
    to a half-written file (which then blocked `jaxppo report`) and the error a traceback."""
    code, _, err = cli(capsys, "eval", finished_run, "--episodes", "2")
    assert code == 0, err
    before = open(os.path.join(finished_run, "eval.json")).read()
    code, err = limited_child(tmp_path, "RLIMIT_FSIZE", 256, "eval", finished_run,
                              "--episodes", "3", "--no-cache")
    assert code == 2, err
    one_line(err, "eval.json", "File too large", "ulimit -f", "the earlier one is unchanged")
    assert open(os.path.join(finished_run, "eval.json")).read() == before
    assert not [n for n in os.listdir(finished_run) if n.startswith(".tmp-")]
    code, _, err = cli(capsys, "report", finished_run, "--out", str(tmp_path / "rep"))
    assert code == 0, err


def fake_compare(config, *, repeats, seeds, systems, **kw):
    result = {"setup_s": 1.0, "run_s": 2.0, "sps": 1000.0, "solve_s": None,
              "final_return": 20.0, "load": None, "threads": 1}
    return [aggregate(s, [result], config, seeds) for s in systems], []


def test_a_full_disk_after_compare_measured_prints_the_table_in_one_line(
        tmp_path, capsys, monkeypatch):
    """Reproduction: compare measured every run, then its in-place writes hit a full disk:
    a traceback, and the measurements were lost."""
    out = tmp_path / "cmp"
    out.mkdir()
    (out / "compare.md").write_text("earlier\n")
    monkeypatch.setattr(cmp, "compare", fake_compare)

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    code, stdout, err = cli(capsys, "compare", "--config", CARTPOLE, "--systems", "jaxppo",
                            "--repeats", "1", "--out", str(out))
    monkeypatch.undo()
    assert code == 2
    one_line(err, "compare.md", "No space left on device", "free some disk space",
             "the earlier one is unchanged", "printed above")
    assert "| jaxppo, 1 seed |" in stdout  # what was measured is not lost
    assert (out / "compare.md").read_text() == "earlier\n"
    assert sorted(os.listdir(out)) == ["compare.md"]


def test_compare_writes_its_files_whole(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cmp, "compare", fake_compare)
    out = tmp_path / "cmp"
    code, _, err = cli(capsys, "compare", "--config", CARTPOLE, "--systems", "jaxppo",
                       "--repeats", "1", "--out", str(out))
    assert code == 0, err
    assert sorted(os.listdir(out)) == ["compare.csv", "compare.md", "compare.png", "config.json"]
    assert json.load(open(out / "config.json"))["env_id"] == "CartPole-v1"


def test_a_report_on_a_full_disk_is_one_line_with_the_fix(finished_run, tmp_path, capsys,
                                                          monkeypatch):
    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    code, _, err = cli(capsys, "report", finished_run, "--out", str(tmp_path / "rep"))
    monkeypatch.undo()
    assert code == 2
    one_line(err, "cannot write the report", "No space left on device", "free some disk space")
    assert not [n for n in os.listdir(tmp_path / "rep") if n.startswith(".tmp-")]


LIMITED = """import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG)
kind, limit = getattr(resource, sys.argv[1]), int(sys.argv[2])
resource.setrlimit(kind, (limit, resource.getrlimit(kind)[1]))
from jaxppo.cli import main
sys.exit(main(sys.argv[3:]))
"""


def limited_child(tmp_path, rlimit, limit, *argv):
    """`jaxppo *argv` in a child process under a resource limit: (exit status, stderr lines).
    A child that hangs is killed (SIGKILL) and fails the test."""
    script = tmp_path / "limited.py"
    script.write_text(LIMITED)
    proc = subprocess.run([sys.executable, str(script), rlimit, str(limit), *argv], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stderr.strip().splitlines()


def test_a_tensorboard_file_that_cannot_grow_ends_the_run_in_one_line(tmp_path):
    """Reproduction: once an event file could not grow, tensorboardX's writer thread died and
    the next chunk of >10 events waited forever on its queue (SIGTERM did not end it)."""
    # 500 updates in chunks of 20: the 64 KiB event file fills near update 140, while
    # metrics.csv (~50 KiB) and the checkpoint (~12 KiB) still fit.
    argv = ["train", "--config", CARTPOLE, "--set", "total_timesteps=32000", *TINY[2:],
            "--logdir", str(tmp_path), "--run-name", "r", "--no-progress", "--no-cache",
            "--checkpoint-every", "10"]
    code, err = limited_child(tmp_path, "RLIMIT_FSIZE", 65536, *argv)
    assert code == 1, err
    one_line(err, "File too large", "tfevents", "ulimit -f", "--resume")
    run = str(tmp_path / "r")
    assert 10 <= load_checkpoint(run).update < 500
    assert main(["train", "--resume", run, "--no-progress"]) == 0
    np.testing.assert_array_equal(read_metrics_csv(run)["update"][0], np.arange(1, 501))


def test_tensorboard_needs_no_file_descriptor_per_agent(tmp_path):
    """Reproduction: one tensorboardX writer per agent (a file and a pipe each) ran out of
    open files at a few hundred agents, and the run directory it left held empty tb/ folders.
    48 agents under a limit of 64: that writer needed 96 descriptors and more."""
    argv = ["train", "--config", CARTPOLE, *TINY, "--seeds", "48", "--logdir", str(tmp_path),
            "--run-name", "r", "--no-progress"]
    code, err = limited_child(tmp_path, "RLIMIT_NOFILE", 64, *argv)
    assert code == 0, err
    assert len(glob.glob(str(tmp_path / "r" / "tb" / "seed_*" / "events.out.tfevents.*"))) == 48


@pytest.mark.parametrize("err_no,fix", [
    (28, "free some disk space"), (24, "ulimit -n"), (30, "read-only"), (5, "check the disk")],
    ids=["ENOSPC", "EMFILE", "EROFS", "EIO"])
def test_a_failed_tensorboard_write_ends_the_run_keeping_the_checkpoint(
        tmp_path, capsys, monkeypatch, err_no, fix):
    from jaxppo.run.logs.tensorboard import EventFile

    calls = {"n": 0}
    original = EventFile.write

    def fail(self):
        calls["n"] += 1
        if calls["n"] >= 4:
            raise OSError(err_no, os.strerror(err_no), os.path.join(self.run_dir, "tb"))
        original(self)

    monkeypatch.setattr(EventFile, "write", fail)
    t0 = time.perf_counter()
    code, _, err = cli(capsys, "train", "--config", CARTPOLE, *TINY, "--logdir", str(tmp_path),
                       "--run-name", "r", "--no-progress", "--checkpoint-every", "1")
    assert code == 1
    one_line(err, os.strerror(err_no), fix, "newest checkpoint is kept", "--resume")
    assert time.perf_counter() - t0 < 120
    assert 0 < load_checkpoint(str(tmp_path / "r")).update < 24


def test_no_tensorboard_on_train_and_no_empty_folders_before_the_first_chunk(tmp_path, capsys):
    code, _, err = cli(capsys, "train", "--config", CARTPOLE, *TINY, "--logdir", str(tmp_path),
                       "--run-name", "r", "--no-progress", "--no-tensorboard")
    assert code == 0, err
    assert not os.path.exists(tmp_path / "r" / "tb")
    from jaxppo.run.events import RunInfo
    from jaxppo.run.logs.tensorboard import TensorBoardLogger

    logger = TensorBoardLogger()
    os.makedirs(tmp_path / "fresh")
    logger.on_start(RunInfo(PPOConfig(), 3, ["a", "b", "c"], str(tmp_path / "fresh"), 0, 0,
                            None, 1))
    logger.on_end(None)
    assert os.listdir(tmp_path / "fresh") == []  # nothing on disk until a chunk is written


@pytest.mark.unit
def test_a_stalled_writer_is_an_error_not_a_wait_without_end():
    import threading

    from jaxppo.run.logs.background import BackgroundWriter

    release = threading.Event()

    class Stuck(BackgroundWriter):
        stall_s = 0.5

        def _write(self, event):
            release.wait(30)  # a write that never returns (a hung file system)

    w = Stuck()
    w._start_writer()
    w.on_chunk("chunk")
    t0 = time.perf_counter()
    with pytest.raises(OSError, match="wrote nothing for"):
        w.flush()
    assert time.perf_counter() - t0 < 5
    with pytest.raises(OSError):
        w.on_end(None)
    release.set()

    class Slow(BackgroundWriter):  # idle for longer than stall_s, then a chunk: no stall
        stall_s = 0.3

        def _write(self, event):
            time.sleep(0.1)

    w = Slow()
    w._start_writer()
    time.sleep(0.5)
    w.on_chunk("chunk")
    w.flush()
    w.on_end(None)
