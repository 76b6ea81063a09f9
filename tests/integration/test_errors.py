"""Bad input through the CLI: exit status 2, one line on stderr naming the culprit, no traceback,
and nothing compiled or written. Plus divergence (status 3) and the memory refusal."""

import glob
import json
import os
import subprocess
import sys
import time

import jax
import msgpack
import numpy as np
import pytest
from conftest import ROOT, run_cli

from jaxppo import ConfigError, Experiment, PPOConfig, load_checkpoint, make_train
from jaxppo.cli import main

CARTPOLE = os.path.join(ROOT, "configs", "cartpole.yaml")
TINY = ["--set", "total_timesteps=1536", "--set", "num_envs=4", "--set", "num_steps=16",
        "--set", "num_minibatches=2", "--set", "update_epochs=2", "--set", "hidden_sizes=[16, 16]"]
HUGE = ["--set", "num_envs=1000000000", "--set", "num_steps=1", "--set", "num_minibatches=1",
        "--set", "total_timesteps=1000000000"]


def assert_one_line(code, err, *culprits):
    assert code == 2, err
    assert len(err) == 1, err
    assert "Traceback" not in err[0]
    for c in culprits:
        assert c in err[0], (c, err[0])


@pytest.fixture
def yaml_file(tmp_path):
    def write(text: str) -> str:
        path = tmp_path / "config.yaml"
        path.write_text(text)
        return str(path)
    return write


# (YAML text, culprits the message must name)
BAD_YAML = {
    "syntax": ("lr: [1, 2\n", ["YAML error", "line"]),
    "not a mapping": ("- lr\n- gamma\n", ["expected a mapping", "list"]),
    "python tag": ("lr: !!python/object/apply:os.system ['touch PWNED']\n", ["YAML error"]),
    "unknown key": ("learning_rate: 1.0e-3\n", ["learning_rate", "did you mean 'lr'"]),
    "wrong type": ("num_envs: four\n", ["num_envs", "integer"]),
    "bool for int": ("num_steps: true\n", ["num_steps"]),
    "hidden sizes": ("hidden_sizes: [64, 0]\n", ["hidden_sizes", "positive"]),
    "null": ("gamma: null\n", ["gamma", "must not be null"]),
    "env id type": ("env_id: 5\n", ["env_id", "string"]),
    # issue #36: an empty file trained the defaults without a word
    "empty": ("", ["holds no settings", "env_id"]),
    "only comments": ("# lr: 1e-3\n", ["holds no settings"]),
}


@pytest.mark.parametrize("case", list(BAD_YAML))
def test_bad_config_files(tmp_path, capsys, yaml_file, monkeypatch, case):
    text, culprits = BAD_YAML[case]
    monkeypatch.chdir(tmp_path)
    code, err = run_cli(capsys, ["train", "--config", yaml_file(text), "--logdir", "runs"])
    assert_one_line(code, err, *culprits)
    assert not os.path.exists("PWNED")  # tags never construct objects
    assert not os.path.exists("runs")  # nothing was written


# --set overrides on the shipped default config, and what the message must name
BAD_SETS = {
    "zero envs": (["num_envs=0"], ["num_envs", "positive"]),
    "negative lr": (["lr=-1"], ["lr", "positive"]),
    "nan lr": (["lr=.nan"], ["lr", "finite"]),
    "inf clip": (["clip_eps=.inf"], ["clip_eps", "finite"]),
    "zero clip": (["clip_eps=0"], ["clip_eps", "positive"]),
    "gamma > 1": (["gamma=1.5"], ["gamma", "[0, 1]"]),
    "lambda < 0": (["gae_lambda=-0.1"], ["gae_lambda", "[0, 1]"]),
    "batch split": (["num_minibatches=3"], ["num_minibatches", "divisor of 512"]),
    "budget": (["total_timesteps=100"], ["total_timesteps", "at least 512"]),
    "target_kl": (["target_kl=-1"], ["target_kl"]),
    "activation": (["activation=relu6"], ["activation", "tanh"]),
    "unknown env": (["env_id=CartPole-v2"], ["env_id", "CartPole-v1"]),
    "unknown key": (["clip_coef=0.2"], ["clip_coef", "clip_eps"]),
    "typo names its --set": (["lerning_rate=1e-3"],
                             ["--set lerning_rate=1e-3: unknown key 'lerning_rate'; did you mean 'lr'?"]),
    "int32 batch": (["num_envs=100000000000"], ["num_envs", "lower num_envs"]),
    "no '='": (["lr"], ["--set", "KEY=VALUE"]),
    "bad value": (["lr=[1,"], ["--set lr"]),
    "memory": ([s for s in HUGE if s != "--set"], ["memory", "GiB", "num_envs"]),
}


