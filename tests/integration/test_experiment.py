"""The Python run API, without argparse: callbacks, stopping, exceptions, signals, divergence,
resume, no-files runs, sweeps, and the CLI's eval agreeing with `jaxppo.evaluate`."""

import csv
import dataclasses
import json
import os
import re
import signal
import sys
import types

import jax
import numpy as np
import pytest
from conftest import compile_exactly

import jaxppo
from jaxppo import Experiment, PPOConfig, load_checkpoint
from jaxppo._xla import setup_compilation_cache
from jaxppo.cli import main
from jaxppo.keys import to_host
from jaxppo.run.stats import RunStats
from jaxppo.run.sweep_table import rank_settings
from jaxppo.rundir.metrics_csv import read_metrics_csv
from jaxppo.search import SweepResult

# 24 updates of 4 envs x 16 steps; chunks of 6 updates: 4 chunks.
CONFIG = PPOConfig(total_timesteps=1536, num_envs=4, num_steps=16, num_minibatches=2,
                   update_epochs=2, hidden_sizes=(16, 16))
CHUNK = 6
pytestmark = pytest.mark.usefixtures("compile_cache")


def experiment(tmp_path=None, name="run", **kwargs):
    kwargs = {"seeds": 2, "progress": False, "chunk_updates": CHUNK, **kwargs}
    logdir = None if tmp_path is None else str(tmp_path)
    return Experiment(kwargs.pop("config", CONFIG), logdir=logdir, run_name=name, **kwargs)


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    """One uninterrupted 2-seed run with files: what every stopped-and-resumed run must equal."""
    tmp = tmp_path_factory.mktemp("whole")
    setup_compilation_cache()
    with pytest.MonkeyPatch.context() as mp:  # the exact tests compare against it
        compile_exactly(mp)
        result = experiment(tmp).run()
    return result, os.path.join(str(tmp), "run")


def assert_same_run(run_a: str, run_b: str) -> None:
    a, b = load_checkpoint(run_a), load_checkpoint(run_b)
    assert a.update == b.update == CONFIG.num_updates
    jax.tree.map(np.testing.assert_array_equal, to_host(a.runner_state), to_host(b.runner_state))
    ma, mb = read_metrics_csv(run_a), read_metrics_csv(run_b)
    assert ma["update"].shape == (2, 24)
    for k in ("update", "env_steps", "episodic_return", "policy_loss", "episodes"):
        np.testing.assert_array_equal(ma[k], mb[k], err_msg=k)
    sa = json.load(open(os.path.join(run_a, "summary.json")))
    sb = json.load(open(os.path.join(run_b, "summary.json")))
    for k in ("final_return", "episodes_per_run", "env_steps", "solved"):
        assert sa[k] == sb[k], k


@pytest.mark.exact
def test_callbacks_see_every_chunk_once_with_its_metrics(whole):
    events = []
    result = experiment(callbacks=[events.append]).run()
    assert [e.update for e in events] == [6, 12, 18, 24]
    for e in events:
        assert e.first_update == e.update - CHUNK
        assert set(e.metrics) >= {"episodic_return", "policy_loss", "approx_kl", "old_approx_kl",
                                  "env_steps", "episodes"}
        assert all(v.shape == (2, CHUNK) and isinstance(v, np.ndarray) for v in e.metrics.values())
        np.testing.assert_array_equal(e.metrics["env_steps"][0],
                                      64 * np.arange(e.first_update + 1, e.update + 1))
        assert e.runner.train_state.step.shape == (2,) and e.sps > 0 and e.info.run_dir is None
    # The result carries the whole run: metrics [R, U], the learner state, the account.
    assert result.status == "finished" and result.update == 24 and result.env_steps == 1536
    assert result.metrics["policy_loss"].shape == (2, 24)
    np.testing.assert_array_equal(result.final_return, result.metrics["episodic_return"][:, -1])
    assert result.final_return.tolist() == whole[0].final_return.tolist()  # files change nothing
    assert result.train_state.params["params"]["actor"]["Dense_0"]["kernel"].shape == (2, 4, 16)
    assert result.compile_s > 0 and result.sps > 0 and result.wall_s > result.compile_s


