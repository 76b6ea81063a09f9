"""Static keys in a sweep (`--grid num_minibatches=1,2`, a random search's choices) end to end:
one compile per group, one table over all, a resume after a stop in the middle group, eval of a
group's agents, an edited plan refused. Its pure pieces:
tests/unit/search/test_static_sweep_pieces.py."""

import contextlib
import csv
import io
import json
import os
import shutil

import numpy as np
import pytest
from conftest import ROOT, compile_exactly, run_cli

import jaxppo
from jaxppo import load_config
from jaxppo.config import parse_overrides
from jaxppo.errors import UsageError
from jaxppo.run.driver import Driver
from jaxppo.rundir.plan import FILE as PLAN
from jaxppo.search.sweep import resume_sweep, sweep

pytestmark = pytest.mark.usefixtures("compile_cache")
CARTPOLE = os.path.join(ROOT, "configs", "cartpole.yaml")
# 8 updates of 4 envs x 16 steps
SETS = ["total_timesteps=512", "num_envs=4", "num_steps=16", "hidden_sizes=[16,16]"]
TINY = [a for s in SETS for a in ("--set", s)] + ["--no-tensorboard", "--no-progress"]
GRID = {"num_minibatches": [1, 2, 4], "lr": [1e-3, 3e-4]}
GRID_CLI = ["--grid", "num_minibatches=1,2,4", "--grid", "lr=1e-3,3e-4"]


def count_compiles(mp) -> list[int]:
    """From here on (under `mp`), each `Driver.compile` call's agent count: how many programs'
    sets each `Experiment` compiled, in order."""
    calls = []
    real = Driver.compile

    def counted(self, *args, **kwargs):
        calls.append(self.num_runs)
        return real(self, *args, **kwargs)

    mp.setattr(Driver, "compile", counted)
    return calls


@pytest.fixture
def compiles(monkeypatch):
    """How many programs' sets each `Experiment` of the test compiled (`count_compiles`)."""
    return count_compiles(monkeypatch)


def config():
    return load_config(CARTPOLE, parse_overrides(SETS))


# -- end to end --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cli_sweep(tmp_path_factory):
    """`jaxppo sweep --grid num_minibatches=1,2,4 --grid lr=1e-3,3e-4`, uninterrupted, and the
    number of compiles it took."""
    tmp = tmp_path_factory.mktemp("static")
    with pytest.MonkeyPatch.context() as mp:
        calls = count_compiles(mp)
        compile_exactly(mp)  # an exact test compares against it
        with contextlib.redirect_stdout(io.StringIO()) as out:
            code = jaxppo.cli.main(["sweep", "--config", CARTPOLE, *TINY, *GRID_CLI,
                                    "--logdir", str(tmp), "--run-name", "cli"])
    assert code == 0
    assert "3 static settings: 3 compiles" in out.getvalue()
    return os.path.join(str(tmp), "cli"), calls


def test_a_grid_over_a_static_key_compiles_once_per_static_setting(cli_sweep):
    run_dir, calls = cli_sweep
    assert calls == [2, 2, 2]  # 3 static settings, each one program of its 2 lr settings
    rows = list(csv.DictReader(open(os.path.join(run_dir, "sweep.csv"), encoding="utf-8")))
    assert sorted((int(r["num_minibatches"]), float(r["lr"])) for r in rows) == sorted(
        (m, lr) for m in GRID["num_minibatches"] for lr in GRID["lr"])
    summary = json.load(open(os.path.join(run_dir, "summary.json")))
    assert summary["status"] == "finished" and summary["static_settings"] == 3
    assert [r["rank"] for r in summary["ranked"]] == [1, 2, 3, 4, 5, 6]
    assert {r["updates"] for r in rows} == {"8"}  # each setting's own count (512 / 64)
    for r in rows:  # each row's runs are its group's agents of that setting
        group = os.path.join(run_dir, r["group"])
        assert load_config(os.path.join(group, "config.yaml")).num_minibatches == int(
            r["num_minibatches"])
        s = json.load(open(os.path.join(group, "summary.json")))
        runs = [int(x) for x in r["runs"].split()]
        assert [s["settings"][i]["lr"] for i in runs] == [float(r["lr"])]
        assert float(r["final_return_mean"]) == pytest.approx(
            np.mean([s["final_return"][i] for i in runs]), abs=1e-4)
    assert os.path.isfile(os.path.join(run_dir, PLAN))
    assert os.path.isfile(os.path.join(run_dir, "sweep.png"))


def test_a_group_s_agents_evaluate_and_load(cli_sweep, capsys):
    run_dir, _ = cli_sweep
    summary = json.load(open(os.path.join(run_dir, "summary.json")))
    best = summary["ranked"][0]
    group = os.path.join(run_dir, best["group"])
    code, err = run_cli(capsys, ["eval", group, "--episodes", "2", "--seed", "3", "--no-json"])
    assert code == 0, err
    policy = jaxppo.load_policy(group, seed=best["runs"][0])
    assert policy.config.num_minibatches == best["setting"]["num_minibatches"]
    assert policy.act(np.zeros(4, np.float32)).shape == ()
    # the sweep's own directory is not a run: one line naming a group to evaluate
    code, err = run_cli(capsys, ["eval", run_dir])
    assert code == 2 and len(err) == 1 and "jaxppo eval " + run_dir + "/000_" in err[0], err