@pytest.mark.parametrize("case", list(BAD_SETS))
def test_bad_overrides(tmp_path, capsys, case):
    sets, culprits = BAD_SETS[case]
    argv = ["train", "--config", CARTPOLE, "--logdir", str(tmp_path / "runs")]
    for s in sets:
        argv += ["--set", s]
    code, err = run_cli(capsys, argv)
    assert_one_line(code, err, *culprits)
    assert not os.path.exists(tmp_path / "runs")


BAD_ARGS = {
    "missing file": (["train", "--config", "nope.yaml"], ["nope.yaml", "configs/"]),
    "config is a dir": (["train", "--config", "."], ["cannot read config file"]),
    "no config": (["train"], ["--config is required"]),
    "seeds 0": (["train", "--config", CARTPOLE, "--seeds", "0"], ["--seeds"]),
    "seeds text": (["train", "--config", CARTPOLE, "--seeds", "four"], ["--seeds", "four"]),
    "unknown flag": (["train", "--config", CARTPOLE, "--lr", "1"], ["--lr"]),
    "unknown command": (["trian"], ["trian", "train"]),
    "grid no values": (["sweep", "--config", CARTPOLE, "--grid", "lr"], ["--grid", "KEY=V1"]),
    "grid bad static value": (["sweep", "--config", CARTPOLE, "--grid", "num_minibatches=2,3"],
                              ["--grid num_minibatches=3", "divisor of 512"]),
    "grid not numbers": (["sweep", "--config", CARTPOLE, "--grid", "lr=a,b"], ["--grid lr"]),
    "grid bad setting": (["sweep", "--config", CARTPOLE, "--grid", "gamma=0.9,1.5"], ["gamma"]),
    "no grid": (["sweep", "--config", CARTPOLE], ["--grid"]),
    "grid key twice": (["sweep", "--config", CARTPOLE, "--grid", "lr=1e-3", "--grid", "lr=1e-4"],
                       ["--grid lr", "twice", "--grid lr=1e-3,1e-4"]),
    "repair-log without resume": (["train", "--config", CARTPOLE, "--repair-log"],
                                  ["--repair-log", "--resume"]),
    "resume missing": (["train", "--resume", "no/such/run"], ["no checkpoint", "no/such/run"]),
    "eval missing": (["eval", "no/such/run"], ["no checkpoint"]),
    "episodes 0": (["eval", "x", "--episodes", "0"], ["--episodes"]),
}


@pytest.mark.parametrize("case", list(BAD_ARGS))
def test_bad_arguments(tmp_path, capsys, monkeypatch, case):
    monkeypatch.chdir(tmp_path)
    argv, culprits = BAD_ARGS[case]
    assert_one_line(*run_cli(capsys, argv), *culprits)


def test_logdir_that_is_a_file_or_under_one(tmp_path, capsys):
    (tmp_path / "afile").write_text("")
    for logdir, culprit in ((tmp_path / "afile", "is a file"),
                            (tmp_path / "afile" / "sub", "cannot create run directory")):
        code, err = run_cli(capsys, ["train", "--config", CARTPOLE, "--logdir", str(logdir)])
        assert_one_line(code, err, culprit, "--logdir")


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("finished")
    assert main(["train", "--config", CARTPOLE, *TINY, "--logdir", str(logdir), "--run-name", "run",
                 "--no-progress"]) == 0
    return os.path.join(str(logdir), "run")


