"""Faults a run must survive without losing or corrupting what was already safe: kill -9 and
resume, SIGHUP, a second writer, edited or crafted files, symlinks, path escapes, full disks,
closed pipes, interrupts during compile, and numbers no machine can hold. Each gets one line
naming the problem (never a traceback) and leaves the run resumable."""

import glob
import hashlib
import json
import os
import signal
import subprocess
import sys
import time

import msgpack
import numpy as np
import pytest
from conftest import ROOT, compile_exactly, tiny_stopped_run

import jaxppo
from jaxppo import Experiment, PPOConfig, load_checkpoint
from jaxppo._xla import ZSTD_MAGIC, _jax_cache, _jax_lru, setup_compilation_cache, take_damaged_cache_entries
from jaxppo.cli import main
from jaxppo.compare.fit import holds_jax
from jaxppo.run.driver import chunk_lengths, pick_chunk
from jaxppo.run.logs.csv_logger import CsvLogger
from jaxppo.rundir.csv_log import check_metrics_log, gaps_summary, kept_rows
from jaxppo.rundir.files import RunLock
from jaxppo.rundir.metrics_csv import CSV_HEADER, read_metrics_csv

pytestmark = pytest.mark.usefixtures("compile_cache")
CARTPOLE = os.path.join(ROOT, "configs", "cartpole.yaml")
TINY = ["--set", "total_timesteps=1536", "--set", "num_envs=4", "--set", "num_steps=16",
        "--set", "num_minibatches=2", "--set", "update_epochs=2", "--set", "hidden_sizes=[16, 16]"]
# 2400 updates of 64 steps: long enough (several seconds) to be killed in the middle.
LONG = ["--set", "total_timesteps=153600", *TINY[2:]]
LONG_UPDATES = 2400


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
    # resume to the uninterrupted logs (tests/integration/test_faults.py's damaged-log tests cut back too).
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


