"""`jaxppo compare`: the PPOConfig -> SB3 mapping field by field, and the harness end to end."""

import dataclasses
import math
import os

import jax
import numpy as np
import pytest
import torch  # the compare extra is part of the dev extra, so CI runs these

from jaxppo import PPOConfig
from jaxppo.cli import main
from jaxppo.compare import AnnealedLR, comparable_config, make_sb3
from jaxppo.stats import SolveTracker

ROOT = os.path.dirname(os.path.dirname(__file__))
CARTPOLE = os.path.join(ROOT, "configs", "cartpole.yaml")

# Every mapped field away from its default, so a field that is dropped or swapped shows.
ODD = PPOConfig(env_id="CartPole-v1", total_timesteps=3 * 6 * 32, num_envs=6, num_steps=32,
                update_epochs=3, num_minibatches=8, lr=7e-4, anneal_lr=True, gamma=0.97,
                gae_lambda=0.9, clip_eps=0.15, clip_vloss=False, ent_coef=0.02, vf_coef=0.7,
                max_grad_norm=0.8, target_kl=0.03, norm_adv=False, hidden_sizes=(24, 40),
                activation="relu", adam_eps=3e-6)


def n_params(module) -> int:
    return sum(p.numel() for p in module.parameters())


def test_every_hyperparameter_maps_to_sb3():
    model = make_sb3(ODD, subproc=False, seed=0)
    try:
        assert model.n_envs == ODD.num_envs
        assert model.n_steps == ODD.num_steps
        assert model.n_steps * model.n_envs // model.batch_size == ODD.num_minibatches
        assert model.n_epochs == ODD.update_epochs
        assert model.gamma == ODD.gamma and model.gae_lambda == ODD.gae_lambda
        assert model.clip_range(1.0) == model.clip_range(0.0) == ODD.clip_eps
        assert model.clip_range_vf is None  # clip_vloss is off here (and forced off: below)
        assert model.normalize_advantage is ODD.norm_adv
        assert model.ent_coef == ODD.ent_coef
        assert model.vf_coef == pytest.approx(0.5 * ODD.vf_coef)  # SB3's value loss has no 0.5
        assert model.max_grad_norm == ODD.max_grad_norm
        assert model.target_kl * 1.5 == pytest.approx(ODD.target_kl)  # SB3 stops at 1.5x
        policy = model.policy
        assert policy.optimizer.defaults["eps"] == ODD.adam_eps
        assert policy.ortho_init
        linears = lambda seq: [m for m in seq if isinstance(m, torch.nn.Linear)]  # noqa: E731
        for net in (policy.mlp_extractor.policy_net, policy.mlp_extractor.value_net):
            assert [lin.out_features for lin in linears(net)] == list(ODD.hidden_sizes)
            assert all(isinstance(m, torch.nn.ReLU) for m in net if not isinstance(m, torch.nn.Linear))
        # The same networks: actor and critic MLPs of identical sizes, parameter for parameter.
        from jaxppo import make_train

        train = make_train(ODD)
        params = jax.eval_shape(train.init, jax.random.key(0)).train_state.params
        assert n_params(policy) == sum(math.prod(x.shape) for x in jax.tree.leaves(params))
    finally:
        model.get_env().close()


def test_learning_rate_schedule_matches_update_by_update():
    from jaxppo.config import Hparams
    from jaxppo.train import learning_rate

    U = ODD.num_updates
    schedule = AnnealedLR(ODD.lr, U)
    hp = Hparams.from_config(ODD)
    for k in range(U):  # SB3 calls the schedule at progress_remaining = 1 - (k + 1) / U
        ours = float(learning_rate(hp, ODD, jax.numpy.int32(k)))
        assert schedule(1.0 - (k + 1) / U) == pytest.approx(ours, rel=1e-6)
    # And end to end: after SB3 learns the whole budget, its optimizer used our last rate.
    model = make_sb3(ODD, subproc=False, seed=0)
    model.learn(total_timesteps=ODD.env_steps)
    last = float(learning_rate(hp, ODD, jax.numpy.int32(U - 1)))
    assert model.policy.optimizer.param_groups[0]["lr"] == pytest.approx(last, rel=1e-6)
    model.get_env().close()


def test_continuous_and_normalization_map_too():
    from stable_baselines3.common.vec_env import VecNormalize

    config = PPOConfig(env_id="Pendulum-v1", total_timesteps=2048, num_envs=2, num_steps=64,
                       num_minibatches=2, normalize_obs=True, normalize_reward=True, gamma=0.95,
                       anneal_lr=False, lr=1e-3)
    model = make_sb3(config, subproc=False, seed=0)
    try:
        env = model.get_env()
        assert isinstance(env, VecNormalize)
        assert env.norm_obs and env.norm_reward and env.gamma == 0.95
        assert env.clip_obs == 10.0 and env.clip_reward == 10.0  # as jaxppo's normalizer
        assert float(model.lr_schedule(0.3)) == 1e-3
        np.testing.assert_array_equal(model.policy.log_std.detach().numpy(), [0.0])
    finally:
        model.get_env().close()


def test_value_clipping_is_made_identical_and_said():
    same, notes = comparable_config(dataclasses.replace(ODD, clip_vloss=True))
    assert same.clip_vloss is False and any("clip_vloss" in n for n in notes)
    assert comparable_config(ODD) == (ODD, [])


def test_solve_rule_needs_the_window_and_every_seed():
    t = SolveTracker(475.0, num_runs=2)
    assert not t.add([500.0, 500.0], [10, 10])  # 10 episodes each: the 20-episode window is not full
    assert not t.add([500.0, 300.0], [10, 10])  # seed means 500 and 400
    assert not t.add([500.0, 500.0], [10, 10])  # seed 1's last 20 episodes: still 400
    assert not t.add([500.0, 500.0], [0, 0])  # no episode ended: nothing changes
    assert t.add([500.0, 500.0], [10, 10])  # now 500 and 500


def test_compare_runs_end_to_end(tmp_path, capsys):
    out = tmp_path / "cmp"
    argv = ["compare", "--config", CARTPOLE, "--steps", "1024", "--repeats", "1", "--seeds", "2",
            "--set", "num_envs=4", "--set", "num_steps=32", "--set", "hidden_sizes=[16, 16]",
            "--out", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    for name in ("compare.md", "compare.csv", "compare.png", "config.json"):
        assert (out / name).stat().st_size > 0
    rows = (out / "compare.csv").read_text().splitlines()
    assert [r.split(",")[0] for r in rows[1:]] == ["jaxppo", "jaxppo-seeds", "sb3-dummy",
                                                  "sb3-subproc"]
    assert "| SB3 SubprocVecEnv (4 procs) |" in printed and "× SB3 Dummy" in printed
    assert "note: clip_vloss" in printed


@pytest.mark.parametrize("argv, culprit", [
    (["--set", "env_id=Breakout-MinAtar"], "gymnasium"),
    (["--systems", "jaxppo,sb4"], "--systems"),
])
def test_compare_bad_input_is_one_line(capsys, argv, culprit):
    code = main(["compare", "--config", CARTPOLE, "--steps", "1024", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and culprit in err[0]


def test_missing_extra_says_how_to_install(monkeypatch, capsys):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "stable_baselines3" else real(name, *a))
    code = main(["compare", "--config", CARTPOLE, "--systems", "sb3-dummy"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "pip install 'jaxppo[compare]'" in err[0]
    assert "torch==2.13.0" in err[0]
