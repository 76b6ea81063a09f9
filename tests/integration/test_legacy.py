"""Run directories written by earlier jaxppo still load, evaluate (`--agent` included), report
and resume to their end with today's code. Three sets of the same runs: tests/fixtures/legacy/
(made at a5deb3c, before the package was rebuilt, by `made_by.py` there), tests/fixtures/e15eca6/
(the same script run by e15eca6, before the key forms, the two JAX lines and fault rounds 4-5)
and tests/fixtures/189469b/ (by main just before the run directory got its layer, jaxppo/rundir/):
a training run, a grid, a PBT, a halving and a static sweep, a GRU run and a Gymnasium host-env
run. Only what a user relies on is asserted (exit status, how far each agent got, the files and
their rows), never a trajectory: the fixtures' kernels were picked on another CPU."""

import csv
import json
import os
import shutil

import numpy as np
import pytest
from conftest import FIXTURES, run_cli

from jaxppo import load_checkpoint, load_policy
from jaxppo.cli import main
from jaxppo.rundir.reader import RunDir

MADE_AT = ("legacy", "e15eca6", "189469b")
"""The fixture sets (folders of tests/fixtures/), each written by an earlier jaxppo."""
UPDATES = 12  # every fixture: 12 updates of 64 env steps, stopped at 4 (PBT 6, halving 8)


@pytest.fixture(params=MADE_AT)
def made_at(request) -> str:
    """The fixture set a test reads (each test runs on every set)."""
    return request.param


def copy(name: str, tmp_path, made_at: str) -> str:
    """A writable copy of a fixture (a resume writes into its run directory)."""
    dst = tmp_path / name
    shutil.copytree(os.path.join(FIXTURES, made_at, name), dst)
    return str(dst)


