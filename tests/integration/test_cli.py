"""CLI smoke runs, the run directory contract, live progress, resume and bad checkpoints.

Most tests read one of two runs trained once for the module (`two_seeds`, `one_seed`); a test
that writes into a run (eval writes eval.json) works on its own copy."""

import contextlib
import csv
import glob
import io
import json
import os
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import pytest
from conftest import ROOT, compile_exactly
from faults_setup import copy_of

from jaxppo import load_checkpoint
from jaxppo.cli import main
from jaxppo.cli.common import final_return_text
from jaxppo.cli.eval import eval_return_text
from jaxppo.policy import EvalResult, evaluate
from jaxppo.rundir.metrics_csv import read_metrics_csv

CARTPOLE = os.path.join(ROOT, "configs", "cartpole.yaml")
# 4 envs x 16 steps, 24 updates: a few seconds.
TINY = ["--set", "total_timesteps=1536", "--set", "num_envs=4", "--set", "num_steps=16",
        "--set", "num_minibatches=2", "--set", "update_epochs=2", "--set", "hidden_sizes=[16, 16]"]


def train(tmp_path, *extra, name="run"):
    code = main(["train", "--config", CARTPOLE, *TINY, "--logdir", str(tmp_path),
                 "--run-name", name, "--no-progress", *extra])
    return code, os.path.join(str(tmp_path), name)


def _train_once(tmp, *extra, exact=False):
    """`train` in a module fixture: (run dir, what it printed)."""
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(out):
        if exact:
            compile_exactly(mp)
        code, run = train(tmp, *extra)
    assert code == 0
    return run, out.getvalue()


@pytest.fixture(scope="module")
def two_seeds(tmp_path_factory):
    """A 2-seed run, compiled as `test_resume_after_sigint_equals_uninterrupted` (exact)
    compares against it: (run dir, what the CLI printed). Never written to."""
    return _train_once(tmp_path_factory.mktemp("two"), "--seeds", "2", exact=True)


@pytest.fixture(scope="module")
def one_seed(tmp_path_factory):
    """A 1-seed run (run dir): a test that evaluates it (eval writes eval.json) copies it."""
    return _train_once(tmp_path_factory.mktemp("one"))[0]


def test_train_writes_the_run_directory(two_seeds):
    run, out = two_seeds
    assert "final return:" in out
    for f in ("config.yaml", "metrics.csv", "curve.png", "summary.json",
              "checkpoint/checkpoint.msgpack"):
        assert os.path.isfile(os.path.join(run, f)), f
    summary = json.load(open(os.path.join(run, "summary.json")))
    assert len(summary["final_return"]) == 2
    for k in ("wall_s", "compile_s", "sps", "env_steps", "solved"):
        assert k in summary
    assert summary["env_steps"] == 1536 and summary["sps"] > 0
    m = read_metrics_csv(run)
    assert m["episodic_return"].shape == (2, 24)
    # the resolved config round-trips
    from jaxppo import load_config

    assert load_config(os.path.join(run, "config.yaml")).num_steps == 16


def read_scalars(event_dir):
    """{tag: [(step, value)]} from the TFRecord event files (tensorboardX's own protobufs)."""
    import struct

    from tensorboardX.proto import event_pb2

    out = {}
    for path in sorted(glob.glob(os.path.join(event_dir, "events.out.tfevents.*"))):
        data = open(path, "rb").read()
        i = 0
        while i < len(data):
            (n,) = struct.unpack("<Q", data[i:i + 8])
            ev = event_pb2.Event.FromString(data[i + 12:i + 12 + n])
            i += 12 + n + 4
            for v in ev.summary.value:
                if v.HasField("simple_value"):
                    out.setdefault(v.tag, []).append((ev.step, v.simple_value))
    return out