def test_a_cut_short_compile_cache_entry_is_removed_and_written_again(tmp_path):
    """JAX writes a compile-cache entry in place and never rewrites a key whose file exists:
    an entry cut short (kill -9 while it was written, a full disk) failed to read in every
    later run, with JAX's warning per program and a compile each time. Now it is removed and
    compiled again, in one note, and the entries are whole for the next run."""
    cache = tmp_path / "cache"
    env = {**os.environ, "JAXPPO_CACHE_DIR": str(cache)}

    def train(name):
        p = subprocess.run([sys.executable, "-m", "jaxppo.cli", "train", "--config", CARTPOLE,
                            *TINY, "--logdir", str(tmp_path), "--run-name", name,
                            "--no-progress"], capture_output=True, text=True, cwd=ROOT, env=env,
                           timeout=600)
        assert p.returncode == 0, p.stderr[-2000:]
        return p.stderr

    assert "compile cache" not in train("first")
    entries = sorted(cache.glob("*-cache"))
    assert entries
    for f in entries:
        f.write_bytes(f.read_bytes()[:f.stat().st_size // 2])
    err = train("second")
    assert "Error reading persistent compilation cache" not in err, err[-2000:]
    assert [line for line in err.splitlines() if "compile cache" in line] == [
        f"jaxppo train: note: {len(entries)} entries of the compile cache {cache} could not be "
        "read (cut short by a kill or a full disk, or still being written by another process): "
        "removed, and compiled again"]
    for f in entries:
        _jax_cache.decompress_executable(f.read_bytes())  # whole again: raises on a cut stream


def test_only_a_cut_entry_of_this_jaxs_codec_is_removed_from_the_compile_cache(tmp_path):
    """An entry of another codec is another JAX's in a shared cache (on Python 3.14 JAX
    compresses with zstd under a key that says zlib) and is left to JAX; one of this JAX's
    codec cut short, or empty, is removed and reads as a miss."""
    setup_compilation_cache()
    cache = _jax_lru.LRUCache(str(tmp_path), max_size=-1)
    whole = _jax_cache.compress_executable(b"an executable" * 100)
    zstd = whole[:4] == ZSTD_MAGIC
    other = (b"\x78\x9c" if zstd else ZSTD_MAGIC) + b"\x01" * 40  # the other codec's header
    entries = {"whole": whole, "cut": whole[:len(whole) // 2], "empty": b"", "other": other}
    for key, value in entries.items():
        (tmp_path / f"{key}-cache").write_bytes(value)
    # the digest jaxppo writes beside its own entries (an entry without one is never run)
    (tmp_path / "whole-cache.jaxppo-sha256").write_text(hashlib.sha256(whole).hexdigest())
    take_damaged_cache_entries()
    got = {key: cache.get(key) for key in entries}
    assert got == {"whole": whole, "cut": None, "empty": None, "other": other}
    assert sorted(os.listdir(tmp_path)) == ["other-cache", "whole-cache",
                                            "whole-cache.jaxppo-sha256"]
    assert sorted(map(os.path.basename, take_damaged_cache_entries())) == ["cut-cache",
                                                                          "empty-cache"]


@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory):
    """A run stopped at update 12 of 24 (resumable), to damage in copies."""
    return tiny_stopped_run(tmp_path_factory.mktemp("stopped"), 12, total_timesteps=1536)


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


def test_ctrl_c_during_compile_leaves_no_orphan(tmp_path):
    proc = child("train", "--config", CARTPOLE, *LONG, "--logdir", str(tmp_path), "--run-name",
                 "r", "--no-cache")
    for line in proc.stdout:
        if line.startswith("compiling"):
            break
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    # its one line; while XLA compiles, first the note that it stops when the compile ends
    lines = [x for x in err.strip().splitlines() if "taken while XLA's compile runs" not in x]
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
    cut = copy_of(run, tmp_path)  # its log cut after update 2 (two agents: 2 rows an update)
    lines = open(os.path.join(cut, "metrics.csv"), "rb").read().split(b"\r\n")
    open(os.path.join(cut, "metrics.csv"), "wb").write(b"\r\n".join(lines[:5]) + b"\r\n")
    code, _, err = cli(capsys, "sweep", "--resume", cut, "--no-progress")
    assert code == 2
    one_line(err, "covers updates 1-2 of the checkpoint's", "--repair-log")
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


@pytest.mark.exact
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


def snapshot(run):
    """Every file of a run directory, as bytes (the lock file aside)."""
    out = {}
    for folder, _, files in os.walk(run):
        for name in files:
            path = os.path.join(folder, name)
            if name != ".lock":
                out[os.path.relpath(path, run)] = open(path, "rb").read()
    return out


def damage_log(run, how):
    """metrics.csv of the run stopped at update 12 (one seed), damaged as a hard stop or an
    editor leaves it; returns the updates 1..12 still whole in it."""
    path = os.path.join(run, "metrics.csv")
    data = open(path, "rb").read()
    lines = data.split(b"\r\n")
    if how == "cut":  # a file cut mid-way (header and updates 1-5, then half a row)
        open(path, "wb").write(b"\r\n".join(lines[:6]) + b"\r\n" + lines[6][:10])
        return list(range(1, 6))
    if how == "header":  # the header replaced
        open(path, "wb").write(b"a,b,c\r\n" + b"\r\n".join(lines[1:]))
        return []
    lines[3] = lines[3][:12] + b"\xff\xfe" + lines[3][12:]  # update 3: bytes that are not text
    open(path, "wb").write(b"\r\n".join(lines))
    return [u for u in range(1, 13) if u != 3]


@pytest.mark.parametrize("how", ["cut", "header", "bytes"])
def test_a_damaged_metrics_log_is_refused_then_repaired(stopped_run, tmp_path, capsys, how):
    run = copy_of(stopped_run, tmp_path)
    kept = damage_log(run, how)
    missing = [u for u in range(1, 13) if u not in kept]
    damaged = open(os.path.join(run, "metrics.csv"), "rb").read()
    before = snapshot(run)
    code, _, err = cli(capsys, "train", "--resume", run, "--no-progress")
    assert code == 2
    one_line(err, "metrics.csv", f"of the checkpoint's 12 ({len(missing)} missing",
             "--repair-log", "move the file away")
    if how == "cut":
        one_line(err, "covers updates 1-5 of the checkpoint's 12 (7 missing: 6-12)")
    if how == "bytes":
        one_line(err, "not UTF-8", "missing: 3)")
    assert snapshot(run) == before  # nothing written
    with pytest.raises(jaxppo.UsageError, match="metrics.csv"):
        Experiment.from_checkpoint(run)
    if how != "cut":
        with pytest.raises(jaxppo.UsageError, match="metrics.csv") as e:
            read_metrics_csv(run)  # the readers too: one line, no UnicodeDecodeError
        assert "\n" not in str(e.value)

    code, _, err = cli(capsys, "train", "--resume", run, "--no-progress", "--repair-log")
    assert code == 0, err
    m = read_metrics_csv(run)
    np.testing.assert_array_equal(m["update"][0], kept + list(range(13, 25)))  # none made up
    gaps = [[u, u] for u in missing] if how == "bytes" else [[missing[0], 12]]
    assert json.load(open(os.path.join(run, "summary.json")))["metrics_missing_updates"] == gaps
    assert load_checkpoint(run).extra["log_gaps"] == gaps  # a later resume knows them
    assert open(os.path.join(run, "metrics.csv.damaged"), "rb").read() == damaged  # kept
    if how == "cut":  # killed before summary.json: the rebuilt one still names the gap
        os.remove(os.path.join(run, "summary.json"))
        assert cli(capsys, "train", "--resume", run, "--no-progress")[0] == 0
        assert json.load(open(os.path.join(run, "summary.json")))["metrics_missing_updates"] == gaps


def log_lines(run):
    return open(os.path.join(run, "metrics.csv"), "rb").read().split(b"\r\n")


def test_copied_and_shuffled_rows_are_not_damage(stopped_run, tmp_path, capsys):
    """Identical copies of rows (updates 8-12 twice) lose nothing and rows out of order are
    still every row: the resume collapses and sorts them, with no refusal and no gap."""
    run = copy_of(stopped_run, tmp_path)
    lines = log_lines(run)
    body = [line for line in lines[1:] if line]
    open(os.path.join(run, "metrics.csv"), "wb").write(
        b"\r\n".join([lines[0], *body[6::-1], *body[7:], *body[7:]]) + b"\r\n")
    code, _, err = cli(capsys, "train", "--resume", run, "--no-progress")
    assert code == 0, err
    rows = [line.split(b",") for line in log_lines(run)[1:] if line]
    assert [int(r[0]) for r in rows] == list(range(1, 25))  # each once, in order
    assert "metrics_missing_updates" not in json.load(open(os.path.join(run, "summary.json")))
    assert not glob.glob(os.path.join(run, "metrics.csv.damaged*"))


def test_differing_copies_and_an_extra_column_are_repaired_keeping_every_row(
        stopped_run, tmp_path, capsys):
    """Two different rows for one update and run are refused (which one is true?); the repair
    keeps the first and records nothing as missing. A column jaxppo does not write goes, with
    the file kept as it was."""
    run = copy_of(stopped_run, tmp_path)
    lines = log_lines(run)
    body = [line for line in lines[1:] if line]
    other = body[3].split(b",")
    other[3] = b"999.0"  # update 4's wall_s, edited
    lines = [lines[0] + b",mine", *(line + b",1" for line in body), b",".join(other) + b",1"]
    open(os.path.join(run, "metrics.csv"), "wb").write(b"\r\n".join(lines) + b"\r\n")
    damaged, before = open(os.path.join(run, "metrics.csv"), "rb").read(), snapshot(run)
    code, _, err = cli(capsys, "train", "--resume", run, "--no-progress")
    assert code == 2
    one_line(err, "two different rows for the same update and run (update, run: 4 0)",
             "--repair-log")
    assert "missing" not in err[0].split("--repair-log")[0]
    assert snapshot(run) == before
    code, _, err = cli(capsys, "train", "--resume", run, "--no-progress", "--repair-log")
    assert code == 0, err
    note = [line for line in err if line.startswith("note:")]
    assert len(note) == 1 and "kept the first" in note[0] and "mine" in note[0], err
    assert open(os.path.join(run, "metrics.csv.damaged"), "rb").read() == damaged
    rows = log_lines(run)
    assert rows[0].split(b",") == [k.encode() for k in CSV_HEADER]
    assert rows[4] == body[3]  # the first of the two
    assert [int(r.split(b",")[0]) for r in rows[1:] if r] == list(range(1, 25))
    assert "metrics_missing_updates" not in json.load(open(os.path.join(run, "summary.json")))


def write_log(folder, rows, header=None):
    """A metrics.csv of `rows` (update, run) with made-up numbers; returns its path."""
    header = header or CSV_HEADER
    path = os.path.join(str(folder), "metrics.csv")
    with open(path, "w") as f:
        f.write(",".join(header) + "\n")
        for u, r in rows:
            f.write(",".join([str(u), str(r), str(64 * u), "1.0",
                              *(["0.5"] * (len(header) - 4))]) + "\n")
    return path


def test_a_repair_keeps_every_good_row_of_a_sweep_and_records_the_run_that_lacks_one(tmp_path):
    """Two runs, updates 1-6: run 1's row for update 5 deleted, a row for a run 7 that does not
    exist added at update 2. Only that row goes; run 0's update 5 and both of update 2 stay,
    and the record names run 1 at update 5."""
    rows = [(u, r) for u in range(1, 7) for r in range(2) if (u, r) != (5, 1)] + [(2, 7)]
    path = write_log(tmp_path, rows)
    with pytest.raises(jaxppo.UsageError) as e:
        check_metrics_log(str(tmp_path), 6, 2)
    assert "(1 missing: 5; only some runs' rows: run 1 at 5)" in str(e.value)
    assert "covers updates 1-4, 6 of the checkpoint's 6" in str(e.value)
    gaps, drops, _ = check_metrics_log(str(tmp_path), 6, 2, repair=True)
    assert gaps == [(5, 5, 1)]
    assert any("1 row(s) for runs that do not exist" in d for d in drops), drops
    kept = [tuple(int(x) for x in line.split(",")[:2])
            for line in kept_rows(path, 6, 2).splitlines()[1:]]
    assert kept == [(u, r) for u in range(1, 7) for r in range(2) if (u, r) != (5, 1)]
    assert gaps_summary(gaps, 2) == {"metrics_missing_updates": [[5, 5]],
                                     "metrics_missing_by_run": {"1": [[5, 5]]}}
    write_log(tmp_path, kept)  # the repaired file: a later resume knows its gap
    assert check_metrics_log(str(tmp_path), 6, 2, gaps) == ([(5, 5, 1)], [], [])
    # an older checkpoint's record (whole updates) still reads as every run's rows
    assert gaps_summary([[3, 4]], 2)["metrics_missing_by_run"] == {"0": [[3, 4]], "1": [[3, 4]]}
    # a row of no run, or a column jaxppo does not write, alone is no refusal: dropped, noted
    write_log(tmp_path, [*kept, (5, 1), (0, 0)], header=[*CSV_HEADER, "mine"])
    gaps, drops, _ = check_metrics_log(str(tmp_path), 6, 2)
    assert gaps == [] and len(drops) == 2 and "mine" in drops[1], drops
    # identical copies (a NaN cell equal to a NaN cell) are no damage at all
    path = write_log(tmp_path, [(u, r) for u in range(1, 7) for r in range(2)] * 2)
    text = open(path).read().replace("0.5", "nan")
    open(path, "w").write(text)
    assert check_metrics_log(str(tmp_path), 6, 2) == ([], [], [])


def test_a_missing_metrics_log_starts_a_fresh_one_noting_the_gap(stopped_run, tmp_path, capsys):
    run = copy_of(stopped_run, tmp_path)
    os.remove(os.path.join(run, "metrics.csv"))
    exp = Experiment.from_checkpoint(run, progress=False)
    assert "is missing" in capsys.readouterr().err
    result = exp.run()
    assert result.summary["metrics_missing_updates"] == [[1, 12]]
    np.testing.assert_array_equal(read_metrics_csv(run)["update"][0], np.arange(13, 25))


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


def test_a_numpy_false_from_a_callback_stops_the_run():
    config = PPOConfig(total_timesteps=1536, num_envs=4, num_steps=16, num_minibatches=2,
                       update_epochs=2, hidden_sizes=(16, 16))
    for said in (np.False_, 0):
        result = Experiment(config, logdir=None, progress=False, chunk_updates=6,
                            callbacks=[lambda e, said=said: said]).run()
        assert result.status == "stopped" and result.update == 6, said
    result = Experiment(config, logdir=None, progress=False, chunk_updates=6,
                        callbacks=[lambda e: None]).run()
    assert result.status == "finished"


@pytest.fixture(scope="module")
def finished_sweep(tmp_path_factory):
    """A two-setting sweep run to its end with --checkpoint-every 6; the updates it saved at."""
    from jaxppo.run.callbacks import Checkpointer

    logdir = str(tmp_path_factory.mktemp("sweep"))
    setup_compilation_cache()
    saves, original = [], Checkpointer.save

    def record(self, good):
        saves.append(good.update)
        original(self, good)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Checkpointer, "save", record)
        assert main(["sweep", "--config", CARTPOLE, *TINY, "--grid", "lr=1e-3,1e-4", "--logdir",
                     logdir, "--run-name", "s", "--no-progress", "--checkpoint-every", "6"]) == 0
    return os.path.join(logdir, "s"), saves


def test_a_sweep_checkpoints_every_n_updates(finished_sweep):
    _, saves = finished_sweep
    assert saves == [6, 12, 18, 24]


def test_a_finished_sweep_rebuilds_its_missing_table(finished_sweep, tmp_path, capsys):
    run = copy_of(finished_sweep[0], tmp_path)
    table = open(os.path.join(run, "sweep.csv")).read()
    summary = json.load(open(os.path.join(run, "summary.json")))
    for name in ("sweep.csv", "sweep.png", "summary.json", "curve.png"):
        os.remove(os.path.join(run, name))
    code, out, err = cli(capsys, "sweep", "--resume", run, "--no-progress")
    assert code == 0, err
    assert "sweep.csv" in out and "nothing was trained" in out and "rank" in out
    assert open(os.path.join(run, "sweep.csv")).read() == table  # identical
    rebuilt = json.load(open(os.path.join(run, "summary.json")))
    for k in ("ranked", "final_return", "episodes_per_run", "solved", "env_steps", "sps",
              "status"):
        assert rebuilt[k] == summary[k], k
    assert rebuilt["wall_s"] == pytest.approx(summary["wall_s"], abs=2.0)
    assert rebuilt["compile_s"] is None  # not known from a checkpoint: null, not 0
    assert all(os.path.isfile(os.path.join(run, n)) for n in ("sweep.png", "curve.png"))
    code, _, err = cli(capsys, "sweep", "--resume", run)  # nothing missing: refused as before
    assert code == 2
    one_line(err, "is finished")


def test_a_damaged_summary_or_sweep_table_is_rebuilt_and_kept_aside(finished_sweep, tmp_path,
                                                                    capsys):
    """An unreadable summary.json or sweep.csv is treated as a missing one: rebuilt from the
    checkpoint, the damaged file kept as `.damaged`, a note saying so."""
    run = copy_of(finished_sweep[0], tmp_path)
    table = open(os.path.join(run, "sweep.csv")).read()
    summary = json.load(open(os.path.join(run, "summary.json")))
    for name, garbage, argv in (("summary.json", '{"env_id": "Cart', ["train"]),
                                ("summary.json", '["not", "a", "summary"]', ["sweep"]),
                                ("summary.json", '{"env_id": "CartPole-v1"}', ["sweep"]),
                                ("sweep.csv", "rank,lr\n1,", ["sweep"])):
        path = os.path.join(run, name)
        open(path, "w").write(garbage)
        code, out, err = cli(capsys, *argv, "--resume", run, "--no-progress")
        assert code == 0, err
        assert f"rebuilt {name}" in out and "nothing was trained" in out, out
        one_line([e for e in err if e.startswith("note:")], f"'{path}' was damaged",
                 f"kept as '{path}.damaged", "rebuilt")
        assert open(path + ".damaged").read() == garbage
        os.remove(path + ".damaged")
    assert open(os.path.join(run, "sweep.csv")).read() == table
    assert json.load(open(os.path.join(run, "summary.json")))["ranked"] == summary["ranked"]
    code, _, err = cli(capsys, "sweep", "--resume", run)  # whole again: refused as before
    assert code == 2
    one_line(err, "is finished")


# -- a run-directory writer that fails (issue #36, class 1) -----------------------------------

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
    open files at a few hundred agents, and the run directory it left held empty tb/ folders."""
    argv = ["train", "--config", CARTPOLE, *TINY, "--seeds", "300", "--logdir", str(tmp_path),
            "--run-name", "r", "--no-progress"]
    code, err = limited_child(tmp_path, "RLIMIT_NOFILE", 64, *argv)
    assert code == 0, err
    assert len(glob.glob(str(tmp_path / "r" / "tb" / "seed_*" / "events.out.tfevents.*"))) == 300


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


# ---------------------------------------------------------------------------------------------
# A stop signal at any moment: import, compile, between and inside chunks
def test_a_signal_while_compiling_lets_xla_finish_then_stops_before_training(tmp_path,
                                                                             monkeypatch,
                                                                             tiny_config):
    """JAX raises a Ctrl-C's KeyboardInterrupt inside XLA's compile, which then compiles on in
    a thread of its own (the process crashed at exit: LLVM ERROR, free(): corrupted, -6/-11)
    or, now and then, swallows it (the run trained to the end). The run holds the signal: the
    compile ends, then the run stops before training, leaving nothing behind."""
    from jaxppo.run.driver import Driver, StopNow

    real, compiled = Driver.compile, []

    def compile_with_a_signal(self, *a, **kw):
        os.kill(os.getpid(), signal.SIGINT)
        real(self, *a, **kw)
        compiled.append(True)

    monkeypatch.setattr(Driver, "compile", compile_with_a_signal)
    with pytest.raises(StopNow) as e:
        Experiment(tiny_config, logdir=str(tmp_path), run_name="r", progress=False).run()
    assert compiled and (e.value.signum, e.value.when) == (signal.SIGINT, "while compiling")
    assert os.listdir(tmp_path) == []  # nothing ran: no run directory is left
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back


def test_a_signal_while_a_chunk_runs_dispatches_no_further_chunk(tmp_path, monkeypatch,
                                                                 tiny_config):
    """A stop request is read before each dispatch: a signal while chunk 1 computes stops
    the run after chunk 1, and chunk 2 is never started."""
    from jaxppo.run.driver import Driver

    real, dispatched = Driver._dispatch, []

    def dispatch(self, *a):
        out = real(self, *a)
        dispatched.append(a[-1])
        if len(dispatched) == 1:  # as if Ctrl-C came while this chunk computes
            os.kill(os.getpid(), signal.SIGTERM)
        return out

    monkeypatch.setattr(Driver, "_dispatch", dispatch)
    result = Experiment(tiny_config, logdir=str(tmp_path), run_name="r", progress=False,
                        chunk_updates=1).run()
    assert result.status == "stopped" and result.stop_signal == signal.SIGTERM
    assert result.update == 1 and dispatched == [0]
    assert load_checkpoint(str(tmp_path / "r")).update == 1


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="reads /proc/PID/maps")
def test_ctrl_c_while_jaxppo_imports_is_one_line(tmp_path):
    proc = child("train", "--config", CARTPOLE, *TINY, "--logdir", str(tmp_path))
    t0 = time.time()
    while not holds_jax(proc.pid):  # importing JAX: jaxppo's import is under way
        assert proc.poll() is None and time.time() - t0 < 120, proc.communicate()
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    one_line(err.strip().splitlines(), "interrupted; nothing was run")
    assert os.listdir(tmp_path) == []


# (the stdout line it follows, seconds after it, signal)
MOMENTS = [("jaxppo:", 0.0, signal.SIGINT), ("compiling", 0.0, signal.SIGINT),
           ("compiling", 0.4, signal.SIGTERM), ("compiling", 1.5, signal.SIGINT),
           ("[", 0.0, signal.SIGINT), ("[", 0.3, signal.SIGHUP)]


def test_a_signal_at_any_moment_stops_the_run_with_one_line(tmp_path):
    """Signals at several moments of a real run (starting, compiling, training, a checkpoint
    being written: every chunk saves one): each stops it with one line and exit 128 + N,
    leaving no run directory (nothing ran) or one whose checkpoint resumes; never a
    traceback, a crash at exit, or a run that trains on to the end."""
    for i, (anchor, delay, sig) in enumerate(MOMENTS):
        proc = child("train", "--config", CARTPOLE, *LONG, "--seeds", "2", "--logdir",
                     str(tmp_path), "--run-name", f"r{i}", "--no-cache", "--checkpoint-every", "1")
        for line in proc.stdout:
            if line.startswith(anchor):
                break
        time.sleep(delay)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=600)
        moment = f"{sig.name} {delay} s after {anchor!r}"
        assert proc.returncode == 128 + sig, (moment, proc.returncode, err)
        # its one line (while XLA compiles, after the note that it stops when the compile ends)
        one_line([x for x in err.strip().splitlines() if "taken while XLA's compile runs" not in x],
                 sig.name)
        run = tmp_path / f"r{i}"
        if run.exists():  # it trained: stopped early, resumable
            assert load_checkpoint(str(run)).update < LONG_UPDATES, moment
            assert json.loads((run / "summary.json").read_text())["status"] == "stopped"
        else:
            assert "nothing" in err, (moment, err)
