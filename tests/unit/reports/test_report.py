"""`jaxppo report`: the statistics against hand-computed values (and rliable's own numbers),
reading run directories (eval.json before summary.json, null returns as missing, sweeps), the
refusals (different envs, a damaged metrics.csv: one line, exit 2, nothing written) and the CLI
end to end. Fake run directories are written file by file: nothing here trains."""

import json
import os

import numpy as np
import pytest
import scipy.stats
from conftest import make_run

from jaxppo.cli import main
from jaxppo.errors import UsageError
from jaxppo.reports import (
    aggregate,
    interval_estimates,
    iqm,
    optimality_gap,
    percentile_interval,
    profile,
    read_run,
    report,
    stratified_resamples,
)

pytestmark = pytest.mark.unit


# --------------------------------------------------------------------------------------------
# the statistics
def test_iqm_by_hand():
    # n=8: int(8/4) = 2 cut from each end; the outliers go.
    assert iqm(np.array([100.0, -50, 1, 2, 3, 4, 5, 6])) == pytest.approx((2 + 3 + 4 + 5) / 4)
    # n=10: N/4 = 2.5. rliable (scipy's trim_mean) cuts int(2.5) = 2 from each end and keeps 6
    # whole scores: (0+1+2+4+8+16)/6. A fractional cut (half weights on 0 and 16) would give 4.6.
    x = np.array([32.0, 0, 1000, 4, 0, 2, 16, 8, 1, 0])
    assert iqm(x) == pytest.approx(31 / 6)
    assert iqm(x) == pytest.approx(scipy.stats.trim_mean(x, 0.25))
    assert iqm(np.array([1.0, 2.0, 9.0])) == pytest.approx(4.0)  # n < 4: nothing cut
    # over the last axis, row by row (every bootstrap resample at once)
    rows = np.array([[1.0, 2, 3, 4, 5, 6, 7, 80], [8.0, 7, 6, 5, 4, 3, 2, -100]])
    assert iqm(rows) == pytest.approx([4.5, 4.5])


def test_optimality_gap_by_hand():
    # gamma 475: 375 short, 0 (at), 0 (above counts as 475), 175 short
    assert optimality_gap(np.array([100.0, 475, 500, 300]), 475.0) == pytest.approx(550 / 4)
    assert optimality_gap(np.array([2.0, 3.0]), 1.0) == 0.0


def test_percentile_interval_and_a_bootstrap_interval_by_hand():
    """The percentile interval is numpy's linear percentiles of the resamples; and for two
    seeds [0, 1] a resample's mean is 0, 0.5 or 1 (1/4, 1/2, 1/4): its 95% interval is [0, 1]."""
    assert percentile_interval(np.arange(101.0)).tolist() == [2.5, 97.5]
    est = interval_estimates([np.array([0.0, 1.0])], 1.0, 2000, np.random.default_rng(0))
    assert est["mean"] == {"value": 0.5, "ci": [0.0, 1.0]}
    assert est["optimality_gap"] == {"value": 0.5, "ci": [0.0, 1.0]}


def test_interval_estimates_match_rliable():
    """rliable 1.2.0 (arch 7.2.0; its univariate models stubbed out, as they do not import
    under the pinned pandas 3.1) was run once on this 6 seeds x 3 tasks matrix with
    `get_interval_estimates(..., reps=100000)`: its mean, median (of the task means), IQM and
    optimality gap (gamma 1) and intervals are below. The same cross-check on 10 x 3 normal
    scores at 50,000 resamples, and of `create_performance_profile`, agreed to within 0.002."""
    scores = np.array([[0.1, 0.9, 0.5], [0.4, 1.3, 0.2], [0.8, 0.7, 0.35], [0.0, 1.1, 0.6],
                       [0.55, 0.95, 0.3], [0.3, 0.6, 0.45]])
    rliable_point = {"mean": 0.56111, "median": 0.4, "iqm": 0.525, "optimality_gap": 0.46111}
    rliable_ci = {"mean": [0.46111, 0.66389], "median": [0.31667, 0.58333],
                  "iqm": [0.42, 0.64], "optimality_gap": [0.36944, 0.55]}
    est = interval_estimates(list(scores.T), 1.0, 20000, np.random.default_rng(0))
    for k in rliable_point:
        assert est[k]["value"] == pytest.approx(rliable_point[k], abs=1e-5), k
        assert est[k]["ci"] == pytest.approx(rliable_ci[k], abs=0.02), k


