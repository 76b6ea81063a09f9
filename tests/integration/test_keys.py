"""The train function and the public functions that take a PRNG key, called the ways users
write them: PureJaxRL's `jax.random.PRNGKey` (uint32 words), the typed `jax.random.key`, split
keys under `jax.vmap`, a sweep's `in_axes=(None, 0)`; for an MLP, a GRU and a custom env.
The same seed in either form is the same run. A key that is neither is one line naming the fix.

A change to what the update scan carries broke the legacy form once (its key became typed; a
uint32[2] key in the carry's input no longer matched): these tests hold every form at once.

Not marked `exact`: the two forms compile to one program (a legacy key is wrapped on entry; the
optimized HLO of the MLP case holds the same instructions, names and order hints aside), so their
bit-equality holds under any emitters; the suite's settings compile them in a third of the time."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct

from jaxppo import Hparams, PPOConfig, VecEnv, make_train
from jaxppo.envs import Box, Discrete
from jaxppo.keys import as_key, run_keys, to_host

TINY = dict(total_timesteps=4 * 8 * 2, num_envs=4, num_steps=8, num_minibatches=2,
            update_epochs=1, hidden_sizes=(8,))


@struct.dataclass
class LeverState:
    time: jax.Array


class Lever:
    """A custom env (make_train(config, env=...)): one-step episodes, reward 1 for action 1,
    observation noise drawn from the env's key (so the key reaches the env)."""

    default_params = None

    def reset_env(self, key, params):
        return jax.random.normal(key, (3,)), LeverState(jnp.int32(0))

    def step_env(self, key, state, action, params):
        reward = (action == 1).astype(jnp.float32)
        return jax.random.normal(key, (3,)), LeverState(state.time + 1), reward, jnp.bool_(True), {}

    def observation_space(self, params):
        return Box(-5.0, 5.0, (3,))

    def action_space(self, params):
        return Discrete(2)


CASES = {
    "mlp": (PPOConfig(env_id="CartPole-v1", **TINY), None),
    "gru": (PPOConfig(env_id="CartPole-v1", network="gru", rnn_size=8, **TINY), None),
    "custom-env": (PPOConfig(env_id="custom/Lever", **TINY), Lever()),
}


@pytest.fixture(scope="module", params=list(CASES))
def train(request):
    config, env = CASES[request.param]
    return make_train(config, env=env)


def _equal(a, b):
    """Every leaf equal, typed keys compared as their words."""
    a, b = to_host(a), to_host(b)
    jax.tree.map(np.testing.assert_array_equal, jax.tree.leaves(a), jax.tree.leaves(b))


def _host(out):
    """What a user compares: the learner, the metrics, the carried key as its words."""
    return (out.train_state.params, out.metrics, out.runner_state.key)


def test_one_seed_purejaxrl_form_equals_the_typed_key(train):
    # PureJaxRL's ppo.py: rng = jax.random.PRNGKey(30); jax.jit(make_train(config))(rng)
    legacy = jax.jit(train)(jax.random.PRNGKey(30))
    typed = jax.jit(train)(jax.random.key(30))
    assert jax.dtypes.issubdtype(legacy.runner_state.key.dtype, jax.dtypes.prng_key)
    _equal(_host(legacy), _host(typed))
    assert bool(jnp.all(jnp.isfinite(legacy.metrics["policy_loss"])))


def test_vmapped_split_keys_in_either_form_are_the_same_seeds(train):
    # jax.jit(jax.vmap(train))(jax.random.split(jax.random.PRNGKey(0), 3))
    legacy = jax.jit(jax.vmap(train))(jax.random.split(jax.random.PRNGKey(0), 3))
    typed = jax.jit(jax.vmap(train))(jax.random.split(jax.random.key(0), 3))
    _equal(_host(legacy), _host(typed))
    returns = np.asarray(legacy.metrics["policy_loss"])
    assert returns.shape == (3, train.config.num_updates)
    assert not np.array_equal(returns[0], returns[1])  # three seeds, not one seed thrice


