"""The public policy API: `load_policy(...).act` against the network by hand, `evaluate` as one
compile for every run and equal to per-run evaluation and to a Python rollout, its JSON."""

import dataclasses
import importlib
import json

import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import compile_exactly

from jaxppo import CheckpointError, PPOConfig, make_train
from jaxppo.compat import JAXLIB
from jaxppo.core.networks import make_network
from jaxppo.core.normalize import RunningMeanStd, rms_normalize
from jaxppo.errors import UsageError
from jaxppo.policy import evaluate, load_policy
from jaxppo.rundir.checkpoint import save_checkpoint

ev = importlib.import_module("jaxppo.policy.episodes")
RUNS = 4


@pytest.fixture(scope="module")
def cartpole(tmp_path_factory, tiny_config):
    """A 4-seed CartPole run trained with observation normalization, saved as the CLI does."""
    config = dataclasses.replace(tiny_config, normalize_obs=True)
    train = make_train(config)
    with pytest.MonkeyPatch.context() as mp:  # the exact tests compare against it
        compile_exactly(mp)
        out = jax.jit(jax.vmap(train))(jax.random.split(jax.random.key(0), RUNS))
    run = tmp_path_factory.mktemp("cartpole")
    save_checkpoint(str(run), out.runner_state, config, config.num_updates, RUNS)
    return run, config, out.runner_state.train_state, train


def run_ts(train_states, r):
    return jax.tree.map(lambda x: x[r], train_states)


def test_act_is_the_mode_through_the_saved_normalizer(cartpole):
    run, config, train_states, train = cartpole
    obs = jax.random.normal(jax.random.key(1), (32, 4)) * jnp.array([1.0, 2.0, 0.1, 2.0])
    for r in range(RUNS):
        policy = load_policy(run, seed=r)
        ts = run_ts(train_states, r)
        assert policy.seed == r and policy.update == config.num_updates
        assert policy.config == config
        expect = train.network.apply(ts.params, rms_normalize(ts.normalizer.obs, obs),
                                     method="policy").mode()
        np.testing.assert_array_equal(policy.act(obs), expect)
        assert policy.act(obs[3]).shape == () and policy.act(obs[3]) == expect[3]


def test_continuous_act_applies_the_normalizer(tmp_path):
    """Pendulum's action is the Gaussian mean, so a skipped normalizer cannot hide."""
    config = PPOConfig(env_id="Pendulum-v1", num_envs=2, num_steps=8, num_minibatches=1,
                       total_timesteps=16, hidden_sizes=(8,), normalize_obs=True)
    train = make_train(config)
    runner = jax.vmap(train.init)(jax.random.split(jax.random.key(0), 1))
    rms = RunningMeanStd(jnp.array([[0.5, -0.3, 2.0]]), jnp.array([[0.04, 9.0, 4.0]]),
                         jnp.array([100.0]))
    ts = runner.train_state
    runner = runner._replace(train_state=ts._replace(normalizer=ts.normalizer._replace(obs=rms)))
    save_checkpoint(str(tmp_path), runner, config, 0, 1)
    policy = load_policy(tmp_path)
    ts = policy.train_state
    obs = jnp.array([[0.9, 0.1, -1.0], [-0.2, 0.7, 3.0]])
    network = make_network(config, train.env)
    normalized = network.apply(ts.params, rms_normalize(ts.normalizer.obs, obs), method="policy")
    raw = network.apply(ts.params, obs, method="policy")
    np.testing.assert_allclose(policy.act(obs), normalized.mode(), rtol=1e-6)
    assert not np.allclose(policy.act(obs), raw.mode(), atol=1e-3)
    key = jax.random.key(3)
    np.testing.assert_allclose(policy.act(obs, key, deterministic=False), normalized.sample(key),
                               rtol=1e-6)
    # PureJaxRL's and gymnax's key form, of the same seed: the same sample
    np.testing.assert_array_equal(policy.act(obs, jax.random.PRNGKey(3), deterministic=False),
                                  policy.act(obs, key, deterministic=False))
    with pytest.raises(UsageError, match="needs a PRNG key"):
        policy.act(obs, deterministic=False)
    with pytest.raises(UsageError, match=r"takes \(3,\)"):
        policy.act(jnp.zeros((2, 4)))