def test_no_logdir_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = experiment(progress=True).run()
    assert result.run_dir is None and result.status == "finished"
    assert os.listdir(tmp_path) == []


@pytest.mark.exact
def test_a_callback_returning_false_stops_and_resume_equals_uninterrupted(tmp_path, whole):
    seen = []

    def stop_at_12(event):
        seen.append(event.update)
        return event.update < 12

    result = experiment(tmp_path, callbacks=[stop_at_12]).run()
    run = os.path.join(str(tmp_path), "run")
    assert result.status == "stopped" and result.update == 12 and seen == [6, 12]
    assert load_checkpoint(run).update == 12
    resumed = Experiment.resume(run, progress=False)
    assert resumed.status == "finished" and resumed.update == 24
    assert_same_run(whole[1], run)


@pytest.mark.exact
def test_an_exception_in_a_callback_surfaces_and_leaves_a_checkpoint(tmp_path, whole):
    def boom(event):
        if event.update == 12:
            raise ValueError("my logger broke at update 12")

    with pytest.raises(ValueError, match="my logger broke at update 12"):
        experiment(tmp_path, callbacks=[boom]).run()
    run = os.path.join(str(tmp_path), "run")
    assert load_checkpoint(run).update in (6, 12)  # the newest state that finished its chunk
    # The logs were closed, not left half-written, and the run continues from the checkpoint:
    # resuming from the checkpoint directory (or file) resolves to the run itself.
    Experiment.resume(os.path.join(run, "checkpoint"), progress=False)
    assert_same_run(whole[1], run)


@pytest.mark.parametrize("said", [np.array([]), np.array([False, False])])
def test_a_callback_returning_an_array_is_named_and_the_run_keeps_its_checkpoint(tmp_path,
                                                                                  said):
    """An array has no truth value: one line naming the callback and what it must return,
    not NumPy's 'truth value of an array is ambiguous' naming nothing."""
    def per_seed(event):
        return said if event.update == 12 else None

    with pytest.raises(TypeError) as caught:
        experiment(tmp_path, callbacks=[per_seed]).run()
    msg = str(caught.value)
    assert "per_seed" in msg and f"of shape {said.shape}" in msg, msg
    assert msg.startswith("callback per_seed returned a ndarray") and "bool" in msg, msg
    assert load_checkpoint(os.path.join(str(tmp_path), "run")).update in (6, 12)


@pytest.mark.exact
def test_sigint_stops_at_the_chunk_and_resume_equals_uninterrupted(tmp_path, whole):
    def interrupt(event):
        if event.update == 6:
            os.kill(os.getpid(), signal.SIGINT)

    result = experiment(tmp_path, callbacks=[interrupt]).run()
    run = os.path.join(str(tmp_path), "run")
    assert result.status == "stopped" and result.stop_signal == signal.SIGINT
    assert load_checkpoint(run).update == result.update == 6
    Experiment.resume(run, progress=False)
    assert_same_run(whole[1], run)


def test_a_finished_run_is_not_resumed_or_overwritten(whole):
    run = whole[1]
    before = open(os.path.join(run, "summary.json")).read()
    with pytest.raises(jaxppo.UsageError, match="is finished"):
        Experiment.resume(run)
    assert open(os.path.join(run, "summary.json")).read() == before


def test_divergence_stops_the_run_and_keeps_the_last_good_state(tmp_path):
    config = dataclasses.replace(CONFIG, env_id="test/Explode-v0", total_timesteps=64 * 6)
    events = []
    result = experiment(tmp_path, config=config, chunk_updates=1, callbacks=[events.append]).run()
    assert result.status == "diverged" and result.diverged == (0, 3, "loss")
    assert result.good_update == 2
    assert [e.diverged for e in events] == [None, None, (0, 3, "loss")]  # seen, then it stops
    ckpt = load_checkpoint(os.path.join(str(tmp_path), "run"))
    assert ckpt.update == 2
    assert all(np.isfinite(x).all() for x in jax.tree.leaves(ckpt.train_state.params))
    summary = json.load(open(os.path.join(str(tmp_path), "run", "summary.json")))
    assert summary["status"] == "diverged"
    assert summary["diverged"] == {"run": 0, "update": 3, "source": "loss"}


