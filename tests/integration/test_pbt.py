"""Population-based training (`jaxppo sweep --search pbt`, `jaxppo.sweep(search="pbt")`): exploit
on a hand-made runner, and a tiny PBT sweep end to end: its files against its checkpoint, its
best member evaluated, a stopped-and-resumed run equal to the uninterrupted one, its damaged
logs. Its pure pieces: tests/unit/search/test_pbt_pieces.py."""

import csv
import json
import os
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import run_cli
from pbt_setup import CARTPOLE, PBT, SETS, SPACE, TINY, pbt_config

from jaxppo import Experiment, load_checkpoint, load_config, load_policy
from jaxppo.cli import main
from jaxppo.config import parse_overrides
from jaxppo.core.rollout import EnvCarry
from jaxppo.core.train import RunnerState, TrainState
from jaxppo.keys import to_host
from jaxppo.search.pbt import (
    PBTController,
    pbt_search,
)
from jaxppo.search.strategies import controller_for
from jaxppo.search.sweep import resume_sweep, sweep


def _hand_made_runner(r: int) -> RunnerState:
    """A runner of `r` members with distinct, recognisable values in every leaf."""
    row = lambda *shape: jnp.arange(r * int(np.prod(shape)), dtype=jnp.float32).reshape(  # noqa: E731
        r, *shape) + 1000 * jnp.arange(r).reshape(r, *[1] * len(shape))
    ts = TrainState({"w": row(3, 2)}, ({"mu": row(3, 2)}, {"count": jnp.arange(r)}),
                    {"mean": row(2), "var": row(2)}, jnp.full((r,), 4, jnp.int32))
    env = EnvCarry(row(5), row(4, 1), row(4))
    return RunnerState(ts, env, row(), row(), jax.random.split(jax.random.key(0), r))


def test_exploit_copies_the_parents_train_state_and_keeps_the_childs_env_and_key():
    config = pbt_config()
    settings, record = pbt_search(config, SPACE, 4, 2, 0.25, seed=0)
    pbt = PBTController.from_record(config, record, settings)
    runner = _hand_made_runner(4)
    ret = np.array([[10.0, 12.0], [np.nan, np.nan], [50.0, 60.0], [30.0, np.nan]])
    pbt.observe(SimpleNamespace(metrics={"episodic_return": ret,
                                         "episodes": np.isfinite(ret).astype(float),
                                         "nonfinite": np.array([[0, 0], [0, 1], [0, 0], [0, 0]])}))
    hparams = pbt.start(None, 0, None)
    new, new_hp = pbt.replace(runner, hparams, 2)
    # member 1 (diverged: no return) is the bottom quantile; member 2 (mean 55) the top
    for leaf_old, leaf_new in zip(jax.tree.leaves(runner.train_state),
                                  jax.tree.leaves(new.train_state), strict=True):
        np.testing.assert_array_equal(leaf_new[1], leaf_old[2])  # the parent's, exactly
        np.testing.assert_array_equal(np.delete(leaf_new, 1, 0), np.delete(leaf_old, 1, 0))
    for old_leaf, new_leaf in zip(jax.tree.leaves((runner.env, runner.last_return,
                                                   runner.last_length)),
                                  jax.tree.leaves((new.env, new.last_return, new.last_length)),
                                  strict=True):
        np.testing.assert_array_equal(new_leaf, old_leaf)  # env state, last return: its own
    np.testing.assert_array_equal(jax.random.key_data(new.key), jax.random.key_data(runner.key))
    # the child explores from the parent's hyperparameters; the others keep theirs
    assert pbt.settings[1] != settings[1]
    assert pbt.settings[:1] + pbt.settings[2:] == settings[:1] + settings[2:]
    assert pbt.settings[1]["clip_eps"] != settings[2]["clip_eps"]
    np.testing.assert_allclose(np.asarray(new_hp.lr), [s["lr"] for s in pbt.settings],
                               rtol=1e-6)
    assert pbt.summary()["pbt"] == {"exploits": 1, "exploits_per_member": [0, 1, 0, 0]}
    # the window starts again: a member without returns in it now ranks last
    assert pbt.state()["ret_count"] == [0, 0, 0, 0]


def _rows(path):
    return list(csv.DictReader(open(path, encoding="utf-8")))


