"""Random search's pure pieces: the space's parsing and its faults (one line, exit 2, nothing
written), the draw's reproducibility and bounds, the trial count, and many settings checked
in milliseconds. A random sweep end to end: tests/integration/test_search.py."""

import os
import time

import numpy as np
import pytest
from conftest import ROOT, assert_sweep_refused

from jaxppo import ConfigError, PPOConfig, load_config
from jaxppo.errors import UsageError
from jaxppo.search import check_space, draw_settings, parse_space, random_search
from jaxppo.search.halving import check_halving
from jaxppo.search.space import check_trials
from jaxppo.search.sweep import sweep

CARTPOLE = os.path.join(ROOT, "configs", "cartpole.yaml")


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
