"""The one table of search strategies (`jaxppo.search.strategies`), on its own: every
strategy's options are flags of `jaxppo sweep` and keywords of `jaxppo.sweep`, the dispatch
refuses an option a strategy does not take (naming the strategy that does), a missing one it
needs, and the controller each needs comes back from a checkpoint's record. No compile."""

import numpy as np
import pytest

from jaxppo import ConfigError, PPOConfig, UsageError
from jaxppo.cli import build_parser
from jaxppo.rundir.record import RunRecord
from jaxppo.search.halving import HalvingController
from jaxppo.search.pbt import PBTController
from jaxppo.search.strategies import OPTIONS, STRATEGIES, controller_for, draw

pytestmark = pytest.mark.unit
CONFIG = PPOConfig(total_timesteps=4 * 16 * 24, num_envs=4, num_steps=16)  # 24 updates


def test_every_option_is_a_flag_and_taken_by_some_strategy():
    sweep = build_parser()._subparsers._group_actions[0].choices["sweep"]
    flags = {a.dest for a in sweep._actions}
    assert set(OPTIONS) <= flags and "search" in flags
    search = next(a for a in sweep._actions if a.dest == "search")
    assert tuple(search.choices) == tuple(STRATEGIES)
    for name in OPTIONS:
        assert any(name in s.takes for s in STRATEGIES.values()), name
    for s in STRATEGIES.values():
        assert set(s.needs) <= set(s.takes) <= set(OPTIONS), s.name


@pytest.mark.parametrize("search, options, cli", [
    ("grid", {"grid": {"lr": [1e-3, 3e-4], "ent_coef": [0.0, 0.01]}}, False),
    ("grid", {"grid": ["lr=1e-3,3e-4", "ent_coef=0,0.01"]}, True),
    ("random", {"trials": 4, "space": {"lr": (1e-4, 1e-2, "log")}}, False),
    ("random", {"trials": 4, "space": ["lr=1e-4:1e-2:log"]}, True),
    ("halving", {"trials": 4, "eta": 2, "space": ["lr=1e-4:1e-2:log"]}, True),
    ("pbt", {"population": 4, "interval": 4, "space": {"lr": (1e-4, 1e-2)}}, False),
])
def test_each_strategy_draws_its_settings_and_its_controller(search, options, cli):
    settings, record, controller = draw(search, CONFIG, options, seeds=2 if search != "pbt" else 1,
                                        cli=cli)
    assert len(settings) == 4
    assert (record is None) == (search == "grid")
    assert record is None or record["strategy"] == search
    kind = {"halving": HalvingController, "pbt": PBTController}.get(search)
    assert (controller is None) if kind is None else isinstance(controller, kind)
    # the same draw from the same seed; the CLI's texts and Python's values agree
    assert draw(search, CONFIG, options, seeds=2 if search != "pbt" else 1, cli=cli)[0] == settings


def test_cli_and_python_draw_the_same_settings():
    a = draw("random", CONFIG, {"trials": 3, "space": ["lr=1e-4:1e-2:log", "clip_eps=0.1,0.2"]},
             seed=5, cli=True)[0]
    b = draw("random", CONFIG, {"trials": 3, "space": {"lr": (1e-4, 1e-2, "log"),
                                                        "clip_eps": [0.1, 0.2]}}, seed=5)[0]
    assert a == b


@pytest.mark.parametrize("search, options, kwargs, culprits", [
    ("grid", {"trials": 3, "grid": ["lr=1e-3"]}, {}, ["--trials", "--search random or --search halving",
                                                      "--search grid takes --grid"]),
    ("random", {"trials": 2}, {}, ["--search random needs --space"]),
    ("random", {"space": ["lr=1e-4:1e-2"]}, {}, ["--search random needs --trials N"]),
    ("halving", {"trials": 4, "space": ["lr=1e-4:1e-2"], "population": 4}, {},
     ["--population", "--search pbt"]),
    ("pbt", {"space": ["lr=1e-4:1e-2"]}, {}, ["--search pbt needs --population N"]),
    ("pbt", {"population": 4, "space": ["lr=1e-4:1e-2"]}, {"seeds": 2}, ["--seeds 2", "--population"]),
    ("pbt", {"population": 4, "space": ["lr=1e-4:1e-2"]}, {"devices": 2}, ["one device", "--devices"]),
    ("bogus", {}, {}, ["'bogus'", "'grid'", "'pbt'"]),
])
def test_a_misfit_option_is_one_line_naming_the_way(search, options, kwargs, culprits):
    with pytest.raises(UsageError) as e:
        draw(search, CONFIG, options, cli=True, **kwargs)
    for c in culprits:
        assert c in str(e.value), (c, str(e.value))
    api = {k: ({"lr": [1e-3]} if k == "grid" else {"lr": (1e-4, 1e-2)} if k == "space" else v)
           for k, v in options.items()}
    with pytest.raises(ConfigError) as e:  # Python's names: trials=, search='pbt'
        draw(search, CONFIG, api, **kwargs)
    assert "--" not in str(e.value)


def test_a_checkpoint_record_brings_back_its_strategy_controller():
    settings, record, _ = draw("halving", CONFIG, {"trials": 4, "eta": 2,
                                                   "space": {"lr": (1e-4, 1e-2)}})
    record["kept"].append([1, 3])  # decided at the first rung's end
    back = controller_for(CONFIG, RunRecord(settings=settings, search=record), num_runs=8)
    assert isinstance(back, HalvingController) and back.seeds == 2
    assert back.run_updates(8).tolist() == [6, 6, 8, 8, 6, 6, 8, 8]
    assert [k for k, _ in back.segments(7)] == [1, 2]  # rung 0 ended at update 6
    settings, record, _ = draw("pbt", CONFIG, {"population": 4, "interval": 4,
                                               "space": {"lr": (1e-4, 1e-2)}})
    back = controller_for(CONFIG, RunRecord(settings=settings, search=record), num_runs=4)
    assert isinstance(back, PBTController) and back.interval == 4
    grid = draw("grid", CONFIG, {"grid": {"lr": [1e-3]}})[0]
    assert controller_for(CONFIG, RunRecord(settings=grid), 1) is None
    assert controller_for(CONFIG, RunRecord(), 1) is None


def test_halving_segments_are_its_rungs():
    _, record, ctrl = draw("halving", CONFIG, {"trials": 9, "eta": 3, "space": {"lr": (1e-4, 1e-2)}},
                           seeds=2)
    assert record["rungs"] == [3, 8, 24]
    segs = ctrl.segments(0)
    assert [(k, s.size, s.start, s.end) for k, s in segs] == [(0, 18, 0, 3), (1, 6, 3, 8),
                                                              (2, 2, 8, 24)]
    assert ctrl.segment_label(0, ctrl.segment_runs(0)) == "rung 1/3: 9 settings x 2 seeds = 18 agents"
    assert np.array_equal(ctrl.segment_runs(0), np.arange(18))