def test_tensorboard_tags_are_cleanrls(two_seeds):
    run, _ = two_seeds
    dirs = sorted(glob.glob(os.path.join(run, "tb", "seed_*")))
    assert [os.path.basename(d) for d in dirs] == ["seed_0", "seed_1"]
    scalars = read_scalars(dirs[1])
    tags = set(scalars)
    for tag in ("charts/episodic_return", "charts/episodic_length", "charts/SPS",
                "charts/learning_rate", "losses/policy_loss", "losses/value_loss",
                "losses/entropy", "losses/approx_kl", "losses/clipfrac",
                "losses/explained_variance", "losses/grad_norm"):
        assert tag in tags, tag
    # x-axis = env steps; the return is logged at the updates in which an episode ended (as
    # CleanRL does), every other scalar at every update
    assert [s for s, _ in scalars["losses/policy_loss"]] == list(range(64, 1536 + 1, 64))
    ended = read_metrics_csv(run)["episodes"][1] > 0
    steps = [s for s, _ in scalars["charts/episodic_return"]]
    assert steps == [64 * (u + 1) for u in np.flatnonzero(ended)] and steps
    assert len(scalars["charts/SPS"]) == 24 and "losses/old_approx_kl" in tags


def test_progress_appears_while_running(tmp_path, capsys):
    """In this process: each progress line's own clock (t=) says when it came, so a child
    process (its start-up) adds nothing to what is checked."""
    capsys.readouterr()
    code = main(["train", "--config", CARTPOLE, "--set", "total_timesteps=204800",
                 "--set", "num_envs=4", "--set", "num_steps=16", "--set", "hidden_sizes=[16]",
                 "--logdir", str(tmp_path), "--run-name", "p"])
    out, err = capsys.readouterr()
    assert code == 0, err
    lines = [line for line in out.splitlines() if line.startswith("[")]
    assert len(lines) >= 10
    times = [float(line.rsplit("t=", 1)[1].rstrip("s")) for line in lines]
    steps = [int(line.split("steps ")[1].split(" ")[0].replace(",", "")) for line in lines]
    assert steps == sorted(steps) and steps[-1] == 204800
    summary = json.load(open(os.path.join(tmp_path, "p", "summary.json")))
    compile_s, wall = summary["compile_s"], summary["wall_s"]
    # The first progress line came in the first half of the post-compile run, not at the end
    # (t= is printed to 0.1 s).
    assert times[0] - compile_s < 0.5 * (wall - compile_s) + 0.05, (times, compile_s, wall)


