"""Successive halving (`jaxppo sweep --search halving`, `jaxppo.sweep(search="halving")`) end to
end on a tiny sweep: the survivors' programs have fewer runs, a stopped agent is no longer
stepped or logged, and a sweep stopped mid-rung and resumed equals the uninterrupted one. Its
pure pieces: tests/unit/search/test_halving_pieces.py."""

import csv
import json
import math
import os
from collections import Counter

import jax
import numpy as np
import pytest
from conftest import ROOT, compile_exactly, run_cli

import jaxppo.run.driver
from jaxppo import load_config, load_policy
from jaxppo.cli import main
from jaxppo.config import parse_overrides
from jaxppo.rundir.checkpoint import load_checkpoint
from jaxppo.rundir.metrics_csv import read_metrics_csv
from jaxppo.search import random_search
from jaxppo.search.sweep import resume_sweep, sweep

CARTPOLE = os.path.join(ROOT, "configs", "cartpole.yaml")
# 24 updates of 64 steps: 4 settings, eta 2 -> rungs end at updates 6, 12, 24
SETS = ["total_timesteps=1536", "num_envs=4", "num_steps=16", "hidden_sizes=[16,16]"]
TINY = [a for s in SETS for a in ("--set", s)] + ["--no-tensorboard"]
HALVING = ["--search", "halving", "--trials", "4", "--eta", "2", "--space", "lr=1e-4:1e-2:log",
           "--space", "ent_coef=0:0.02", "--seeds", "2", "--seed", "3"]
SPACE = {"lr": (1e-4, 1e-2, "log"), "ent_coef": (0.0, 0.02)}


@pytest.fixture(scope="module")
def halving_run(tmp_path_factory):
    """The CLI's uninterrupted halving sweep: its run dir, output and the runs each compiled
    chunk program was built for."""
    tmp = tmp_path_factory.mktemp("halving")
    compiled = []
    original = jaxppo.run.driver.Driver.compile

    def spy(self, inputs, start_update=0, init=True):
        compiled.append((self.num_runs, inputs.keys.shape[0], start_update, self.num_updates))
        return original(self, inputs, start_update, init)

    mp = pytest.MonkeyPatch()
    mp.setattr(jaxppo.run.driver.Driver, "compile", spy)
    compile_exactly(mp)  # an exact test compares against it
    try:
        code = main(["sweep", "--config", CARTPOLE, *TINY, *HALVING, "--logdir", str(tmp),
                     "--run-name", "cli", "--no-progress"])
    finally:
        mp.undo()
    assert code == 0
    return str(tmp / "cli"), compiled, tmp