def test_a_normaliser_overflow_diverges_naming_it_and_keeps_the_run(tmp_path):
    """Observations of 1e30 are finite, but their square overflows the obs normaliser's float32
    variance (the policy then sees zeros). The normaliser is part of the divergence check: the
    run stops naming it, and keeps its directory, its logs and the last good checkpoint (the
    refused save of the bad state used to delete the whole run, and logdir=None said finished)."""
    config = dataclasses.replace(CONFIG, env_id="test/Poison-huge-v0", normalize_obs=True,
                                 total_timesteps=64 * 6)
    result = experiment(tmp_path, config=config, chunk_updates=1).run()
    assert result.status == "diverged" and result.diverged == (0, 3, "normaliser")
    run = os.path.join(str(tmp_path), "run")
    assert load_checkpoint(run).update == result.good_update == 2
    m = read_metrics_csv(run)
    np.testing.assert_array_equal(m["update"][0], [1, 2, 3])  # the bad update is logged too
    np.testing.assert_array_equal(m["nonfinite_source"][0], [0, 0, 4])
    summary = json.load(open(os.path.join(run, "summary.json")))
    assert summary["diverged"] == {"run": 0, "update": 3, "source": "normaliser"}
    quiet = experiment(None, config=config, chunk_updates=1).run()  # no files: the same verdict
    assert quiet.status == "diverged" and quiet.diverged == (0, 3, "normaliser")


def test_a_refused_save_never_deletes_a_run_that_has_logged(tmp_path, monkeypatch):
    """Any failure after the first chunk (here: the final save refusing a non-finite state)
    surfaces, and the run directory keeps its logs; only a run in which nothing ran is removed."""
    import jaxppo.run.callbacks

    def refuse(*args, **kwargs):
        raise jaxppo.CheckpointError("refusing to save a checkpoint with NaN/Inf parameters")

    monkeypatch.setattr(jaxppo.run.callbacks, "save_checkpoint", refuse)
    with pytest.raises(jaxppo.CheckpointError, match="refusing"):
        experiment(tmp_path).run()
    run = os.path.join(str(tmp_path), "run")
    assert read_metrics_csv(run)["update"].shape == (2, 24)


@pytest.mark.exact
def test_any_number_of_updates_chunks_with_a_remainder(whole):
    """24 updates in chunks of 9: 9, 9, 6 (two programs), equal to the unbroken run. The
    remainder, 6, is `whole`'s chunk: its program is read back from the cache, one compile."""
    events = []
    result = experiment(chunk_updates=9, callbacks=[events.append]).run()
    assert [e.update for e in events] == [9, 18, 24]
    np.testing.assert_array_equal(result.metrics["policy_loss"], whole[0].metrics["policy_loss"])


def test_sweep_ranks_settings_and_keeps_every_agent(tmp_path):
    out = jaxppo.sweep(CONFIG, {"lr": [1e-3, 3e-4], "ent_coef": [0.0]}, seeds=2,
                       logdir=str(tmp_path), run_name="s", progress=False, tensorboard=False)
    assert [r["rank"] for r in out.rows] == [1, 2]
    means = [r["final_return_mean"] for r in out.rows]
    assert means == sorted(means, reverse=True)
    finals = out.result.final_return.reshape(2, 2)
    for r in out.rows:
        g = r["runs"][0] // 2
        assert r["final_return_mean"] == pytest.approx(finals[g].mean())
        assert r["setting"] == [{"lr": 1e-3, "ent_coef": 0.0}, {"lr": 3e-4, "ent_coef": 0.0}][g]
    assert "rank" in out.table() and out.best is out.rows[0]
    # The best setting's agents can be evaluated and loaded from the sweep's directory.
    best = out.best["runs"][0]
    policy = jaxppo.load_policy(out.run_dir, seed=best)
    assert policy.act(np.zeros(4, np.float32)).shape == ()
    assert jaxppo.evaluate(out.run_dir, 2).returns.shape == (4, 2)
    summary = json.load(open(os.path.join(out.run_dir, "summary.json")))
    assert summary["ranked"][0]["label"] == out.best["label"]


