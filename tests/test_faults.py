"""Faults a run must survive without losing or corrupting what was already safe: kill -9 and
resume, SIGHUP, a second writer, edited or crafted files, symlinks, path escapes, full disks,
closed pipes, interrupts during compile, and numbers no machine can hold. Each gets one line
naming the problem (never a traceback) and leaves the run resumable."""

import glob
import json
import os
import signal
import subprocess
import sys
import time

import msgpack
import numpy as np
import pytest

from jaxppo import Experiment, PPOConfig, load_checkpoint
from jaxppo._xla import setup_compilation_cache
from jaxppo.cli import main
from jaxppo.driver import chunk_lengths, pick_chunk
from jaxppo.files import RunLock
from jaxppo.logger import CsvLogger, read_metrics_csv

ROOT = os.path.dirname(os.path.dirname(__file__))
CARTPOLE = os.path.join(ROOT, "configs", "cartpole.yaml")
TINY = ["--set", "total_timesteps=1536", "--set", "num_envs=4", "--set", "num_steps=16",
        "--set", "num_minibatches=2", "--set", "update_epochs=2", "--set", "hidden_sizes=[16, 16]"]
# 2400 updates of 64 steps: long enough (several seconds) to be killed in the middle.
LONG = ["--set", "total_timesteps=153600", *TINY[2:]]
LONG_UPDATES = 2400


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("JAXPPO_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "xla-cache"))
    setup_compilation_cache()


def cli(capsys, *argv):
    """(exit status, stdout, stderr lines) of `jaxppo *argv` in this process."""
    capsys.readouterr()
    try:
        code = main(list(argv))
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err.strip().splitlines()


def one_line(err, *words):
    assert len(err) == 1 and "Traceback" not in err[0], err
    for w in words:
        assert w in err[0], (w, err[0])


def child(*argv, **kw):
    return subprocess.Popen([sys.executable, "-m", "jaxppo.cli", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"}, **kw)


@pytest.fixture(scope="module")
def long_whole(tmp_path_factory):
    """The uninterrupted LONG run every killed-and-resumed one must equal."""
    logdir = str(tmp_path_factory.mktemp("long"))
    setup_compilation_cache()
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
    assert read_metrics_csv(run)["update"].max() > saved  # rows past the checkpoint, as a kill leaves
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
    from jaxppo.checkpoint import save_checkpoint

    run = str(tmp_path / "r")
    stale = os.path.join(run, "checkpoint", ".tmp-killed.msgpack")
    open(stale, "wb").write(b"half a checkpoint")
    ckpt = load_checkpoint(run)
    save_checkpoint(run, ckpt.runner_state, ckpt.config, ckpt.update, ckpt.num_runs,
                    extra=ckpt.extra)
    assert not glob.glob(os.path.join(run, "checkpoint", ".tmp-*"))
    assert load_checkpoint(run).update == ckpt.update


@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory):
    """A run stopped at update 12 of 24 (resumable), to damage in copies."""
    logdir = tmp_path_factory.mktemp("stopped")
    setup_compilation_cache()
    config = PPOConfig(total_timesteps=1536, num_envs=4, num_steps=16, num_minibatches=2,
                       update_epochs=2, hidden_sizes=(16, 16))
    Experiment(config, logdir=str(logdir), run_name="r", progress=False, chunk_updates=6,
               callbacks=[lambda e: e.update < 12]).run()
    return os.path.join(str(logdir), "r")


def copy_of(run, tmp_path):
    import shutil

    return shutil.copytree(run, str(tmp_path / "copy"))


def edit_header(run, **changes):
    path = os.path.join(run, "checkpoint", "checkpoint.msgpack")
    outer = msgpack.unpackb(open(path, "rb").read(), raw=False)
    for k, v in changes.items():
        if k == "header":
            outer["header"] = v
        elif isinstance(v, dict):
            outer["header"][k].update(v)
        else:
            outer["header"][k] = v
    open(path, "wb").write(msgpack.packb(outer, use_bin_type=True))


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
    assert main(["train", "--resume", run, "--no-progress"]) == 0


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


def test_ctrl_c_during_compile_leaves_no_orphan(tmp_path):
    proc = child("train", "--config", CARTPOLE, *LONG, "--logdir", str(tmp_path), "--run-name",
                 "r", "--no-cache")
    for line in proc.stdout:
        if line.startswith("compiling"):
            break
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    run = str(tmp_path / "r")
    # Either the signal came during compile (nothing ran: no directory is left) or just after
    # (a clean stop with a checkpoint that resumes).
    assert not os.path.exists(run) or load_checkpoint(run).update > 0


def test_a_second_sigterm_stops_at_once_with_one_line(tmp_path):
    proc = child("train", "--config", CARTPOLE, *LONG, "--logdir", str(tmp_path), "--run-name",
                 "r", "--checkpoint-every", "1")
    for line in proc.stdout:
        if line.startswith("["):
            break
    proc.send_signal(signal.SIGTERM)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    if proc.returncode == 0:
        pytest.skip("the run finished before the signals")
    assert proc.returncode in (128 + signal.SIGTERM,), err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert load_checkpoint(str(tmp_path / "r")).update > 0


def test_a_closed_stdout_does_not_kill_the_run(tmp_path):
    proc = child("train", "--config", CARTPOLE, *TINY, "--logdir", str(tmp_path), "--run-name",
                 "r")
    proc.stdout.readline()
    proc.stdout.close()  # `| head -1`
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert json.load(open(tmp_path / "r" / "summary.json"))["finished"]


def test_ctrl_c_during_a_sweep_keeps_what_ran_and_resumes(tmp_path, capsys, monkeypatch):
    original = CsvLogger.on_chunk

    def log_and_interrupt(self, event):
        original(self, event)
        if event.update == 6:
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(CsvLogger, "on_chunk", log_and_interrupt)
    code, _, err = cli(capsys, "sweep", "--config", CARTPOLE, *TINY, "--grid", "lr=1e-3,1e-4",
                       "--logdir", str(tmp_path), "--run-name", "s", "--no-progress")
    assert code == 128 + signal.SIGINT
    one_line(err, "jaxppo sweep --resume")
    run = str(tmp_path / "s")
    assert 0 < load_checkpoint(run).update < 24
    assert not os.path.exists(os.path.join(run, "sweep.csv"))  # no ranking of a partial run
    monkeypatch.setattr(CsvLogger, "on_chunk", original)
    code, out, err = cli(capsys, "sweep", "--resume", run, "--no-progress")
    assert code == 0, err
    assert "rank" in out and os.path.isfile(os.path.join(run, "sweep.csv"))
    assert read_metrics_csv(run)["update"].shape == (2, 24)


@pytest.mark.parametrize("argv,words", [
    (["train", "--config", CARTPOLE, "--seed", "-1"], ["--seed -1"]),
    (["train", "--config", CARTPOLE, "--seed", str(2**40)], ["--seed"]),
    (["compare", "--config", CARTPOLE, "--out", "/proc/no/such/dir", "--steps", "512"],
     ["--out"]),
], ids=["seed-negative", "seed-huge", "compare-out"])
def test_bad_numbers_and_paths_are_one_line(tmp_path, capsys, argv, words):
    t0 = time.perf_counter()
    code, _, err = cli(capsys, *argv, *(["--logdir", str(tmp_path)] if argv[0] == "train" else []))
    assert code == 2
    one_line(err, *words)
    assert time.perf_counter() - t0 < 30  # refused before anything runs


def test_eval_of_more_episodes_than_memory_is_refused(stopped_run, capsys, tmp_path):
    code, _, err = cli(capsys, "eval", stopped_run, "--episodes", str(10**12))
    assert code == 2
    one_line(err, "lower --episodes")
    code, _, err = cli(capsys, "eval", stopped_run, "--gif", str(tmp_path / "no" / "x.gif"))
    assert code == 2
    one_line(err, "cannot write GIF", "does not exist")


def test_impossible_hparams_given_to_train_are_refused():
    import jax

    from jaxppo import ConfigError, Hparams, make_train

    config = PPOConfig(total_timesteps=1536, num_envs=4, num_steps=16, num_minibatches=2,
                       update_epochs=2, hidden_sizes=(16, 16))
    bad = Hparams.from_config(config)._replace(lr=-1.0)
    with pytest.raises(ConfigError, match="'lr'"):
        make_train(config)(jax.random.key(0), bad)
    with pytest.raises(ConfigError, match="'gamma'"):
        make_train(config).init(jax.random.key(0), bad._replace(lr=1e-3, gamma=1.5))


def test_chunks_of_a_prime_number_of_updates_equal_one_scan():
    config = PPOConfig(total_timesteps=64 * 7, num_envs=4, num_steps=16, num_minibatches=2,
                       update_epochs=1, hidden_sizes=(8,))
    assert pick_chunk(7) == 1
    events = []
    result = Experiment(config, logdir=None, progress=False, chunk_updates=3,
                        callbacks=[events.append]).run()
    assert [e.update for e in events] == [3, 6, 7]
    whole = Experiment(config, logdir=None, progress=False, chunk_updates=7).run()
    np.testing.assert_array_equal(result.metrics["policy_loss"], whole.metrics["policy_loss"])


def test_an_older_config_yaml_and_a_cut_csv_row_still_resume(stopped_run, tmp_path, capsys):
    """A config.yaml written before a key existed (defaults fill it in) is not an edit; a row a
    kill cut short and rows past the checkpoint are dropped, the rest kept with today's columns."""
    run = copy_of(stopped_run, tmp_path)
    path = os.path.join(run, "config.yaml")
    lines = open(path).read().splitlines()
    open(path, "w").write("\n".join(line for line in lines if not line.startswith(
        "matmul_precision")) + "\n")
    csv_path = os.path.join(run, "metrics.csv")
    text = open(csv_path).read()
    open(csv_path, "w").write(text + "13,0,832,1.0,12.5,2")  # half a row, past the checkpoint
    code, _, err = cli(capsys, "train", "--resume", run, "--no-progress")
    assert code == 0, err
    m = read_metrics_csv(run)
    assert m["update"].shape == (1, 24)
    np.testing.assert_array_equal(m["update"][0], np.arange(1, 25))
