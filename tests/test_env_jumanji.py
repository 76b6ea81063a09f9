"""Jumanji through jaxppo's env protocol: the adapter against Jumanji's own reset/step (through
VecEnv's autoreset too), time limits as truncation although Jumanji gives them discount 0,
masks (the initial policy never picks an illegal move), joint masks as one Discrete, a
MultiDiscrete env through make_train, the errors, and learning on a 6x6 Snake."""

import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

# jaxppo first: Jumanji creates arrays at import, which starts JAX's CPU backend, and
# `import jaxppo` must set its XLA flags before that (jaxppo/_xla.py: a scheduler deadlock).
from jaxppo import ConfigError, PPOConfig, load_config, make_train
from jaxppo.core.networks import init_params, make_network
from jaxppo.envs import VecEnv, check_env_id
from jaxppo.envs.sources.jumanji import make

jumanji = pytest.importorskip("jumanji")

ROOT = os.path.dirname(os.path.dirname(__file__))
SNAKE = "jumanji/Snake-v1"
SMALL = {"num_rows": 6, "num_cols": 6, "time_limit": 100}  # a 6x6 board, 100-step episodes


def _same(a, b):
    """Exact equality (PRNG keys, which Jumanji keeps in its states, compared by their data)."""
    def data(x):
        x = jnp.asarray(x)
        return jax.random.key_data(x) if jnp.issubdtype(x.dtype, jax.dtypes.prng_key) else x
    np.testing.assert_array_equal(np.asarray(data(a)), np.asarray(data(b)))


def test_vecenv_steps_like_jumanji_including_autoreset():
    """Random (also illegal) moves on a 6x6 Snake with a 12-step limit: VecEnv's transition is
    Jumanji's, its done is Jumanji's LAST, and a finished episode restarts with Jumanji's reset on
    the step's reset key."""
    n, kwargs = 8, {**SMALL, "time_limit": 12}
    venv = VecEnv(SNAKE, n, env_kwargs=kwargs)
    suite = jumanji.make("Snake-v1", **kwargs)
    j_step = jax.jit(jax.vmap(suite.step))
    j_reset = jax.jit(jax.vmap(suite.reset))
    step = jax.jit(venv.step)
    def inner(vec_state):  # Jumanji's own states inside VecEnv's
        return jax.vmap(venv.env.suite_state)(vec_state.inner)

    _, state = venv.reset(jax.random.key(0))
    _, ts0 = j_reset(jax.random.split(jax.random.key(0), n))
    _same(venv.reset(jax.random.key(0))[0], ts0.observation.grid)
    key = jax.random.key(1)
    seen = {"term": 0, "trunc": 0}
    for _ in range(40):
        key, k_act, k_step = jax.random.split(key, 3)
        action = jax.random.randint(k_act, (n,), 0, 4)
        j_state, ts = j_step(inner(state), action)
        reset_keys = jax.vmap(lambda k: jax.random.split(k)[1])(jax.random.split(k_step, (1, n))[0])
        r_state, r_ts = j_reset(reset_keys)
        state, out = step(k_step, state, action)
        last = np.asarray(ts.last())
        _same(out.done, last)
        _same(out.final_obs, ts.observation.grid)
        _same(out.reward, ts.reward)
        # Jumanji ends the time limit with discount 0 like a death; the step count tells them apart.
        time_up = np.asarray(j_state.step_count) >= kwargs["time_limit"]
        _same(out.terminated, last & ~time_up)
        assert np.all(np.asarray(ts.discount)[last] == 0.0)
        expect = jax.tree.map(lambda r, s, d=last: jnp.where(
            jnp.reshape(d, (n,) + (1,) * (s.ndim - 1)), r, s), r_state, j_state)
        jax.tree.map(_same, inner(state), expect)
        _same(out.obs, np.where(last[:, None, None, None], r_ts.observation.grid,
                                ts.observation.grid))
        _same(state.mask, np.where(last[:, None], r_ts.observation.action_mask,
                                   ts.observation.action_mask))
        seen["term"] += int((last & ~time_up).sum())
        seen["trunc"] += int((last & time_up).sum())
    assert seen["term"] > 0 and seen["trunc"] > 0, seen


def test_time_limit_truncates_and_wall_terminates():
    env, params = make("Snake-v1", {**SMALL, "time_limit": 3})
    obs, state = env.reset_env(jax.random.key(0), params)
    step = jax.jit(env.step_env)
    for t in range(3):  # legal moves (the first legal one) until the 3-step limit
        action = jnp.argmax(obs["action_mask"])
        obs, state, _, terminated, _ = step(jax.random.key(t), state, action, params)
        assert bool(env.is_truncated(state, params)) == (t == 2) and not bool(terminated)

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


def test_unknown_and_bare_ids_name_close_matches():
    with pytest.raises(ConfigError, match="did you mean 'jumanji/Snake-v1'"):
        check_env_id("jumanji/Snake-v2")
    with pytest.raises(ConfigError, match="Jumanji environment 'jumanji/Maze-v0'"):
        check_env_id("Maze-v0")


def test_missing_jumanji_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "jumanji", None)  # makes `import jumanji` fail
    with pytest.raises(ConfigError, match=r"pip install 'jaxppo\[jumanji\]'") as e:
        check_env_id(SNAKE)
    assert "\n" not in str(e.value)


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


def _random_return(n: int = 64) -> float:
    """Mean return of the uniform policy over legal moves on the 6x6 Snake (one 100-step
    episode per env)."""
    venv = VecEnv(SNAKE, n, env_kwargs=SMALL)

    def body(state, key):
        k_act, k_env = jax.random.split(key)
        action = jax.random.categorical(k_act, jnp.where(state.mask, 0.0, -1e9))
        state, out = venv.step(k_env, state, action)
        return state, jnp.where(out.done, out.episode_return, jnp.nan)

    _, state = venv.reset(jax.random.key(3))
    ret = jax.jit(lambda k: jax.lax.scan(body, state, jax.random.split(k, 100))[1])(
        jax.random.key(4))
    return float(np.nanmean(np.asarray(ret)))


@pytest.mark.slow
def test_snake_learns_on_cpu():
    """6x6 Snake, 100-step episodes, 4 seeds x 98k steps (~40 s on 2 cores): the uniform policy
    over legal moves eats ~2 fruits an episode, PPO ~11."""
    random_return = _random_return()
    config = PPOConfig(env_id=SNAKE, env_kwargs=SMALL, total_timesteps=48 * 32 * 64,
                       num_envs=32, num_steps=64, num_minibatches=4, update_epochs=4,
                       hidden_sizes=(64, 64), lr=1e-3)
    out = jax.jit(jax.vmap(make_train(config)))(jax.random.split(jax.random.key(0), 4))
    final = float(np.asarray(out.metrics["episodic_return"])[:, -5:].mean())  # [seeds, updates]
    assert 0.5 < random_return < 4.0, random_return
    assert final >= 3 * random_return and final >= 7.0, (random_return, final)