def test_a_sweep_over_hparams_with_one_legacy_key(train):
    settings = [train.config, dataclasses.replace(train.config, lr=1e-3)]
    sweep = jax.jit(jax.vmap(train, in_axes=(None, 0)))
    legacy = sweep(jax.random.PRNGKey(1), Hparams.stack(settings))
    typed = sweep(jax.random.key(1), Hparams.stack(settings))
    _equal(_host(legacy), _host(typed))
    np.testing.assert_allclose(legacy.metrics["learning_rate"][:, 0], [2.5e-4, 1e-3], rtol=1e-6)


def test_init_and_run_take_either_form_and_a_runner_kept_as_key_data(train):
    runner = jax.jit(train.init)(jax.random.PRNGKey(2))
    assert jax.dtypes.issubdtype(runner.key.dtype, jax.dtypes.prng_key)
    _equal(runner, jax.jit(train.init)(jax.random.key(2)))
    _equal(train.initial_params(jax.random.PRNGKey(2)), train.initial_params(jax.random.key(2)))
    run = jax.jit(lambda r: train.run(r, num_updates=1))
    after, metrics = run(runner)
    # a runner whose key was kept as its uint32 words (numpy, a pickle, PureJaxRL's habit)
    as_data = runner._replace(key=np.asarray(jax.random.key_data(runner.key)))
    after_d, metrics_d = run(as_data)
    _equal((after.train_state, metrics), (after_d.train_state, metrics_d))


def test_vec_env_reset_and_step_take_either_form():
    env = VecEnv("CartPole-v1", 4)
    for call in (lambda k: env.reset(k),
                 lambda k: env.step(k, env.reset(jax.random.key(0))[1], jnp.zeros(4, jnp.int32))):
        _equal(call(jax.random.PRNGKey(5)), call(jax.random.key(5)))


@pytest.mark.parametrize("bad, words", [
    (0, ["got int 0"]),
    (np.zeros(2, np.float32), ["float32[2]"]),
    (np.zeros(4, np.uint32), ["uint32[4]"]),
    (jax.random.split(jax.random.key(0), 3), ["key<fry>[3]", "jax.vmap"]),
    (jax.random.split(jax.random.PRNGKey(0), 3), ["uint32[3, 2]", "jax.vmap"]),
])
def test_a_key_that_is_neither_form_is_one_line_naming_both(bad, words):
    train = make_train(CASES["mlp"][0])
    with pytest.raises(TypeError) as e:
        train(bad)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("train(key): expected one key"), msg
    assert "jax.random.key(seed)" in msg and "jax.random.PRNGKey(seed)" in msg, msg
    assert all(w in msg for w in words), (words, msg)
    assert ("jax.vmap" in msg) == ("jax.vmap" in words), msg  # the hint only for a batch of keys


def test_as_key_keeps_a_typed_key_and_wraps_legacy_words_of_the_same_seed():
    typed = jax.random.key(7)
    assert as_key(typed) is typed
    wrapped = as_key(jax.random.PRNGKey(7))
    np.testing.assert_array_equal(jax.random.key_data(wrapped), jax.random.key_data(typed))
    batch = as_key(jax.random.split(jax.random.PRNGKey(7), 4), batch=(4,))
    assert batch.shape == (4,) and jax.dtypes.issubdtype(batch.dtype, jax.dtypes.prng_key)


def test_a_sharded_run_takes_split_keys_of_either_form_and_refuses_one_key():
    """`make_sharded_train(config, mesh)(keys)` wants one key per run (its placement's
    `run_keys`); a single key of either form is one line asking for the split."""
    for keys in (jax.random.split(jax.random.PRNGKey(3), 4), jax.random.split(jax.random.key(3), 4)):
        got = run_keys(keys, "make_sharded_train(config, mesh)(keys)")
        assert got.shape == (4,)
        np.testing.assert_array_equal(jax.random.key_data(got),
                                      jax.random.key_data(jax.random.split(jax.random.key(3), 4)))
    for one in (jax.random.PRNGKey(3), jax.random.key(3), 3):
        with pytest.raises(TypeError, match=r"^make_sharded_train\(config, mesh\)\(keys\): expected "
                                            r"one key per run, jax.random.split\(key, R\)"):
            run_keys(one, "make_sharded_train(config, mesh)(keys)")