@pytest.mark.exact
def test_evaluate_is_one_compile_and_equals_per_run_evaluation(cartpole, monkeypatch):
    run, config, train_states, _ = cartpole
    ev._evaluator.cache_clear()
    traces, calls = [], []
    play, build = ev._play, ev._evaluator

    def counted(*args):
        program = build(*args)
        return lambda *a: calls.append(1) or program(*a)

    monkeypatch.setattr(ev, "_play", lambda *a, **k: traces.append(1) or play(*a, **k))
    monkeypatch.setattr(ev, "_evaluator", counted)
    first = evaluate(run, 3, seed=7)
    again = evaluate(run, 3, seed=8)
    # One trace, and one call per evaluate for all 4 runs: one vmapped program, reused.
    assert len(traces) == 1 and len(calls) == 2
    assert first.returns.shape == first.lengths.shape == (RUNS, 3)
    assert (first.env_id, first.update, first.seed, first.deterministic) == (
        "CartPole-v1", config.num_updates, 7, True)
    assert again.seed == 8
    for r in range(RUNS):
        ret, length, _ = ev.evaluate(config, run_ts(train_states, r),
                                     jax.random.PRNGKey(7) if r % 2 else jax.random.key(7), 3)
        np.testing.assert_array_equal(first.returns[r], ret)
        np.testing.assert_array_equal(first.lengths[r], length)
    # CartPole pays 1 per step.
    np.testing.assert_array_equal(first.returns, first.lengths)
    stochastic = evaluate(run, 3, seed=7, deterministic=False)
    assert not stochastic.deterministic and stochastic.returns.shape == (RUNS, 3)


@pytest.mark.exact
def test_a_python_rollout_of_the_policy_matches_evaluate(cartpole):
    """Episode e starts from `split(split(key)[0], E)[e]` (evaluate's documented keys); the
    CartPole dynamics are deterministic, so acting in a plain loop gives the same episode. The
    batched program's float32 physics may round in other bits than one env stepped alone, and
    a balancing pole amplifies that: a long episode may end a few steps apart (exact up to 100
    steps, within 3% beyond; 5% on JAX 0.11+, whose XLA ended a 318-step episode at 308);
    another reset key would start another episode altogether."""
    run, *_ = cartpole
    episodes = 2
    result = evaluate(run, episodes, seed=5)
    env, params = gymnax.make("CartPole-v1")
    step = jax.jit(env.step)
    reset_keys = jax.random.split(jax.random.split(jax.random.key(5))[0], episodes)
    for r in range(RUNS):
        policy = load_policy(run, seed=r)
        for e in range(episodes):
            obs, state = env.reset(reset_keys[e], params)
            total, done = 0.0, False
            while not done:
                obs, state, reward, terminated, truncated, _ = step(
                    jax.random.key(0), state, policy.act(obs), params)
                total += float(reward)
                done = bool(terminated | truncated)
            want = float(result.returns[r, e])
            if min(total, want) <= 100:
                assert total == want, (r, e)
            else:
                assert abs(total - want) <= (0.05 if JAXLIB >= (0, 11) else 0.03) * want, (r, e, total, want)


def test_evaluate_writes_json(cartpole, tmp_path):
    run, *_ = cartpole
    out = tmp_path / "eval.json"
    result = evaluate(run, 2, seed=3, out=out)
    data = json.loads(out.read_text())
    assert data["env_id"] == "CartPole-v1" and data["eval_seed"] == 3
    assert data["deterministic"] is True and data["episodes"] == 2
    assert data["update"] == result.update
    np.testing.assert_array_equal(data["returns"], result.returns)
    np.testing.assert_array_equal(data["lengths"], result.lengths)
    np.testing.assert_allclose(data["mean_per_run"], result.returns.mean(axis=1))
    assert data["max_steps"] == 500 and data["cut_off_per_run"] == [0] * RUNS  # CartPole's limit
    assert len(data["returns"]) == RUNS
    with pytest.raises(UsageError, match="cannot write evaluation JSON to .*does not exist"):
        evaluate(run, 2, out=tmp_path / "missing" / "eval.json")