def test_stratified_bootstrap_keeps_each_group_whole_and_is_reproducible():
    a, b = np.zeros(3), np.ones(5)
    parts = stratified_resamples([a, b], 50, np.random.default_rng(1))
    assert [p.shape for p in parts] == [(50, 3), (50, 5)]
    assert (parts[0] == 0).all() and (parts[1] == 1).all()  # a seed never crosses groups
    x = np.random.default_rng(3).normal(size=16)
    one = interval_estimates([x], 0.5, 500, np.random.default_rng(7))
    assert one == interval_estimates([x], 0.5, 500, np.random.default_rng(7))
    assert one != interval_estimates([x], 0.5, 500, np.random.default_rng(8))
    for k, s in one.items():
        assert s["ci"][0] <= s["value"] <= s["ci"][1], k


def test_all_seeds_equal_give_a_zero_width_interval_and_one_seed_none():
    est = interval_estimates([np.full(6, 500.0)], 475.0, 300, np.random.default_rng(0))
    assert {k: s["ci"] for k, s in est.items()} == {
        "mean": [500.0, 500.0], "median": [500.0, 500.0], "iqm": [500.0, 500.0],
        "optimality_gap": [0.0, 0.0]}
    single = interval_estimates([np.array([3.0])], None, 300, np.random.default_rng(0))
    assert single["mean"] == {"value": 3.0, "ci": None} and "optimality_gap" not in single


def test_across_runs_mean_and_median_weigh_runs_iqm_pools_seeds():
    a, b, c = np.array([0.0, 0.0]), np.array([1.0, 1.0, 1.0, 1.0]), np.array([5.0, 7.0])
    s = aggregate([a, b, c], None)
    assert s["mean"] == pytest.approx((0 + 1 + 6) / 3) and s["median"] == pytest.approx(1.0)
    assert s["iqm"] == pytest.approx(1.0)  # [0 0 1 1 1 1 5 7]: cut 2 each end


def test_performance_profile_by_hand():
    taus = np.array([0.0, 1.5, 10.0])
    p = profile([np.array([1.0, 2.0, 3.0, 4.0])], taus, 200, np.random.default_rng(0))
    assert p["fraction"] == [1.0, 0.75, 0.0]
    assert p["ci_low"][0] == p["ci_high"][0] == 1.0 and p["ci_high"][2] == 0.0


# --------------------------------------------------------------------------------------------
# reading run directories
def test_null_final_returns_are_missing_not_zero(tmp_path):
    run = make_run(tmp_path / "a", final=(100.0, None, 300.0, None))
    rep = report([run], tmp_path / "out", reps=200)
    g = rep.data["groups"][0]
    assert g["scores"] == [100.0, None, 300.0, None] and g["seeds"] == 2 and g["missing"] == 2
    assert g["missing_runs"] == [1, 3] and g["source"] == "summary.json"
    assert g["stats"]["mean"]["value"] == 200.0  # (100 + 300) / 2, not (100 + 300) / 4
    assert "2 seed(s) with no finished episode (runs 1, 3)" in rep.table()
    assert "2 (2 missing)" in rep.table()


def test_eval_json_is_preferred_and_named(tmp_path):
    run = make_run(tmp_path / "a", final=(1.0, 2.0))
    with open(os.path.join(run, "eval.json"), "w") as f:  # today's format, and cut_off's
        json.dump({"env_id": "CartPole-v1", "update": 12, "episodes": 2,
                   "returns": [[10.0, 20.0], [30.0, 50.0]],
                   "cut_off": [[False, True], [False, False]], "cut_off_per_run": [1, 0]}, f)
    rep = report(run, tmp_path / "out", reps=200)
    g = rep.data["groups"][0]
    assert g["source"] == "eval.json" and g["raw_scores"] == [10.0, 40.0]  # cut-off left out
    assert "eval.json: each seed's mean return" in rep.table()
    assert any("1 eval episode(s) were cut off" in n for n in rep.data["notes"])
    final = report(run, tmp_path / "out2", reps=200, source="final").data["groups"][0]
    assert final["source"] == "summary.json" and final["raw_scores"] == [1.0, 2.0]
    os.remove(os.path.join(run, "eval.json"))
    with pytest.raises(UsageError, match="has no eval.json; run jaxppo eval"):
        report(run, tmp_path / "out3", source="eval")


