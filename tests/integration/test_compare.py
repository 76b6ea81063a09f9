"""`jaxppo compare`: the PPOConfig -> SB3 mapping field by field, and the harness end to end."""

import contextlib
import csv
import dataclasses
import io
import math
import os
import tempfile

import jax
import numpy as np
import pytest
from conftest import ROOT

from jaxppo import PPOConfig
from jaxppo.cli import main
from jaxppo.compare.compare import comparable_config
from jaxppo.compare.sb3_run import AnnealedLR, make_sb3
from jaxppo.run.solve import SolveTracker

# The compare extra (torch, SB3) is in the dev extra on Python 3.11, so CI's first line runs
# these; on 3.12+ the package index has no CPU-only torch build and the dev extra leaves it out.
torch = pytest.importorskip("torch", reason="the compare extra (torch, SB3) is not installed")
pytest.importorskip("stable_baselines3", reason="the compare extra (SB3) is not installed")

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
    from jaxppo.core.train import learning_rate

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


def test_bfloat16_and_thresholdless_envs_are_made_comparable_and_said():
    same, notes = comparable_config(dataclasses.replace(ODD, compute_dtype="bfloat16"))
    assert same.compute_dtype == "float32" and any("compute_dtype" in n for n in notes)
    same, notes = comparable_config(dataclasses.replace(ODD, env_id="Breakout-MinAtar"))
    assert any("no solve threshold" in n for n in notes)


def test_solve_rule_needs_the_window_and_every_seed():
    t = SolveTracker(475.0, num_runs=2)
    assert not t.add([500.0, 500.0], [10, 10])  # 10 episodes each: the 20-episode window is not full
    assert not t.add([500.0, 300.0], [10, 10])  # seed means 500 and 400
    assert not t.add([500.0, 500.0], [10, 10])  # seed 1's last 20 episodes: still 400
    assert not t.add([500.0, 500.0], [0, 0])  # no episode ended: nothing changes
    assert t.add([500.0, 500.0], [10, 10])  # now 500 and 500


@pytest.fixture(scope="module")
def end_to_end(tmp_path_factory):
    """The default systems' compare run (its folder, what it printed) and the SubprocVecEnv
    sizes its memory check measured (`fit.measure_sb3`, before the runs): two tests read it."""
    import jaxppo.compare.compare as cmp

    out, sizes, printed = tmp_path_factory.mktemp("e2e") / "cmp", [], io.StringIO()
    argv = ["compare", "--config", CARTPOLE, "--steps", "256", "--repeats", "1", "--seeds", "2",
            "--set", "num_envs=2", "--set", "num_steps=32", "--set", "hidden_sizes=[16, 16]",
            "--out", str(out)]
    measure = cmp.measure_sb3

    def kept(*args, **kw):
        sizes.append(measure(*args, **kw))
        return sizes[-1]

    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(printed):
        mp.setattr(cmp, "measure_sb3", kept)
        assert main(argv) == 0
    return out, printed.getvalue(), sizes


def test_compare_runs_end_to_end(end_to_end):
    out, printed, _ = end_to_end
    for name in ("compare.md", "compare.csv", "compare.png", "config.json"):
        assert (out / name).stat().st_size > 0
    rows = (out / "compare.csv").read_text().splitlines()
    assert [r.split(",")[0] for r in rows[1:]] == ["jaxppo", "jaxppo-seeds", "sb3-dummy",
                                                  "sb3-subproc"]
    assert "| SB3 SubprocVecEnv (2 procs) |" in printed and "× SB3 Dummy" in printed
    assert "note: clip_vloss" in printed


