"""Jumanji's specifics (the checklist every source passes is tests/integration/test_env_sources.py: steps and
masks equal Jumanji's own, its discount-0 time limit is truncation, the autoreset is Jumanji's
reset, ids, the missing install, learning on a 6x6 Snake): a wall terminates, the initial policy
never picks an illegal move, joint masks as one Discrete, per-agent masks, generator kwargs, a
MultiDiscrete env through make_train, and the CLI."""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import ROOT

# jaxppo first: Jumanji creates arrays at import, which starts JAX's CPU backend, and
# `import jaxppo` must set its XLA flags before that (jaxppo/_xla.py: a scheduler deadlock).
from jaxppo import ConfigError, PPOConfig, load_config, make_train
from jaxppo.core.networks import init_params, make_network
from jaxppo.envs import VecEnv
from jaxppo.envs.sources.jumanji import make

jumanji = pytest.importorskip("jumanji")

SNAKE = "jumanji/Snake-v1"
SMALL = {"num_rows": 6, "num_cols": 6, "time_limit": 100}  # a 6x6 board, 100-step episodes


def _same(a, b):
    """Exact equality (PRNG keys, which Jumanji keeps in its states, compared by their data)."""
    def data(x):
        x = jnp.asarray(x)
        return jax.random.key_data(x) if jnp.issubdtype(x.dtype, jax.dtypes.prng_key) else x
    np.testing.assert_array_equal(np.asarray(data(a)), np.asarray(data(b)))


def test_wall_terminates():
    env, params = make("Snake-v1", SMALL)
    step = jax.jit(env.step_env)
    obs, state = env.reset_env(jax.random.key(0), params)
    row = int(env.suite_state(state).head_position.row)
    for t in range(row + 1):  # straight up: the snake leaves the board on step row + 1
        obs, state, _, terminated, _ = step(jax.random.key(t), state, jnp.int32(0), params)
        assert bool(terminated) == (t == row) and not bool(env.is_truncated(state, params))


def test_initial_policy_never_picks_an_illegal_move():
    """64 Snakes for 100 steps with the untrained network's masked policy: every sampled move is
    legal under the mask of the observation it was chosen at, so a Snake dies only where it has
    boxed itself in (no legal move left)."""
    n = 64
    venv = VecEnv(SNAKE, n, env_kwargs=SMALL)
    config = PPOConfig(env_id=SNAKE, env_kwargs=SMALL, hidden_sizes=(32, 32))
    network = make_network(config, venv)
    params = init_params(network, jax.random.key(0), venv.obs_shape)

    def body(carry, key):
        obs, state = carry
        k_act, k_env = jax.random.split(key)
        policy = network.apply(params, obs, state.mask, method=network.policy)
        action = policy.sample(k_act)
        legal = jnp.take_along_axis(state.mask, action[:, None], axis=1)[:, 0]
        boxed_in = ~state.mask.any(axis=1)
        state, out = venv.step(k_env, state, action)
        return (out.obs, state), (legal, boxed_in, out.terminated, out.done)

    obs, state = venv.reset(jax.random.key(1))
    run = jax.jit(lambda k: jax.lax.scan(body, (obs, state), jax.random.split(k, 100))[1])
    legal, boxed_in, terminated, done = (np.asarray(x) for x in run(jax.random.key(2)))
    np.testing.assert_array_equal(legal, ~boxed_in)
    np.testing.assert_array_equal(terminated, boxed_in)
    assert legal.sum() > 0.99 * legal.size  # boxed in is rare: the moves were checked
    assert done[-1].sum() >= n - terminated.sum()  # the rest reached the 100-step limit
    assert not np.asarray(state.mask).all()  # the mask does forbid something (the walls)


