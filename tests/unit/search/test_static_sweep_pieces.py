"""Static keys in a sweep, the pure pieces: values split as `--set` reads them, settings grouped
by their static values, a random search's static choices, and bad input (one line, exit 2,
nothing written). The sweeps themselves: tests/integration/test_static_sweep.py."""

import os

import numpy as np
import pytest
from conftest import ROOT, assert_sweep_refused

from jaxppo import ConfigError, load_config
from jaxppo.config import parse_overrides
from jaxppo.labels import setting_label
from jaxppo.run.sweep_table import rank_settings
from jaxppo.search import parse_grid, parse_space, random_search
from jaxppo.search.static import group_rows, group_settings, normalize, split_values
from jaxppo.search.sweep import sweep

pytestmark = pytest.mark.usefixtures("compile_cache")
CARTPOLE = os.path.join(ROOT, "configs", "cartpole.yaml")
# 8 updates of 4 envs x 16 steps
SETS = ["total_timesteps=512", "num_envs=4", "num_steps=16", "hidden_sizes=[16,16]"]


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