def _damaged_copy(src: str, dst: str, damage: str) -> str:
    import shutil

    shutil.copytree(src, dst)
    path = os.path.join(dst, "checkpoint", "checkpoint.msgpack")
    data = open(path, "rb").read()
    if damage == "truncated":
        data = data[: len(data) // 2]
    elif damage == "garbage":
        data = b"not a checkpoint at all"
    elif damage == "bit flip":
        i = len(data) - 100
        data = data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1:]
    elif damage == "empty":
        data = b""
    else:  # another env or other network sizes in the header: the payload no longer fits
        from jaxppo.rundir.checkpoint import _digest

        outer = msgpack.unpackb(data, raw=False)
        outer["header"]["config"].update(damage)
        # Re-signed, as a checkpoint of another config would be (an edit alone fails the
        # checksum, which covers the header: tests/integration/test_faults_rundir.py).
        outer["header"]["sha256"] = _digest(outer["header"], outer["payload"])
        data = msgpack.packb(outer, use_bin_type=True)
    open(path, "wb").write(data)
    return dst


@pytest.mark.parametrize("damage", ["truncated", "garbage", "bit flip", "empty",
                                    {"env_id": "Acrobot-v1"}, {"hidden_sizes": [32, 32]}],
                         ids=["truncated", "garbage", "bit-flip", "empty", "other-env",
                              "other-network"])
def test_bad_checkpoints(tmp_path, capsys, finished_run, damage):
    run = _damaged_copy(finished_run, str(tmp_path / "run"), damage)
    for argv in (["train", "--resume", run, "--no-progress"], ["eval", run]):
        code, err = run_cli(capsys, argv)
        assert_one_line(code, err, "checkpoint", run)
        if isinstance(damage, dict):
            assert "does not match" in err[0]
        else:
            assert "corrupt" in err[0]


def test_resume_with_a_config_is_refused(capsys, finished_run):
    code, err = run_cli(capsys, ["train", "--resume", finished_run, "--config", CARTPOLE])
    assert_one_line(code, err, "--resume", "--config")


def test_a_real_process_prints_one_line_and_no_traceback(tmp_path):
    # The in-process runs above cannot see what the interpreter itself would print.
    bad = tmp_path / "bad.yaml"
    bad.write_text("gamma: 2\n")
    for argv in (["train", "--config", str(bad)], ["train", "--config", CARTPOLE, *HUGE]):
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "jaxppo.cli", *argv], capture_output=True,
                           text=True, cwd=tmp_path, timeout=120)
        assert p.returncode == 2, p.stderr
        err = p.stderr.strip().splitlines()
        assert len(err) == 1 and "Traceback" not in p.stderr, p.stderr
        assert p.stdout == ""  # refused before the run header: nothing compiled
        assert time.perf_counter() - t0 < 60  # generous: process start + imports, no compile


# ---------------------------------------------------------------------------------------------
# memory
def test_memory_refusal_is_immediate_and_names_the_knob():
    config = PPOConfig(num_envs=2_000_000_000, num_steps=1, num_minibatches=1,
                       total_timesteps=2_000_000_000)
    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match="lower num_envs or num_steps"):
        Experiment(config, logdir=None, progress=False).run()  # where a run starts, not make_train
    assert time.perf_counter() - t0 < 5  # well under a second in practice; this only bounds hangs


