"""The environment protocol: a user's own env trains through make_train, the CLI and the
Python API; every misuse is one line before anything compiles; MultiDiscrete and masked
policies have the log-probs and entropies of their definitions."""

import dataclasses
import os
import re
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import ROOT
from flax import struct

import jaxppo
from jaxppo import ConfigError, Experiment, PPOConfig, make_train
from jaxppo.cli import main
from jaxppo.core.distributions import Categorical, MultiCategorical, mask_logits
from jaxppo.envs import MultiDiscrete, VecEnv, check_env_id, inspect_env
from jaxppo.envs.probes import Constant
from jaxppo.envs.spaces import Box, Discrete

sys.path.insert(0, ROOT)
from scripts.corridor import Corridor, State  # noqa: E402

CONFIG = dict(num_envs=8, num_steps=32, num_minibatches=4, update_epochs=4, hidden_sizes=(32,))


# ---- distributions against their definitions --------------------------------------------------
def _log_softmax(x):
    x = np.asarray(x, np.float64)
    return x - np.log(np.sum(np.exp(x)))


def test_multi_categorical_log_prob_and_entropy_are_sums_over_sub_actions():
    logits = jnp.array([[1.0, 2.0, 3.0, 0.5, -0.5]])
    dist = MultiCategorical(logits, (3, 2))
    a, b = _log_softmax([1, 2, 3]), _log_softmax([0.5, -0.5])
    np.testing.assert_allclose(dist.log_prob(jnp.array([[2, 1]]))[0], a[2] + b[1], rtol=1e-6)
    np.testing.assert_allclose(dist.log_prob(jnp.array([[0, 0]]))[0], a[0] + b[0], rtol=1e-6)
    ent = -np.sum(np.exp(a) * a) - np.sum(np.exp(b) * b)
    np.testing.assert_allclose(dist.entropy()[0], ent, rtol=1e-6)
    np.testing.assert_array_equal(dist.mode(), [[2, 0]])
    samples = jax.vmap(lambda k: dist.sample(k)[0])(jax.random.split(jax.random.key(0), 4000))
    freq = np.bincount(np.asarray(samples[:, 0]), minlength=3) / 4000
    np.testing.assert_allclose(freq, np.exp(a), atol=0.03)


def test_masked_categorical_gives_illegal_actions_zero_probability():
    logits = jnp.array([1.0, 2.0, 5.0, 4.0])
    mask = jnp.array([True, True, False, True])
    dist = Categorical(mask_logits(logits, mask))
    legal = _log_softmax([1, 2, 4])
    np.testing.assert_allclose(jax.nn.softmax(dist.logits), [*np.exp(legal[:2]), 0.0,
                                                             np.exp(legal[2])], atol=1e-7)
    np.testing.assert_allclose(dist.log_prob(jnp.array(3)), legal[2], rtol=1e-6)
    np.testing.assert_allclose(dist.entropy(), -np.sum(np.exp(legal) * legal), rtol=1e-6)
    assert np.isfinite(dist.entropy())
    assert int(dist.mode()) == 3  # the best legal action, not the illegal argmax
    samples = jax.vmap(dist.sample)(jax.random.split(jax.random.key(1), 2000))
    assert not np.any(np.asarray(samples) == 2)
    grad = jax.grad(lambda x: Categorical(mask_logits(x, mask)).log_prob(jnp.array(0)))(logits)
    assert grad[2] == 0.0  # nothing flows to an illegal action's logit


# ---- small envs for the protocol ----------------------------------------------------------------
@struct.dataclass
class DialState:
    time: jax.Array


class Dials:
    """One-step episodes, actions [3, 4]: reward 1 per dial on its right setting (2 and 1)."""

    default_params = None

    def reset_env(self, key, params):
        return jnp.ones((2,)), DialState(jnp.int32(0))

    def step_env(self, key, state, action, params):
        reward = (action[0] == 2).astype(jnp.float32) + (action[1] == 1).astype(jnp.float32)
        return jnp.ones((2,)), DialState(state.time + 1), reward, jnp.bool_(True), {}

    def observation_space(self, params):
        return Box(0.0, 1.0, (2,))

    def action_space(self, params):
        return MultiDiscrete((3, 4))


