"""Recurrent PPO (network: gru | lstm): the update replays exactly the hidden states the rollout
used, and every run feature (vmap, chunking, resume, evaluation, policies) works with a carried
state. Learning: tests/learning/test_recurrent_learns.py."""

import dataclasses
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import ROOT, compile_exactly

import jaxppo
from jaxppo import ConfigError, Experiment, PPOConfig, make_train
from jaxppo.core.networks import unroll
from jaxppo.core.rollout import RolloutSettings, rollout

MEMORY = PPOConfig(env_id="probe/Memory-v0", network="gru", rnn_size=32, hidden_sizes=(32,),
                   num_envs=8, num_steps=20, num_minibatches=4, lr=1e-3,
                   total_timesteps=40_000)


@pytest.mark.parametrize("env_id", ["probe/Memory-v0", "probe/Truncation-v0"])
@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_the_update_replays_the_hidden_states_the_rollout_used(env_id, cell):
    """Episodes end mid-rollout (Memory terminates every 5 steps, Truncation is cut by its time
    limit every 5); replaying each env's sequence from the stored carry, with the same
    episode-start resets, gives the rollout's hidden states exactly, for a minibatch of envs."""
    config = dataclasses.replace(MEMORY, env_id=env_id, network=cell, num_steps=13,
                                 total_timesteps=8 * 13 * 2)
    train = make_train(config)
    runner = jax.jit(train.init)(jax.random.key(0))
    runner, _ = jax.jit(train.run, static_argnums=2)(runner, None, 1)  # a carry mid-episode
    settings = RolloutSettings(config.num_steps, False, False, record_hidden=True)
    ts = runner.train_state

    @jax.jit
    def collect_and_replay(key, envs):
        _, _, traj, _, _ = rollout(key, runner.env, ts.normalizer, ts.params, env=train.env,
                                   network=train.network, gamma=config.gamma, settings=settings)
        em = lambda x: jnp.swapaxes(x, 0, 1)[envs]  # noqa: E731 - env-major, a minibatch
        carry0 = jax.tree.map(lambda c: c[envs], runner.env.hidden)
        dist, values, carries = unroll(train.network, ts.params, em(traj.obs), em(traj.start),
                                       carry0)
        return traj, carries, values, dist.log_prob(em(traj.action))

    envs = jnp.array([5, 1, 6, 2])
    traj, carries, values, logp = collect_and_replay(jax.random.key(1), envs)
    assert traj.start.any(), "no episode ended inside the rollout"
    pick = lambda x: x[:, envs]  # noqa: E731
    jax.tree.map(np.testing.assert_array_equal, carries, jax.tree.map(pick, traj.hidden))
    np.testing.assert_allclose(values, pick(traj.value).T, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(logp, pick(traj.logp).T, rtol=1e-6, atol=1e-6)


def test_hidden_state_resets_exactly_where_episodes_start():
    config = dataclasses.replace(MEMORY, num_steps=12, total_timesteps=8 * 12)
    train = make_train(config)
    runner = jax.jit(train.init)(jax.random.key(0))
    settings = RolloutSettings(config.num_steps, False, False, record_hidden=True)
    ts = runner.train_state
    _, _, traj, _, _ = jax.jit(lambda k: rollout(
        k, runner.env, ts.normalizer, ts.params, env=train.env, network=train.network,
        gamma=config.gamma, settings=settings))(jax.random.key(3))
    # Memory-v0 episodes are 5 steps: starts at t = 0, 5, 10 for every env (one-env-step
    # offsets never happen: all envs reset together at init).
    np.testing.assert_array_equal(np.flatnonzero(traj.start[:, 0]), [0, 5, 10])
    # At a start, the new carry is the cell applied to the zero carry: the same for two envs
    # whose first observations agree (same cue), whatever came before.
    h = np.asarray(traj.hidden)
    obs = np.asarray(traj.obs)
    same = [(t, a, b) for t in (5, 10) for a in range(8) for b in range(8)
            if a < b and (obs[t, a] == obs[t, b]).all()]
    assert same
    for t, a, b in same:
        np.testing.assert_array_equal(h[t, a], h[t, b])


def test_num_envs_must_split_into_minibatches():
    with pytest.raises(ConfigError, match="whole env sequences") as e:
        dataclasses.replace(MEMORY, num_envs=6, num_minibatches=4, num_steps=32)
    assert "\n" not in str(e.value)
    with pytest.raises(ConfigError, match="network"):
        dataclasses.replace(MEMORY, network="transformer")


@pytest.fixture(scope="module")
def tiny_gru():
    """A tiny GRU run's programs, compiled as the `exact` tests compare them (XLA's emitters),
    and what they computed: three seeds vmapped and each alone (the lone program traced once
    for the three: nothing retraces). The tests below compare against these, so the lone
    program is compiled once for both."""
    config = dataclasses.replace(MEMORY, total_timesteps=8 * 20 * 6)
    train = make_train(config)
    traces = []

    def traced(key):
        traces.append(key)
        return train(key)

    keys = jax.random.split(jax.random.key(7), 3)
    with pytest.MonkeyPatch.context() as mp:
        compile_exactly(mp)
        batched = jax.jit(jax.vmap(train))(keys)
        train_j = jax.jit(traced)
        alone = [train_j(k) for k in keys]
    jax.clear_caches()  # nothing compiled here is reused under the suite's options
    return config, train, keys, batched, alone, len(traces)


@pytest.mark.exact
def test_vmapped_recurrent_seeds_equal_seeds_run_alone(tiny_gru):
    _, _, keys, batched, alone, _ = tiny_gru
    for i in range(3):
        one = jax.tree.map(lambda x, i=i: x[i], batched)
        jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6),
                     one.train_state.params, alone[i].train_state.params)
        np.testing.assert_allclose(one.metrics["policy_loss"], alone[i].metrics["policy_loss"],
                                   rtol=1e-4, atol=1e-6)