def test_many_seeds_are_refused_by_the_driver_not_one():
    from jaxppo.run.memory import available_memory, check_memory, estimate_memory

    config = PPOConfig(num_envs=4096, num_steps=256, num_minibatches=4, total_timesteps=4096 * 256)
    check_memory(config, 1)  # one run fits
    free, _ = available_memory()
    runs = int(free // estimate_memory(config, 1).total) + 1
    with pytest.raises(ConfigError, match=f"for {runs} runs.*fewer seeds"):
        Experiment(config, seeds=runs, logdir=None, progress=False).run()


@pytest.mark.parametrize("kwargs", [
    dict(num_envs=64),
    dict(num_envs=1024, num_steps=32),
    dict(env_id="Pendulum-v1", num_envs=256, num_steps=32, hidden_sizes=(256, 256)),
    dict(num_envs=16, num_minibatches=1, hidden_sizes=(512, 512)),
])
def test_estimate_tracks_what_xla_allocates(kwargs):
    from jaxppo.run.memory import estimate_memory

    kwargs = {"num_steps": 128, **kwargs}
    config = PPOConfig(total_timesteps=kwargs["num_envs"] * kwargs["num_steps"] * 4, **kwargs)
    stats = jax.jit(make_train(config)).lower(jax.random.key(0)).compile().memory_analysis()
    xla = stats.temp_size_in_bytes + stats.output_size_in_bytes + stats.argument_size_in_bytes
    assert 0.5 <= xla / estimate_memory(config).total <= 1.25


def test_memory_does_not_grow_with_total_timesteps(tiny_config):
    """The scan's working memory is the same for 6 and 96 updates; only the [U] metrics grow."""
    import dataclasses

    from jaxppo.core.metrics import METRIC_NAMES

    def analysis(updates):
        config = dataclasses.replace(tiny_config, total_timesteps=tiny_config.batch_size * updates)
        return jax.jit(make_train(config)).lower(jax.random.key(0)).compile().memory_analysis()

    short, long = analysis(6), analysis(96)
    assert long.temp_size_in_bytes == short.temp_size_in_bytes
    grown = long.output_size_in_bytes - short.output_size_in_bytes
    assert grown == 4 * len(METRIC_NAMES) * (96 - 6)


# ---------------------------------------------------------------------------------------------
# divergence
# The env built to explode at a known update is `test/Explode-v0` (tests/conftest.py).


def test_nonfinite_metric_marks_the_diverged_updates(tiny_config):
    import dataclasses

    config = dataclasses.replace(tiny_config, env_id="test/Explode-v0")
    out = jax.jit(make_train(config))(jax.random.key(0))
    # 16 steps per update: steps 40+ are first collected in update 3 (index 2).
    np.testing.assert_array_equal(np.asarray(out.metrics["nonfinite"]), [0, 0, 1, 1, 1, 1])


def test_divergence_stops_the_run_and_keeps_the_last_good_checkpoint(tmp_path, capsys):
    argv = ["train", "--config", CARTPOLE, *TINY, "--set", "env_id=test/Explode-v0", "--seeds", "2",
            "--logdir", str(tmp_path), "--run-name", "run", "--no-progress", "--checkpoint-every", "1"]
    capsys.readouterr()
    assert main(argv) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0]
    assert "diverged" in err[0] and "update 3 (seed 0)" in err[0] and "lower lr" in err[0]
    assert "last good checkpoint (update 2)" in err[0]
    ckpt = load_checkpoint(os.path.join(tmp_path, "run"))
    assert ckpt.update == 2
    assert all(np.isfinite(x).all() for x in jax.tree.leaves(ckpt.train_state.params))
    assert not glob.glob(os.path.join(tmp_path, "run", "checkpoint", ".tmp-*"))


@pytest.mark.filterwarnings("error::RuntimeWarning")  # numpy's NaN/Inf warnings are noise
@pytest.mark.parametrize("env_id,extra,culprit", [
    # normalize_obs on: a NaN observation also poisons the normaliser; the env is named first
    ("test/Poison-obs-v0", ["--set", "normalize_obs=true"], "returned NaN/Inf observations"),
    ("test/Poison-reward-v0", [], "returned NaN/Inf rewards"),
    ("test/NoAction-v0", [], "gave an action mask that allows no action"),
])
def test_a_faulty_env_is_named_not_blamed_on_lr(tmp_path, capsys, env_id, extra, culprit):
    argv = ["train", "--config", CARTPOLE, *TINY, "--set", f"env_id={env_id}", *extra,
            "--seeds", "2", "--logdir", str(tmp_path), "--run-name", "run", "--no-progress",
            "--checkpoint-every", "1"]
    capsys.readouterr()
    assert main(argv) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    assert f"environment '{env_id}' {culprit} at update 3 (seed 0)" in err[0]
    assert "fix the env" in err[0] and "lower lr" not in err[0]
    assert "last good checkpoint (update 2)" in err[0]
    assert load_checkpoint(os.path.join(tmp_path, "run")).update == 2
    summary = json.load(open(os.path.join(tmp_path, "run", "summary.json")))
    assert summary["diverged"]["update"] == 3