def test_ties_rank_in_grid_order():
    rows = rank_settings([{"lr": 1.0}, {"lr": 2.0}, {"lr": 3.0}], np.array([5.0, 7.0, 7.0]),
                         np.zeros(3, bool), seeds=1)
    assert [r["setting"]["lr"] for r in rows] == [2.0, 3.0, 1.0]


def test_a_setting_without_any_return_ranks_last_and_shows_none():
    """NaN is a seed in which no episode ended: a setting's mean is over the seeds that have
    a return, and one with none at all ranks last, its mean None ("none" in the table)."""
    final = np.array([np.nan, np.nan, 1.0, np.nan, 0.0, 0.5])
    rows = rank_settings([{"lr": 1.0}, {"lr": 2.0}, {"lr": 3.0}], final, np.zeros(6, bool), 2)
    assert [r["setting"]["lr"] for r in rows] == [2.0, 3.0, 1.0]
    assert rows[0]["final_return_mean"] == 1.0 and rows[0]["seeds_without_return"] == 1
    assert rows[2]["final_return_mean"] is None and rows[2]["final_return_std"] is None
    table = SweepResult(rows, None, None).table().splitlines()
    assert "none" in table[3] and "no episode ended: 2/2 seeds" in table[3]
    assert "no episode ended: 1/2 seeds" in table[1]
    # A diverged seed's NaN/Inf is the divergence, not "no episode ended", and not averaged in.
    rows = rank_settings([{"lr": 1.0}], np.array([np.inf, 2.0]), np.array([True, False]), 2)
    assert rows[0]["final_return_mean"] == 2.0 and rows[0]["seeds_without_return"] == 0
    assert rows[0]["diverged_seeds"] == 1


def test_a_sweep_without_episodes_writes_none_not_zero(tmp_path):
    config = dataclasses.replace(CONFIG, env_id="test/Endless-v0", total_timesteps=128)
    out = jaxppo.sweep(config, {"lr": [1e-3, 3e-4]}, seeds=1, logdir=str(tmp_path),
                       run_name="s", progress=False, tensorboard=False)
    assert [r["final_return_mean"] for r in out.rows] == [None, None]
    assert all(line.split()[3] == "none" for line in out.table().splitlines()[1:])  # rank agent setting
    with open(os.path.join(out.run_dir, "sweep.csv")) as f:
        rows = list(csv.DictReader(f))
    assert [(r["final_return_mean"], r["final_return_std"]) for r in rows] == [("", "")] * 2


def test_no_return_round_trips_through_checkpoints_and_old_accounts_load(tmp_path):
    """A run in which no episode ends: NaN in `RunResult.final_return`, null in summary.json
    and in the checkpoint's account, still so after a resume; StopAtReturn does not fire on
    it. An account saved before (0.0 for a run without episodes) loads as NaN."""
    config = dataclasses.replace(CONFIG, env_id="test/Endless-v0", total_timesteps=768)
    result = experiment(tmp_path, config=config, seeds=1,
                        callbacks=[jaxppo.StopAtReturn(-1e9), lambda e: e.update < 6]).run()
    assert result.status == "stopped" and result.update == 6  # not by StopAtReturn at NaN
    assert np.isnan(result.final_return).all()
    run = os.path.join(str(tmp_path), "run")
    assert load_checkpoint(run).extra["stats"]["final_return"] == [None]
    resumed = Experiment.resume(run, progress=False)
    assert resumed.update == 12 and np.isnan(resumed.final_return).all()
    summary = json.load(open(os.path.join(run, "summary.json")))
    assert summary["final_return"] == [None] and summary["final_return_mean"] is None
    assert summary["runs_without_return"] == 1
    old = {"update": 3, "episodes": [0.0, 4.0], "final_return": [0.0, 2.5], "wall_s": 1.0,
           "run_s": 0.5, "steps_timed": 10}
    stats = RunStats.from_dict(old, "CartPole-v1", 2, 64)
    np.testing.assert_array_equal(stats.final_return, [np.nan, 2.5])
    again = json.loads(json.dumps(stats.to_dict(1.0)))
    assert again["final_return"] == [None, 2.5]
    np.testing.assert_array_equal(RunStats.from_dict(again, "CartPole-v1", 2, 64).final_return,
                                  [np.nan, 2.5])


