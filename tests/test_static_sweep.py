"""Static keys in a sweep (`--grid num_minibatches=1,2`, a random search's choices): the
settings grouped by their static values (pure), one compile per group, one table over all,
a resume after a stop in the middle group, eval of a group's agents, and bad input (one
line, exit 2, nothing written)."""

import contextlib
import csv
import io
import json
import os

import numpy as np
import pytest
from conftest import assert_sweep_refused, compile_exactly, run_cli

import jaxppo
from jaxppo import ConfigError, load_config
from jaxppo.config import parse_overrides
from jaxppo.errors import UsageError
from jaxppo.labels import setting_label
from jaxppo.run.driver import Driver
from jaxppo.run.sweep_table import rank_settings
from jaxppo.search import parse_grid, parse_space, random_search
from jaxppo.search.static import group_rows, group_settings, normalize, split_values
from jaxppo.search.static_sweep import PLAN
from jaxppo.search.sweep import resume_sweep, sweep

pytestmark = pytest.mark.usefixtures("compile_cache")
ROOT = os.path.dirname(os.path.dirname(__file__))
CARTPOLE = os.path.join(ROOT, "configs", "cartpole.yaml")
# 8 updates of 4 envs x 16 steps
SETS = ["total_timesteps=512", "num_envs=4", "num_steps=16", "hidden_sizes=[16,16]"]
TINY = [a for s in SETS for a in ("--set", s)] + ["--no-tensorboard", "--no-progress"]
GRID = {"num_minibatches": [1, 2, 4], "lr": [1e-3, 3e-4]}
GRID_CLI = ["--grid", "num_minibatches=1,2,4", "--grid", "lr=1e-3,3e-4"]


@pytest.fixture
def compiles(monkeypatch):
    """How many programs' sets each `Experiment` compiled (`Driver.compile` calls)."""
    calls = []
    real = Driver.compile

    def counted(self, *args, **kwargs):
        calls.append(self.num_runs)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Driver, "compile", counted)
    return calls


def config():
    return load_config(CARTPOLE, parse_overrides(SETS))


@pytest.mark.unit
# -- pure: parsing, normalising, grouping --------------------------------------------------
def test_values_split_at_top_level_commas_and_read_as_set_reads_them():
    assert split_values("[64,64],[256, 256]") == ["[64,64]", "[256, 256]"]
    grid = parse_grid(["num_minibatches=2,4", "hidden_sizes=[64,64],[8]", "lr=1e-3,3e-4",
                       "activation=tanh,relu", "norm_adv=true,false", "target_kl=null,0.02"])
    assert grid == {"num_minibatches": [2, 4], "hidden_sizes": [[64, 64], [8]],
                    "lr": [1e-3, 3e-4], "activation": ["tanh", "relu"],
                    "norm_adv": [True, False], "target_kl": [None, 0.02]}
    assert setting_label({"hidden_sizes": [64, 64], "norm_adv": False, "target_kl": None,
                          "lr": 1e-3}) == "hidden_sizes=64x64,norm_adv=false,target_kl=null,lr=0.001"


@pytest.mark.unit
def test_settings_group_by_their_static_values_as_the_config_holds_them():
    settings = normalize(config(), [
        {"num_minibatches": 2, "lr": 1e-3, "hidden_sizes": (8, 8)},
        {"num_minibatches": 4, "lr": 1e-3, "hidden_sizes": [8, 8]},
        {"num_minibatches": 2.0, "lr": 3e-4, "hidden_sizes": [8, 8]},  # 2.0 is the int 2
        {"num_minibatches": 4, "lr": 3e-4, "hidden_sizes": (8, 8)}])
    assert settings[2] == {"num_minibatches": 2, "lr": 3e-4, "hidden_sizes": [8, 8]}
    groups = group_settings(settings)
    assert [(g.name, g.static, g.indices) for g in groups] == [
        ("000_num_minibatches=2,hidden_sizes=8x8", {"num_minibatches": 2, "hidden_sizes": [8, 8]},
         [0, 2]),
        ("001_num_minibatches=4,hidden_sizes=8x8", {"num_minibatches": 4, "hidden_sizes": [8, 8]},
         [1, 3])]
    # the table over all settings, each row placed in its group: runs index that run dir
    final = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0])  # 2 seeds per setting
    rows = group_rows(rank_settings(settings, final, np.zeros(8, bool), 2), groups, 2,
                      range(4))
    assert [(r["setting"]["lr"], r["group"][:3], r["runs"]) for r in rows] == [
        (3e-4, "001", [2, 3]), (3e-4, "000", [2, 3]), (1e-3, "001", [0, 1]),
        (1e-3, "000", [0, 1])]