class MaskedBandit(Dials):
    """One-step episodes, 4 actions paying 0, 0.5, 0.2, 1.0; action 3 is illegal (masked), so
    the best policy takes action 1. Also reports an episode metric."""

    def step_env(self, key, state, action, params):
        reward = jnp.array([0.0, 0.5, 0.2, 1.0])[action]
        return jnp.ones((2,)), DialState(state.time + 1), reward, jnp.bool_(True), {}

    def action_space(self, params):
        return Discrete(4)

    def action_mask(self, state, params):
        return jnp.array([True, True, True, False])

    def episode_metrics(self, state, params):
        return {"steps": state.time.astype(jnp.float32)}


def _train(config, env, seeds=4):
    keys = jax.random.split(jax.random.key(0), seeds)
    return jax.jit(jax.vmap(make_train(config, env=env)))(keys)


def test_a_custom_env_instance_trains_through_make_train():
    config = PPOConfig(env_id="custom/Corridor", total_timesteps=16_384, **CONFIG)
    ret = np.asarray(_train(config, Corridor(length=8)).metrics["episodic_return"])
    # Random walk from the left half: mostly cut off at 32 steps (about -0.2); the best
    # policy walks straight right (about 0.95 on average).
    assert ret[:, :2].mean() < 0.5
    assert ret[:, -8:].mean() > 0.85, ret[:, -8:].mean(axis=1)


def test_multidiscrete_env_learns_both_dials():
    config = PPOConfig(env_id="custom/Dials", total_timesteps=8192, lr=2e-3, **CONFIG)
    ret = np.asarray(_train(config, Dials()).metrics["episodic_return"])
    assert ret[:, 0].mean() < 0.8  # random: 1/3 + 1/4
    assert ret[:, -4:].mean() > 1.8


def test_masked_env_never_takes_an_illegal_action_and_learns_the_best_legal_one():
    config = PPOConfig(env_id="custom/MaskedBandit", total_timesteps=8192, lr=2e-3, **CONFIG)
    out = _train(config, MaskedBandit())
    ret = np.asarray(out.metrics["episodic_return"])
    assert ret.max() <= 0.5 + 1e-6  # the illegal action (pays 1.0) was never taken
    assert ret[:, -4:].mean() > 0.45
    np.testing.assert_allclose(out.metrics["env/steps"], 1.0)  # one-step episodes


def test_a_mask_that_allows_nothing_is_found_per_env_and_per_sub_action():
    """What the rollout counts as an env fault (the run then stops naming the env): a row with
    no legal action, or for MultiDiscrete a sub-action with no legal value."""
    T, F = True, False
    dials = VecEnv("custom/Dials", 3, env=Dials())  # nvec (3, 4): logits [3 | 4]
    masks = jnp.array([[T, F, F, F, T, F, F],   # one value of each sub-action: fine
                       [T, T, T, F, F, F, F],   # the second sub-action allows nothing
                       [F, F, F, F, F, F, F]])
    np.testing.assert_array_equal(dials.allows_nothing(masks), [False, True, True])
    bandit = VecEnv("custom/MaskedBandit", 2, env=MaskedBandit())
    np.testing.assert_array_equal(bandit.allows_nothing(jnp.array([[F, F, F, T], [F] * 4])),
                                  [False, True])


def test_register_env_makes_an_id_usable_from_config_with_env_kwargs():
    jaxppo.register_env("test/Corridor-v0", Corridor)
    config = PPOConfig(env_id="test/Corridor-v0", env_kwargs={"length": 5}, num_envs=2,
                       num_steps=8, total_timesteps=32, num_minibatches=2)
    trainer = make_train(config)
    assert trainer.env.obs_shape == (5,)
    jax.jit(trainer)(jax.random.key(0))
    with pytest.raises(ConfigError, match="does not take") as e:
        make_train(dataclasses.replace(config, env_kwargs={"lenght": 5}))
    assert "\n" not in str(e.value)


