"""Population-based training's pure pieces: the draws' reproducibility, the ranking, explore
inside the space, the window and chunk arithmetic, and the bad inputs (one line, exit 2,
nothing written). A PBT sweep end to end: tests/integration/test_pbt.py."""

import os
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import assert_sweep_refused
from pbt_setup import CARTPOLE, SPACE, SPACE_ARGS, TINY, pbt_config

from jaxppo import ConfigError
from jaxppo.search import draw_settings, parse_space
from jaxppo.search.pbt import (
    PBTController,
    choose_exploits,
    explore,
    pbt_search,
    recent_return,
    space_from_record,
)
from jaxppo.search.sweep import sweep


@pytest.mark.unit
def test_draws_are_reproducible_from_the_seed():
    config = pbt_config()
    a, record = pbt_search(config, SPACE, 8, 2, 0.25, seed=7)
    assert a == pbt_search(config, SPACE, 8, 2, 0.25, seed=7)[0]
    assert a != pbt_search(config, SPACE, 8, 2, 0.25, seed=8)[0]
    assert a == draw_settings(parse_space(SPACE_ARGS), 8, 7)  # a random search's draw
    assert record == {"strategy": "pbt", "population": 8, "interval": 2, "quantile": 0.25,
                      "seed": 7, "space": {"lr": [1e-4, 1e-2, "log"], "ent_coef": [0.0, 0.02],
                                           "clip_eps": {"choices": [0.1, 0.2, 0.3]}}}
    assert space_from_record(record["space"]) == parse_space(SPACE_ARGS)


@pytest.mark.unit
def test_ranking_puts_no_return_and_diverged_last():
    # member 0: no update with a return; 3: went NaN/Inf in the window
    recent = recent_return(np.array([0.0, 30.0, 90.0, 500.0, 60.0, 10.0, 70.0, 80.0]),
                           np.array([0, 2, 2, 2, 2, 2, 2, 2]),
                           np.array([False, False, False, True, False, False, False, False]))
    assert np.isnan(recent[[0, 3]]).all() and recent[2] == 45.0
    pairs = choose_exploits(recent, 0.25, np.random.default_rng(0))
    assert sorted(c for c, _ in pairs) == [0, 3]  # bottom 2 of 8: the two without a return
    assert all(p in (2, 7) for _, p in pairs)  # parents from the top 2 (45 and 40)
    assert choose_exploits(recent, 0.25, np.random.default_rng(0)) == pairs
    # at least one member, and nothing to prefer when no member has a return
    assert [c for c, _ in choose_exploits(np.array([1.0, 2.0, 3.0]), 0.1,
                                          np.random.default_rng(0))] == [0]
    assert choose_exploits(np.full(4, np.nan), 0.5, np.random.default_rng(0)) == []
    pairs = choose_exploits(np.array([1.0, 2.0, 3.0, 4.0]), 0.5, np.random.default_rng(1))
    assert [c for c, _ in pairs] == [0, 1] and {p for _, p in pairs} <= {2, 3}


@pytest.mark.unit
def test_explore_stays_inside_the_space():
    space = parse_space(SPACE_ARGS)
    rng = np.random.default_rng(0)
    for setting in draw_settings(space, 300, seed=1) + [
            {"lr": 1e-4, "ent_coef": 0.02, "clip_eps": 0.1},
            {"lr": 1e-2, "ent_coef": 0.0, "clip_eps": 0.3}]:
        new = explore(setting, space, rng)
        assert set(new) == set(setting)
        assert 1e-4 <= new["lr"] <= 1e-2 and 0.0 <= new["ent_coef"] <= 0.02
        for key, low, high in (("lr", 1e-4, 1e-2), ("ent_coef", 0.0, 0.02)):
            ratio = new[key] / setting[key] if setting[key] else 1.0
            # x0.8 or x1.2, unless clipped into the bounds
            assert (np.isclose(ratio, 0.8) or np.isclose(ratio, 1.2) or new[key] in (low, high)
                    or setting[key] == 0.0), (key, setting[key], new[key])
        # a neighbouring choice (from an end: the only neighbour)
        assert abs(new["clip_eps"] - setting["clip_eps"]) == pytest.approx(0.1)