@pytest.fixture(scope="module")
def stopped_sweep(tmp_path_factory):
    """The sweep of `GRID` stopped at update 3 of its second static setting, compiled as the
    exact resume test compares against it: (run dir, the stopped sweep's table, the compiles
    it took). Never written to: each test copies it (`copy_of`)."""
    tmp = tmp_path_factory.mktemp("stopped")
    stop = lambda e: not (e.info.config.num_minibatches == 2 and e.update >= 3)  # noqa: E731
    with pytest.MonkeyPatch.context() as mp:
        calls = count_compiles(mp)
        compile_exactly(mp)
        stopped = sweep(config(), GRID, seed=0, logdir=str(tmp), run_name="api",
                        progress=False, tensorboard=False, checkpoint_every=1, callbacks=[stop])
    return os.path.join(str(tmp), "api"), stopped, calls


def copy_of(run_dir: str, tmp_path) -> str:
    dst = os.path.join(str(tmp_path), os.path.basename(run_dir))
    shutil.copytree(run_dir, dst)
    return dst


@pytest.mark.exact
def test_resume_after_a_stop_in_the_middle_group(cli_sweep, stopped_sweep, tmp_path, compiles):
    """Stopped at update 3 of the second static setting: the resume skips the first (no
    compile, its files untouched), resumes the second, starts the third, and its table
    equals the uninterrupted sweep's."""
    original, stopped, calls = stopped_sweep
    run_dir = copy_of(original, tmp_path)
    assert calls == [2, 2]
    assert stopped.result.status == "stopped" and stopped.summary["status"] == "stopped"
    assert not os.path.exists(os.path.join(run_dir, "sweep.csv"))
    first = os.path.join(run_dir, "000_num_minibatches=1", "checkpoint", "checkpoint.msgpack")
    before = os.stat(first).st_mtime_ns
    assert not os.path.exists(os.path.join(run_dir, "002_num_minibatches=4"))
    # the third was killed before its first checkpoint: kept aside, started again
    third = os.path.join(run_dir, "002_num_minibatches=4")
    os.makedirs(third)
    open(os.path.join(third, "metrics.csv"), "w").write("update,run\n1,0\n")
    del compiles[:]
    table = resume_sweep(run_dir, progress=False, tensorboard=False)
    assert compiles == [2, 2]  # the stopped group and the one not started; not the first
    assert os.stat(first).st_mtime_ns == before
    assert open(os.path.join(third + ".unfinished", "metrics.csv")).read() == "update,run\n1,0\n"
    assert table.summary["status"] == "finished"
    whole = json.load(open(os.path.join(cli_sweep[0], "summary.json")))
    resumed = json.load(open(os.path.join(run_dir, "summary.json")))
    for key in ("settings", "ranked"):
        assert resumed[key] == whole[key], key
    for g in ("001_num_minibatches=2", "002_num_minibatches=4"):
        a = json.load(open(os.path.join(cli_sweep[0], g, "summary.json")))
        b = json.load(open(os.path.join(run_dir, g, "summary.json")))
        assert a["final_return"] == b["final_return"], g
    with pytest.raises(UsageError, match="finished.*nothing to resume"):
        resume_sweep(run_dir, progress=False)


def test_each_setting_reports_its_own_update_count(tmp_path):
    """num_envs is static and sets num_updates (512 steps: 16 updates of 2 x 16, 8 of 4 x 16):
    each row's `updates` is its own group's, whatever the rank order."""
    table = sweep(config(), {"num_envs": [2, 4], "lr": [1e-3, 3e-4]}, logdir=str(tmp_path),
                  run_name="envs", progress=False, tensorboard=False)
    rows = list(csv.DictReader(open(tmp_path / "envs" / "sweep.csv", encoding="utf-8")))
    assert sorted((int(r["num_envs"]), int(r["updates"])) for r in rows) == [
        (2, 16), (2, 16), (4, 8), (4, 8)]
    assert {r["updates"] for r in table.rows} == {16, 8}


@pytest.mark.parametrize("edit,words", [
    (lambda plan: plan["config"].update(total_timesteps=1024),
     ["000_num_minibatches=1: total_timesteps", "not what the group trained with"]),
    (lambda plan: plan.update(seed=7), ["its checksum fails"]),
], ids=["config", "seed"])
def test_an_edited_plan_is_refused_on_resume(stopped_sweep, tmp_path, capsys, edit, words):
    """Reproduction (issue #36): static_sweep.json edited (a group's total_timesteps) was
    resumed, and groups trained to different lengths were ranked in one table. On a copy of
    the stopped sweep the resume test resumes."""
    run_dir = copy_of(stopped_sweep[0], tmp_path)
    path = os.path.join(run_dir, PLAN)
    plan = json.load(open(path))
    assert "sha256" in plan
    edit(plan)
    open(path, "w").write(json.dumps(plan, indent=2))
    before = sorted(os.listdir(run_dir))
    code, err = run_cli(capsys, ["sweep", "--resume", run_dir, "--no-progress"])
    assert code == 2 and len(err) == 1 and "Traceback" not in err[0], err
    for w in ["static_sweep.json' was edited since the sweep started", *words]:
        assert w in err[0], (w, err[0])
    assert sorted(os.listdir(run_dir)) == before  # nothing ran, nothing written
