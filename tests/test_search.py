"""Random search (`jaxppo sweep --search random`, `jaxppo.sweep(space=..., search="random")`):
the space's parsing and its faults (one line, exit 2, nothing written), the draw's
reproducibility and bounds, and a tiny random sweep end to end, resumed bit-exactly."""

import csv
import json
import math
import os
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import assert_sweep_refused, run_cli

from jaxppo import ConfigError, PPOConfig, load_config
from jaxppo.config import parse_overrides
from jaxppo.errors import UsageError
from jaxppo.search import check_space, draw_settings, parse_space, random_search
from jaxppo.search.halving import check_halving
from jaxppo.search.space import check_trials
from jaxppo.search.sweep import resume_sweep, sweep

ROOT = os.path.dirname(os.path.dirname(__file__))
CARTPOLE = os.path.join(ROOT, "configs", "cartpole.yaml")
SETS = ["total_timesteps=512", "num_envs=4", "num_steps=16", "hidden_sizes=[16,16]"]
TINY = [a for s in SETS for a in ("--set", s)] + ["--no-tensorboard", "--no-progress"]
SPACE = ["--space", "lr=1e-4:1e-2:log", "--space", "ent_coef=0:0.02",
         "--space", "clip_eps=0.1,0.2,0.3"]


@pytest.mark.unit
def test_parse_space():
    space = parse_space(["lr=1e-4:1e-2:log", "ent_coef=0:0.02", "clip_eps=0.1,0.2,0.3"])
    assert space == {"lr": ("log", 1e-4, 1e-2), "ent_coef": ("uniform", 0.0, 0.02),
                     "clip_eps": ("choice", [0.1, 0.2, 0.3])}
    # the Python form checks to the same entries
    assert check_space({"lr": (1e-4, 1e-2, "log"), "ent_coef": (0, 0.02),
                        "clip_eps": [0.1, 0.2, 0.3]}) == space


BAD_CLI = {  # (argv after the config, culprits the one line must name)
    "empty space": (["--search", "random", "--trials", "2"], ["--space"]),
    "low >= high": (["--search", "random", "--trials", "2", "--space", "lr=1e-2:1e-4"],
                    ["--space lr", "LOW"]),
    "log of <= 0": (["--search", "random", "--trials", "2", "--space", "ent_coef=0:0.1:log"],
                    ["--space ent_coef", "LOW > 0"]),
    "unknown key": (["--search", "random", "--trials", "2", "--space", "lrr=0:1"],
                    ["--space lrr", "did you mean 'lr'"]),
    "static range": (["--search", "random", "--trials", "2", "--space", "num_envs=4:8"],
                     ["--space num_envs=4:8", "static", "choices"]),
    "no value": (["--search", "random", "--trials", "2", "--space", "lr"], ["--space", "lr"]),
    "not numbers": (["--search", "random", "--trials", "2", "--space", "lr=a:b"],
                    ["--space lr=a:b"]),
    "bad suffix": (["--search", "random", "--trials", "2", "--space", "lr=1e-4:1e-2:ln"],
                   ["--space lr=1e-4:1e-2:ln"]),
    "trials 0": (["--search", "random", "--trials", "0", "--space", "lr=1e-4:1e-2"],
                 ["--trials"]),
    "no trials": (["--search", "random", "--space", "lr=1e-4:1e-2"], ["--trials"]),
    "trials with grid": (["--grid", "lr=1e-3", "--trials", "3"], ["--trials", "--search random"]),
    "space with grid": (["--search", "grid", "--space", "lr=1e-4:1e-2"],
                        ["--space", "--search random"]),
    "space alone": (["--space", "lr=1e-4:1e-2"], ["--space", "--search random"]),
    "grid with random": (["--search", "random", "--trials", "2", "--grid", "lr=1e-3"],
                         ["--grid", "--space"]),
    "key twice": (["--search", "random", "--trials", "2", "--space", "lr=1e-4:1e-3",
                   "--space", "lr=1e-3:1e-2"], ["--space lr", "twice"]),
    "out of range": (["--search", "random", "--trials", "2", "--space", "clip_eps=0:0.3"],
                     ["--space clip_eps", "clip_eps"]),
    "bad choice": (["--search", "random", "--trials", "2", "--space", "gamma=0.9,1.5"],
                   ["--space gamma", "1.5"]),
}


@pytest.mark.unit
@pytest.mark.parametrize("name", list(BAD_CLI))
def test_bad_space_is_one_line_and_writes_nothing(tmp_path, capsys, name):
    argv, culprits = BAD_CLI[name]
    assert_sweep_refused(capsys, tmp_path, ["--config", CARTPOLE, *argv], culprits)