@pytest.mark.parametrize("argv, culprit", [
    (["--set", "env_id=DeepSea-bsuite"], "gymnasium"),
    (["--systems", "jaxppo,sb4"], "--systems"),
])
def test_compare_bad_input_is_one_line(capsys, argv, culprit):
    code = main(["compare", "--config", CARTPOLE, "--steps", "1024", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and culprit in err[0]


@pytest.mark.parametrize("module,config", [("stable_baselines3", "cartpole.yaml"),
                                           ("minatar", "minatar_breakout_cnn.yaml")])
def test_missing_extra_says_how_to_install(monkeypatch, capsys, module, config):
    """SB3 for any compare, the reference MinAtar for a MinAtar one: one line, the extra."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == module else real(name, *a))
    code = main(["compare", "--config", os.path.join(ROOT, "configs", config), "--systems",
                 "sb3-dummy"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "pip install 'jaxppo[compare]'" in err[0]
    assert "torch==2.13.0" in err[0]


# ---------------------------------------------------------------------------------------------
# MinAtar: the reference `minatar` package under SB3, made equal to gymnax's MinAtar
MINATAR_CNN = os.path.join(ROOT, "configs", "minatar_breakout_cnn.yaml")


def test_minatar_env_steps_as_the_reference_does():
    """Same seed, same actions: the wrapper's states, rewards and ends are minatar's own, with
    gymnax's 3 Breakout actions being the reference's minimal set (no-op, left, right)."""
    from minatar import Environment

    from jaxppo.compare.sb3 import MinAtarEnv

    env = MinAtarEnv("breakout", max_steps=None)
    ref = Environment("breakout", sticky_action_prob=0.0)
    assert env.action_set == [0, 1, 3] and env.action_space.n == 3
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=3)
    ref.seed(3)
    ref.reset()
    ends = 0
    for _ in range(400):
        np.testing.assert_array_equal(obs, ref.state())
        a = int(rng.integers(3))
        obs, r, term, trunc, _ = env.step(a)
        r_ref, term_ref = ref.act([0, 1, 3][a])
        assert (r, term, trunc) == (r_ref, term_ref, False)
        if term:
            ends += 1
            obs, _ = env.reset()
            ref.reset()
    assert ends >= 2  # the comparison crossed episode ends


def test_minatar_env_has_gymnax_layout_and_time_limit():
    import gymnax

    from jaxppo.compare.sb3 import MinAtarEnv
    from jaxppo.compare.twins import MINATAR_GAMES, MINATAR_IDS, minatar_time_limit

    assert set(MINATAR_GAMES) == set(MINATAR_IDS) == {
        e for e in gymnax.registered_envs if e.endswith("-MinAtar")}
    for env_id, game in MINATAR_GAMES.items():
        genv, params = gymnax.make(env_id)
        gobs, _ = genv.reset(jax.random.key(0), params)
        ours = MinAtarEnv(game, max_steps=None)
        obs, _ = ours.reset(seed=0)
        assert ours.observation_space.shape == gobs.shape == obs.shape, env_id
        assert ours.observation_space.dtype == gobs.dtype == obs.dtype == np.float32, env_id
        assert ours.action_space.n == genv.num_actions, env_id
        assert minatar_time_limit(env_id, None) == params.max_steps_in_episode, env_id
    # Channel by channel: gymnax's first Breakout frame is one of the reference's two (the ball
    # starts left or right).
    genv, params = gymnax.make("Breakout-MinAtar")
    gobs = np.asarray(genv.reset(jax.random.key(1), params)[0])
    env = MinAtarEnv("breakout", max_steps=None)
    firsts = {env.reset(seed=s)[0].tobytes() for s in range(20)}
    assert len(firsts) == 2 and gobs.tobytes() in firsts
    # jaxppo's max_episode_steps, where shorter, is the SB3 side's too; it truncates.
    assert minatar_time_limit("Breakout-MinAtar", 5) == 5
    env = MinAtarEnv("breakout", max_steps=2)
    env.reset(seed=0)
    assert env.step(0)[2:4] == (False, False) and env.step(0)[2:4] == (False, True)


def _flax_to_torch(policy, params) -> None:
    """Copy jaxppo's cnn-torso ActorCritic weights into the SB3 policy, layer by layer."""
    def put(lin, p, conv=False):
        k = np.asarray(p["kernel"])
        k = k.transpose(3, 2, 0, 1) if conv else k.T  # HWIO -> OIHW; (in, out) -> (out, in)
        lin.weight.data = torch.tensor(k.copy())
        lin.bias.data = torch.tensor(np.asarray(p["bias"]).copy())

    for side, fe, mlp, head in (("actor", policy.pi_features_extractor,
                                 policy.mlp_extractor.policy_net, policy.action_net),
                                ("critic", policy.vf_features_extractor,
                                 policy.mlp_extractor.value_net, policy.value_net)):
        p = params["params"][side]
        put(fe.convs[0], p["Conv_0"], conv=True)
        hidden = [m for m in mlp if isinstance(m, torch.nn.Linear)]
        for i, lin in enumerate([*hidden, head]):
            put(lin, p[f"Dense_{i}"])


def test_cnn_torso_is_jaxppos_network_in_torch():
    """Same parameter shapes and count, and with jaxppo's weights copied in, the same logits and
    values: the conv, its VALID padding, the (H, W, C) flatten and the separate actor/critic."""
    from jaxppo.compare.sb3 import ConvTorso
    from jaxppo.config import load_config
    from jaxppo.core.networks import init_params, make_network

    config = load_config(MINATAR_CNN, {"num_envs": 2, "num_steps": 16, "total_timesteps": 32,
                                       "num_minibatches": 2, "hidden_sizes": [32, 24]})
    model = make_sb3(config, subproc=False, seed=0)
    try:
        policy = model.policy
        assert isinstance(policy.pi_features_extractor, ConvTorso)
        assert policy.pi_features_extractor is not policy.vf_features_extractor
        spec = type("Spec", (), dict(obs_shape=(10, 10, 4), action_dim=3, discrete=True,
                                     multi_discrete=False))
        net = make_network(config, spec)
        params = init_params(net, jax.random.key(0), (10, 10, 4))
        assert n_params(policy) == sum(x.size for x in jax.tree.leaves(params))
        conv = policy.pi_features_extractor.convs[0]
        assert (conv.kernel_size, conv.stride, conv.padding) == ((3, 3), (1, 1), (0, 0))
        _flax_to_torch(policy, params)
        obs = (np.random.default_rng(0).random((5, 10, 10, 4)) < 0.3).astype(np.float32)
        dist, value = net.apply(params, obs)
        with torch.no_grad():
            t_obs = torch.tensor(obs)
            t_dist = policy.get_distribution(t_obs)
            t_value = policy.predict_values(t_obs)[:, 0]
        np.testing.assert_allclose(t_dist.distribution.logits.numpy(),
                                   jax.nn.log_softmax(dist.logits), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(t_value.numpy(), value, rtol=1e-4, atol=1e-5)
    finally:
        model.get_env().close()


def test_sb3_minatar_side_runs_in_subprocesses(monkeypatch):
    """The SB3 side end to end on MinAtar (the harness itself is tested on CartPole above):
    the env pickles into SubprocVecEnv workers, which import no JAX (the next test's check,
    here on MinAtar's factory, read as the run closes them), and Monitor's returns reach the
    result."""
    from stable_baselines3.common.vec_env import SubprocVecEnv

    from jaxppo.compare.compare import run_system
    from jaxppo.compare.tree import holds_jax
    from jaxppo.config import load_config

    real_close, held = SubprocVecEnv.close, []

    def close(self):
        if not self.closed:
            held.append([holds_jax(proc.pid) for proc in self.processes])
        real_close(self)

    monkeypatch.setattr(SubprocVecEnv, "close", close)
    config = load_config(MINATAR_CNN, {"num_envs": 2, "num_steps": 64, "total_timesteps": 256,
                                       "num_minibatches": 2, "update_epochs": 1,
                                       "hidden_sizes": [16], "max_episode_steps": 50})
    out = run_system("sb3-subproc", config, 1, 0)
    assert out["env_steps"] == 256 and out["final_return"] is not None  # 50-step time limit
    assert len(held) == 1, held
    if os.path.exists("/proc/self/maps"):
        assert held == [[False, False]]


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="reads /proc/PID/maps")
def test_sb3_workers_import_no_jax():
    """SubprocVecEnv's workers hold what a plain SB3 script's would: the env factories reach
    them by value, so no worker imports jaxppo and JAX (each did: +~80 MB and seconds of
    setup counted on SB3's side). `imports` (a config's env_imports) still run there.
    MinAtar's workers: checked in the run above."""
    from jaxppo.compare.sb3 import make_vec
    from jaxppo.compare.tree import holds_jax

    env = make_vec("gymnasium", "gymnasium/CartPole-v1", 2, True, 0,
                   gym_id="CartPole-v1", imports=("json",))
    try:
        env.reset()
        assert [holds_jax(proc.pid) for proc in env.processes] == [False, False]
    finally:
        env.close()


# ---------------------------------------------------------------------------------------------
# Atari: EnvPool's Breakout-v5 (jaxppo, after the envpool source lands) vs ALE under SB3's wrappers
def _allow_envpool_ids(monkeypatch):
    """PPOConfig checks env_id against jaxppo's env sources; the SB3 side needs none of them."""
    import jaxppo.config.schema

    real = jaxppo.config.schema.check_env_id
    monkeypatch.setattr(jaxppo.config.schema, "check_env_id",
                        lambda env_id: None if env_id.startswith(("envpool/", "gymnasium/"))
                        else real(env_id))


def _cleanrl_atari(**kw) -> PPOConfig:
    """CleanRL's envpool PPO settings (ppo_atari_envpool.py), as configs/atari_breakout.yaml."""
    base = dict(env_id="envpool/Breakout-v5", total_timesteps=10_000_000, num_envs=8,
                num_steps=128, num_minibatches=4, update_epochs=4, lr=2.5e-4, anneal_lr=True,
                gamma=0.99, gae_lambda=0.95, clip_eps=0.1, ent_coef=0.01, vf_coef=0.5,
                max_grad_norm=0.5, torso="nature_cnn", activation="relu", hidden_sizes=(512,))
    return PPOConfig(**{**base, **kw})


def test_atari_hyperparameters_map_by_hand(monkeypatch):
    from jaxppo.compare.sb3 import atari_gym_id, policy_setup
    from jaxppo.compare.sb3_run import sb3_kwargs

    _allow_envpool_ids(monkeypatch)
    config, notes = comparable_config(_cleanrl_atari(clip_vloss=True))
    assert any("clip_vloss" in n for n in notes)
    kw = sb3_kwargs(config)
    assert kw["n_steps"] == 128
    assert kw["batch_size"] == 256  # 8 envs x 128 steps / 4 minibatches
    assert kw["n_epochs"] == 4
    assert (kw["clip_range"], kw["clip_range_vf"], kw["ent_coef"]) == (0.1, None, 0.01)
    assert kw["vf_coef"] == 0.25 and kw["max_grad_norm"] == 0.5  # 0.5 x CleanRL's 0.5
    assert (kw["gamma"], kw["gae_lambda"], kw["normalize_advantage"]) == (0.99, 0.95, True)
    lr = kw["learning_rate"]  # 10M / 1024 = 9765 updates, annealed to 0
    assert isinstance(lr, AnnealedLR) and lr.num_updates == 9765
    # SB3 asks at progress_remaining 1 - (k + 1) / U for update k: 2.5e-4 * (1 - k / U)
    assert lr(1.0 - 1 / 9765) == 2.5e-4
    assert lr(1.0 - 2 / 9765) == pytest.approx(2.5e-4 * 9764 / 9765)
    assert lr(0.0) == pytest.approx(2.5e-4 / 9765)
    assert policy_setup("atari", "nature_cnn") == ("CnnPolicy", {"share_features_extractor": False})
    assert policy_setup("atari", "nature_cnn", True) == ("CnnPolicy",
                                                         {"share_features_extractor": True})
    assert atari_gym_id("envpool/Breakout-v5") == "BreakoutNoFrameskip-v4"


@pytest.mark.parametrize("kw", [{}, {"shared_torso": True},
                                {"shared_torso": True, "hidden_sizes": ()}],
                         ids=["own torsos", "shared torso", "shared torso, heads only (CleanRL)"])
def test_nature_cnn_policy_has_jaxppos_parameters(monkeypatch, kw):
    from gymnasium import spaces
    from stable_baselines3.common.policies import ActorCriticCnnPolicy

    from jaxppo.compare.sb3_run import sb3_kwargs
    from jaxppo.core.networks import init_params, make_network

    _allow_envpool_ids(monkeypatch)
    config = _cleanrl_atari(**kw)
    pk = dict(sb3_kwargs(config)["policy_kwargs"])
    policy = ActorCriticCnnPolicy(spaces.Box(0, 255, (4, 84, 84), np.uint8), spaces.Discrete(4),
                                  lambda _: 2.5e-4, **pk)
    spec = type("Spec", (), dict(obs_shape=(84, 84, 4), action_dim=4, discrete=True,
                                 multi_discrete=False))
    net = make_network(config, spec)
    params = jax.eval_shape(lambda k: init_params(net, k, (84, 84, 4)), jax.random.key(0))
    assert n_params(policy) == sum(math.prod(x.shape) for x in jax.tree.leaves(params))


def test_sb3_atari_logs_whole_unclipped_games(monkeypatch):
    """Under SB3's Atari wrappers the learner sees clipped rewards and a life loss as an end,
    while Monitor's episode is a whole game whose return is the raw score: the raw reward is
    made distinguishable (raw r -> 3 r + 0.5, so every clipped reward is 1) and summed per game."""
    pytest.importorskip("cv2", reason="SB3's Atari wrappers need opencv (the compare extra)")
    from ale_py.env import AtariEnv

    from jaxppo.compare.sb3 import make_vec

    game, raw_games = [], []  # the raw rewards of the game under way; each finished game's sum
    real_step, real_reset = AtariEnv.step, AtariEnv.reset

    def step(self, action, *a, **kw):
        obs, r, term, trunc, info = real_step(self, action, *a, **kw)
        game.append(3.0 * r + 0.5)
        return obs, game[-1], term, trunc, info

    def reset(self, *a, **kw):  # ALE resets only when a whole game is over
        if game:
            raw_games.append(sum(game))
            game.clear()
        return real_reset(self, *a, **kw)

    monkeypatch.setattr(AtariEnv, "step", step)
    monkeypatch.setattr(AtariEnv, "reset", reset)
    env = make_vec("atari", "envpool/Breakout-v5", 1, subproc=False, seed=0)
    try:
        env.reset()
        games, learner_ends = [], 0
        for _ in range(2000):
            _, reward, done, infos = env.step(np.array([env.action_space.sample()]))
            assert reward[0] == 1.0  # clipped: sign(3 r + 0.5)
            learner_ends += int(done[0])
            if "episode" in infos[0]:
                games.append(infos[0]["episode"]["r"])
                if len(games) == 2:
                    break
        assert len(games) == 2
        np.testing.assert_allclose(games, raw_games, rtol=1e-6)
        assert learner_ends >= 2 * 5  # Breakout's 5 lives: each one an end for the learner
    finally:
        env.close()


def test_sb3_atari_side_runs_at_a_tiny_budget(monkeypatch):
    pytest.importorskip("cv2", reason="SB3's Atari wrappers need opencv (the compare extra)")
    from jaxppo.compare.compare import run_system

    _allow_envpool_ids(monkeypatch)
    config = _cleanrl_atari(total_timesteps=128, num_envs=2, num_steps=64, num_minibatches=2,
                            update_epochs=1, hidden_sizes=(16,))
    out = run_system("sb3-subproc", config, 1, 0)
    assert out["env_steps"] == 128 and out["sps"] > 0


def test_jaxppo_atari_compare_end_to_end(tmp_path):
    pytest.importorskip("envpool", reason="EnvPool has no wheel for this platform")
    pytest.importorskip("cv2", reason="SB3's Atari wrappers need opencv (the compare extra)")
    out = tmp_path / "cmp"
    argv = ["compare", "--config", os.path.join(ROOT, "configs", "atari_breakout.yaml"),
            "--steps", "128", "--repeats", "1", "--systems", "jaxppo,sb3-dummy", "--set",
            "num_envs=2", "--set", "num_steps=64", "--set", "num_minibatches=2", "--set",
            "update_epochs=1", "--out", str(out)]
    assert main(argv) == 0
    assert [r.split(",")[0] for r in (out / "compare.csv").read_text().splitlines()[1:]] == [
        "jaxppo", "sb3-dummy"]
    rows = list(csv.DictReader(open(out / "compare.csv")))  # no threshold: no "not solved" claim
    assert [(r["solve_s"], r["solved"]) for r in rows] == [("", "-"), ("", "-")]
    md = (out / "compare.md").read_text()
    assert "not solved" not in md and "no solve threshold" in md


# ---------------------------------------------------------------------------------------------
# A user's Gymnasium env: the same id on both sides
def test_sb3_side_of_a_gymnasium_id(monkeypatch):
    _allow_envpool_ids(monkeypatch)
    config = dataclasses.replace(ODD, env_id="gymnasium/CartPole-v1")
    model = make_sb3(config, subproc=False, seed=0)
    try:
        assert model.get_env().envs[0].unwrapped.spec.id == "CartPole-v1"
        assert model.n_envs == ODD.num_envs and model.n_steps == ODD.num_steps
    finally:
        model.get_env().close()


def test_sb3_leaves_no_folder_in_the_temp_dir(tmp_path, monkeypatch):
    """SB3's default logger made tempdir/SB3-<date and time> on every learn() and left it
    there: one empty folder per SB3 run of `jaxppo compare`, which reads nothing from it."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    model = make_sb3(ODD, subproc=False, seed=0)
    try:
        model.learn(total_timesteps=ODD.num_envs * ODD.num_steps)
    finally:
        model.get_env().close()
    assert model.num_timesteps == ODD.num_envs * ODD.num_steps
    assert os.listdir(tmp_path) == []


def test_compare_on_a_busy_machine_states_its_threads_and_load(tmp_path, capsys, monkeypatch):
    """A table measured under load says so, and names the threads each side computed with
    (SB3's torch threads pinned, 1 by default, here 2: what its child process reports); its
    folder is flat, as train's run dirs (the env id has a '/'); its progress lines rounded."""
    import re

    import jaxppo.compare.compare as cmp
    from jaxppo.compare.fit import cores

    _allow_envpool_ids(monkeypatch)
    monkeypatch.setattr(cmp, "machine_load", lambda: cores() + 2.5)
    monkeypatch.setattr(cmp, "other_work", lambda *a: 1.25)  # other work: busy
    monkeypatch.chdir(tmp_path)
    argv = ["compare", "--config", CARTPOLE, "--steps", "256", "--repeats", "1", "--systems",
            "jaxppo,sb3-dummy", "--set", "env_id=gymnasium/CartPole-v1", "--set", "num_envs=2",
            "--set", "num_steps=32", "--set", "hidden_sizes=[16]", "--sb3-threads", "2"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    [out] = os.listdir(tmp_path / "runs")  # one level: runs/compare__gymnasium_CartPole-v1__...
    assert out.startswith("compare__gymnasium_CartPole-v1__"), out
    md = (tmp_path / "runs" / out / "compare.md").read_text()
    busy = f"figures unreliable: other work kept 1.2 of {cores()} cores busy on average"
    assert busy in md and busy in printed
    assert f"other work during runs at most 1.2 of {cores()} cores; load average before runs " \
           f"at most {cores() + 2.5:.1f}" in md
    assert "SB3's torch pinned to 2 per process (--sb3-threads)" in md
    rows = {r["system"]: r for r in csv.DictReader(open(tmp_path / "runs" / out / "compare.csv"))}
    assert rows["sb3-dummy"]["threads"] == "torch 2", rows
    assert rows["jaxppo"]["threads"].startswith("XLA:CPU pool of ")
    assert "| SB3 DummyVecEnv (2 envs) | torch 2 |" in md
    finals = re.findall(r"solved: .*, final return (\S+)", printed)
    assert len(finals) == 2 and all(re.fullmatch(r"-?\d+\.\d|-", f) for f in finals), finals


def test_subproc_processes_that_cannot_fit_are_refused_before_any_run(tmp_path, capsys,
                                                                      monkeypatch):
    """64 SubprocVecEnv processes of ~0.45 GB on a 24 GB machine: one line naming --systems,
    before any run starts and with no folder left."""
    import jaxppo.compare.compare as cmp
    import jaxppo.compare.fit as fit

    gib = 1024**3
    monkeypatch.setattr(cmp, "measure_sb3", lambda config, env=None: {
        "worker": int(0.45 * gib), "main": int(0.6 * gib)})
    monkeypatch.setattr(fit, "host_available", lambda: 20 * gib)
    monkeypatch.setattr(cmp.subprocess, "run", lambda *a, **k: pytest.fail("a run started"))
    out = tmp_path / "cmp"
    code = main(["compare", "--config", os.path.join(ROOT, "configs", "minatar_breakout.yaml"),
                 "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    for words in ("--systems", "64 processes", "leave it out (--systems "
                  "jaxppo,jaxppo-seeds,sb3-dummy)", "num_envs"):
        assert words in err[0], (words, err[0])
    assert not out.exists()


def test_the_subproc_size_is_measured(end_to_end):
    """A SubprocVecEnv worker imports torch and SB3: tens of MB at least; and no JAX: measured
    as compare measures (its child process, started as its runs are: the end-to-end run's own
    check), it holds what a plain SB3 script's worker holds."""
    [size] = end_to_end[2]
    assert size["worker"] > 20 * 1024**2 and size["main"] > size["worker"], size
    if os.path.exists("/proc/self/maps"):
        assert size["worker_jax"] is False, size
        # nor the SB3 process measured around it (`fit.TORCH_CHILD`): its "main" is SB3's own
        assert size["jax_loaded"] is False, size


@pytest.mark.parametrize("argv, culprit", [
    (["--set", "env_id=Breakout-MinAtar", "--set", "network=gru"], "'network'"),
    (["--set", "env_id=Breakout-MinAtar", "--set", "torso=nature_cnn"], "'torso'"),
    (["--set", "env_id=envpool/Breakout-v5", "--set", "torso=cnn"], "'torso'"),
    (["--set", "env_id=envpool/Breakout-v5", "--set", "torso=nature_cnn"], "'activation'"),
    (["--set", "env_id=envpool/HalfCheetah-v4"], "'env_id'"),
    (["--set", "env_id=gymnasium/CartPole-v1", "--set", "torso=cnn"], "'torso'"),
])
def test_compare_bad_env_setup_is_one_line(monkeypatch, capsys, argv, culprit):
    _allow_envpool_ids(monkeypatch)
    code = main(["compare", "--config", CARTPOLE, "--steps", "1024", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and culprit in err[0], err