@pytest.mark.exact
def test_a_pbt_sweep_end_to_end_and_its_resume(tmp_path, capsys):
    code, err = run_cli(capsys, ["sweep", "--config", CARTPOLE, *TINY, *PBT, "--seed", "3",
                                 "--logdir", str(tmp_path), "--run-name", "cli"])
    assert code == 0, err
    run = tmp_path / "cli"
    summary = json.load(open(run / "summary.json"))
    ckpt = load_checkpoint(run)
    state = ckpt.extra["controller"]
    assert summary["search"]["strategy"] == "pbt" and summary["search"]["population"] == 4
    assert summary["settings"] == state["settings"]  # each member's hyperparameters at the end
    # every member its own seed key (not common random numbers)
    keys = np.asarray(jax.random.key_data(ckpt.runner_state.key))
    assert len({tuple(k) for k in keys}) == 4

    pbt_rows, hp_rows = _rows(run / "pbt.csv"), _rows(run / "hparams.csv")
    assert summary["pbt"]["exploits"] == len(pbt_rows) > 0
    assert [int(r["update"]) for r in hp_rows] == [u for u in (0, 2, 4, 6) for _ in range(4)]
    last = {int(r["member"]): r for r in hp_rows if r["update"] == "6"}
    for m, setting in enumerate(state["settings"]):  # hparams.csv ends at the checkpoint's
        for k, v in setting.items():
            assert float(last[m][k]) == v
    for r in pbt_rows:  # each exploit: the member's row before and after
        before = {int(h["member"]): h for h in hp_rows
                  if int(h["update"]) == int(r["update"]) - 2}
        after = {int(h["member"]): h for h in hp_rows if h["update"] == r["update"]}
        m = int(r["member"])
        for k in SPACE:
            assert float(r[f"{k}_before"]) == float(before[m][k])
            assert float(r[f"{k}_after"]) == float(after[m][k])
        assert float(r["parent_return"]) >= float(r["member_return"] or "-inf")
    table = list(csv.DictReader(open(run / "sweep.csv", encoding="utf-8")))
    assert sorted(int(r["runs"]) for r in table) == [0, 1, 2, 3]  # one row per member
    # PBT ranks by what metrics.csv logs: the mean of a member's non-empty episodic_return
    # cells over the interval before the exploit (issue #36: a carried-over return counted)
    logged = _rows(run / "metrics.csv")
    for r in pbt_rows:
        for who, col in ((r["member"], "member_return"), (r["parent"], "parent_return")):
            cells = [float(x["episodic_return"]) for x in logged if x["run"] == who and
                     int(r["update"]) - 2 < int(x["update"]) <= int(r["update"]) and
                     x["episodic_return"] != ""]
            if not cells:
                assert r[col] == "", (r, col)
            else:
                np.testing.assert_allclose(float(r[col]), np.mean(cells), rtol=1e-5)
    # TensorBoard names each member as the tables do (by its id; its hyperparameters change)
    exp = Experiment(ckpt.config, hparams=ckpt.record.settings, logdir=None,
                     controller=controller_for(ckpt.config, ckpt.record, 4))
    assert exp.run_names() == [f"agent_{m:03d}" for m in range(4)]

    # the best member is evaluable
    best = int(table[0]["runs"])
    policy = load_policy(run, seed=best)
    np.testing.assert_array_equal(jax.tree.leaves(policy.train_state.params)[0],
                                  jax.tree.leaves(ckpt.train_state.params)[0][best])
    capsys.readouterr()
    assert main(["eval", str(run), "--episodes", "2", "--no-json"]) == 0
    every = capsys.readouterr().out.splitlines()
    assert main(["eval", str(run), "--episodes", "2", "--no-json", "--agent", str(best)]) == 0
    alone = capsys.readouterr().out.splitlines()
    # `--agent M`: member M's episodes, the same as its line among every member's
    assert alone[0].startswith(f"agent {best}: ") and (
        f"return {every[best].split(': ', 1)[1]} over 2 episodes" in alone[0]), (alone, every)
    code, err = run_cli(capsys, ["eval", str(run), "--episodes", "2", "--agent", "4"])
    assert code == 2 and len(err) == 1 and "--agent 4" in err[0] and "0..3" in err[0], err

    # stopped between two PBT steps (the window half full), then resumed: the same run
    config = pbt_config()
    stopped = sweep(config, space=SPACE, search="pbt", population=4, interval=2, seed=3,
                    logdir=str(tmp_path), run_name="api", progress=False, tensorboard=False,
                    checkpoint_every=1, callbacks=[lambda e: e.update < 3])
    assert stopped.result.update == 3
    code, err = run_cli(capsys, ["train", "--resume", str(tmp_path / "api")])
    assert code == 2 and len(err) == 1 and "sweep --resume" in err[0], err
    # stopped again right after a PBT step (its next chunk already in flight), then resumed
    again = resume_sweep(tmp_path / "api", progress=False, tensorboard=False,
                         callbacks=[lambda e: e.update < 4])
    assert again.result.update == 4
    resumed = resume_sweep(tmp_path / "api", progress=False, tensorboard=False)
    assert resumed.result.summary["settings"] == summary["settings"]
    assert resumed.result.summary["pbt"] == summary["pbt"]
    for name in ("pbt.csv", "hparams.csv"):
        assert open(tmp_path / "api" / name).read() == open(run / name).read(), name
    for a, b in zip(jax.tree.leaves(to_host(load_checkpoint(tmp_path / "api").runner_state)),
                    jax.tree.leaves(to_host(ckpt.runner_state)), strict=True):
        np.testing.assert_array_equal(a, b)  # params, optimizer, normaliser, envs, keys


