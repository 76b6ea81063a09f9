"""Numbers and paths no machine can hold, impossible hyperparameters, an eval larger than
memory, a callback's numpy False: one line each, and chunks of any length equal one scan."""

import time

import numpy as np
import pytest
from faults_setup import CARTPOLE, cli, one_line

from jaxppo import Experiment, PPOConfig
from jaxppo.run.driver import pick_chunk

pytestmark = pytest.mark.usefixtures("compile_cache")


@pytest.mark.parametrize("argv,words", [
    (["train", "--config", CARTPOLE, "--seed", "-1"], ["--seed -1"]),
    (["train", "--config", CARTPOLE, "--seed", str(2**40)], ["--seed"]),
    (["compare", "--config", CARTPOLE, "--out", "/proc/no/such/dir", "--steps", "512"],
     ["--out"]),
], ids=["seed-negative", "seed-huge", "compare-out"])
def test_bad_numbers_and_paths_are_one_line(tmp_path, capsys, argv, words):
    t0 = time.perf_counter()
    code, _, err = cli(capsys, *argv, *(["--logdir", str(tmp_path)] if argv[0] == "train" else []))
    assert code == 2
    one_line(err, *words)
    assert time.perf_counter() - t0 < 30  # refused before anything runs


def test_eval_of_more_episodes_than_memory_is_refused(stopped_run, capsys, tmp_path):
    code, _, err = cli(capsys, "eval", stopped_run, "--episodes", str(10**12))
    assert code == 2
    one_line(err, "lower --episodes")
    code, _, err = cli(capsys, "eval", stopped_run, "--gif", str(tmp_path / "no" / "x.gif"))
    assert code == 2
    one_line(err, "cannot write GIF", "does not exist")


def test_impossible_hparams_given_to_train_are_refused():
    import jax

    from jaxppo import ConfigError, Hparams, make_train

    config = PPOConfig(total_timesteps=1536, num_envs=4, num_steps=16, num_minibatches=2,
                       update_epochs=2, hidden_sizes=(16, 16))
    bad = Hparams.from_config(config)._replace(lr=-1.0)
    with pytest.raises(ConfigError, match="'lr'"):
        make_train(config)(jax.random.key(0), bad)
    with pytest.raises(ConfigError, match="'gamma'"):
        make_train(config).init(jax.random.key(0), bad._replace(lr=1e-3, gamma=1.5))


@pytest.mark.exact
def test_chunks_of_a_prime_number_of_updates_equal_one_scan():
    config = PPOConfig(total_timesteps=64 * 7, num_envs=4, num_steps=16, num_minibatches=2,
                       update_epochs=1, hidden_sizes=(8,))
    assert pick_chunk(7) == 1
    events = []
    result = Experiment(config, logdir=None, progress=False, chunk_updates=3,
                        callbacks=[events.append]).run()
    assert [e.update for e in events] == [3, 6, 7]
    whole = Experiment(config, logdir=None, progress=False, chunk_updates=7).run()
    np.testing.assert_array_equal(result.metrics["policy_loss"], whole.metrics["policy_loss"])


def test_a_numpy_false_from_a_callback_stops_the_run():
    config = PPOConfig(total_timesteps=1536, num_envs=4, num_steps=16, num_minibatches=2,
                       update_epochs=2, hidden_sizes=(16, 16))
    for said in (np.False_, 0):
        result = Experiment(config, logdir=None, progress=False, chunk_updates=6,
                            callbacks=[lambda e, said=said: said]).run()
        assert result.status == "stopped" and result.update == 6, said
    result = Experiment(config, logdir=None, progress=False, chunk_updates=6,
                        callbacks=[lambda e: None]).run()
    assert result.status == "finished"
