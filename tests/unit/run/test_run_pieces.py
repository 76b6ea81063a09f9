"""The pure pieces of one run's host side, on hand-made values (no compile, no training):
divergence decoding and its one line, the typed checkpoint record, the summary.json schema,
and the rows a segmented run moves between its full state and a segment's."""

import json
import types

import jax.numpy as jnp
import numpy as np
import pytest

from jaxppo import PPOConfig
from jaxppo.core.metrics import NONFINITE_SOURCES
from jaxppo.run.divergence import (
    describe_divergence,
    diverged_runs,
    find_nonfinite,
    logged_divergences,
    run_divergences,
    source_name,
)
from jaxppo.run.events import Divergence
from jaxppo.run.segments import expand_metrics, put_runs, take_runs
from jaxppo.run.stats import RunStats
from jaxppo.run.summary import build_summary
from jaxppo.rundir.metrics_csv import CSV_HEADER
from jaxppo.rundir.record import RunRecord
from jaxppo.rundir.summary import REQUIRED, summary_problem

pytestmark = pytest.mark.unit
CONFIG = PPOConfig(total_timesteps=1536, num_envs=4, num_steps=16)


def chunk(nonfinite, sources):
    return {"nonfinite": np.asarray(nonfinite, float), "nonfinite_source": np.asarray(sources, float)}


def test_each_run_first_divergence_and_its_source():
    # 3 runs x 4 updates after update 10: run 1 goes bad at 12 (params), run 2 at 11 (env obs)
    m = chunk([[0, 0, 0, 0], [0, 0, 1, 1], [0, 1, 1, 0]],
              [[0, 0, 0, 0], [0, 0, 6, 5], [0, 1, 2, 0]])
    assert run_divergences(m, 10) == [Divergence(1, 13, "params"), Divergence(2, 12, "env_obs")]
    assert find_nonfinite(m, 10) == Divergence(2, 12, "env_obs")  # the earliest update
    # two runs bad at the same update: the first run
    m = chunk([[0, 1], [0, 1]], [[0, 4], [0, 1]])
    assert find_nonfinite(m, 0) == Divergence(0, 2, "normaliser")
    assert find_nonfinite(chunk([[0, 0]], [[0, 0]]), 0) is None
    assert [source_name(k) for k in range(1, len(NONFINITE_SOURCES) + 1)] == list(NONFINITE_SOURCES)
    assert source_name(0) == source_name(99) == "loss"  # unknown codes: the loss


@pytest.mark.parametrize("source, culprit, fix", [
    ("env_obs", "returned NaN/Inf observations", "fix the env"),
    ("env_reward", "returned NaN/Inf rewards", "fix the env"),
    ("action_mask", "allows no action", "action mask"),
    ("normaliser", "normalize_obs statistics", "turn off normalize_obs"),
    ("loss", "the loss, gradients or parameters", "lower lr"),
    ("params", "the parameters or optimizer state", "lower lr"),
])
def test_each_source_gets_its_own_fix(source, culprit, fix):
    config = PPOConfig(normalize_obs=True)
    what, how = describe_divergence(Divergence(3, 7, source), config)
    assert culprit in what and "at update 7 (seed 3)" in what and fix in how
    what, _ = describe_divergence(Divergence(3, 7, source), config, who="agent 3: lr=0.1")
    assert "(agent 3: lr=0.1)" in what


def write_log(path, rows):
    with open(path / "metrics.csv", "w", encoding="utf-8") as f:
        f.write(",".join(CSV_HEADER) + "\n")
        for update, run, bad, code in rows:
            cells = {k: "0" for k in CSV_HEADER} | {"update": str(update), "run": str(run),
                                                     "nonfinite": str(bad),
                                                     "nonfinite_source": str(code)}
            f.write(",".join(cells[k] for k in CSV_HEADER) + "\n")