def test_cli_trains_an_env_named_by_its_import_path(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    code = main(["train", "--config", "configs/corridor.yaml", "--logdir", str(tmp_path),
                 "--no-progress", "--set", "total_timesteps=4096"])
    out = capsys.readouterr().out
    assert code == 0 and "scripts.corridor:Corridor" in out
    (run,) = os.listdir(tmp_path)
    assert os.path.exists(tmp_path / run / "checkpoint")
    # Its render hook draws `jaxppo eval --gif`: one frame per step, the corridor's 8 cells.
    gif = str(tmp_path / "corridor.gif")
    assert main(["eval", str(tmp_path / run), "--episodes", "2", "--gif", gif]) == 0
    from PIL import Image

    img = Image.open(gif)
    length = int(re.search(r"corridor\.gif \((\d+) steps\)", capsys.readouterr().out)[1])
    assert img.n_frames == length and img.size == (8 * 24 * 2, 24 * 2 + 14)  # x2, a caption


class _CannotDraw(Corridor):
    def render(self, state, params):
        raise NotImplementedError("no display on this machine")


class _DrawnConstant(Constant):
    def render(self, state, params):
        return np.full((8, 8, 3), 200, np.uint8)


class _DrawsFloats(Corridor):
    def render(self, state, params):
        return jnp.zeros((4, 4, 3))


def test_a_render_hook_that_cannot_draw_is_no_renderer_and_a_bad_frame_is_named(tmp_path):
    from jaxppo.policy.render import NoRenderer, render_gif

    config = PPOConfig(env_id="custom/Corridor", total_timesteps=256, **CONFIG)
    ts = make_train(config, env=Corridor()).init(jax.random.key(0)).train_state
    with pytest.raises(NoRenderer, match="^no renderer for custom/Corridor: no display on"):
        render_gif(config, ts, jax.random.key(0), str(tmp_path / "a.gif"), env=_CannotDraw())
    with pytest.raises(RuntimeError, match=r"returned float32 \(4, 4, 3\); it must return one "
                                           r"frame, uint8 \[H, W, 3\]"):
        render_gif(config, ts, jax.random.key(0), str(tmp_path / "b.gif"), env=_DrawsFloats())
    assert render_gif(config, ts, jax.random.key(0), str(tmp_path / "c.gif"), env=Corridor()) > 0
    # A gymnax Environment subclass's own hook is used too (gymnax's envs keep its Visualizer).
    config = PPOConfig(env_id="custom/Constant", total_timesteps=256, **CONFIG)
    ts = make_train(config, env=_DrawnConstant()).init(jax.random.key(0)).train_state
    assert render_gif(config, ts, jax.random.key(0), str(tmp_path / "d.gif"),
                      env=_DrawnConstant()) == 1


def test_experiment_with_an_instance_resumes_and_loads_its_policy(tmp_path):
    config = PPOConfig(env_id="custom/Corridor", total_timesteps=4096, **CONFIG)
    env = Corridor(length=8)
    Experiment(config, env=env, logdir=str(tmp_path), run_name="r", progress=False,
               chunk_updates=4, callbacks=[lambda e: e.update < 8]).run()
    result = Experiment.resume(tmp_path / "r", env=env, progress=False)
    assert result.status == "finished" and result.update == config.num_updates
    policy = jaxppo.load_policy(tmp_path / "r", env=env)
    assert policy.act(jax.nn.one_hot(3, 8)).shape == ()
    scores = jaxppo.evaluate(tmp_path / "r", episodes=4, env=env)
    assert scores.returns.shape == (1, 4)
    with pytest.raises(ConfigError, match="labels an environment instance") as e:
        jaxppo.load_policy(tmp_path / "r")
    assert "\n" not in str(e.value)


# ---- truncation and time limits --------------------------------------------------------------
def test_truncation_is_done_but_not_terminated_and_max_episode_steps_adds_a_limit():
    venv = VecEnv("custom/Corridor", 1, env=Corridor(length=8))
    state = venv.reset(jax.random.key(0))[1]
    state = state._replace(inner=State(jnp.array([0]), jnp.array([31])))
    _, step = venv.step(jax.random.key(1), state, jnp.array([0]))  # step 32: the time limit
    assert bool(step.done[0]) and not bool(step.terminated[0])
    state = state._replace(inner=State(jnp.array([6]), jnp.array([3])))
    new, step = venv.step(jax.random.key(1), state, jnp.array([1]))  # onto the goal
    assert bool(step.done[0]) and bool(step.terminated[0])
    assert int(new.inner.time[0]) == 0 and int(new.inner.pos[0]) < 4  # a fresh episode
    np.testing.assert_array_equal(step.final_obs[0], jax.nn.one_hot(7, 8))

    short = VecEnv("custom/Corridor", 1, env=Corridor(length=8), max_episode_steps=3)
    state = short.reset(jax.random.key(0))[1]
    dones = []
    for t in range(3):
        state, step = short.step(jax.random.key(t), state, jnp.array([0]))
        dones.append((bool(step.done[0]), bool(step.terminated[0])))
    assert dones == [(False, False), (False, False), (True, False)]


class OwnLimit(Corridor):
    """Corridor with its own `max_episode_steps` attribute."""

    def __init__(self, limit):
        super().__init__(length=8)
        self.max_episode_steps = limit


@pytest.mark.parametrize("limit", [-3, 0, 2.5, True])
def test_an_envs_own_max_episode_steps_follows_the_config_keys_rule(limit):
    """-3 truncated every step and 0 meant no limit, without a word."""
    with pytest.raises(ConfigError, match=f"'custom/c': its max_episode_steps is {limit!r}; "
                       "use a positive integer") as e:
        VecEnv("custom/c", 1, env=OwnLimit(limit))
    assert "\n" not in str(e.value)
    assert VecEnv("custom/c", 1, env=OwnLimit(5), max_episode_steps=9).max_episode_steps == 5
    assert VecEnv("custom/c", 1, env=OwnLimit(None)).max_episode_steps is None


# ---- one line for every misuse ----------------------------------------------------------------
class NoStep:
    default_params = None

    def reset_env(self, key, params):
        return jnp.zeros(2), DialState(jnp.int32(0))

    def observation_space(self, params):
        return Box(0.0, 1.0, (2,))

    def action_space(self, params):
        return Discrete(2)


class GymnaxStyleStep(NoStep):
    def step_env(self, key, state, action, params):
        return jnp.zeros(2), state, 0.0, False, False, {}


class WrongSignature(NoStep):
    def step_env(self, state, action):
        return jnp.zeros(2), state, 0.0, False, {}


class PythonIntTime(NoStep):
    def reset_env(self, key, params):
        return jnp.zeros(2), {"time": 0}

    def step_env(self, key, state, action, params):
        return jnp.zeros(2), {"time": jnp.float32(state["time"] + 1)}, 0.0, False, {}


class VectorReward(GymnaxStyleStep):
    def step_env(self, key, state, action, params):
        return jnp.zeros(2), state, jnp.zeros(3), False, {}


class DictObs(GymnaxStyleStep):
    def reset_env(self, key, params):
        return {"grid": jnp.zeros((3, 3)), "step": jnp.zeros(())}, DialState(jnp.int32(0))

    def step_env(self, key, state, action, params):
        return self.reset_env(key, params)[0], state, 0.0, False, {}


class Crashes(GymnaxStyleStep):
    def reset_env(self, key, params):
        raise ValueError("boom\nsecond line")


class WrongObsSpace(VectorReward):
    def step_env(self, key, state, action, params):
        return jnp.zeros(2), state, 0.0, False, {}

    def observation_space(self, params):
        return Box(0.0, 1.0, (3,))


class MatrixActions(WrongObsSpace):
    def observation_space(self, params):
        return Box(0.0, 1.0, (2,))

    def action_space(self, params):
        return Box(-1.0, 1.0, (2, 2))


class BadMask(MatrixActions):
    def action_space(self, params):
        return Discrete(2)

    def action_mask(self, state, params):
        return jnp.ones((3,), bool)


@pytest.mark.parametrize("env,obs_field,match", [
    (NoStep(), None, "has no method step_env"),
    (GymnaxStyleStep(), None, "6 values looks like gymnax's auto-resetting step"),
    (WrongSignature(), None, "cannot be called as step_env"),
    (PythonIntTime(), None, "structure, shapes or dtypes differ"),
    (VectorReward(), None, "reward has shape"),
    (DictObs(), None, "fields grid, step; set config key 'obs_field'"),
    (DictObs(), "gird", "no field 'gird'"),
    (Crashes(), None, "reset_env.*failed while tracing \\(ValueError: boom\\)"),
    (WrongObsSpace(), None, "observation_space\\(params\\).shape is \\(3,\\)"),
    (MatrixActions(), None, "continuous action space of shape \\(2, 2\\)"),
    (BadMask(), None, "action mask of shape \\(3,\\)"),
    (Corridor(), "pos", "plain array observations"),
])
def test_each_misuse_is_one_line_before_compiling(env, obs_field, match):
    with pytest.raises(ConfigError, match=match) as e:
        inspect_env(env, None, "environment 'custom/x'", obs_field)
    assert "\n" not in str(e.value)


class MaskOnlyObs(DictObs):
    """A dict observation whose only field is the action mask."""

    def reset_env(self, key, params):
        return {"action_mask": jnp.ones((2,), bool)}, DialState(jnp.int32(0))


@pytest.mark.parametrize("obs_field", [None, "action_mask", "*"])
def test_a_mask_only_observation_is_refused_without_suggesting_the_mask(obs_field):
    """It used to suggest `obs_field: action_mask`, a field that is no observation."""
    with pytest.raises(ConfigError, match="only field is 'action_mask' .* nothing to train on"
                       ) as e:
        inspect_env(MaskOnlyObs(), None, "environment 'custom/x'", obs_field)
    assert "\n" not in str(e.value) and "obs_field: action_mask" not in str(e.value)


def test_a_class_passed_as_env_is_one_line_naming_the_fix(tmp_path):
    config = PPOConfig(env_id="custom/Corridor", total_timesteps=4096, **CONFIG)
    for call in (lambda: make_train(config, env=Corridor),
                 lambda: Experiment(config, env=Corridor, logdir=str(tmp_path),
                                    progress=False).run()):
        with pytest.raises(ConfigError, match="env= got the class scripts.corridor.Corridor, "
                           r"not an environment; pass an instance \(env=Corridor\(...\)\)"
                           ) as e:
            call()
        assert "\n" not in str(e.value)
    assert os.listdir(tmp_path) == []


def test_a_factory_that_raises_is_one_line_naming_the_env(tmp_path, monkeypatch):
    (tmp_path / "h4_broken_env.py").write_text(
        "def make(**kwargs):\n    raise RuntimeError('no licence file\\nsecond line')\n"
        "def bug():\n    return None + 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    small = dict(num_envs=2, num_steps=8, total_timesteps=32, num_minibatches=2)
    for env_id, kwargs, match in (
            ("h4_broken_env:make", {}, "raised: RuntimeError: no licence file;"),
            ("h4_broken_env:make", {"size": 3}, "raised: RuntimeError: no licence file;"),
            ("h4_broken_env:bug", {}, "raised: TypeError: unsupported operand")):
        with pytest.raises(ConfigError, match=f"building environment '{env_id}' {match}") as e:
            make_train(PPOConfig(env_id=env_id, env_kwargs=kwargs, **small))
        assert "\n" not in str(e.value)


def test_obs_field_picks_or_joins_fields_of_a_dict_observation():
    env = DictObs()
    assert VecEnv("custom/d", 2, env=env, obs_field="grid").obs_shape == (3, 3)
    assert VecEnv("custom/d", 2, env=env, obs_field="*").obs_shape == (10,)
    assert VecEnv("custom/d", 2, env=env, obs_field="grid,step").obs_shape == (10,)


@pytest.mark.parametrize("env_id,match", [
    ("no_such_module_xyz:Env", "cannot import 'no_such_module_xyz'"),
    ("scripts.corridor:Corridoor", "has no 'Corridoor'"),
    ("custom/", "unknown environment"),
])
def test_bad_env_ids_are_one_line(env_id, match, monkeypatch):
    monkeypatch.chdir(ROOT)
    with pytest.raises(ConfigError, match=match) as e:
        check_env_id(env_id)
    assert "\n" not in str(e.value)


def test_the_docs_show_the_example_env_as_it_is_on_disk():
    page = open(os.path.join(ROOT, "docs", "how-to", "jax-env.md"), encoding="utf-8").read()
    source = open(os.path.join(ROOT, "scripts", "corridor.py"), encoding="utf-8").read()
    shown = source[source.index("@struct.dataclass"):source.index('\nif __name__')].strip()
    assert shown in page


def test_env_params_replace_fields_of_the_params_and_name_the_valid_ones():
    config = PPOConfig(env_id="MemoryChain-bsuite", env_params={"memory_length": 20},
                       num_envs=2, num_steps=8, total_timesteps=32, num_minibatches=2)
    assert make_train(config).env.params.memory_length == 20
    with pytest.raises(ConfigError, match="no field memory_lenght; its fields: ") as e:
        make_train(dataclasses.replace(config, env_params={"memory_lenght": 20}))
    assert "max_steps_in_episode" in str(e.value) and "\n" not in str(e.value)


def test_checkpoints_from_before_the_new_state_fields_still_load():
    """Runs saved before `EnvCarry.hidden/start` and `EnvState.mask` existed hold no such
    fields; for a feedforward, unmasked run they are empty and are filled in on load."""
    from flax import serialization

    from jaxppo.keys import keys_as_data
    from jaxppo.rundir.checkpoint import restore_into

    train = make_train(PPOConfig(num_envs=2, num_steps=8, total_timesteps=32,
                                 num_minibatches=2))
    runner = jax.jit(train.init)(jax.random.key(0))
    saved = serialization.to_state_dict(keys_as_data(runner))
    for k in ("hidden", "start"):
        del saved["env"][k]
    del saved["env"]["env_state"]["mask"]
    template = jax.eval_shape(train.init, jax.random.key(0))
    restored = restore_into(template, saved, "old")
    np.testing.assert_array_equal(restored.env.obs, runner.env.obs)
    assert restored.env.hidden is None and restored.env.env_state.mask is None


def test_compare_refuses_what_sb3_would_not_run_alike():
    from jaxppo.compare.compare import comparable_config

    for change in ({"network": "gru", "hidden_sizes": (64,)}, {"max_episode_steps": 100}):
        with pytest.raises(ConfigError, match="compare different things") as e:
            comparable_config(PPOConfig(**change))
        assert "\n" not in str(e.value)


# ---- the env a run trained on ----------------------------------------------------------------
class Corridor2(Corridor):
    """Another class with Corridor's shapes (a checkpoint of Corridor would load into it)."""


@pytest.fixture(scope="module")
def stopped_instance_run(tmp_path_factory):
    """A Corridor(length=8) run stopped at update 4 of 16, with its checkpoint."""
    logdir = tmp_path_factory.mktemp("instance")
    config = PPOConfig(env_id="custom/Corridor", total_timesteps=4096, **CONFIG)
    Experiment(config, env=Corridor(length=8), logdir=str(logdir), run_name="r", progress=False,
               chunk_updates=4, callbacks=[lambda e: e.update < 4]).run()
    return logdir / "r"


@pytest.mark.parametrize("env,match", [
    (Corridor2(length=8), "the run trained on a scripts.corridor:Corridor, but env= is a "
                          "\\S*test_env_protocol:Corridor2"),
    (Corridor(length=9), "env= is another scripts.corridor:Corridor \\(length: 8 in the run, 9 now\\)"),
])
def test_another_env_is_refused_on_resume_load_and_evaluate(stopped_instance_run, env, match):
    """Resuming with another class used to go on without a word."""
    from jaxppo import CheckpointError

    for call in (lambda: Experiment.resume(stopped_instance_run, env=env, progress=False),
                 lambda: jaxppo.load_checkpoint(stopped_instance_run, env=env),
                 lambda: jaxppo.load_policy(stopped_instance_run, env=env),
                 lambda: jaxppo.evaluate(stopped_instance_run, episodes=2, env=env)):
        with pytest.raises(CheckpointError, match=match) as e:
            call()
        assert "\n" not in str(e.value) and "custom/Corridor" in str(e.value)
    ckpt = jaxppo.load_checkpoint(stopped_instance_run, env=Corridor(length=8))
    assert ckpt.extra["env"]["class"] == "scripts.corridor:Corridor"
    assert ckpt.extra["env"]["attrs"] == {"length": 8, "default_params": None}


def test_a_mismatched_instance_is_blamed_not_the_config(stopped_instance_run, tmp_path):
    """A checkpoint without the env record (older runs): shapes that disagree name env=."""
    import shutil

    from jaxppo import CheckpointError
    from jaxppo.rundir.checkpoint import save_checkpoint

    run = tmp_path / "old"
    shutil.copytree(stopped_instance_run, run)
    ckpt = jaxppo.load_checkpoint(run, env=Corridor(length=8))
    extra = {k: v for k, v in ckpt.extra.items() if k != "env"}
    save_checkpoint(str(run), ckpt.runner_state, ckpt.config, ckpt.update, ckpt.num_runs, extra)
    with pytest.raises(CheckpointError, match="does not match the environment passed as env= "
                       "\\(custom/Corridor, a scripts.corridor:Corridor\\)") as e:
        jaxppo.load_policy(run, env=Corridor(length=12))
    assert "config" not in str(e.value) and "\n" not in str(e.value)


def test_register_env_refuses_ids_it_could_never_serve_and_silent_replacements(monkeypatch):
    from jaxppo.envs import registry
    from jaxppo.run.stats import solve_threshold

    monkeypatch.setattr(registry, "_USER_ENVS", {})
    monkeypatch.setattr(registry, "_OVERWRITES", set())
    for env_id, match in (("brax/foo", "prefix 'brax/' belongs to the Brax suite"),
                          ("custom/foo", "prefix 'custom/' belongs to environment instances"),
                          ("probe/Foo-v0", "prefix 'probe/' belongs to jaxppo's probes"),
                          ("mypkg:Foo", "a ':' reads as module.path:Name"),
                          ("CartPole-v1", "a built-in id .* or pass overwrite=True"),
                          ("StatelessCartPole-v1", "a built-in id")):
        with pytest.raises(ConfigError, match=match) as e:
            jaxppo.register_env(env_id, Corridor)
        assert "\n" not in str(e.value) and env_id not in registry._USER_ENVS
    assert solve_threshold("CartPole-v1") == 475.0
    jaxppo.register_env("CartPole-v1", Corridor, overwrite=True)
    assert isinstance(registry.make_env("CartPole-v1")[0], Corridor)
    assert solve_threshold("CartPole-v1") is None  # CartPole's 475 is not the Corridor's
    with pytest.raises(TypeError, match="an instance of Corridor; register its class") as e:
        jaxppo.register_env("Inst-v0", Corridor())
    assert "\n" not in str(e.value) and "Inst-v0" not in registry._USER_ENVS
    jaxppo.register_env("Cls-v0", lambda **kw: Corridor)  # returns the class, not an instance
    with pytest.raises(ConfigError, match="returned the class Corridor, not an environment") as e:
        registry.make_env("Cls-v0")
    assert "\n" not in str(e.value)


def test_a_builtin_id_registered_before_gymnax_is_imported_is_refused_at_first_use():
    import subprocess

    code = ("import jaxppo, sys\nfrom scripts.corridor import Corridor\n"
            "assert 'gymnax' not in sys.modules\n"
            "jaxppo.register_env('CartPole-v1', Corridor)\n"
            "jaxppo.PPOConfig(env_id='Acrobot-v1')\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": ROOT}, timeout=120)
    assert proc.returncode == 1
    assert "ConfigError: register_env('CartPole-v1'): that is a built-in id" in proc.stderr


def test_an_env_record_with_a_nan_attribute_matches_the_same_env():
    """NaN != NaN in Python: a NaN default (a cost, a bound) must not refuse the run's own env."""
    from jaxppo.envs.identity import describe_env, env_mismatch

    a, b = Corridor(length=8), Corridor(length=8)
    a.scale = b.scale = float("nan")
    a.bounds = b.bounds = [0.0, float("nan")]
    assert env_mismatch(describe_env(a), b) is None
    b.bounds = [1.0, float("nan")]
    assert "bounds: [0.0, nan] in the run, [1.0, nan] now" in env_mismatch(describe_env(a), b)