def test_survivors_run_in_smaller_programs_and_stopped_agents_stop(halving_run):
    run, compiled, _ = halving_run
    # one program per rung, for its survivors only: 4 x 2, 2 x 2, 1 x 2 agents
    assert [(n, k, end) for n, k, _, end in compiled] == [(8, 8, 6), (4, 4, 12), (2, 2, 24)]
    summary = json.load(open(os.path.join(run, "summary.json")))
    search = summary["search"]
    assert search["strategy"] == "halving" and search["rungs"] == [6, 12, 24]
    assert search["trials"] == 4 and search["eta"] == 2 and search["seed"] == 3
    kept = search["kept"]
    assert kept[0] == [0, 1, 2, 3] and len(kept[1]) == 2 and len(kept[2]) == 1
    assert set(kept[2]) <= set(kept[1]) <= set(kept[0]) and "window" not in search
    went = {g: 6 for g in range(4)} | {g: 12 for g in kept[1]} | {g: 24 for g in kept[2]}
    # metrics.csv: an agent's rows end at its rung
    rows = list(csv.DictReader(open(os.path.join(run, "metrics.csv"), encoding="utf-8")))
    per_run = Counter(int(r["run"]) for r in rows)
    assert per_run == {g * 2 + i: went[g] for g in range(4) for i in range(2)}
    for r in rows:
        assert int(r["update"]) <= went[int(r["run"]) // 2]
    # curve.png's data: each agent's curve ends at its rung (the complete updates: rung 1's)
    m = read_metrics_csv(run, ragged=True)
    assert (np.isnan(m["update"]).sum(1) == [24 - went[r // 2] for r in range(8)]).all()
    assert read_metrics_csv(run)["update"].shape == (8, 6)
    assert os.path.isfile(os.path.join(run, "curve.png"))
    # env_steps: the sum actually stepped, over every agent
    assert summary["env_steps_total"] == sum(went.values()) * 2 * 64
    assert summary["env_steps"] == max(went.values()) * 64  # per agent: the furthest
    # the checkpoint holds every agent, each as far as it trained (its own update counter)
    ckpt = load_checkpoint(run)
    assert ckpt.num_runs == 8 and ckpt.update == 24
    steps = np.asarray(jax.device_get(ckpt.runner_state.train_state.step))
    assert steps.tolist() == [went[r // 2] for r in range(8)]
    # the table: further first, then by final return; `updates` says how far
    table = list(csv.DictReader(open(os.path.join(run, "sweep.csv"), encoding="utf-8")))
    assert [int(t["updates"]) for t in table] == sorted(went.values(), reverse=True)
    assert int(table[0]["runs"].split()[0]) == kept[2][0] * 2
    for u in (6, 12):
        means = [float(t["final_return_mean"]) for t in table if int(t["updates"]) == u]
        assert means == sorted(means, reverse=True)


def test_a_stopped_agent_can_be_evaluated_and_loaded(halving_run, capsys):
    run, _, _ = halving_run
    kept = json.load(open(os.path.join(run, "summary.json")))["search"]["kept"]
    stopped = [g for g in range(4) if g not in kept[1]][0] * 2 + 1  # a rung-0 agent
    policy = load_policy(run, seed=stopped)
    obs = np.zeros((4,), np.float32)
    assert np.shape(policy.act(obs)) == ()
    # its own update count (it stopped at rung 0's end), not the checkpoint's 24
    assert (policy.update, policy.trained_updates) == (24, 6)
    code, err = run_cli(capsys, ["eval", run, "--episodes", "2", "--seed", "1", "--no-cache"])
    assert code == 0, err
    ev = json.load(open(os.path.join(run, "eval.json")))
    assert len(ev["mean_per_run"]) == 8 and all(m is not None for m in ev["mean_per_run"])
    went = {g: 6 for g in range(4)} | {g: 12 for g in kept[1]} | {g: 24 for g in kept[2]}
    assert ev["updates_per_run"] == [went[r // 2] for r in range(8)]
    capsys.readouterr()
    assert main(["eval", run, "--episodes", "1", "--agent", str(stopped), "--no-json",
                 "--no-cache"]) == 0
    assert "(greedy, update 6): return" in capsys.readouterr().out


@pytest.mark.exact
def test_the_same_seed_draws_the_same_settings_and_a_resume_is_bit_exact(halving_run):
    """The Python API with the CLI's seed: the same draw; stopped mid-window of the first
    rung, then past the second rung's end, and resumed, it equals the uninterrupted CLI
    sweep (donating its state, as on a GPU, changes nothing either)."""
    run, _, tmp = halving_run
    config = load_config(CARTPOLE, parse_overrides(SETS))
    drawn, _ = random_search(config, SPACE, 4, 3)
    # with donation (the default on a GPU: each chunk's state reaches the host as a copy,
    # keys as raw data): the same agents as the CLI's run without it
    stopped = sweep(config, space=SPACE, search="halving", trials=4, eta=2, seeds=2, seed=3,
                    logdir=str(tmp), run_name="api", progress=False, tensorboard=False,
                    donate=True, callbacks=[lambda e: e.update < 5])  # window: updates 5-6
    assert stopped.result.update == 5
    saved = load_checkpoint(tmp / "api").extra["search"]
    assert saved["kept"] == [[0, 1, 2, 3]] and sum(saved["window"]["count"]) > 0
    # resumed across rung 1's end, stopped again past rung 2's: the stopped agents' rows in
    # metrics.csv end at their rung, which the next resume's log check expects
    again = resume_sweep(tmp / "api", progress=False, tensorboard=False, donate=True,
                         callbacks=[lambda e: e.update < 13])
    assert again.result.update == 13
    table = resume_sweep(tmp / "api", progress=False, tensorboard=False, donate=True)
    cli = json.load(open(os.path.join(run, "summary.json")))
    api = json.load(open(tmp / "api" / "summary.json"))
    assert api["settings"] == cli["settings"] == drawn
    assert api["search"] == cli["search"]
    assert api["ranked"] == cli["ranked"] and api["env_steps_total"] == cli["env_steps_total"]
    assert table.rows == cli["ranked"]
    a, b = load_checkpoint(tmp / "api"), load_checkpoint(run)
    jax.tree.map(np.testing.assert_array_equal, jax.device_get(a.train_state),
                 jax.device_get(b.train_state))

    def log(d):  # metrics.csv but its wall-clock column
        rows = list(csv.DictReader(open(os.path.join(d, "metrics.csv"), encoding="utf-8")))
        return [{k: v for k, v in r.items() if k != "wall_s"} for r in rows]
    assert log(tmp / "api") == log(run)
    assert not any(math.isnan(r["final_return_mean"]) for r in api["ranked"])
