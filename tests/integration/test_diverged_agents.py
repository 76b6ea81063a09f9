"""Diverged agents are no policies (issue #36, class 6): a sweep goes on past a diverged
setting and checkpoints its NaN/Inf parameters; `jaxppo eval`, `load_policy`, eval.json and
`jaxppo report` name them and give them no return, unless asked to play them anyway."""

import json
import os

import jax
import numpy as np
import pytest
from conftest import ROOT, run_cli

from jaxppo import load_checkpoint
from jaxppo.cli import main
from jaxppo.policy import DivergedAgent, evaluate, load_policy
from jaxppo.reports import report

pytestmark = pytest.mark.usefixtures("compile_cache")
CARTPOLE = os.path.join(ROOT, "configs", "cartpole.yaml")
TINY = ["--set", "total_timesteps=1536", "--set", "num_envs=4", "--set", "num_steps=16",
        "--set", "num_minibatches=2", "--set", "update_epochs=2", "--set", "hidden_sizes=[16, 16]",
        "--no-progress", "--no-tensorboard"]


def sweep(tmp_path_factory, grid: str) -> str:
    logdir = str(tmp_path_factory.mktemp("diverged"))
    main(["sweep", "--config", CARTPOLE, *TINY, "--grid", grid, "--logdir", logdir,
          "--run-name", "s"])
    return os.path.join(logdir, "s")


@pytest.fixture(scope="module")
def half(tmp_path_factory):
    """A sweep whose second setting (lr=1e20) diverged and was checkpointed as it was."""
    return sweep(tmp_path_factory, "lr=2.5e-4,1e20")


@pytest.fixture(scope="module")
def every(tmp_path_factory):
    """A sweep whose every agent diverged."""
    return sweep(tmp_path_factory, "lr=1e20,1e21")


def test_the_sweep_checkpointed_a_nan_agent(half):
    """What the defect played: the checkpoint holds agent 1's NaN parameters."""
    ckpt = load_checkpoint(half)
    leaves = [np.asarray(x) for x in jax.tree.leaves(ckpt.runner_state.train_state)]
    assert any(not np.isfinite(x[1]).all() for x in leaves if x.dtype.kind == "f")


def test_eval_names_a_diverged_agent_and_gives_it_no_return(half, capsys):
    capsys.readouterr()
    code = main(["eval", half, "--episodes", "2"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "seed 1: diverged" in out and "no return" in out
    err = err.splitlines()
    data = json.load(open(os.path.join(half, "eval.json")))
    assert data["diverged_runs"] == [1] and data["mean_per_run"][1] is None
    assert data["returns"][1] == [None, None] and data["mean_per_run"][0] is not None
    assert any("1 of 2 agents diverged" in line for line in err), err
    code, err = run_cli(capsys, ["eval", half, "--agent", "1"])
    assert code == 3 and len(err) == 1 and "Traceback" not in err[0], err
    assert "agent 1 diverged" in err[0] and "--agent 0" in err[0] and "--include-diverged" in err[0]
    code, err = run_cli(capsys, ["eval", half, "--agent", "1", "--include-diverged",
                                 "--no-json"])
    assert code == 0, err


def test_load_policy_refuses_a_diverged_agent_unless_asked(half):
    with pytest.raises(DivergedAgent, match=r"agent 1 of .* diverged.*pick one that did not: 0"):
        load_policy(half, 1)
    assert load_policy(half, 0).seed == 0
    assert load_policy(half, 1, include_diverged=True).seed == 1
    played = evaluate(half, 2, include_diverged=True)
    assert played.diverged == {1: played.diverged[1]} and played.mean_per_run()[1] is not None


def test_report_gives_a_diverged_agent_no_score(half, tmp_path):
    for source in ("final", "auto"):  # summary.json's final return, then eval.json's
        if source == "auto":
            evaluate(half, 2, out=os.path.join(half, "eval.json"))
        rep = report([half], out=str(tmp_path / source), reps=50, source=source)
        [row] = [r for r in rep.data["groups"] if r["label"].endswith(": lr=1e+20")]
        assert row["seeds"] == 0 and row["diverged_runs"] == [1] and row["missing"] == 0
        assert row["stats"] == {}
        assert "1 diverged" in rep.table() and any("diverged" in n for n in rep.data["notes"])


def test_every_agent_diverged_is_refused_by_eval_and_gets_no_report_row(every, capsys,
                                                                        tmp_path):
    code, err = run_cli(capsys, ["eval", every, "--episodes", "2"])
    assert code == 3 and len(err) == 1 and "Traceback" not in err[0], err
    assert "every agent diverged (2 of 2" in err[0] and "--include-diverged" in err[0]
    assert json.load(open(os.path.join(every, "eval.json")))["mean_per_run"] == [None, None]
    rep = report([every], out=str(tmp_path / "r"), reps=50)
    assert all(r["seeds"] == 0 and r["stats"] == {} for r in rep.data["groups"])
    assert rep.data["aggregate"] is None