def test_bad_seed_and_missing_checkpoint_give_one_line(cartpole, tmp_path):
    run, *_ = cartpole
    for seed in (RUNS, -1):
        with pytest.raises(UsageError) as e:
            load_policy(run, seed=seed)
        assert "0..3" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(CheckpointError, match="no checkpoint"):
        load_policy(tmp_path / "nowhere")
    with pytest.raises(CheckpointError, match="no checkpoint"):
        evaluate(tmp_path / "nowhere")


def test_gif_to_an_unwritable_path_fails_before_playing(cartpole, tmp_path, monkeypatch):
    _, config, train_states, _ = cartpole
    rd = importlib.import_module("jaxppo.policy.render")
    monkeypatch.setattr(rd, "play_episode", lambda *a, **k: pytest.fail("played an episode"))
    gif = tmp_path / "no" / "such" / "dir" / "ep.gif"
    with pytest.raises(UsageError, match=f"cannot write GIF to '{gif}': directory .* does not "
                                         "exist; pass a writable path"):
        rd.render_gif(config, run_ts(train_states, 0), jax.random.key(0), str(gif))
    with pytest.raises(UsageError, match="it is a directory"):
        rd.render_gif(config, run_ts(train_states, 0), jax.random.key(0), str(tmp_path))


def _saved(tmp_path, config, edit=lambda ts: ts):
    """An untrained run of `config` (its initial state, `edit`ed), saved as a checkpoint."""
    runner = jax.vmap(make_train(config).init)(jax.random.split(jax.random.key(0), 1))
    runner = runner._replace(train_state=edit(runner.train_state))
    save_checkpoint(str(tmp_path), runner, config, 0, 1)
    return load_policy(tmp_path)


def test_continuous_actions_are_clipped_to_the_space_unless_asked_not_to(tmp_path):
    """Pendulum's torque is Box(-2, 2); a policy head whose mean is ~5 acts 2.0 (as the env was
    stepped), and clip=False gives the raw mean. Samples are clipped too."""
    config = PPOConfig(env_id="Pendulum-v1", num_envs=2, num_steps=8, num_minibatches=1,
                       total_timesteps=16, hidden_sizes=(8,))

    def push(ts):
        head = ts.params["params"]["actor"]["Dense_1"]
        head = {**head, "bias": head["bias"] + 5.0}
        actor = {**ts.params["params"]["actor"], "Dense_1": head}
        return ts._replace(params={"params": {**ts.params["params"], "actor": actor}})

    policy = _saved(tmp_path, config, push)
    obs = jnp.array([[0.9, 0.1, -1.0], [-0.2, 0.7, 3.0]])
    raw = policy.act(obs, clip=False)
    assert (raw > 4.0).all()
    np.testing.assert_array_equal(policy.act(obs), np.full((2, 1), 2.0))
    assert policy.act(obs[0]).shape == (1,) and float(policy.act(obs[0])[0]) == 2.0
    sample = policy.act(obs, jax.random.key(0), deterministic=False)
    assert (np.abs(sample) <= 2.0).all()
    assert (np.abs(policy.act(obs, jax.random.key(0), deterministic=False, clip=False)) > 2.0).any()