@pytest.fixture(scope="module")
def stopped_pbt(tmp_path_factory):
    """A PBT sweep (exploits at updates 2 and 4) stopped at update 5 with its checkpoint."""
    tmp = tmp_path_factory.mktemp("pbt_logs")
    result = sweep(pbt_config(), space=SPACE, search="pbt", population=4, interval=2, seed=3,
                   logdir=str(tmp), run_name="s", progress=False, tensorboard=False,
                   checkpoint_every=1, callbacks=[lambda e: e.update < 5]).result
    assert result.update == 5 and result.summary["pbt"]["exploits"] >= 2
    return tmp / "s"


def _copy(run, tmp_path):
    import shutil

    shutil.copytree(run, tmp_path / "r")
    return tmp_path / "r"


def test_a_pbt_log_cut_mid_row_is_refused_then_repaired_with_the_gap_recorded(
        stopped_pbt, tmp_path, capsys):
    """Reproduction: pbt.csv cut mid-row was resumed with exit 0, its rows up to the
    checkpoint silently gone, and the summary then counted more exploits than the file held."""
    run = _copy(stopped_pbt, tmp_path)
    data = (run / "pbt.csv").read_bytes()
    (run / "pbt.csv").write_bytes(data[:-8])  # the last exploit's row, cut mid-row
    before = {n: (run / n).read_bytes() for n in ("pbt.csv", "hparams.csv", "metrics.csv")}
    code, err = run_cli(capsys, ["sweep", "--resume", str(run), "--no-progress"])
    assert code == 2 and len(err) == 1 and "Traceback" not in err[0], err
    assert "pbt.csv' is damaged: it lacks 1 of the checkpoint's" in err[0], err
    assert "--repair-log" in err[0] and "(checkpoint at update 5)" in err[0], err
    assert {n: (run / n).read_bytes() for n in before} == before  # nothing written
    code, err = run_cli(capsys, ["sweep", "--resume", str(run), "--no-progress",
                                 "--repair-log"])
    assert code == 0, err
    assert any("pbt.csv' was repaired" in e and "pbt.csv.damaged" in e for e in err), err
    assert (run / "pbt.csv.damaged").read_bytes() == data[:-8]
    summary = json.load(open(run / "summary.json"))
    lost = summary["pbt"]["log_missing"]["pbt.csv"]
    assert sum(lost.values()) == 1
    rows = _rows(run / "pbt.csv")
    assert len(rows) == summary["pbt"]["exploits"] - 1  # the count and the file agree, told
    assert (run / "pbt.csv").read_bytes().startswith(data[:data.rindex(b"\r\n", 0, -8) + 2])


def test_a_pbt_log_moved_aside_is_noted_and_recorded(stopped_pbt, tmp_path, capsys):
    """Reproduction: moving a damaged log aside, as advised, lost its rows without a word."""
    run = _copy(stopped_pbt, tmp_path)
    os.rename(run / "hparams.csv", run / "hparams.csv.old")
    code, err = run_cli(capsys, ["sweep", "--resume", str(run), "--no-progress"])
    assert code == 0, err
    assert any("hparams.csv' is missing" in e and "pbt.log_missing" in e for e in err), err
    summary = json.load(open(run / "summary.json"))
    assert summary["pbt"]["log_missing"]["hparams.csv"] == [
        [u, m] for u in (0, 2, 4) for m in range(4)]
    assert [int(r["update"]) for r in _rows(run / "hparams.csv")] == [6] * 4


