"""Config validation, YAML loading, every shipped config, and Hparams."""

import dataclasses
import glob
import os

import jax.numpy as jnp
import pytest

from jaxppo import ConfigError, Hparams, PPOConfig, load_config

ROOT = os.path.dirname(os.path.dirname(__file__))
CONFIGS = sorted(glob.glob(os.path.join(ROOT, "configs", "*.yaml")))


def test_all_shipped_configs_load():
    assert len(CONFIGS) == 12
    for path in CONFIGS:
        cfg = load_config(path)
        assert cfg.num_updates >= 1
        assert cfg.batch_size % cfg.num_minibatches == 0


def test_default_config_is_cartpole_yaml():
    assert load_config(os.path.join(ROOT, "configs", "cartpole.yaml")) == PPOConfig()


def test_derived_sizes():
    cfg = PPOConfig(num_envs=8, num_steps=32, num_minibatches=4, total_timesteps=10_000)
    assert (cfg.batch_size, cfg.minibatch_size, cfg.num_updates) == (256, 64, 39)
    assert cfg.env_steps == 39 * 256


def test_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        PPOConfig().lr = 1.0


@pytest.mark.parametrize("kwargs,match", [
    ({"num_minibatches": 3}, "num_minibatches.*does not split"),
    ({"total_timesteps": 100}, "total_timesteps.*less than one update"),
    ({"gamma": 1.5}, "gamma.*\\[0, 1\\]"),
    ({"gae_lambda": -0.1}, "gae_lambda"),
    ({"clip_eps": 0.0}, "clip_eps.*positive"),
    ({"lr": float("nan")}, "lr.*finite"),
    ({"num_envs": 0}, "num_envs.*positive"),
    ({"num_envs": 2.5}, "num_envs.*integer"),
    ({"anneal_lr": "yes"}, "anneal_lr.*true or false"),
    ({"activation": "sigmoid"}, "activation"),
    ({"hidden_sizes": []}, "hidden_sizes"),
    ({"env_id": "Cartpole-v1"}, "did you mean 'CartPole-v1'"),
    ({"target_kl": -1.0}, "target_kl"),
])
def test_bad_values_fail_with_one_line(kwargs, match):
    with pytest.raises(ConfigError, match=match) as e:
        PPOConfig(**kwargs)
    assert "\n" not in str(e.value)


def test_yaml_errors(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("lerning_rate: 0.1\n")
    with pytest.raises(ConfigError, match="unknown key 'lerning_rate'"):
        load_config(p)
    p.write_text("lr: [1, 2\n")
    with pytest.raises(ConfigError, match="YAML error"):
        load_config(p)
    p.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(p)
    p.write_text("env_id: !!python/object/apply:os.system ['echo hacked']\n")
    with pytest.raises(ConfigError):
        load_config(p)
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")


def test_overrides(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("env_id: Acrobot-v1\nhidden_sizes: [32, 32]\n")
    cfg = load_config(p, {"lr": 1e-3})
    assert cfg.env_id == "Acrobot-v1" and cfg.hidden_sizes == (32, 32) and cfg.lr == 1e-3
    assert isinstance(cfg.lr, float)


def test_hparams():
    hp = Hparams.from_config(PPOConfig())
    assert float(hp.lr) == pytest.approx(2.5e-4) and hp.lr.dtype == jnp.float32
    stacked = Hparams.stack([PPOConfig(lr=1e-3), PPOConfig(lr=1e-4)])
    assert stacked.lr.shape == (2,) and stacked.gamma.shape == (2,)