@pytest.mark.exact
def test_recurrent_chunks_equal_the_whole_run_and_nothing_retraces(tiny_gru):
    """The whole run is the fixture's first seed alone, its program traced once for three keys
    (nothing retraces); two chunks of 3 updates from the same key (one program, the second
    call going on from update 3) give its params."""
    _, train, keys, _, alone, traces = tiny_gru
    whole = alone[0]
    runner = jax.jit(train.init)(keys[0])
    run_chunk = jax.jit(train.run, static_argnums=2)
    for n in (3, 3):
        runner, _ = run_chunk(runner, None, n)
    jax.tree.map(np.testing.assert_array_equal, runner.train_state.params,
                 whole.train_state.params)
    assert traces == 1


@pytest.mark.exact
def test_recurrent_run_resumes_exactly_and_its_policy_carries_state(tmp_path, compile_cache):
    # The compile cache on: the stopped run and its resume read the whole run's programs back
    # (one compile, not three), as a user's repeated `jaxppo train` does.
    config = dataclasses.replace(MEMORY, total_timesteps=8 * 20 * 60)
    whole = Experiment(config, seeds=2, logdir=str(tmp_path), run_name="whole", progress=False,
                       chunk_updates=20).run()
    Experiment(config, seeds=2, logdir=str(tmp_path), run_name="cut", progress=False,
               chunk_updates=20, callbacks=[lambda e: e.update < 20]).run()
    resumed = Experiment.resume(tmp_path / "cut", progress=False)
    assert resumed.status == "finished"
    np.testing.assert_array_equal(resumed.metrics["episodic_return"][:, -20:],
                                  whole.metrics["episodic_return"][:, -20:])
    jax.tree.map(np.testing.assert_array_equal, resumed.train_state.params,
                 whole.train_state.params)

    # The trained policy, stepped by hand in Python with its state, solves the probe, and
    # `evaluate` (one compiled scan carrying the state) agrees.
    policy = jaxppo.load_policy(tmp_path / "whole", seed=0)
    env = jaxppo.VecEnv("probe/Memory-v0", 1).env
    params = env.default_params
    total = 0.0
    for episode in range(6):
        obs, state = env.reset_env(jax.random.key(episode), params)
        h = policy.initial_state()
        for _ in range(5):
            action, h = policy.act(obs, state=h)
            obs, state, reward, done, _ = env.step_env(jax.random.key(0), state, action, params)
            total += float(reward)
    assert total >= 5.0  # 6 episodes: one wrong answer at most
    scores = jaxppo.evaluate(tmp_path / "whole", episodes=16)
    assert scores.returns.mean() > 0.8
    with pytest.raises(jaxppo.UsageError, match="initial_state"):
        policy.act(obs)
    assert os.path.exists(tmp_path / "whole" / "metrics.csv")


def test_recurrent_and_cnn_policies_through_the_cli_sweep_and_eval_gif(tmp_path, capsys):
    """The CLI trains a GRU run and evaluates it; a sweep vmaps GRU settings in one compile; a
    CNN MinAtar run trains and renders a GIF with its policy."""
    from jaxppo.cli import main

    base = ["--logdir", str(tmp_path), "--no-progress"]
    assert main(["train", "--config", os.path.join(ROOT, "configs", "memory_gru.yaml"), "--run-name", "gru",
                 "--set", "total_timesteps=1600", *base]) == 0
    assert main(["eval", str(tmp_path / "gru"), "--episodes", "4"]) == 0
    assert "return" in capsys.readouterr().out
    table = jaxppo.sweep(dataclasses.replace(MEMORY, total_timesteps=1600),
                         {"lr": [1e-3, 3e-3]}, seeds=2, logdir=None, progress=False)
    assert len(table.rows) == 2
    cnn = os.path.join(ROOT, "configs", "minatar_breakout_cnn.yaml")
    assert main(["train", "--config", cnn, "--run-name", "cnn",
                 "--set", "num_envs=4", "--set", "num_steps=16", "--set", "num_minibatches=2",
                 "--set", "hidden_sizes=[16]", "--set", "total_timesteps=128", *base]) == 0
    assert main(["eval", str(tmp_path / "cnn"), "--episodes", "2",
                 "--gif", str(tmp_path / "cnn.gif")]) == 0
    assert (tmp_path / "cnn.gif").stat().st_size > 0