def test_a_stale_eval_json_is_noted(tmp_path):
    run = make_run(tmp_path / "a", final=(1.0, 2.0))
    with open(os.path.join(run, "eval.json"), "w") as f:
        json.dump({"env_id": "CartPole-v1", "update": 5, "returns": [[1.0], [2.0]]}, f)
    notes = report(run, tmp_path / "out", reps=50).data["notes"]
    assert any("played at update 5; the run has since reached update 12" in n for n in notes)


def test_an_eval_json_of_another_run_is_refused(tmp_path):
    run = make_run(tmp_path / "a", final=(1.0, 2.0, 3.0, 4.0))
    with open(os.path.join(run, "eval.json"), "w") as f:
        json.dump({"env_id": "CartPole-v1", "update": 12, "returns": [[1.0], [2.0]]}, f)
    with pytest.raises(UsageError, match="eval.json holds 2 seed.s. but metrics.csv 4; re-run"):
        report(run, tmp_path / "out")
    with open(os.path.join(run, "eval.json"), "w") as f:
        json.dump({"env_id": "Acrobot-v1", "returns": [[1.0]] * 4}, f)
    with pytest.raises(UsageError, match="evaluated Acrobot-v1, but the run trained on Cart"):
        report(run, tmp_path / "out")
    assert not os.path.exists(tmp_path / "out")


def test_a_sweep_is_one_group_per_setting(tmp_path):
    settings = [{"lr": 0.001}, {"lr": 0.0003}]
    run = make_run(tmp_path / "sw", final=(1.0, 2.0, 5.0, 7.0), settings=settings)
    groups, _ = read_run(run)
    assert [(g.label, g.runs, g.scores.tolist()) for g in groups] == [
        ("agents 0-1: lr=0.001", [0, 1], [1.0, 2.0]), ("agents 2-3: lr=0.0003", [2, 3], [5.0, 7.0])]
    rep = report(run, tmp_path / "out", reps=100)
    assert rep.data["aggregate"]["stats"]["mean"]["value"] == pytest.approx(3.75)
    os.remove(os.path.join(run, "summary.json"))
    open(os.path.join(run, "sweep.csv"), "w").close()
    with pytest.raises(UsageError, match="jaxppo sweep --resume"):
        read_run(run)


def test_without_summary_the_latest_return_in_metrics_csv_is_used(tmp_path):
    run = make_run(tmp_path / "a", final=(0.0, 0.0), summary=False)
    groups, notes = read_run(run)
    # update 12 ended no episode: each seed's latest return is update 11's
    assert groups[0].source == "metrics.csv" and groups[0].scores.tolist() == [110.0, 111.0]
    assert "no summary.json" in notes[0]


def test_curves_are_null_before_the_first_episode_not_zero(tmp_path):
    run = make_run(tmp_path / "a", final=(1.0, 2.0, 3.0))
    curve = report(run, tmp_path / "out", reps=100).data["curves"][0]
    assert curve["env_steps"][:3] == [64, 128, 192]
    assert curve["iqm"][:2] == [None, None] and curve["seeds"][:3] == [0, 0, 3]
    assert curve["iqm"][2] == pytest.approx(31.0)  # update 3: returns 30, 31, 32
    assert curve["iqm"][3] == curve["iqm"][2]  # update 4 ended none: the latest return holds


# --------------------------------------------------------------------------------------------
# the CLI: refusals and a whole report
def one_line_exit_2(argv, capsys, *fragments):
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    assert err.count("\n") == 1 and err.startswith("jaxppo report: error: "), err
    assert "Traceback" not in err
    for f in fragments:
        assert f in err, err
    return err