BAD = {  # (argv after the config, culprits the one line must name)
    "population 1": (["--search", "pbt", "--population", "1", "--space", "lr=1e-4:1e-2"],
                     ["--population 1", "at least 2"]),
    "no population": (["--search", "pbt", "--space", "lr=1e-4:1e-2"], ["--population"]),
    "empty space": (["--search", "pbt", "--population", "4"], ["--space"]),
    "static key": (["--search", "pbt", "--population", "4", "--interval", "4", "--space",
                    "num_envs=4,8"],
                   ["--space num_envs", "lr, gamma", "--search pbt"]),
    "trials": (["--search", "pbt", "--population", "4", "--trials", "3", "--space",
                "lr=1e-4:1e-2"], ["--trials", "--search pbt"]),
    "grid": (["--search", "pbt", "--population", "4", "--grid", "lr=1e-3"], ["--grid"]),
    "interval 0": (["--search", "pbt", "--population", "4", "--interval", "0", "--space",
                    "lr=1e-4:1e-2"], ["--interval 0", "1..7"]),
    "interval too long": (["--search", "pbt", "--population", "4", "--interval", "8", "--space",
                           "lr=1e-4:1e-2"], ["--interval 8", "8 updates"]),
    "quantile 0": (["--search", "pbt", "--population", "4", "--quantile", "0", "--interval",
                    "2", "--space", "lr=1e-4:1e-2"], ["--quantile 0", "(0, 0.5]"]),
    "quantile 0.6": (["--search", "pbt", "--population", "4", "--quantile", "0.6", "--interval",
                      "2", "--space", "lr=1e-4:1e-2"], ["--quantile 0.6"]),
    "seeds": (["--search", "pbt", "--population", "4", "--seeds", "2", "--space",
               "lr=1e-4:1e-2"], ["--seeds 2", "--population"]),
    "population without pbt": (["--search", "random", "--trials", "2", "--population", "4",
                                "--space", "lr=1e-4:1e-2"], ["--population", "--search pbt"]),
    "devices": (["--search", "pbt", "--population", "4", "--devices", "1", "--space",
                 "lr=1e-4:1e-2"], ["--devices"]),
}


@pytest.mark.unit
@pytest.mark.parametrize("name", list(BAD))
def test_bad_pbt_input_is_one_line_and_writes_nothing(tmp_path, capsys, name):
    argv, culprits = BAD[name]
    assert_sweep_refused(capsys, tmp_path, ["--config", CARTPOLE, *TINY, *argv], culprits)


@pytest.mark.unit
@pytest.mark.parametrize("kwargs", [
    dict(space=SPACE, search="pbt", population=1),
    dict(space={}, search="pbt", population=4),
    dict(space={"num_envs": [4, 8]}, search="pbt", population=4),
    dict(space=SPACE, search="pbt", population=4, interval=0),
    dict(space=SPACE, search="pbt", population=4, interval=8),
    dict(space=SPACE, search="pbt", population=4, interval=2, quantile=0.0),
    dict(space=SPACE, search="pbt", population=4, interval=2, quantile=0.75),
    dict(space=SPACE, search="pbt", population=4, trials=2),
    dict(space=SPACE, search="pbt", population=4, seeds=2),
    dict(space=SPACE, search="pbt"),
    dict(space=SPACE, search="random", trials=2, population=4),
], ids=["population-1", "empty", "static", "interval-0", "interval-end", "quantile-0",
        "quantile-high", "trials", "seeds", "no-population", "population-random"])
def test_python_api_refuses_bad_pbt(tmp_path, kwargs):
    with pytest.raises(ConfigError):
        sweep(pbt_config(), logdir=str(tmp_path), **kwargs)
    assert os.listdir(tmp_path) == []


@pytest.mark.unit
def test_the_window_counts_only_updates_in_which_an_episode_ended():
    """The metric carries the last return through updates with no finished episode; those
    are empty cells in metrics.csv and no part of what PBT ranks by."""
    pbt = PBTController(pbt_config(), parse_space(SPACE_ARGS), [{}] * 2, interval=2)
    ret = np.array([[10.0, 10.0, 30.0], [np.inf, 5.0, 5.0]])
    pbt.observe(SimpleNamespace(metrics={"episodic_return": ret,
                                         "episodes": np.array([[1, 0, 1], [0, 1, 0]]),
                                         "nonfinite": np.zeros((2, 3))}))
    np.testing.assert_array_equal(recent_return(pbt.ret_sum, pbt.ret_count, pbt.bad),
                                  [20.0, 5.0])  # the inf carried where nothing ended: no return


@pytest.mark.unit
def test_chunks_end_on_every_pbt_update():
    pbt = PBTController(pbt_config(), parse_space(SPACE_ARGS), [{}] * 2, interval=20)
    assert pbt.chunk_length(61) == 20 and pbt.chunk_length(7) == 5 and pbt.chunk_length(1) == 1
    assert pbt.chunk_length(61, start_update=30) == 10  # resumed between two PBT updates
    pbt.interval = 5  # the nearest divisor, not the largest below: 4 wanted is 5, never 1
    assert pbt.chunk_length(4) == 5 and pbt.chunk_length(2) == 1 and pbt.chunk_length(3) == 5
    pbt.interval = 20
    assert [u for u in range(9) if pbt.due(u)] == []  # 8 updates: none before the end
    pbt.interval = 2
    assert [u for u in range(9) if pbt.due(u)] == [2, 4, 6]