@pytest.mark.unit
def test_a_random_search_draws_static_choices_as_values():
    settings, record = random_search(config(), {"num_minibatches": [1, 2],
                                                "hidden_sizes": [[8], [16, 16]],
                                                "lr": (1e-4, 1e-2, "log")}, 12, seed=3)
    assert {s["num_minibatches"] for s in settings} == {1, 2}
    assert all(type(s["num_minibatches"]) is int for s in settings)
    assert {tuple(s["hidden_sizes"]) for s in settings} == {(8,), (16, 16)}
    assert 2 <= len(group_settings(settings)) <= 4
    assert record["space"]["num_minibatches"] == {"choices": [1, 2]}
    assert parse_space(["hidden_sizes=[8],[16,16]"]) == {
        "hidden_sizes": ("choice", [[8], [16, 16]])}


# -- bad input: one line, exit 2, nothing written --------------------------------------------
BAD_CLI = {  # argv after the config, culprits the one line must name
    "unknown key": (["--grid", "lrr=1e-3,1e-4"], ["--grid lrr", "did you mean 'lr'"]),
    "invalid static value": (["--grid", "num_minibatches=2,3"],
                             ["--grid num_minibatches=3", "divisor of 512"]),
    "invalid combination": (["--grid", "network=feedforward,gru", "--grid", "num_minibatches=8"],
                            ["network=gru,num_minibatches=8", "num_envs"]),
    "invalid static choice": (["--search", "random", "--trials", "2", "--space",
                               "activation=tanh,relu6"], ["--space activation", "relu6"]),
    "static range": (["--search", "random", "--trials", "2", "--space", "num_minibatches=2:8"],
                     ["--space num_minibatches=2:8", "static", "choices"]),
    "unparsable value": (["--grid", "hidden_sizes=[16,"], ["--grid hidden_sizes", "[16,"]),
    "empty value": (["--grid", "num_minibatches=2,,4"], ["--grid num_minibatches", "empty"]),
    "env_id": (["--grid", "env_id=CartPole-v1,Acrobot-v1"], ["--grid env_id", "one sweep per"]),
    "a later group cannot fit": (["--grid", "hidden_sizes=[16],[4096,4096,4096]", "--set",
                                  "num_envs=4096", "--set", "total_timesteps=10000000",
                                  "--seeds", "64"],
                                 ["static setting hidden_sizes=4096x4096x4096", "memory"]),
}


@pytest.mark.unit
@pytest.mark.parametrize("name", list(BAD_CLI))
def test_bad_static_input_is_one_line_and_writes_nothing(tmp_path, capsys, monkeypatch, name):
    argv, culprits = BAD_CLI[name]
    # the memory check reads the host's free RAM: fixed here (the first group of "a later
    # group cannot fit" needs ~14 GiB, the second far more), whatever else the machine runs
    monkeypatch.setattr("jaxppo.run.memory.host_available", lambda: 18 * 2**30)
    assert_sweep_refused(capsys, tmp_path, ["--config", CARTPOLE, *argv], culprits)


@pytest.mark.unit
@pytest.mark.parametrize("kwargs", [
    dict(grid={"lrr": [1e-3]}),
    dict(grid={"num_minibatches": [2, 3]}),
    dict(grid={"hidden_sizes": [[16], []]}),
    dict(space={"num_minibatches": (2, 8)}, search="random", trials=2),
], ids=["unknown", "invalid", "empty-hidden", "static-range"])
def test_python_api_refuses_bad_static_settings(tmp_path, kwargs):
    with pytest.raises(ConfigError):
        sweep(config(), logdir=str(tmp_path), progress=False, **kwargs)
    assert os.listdir(tmp_path) == []


# -- end to end --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cli_sweep(tmp_path_factory):
    """`jaxppo sweep --grid num_minibatches=1,2,4 --grid lr=1e-3,3e-4`, uninterrupted, and the
    number of compiles it took."""
    tmp = tmp_path_factory.mktemp("static")
    calls = []
    real = Driver.compile

    def counted(self, *args, **kwargs):
        calls.append(self.num_runs)
        return real(self, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Driver, "compile", counted)
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


@pytest.mark.exact
def test_resume_after_a_stop_in_the_middle_group(cli_sweep, tmp_path, compiles):
    """Stopped at update 3 of the second static setting: the resume skips the first (no
    compile, its files untouched), resumes the second, starts the third, and its table
    equals the uninterrupted sweep's."""
    stop = lambda e: not (e.info.config.num_minibatches == 2 and e.update >= 3)  # noqa: E731
    stopped = sweep(config(), GRID, seed=0, logdir=str(tmp_path), run_name="api",
                    progress=False, tensorboard=False, checkpoint_every=1, callbacks=[stop])
    run_dir = os.path.join(str(tmp_path), "api")
    assert compiles == [2, 2]
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
def test_an_edited_plan_is_refused_on_resume(tmp_path, capsys, edit, words):
    """Reproduction (issue #36): static_sweep.json edited (a group's total_timesteps) was
    resumed, and groups trained to different lengths were ranked in one table."""
    stop = lambda e: not (e.info.config.num_minibatches == 2 and e.update >= 3)  # noqa: E731
    sweep(config(), GRID, seed=0, logdir=str(tmp_path), run_name="api", progress=False,
          tensorboard=False, checkpoint_every=1, callbacks=[stop])
    run_dir = os.path.join(str(tmp_path), "api")
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
