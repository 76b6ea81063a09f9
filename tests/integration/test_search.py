"""Random search (`jaxppo sweep --search random`) end to end: a tiny sweep resumed bit-exactly,
and huge sweeps refused in seconds (memory, counts). Its pure pieces:
tests/unit/search/test_search_pieces.py."""

import csv
import json
import math
import os
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import ROOT, assert_sweep_refused, run_cli

from jaxppo import load_config
from jaxppo.config import parse_overrides
from jaxppo.search import random_search
from jaxppo.search.sweep import resume_sweep, sweep

CARTPOLE = os.path.join(ROOT, "configs", "cartpole.yaml")
SETS = ["total_timesteps=512", "num_envs=4", "num_steps=16", "hidden_sizes=[16,16]"]
TINY = [a for s in SETS for a in ("--set", s)] + ["--no-tensorboard", "--no-progress"]
SPACE = ["--space", "lr=1e-4:1e-2:log", "--space", "ent_coef=0:0.02",
         "--space", "clip_eps=0.1,0.2,0.3"]


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