def test_a_nonfinite_state_is_never_saved(tmp_path, finished_run):
    from jaxppo.rundir.checkpoint import CheckpointError, save_checkpoint

    good = load_checkpoint(finished_run)
    bad = good.runner_state._replace(train_state=jax.tree.map(
        lambda x: x * np.nan if np.issubdtype(x.dtype, np.floating) else x,
        good.runner_state.train_state))
    with pytest.raises(CheckpointError, match="NaN"):
        save_checkpoint(finished_run, bad, good.config, good.update + 1, good.num_runs)
    assert load_checkpoint(finished_run).update == good.update  # the good one is still there


def test_a_diverging_sweep_setting_is_flagged_not_fatal(tmp_path, capsys):
    argv = ["sweep", "--config", CARTPOLE, *TINY, "--grid", "lr=2.5e-4,1e20", "--logdir",
            str(tmp_path), "--run-name", "sweep", "--no-progress", "--no-tensorboard"]
    capsys.readouterr()
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "lr=1e+20" in out and "(diverged: 1/1 seeds)" in out
    rows = open(os.path.join(tmp_path, "sweep", "sweep.csv")).read().splitlines()
    assert rows[0].endswith("diverged_seeds")
    assert {r.split(",")[1]: r.split(",")[-1] for r in rows[1:]} == {"0.00025": "0", "1e+20": "1"}
    notes = [line for line in err.splitlines() if "diverged" in line]  # the first one's cause
    assert len(notes) == 1 and notes[0].startswith("note: 1 of 2 agents diverged; the first: "
                                                   "training diverged: NaN/Inf in "), err
    assert "(agent 1: 001_lr=1e+20_seed0)" in notes[0] and "lower lr" in notes[0]
    summary = json.load(open(os.path.join(tmp_path, "sweep", "summary.json")))
    assert summary["status"] == "finished" and summary["diverged_runs"] == [1]
    assert summary["diverged"]["run"] == 1 and summary["divergences"] == [summary["diverged"]]


@pytest.mark.filterwarnings("error::RuntimeWarning")  # stderr holds the one line, no noise
def test_a_sweep_whose_every_agent_diverged_is_not_a_success(tmp_path, capsys):
    """An env returning NaN/Inf to every agent: the table, then one line naming the env, exit 3;
    summary.json's `diverged` agrees with `diverged_runs` and records each agent's cause."""
    argv = ["sweep", "--config", CARTPOLE, *TINY, "--set", "env_id=test/Poison-reward-v0",
            "--set", "total_timesteps=384", "--grid", "lr=1e-3,3e-4", "--seeds", "2",
            "--logdir", str(tmp_path), "--run-name", "sweep", "--no-progress", "--no-tensorboard"]
    capsys.readouterr()
    assert main(argv) == 3
    out, err = capsys.readouterr()
    assert "(diverged: 2/2 seeds)" in out
    err = err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    assert err[0].startswith("jaxppo sweep: error: every agent diverged (4 of 4); the first: "
                             "environment 'test/Poison-reward-v0' returned NaN/Inf rewards at "
                             "update 3 (agent 0: 000_lr=0.001_seed0)"), err
    assert "fix the env" in err[0] and "lower lr" not in err[0]
    run = os.path.join(tmp_path, "sweep")
    summary = json.load(open(os.path.join(run, "summary.json")))
    assert summary["status"] == "diverged" and summary["diverged_runs"] == [0, 1, 2, 3]
    assert summary["diverged"] == {"run": 0, "update": 3, "source": "env_reward"}
    assert summary["divergences"] == [{"run": r, "update": 3, "source": "env_reward"}
                                      for r in range(4)]
    assert os.path.isfile(os.path.join(run, "sweep.csv"))  # it ran to its end: ranked, flagged
    # Killed before its results were written: the rebuild reads each cause from metrics.csv.
    for name in ("summary.json", "sweep.csv"):
        os.remove(os.path.join(run, name))
    assert main(["sweep", "--resume", run, "--no-progress"]) == 3
    out, err = capsys.readouterr()
    assert "nothing was trained" in out and "returned NaN/Inf rewards at update 3" in err
    rebuilt = json.load(open(os.path.join(run, "summary.json")))
    for key in ("status", "diverged", "diverged_runs", "divergences"):
        assert rebuilt[key] == summary[key], key