@pytest.mark.unit
@pytest.mark.parametrize("kwargs", [
    dict(space={}, search="random", trials=2),
    dict(space={"lr": (1e-2, 1e-4)}, search="random", trials=2),
    dict(space={"lr": (0.0, 1e-2, "log")}, search="random", trials=2),
    dict(space={"num_envs": (4, 8)}, search="random", trials=2),
    dict(space={"clip_eps": (0.0, 0.3)}, search="random", trials=2),
    dict(space={"lr": (1e-4, 1e-2)}, search="random", trials=0),
    dict(space={"lr": (1e-4, 1e-2)}, search="random"),
    dict(space={"lr": (1e-4, 1e-2)}, search="grid", trials=2),
    dict(space={"lr": (1e-4, 1e-2)}, search="bayes", trials=2),
], ids=["empty", "low-high", "log-0", "static", "range", "trials-0", "no-trials", "grid",
        "unknown-search"])
def test_python_api_refuses_bad_spaces(tiny_config, tmp_path, kwargs):
    with pytest.raises(ConfigError):
        sweep(tiny_config, logdir=str(tmp_path), **kwargs)
    assert os.listdir(tmp_path) == []


@pytest.mark.unit
def test_draws_are_reproducible_and_inside_the_space():
    space = parse_space(["lr=1e-4:1e-2:log", "ent_coef=0:0.02", "clip_eps=0.1,0.2,0.3"])
    a, b = draw_settings(space, 2000, seed=0), draw_settings(space, 2000, seed=0)
    assert a == b
    assert a != draw_settings(space, 2000, seed=1)
    lr = np.array([s["lr"] for s in a])
    ent = np.array([s["ent_coef"] for s in a])
    assert ((1e-4 <= lr) & (lr <= 1e-2)).all() and ((0 <= ent) & (ent <= 0.02)).all()
    assert {s["clip_eps"] for s in a} == {0.1, 0.2, 0.3}
    # log-uniform: each decade holds about half the draws (uniform would put ~90% in the top)
    low_decade = (np.log10(lr) < -3).mean()
    assert 0.4 < low_decade < 0.6, low_decade
    assert 0.4 < (ent < 0.01).mean() < 0.6
    counts = np.unique([s["clip_eps"] for s in a], return_counts=True)[1]
    assert counts.min() > 2000 / 3 * 0.8


@pytest.mark.exact
def test_a_random_sweep_end_to_end_and_its_resume(tmp_path, capsys):
    code, err = run_cli(capsys, ["sweep", "--config", CARTPOLE, *TINY, "--search", "random",
                                 "--trials", "3", *SPACE, "--seed", "5", "--logdir",
                                 str(tmp_path), "--run-name", "cli"])
    assert code == 0, err
    config = load_config(CARTPOLE, parse_overrides(SETS))
    space = {"lr": (1e-4, 1e-2, "log"), "ent_coef": (0.0, 0.02), "clip_eps": [0.1, 0.2, 0.3]}
    drawn, _ = random_search(config, space, 3, 5)
    rows = list(csv.DictReader(open(tmp_path / "cli" / "sweep.csv", encoding="utf-8")))
    assert len(rows) == 3
    by_run = {int(r["runs"]): r for r in rows}
    for g, setting in enumerate(drawn):  # the CSV keeps 4 decimals... of the exact draw
        for k, v in setting.items():
            assert math.isclose(float(by_run[g][k]), v, rel_tol=1e-3, abs_tol=1e-4), (k, v)
    summary = json.load(open(tmp_path / "cli" / "summary.json"))
    assert summary["settings"] == drawn  # the exact draws: the Python API's for the same seed
    assert summary["search"] == {"strategy": "random", "kind": "random", "trials": 3, "seed": 5, "space": {
        "lr": [1e-4, 1e-2, "log"], "ent_coef": [0.0, 0.02],
        "clip_eps": {"choices": [0.1, 0.2, 0.3]}}}

    # the Python API, stopped half way and resumed, equals the uninterrupted CLI run
    stopped = sweep(config, space=space, search="random", trials=3, seed=5,
                    logdir=str(tmp_path), run_name="api", progress=False, tensorboard=False,
                    checkpoint_every=1, callbacks=[lambda e: e.update < 4])
    assert stopped.result.update < config.num_updates
    table = resume_sweep(tmp_path / "api", progress=False, tensorboard=False)
    assert table.result.summary["settings"] == drawn
    assert table.result.summary["search"] == summary["search"]
    np.testing.assert_array_equal(table.result.final_return,
                                  np.array(summary["final_return"], float))


@pytest.mark.unit
@pytest.mark.parametrize("trials", [0, -2, True, 2.0, "4"])
def test_trials_must_be_positive(trials):
    """Each entry point that takes `trials` refuses the same values in one line: the flag's
    name from the CLI, the key's from Python."""
    with pytest.raises(UsageError, match="^--trials .*: use a positive integer"):
        random_search(None, {"lr": (1e-4, 1e-2)}, trials, cli=True)
    with pytest.raises(ConfigError, match="^trials: .*: use a positive integer"):
        random_search(None, {"lr": (1e-4, 1e-2)}, trials)
    with pytest.raises(UsageError, match="^--trials .*: use a positive integer"):
        draw_settings({}, trials)
    with pytest.raises(ConfigError, match="^trials: .*: use a positive integer"):
        check_halving(PPOConfig(), trials, 2)
    check_trials(np.int64(3), cli=False)  # a NumPy integer is an integer