def test_runs_of_different_envs_are_refused_without_normalize(tmp_path, capsys):
    a = make_run(tmp_path / "a")
    b = make_run(tmp_path / "b", env_id="Acrobot-v1", final=(-90.0, -100.0, -80.0, -120.0))
    before = sorted(os.listdir(tmp_path))
    one_line_exit_2(["report", a, b, "--out", str(tmp_path / "out")], capsys,
                    "2 envs (Acrobot-v1, CartPole-v1)", "--normalize ENV=LOW,HIGH")
    assert sorted(os.listdir(tmp_path)) == before  # nothing written
    one_line_exit_2(["report", a, b, "--normalize", "CartPole-v1=0,500"], capsys,
                    "has no reference for Acrobot-v1")
    one_line_exit_2(["report", a, "--normalize", "CartPole-v1=5"], capsys, "ENV=LOW,HIGH")
    one_line_exit_2(["report", a, "--seed", "-1"], capsys, "--seed -1")
    one_line_exit_2(["report", a, "--gap-threshold", "nan"], capsys, "finite number")
    with pytest.raises(UsageError, match="two different finite returns"):
        report(a, tmp_path / "x", normalize={"CartPole-v1": (1.0, 1.0)})
    assert sorted(os.listdir(tmp_path)) == before
    out = tmp_path / "norm"
    assert main(["report", a, b, "--normalize", "CartPole-v1=0,500", "--normalize",
                 "Acrobot-v1=-500,0", "--out", str(out), "--reps", "100"]) == 0
    data = json.loads((out / "report.json").read_text())
    assert data["groups"][0]["scores"] == [0.2, 0.4, 0.6, 0.8]
    assert data["groups"][1]["scores"] == pytest.approx([0.82, 0.8, 0.84, 0.76])
    assert data["aggregate"]["gap_threshold"] == 1.0  # normalised: gamma 1
    assert main(["report", a, b, "--normalize", "raw", "--out", str(tmp_path / "raw"),
                 "--reps", "100"]) == 0
    capsys.readouterr()


def test_a_damaged_metrics_csv_is_one_line(tmp_path, capsys):
    run = make_run(tmp_path / "a")
    with open(os.path.join(run, "metrics.csv"), "ab") as f:
        f.write(b"13,0,832,\xff\xfe,1,1\n")
    one_line_exit_2(["report", run], capsys, "metrics.csv", "not UTF-8")
    assert not os.path.exists(os.path.join(run, "report"))