def rows(run: str, name: str = "metrics.csv") -> list[dict]:
    with open(os.path.join(run, name), newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def summary(run: str) -> dict:
    with open(os.path.join(run, "summary.json"), encoding="utf-8") as f:
        return json.load(f)


def resume(capsys, verb: str, run: str) -> list[str]:
    code, err = run_cli(capsys, [verb, "--resume", run, "--no-progress"])
    assert code == 0, err
    return err


def evaluate(capsys, run: str, *extra: str) -> str:
    """What `jaxppo eval RUN --episodes 2 ...` prints (it must succeed)."""
    capsys.readouterr()
    code = main(["eval", run, "--episodes", "2", *extra])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


@pytest.mark.parametrize("name, verb, runs", [
    ("train_2seeds_stopped", "train", 2),
    ("grid_stopped", "sweep", 4),
    ("gru_stopped", "train", 1),
])
def test_a_stopped_run_resumes_to_its_end_and_evaluates(tmp_path, capsys, made_at, name, verb, runs):
    run = copy(name, tmp_path, made_at)
    before = load_checkpoint(run)
    assert before.update < UPDATES and before.num_runs == runs
    resume(capsys, verb, run)
    after = load_checkpoint(run)
    assert after.update == UPDATES and after.num_runs == runs
    assert after.record.seed == before.record.seed
    assert after.record.settings == before.record.settings
    s = summary(run)
    assert s["status"] == "finished" and s["num_runs"] == runs
    assert len(s["final_return"]) == runs
    logged = [(int(r["update"]), int(r["run"])) for r in rows(run)]
    assert sorted(logged) == [(u, r) for u in range(1, UPDATES + 1) for r in range(runs)]
    steps = np.asarray(after.runner_state.train_state.step).reshape(-1)
    assert (steps == UPDATES).all()
    assert "return" in evaluate(capsys, run)
    assert f"agent {runs - 1}:" in evaluate(capsys, run, "--agent", str(runs - 1))
    if verb == "sweep":
        table = rows(run, "sweep.csv")
        assert len(table) == 2 and {int(t["updates"]) for t in table} == {UPDATES}


def test_a_finished_run_evaluates_and_refuses_a_resume(tmp_path, capsys, made_at):
    run = copy("train_2seeds_finished", tmp_path, made_at)
    out = evaluate(capsys, run, "--agent", "1")
    assert "agent 1:" in out and f"update {UPDATES}" in out
    code, err = run_cli(capsys, ["train", "--resume", run])
    assert code == 2 and "is finished" in err[0]
    policy = load_policy(run, seed=1)
    assert policy.act(np.zeros(4, np.float32)).shape == ()
    code, err = run_cli(capsys, ["report", run, "--reps", "50"])
    assert code == 0, err
    # a lost summary.json is rebuilt from the old checkpoint's account, nothing trained
    os.remove(os.path.join(run, "summary.json"))
    resume(capsys, "train", run)
    assert summary(run)["rebuilt_from_checkpoint"] is True


def test_a_pbt_sweep_resumes_its_exploits_and_evaluates_a_member(tmp_path, capsys, made_at):
    run = copy("pbt_stopped", tmp_path, made_at)
    before = load_checkpoint(run)
    assert before.update == 6 and before.record.controller is not None
    exploits_before = [int(r["update"]) for r in rows(run, "pbt.csv")]
    assert exploits_before and max(exploits_before) <= 6
    code, err = run_cli(capsys, ["train", "--resume", run])  # a PBT sweep is the sweep's
    assert code == 2 and "jaxppo sweep --resume" in err[0]
    tb = sorted(os.listdir(os.path.join(run, "tb")))  # named by the members' first settings
    resume(capsys, "sweep", run)
    # today's PBT names its TensorBoard folders agent_000, ...; an older run goes on in its own
    assert sorted(os.listdir(os.path.join(run, "tb"))) == tb
    assert load_checkpoint(run).update == UPDATES
    exploits = [int(r["update"]) for r in rows(run, "pbt.csv")]
    assert exploits[:len(exploits_before)] == exploits_before  # the old rows, kept
    assert max(exploits) == 10  # every 2 updates, none at the end
    hp = rows(run, "hparams.csv")
    assert sorted({int(r["update"]) for r in hp}) == [0, 2, 4, 6, 8, 10]
    s = summary(run)
    assert s["status"] == "finished" and s["pbt"]["exploits"] == len(exploits)
    assert "agent 2:" in evaluate(capsys, run, "--agent", "2")


def test_a_halving_sweep_resumes_its_rungs(tmp_path, capsys, made_at):
    run = copy("halving_stopped", tmp_path, made_at)
    before = load_checkpoint(run)
    assert before.update == 8 and before.record.search["rungs"] == [3, 6, 12]
    kept_before = before.record.search["kept"]
    assert [len(k) for k in kept_before] == [4, 2, 1]
    # no ledger in a record this old: derived on read from its rungs, at its update 8
    went = {g: 3 for g in range(4)} | {g: 6 for g in kept_before[1]} | {kept_before[2][0]: 8}
    assert before.record.ledger is None
    assert [a.updates for a in RunDir(run).status()] == [went[g] for g in range(4)]
    resume(capsys, "sweep", run)
    after = load_checkpoint(run)
    assert after.update == UPDATES and after.record.search["kept"] == kept_before
    went[kept_before[2][0]] = UPDATES
    steps = np.asarray(after.runner_state.train_state.step).tolist()
    assert steps == [went[g] for g in range(4)]
    assert after.record.ledger["updates"] == steps  # the resumed run's checkpoint keeps it
    per_run = {}
    for r in rows(run):
        per_run[int(r["run"])] = per_run.get(int(r["run"]), 0) + 1
    assert per_run == went
    table = rows(run, "sweep.csv")
    assert [int(t["updates"]) for t in table] == sorted(went.values(), reverse=True)
    stopped = next(g for g in range(4) if g not in kept_before[1])
    assert "update 3" in evaluate(capsys, run, "--agent", str(stopped))


def test_a_static_sweep_resumes_its_groups(tmp_path, capsys, made_at):
    run = copy("static_stopped", tmp_path, made_at)
    resume(capsys, "sweep", run)
    s = summary(run)
    assert s["status"] == "finished" and s["static_settings"] == 2
    assert [g["status"] for g in s["groups"]] == ["finished", "finished"]
    for g in s["groups"]:
        assert load_checkpoint(os.path.join(run, g["run_dir"])).update == UPDATES
    assert len(rows(run, "sweep.csv")) == 2


def test_a_host_env_run_resumes_with_fresh_episodes(tmp_path, capsys, made_at):
    pytest.importorskip("gymnasium")
    run = copy("gymnasium_stopped", tmp_path, made_at)
    err = resume(capsys, "train", run)
    assert any("every episode started afresh" in line for line in err), err
    assert load_checkpoint(run).update == UPDATES
    assert summary(run)["status"] == "finished"


@pytest.mark.parametrize("name", ["train_2seeds_stopped", "train_2seeds_finished", "grid_stopped",
                                  "gru_stopped", "pbt_stopped", "halving_stopped"])
def test_every_old_run_directory_reads_through_one_reader(made_at, name):
    """Config, record, each agent's status (derived: no record this old holds a ledger) and the
    scores its files hold, read without building a search's controller."""
    rd = RunDir(os.path.join(FIXTURES, made_at, name))
    ckpt = load_checkpoint(rd.path)
    assert rd.config["env_id"] == ckpt.config.env_id and rd.update == ckpt.update
    assert rd.record == ckpt.record and rd.record.ledger is None
    status = rd.status()
    assert [a.run for a in status] == list(range(ckpt.num_runs))
    assert all(0 < a.updates <= ckpt.update for a in status)
    assert all(a.diverged is None for a in status)  # no fixture diverged
    scores = rd.scores()
    if os.path.exists(rd.file("summary.json")):
        assert len(scores["summary.json"]) == ckpt.num_runs
    assert rd.curves()["update"].shape[0] == ckpt.num_runs