def test_static_fields_cannot_be_swept_in_one_compile():
    """One Experiment is one program; the error points at jaxppo.sweep, which groups."""
    with pytest.raises(jaxppo.ConfigError, match="num_minibatches.*static.*jaxppo.sweep"):
        Experiment(CONFIG, hparams=[{"num_minibatches": 4}])


@pytest.mark.exact
def test_cli_eval_equals_the_python_evaluate(whole, capsys):
    run = whole[1]
    capsys.readouterr()
    assert main(["eval", run, "--episodes", "3", "--seed", "5"]) == 0
    out = capsys.readouterr().out
    printed = float(re.search(r"return (-?[\d.]+) ±", out).group(1))
    result = jaxppo.evaluate(run, 3, seed=5)
    assert printed == pytest.approx(result.returns.mean(), abs=0.01)
    saved = json.load(open(os.path.join(run, "eval.json")))
    assert saved["returns"] == result.returns.tolist() and saved["eval_seed"] == 5


def test_progress_says_compiling_then_one_speed(capsys):
    """Two seeds, as `test_no_logdir_writes_nothing`'s run: the same programs, compiled once."""
    experiment(progress=True).run()
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "compiling ..." and out[1].startswith("compiled in ")
    assert all(line.count("SPS") == 1 for line in out[2:]) and len(out) == 2 + 4


def test_wandb_logger_logs_cleanrl_tags(tmp_path, monkeypatch):
    logged, finished = [], []
    run = types.SimpleNamespace(log=lambda row, step: logged.append((step, row)), summary={},
                                finish=lambda: finished.append(True))
    fake = types.SimpleNamespace(init=lambda **kw: run)
    monkeypatch.setitem(sys.modules, "wandb", fake)
    experiment(tmp_path, callbacks=[jaxppo.WandbLogger(project="t")]).run()
    assert [s for s, _ in logged] == list(range(64, 1536 + 1, 64)) and finished == [True]
    assert all("losses/policy_loss" in row and "charts/SPS" in row for _, row in logged)
    assert any("charts/episodic_return" in row for _, row in logged)
    assert run.summary["status"] == "finished"


def test_wandb_missing_is_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)
    with pytest.raises(jaxppo.UsageError, match=r"pip install 'jaxppo\[wandb\]'"):
        experiment(callbacks=[jaxppo.WandbLogger()]).run()


@pytest.mark.exact
def test_donating_the_runner_state_changes_nothing_but_memory(tmp_path, whole):
    """`donate=True` (the default on a GPU/TPU): the chunk program aliases its input runner
    state to its output (one copy on the device, not two), callbacks get a host copy, and the
    run is bit-identical, stopped and resumed included."""
    seen = []
    result = experiment(tmp_path, donate=True, callbacks=[lambda e: seen.append(
        (type(e.runner.train_state.step).__module__, e.update)) or e.update < 12]).run()
    assert result.status == "stopped" and result.update == 12
    assert seen[0][0] == "numpy"  # chunk 1's state reached the host before chunk 2 consumed it
    run = os.path.join(str(tmp_path), "run")
    Experiment.resume(run, progress=False, donate=True)
    assert_same_run(whole[1], run)

    from jaxppo._xla import compiler_options
    from jaxppo.run.placement import LocalPlacement

    # Lowered and compiled as the run's driver does (init's output as the template, its
    # options): the programs `whole` and the donating run compiled, read back from the cache.
    placement = LocalPlacement(CONFIG)
    inputs = placement.place_inputs(jax.random.split(jax.random.key(0), 2), None)
    template = placement.init_program(inputs).lower(*inputs).out_info
    options = compiler_options(jax.default_backend())
    aliased = {d: placement.run_program(inputs, CHUNK, donate=d).lower(template, None)
               .compile(compiler_options=options).memory_analysis().alias_size_in_bytes
               for d in (False, True)}
    assert aliased[False] == 0 and aliased[True] > 0