def test_report_cli_end_to_end(tmp_path, capsys):
    a = make_run(tmp_path / "a", final=(100.0, 200.0, 300.0, 400.0))
    b = make_run(tmp_path / "b", final=(480.0, 500.0, None, 490.0),
                 settings=None)
    out = tmp_path / "rep"
    assert main(["report", a, b, "--out", str(out), "--reps", "300", "--seed", "3"]) == 0
    text = capsys.readouterr().out
    assert "IQM [95% CI]" in text and "opt. gap (γ=475)" in text and "all runs" in text
    assert f"wrote {out}/: report.json, aggregate.png, curves.png, profile.png" in text
    for name in ("aggregate.png", "curves.png", "profile.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    data = json.loads((out / "report.json").read_text())
    assert [g["label"] for g in data["groups"]] == [os.path.normpath(a), os.path.normpath(b)]
    assert data["groups"][0]["stats"]["iqm"]["value"] == 250.0
    assert data["groups"][0]["stats"]["optimality_gap"]["value"] == pytest.approx(225.0)
    assert data["aggregate"]["seeds"] == 7 and data["aggregate"]["missing"] == 1
    assert len(data["profiles"]["tau"]) == 101 and len(data["curves"]) == 2
    # the same seed, the same numbers
    assert main(["report", a, b, "--out", str(tmp_path / "again"), "--reps", "300",
                 "--seed", "3"]) == 0
    assert json.loads((tmp_path / "again" / "report.json").read_text()) == data
    one_line_exit_2(["report", a, a], capsys, "given twice")
    one_line_exit_2(["report", str(tmp_path / "nope")], capsys, "is not a directory")


# -- wording and scope (issue #36, class 10) ---------------------------------------------------

def test_a_static_sweep_directory_is_read_through_its_groups(tmp_path, capsys):
    """Reproduction: a static sweep's directory was refused with 'holds no eval.json,
    summary.json or metrics.csv' (it holds a summary.json, and its groups hold runs)."""
    sweep = tmp_path / "s"
    make_run(sweep / "000_num_minibatches=2", final=(100.0, 200.0, 300.0, 400.0),
             settings=[{"lr": 1e-3}, {"lr": 3e-4}])
    make_run(sweep / "001_num_minibatches=4", final=(50.0, 60.0, 70.0, 80.0),
             settings=[{"lr": 1e-3}, {"lr": 3e-4}])
    (sweep / "static_sweep.json").write_text("{}")
    (sweep / "summary.json").write_text(json.dumps({"status": "finished", "static_settings": 2}))
    rep = report(str(sweep), tmp_path / "out", reps=50)
    labels = [g["label"] for g in rep.data["groups"]]
    assert labels == ["num_minibatches=2 / agents 0-1: lr=0.001",
                      "num_minibatches=2 / agents 2-3: lr=0.0003",
                      "num_minibatches=4 / agents 0-1: lr=0.001",
                      "num_minibatches=4 / agents 2-3: lr=0.0003"]
    assert rep.data["groups"][2]["raw_scores"] == [50.0, 60.0]
    # a folder of runs none of which has anything yet names them, not "no summary.json"
    os.makedirs(tmp_path / "empty" / "000_a")
    (tmp_path / "empty" / "000_a" / "config.yaml").write_text("env_id: CartPole-v1\n")
    one_line_exit_2(["report", str(tmp_path / "empty")], capsys, "holds run directories",
                    "000_a")


def test_rows_of_different_budgets_get_an_updates_column_and_no_pooled_row(tmp_path):
    """Reproduction: a halving sweep's agents trained 200, 600 and 1800 updates were pooled in
    one 'all runs' IQM, with no updates column or note."""
    run = make_run(tmp_path / "h", final=(100.0, 200.0, 300.0, 400.0, 500.0, 600.0),
                   settings=[{"lr": 1e-3}, {"lr": 3e-4}, {"lr": 1e-4}])
    s = json.loads(open(os.path.join(run, "summary.json")).read())
    s["ranked"] = [{"runs": [0, 1], "updates": 4}, {"runs": [2, 3], "updates": 8},
                   {"runs": [4, 5], "updates": 12}]
    open(os.path.join(run, "summary.json"), "w").write(json.dumps(s))
    rep = report(run, tmp_path / "out", reps=50)
    assert [g["updates"] for g in rep.data["groups"]] == [4, 8, 12]
    assert rep.data["aggregate"] is None
    assert any("different numbers of updates (4, 8, 12" in n for n in rep.data["notes"])
    assert "updates" in rep.table().splitlines()[1]
    same = make_run(tmp_path / "g", settings=[{"lr": 1e-3}, {"lr": 3e-4}])
    assert report(same, tmp_path / "out2", reps=50).data["aggregate"] is not None


def test_one_seed_per_row_pooled_is_not_called_one_seed(tmp_path):
    """Reproduction: a 9-seed 'all runs' row (one seed per setting) said '[no CI: 1 seed]'."""
    run = make_run(tmp_path / "r", final=(100.0, 200.0, 300.0),
                   settings=[{"lr": 1e-3}, {"lr": 3e-4}, {"lr": 1e-4}])
    table = report(run, tmp_path / "out", reps=50).table()
    all_runs = next(line for line in table.splitlines() if line.startswith("all runs"))
    assert "[no CI: 1 seed per run or setting]" in all_runs and "3" in all_runs


def test_a_run_still_training_is_not_called_killed(tmp_path):
    import fcntl

    run = make_run(tmp_path / "live", summary=False)
    fd = os.open(os.path.join(run, ".lock"), os.O_RDWR | os.O_CREAT)
    os.write(fd, str(os.getpid()).encode())
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        notes = report(run, tmp_path / "out", reps=50).data["notes"]
    finally:
        os.close(fd)
    assert any(f"still training (process {os.getpid()} holds it)" in n for n in notes), notes
    assert not any("killed" in n for n in notes)
    notes = report(run, tmp_path / "out2", reps=50).data["notes"]  # the lock is free now
    assert any("killed before writing it" in n for n in notes)


def test_the_legend_and_normalize_say_what_is_true(tmp_path, capsys):
    run = make_run(tmp_path / "a")
    json.dump({"env_id": "CartPole-v1", "returns": [[1.0], [2.0], [3.0], [4.0]]},
              open(os.path.join(run, "eval.json"), "w"))
    table = report(run, tmp_path / "out", reps=50, source="final").table()
    assert "no eval.json" not in table  # it has one; --source final chose not to use it
    one_line_exit_2(["report", run, "--normalize", "raw", "--normalize", "CartPole-v1=0,500"],
                    capsys, "raw cannot be given with --normalize ENV=LOW,HIGH")


def test_members_with_one_setting_are_told_apart_everywhere(tmp_path, monkeypatch):
    """PBT leaves several members on the same final hyperparameters: every label (table,
    report.json, each figure's series) names the agent, so none is merged or mistaken for
    another (the profile, keyed by label, lost members); every figure names the env."""
    import jaxppo.reports.build as build

    drawn = {}
    for name in ("plot_intervals", "plot_sample_efficiency", "plot_profiles"):
        monkeypatch.setattr(build, name, lambda path, what, scale, title, n=name, **kw:
                            drawn.update({n: (what, title)}))
    same = {"lr": 0.00216459, "ent_coef": 0.0125251}
    settings = [same, {"lr": 0.001, "ent_coef": 0.01}, same, same]
    run = make_run(tmp_path / "sw_pbt", final=(10.0, 20.0, 30.0, 40.0), settings=settings)
    with open(os.path.join(run, "summary.json")) as f:
        s = json.load(f)
    s["search"] = {"strategy": "pbt", "population": 4}
    with open(os.path.join(run, "summary.json"), "w") as f:
        json.dump(s, f)
    rep = report(run, tmp_path / "out", reps=50)
    labels = [g["label"] for g in rep.data["groups"]]
    assert labels == [f"agent {i}: lr={settings[i]['lr']:g},ent_coef={settings[i]['ent_coef']:g}"
                      for i in range(4)]
    assert len(set(labels)) == 4 and len(rep.data["profiles"]["groups"]) == 4
    assert [c["label"] for c in rep.data["curves"]] == labels
    table = rep.table()
    for label in labels:
        assert label in table
    assert "[no CI: 1 seed per run or setting]" in table.splitlines()[-3]  # all runs: 4 seeds, 1 per run
    assert any("PBT" in n and "final hyperparameters" in n for n in rep.data["notes"])
    for name, (_, title) in drawn.items():
        assert title.startswith("CartPole-v1: "), (name, title)
    assert [r["label"] for r in drawn["plot_intervals"][0]][:4] == labels
    # one seed per member: no "IQM over seeds", and no profile per member (16 steps drawn over
    # each other), only across them
    assert "IQM" not in drawn["plot_sample_efficiency"][1]
    assert drawn["plot_profiles"][0]["groups"] == {} and "all runs" in drawn["plot_profiles"][0]
    assert len(rep.data["profiles"]["groups"]) == 4  # report.json keeps them


def test_halving_agents_say_how_far_they_trained_and_are_noted(tmp_path):
    settings = [{"lr": 0.001}, {"lr": 0.002}, {"lr": 0.003}]
    run = make_run(tmp_path / "hv", final=(10.0, 20.0, 30.0), settings=settings)
    with open(os.path.join(run, "summary.json")) as f:
        s = json.load(f)
    s["ranked"] = [{"runs": [2], "updates": 12}, {"runs": [1], "updates": 6},
                   {"runs": [0], "updates": 3}]
    with open(os.path.join(run, "summary.json"), "w") as f:
        json.dump(s, f)
    groups, _ = read_run(run)
    assert [(g.label, g.updates) for g in groups] == [
        ("agent 0: lr=0.001", 3), ("agent 1: lr=0.002", 6), ("agent 2: lr=0.003", 12)]
    rep = report(run, tmp_path / "out", reps=50)
    assert rep.data["aggregate"] is None
    assert any("different numbers of updates (3, 6, 12" in n for n in rep.data["notes"])


@pytest.mark.parametrize("n", [3, 16, 40])
def test_every_series_has_its_own_style(n):
    from jaxppo.plots import series_styles

    styles = series_styles(n)
    assert len({(str(s["color"]), s["ls"]) for s in styles}) == n


def test_a_score_at_the_axis_limit_stays_off_the_spine():
    from jaxppo.plots import padded_limits

    lo, hi = padded_limits([68.0, 500.0, 500.0])
    assert lo < 68.0 and hi > 500.0
    lo, hi = padded_limits([0.0, 0.0])  # a gap of 0 for every run
    assert lo < 0.0 < hi