def test_a_recurrent_state_of_the_wrong_shape_is_one_line(tmp_path):
    config = PPOConfig(env_id="probe/Memory-v0", network="gru", rnn_size=8, hidden_sizes=(8,),
                       num_envs=2, num_steps=4, num_minibatches=1, total_timesteps=8)
    policy = _saved(tmp_path, config)
    obs1 = np.zeros(ev.VecEnv.from_config(config, 1).obs_shape, np.float32)
    action, state = policy.act(obs1, state=policy.initial_state())  # the right shape works
    assert state.shape == (8,)
    for bad, batch in ((policy.initial_state(3), None), (policy.initial_state(), 3),
                       (jnp.zeros((5,)), None), ("h", None)):
        obs = obs1 if batch is None else np.stack([obs1] * batch)
        with pytest.raises(UsageError) as e:
            policy.act(obs, state=bad)
        msg = str(e.value)
        assert "\n" not in msg and "has shape" in msg and "initial_state(" in msg, msg
    with pytest.raises(UsageError, match=r"for one observation has shape \(8,\)"):
        policy.act(obs1, state=jnp.zeros((5,)))
    with pytest.raises(UsageError, match=r"for a batch of 3 has shape \(3, 8\)"):
        policy.act(np.stack([obs1] * 3), state=policy.initial_state())


def _one_line(call, *words):
    with pytest.raises(UsageError) as e:
        call()
    msg = str(e.value)
    assert "\n" not in msg and all(w in msg for w in words), (words, msg)


def test_an_empty_batch_acts_nothing_and_bad_arguments_are_one_line(cartpole, tmp_path):
    run, *_ = cartpole
    policy = load_policy(run)
    obs = np.zeros((2, 4), np.float32)
    for deterministic in (True, False):  # an empty batch: no actions, of the actions' dtype
        empty = policy.act(np.zeros((0, 4)), jax.random.key(0), deterministic=deterministic)
        assert empty.shape == (0,) and empty.dtype == policy.act(obs).dtype
    _one_line(lambda: policy.act(obs, key=0, deterministic=False), "jax.random.key(")
    _one_line(lambda: policy.act(obs, jnp.zeros(3), deterministic=False), "jax.random.key(")
    _one_line(lambda: policy.act(obs, state=jnp.zeros((2, 8))), "has no state", "state=")
    for name in ("gru", "pendulum"):
        (tmp_path / name).mkdir()

    gru = _saved(tmp_path / "gru", PPOConfig(
        env_id="probe/Memory-v0", network="gru", rnn_size=8, hidden_sizes=(8,), num_envs=2,
        num_steps=4, num_minibatches=1, total_timesteps=8))
    obs_shape = ev.VecEnv.from_config(gru.config, 1).obs_shape
    action, state = gru.act(np.zeros((0, *obs_shape)), state=gru.initial_state(0))
    assert action.shape == (0,) and state.shape == (0, 8)
    for batch in (-1, 2.5, True, "3"):
        _one_line(lambda b=batch: gru.initial_state(b), f"batch {batch!r}", "initial_state(")

    pendulum = _saved(tmp_path / "pendulum", PPOConfig(
        env_id="Pendulum-v1", num_envs=2, num_steps=8, num_minibatches=1, total_timesteps=16,
        hidden_sizes=(8,)))
    _one_line(lambda: pendulum.act(np.zeros(3), mask=[True]), "continuous", "mask=")


def test_reprs_are_short(cartpole, tmp_path, tiny_config):
    """A policy's repr printed every parameter (48,557 characters for CartPole), flooding a
    notebook; now a policy and every result say what they are in a line."""
    from jaxppo import Experiment, load_checkpoint, report

    run, config, _, train = cartpole
    policy = load_policy(run, seed=1)
    result = Experiment(tiny_config, logdir=str(tmp_path), run_name="r", progress=False).run()
    out = jax.jit(train)(jax.random.key(0))
    shown = {"Policy": policy, "Checkpoint": load_checkpoint(run), "TrainOutput": out,
             "EvalResult": evaluate(run, episodes=2), "RunResult": result,
             "Report": report(str(tmp_path / "r"), tmp_path / "rep", reps=20)}
    for name, obj in shown.items():
        text = repr(obj)
        assert text.startswith(f"{name}(") and len(text) < 200 and "\n" not in text, text
    assert "run 1" in repr(policy) and "CartPole-v1" in repr(policy)