@pytest.mark.parametrize("damage", [b"\xff\xfe garbage\r\n", b"x,1,2\r\n"], ids=["bytes", "row"])
def test_lines_that_are_not_rows_are_dropped_with_a_copy_and_a_note(stopped_pbt, tmp_path,
                                                                    capsys, damage):
    run = _copy(stopped_pbt, tmp_path)
    data = (run / "pbt.csv").read_bytes()
    cut = data.index(b"\r\n") + 2  # after the header
    (run / "pbt.csv").write_bytes(data[:cut] + damage + data[cut:])
    code, err = run_cli(capsys, ["sweep", "--resume", str(run), "--no-progress"])
    assert code == 0, err
    assert any("dropped 1 line(s) that are not rows" in e for e in err), err
    assert (run / "pbt.csv.damaged").exists() and "log_missing" not in json.load(
        open(run / "summary.json"))["pbt"]


def test_a_rescued_member_is_not_diverged_but_one_that_goes_non_finite_again_is(tmp_path,
                                                                                capsys):
    """lr 1e35 sends a member's parameters to NaN/Inf at its first update; an exploit replaces
    its learner with a healthy parent's. With these draws (host numpy, seed 7) member 3 is
    rescued at update 2 and stays finite, while member 0, rescued at 4, explores back to lr
    1e35 and goes non-finite again. `diverged_runs` counts the runs non-finite after their last
    renewal: at the end, after a stop and resume at the exploit update, and when the summary
    is rebuilt from the checkpoint; the CLI names the diverged one and the rescued one."""
    space = ["--space", "lr=0.0003,0.0005,0.001,1e35"]
    argv = ["sweep", "--config", CARTPOLE, *TINY, "--search", "pbt", "--population", "4",
            "--interval", "2", *space, "--seed", "7", "--logdir", str(tmp_path),
            "--run-name", "nan"]
    code, err = run_cli(capsys, argv)
    assert code == 0, err
    run = tmp_path / "nan"
    last = {int(r["member"]): int(r["update"]) for r in _rows(run / "pbt.csv")}  # the last
    bad: dict[int, list[int]] = {}
    for r in _rows(run / "metrics.csv"):
        if float(r["nonfinite"]) > 0:
            bad.setdefault(int(r["run"]), []).append(int(r["update"]))
    again = sorted(m for m, ups in bad.items() if max(ups) > last.get(m, -1))
    rescued = sorted(m for m, ups in bad.items() if max(ups) <= last.get(m, -1))
    assert rescued == [3] and again == [0]
    summary = json.load(open(run / "summary.json"))
    assert summary["status"] == "finished" and summary["diverged_runs"] == again
    assert sorted(d["run"] for d in summary["divergences"]) == [0, 3]  # the record
    first_again = min(u for u in bad[0] if u > last[0])
    assert (summary["diverged"]["run"], summary["diverged"]["update"]) == (0, first_again)
    assert any("1 of 4 agents diverged" in e and "agent 0" in e for e in err), err
    assert any("agent(s) 3 went NaN/Inf" in e for e in err), err
    # stopped at the exploit update 4 (member 0 renewed there), resumed: the same account
    config = load_config(CARTPOLE, parse_overrides(SETS))
    stopped = sweep(config, space={"lr": [0.0003, 0.0005, 0.001, 1e35]}, search="pbt",
                    population=4, interval=2, seed=7, logdir=str(tmp_path), run_name="api",
                    progress=False, tensorboard=False, checkpoint_every=1,
                    callbacks=[lambda e: e.update < 4])
    assert stopped.result.update == 4 and stopped.result.summary["diverged_runs"] == []
    resumed = resume_sweep(tmp_path / "api", progress=False, tensorboard=False)
    assert resumed.result.summary["diverged_runs"] == again
    os.remove(run / "summary.json")  # killed before it: the resume rebuilds it from the log
    code, err = run_cli(capsys, ["sweep", "--resume", str(run), "--no-progress"])
    assert code == 0, err
    assert json.load(open(run / "summary.json"))["diverged_runs"] == again


def test_the_console_table_names_each_member():
    """Members on one final setting stay apart: each row names its agent (what `--agent M`
    takes), and a one-seed row shows no spread (no "± 0.00")."""
    from jaxppo.run.sweep_table import rank_settings
    from jaxppo.search.table import SweepResult

    same = {"lr": 0.00216459, "ent_coef": 0.0125251}
    rows = rank_settings([same, {"lr": 0.001, "ent_coef": 0.01}, same], np.array([1.0, 3.0, 2.0]),
                         np.zeros(3, bool), 1)
    lines = SweepResult(rows, None, None).table().splitlines()
    assert lines[0].split()[:3] == ["rank", "agent", "setting"]
    assert [line.split()[1] for line in lines[1:]] == ["1", "2", "0"]
    assert not any("±" in line for line in lines)
    assert "agent 1: lr=0.001,ent_coef=0.01" in repr(SweepResult(rows, None, "runs/x"))