# -- huge sweeps, refused up front (issue #36, class 5) ----------------------------------------

HUGE_MEMORY = ["--set", "num_envs=1024", "--set", "num_steps=128",  # ~10 MiB per agent
               "--set", "total_timesteps=131072"]


@pytest.mark.parametrize("argv,culprit", [
    (["--search", "random", "--trials", "100000000", "--space", "lr=1e-4:1e-2:log"],
     "--trials 100,000,000: 100,000,000 agents"),
    (["--search", "pbt", "--population", "5000000", "--space", "lr=1e-4:1e-2:log"],
     "--population 5,000,000"),
    (["--search", "halving", "--trials", "2000000", "--space", "lr=1e-4:1e-2:log"],
     "--trials 2,000,000"),
    (["--grid", "lr=" + ",".join(map(str, range(1, 41))), "--grid",
      "ent_coef=" + ",".join(map(str, range(40))), "--grid", "vf_coef=" + ",".join(
          map(str, range(1, 41))), "--grid", "num_minibatches=1,2"], "128,000 settings"),
    (["--search", "random", "--trials", "50000", "--space", "lr=1e-4:1e-2:log", *HUGE_MEMORY],
     "--trials 50,000: this config needs about"),
], ids=["trials", "population", "halving", "grid", "memory"])
def test_a_huge_sweep_is_refused_in_seconds_before_any_setting_is_drawn(
        capsys, tmp_path, argv, culprit, monkeypatch):
    """Reproduction: `--trials 100000000` drew and validated one config per trial until the OOM
    killer ended it; `--trials 100000` was silent for minutes."""
    import jaxppo.search.strategies as strategies

    def no_draw(*a, **k):
        raise AssertionError("a setting was drawn before the size was checked")

    for name in ("random_search", "pbt_search", "halving_search", "grid_settings"):
        monkeypatch.setattr(strategies, name, no_draw)
    if "num_minibatches=1,2" in argv:  # 128,000 x 2 seeds: over the cap of one sweep
        argv = [*argv, "--seeds", "8"]
    t0 = time.perf_counter()
    assert_sweep_refused(capsys, tmp_path, ["--config", CARTPOLE, *argv], [culprit])
    assert time.perf_counter() - t0 < 20


def test_a_huge_random_search_under_a_memory_limit_is_one_line(tmp_path):
    """Reproduction: under a memory limit, a MemoryError traceback after ~40 s."""
    script = tmp_path / "limited.py"
    script.write_text("import resource, sys\nresource.setrlimit(resource.RLIMIT_AS, "
                      "(6 * 10**9, 6 * 10**9))\nfrom jaxppo.cli import main\n"
                      "sys.exit(main(sys.argv[1:]))\n")
    proc = subprocess.run([sys.executable, str(script), "sweep", "--config", CARTPOLE,
                           "--search", "random", "--trials", "100000000", "--space",
                           "lr=1e-4:1e-2:log", "--logdir", str(tmp_path / "runs")],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(err) == 1 and "Traceback" not in err[0], err
    assert "--trials 100,000,000" in err[0]


def test_a_memory_error_is_one_line(capsys, tmp_path, monkeypatch):
    import jaxppo.search.strategies as strategies

    def out_of_memory(*a, **k):
        raise MemoryError

    monkeypatch.setattr(strategies, "random_search", out_of_memory)
    code, err = run_cli(capsys, ["sweep", "--config", CARTPOLE, "--search", "random", "--trials",
                                 "4", "--space", "lr=1e-4:1e-2:log", "--logdir", str(tmp_path)])
    assert code == 1 and len(err) == 1 and "ran out of memory" in err[0], err


@pytest.mark.unit
def test_many_settings_are_checked_and_stacked_in_milliseconds_not_one_config_each():
    from jaxppo import Experiment
    from jaxppo.config import Hparams, check_settings

    config = load_config(CARTPOLE)
    settings = draw_settings(parse_space(["lr=1e-4:1e-2:log", "ent_coef=0:0.02"]), 100_000, 0)
    t0 = time.perf_counter()
    check_settings(config, settings)
    exp = Experiment(config, hparams=settings[:1000], seeds=2, logdir=None, progress=False)
    stacked = exp.stacked_hparams()
    assert time.perf_counter() - t0 < 5
    import dataclasses

    want = Hparams.stack([dataclasses.replace(config, **s) for s in settings[:1000]
                          for _ in range(2)])
    for a, b in zip(stacked, want, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))  # the same values, bit for bit
    # a bad value among many is still named, by the config's own rule
    with pytest.raises(ConfigError, match="lr"):
        check_settings(config, [*settings[:10], {"lr": -1.0}, *settings[10:20]])
    with pytest.raises(ConfigError, match="gamma"):
        check_settings(config, [{"gamma": 0.5}, {"gamma": 1.5}])