def test_a_kill_during_a_save_leaves_the_previous_checkpoint(tmp_path, finished_run, monkeypatch):
    """The checkpoint is written to a temp file and renamed over the old one: a process killed
    while writing (here: interrupted at the fsync) leaves the previous checkpoint whole."""
    import shutil

    from jaxppo.rundir.checkpoint import save_checkpoint

    run = str(tmp_path / "run")
    shutil.copytree(finished_run, run)
    good = load_checkpoint(run)
    newer = good.runner_state._replace(train_state=jax.tree.map(
        lambda x: x + 1 if np.issubdtype(x.dtype, np.floating) else x,
        good.runner_state.train_state))

    def killed(fd):
        raise KeyboardInterrupt  # what SIGINT's default handler raises mid-write

    monkeypatch.setattr(os, "fsync", killed)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(run, newer, good.config, good.update + 1, good.num_runs)
    monkeypatch.undo()
    again = load_checkpoint(run)
    assert again.update == good.update
    jax.tree.map(np.testing.assert_array_equal, again.train_state.params, good.train_state.params)
    assert os.listdir(os.path.join(run, "checkpoint")) == ["checkpoint.msgpack"]


def test_the_memory_check_uses_the_accelerators_own_free_memory(monkeypatch):
    """On a GPU the allocator's limit decides, and the refusal names the device (a fake device
    stands in for one: no GPU here)."""
    from types import SimpleNamespace

    from jaxppo.run import memory

    gpu = SimpleNamespace(platform="gpu", id=0, device_kind="NVIDIA H100 80GB HBM3",
                          memory_stats=lambda: {"bytes_limit": 80 * 2**30,
                                                "bytes_in_use": 79 * 2**30})
    free, where = memory.available_memory(gpu)
    assert free == 2**30 and where == "GPU 0 (NVIDIA H100 80GB HBM3)"
    config = PPOConfig(num_envs=16384, num_steps=256, num_minibatches=4,
                       total_timesteps=16384 * 256)
    assert memory.estimate_memory(config).total > 2**30
    with pytest.raises(ConfigError, match=r"GPU 0 \(NVIDIA H100 80GB HBM3\) has 1.0 GiB free"):
        memory.check_memory(config, device=gpu)
    memory.check_memory(PPOConfig(), device=gpu)  # a small config fits in the GiB left


# -- messages that point the right way (issue #36, class 11) ----------------------------------

def alias_bomb(depth: int = 8) -> str:
    """9^depth values from a few lines of YAML aliases, inside a key the config takes."""
    parts = ["a0: &x0 [1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    parts += [f"a{i}: &x{i} [" + ", ".join([f"*x{i - 1}"] * 9) + "]" for i in range(1, depth)]
    return "env_id: CartPole-v1\nenv_kwargs: {" + ", ".join(parts) + "}\n"


def test_a_yaml_alias_bomb_is_refused_in_milliseconds(capsys, yaml_file, tmp_path):
    """Reproduction: 9^8 values took ~60 s to load, and were then accepted."""
    from jaxppo import load_config

    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match="alias bomb"):
        load_config(yaml_file(alias_bomb()))
    with pytest.raises(ConfigError, match="alias bomb"):
        from jaxppo.config import parse_overrides

        parse_overrides(["env_kwargs=" + alias_bomb().split("env_kwargs: ", 1)[1].strip()])
    assert time.perf_counter() - t0 < 2
    small = load_config(yaml_file(alias_bomb(3).replace("CartPole-v1", "CartPole-v1")))
    assert small.env_id == "CartPole-v1"  # a few aliases are fine