def test_divergences_read_back_from_the_log_stop_at_the_checkpoint(tmp_path):
    write_log(tmp_path, [(1, 0, 0, 0), (2, 0, 1, 5), (3, 0, 1, 5), (2, 1, 0, 0), (3, 1, 1, 1),
                         (5, 1, 1, 2), (9, 2, 1, 6)])
    first, live = logged_divergences(str(tmp_path), 3, upto=6, after=None)
    assert first == live == {0: Divergence(0, 2, "loss"), 1: Divergence(1, 3, "env_obs")}
    # run 1 renewed (a PBT exploit) after update 4: only its divergence after that is live
    first, live = logged_divergences(str(tmp_path), 3, upto=6, after=np.array([-1, 4, -1]))
    assert first[1] == Divergence(1, 3, "env_obs") and live[1] == Divergence(1, 5, "env_reward")
    assert logged_divergences(str(tmp_path / "none"), 3, 6, None) == ({}, {})


def test_a_checkpoint_with_nan_parameters_counts_as_diverged():
    runner = types.SimpleNamespace(train_state={"w": jnp.array([[1.0, 2.0], [np.nan, 0.0],
                                                                [1.0, 1.0]]),
                                                "step": jnp.array([3, 3, 3])})
    assert diverged_runs(runner, 3, {}).tolist() == [False, True, False]
    assert diverged_runs(runner, 3, {2: Divergence(2, 1, "loss")}).tolist() == [False, True, True]


def test_the_checkpoint_record_round_trips_and_reads_old_layouts():
    record = RunRecord(seed=7, stats={"update": 3}, settings=[{"lr": 1e-3}],
                       search={"strategy": "random"}, log_gaps=((1, 2), (4, 4, 1)))
    extra = record.to_extra()
    assert json.loads(json.dumps(extra)) == extra  # plain JSON-like values
    assert extra == {"seed": 7, "stats": {"update": 3}, "settings": [{"lr": 1e-3}],
                     "search": {"strategy": "random"}, "log_gaps": [[1, 2], [4, 4, 1]]}
    assert RunRecord.from_extra(extra) == record
    # a checkpoint from before 0.2 carried only its seed; keys it does not know are ignored
    old = RunRecord.from_extra({"seed": 3, "future": 1})
    assert old.seed == 3 and old.stats is None and old.settings is None and old.log_gaps == ()
    assert RunRecord.from_extra(None) == RunRecord()
    # only a strategy that changes its population can continue it
    assert not record.controlled and record.strategy == "random"
    assert RunRecord(controller={"settings": []}).controlled  # PBT
    assert RunRecord(search={"strategy": "halving", "rungs": [2, 4]}).controlled


def test_the_summary_schema():
    stats = RunStats("CartPole-v1", 3, 64, update=24, episodes=np.array([5.0, 0.0, 2.0]),
                     final_return=np.array([20.0, np.nan, np.inf]), run_s=2.0, steps_timed=1536)
    device = types.SimpleNamespace(device_kind="cpu", platform="cpu", memory_stats=lambda: None)
    s = build_summary(CONFIG, stats, num_runs=3, status="finished", wall_s=3.21234,
                      compile_s=1.0, diverged=Divergence(2, 9, "loss"),
                      diverged_runs=np.array([False, False, True]),
                      divergences=[Divergence(2, 9, "loss")], env_steps_total=3 * 1536,
                      device=device, settings=[{"lr": 1e-3}], seeds=3,
                      search={"strategy": "grid"}, extra={"pbt": {"exploits": 0}},
                      log_gaps=[(3, 4)])
    assert all(k in s for k in REQUIRED)
    assert s["final_return"] == [20.0, None, float("inf")]  # strict JSON maps inf to null later
    assert s["final_return_mean"] == 20.0 and s["runs_without_return"] == 1
    assert s["runs_nonfinite_return"] == 1 and s["diverged_runs"] == [2]
    assert s["divergences"] == [{"run": 2, "update": 9, "source": "loss"}]
    assert s["wall_s"] == 3.212 and s["sps"] == round(768 * 3, 1) and s["env_steps"] == 1536
    assert s["settings"] == [{"lr": 1e-3}] and s["pbt"] == {"exploits": 0}
    assert s["metrics_missing_updates"] == [[3, 4]] and s["finished"] is True
    plain = build_summary(CONFIG, stats, num_runs=3, status="stopped", wall_s=1.0, compile_s=1.0,
                          diverged=None, diverged_runs=np.zeros(3, bool), divergences=[],
                          env_steps_total=0, device=device, search={"strategy": "grid"})
    assert "settings" not in plain and "search" not in plain and plain["finished"] is False


