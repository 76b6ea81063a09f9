"""Successive halving's pure pieces: the rung schedule, the rung sizes, the selection on hand-made
returns, and its bad input (one line, exit 2, nothing written). A halving sweep end to end:
tests/integration/test_halving.py."""

import dataclasses
import os

import numpy as np
import pytest
from conftest import ROOT, assert_sweep_refused

from jaxppo import ConfigError
from jaxppo.run.driver import ChunkResult
from jaxppo.rundir.ledger import setting_updates
from jaxppo.search import rung_ends, rung_sizes, select
from jaxppo.search.halving import HalvingController, min_updates, setting_scores
from jaxppo.search.sweep import sweep

CARTPOLE = os.path.join(ROOT, "configs", "cartpole.yaml")

SPACE = {"lr": (1e-4, 1e-2, "log"), "ent_coef": (0.0, 0.02)}


@pytest.mark.unit
@pytest.mark.parametrize("updates,trials,eta,ends", [
    (27, 9, 3, [3, 9, 27]),  # the textbook case: 9 to U/9, 3 to U/3, 1 to U
    (81, 10, 3, [9, 27, 81]),  # 10 -> 3 -> 1: the same rungs as 9
    (10, 4, 2, [3, 5, 10]),  # 2.5 rounds half up
    (5, 9, 3, [1, 2, 5]),  # the fewest updates for 9 settings of eta 3
    (4, 9, 3, None),  # 4/9 rounds to 0: too few
    (1, 2, 2, None),  # 1/2 -> 1, then 1 again: not strictly increasing
    (7, 3, 3, [2, 7]),  # 3 -> 1
])
def test_rung_schedule(updates, trials, eta, ends):
    assert rung_ends(updates, trials, eta) == ends


@pytest.mark.unit
def test_rung_sizes_and_the_fewest_updates():
    assert rung_sizes(9, 3) == [9, 3, 1]
    assert rung_sizes(10, 3) == [10, 3, 1]
    assert rung_sizes(8, 2) == [8, 4, 2, 1]
    assert rung_sizes(5, 2) == [5, 2, 1]
    assert min_updates(9, 3) == 5 and min_updates(8, 2) == 6  # 6: [1, 2, 3, 6]


@pytest.mark.unit
def test_selection_on_hand_made_returns():
    assert select([1.0, 3.0, 2.0, 0.5], [False] * 4, 2) == [1, 2]  # kept in draw order
    assert select([1.0, 3.0, 2.0], [False, True, False], 1) == [2]  # diverged ranks last
    assert select([np.nan, -5.0, np.nan], [False] * 3, 2) == [0, 1]  # no return: last, in order
    assert select([2.0, 2.0, 2.0], [False] * 3, 2) == [0, 1]  # ties keep draw order
    # mean over seeds of each seed's window mean; a seed without one is left out
    scores = setting_scores([4.0, 2.0, 9.0, 0.0, 0.0, 0.0], [2, 1, 3, 0, 0, 0], 2)
    np.testing.assert_allclose(scores[:2], [2.0, 3.0])
    assert np.isnan(scores[2])


@pytest.mark.unit
def test_rungs_choose_at_the_rung_end_from_the_window_only():
    """4 settings x 1 seed, rungs end at 8, 16; the window is the rung's last 2 updates: a
    setting that was best before it does not count, NaN (no episode yet) is left out."""
    record = {"strategy": "halving", "trials": 4, "eta": 2, "rungs": [8, 12, 16],
              "kept": [[0, 1, 2, 3]], "seed": 0}
    rungs = HalvingController(record, 1)
    record = rungs.record  # the controller's own copy: its decisions go there
    assert rungs.window_start(0) == 6 and rungs.window_start(1) == 11
    assert rungs.segment_runs(0).tolist() == [0, 1, 2, 3]

    def chunk(ret, first):
        ret = np.asarray(ret, float)
        metrics = {"episodic_return": ret, "episodes": np.ones_like(ret),
                   "nonfinite": np.zeros_like(ret)}
        return ChunkResult(first, first + ret.shape[1], metrics, 0.0, 0.0)

    rungs.observe(chunk([[100.0] * 6, [0.0] * 6, [0.0] * 6, [0.0] * 6], 0))  # 1..6
    assert "window" not in record and len(record["kept"]) == 1
    rungs.observe(chunk([[1.0], [5.0], [np.nan], [2.0]], 6))  # update 7
    assert record["window"] == {"sum": [1.0, 5.0, 0.0, 2.0], "count": [1, 1, 0, 1]}
    rungs.observe(chunk([[1.0], [3.0], [7.0], [2.0]], 7))  # update 8: the rung's end
    assert record["kept"][1] == [1, 2] and "window" not in record  # 4.0 and 7.0
    assert rungs.segment_runs(1).tolist() == [1, 2]
    assert rungs.run_updates(10).tolist() == [8, 10, 10, 8]
    assert setting_updates(record, 8) == [8, 8, 8, 8]
    assert setting_updates(record, 10) == [8, 10, 10, 8]


BAD = {  # argv after the config, culprits the one line must name
    "eta 1": (["--search", "halving", "--trials", "4", "--eta", "1", "--space", "lr=1e-4:1e-2"],
              ["--eta 1", ">= 2"]),
    "trials below eta": (["--search", "halving", "--trials", "2", "--space", "lr=1e-4:1e-2"],
                         ["--trials 2", "--eta 3"]),
    "empty space": (["--search", "halving", "--trials", "4"], ["--search halving", "--space"]),
    "grid with halving": (["--search", "halving", "--trials", "4", "--grid", "lr=1e-3"],
                          ["--grid", "halving"]),
    "eta without halving": (["--search", "random", "--trials", "4", "--eta", "2",
                             "--space", "lr=1e-4:1e-2"], ["--eta", "--search halving"]),
    "static key": (["--search", "halving", "--trials", "4", "--space", "num_minibatches=2,4"],
                   ["--space num_minibatches", "static", "--search halving"]),
    "too few updates": (["--search", "halving", "--trials", "9", "--space", "lr=1e-4:1e-2",
                         "--set", "total_timesteps=256"],
                        ["4 updates are too few", "3 rungs", "total_timesteps to 320 (5 updates)"]),
}


@pytest.mark.unit
@pytest.mark.parametrize("name", list(BAD))
def test_bad_halving_is_one_line_and_writes_nothing(tmp_path, capsys, name):
    argv, culprits = BAD[name]
    assert_sweep_refused(capsys, tmp_path,
                         ["--config", CARTPOLE, "--set", "num_steps=16", *argv], culprits)


@pytest.mark.unit
@pytest.mark.parametrize("kwargs", [dict(trials=4, eta=1), dict(trials=2, eta=3),
                                    dict(trials=9, eta=3, total=4 * 16 * 4)],
                         ids=["eta-1", "trials-below-eta", "too-few-updates"])
def test_python_api_refuses_bad_halving(tiny_config, tmp_path, kwargs):
    config = tiny_config
    if "total" in kwargs:
        config = dataclasses.replace(config, total_timesteps=kwargs.pop("total"))
    with pytest.raises(ConfigError):
        sweep(config, space=SPACE, search="halving", logdir=str(tmp_path), **kwargs)
    assert os.listdir(tmp_path) == []