def test_the_last_line_counts_wall_time_from_jaxppos_own_start(tmp_path):
    """The seconds before the run's clock (imports, the env: 7 s on a busy machine) are in the
    printed wall time and shown as start-up; what the process ran before jaxppo's code is not
    (a `pip install` in `bash -c "... && jaxppo train"` printed start-up 196.9 s): here a 3 s
    sleep at the interpreter's start (a sitecustomize), before jaxppo is even imported, which
    the printed wall time leaves out (it is at most the process's life less those 3 s)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import time\ntime.sleep(3.0)\n")
    path = os.pathsep.join([str(site), ROOT, os.environ.get("PYTHONPATH", "")])
    began = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "jaxppo.cli", "train", "--config", CARTPOLE,
                           *TINY, "--logdir", str(tmp_path), "--run-name", "r", "--no-progress"],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": path})
    lived = time.perf_counter() - began
    assert proc.returncode == 0, proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    fields = dict(f.strip().split(" ", 1) for f in last.split("|")[2:])
    startup = float(fields["start-up"].removesuffix(" s"))
    wall = float(fields["wall"].split(" s ")[0])
    assert fields["wall"].endswith("since the command started"), last
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert startup > 0 and wall >= startup + summary["wall_s"] - 0.1, last
    assert wall + 3.0 <= lived + 0.1, (last, lived)  # 0.1: the printed rounding


def test_sweep(tmp_path, capsys):
    code = main(["sweep", "--config", CARTPOLE, *TINY, "--grid", "lr=1e-3,1e-4",
                 "--grid", "ent_coef=0,0.01", "--seeds", "2", "--logdir", str(tmp_path),
                 "--run-name", "s", "--no-progress", "--no-tensorboard"])
    assert code == 0
    out = capsys.readouterr().out
    assert "rank" in out and "lr=0.001,ent_coef=0.01" in out
    with open(os.path.join(tmp_path, "s", "sweep.csv")) as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4 and [r["rank"] for r in rows] == ["1", "2", "3", "4"]
    means = [float(r["final_return_mean"]) for r in rows]
    assert means == sorted(means, reverse=True)
    assert os.path.isfile(os.path.join(tmp_path, "s", "sweep.png"))


def test_eval(one_seed, tmp_path, capsys):
    run = copy_of(one_seed, tmp_path)
    capsys.readouterr()
    assert main(["eval", run, "--episodes", "5"]) == 0
    assert "over 5 episodes" in capsys.readouterr().out
    assert main(["eval", run, "--episodes", "3", "--stochastic"]) == 0
    assert "(sampled, update" in capsys.readouterr().out


def test_eval_gif_minatar(tmp_path, capsys):
    code = main(["train", "--config", os.path.join(ROOT, "configs", "minatar_breakout.yaml"),
                 "--set", "total_timesteps=512", "--set", "num_envs=4", "--set", "num_steps=32",
                 "--set", "hidden_sizes=[16]", "--logdir", str(tmp_path), "--run-name", "b",
                 "--no-progress"])
    assert code == 0
    gif = os.path.join(str(tmp_path), "ep.gif")
    assert main(["eval", os.path.join(str(tmp_path), "b"), "--episodes", "2", "--gif", gif]) == 0
    from PIL import Image

    img = Image.open(gif)
    assert img.format == "GIF" and img.n_frames > 1


def test_eval_gif_without_renderer_says_how_to_install(one_seed, tmp_path, capsys,
                                                        monkeypatch):
    """Asked before evaluating: one line, exit 2, nothing played or written (it used to
    evaluate, write eval.json, then exit 1)."""
    monkeypatch.setitem(sys.modules, "pygame", None)  # as without the render extra
    run = copy_of(one_seed, tmp_path)
    assert not os.path.exists(os.path.join(run, "eval.json"))  # so the last check can fail
    capsys.readouterr()
    assert main(["eval", run, "--episodes", "1", "--gif", str(tmp_path / "x.gif")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1, (out, err)
    assert "pip install 'jaxppo[render]', or evaluate without --gif" in err
    assert not os.path.exists(os.path.join(run, "eval.json"))
    assert not os.path.exists(tmp_path / "x.gif")


def test_eval_gif_classic_control(one_seed, tmp_path, capfd):
    run = copy_of(one_seed, tmp_path)
    gif = str(tmp_path / "cartpole.gif")
    assert main(["eval", run, "--episodes", "1", "--gif", gif]) == 0
    from PIL import Image

    img = Image.open(gif)
    assert img.format == "GIF" and img.n_frames > 1
    err = capfd.readouterr().err  # fd-level: what SDL's C code would print
    assert "ALSA" not in err and "XDG_RUNTIME_DIR" not in err  # SDL's dummy drivers


def test_eval_gif_that_cannot_be_written_is_the_paths_fault_exit_2(one_seed, tmp_path, capsys,
                                                                    monkeypatch):
    run = copy_of(one_seed, tmp_path)
    for flag in ("--gif", "--html"):  # an empty path is bad input, not "no picture"
        capsys.readouterr()
        assert main(["eval", run, "--episodes", "1", flag, ""]) == 2
        err = capsys.readouterr().err
        assert err.startswith("jaxppo eval: error: cannot write ") and "empty" in err, err
    if sys.platform.startswith("linux"):  # /proc looks writable and is not
        assert main(["eval", run, "--episodes", "1", "--gif", "/proc/x.gif"]) == 2
        err = capsys.readouterr().err
        assert "cannot write GIF to '/proc/x.gif' (" in err and "renderer" not in err, err
    from PIL import Image

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Image.Image, "save", disk_full)
    gif = str(tmp_path / "x.gif")
    assert main(["eval", run, "--episodes", "1", "--gif", gif]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"jaxppo eval: error: cannot write GIF to '{gif}' (No space left on device); "
                   "free some disk space"], err


def test_load_checkpoint_api(two_seeds, one_seed):
    ckpt = load_checkpoint(two_seeds[0])
    assert ckpt.config.num_steps == 16 and ckpt.update == 24 and ckpt.num_runs == 2
    kernel = ckpt.train_state.params["params"]["actor"]["Dense_0"]["kernel"]
    assert kernel.shape == (2, 4, 16)  # leading axis = seed
    one = load_checkpoint(one_seed)
    assert one.train_state.params["params"]["actor"]["Dense_0"]["kernel"].shape == (4, 16)


@pytest.mark.exact
def test_resume_after_sigint_equals_uninterrupted(two_seeds, tmp_path, monkeypatch, capsys):
    whole, _ = two_seeds

    # Send a real SIGINT to ourselves after the first chunk is logged.
    from jaxppo.run.logs.csv_logger import CsvLogger

    original = CsvLogger.on_chunk
    calls = {"n": 0}

    def log_and_interrupt(self, event):
        original(self, event)
        calls["n"] += 1
        if calls["n"] == 1:
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(CsvLogger, "on_chunk", log_and_interrupt)
    code, part = train(tmp_path, "--seeds", "2", name="part")
    assert code == 128 + signal.SIGINT
    assert "jaxppo train --resume" in capsys.readouterr().err
    stopped_at = load_checkpoint(part).update
    assert 0 < stopped_at < 24
    monkeypatch.setattr(CsvLogger, "on_chunk", original)

    assert main(["train", "--resume", part, "--no-progress"]) == 0
    a, b = load_checkpoint(whole), load_checkpoint(part)
    assert b.update == 24
    from jaxppo.keys import to_host as _to_host  # keys as raw data, so they compare too

    jax.tree.map(np.testing.assert_array_equal, _to_host(a.runner_state), _to_host(b.runner_state))
    # the logs were appended to, not restarted
    assert read_metrics_csv(part)["update"].shape == (2, 24)
    np.testing.assert_array_equal(read_metrics_csv(part)["episodic_return"],
                                  read_metrics_csv(whole)["episodic_return"])


def test_a_failed_log_write_is_not_swallowed(tmp_path, monkeypatch):
    # CSV/TensorBoard writes happen on a writer thread; a failure there must still stop the run,
    # with its own message, and leave a checkpoint that resumes: the newest one whose updates
    # the log holds (a checkpoint never gets ahead of the log).
    from jaxppo import Experiment, PPOConfig
    from jaxppo.run.logs.csv_logger import CsvLogger

    original = CsvLogger._write

    def disk_full(self, event):
        if event.first_update > 0:
            raise OSError(28, "No space left on device")
        original(self, event)

    monkeypatch.setattr(CsvLogger, "_write", disk_full)
    config = PPOConfig(total_timesteps=1536, num_envs=4, num_steps=16, num_minibatches=2,
                       update_epochs=2, hidden_sizes=(16, 16))
    with pytest.raises(OSError, match="No space left"):
        Experiment(config, logdir=str(tmp_path), run_name="full", progress=False,
                   chunk_updates=6, checkpoint_every_s=1e-9).run()
    run = os.path.join(str(tmp_path), "full")
    assert load_checkpoint(run).update == 6
    np.testing.assert_array_equal(read_metrics_csv(run)["update"][0], np.arange(1, 7))


def test_config_list_prints_every_key_with_type_default_and_meaning(capsys):
    """network, rnn_size, torso, obs_field, ... were found only in the README's prose."""
    from jaxppo.config import FIELDS, PPOConfig

    for argv in (["config", "--list"], ["train", "--help-config"], ["sweep", "--help-config"]):
        assert main(argv) == 0
        lines = capsys.readouterr().out.splitlines()
        assert lines[0].split() == ["key", "type", "default", "meaning"]
        rows = {line.split()[0]: line for line in lines[1:]}
        assert list(rows) == list(FIELDS)
        assert rows["rnn_size"].split()[1:3] == ["int", str(PPOConfig().rnn_size)]
        assert "GRU/LSTM hidden state" in rows["rnn_size"]
        assert rows["max_episode_steps"].split()[1:4] == ["int", "or", "null"]
    assert main(["config"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["jaxppo config: error: give --list (every config key with its type, default "
                   "and meaning)"]


def test_every_config_field_has_a_docstring_for_the_reference():
    from jaxppo.config import FIELDS, config_reference

    ref = config_reference()
    assert [r[0] for r in ref] == list(FIELDS) and all(r[3] for r in ref)


@pytest.fixture(scope="module")
def endless(tmp_path_factory):
    """A run on test/Endless-v0, whose episodes never end (no termination, no time limit):
    `(run dir, what the CLI printed)`."""
    tmp = tmp_path_factory.mktemp("endless")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["train", "--config", CARTPOLE, *TINY, "--set", "env_id=test/Endless-v0",
                     "--set", "total_timesteps=256", "--logdir", str(tmp), "--run-name", "e",
                     "--checkpoint-every", "2"])
    assert code == 0
    return os.path.join(str(tmp), "e"), out.getvalue()


def test_a_run_in_which_no_episode_ends_reports_no_return(endless):
    """No episode ends: no return is "none"/null, never 0.0, in the progress lines, the last
    line, summary.json, metrics.csv and the checkpoint's account."""
    run, out = endless
    assert "final return: none (no episode ended in 256 steps)" in out, out
    progress = [line for line in out.splitlines() if line.startswith("[")]
    assert progress and all("mean return none" in line for line in progress), progress
    summary = json.load(open(os.path.join(run, "summary.json")))
    assert summary["final_return"] == [None] and summary["final_return_mean"] is None
    assert summary["final_return_std"] is None and summary["runs_without_return"] == 1
    assert summary["episodes_per_run"] == [0.0]
    assert np.isnan(read_metrics_csv(run)["episodic_return"]).all()  # empty cells
    stats = load_checkpoint(run).extra["stats"]
    assert stats["final_return"] == [None]


def test_eval_marks_episodes_cut_off_at_the_step_cap(endless, capsys):
    """Endless episodes run into the evaluation's 1000-step cap: cut off, not returns."""
    run, _ = endless
    assert main(["eval", run, "--episodes", "2"]) == 0
    out, err = capsys.readouterr()
    assert "return none (all 2 episodes cut off)" in out, out
    notes = [line for line in err.splitlines() if "cut off" in line]
    assert len(notes) == 1 and "cap of 1000 steps" in notes[0] and "max_episode_steps" in notes[0]
    data = json.load(open(os.path.join(run, "eval.json")))
    assert data["max_steps"] == 1000 and data["cut_off"] == [[True, True]]
    assert data["cut_off_per_run"] == [2] and data["mean_per_run"] == [None]
    assert data["lengths"] == [[1000, 1000]]
    res = evaluate(run, 2)
    assert res.cut_off.all() and res.max_steps == 1000 and res.mean_per_run() == [None]


def test_eval_gif_of_an_env_without_renderer_is_one_line_and_the_evaluation_stands(
        endless, tmp_path, capsys):
    run, _ = endless
    gif = tmp_path / "e.gif"
    assert main(["eval", run, "--episodes", "1", "--gif", str(gif), "--no-json"]) == 0
    out, err = capsys.readouterr()
    assert "return none" in out and not gif.exists()
    lines = [line for line in err.splitlines() if "renderer" in line]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("jaxppo eval: --gif: no renderer for test/Endless-v0: ")
    assert "render(state, params)" in lines[0]


def test_eval_means_are_over_completed_episodes():
    res = EvalResult(np.array([[10.0, 500.0, 20.0], [7.0, 9.0, 11.0]]), np.array([[10, 1000, 20],
                     [7, 9, 11]]), "x", 3, 0, True, np.array([[False, True, False], [False] * 3]),
                     1000)
    assert res.mean_per_run() == [15.0, 9.0]
    d = res.to_dict()
    assert d["cut_off_per_run"] == [1, 0] and d["cut_off"][0] == [False, True, False]
    assert eval_return_text(res.returns, res.completed) == (
        "11.40 ± 4.50 over 5 completed episodes (1 of 6 cut off)")
    assert eval_return_text(res.returns[0], res.completed[0], per_seed=True) == (
        "15.00 ± 5.00 (1 of 3 cut off)")


def test_a_diverged_seed_is_not_reported_as_one_without_episodes():
    """A seed whose return went NaN/Inf had episodes: it diverged; "no episode ended" is only
    for seeds without any, and neither is averaged in."""
    s = {"final_return": [10.0, None, None, 30.0], "final_return_mean": 20.0,
         "final_return_std": 10.0, "runs_without_return": 1, "runs_nonfinite_return": 1,
         "env_steps": 256}
    assert final_return_text(s) == ("20.0 ± 10.0 over 2 seeds (none for 1 of 4 seeds: no "
                                    "episode ended in 256 steps; NaN/Inf for 1 of 4 seeds: "
                                    "diverged)")
    s.update(final_return=[None], final_return_mean=None, final_return_std=None,
             runs_without_return=0, runs_nonfinite_return=1)
    assert final_return_text(s) == "none (NaN/Inf for 1 of 1 seeds: diverged)"
    from jaxppo.run.stats import mean_std_or_none

    assert mean_std_or_none([1.0, np.nan, np.inf, 3.0]) == (2.0, 1.0)