def test_what_makes_a_summary_unusable(tmp_path):
    path = tmp_path / "summary.json"
    path.write_text("{", encoding="utf-8")
    assert summary_problem(str(path)).startswith("it is not JSON")
    path.write_text("[]", encoding="utf-8")
    assert summary_problem(str(path)) == "it is not a JSON object"
    path.write_text(json.dumps({"env_id": "x"}), encoding="utf-8")
    assert summary_problem(str(path)).startswith("it lacks num_runs")
    whole = {"env_id": "x", "num_runs": 2, "status": "finished", "final_return": [1.5, None],
             "env_steps": 64, "diverged_runs": [1], "wall_s": 2.0, "compile_s": None}
    assert set(REQUIRED) <= set(whole)
    path.write_text(json.dumps({**whole, "finished": False}), encoding="utf-8")
    assert summary_problem(str(path)) == "it says the run did not finish"
    path.write_text(json.dumps(whole), encoding="utf-8")
    assert summary_problem(str(path)) == ""
    assert summary_problem(str(path), num_runs=2, env_steps=64) == ""
    # what its readers take from it (a static sweep's table: issue #53), of the wrong kind
    for change, words in (({"status": "stopped"}, "did not finish"),
                          ({"status": "diverged", "finished": False}, ""),
                          ({"num_runs": "2"}, "num_runs"), ({"final_return": [1.5]}, "final_return"),
                          ({"final_return": ["x", None]}, "final_return"),
                          ({"env_steps": 63.5}, "env_steps"), ({"diverged_runs": [2]}, "diverged_runs"),
                          ({"wall_s": "2 s"}, "wall_s")):
        path.write_text(json.dumps({**whole, **change}), encoding="utf-8")
        assert (words in summary_problem(str(path))) and bool(words) == bool(
            summary_problem(str(path))), change
    path.write_text(json.dumps(whole), encoding="utf-8")
    assert "num_runs" in summary_problem(str(path), num_runs=3)
    assert "env_steps" in summary_problem(str(path), env_steps=128)


def test_a_segment_rows_go_in_and_out_of_the_full_state():
    full = {"w": np.arange(8.0).reshape(4, 2), "n": np.arange(4)}
    runs = np.array([1, 3])
    template = {"w": jnp.zeros((2, 2), jnp.float32), "n": jnp.zeros(2, jnp.int32)}
    part = take_runs(full, runs, template)
    assert part["w"].dtype == jnp.float32 and part["w"].tolist() == [[2, 3], [6, 7]]
    back = put_runs(full, runs, {"w": part["w"] * 10, "n": part["n"] + 100})
    assert back["w"].tolist() == [[0, 1], [20, 30], [4, 5], [60, 70]]
    assert back["n"].tolist() == [0, 101, 2, 103] and full["n"].tolist() == [0, 1, 2, 3]
    m = expand_metrics({"episodes": np.array([[1, 2], [3, 4]]),
                        "policy_loss": np.array([[0.5, 0.5], [0.25, 0.25]], np.float32),
                        "env_steps": np.array([[64, 128], [64, 128]])}, runs, 4)
    assert m["episodes"].tolist() == [[0, 0], [1, 2], [0, 0], [3, 4]]  # left out: no episode
    assert np.isnan(m["policy_loss"][[0, 2]]).all() and m["policy_loss"][3, 0] == 0.25
    assert m["env_steps"][:, 1].tolist() == [128] * 4  # the update's own, for every run
