"""Host environments (`envs/host.py`, `envs/sources/gymnasium.py`): Gymnasium envs written in
plain Python/NumPy, stepped from inside the compiled training program (the checklist every
source passes, on gymnasium/CartPole-v1, is tests/integration/test_env_sources.py: ids, the missing
install, steps equal Gymnasium's own, the time limit truncates, CartPole learns)."""

from __future__ import annotations

import multiprocessing
import os
import signal

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import ROOT, run_cli

import jaxppo
from jaxppo import Experiment, PPOConfig, make_train
from jaxppo.envs import HostVecEnv
from jaxppo.envs.registry import HOST_SOURCES
from jaxppo.envs.sources.protocol import HostStep
from jaxppo.errors import ConfigError, EnvError
from jaxppo.policy.render import render_gif
from jaxppo.run.driver import Driver, StopNow
from jaxppo.rundir.checkpoint import load_checkpoint


class Walk(gymnasium.Env):
    """A walk on a line from a random start in -1..1: action 1 steps right, 0 left; reaching
    +3 or -3 terminates (reward: the position after the step). Registered with a time limit
    of 6 steps: episodes end both ways within a few steps."""

    observation_space = gymnasium.spaces.Box(-10.0, 10.0, (2,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def __init__(self, fail_at: int | None = None, fault: str = "raise"):
        self.fail_at, self.fault, self.calls = fail_at, fault, 0

    def _obs(self):
        return np.array([self.pos, self.t], np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.pos, self.t = int(self.np_random.integers(-1, 2)), 0
        return self._obs(), {}

    def step(self, action):
        self.calls += 1
        if self.fail_at is not None and self.calls >= self.fail_at:
            if self.fault == "raise":
                raise RuntimeError("the simulator lost its licence")
            if self.fault == "exit":
                raise SystemExit(3)
            if self.fault == "interrupt":  # a second Ctrl-C, handled while inside the step
                raise StopNow(signal.SIGINT)
            return np.zeros(3, np.float32), 0.0, False, False, {}  # the wrong shape
        self.pos += 1 if int(action) == 1 else -1
        self.t += 1
        return self._obs(), float(self.pos), abs(self.pos) >= 3, False, {}


class Pixels(gymnasium.Env):
    """uint8 image observations and a MultiDiscrete action; reward for matching the pixel."""

    observation_space = gymnasium.spaces.Box(0, 255, (6, 6, 1), np.uint8)
    action_space = gymnasium.spaces.MultiDiscrete([2, 3])

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.bit = int(self.np_random.integers(0, 2))
        return np.full((6, 6, 1), 255 * self.bit, np.uint8), {}

    def step(self, action):
        reward = float(int(action[0]) == self.bit)
        self.bit = int(self.np_random.integers(0, 2))
        return np.full((6, 6, 1), 255 * self.bit, np.uint8), reward, False, False, {}


class Reach(gymnasium.Env):
    """A Box action: reward -|a - 0.5|."""

    observation_space = gymnasium.spaces.Box(-1.0, 1.0, (3,), np.float32)
    action_space = gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(3, np.float32), {}

    def step(self, action):
        return np.zeros(3, np.float32), -abs(float(action[0]) - 0.5), False, False, {}


gymnasium.register("test/Walk-v0", entry_point=Walk, max_episode_steps=6)
gymnasium.register("test/Pixels-v0", entry_point=Pixels, max_episode_steps=20)
gymnasium.register("test/Reach-v0", entry_point=Reach, max_episode_steps=10)

WALK = "gymnasium/test/Walk-v0"
CARTPOLE = os.path.join(ROOT, "configs", "cartpole.yaml")
TINY = dict(total_timesteps=4 * 8 * 4, num_envs=4, num_steps=8, num_minibatches=2,
            update_epochs=1, hidden_sizes=(8,))


def walk_config(**kw) -> PPOConfig:
    return PPOConfig(**{"env_id": WALK, **TINY, **kw})


@pytest.fixture(scope="module")
def walk_train():
    return make_train(walk_config())


# ---- the adapter against Gymnasium's own step ------------------------------------------------
def test_steps_equal_gymnasium_with_no_autoreset_transition_and_true_final_obs():
    env = HostVecEnv(WALK, 3)
    key = jax.random.key(5)
    # columns 0 and 1 walk right (terminate), column 2 back and forth (truncated at 6 steps)
    actions = np.array([[1, 1, 0], [1, 1, 1], [1, 0, 0], [0, 1, 1], [1, 1, 0], [1, 1, 1],
                        [0, 0, 1], [1, 1, 1], [1, 1, 1]], np.int32)
    obs, state = jax.jit(env.reset)(key)
    step = jax.jit(env.step)
    got = []
    for a in actions:
        state, s = step(key, state, jnp.asarray(a))
        got.append(jax.device_get(s))
    # The reference: one gymnasium env per column, stepped by hand, reset by hand on an end.
    seed = int(jax.random.bits(key, dtype=jnp.uint32))
    refs = [gymnasium.make("test/Walk-v0") for _ in range(3)]
    first = [r.reset(seed=seed + i)[0] for i, r in enumerate(refs)]
    np.testing.assert_array_equal(np.asarray(obs), np.stack(first))
    ends = {"terminated": 0, "truncated": 0}
    for t, a in enumerate(actions):
        for i, r in enumerate(refs):
            o, rew, term, trunc, _ = r.step(int(a[i]))
            s = got[t]
            np.testing.assert_array_equal(s.final_obs[i], o)  # the true last obs where ended
            assert (s.reward[i], bool(s.terminated[i]), bool(s.done[i])) == (
                rew, term, term or trunc), (t, i)
            if term or trunc:
                ends["terminated" if term else "truncated"] += 1
                o = r.reset()[0]  # the next episode's first obs; no auto-reset transition
            np.testing.assert_array_equal(s.obs[i], o)
    assert ends["terminated"] >= 1 and ends["truncated"] >= 1, ends
    env.close()


def test_every_callback_runs_once_after_its_state_unused_or_repeated_ones_too():
    env = HostVecEnv(WALK, 2)
    calls = []
    source = type(env.source)
    reset, step = source.reset, source.step

    def prog(key):
        _, state = env.reset(key)
        right, left = jnp.ones(2, jnp.int32), jnp.zeros(2, jnp.int32)
        state, s1 = env.step(key, state, right)
        _, twin = env.step(key, state, left)  # the same inputs twice: both must step
        _, s2 = env.step(key, state, left)
        env.step(key, state, right)  # its result unused: it still steps
        return s1.obs, twin.obs, s2.obs

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(source, "reset", lambda self, seed: calls.append("reset") or reset(self, seed))
        mp.setattr(source, "step", lambda self, a: calls.append(int(a[0])) or step(self, a))
        s1, twin, s2 = jax.jit(prog)(jax.random.key(0))
    # each once; a step after the one whose state it takes (the data dependency orders them:
    # they are not JAX's ordered effects, see host.py); the three taking the same state, in
    # any order among themselves (obs: position, steps so far; env 0 starts at 0 and cannot
    # reach +-3 in these four steps, so its walk never restarts)
    assert calls[:2] == ["reset", 1] and sorted(calls[2:]) == [0, 0, 1]
    assert list(np.asarray(s1)[:, 1]) == [1, 1]
    assert sorted([int(np.asarray(twin)[0, 1]), int(np.asarray(s2)[0, 1])]) in ([2, 3], [2, 4],
                                                                              [3, 4])
    env.close()


class _Liar:
    """A host source whose second step hands back float observations for a uint8 space."""

    PREFIX, SUITE, INSTALL_HINT = "liar/", "Liar", "none"
    observation_space = gymnasium.spaces.Box(0, 255, (2,), np.uint8)
    action_space = gymnasium.spaces.Discrete(2)
    max_episode_steps = None

    def __init__(self, num_envs: int):
        self.env_id, self.num_envs, self.calls = "liar/x", num_envs, 0

    @staticmethod
    def env_ids():
        return ["x"]

    @classmethod
    def make_source(cls, name, num_envs, kwargs, evaluation):
        return cls(num_envs)

    def reset(self, seed):
        return np.zeros((self.num_envs, 2), np.uint8)

    def step(self, action):
        self.calls += 1
        obs = np.zeros((self.num_envs, 2), np.float64 if self.calls == 2 else np.uint8)
        flags = np.zeros(self.num_envs, bool)
        reward = np.zeros(self.num_envs, np.float32)
        return HostStep(obs, obs, reward, flags, flags, reward, flags)

    def close(self):
        pass


def test_a_wrong_dtype_from_a_source_is_recorded_and_raised_as_one_line(monkeypatch):
    monkeypatch.setitem(HOST_SOURCES, _Liar.PREFIX, _Liar)
    env = HostVecEnv("liar/x", 3)
    _, state = jax.jit(env.reset)(jax.random.key(0))
    step = jax.jit(env.step)
    for _ in range(3):  # the third step is not taken: the source is not stepped after a fault
        state, s = step(jax.random.key(0), state, jnp.zeros(3, jnp.int32))
    assert env.source.calls == 2 and not np.any(np.asarray(s.obs))
    with pytest.raises(EnvError) as e:
        env.check()
    assert str(e.value) == ("environment 'liar/x' failed at its vectorised step 2: ValueError: "
                            "observation of dtype float64, expected uint8")


def test_a_missing_dependency_and_a_refused_num_envs_are_one_line():
    gymnasium.register("test/NeedsMuJoCo-v0", entry_point=_needs_mujoco)
    with pytest.raises(ConfigError, match="needs a package that is not installed") as e:
        HostVecEnv("gymnasium/test/NeedsMuJoCo-v0", 2)
    assert "\n" not in str(e.value)
    with pytest.raises(ConfigError, match="vectorization 'threads'"):
        HostVecEnv(WALK, 2, env_kwargs={"vectorization": "threads"})


def _needs_mujoco():
    raise gymnasium.error.DependencyNotInstalled("mujoco is not installed, run `pip install mujoco`")


# ---- training ---------------------------------------------------------------------------------
@pytest.mark.exact
def test_vmapped_seeds_share_one_pool_and_equal_each_seed_alone(walk_train):
    env = walk_train.env
    calls = []
    step = type(env.source).step

    def counted(self, action):
        calls.append(len(action))
        return step(self, action)

    keys = jax.random.split(jax.random.key(1), 2)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(type(env.source), "step", counted)
        both = jax.jit(jax.vmap(walk_train))(keys)
    config = walk_train.config
    # one pool of 2 x 4 envs, one host call per vectorised step
    assert calls == [2 * config.num_envs] * (config.num_updates * config.num_steps)
    for i in range(2):
        alone = jax.jit(walk_train)(keys[i])
        for k in ("episodic_return", "episodic_length", "episodes"):
            np.testing.assert_allclose(both.metrics[k][i], alone.metrics[k], rtol=1e-5)
    again = jax.jit(walk_train)(keys[0])  # the same seed: the same run
    np.testing.assert_array_equal(again.metrics["episodic_return"],
                                  jax.jit(walk_train)(keys[0]).metrics["episodic_return"])
    assert np.all(np.asarray(both.metrics["episodes"]) > 0)


def test_settings_vmapped_over_one_key_are_refused_in_the_host_envs_line(walk_train):
    """`jax.vmap(train, in_axes=(None, 0))` over settings: the pool holds one set of envs, and
    the settings would step it as many (found while tracing, never stepped)."""
    hps = jaxppo.Hparams.stack([jaxppo.Hparams.from_config(walk_train.config)._replace(lr=lr)
                                for lr in (1e-3, 3e-4)])
    with pytest.raises(ValueError, match="a host env's state must be mapped"):
        jax.make_jaxpr(jax.vmap(walk_train, in_axes=(None, 0)))(jax.random.key(0), hps)


@pytest.mark.filterwarnings("ignore::UserWarning")  # Gymnasium: Pixels has no render modes
def test_uint8_images_stay_uint8_and_multidiscrete_and_box_actions_train(tmp_path):
    config = PPOConfig(env_id="gymnasium/test/Pixels-v0", **TINY)
    train = make_train(config)
    assert train.env.obs_dtype == jnp.uint8 and train.env.nvec == (2, 3)
    runner = jax.jit(train.init)(jax.random.key(0))
    assert runner.env.obs.dtype == jnp.uint8 and runner.env.obs.shape == (4, 6, 6, 1)
    out = jax.jit(train)(jax.random.key(0))
    assert np.all(np.isfinite(out.metrics["policy_loss"]))
    # a GIF from the observation frames (Pixels cannot render): its 20-step episode
    assert render_gif(config, out.train_state, jax.random.key(1), str(tmp_path / "p.gif")) == 20
    assert os.path.getsize(tmp_path / "p.gif") > 0
    reach = make_train(PPOConfig(env_id="gymnasium/test/Reach-v0", **TINY))
    assert not reach.env.discrete and reach.env.action_shape == (1,)
    out = jax.jit(reach)(jax.random.key(0))
    assert np.all(np.isfinite(out.metrics["episodic_return"][1:]))


def test_cli_seeds_2_then_eval_and_load_policy(tmp_path, capsys):
    argv = ["train", "--config", CARTPOLE, "--set", f"env_id={WALK}", "--set", "total_timesteps=128",
            "--set", "num_envs=4", "--set", "num_steps=8", "--set", "num_minibatches=2",
            "--set", "update_epochs=1", "--set", "hidden_sizes=[8]", "--seeds", "2",
            "--logdir", str(tmp_path), "--run-name", "walk", "--no-progress"]
    code, err = run_cli(capsys, argv)
    assert code == 0, err
    run = str(tmp_path / "walk")
    assert load_checkpoint(run).num_runs == 2
    code, err = run_cli(capsys, ["eval", run, "--episodes", "3"])
    assert code == 0, err
    result = jaxppo.evaluate(run, episodes=3)
    assert result.returns.shape == (2, 3) and not result.cut_off.any()
    # the same episodes for both runs' seeds, and the same again next time
    np.testing.assert_array_equal(result.returns, jaxppo.evaluate(run, episodes=3).returns)
    policy = jaxppo.load_policy(run, seed=1)
    assert policy.act(np.zeros(2, np.float32)).shape == ()


@pytest.mark.exact
def test_resume_starts_fresh_episodes_in_one_line_and_the_learner_exactly(tmp_path, capsys,
                                                                          monkeypatch):
    config = walk_config(total_timesteps=4 * 8 * 8)
    Experiment(config, logdir=str(tmp_path), run_name="r", progress=False, chunk_updates=2,
               callbacks=[lambda e: e.update < 4]).run()
    saved = load_checkpoint(tmp_path / "r")
    assert saved.update == 4
    started = []
    run = Driver.run
    monkeypatch.setattr(Driver, "run", lambda self, runner, *a, **k: started.append(
        jax.device_get(runner)) or run(self, runner, *a, **k))
    capsys.readouterr()
    result = Experiment.resume(tmp_path / "r", progress=False, chunk_updates=2)
    err = capsys.readouterr().err.strip().splitlines()
    assert result.status == "finished" and result.update == 8
    assert err == [f"note: {WALK} lives on the host, outside the checkpoint: the learner "
                   "continues exactly from update 4, with every episode started afresh"]
    # The resumed run starts from the saved learner, bit for bit, and from fresh episodes.
    first = started[0]
    for got, want in ((first.train_state, saved.runner_state.train_state),
                      (first.key, saved.runner_state.key)):
        jax.tree.map(np.testing.assert_array_equal, jax.random.key_data(got)
                     if got is first.key else got, jax.random.key_data(want)
                     if want is saved.runner_state.key else want)
    assert not np.any(first.env.env_state.episode_length)
    assert not np.any(first.env.discounted_return)


@pytest.mark.parametrize("fault, what", [("raise", "the simulator lost its licence"),
                                         ("shape", "ValueError"), ("exit", "SystemExit: 3")])
def test_a_failing_host_env_is_one_line_and_the_checkpoint_before_it_stays(
        tmp_path, capsys, fault, what):
    # env 0 fails at its 45th step: update 6 (of 8 steps), env step 5
    gymnasium.register(f"test/Fail-{fault}-v0", entry_point=Walk, max_episode_steps=6,
                       kwargs={"fail_at": 45, "fault": fault})
    env_id = f"gymnasium/test/Fail-{fault}-v0"
    argv = ["train", "--config", CARTPOLE, "--set", f"env_id={env_id}",
            "--set", "total_timesteps=256",
            "--set", "num_envs=4", "--set", "num_steps=8", "--set", "num_minibatches=2",
            "--set", "update_epochs=1", "--set", "hidden_sizes=[8]",
            "--logdir", str(tmp_path), "--run-name", "f", "--no-progress"]
    code, err = run_cli(capsys, argv)
    assert code == 2, err
    assert len(err) == 1 and "Traceback" not in err[0], err
    assert err[0].startswith(f"jaxppo train: error: environment '{env_id}' failed at update 6, "
                             "env step 5 of 8 ("), err
    # one update per chunk here: the last good one is the update before
    assert what in err[0] and "the checkpoint at update 5 is kept" in err[0], err
    assert load_checkpoint(tmp_path / "f").update == 5


def test_a_second_ctrl_c_inside_a_host_env_step_stops_at_once_in_one_line(tmp_path, capsys):
    """Reproduction: a StopNow (or SystemExit) raised inside the env's step escaped into XLA:
    ~100 lines, three tracebacks, exit 1."""
    gymnasium.register("test/Fail-interrupt-v0", entry_point=Walk, max_episode_steps=6,
                       kwargs={"fail_at": 45, "fault": "interrupt"})
    env_id = "gymnasium/test/Fail-interrupt-v0"
    argv = ["train", "--config", CARTPOLE, "--set", f"env_id={env_id}",
            "--set", "total_timesteps=256", "--set", "num_envs=4", "--set", "num_steps=8",
            "--set", "num_minibatches=2", "--set", "update_epochs=1", "--set", "hidden_sizes=[8]",
            "--logdir", str(tmp_path), "--run-name", "f", "--no-progress"]
    code, err = run_cli(capsys, argv)
    assert code == 128 + signal.SIGINT, err
    assert len(err) == 1 and "Traceback" not in err[0], err
    assert (f"stopped at once by SIGINT while environment '{env_id}' was stepping (update 6, "
            "env step 5 of 8); the newest checkpoint is kept") in err[0], err
    assert load_checkpoint(tmp_path / "f").update == 5


@pytest.mark.filterwarnings("ignore:os.fork", "ignore::UserWarning")  # the worker's error
@pytest.mark.parametrize("how", ["finished", "stopped", "failed"])
def test_the_async_pool_is_closed_however_the_run_ends(how):
    """Two envs, so two worker processes to start and close (four updates, as the others')."""
    gymnasium.register("test/FailAsync-v0", entry_point=Walk, max_episode_steps=6,
                       kwargs={"fail_at": 20})
    env_id = "gymnasium/test/FailAsync-v0" if how == "failed" else WALK
    config = walk_config(env_id=env_id, env_kwargs={"vectorization": "async"}, num_envs=2,
                         total_timesteps=2 * 8 * 4)
    exp = Experiment(config, logdir=None, progress=False, chunk_updates=1,
                     callbacks=[lambda e: how != "stopped" or e.update < 2])
    if how == "failed":
        with pytest.raises(EnvError, match="failed at update 3"):
            exp.run()
    else:
        assert exp.run().status == how
    assert exp._host_env._box == [None]
    assert not multiprocessing.active_children()  # the workers are gone


def test_devices_and_controlled_sweeps_are_refused_in_one_line():
    with pytest.raises(ConfigError, match="lives on the host and trains on one device"):
        Experiment(walk_config(), logdir=None, devices=1).run()
    with pytest.raises(ConfigError, match="cannot follow agents copied or dropped") as e:
        Experiment(walk_config(), logdir=None, controller=object()).run()
    assert "\n" not in str(e.value)
