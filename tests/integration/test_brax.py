"""Brax's specifics (the checklist every source passes is tests/integration/test_env_sources.py:
steps equal Brax's own, the time limit truncates, the autoreset is Brax's reset on a fresh key,
ids, the missing install): a fallen pole terminates and actions clip, the lazy autoreset equals
pre-drawn resets, one-line errors through the CLI, Gymnasium's MuJoCo ids pointing to Brax.
Learning: tests/learning/test_brax_learns.py."""

import functools
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("brax")

from conftest import ROOT  # noqa: E402

from jaxppo import ConfigError, load_config  # noqa: E402
from jaxppo.cli import main  # noqa: E402
from jaxppo.envs import VecEnv, check_env_id  # noqa: E402

IDP = "brax/inverted_double_pendulum"
IDP_CONFIG = os.path.join(ROOT, "configs", "brax_inverted_double_pendulum.yaml")
T = 40  # steps per rollout: the poles fall within it under full force, resets happen


@functools.cache
def _scanner(env: VecEnv):
    """One compiled T-step scan per env object (compiling Brax's physics takes seconds)."""
    def run(key, actions):
        _, state = env.reset(key)
        rand = env.draw_randomness(jax.random.fold_in(key, 1), actions.shape[0])

        def body(state, xs):
            rand, action = xs
            return env.step_with(rand, state, action)

        return jax.lax.scan(body, state, (rand, actions))[1]

    return jax.jit(run)


def _rollout(env: VecEnv, key, actions):
    """Step `env` through `actions [T, N, 1]` with the rollout's randomness; returns the steps."""
    return _scanner(env)(key, actions)


@functools.cache
def _lazy() -> VecEnv:
    """Four envs resetting inside a `lax.cond`: one env object (one compiled scan) for the two
    tests below."""
    return VecEnv(IDP, 4, reset="cond")


def test_falling_terminates_and_actions_clip():
    env = _lazy()
    steps = _rollout(env, jax.random.key(1), jnp.ones((T, 4, 1)))  # full force one way
    # Actions beyond the actuator range [-1, 1] step like the bound itself.
    big = _rollout(env, jax.random.key(1), jnp.full((T, 4, 1), 50.0))
    np.testing.assert_array_equal(np.asarray(big.obs), np.asarray(steps.obs))
    term, done = np.asarray(steps.terminated), np.asarray(steps.done)
    assert term.any(axis=0).all()
    np.testing.assert_array_equal(term, done)  # no time limit reached within T steps
    first = term.argmax(axis=0)
    envs = np.arange(4)
    np.testing.assert_array_equal(np.asarray(steps.episode_length)[first, envs], first + 1)
    ret = np.asarray(steps.episode_return)[first, envs]
    reward = np.asarray(steps.reward)
    np.testing.assert_allclose(ret, [reward[: first[i] + 1, i].sum() for i in envs], rtol=1e-5)


def test_lazy_reset_matches_predrawn_resets():
    """Resetting inside a `lax.cond` gives exactly what the pre-drawn T x N resets give."""
    eager = VecEnv(IDP, 4, reset="predrawn")
    actions = jax.random.uniform(jax.random.key(2), (T, 4, 1), minval=-1.0, maxval=1.0) * 3
    a = _rollout(_lazy(), jax.random.key(3), actions)
    b = _rollout(eager, jax.random.key(3), actions)
    assert np.asarray(a.done).sum() >= 4  # resets did happen
    np.testing.assert_array_equal(np.asarray(a.done), np.asarray(b.done))
    # Two compiled programs fuse the physics differently: equal up to float32 rounding.
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-4, atol=1e-4)


def test_cli_unknown_brax_env_is_one_line(capsys):
    code = main(["train", "--config", IDP_CONFIG, "--set", "env_id=brax/ant_v9", "--no-cache"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "brax/ant_v9" in err[0], err


def test_a_bad_env_kwargs_value_is_one_line(capsys):
    """An unknown `backend` failed inside Brax with a ValueError traceback."""
    code = main(["train", "--config", IDP_CONFIG, "--set", "env_kwargs={backend: nope}",
                 "--no-cache"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert "env_kwargs': Brax could not build 'brax/inverted_double_pendulum'" in err[0]
    assert "backend should be in" in err[0]


def test_html_for_a_gymnax_env_is_refused(tmp_path, capsys):
    run = str(tmp_path / "cp")
    assert main(["train", "--config", os.path.join(ROOT, "configs", "cartpole.yaml"), "--set",
                 "total_timesteps=1024", "--set", "num_steps=64", "--set", "hidden_sizes=[8, 8]",
                 "--logdir", str(tmp_path), "--run-name", "cp", "--no-cache", "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["eval", run, "--episodes", "1", "--html", str(tmp_path / "x.html")]) == 1
    err = capsys.readouterr().err
    assert "HTML rendering is for Brax environments" in err and "--gif" in err


def test_hopper_config_traces_through_make_train():
    """The GPU config builds the whole program (contacts, 3 torques) without compiling it."""
    from jaxppo import make_train

    cfg = load_config(os.path.join(ROOT, "configs", "brax_hopper.yaml"),
                      {"total_timesteps": 2048 * 16, "num_envs": 2048})
    out = jax.eval_shape(make_train(cfg), jax.random.key(0))
    assert out.metrics["episodic_return"].shape == (1,)
    assert jax.tree.leaves(out.train_state.params)


@pytest.mark.parametrize("typed", ["Hopper-v4", "hopper", "HalfCheetah-v5"])
def test_gymnasium_mujoco_ids_point_to_brax(typed):
    with pytest.raises(ConfigError, match=r"did you mean the Brax environment 'brax/"):
        check_env_id(typed)


def test_brax_suggestion_without_brax_installed(monkeypatch):
    monkeypatch.setitem(sys.modules, "brax", None)
    with pytest.raises(ConfigError, match="'brax/inverted_double_pendulum'"):
        check_env_id("InvertedDoublePendulum-v4")