def test_a_line_quotes_a_capped_list_of_unknown_env_params(capsys, tmp_path):
    """Reproduction: 700k unknown env_params keys made a 6 MB error line."""
    path = tmp_path / "many.yaml"
    keys = ", ".join(f"k{i}: 1" for i in range(50_000))
    path.write_text(f"env_id: CartPole-v1\nenv_params: {{{keys}}}\n")
    code, err = run_cli(capsys, ["train", "--config", str(path), "--logdir", str(tmp_path)])
    assert_one_line(code, err, "env_params", "k0", "(50,000 in all)")
    assert len(err[0]) < 3000
    from jaxppo.cli.app import one_line

    assert len(one_line("x" * 10**6)) < 2100 and "characters cut" in one_line("x" * 10**6)


def test_a_read_only_file_system_is_named_not_permission_denied(tmp_path, monkeypatch):
    from jaxppo.errors import UsageError
    from jaxppo.rundir import files

    real = os.statvfs

    class ReadOnly:
        def __init__(self, st):
            self.st = st

        def __getattr__(self, name):
            return getattr(self.st, name)

        @property
        def f_flag(self):
            return self.st.f_flag | os.ST_RDONLY

    monkeypatch.setattr(os, "statvfs", lambda p: ReadOnly(real(p)))
    monkeypatch.setattr(os, "access", lambda p, mode: False)  # as access(2) says on a RO mount
    with pytest.raises(UsageError, match="the file system is read-only"):
        files.check_writable(tmp_path / "x.gif", "GIF")


def test_a_static_sweep_without_its_plan_points_at_its_groups(tmp_path, capsys):
    """Reproduction: a static sweep whose static_sweep.json is gone was told to pass a
    `jaxppo train` run directory."""
    argv = ["sweep", "--config", CARTPOLE, *TINY, "--grid", "num_minibatches=2,4", "--logdir",
            str(tmp_path), "--run-name", "s", "--no-progress", "--no-tensorboard"]
    assert main(argv) == 0
    sweep_dir = tmp_path / "s"
    os.remove(sweep_dir / "static_sweep.json")
    for verb in ("sweep", "train"):
        code, err = run_cli(capsys, [verb, "--resume", str(sweep_dir), "--no-progress"])
        assert_one_line(code, err, "static_sweep.json", "000_num_minibatches=2", "pass one of them")
        assert "jaxppo train`" not in err[0]


def test_finished_hints_name_the_real_directory(tmp_path, capsys, finished_run):
    code, err = run_cli(capsys, ["train", "--resume", finished_run, "--no-progress"])
    assert_one_line(code, err, f"jaxppo eval {finished_run}")
    # a static sweep none of whose groups has a checkpoint yet: no literal placeholder
    os.makedirs(tmp_path / "s")
    (tmp_path / "s" / "static_sweep.json").write_text("{}")
    code, err = run_cli(capsys, ["eval", str(tmp_path / "s")])
    assert_one_line(code, err, f"jaxppo sweep --resume {tmp_path / 's'}")
    assert "GROUP" not in err[0] and "RUN_DIR" not in err[0]


def test_a_complex_observation_is_refused_in_one_line(tmp_path, capsys):
    """Reproduction: complex observations were cast to float32 with only NumPy's warning."""
    import jax.numpy as jnp

    from jaxppo.envs import register_env
    from jaxppo.envs.probes import Constant

    class ComplexObs(Constant):
        def get_obs(self, state, params=None, key=None):
            return jnp.reshape(state.obs + 1j, (1,)).astype(jnp.complex64)

    register_env("test/ComplexObs-v0", ComplexObs, overwrite=True)
    code, err = run_cli(capsys, ["train", "--config", CARTPOLE, *TINY, "--set",
                                 "env_id=test/ComplexObs-v0", "--logdir", str(tmp_path)])
    assert_one_line(code, err, "test/ComplexObs-v0", "complex", "real and imaginary")
    assert not os.listdir(tmp_path)