def test_joint_mask_multidiscrete_becomes_one_discrete():
    """Minesweeper's mask is over (row, col) pairs: one Discrete(rows * cols), unravelled."""
    env, params = make("Minesweeper-v0", {})
    assert env.action_space(params).n == 100
    suite = jumanji.make("Minesweeper-v0")
    obs, state = env.reset_env(jax.random.key(0), params)
    j_state, j_ts = suite.reset(jax.random.key(0))
    _same(obs["action_mask"], j_ts.observation.action_mask.reshape(-1))
    obs, state, reward, terminated, _ = jax.jit(env.step_env)(
        jax.random.key(0), state, jnp.int32(37), params)
    j_state, j_ts = jax.jit(suite.step)(j_state, jnp.array([3, 7], jnp.int32))
    _same(obs["board"], j_ts.observation.board)
    _same(reward, j_ts.reward)
    _same(terminated, j_ts.last())


def test_per_agent_masks_flatten_to_sum_nvec():
    env, params = make("Cleaner-v0", {})  # 3 agents x 4 moves, mask (3, 4)
    assert tuple(env.action_space(params).nvec) == (4, 4, 4)
    obs, _ = env.reset_env(jax.random.key(0), params)
    _, ts = jumanji.make("Cleaner-v0").reset(jax.random.key(0))
    _same(obs["action_mask"], ts.observation.action_mask.reshape(-1))


def test_maze_size_goes_to_its_generator_and_bad_kwargs_are_one_line():
    env, params = make("Maze-v0", {"num_rows": 5, "num_cols": 5, "time_limit": 20})
    obs, _ = env.reset_env(jax.random.key(0), params)
    assert obs["walls"].shape == (5, 5) and obs["agent_position"].shape == (2,)
    assert env.default_obs_field == "agent_position,target_position,walls"
    with pytest.raises(ConfigError, match="num_rowz") as e:
        make("Snake-v1", {"num_rowz": 5})
    assert "\n" not in str(e.value)


def test_rubiks_cube_multidiscrete_trains_through_make_train():
    config = PPOConfig(env_id="jumanji/RubiksCube-partly-scrambled-v0", total_timesteps=2 * 8 * 16,
                       num_envs=8, num_steps=16, num_minibatches=2, update_epochs=1,
                       hidden_sizes=(16, 16))
    out = jax.jit(make_train(config))(jax.random.key(0))
    assert out.metrics["episodic_return"].shape == (2,)
    m = {k: np.asarray(v) for k, v in out.metrics.items()}
    ended, none_yet = m["episodes"] > 0, np.cumsum(m["episodes"]) == 0
    for k, v in m.items():  # no return is NaN, never 0.0: until the first episode ends
        if k in ("episodic_return", "episodic_length"):
            assert (np.isnan(v) == none_yet).all(), k
        elif k.startswith("env/"):
            assert np.isfinite(v[ended]).all(), k
        else:
            assert np.isfinite(v).all(), k


def test_cli_trains_checkpoints_and_evaluates(tmp_path, capsys):
    """The shipped config, shrunk, through the CLI: the run's checkpoint holds Jumanji's state."""
    from jaxppo.cli import main

    config = os.path.join(ROOT, "configs", "jumanji_snake.yaml")
    assert main(["train", "--config", config, "--set", "total_timesteps=2048", "--set",
                 "num_envs=8", "--set", "num_steps=128", "--set", "hidden_sizes=[16, 16]",
                 "--set", "env_kwargs={num_rows: 6, num_cols: 6, time_limit: 50}",
                 "--logdir", str(tmp_path), "--run-name", "snake", "--no-cache",
                 "--no-progress"]) == 0
    run = str(tmp_path / "snake")
    assert os.path.exists(os.path.join(run, "checkpoint", "checkpoint.msgpack"))
    capsys.readouterr()
    assert main(["eval", run, "--episodes", "2", "--no-cache"]) == 0


def test_shipped_config_builds_the_whole_program():
    cfg = load_config(os.path.join(ROOT, "configs", "jumanji_snake.yaml"),
                      {"total_timesteps": 256 * 128, "num_envs": 256})
    out = jax.eval_shape(make_train(cfg), jax.random.key(0))
    assert out.metrics["episodic_return"].shape == (1,)
