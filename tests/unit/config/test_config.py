"""Config validation, YAML loading, every shipped config, and Hparams."""

import dataclasses
import glob
import math
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import yaml
from conftest import ROOT

from jaxppo import ConfigError, Hparams, PPOConfig, load_config
from jaxppo.config import (
    check_config_key,
    config_from_dict,
    divisors,
    parse_overrides,
    parse_value,
    yaml_load,
)

pytestmark = pytest.mark.unit

CONFIGS = sorted(glob.glob(os.path.join(ROOT, "configs", "*.yaml")))


def test_all_shipped_configs_load():
    """Every shipped config loads; on a core-only install, one whose suite is not installed
    is one error naming the extra (the dev extra has every suite: there all of them load)."""
    assert len(CONFIGS) >= 12
    for path in CONFIGS:
        try:
            cfg = load_config(path)
        except ConfigError as e:
            assert "which is not installed" in str(e) and "pip install 'jaxppo[" in str(e), e
            continue
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
    with pytest.raises(ConfigError, match="YAML error.*fix the YAML syntax"):
        load_config(p)
    p.write_text("env_id: gymnasium/X-v0\nobs_field: *\n")  # `*` is YAML's alias mark
    with pytest.raises(ConfigError, match=r"line 2.*quote the value \('\*'\)"):
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


def test_a_typo_in_the_overrides_is_not_blamed_on_the_config_file(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("env_id: Acrobot-v1\n")
    with pytest.raises(ConfigError, match="^overrides: unknown key 'lerning_rate'; did you mean "
                       "'lr'") as e:
        load_config(p, {"lerning_rate": 1e-3})
    assert "c.yaml" not in str(e.value)
    with pytest.raises(ConfigError, match="^--set lerning_rate=1e-3: unknown key 'lerning_rate';"
                       " did you mean 'lr'"):
        parse_overrides(["lerning_rate=1e-3"])
    with pytest.raises(ConfigError, match="'seed' is an option of the run, not a config key: "
                       "--seed N"):
        parse_overrides(["seed=3"])
    with pytest.raises(ConfigError, match="'seeds' is an option of the run.*--seeds N"):
        load_config(p, {"seeds": 4})


def test_hparams():
    hp = Hparams.from_config(PPOConfig())
    assert float(hp.lr) == pytest.approx(2.5e-4) and hp.lr.dtype == jnp.float32
    stacked = Hparams.stack([PPOConfig(lr=1e-3), PPOConfig(lr=1e-4)])
    assert stacked.lr.shape == (2,) and stacked.gamma.shape == (2,)


@pytest.mark.parametrize("key,fix", [
    ("lerning_rate", "did you mean 'lr'?"),  # a typo of another library's name
    ("clip_coeff", "did you mean 'clip_eps'?"),
    ("lrr", "did you mean 'lr'?"),  # a typo of ours
    ("NUM_ENVS", "did you mean 'num_envs'?"),  # PureJaxRL's upper case
    ("n_steps", "did you mean 'num_steps'?"),
])
def test_unknown_key_suggests_our_key(key, fix):
    with pytest.raises(ConfigError) as e:
        config_from_dict({key: 1})
    assert str(e.value) == f"config: unknown key '{key}'; {fix}"


@pytest.mark.parametrize("key", ["batch_size", "minibatch_size"])
def test_batch_sizes_are_explained_not_mapped(key):
    # SB3's batch_size is the minibatch size; jaxppo's is num_envs * num_steps, derived.
    with pytest.raises(ConfigError) as e:
        config_from_dict({key: 64})
    msg = str(e.value)
    assert msg.startswith(f"config: unknown key '{key}'; jaxppo derives the batch")
    assert "did you mean" not in msg and "num_minibatches" in msg and "\n" not in msg


@pytest.mark.parametrize("text,value", [
    ("3e-4", 3e-4), ("1e6", 1e6), ("2e4", 2e4), ("-1E+3", -1000.0), (".5", 0.5), ("1.5", 1.5),
    ("1000", 1000), ("tanh", "tanh"), ("[64, 64]", [64, 64]), ("null", None), ("true", True),
])
def test_parse_value_reads_yaml_1_2_numbers(text, value):
    got = parse_value(text)
    assert got == value and type(got) is type(value)
    assert math.isinf(parse_value("-.inf")) and math.isnan(parse_value(".nan"))


def test_yaml_1_2_floats_in_files_and_integral_floats_for_ints(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("lr: 3e-4\ntotal_timesteps: 1e6\n")
    cfg = load_config(p, {"num_envs": parse_value("8"), "adam_eps": parse_value("1e-8")})
    assert cfg.lr == 3e-4 and cfg.adam_eps == 1e-8 and cfg.num_envs == 8
    assert cfg.total_timesteps == 1_000_000 and type(cfg.total_timesteps) is int
    with pytest.raises(ConfigError, match=r"total_timesteps': got 1500000.5 \(float\); use an integer"):
        load_config(p, {"total_timesteps": 1.5e6 + 0.5})
    with pytest.raises(ConfigError, match=r"num_envs': got 1.5 \(float\); use an integer"):
        PPOConfig(num_envs=1.5)


def test_numpy_scalars_become_python_numbers():
    cfg = PPOConfig(num_envs=np.int64(8), lr=np.float32(1e-3), anneal_lr=np.bool_(False),
                    hidden_sizes=[np.int32(32), 32])
    assert type(cfg.num_envs) is int and type(cfg.lr) is float and type(cfg.anneal_lr) is bool
    assert cfg.hidden_sizes == (32, 32) and all(type(h) is int for h in cfg.hidden_sizes)
    assert cfg == PPOConfig(num_envs=8, lr=float(np.float32(1e-3)), anneal_lr=False,
                            hidden_sizes=(32, 32))
    with pytest.raises(ConfigError, match="num_envs.*integer"):
        PPOConfig(num_envs=np.bool_(True))


def test_duplicate_keys_bad_encoding_and_deep_nesting_fail_with_one_line(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("lr: 1e-3\ngamma: 0.9\nlr: 3e-4\n")
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert str(e.value) == f"config file '{p}': key 'lr' appears twice (lines 1 and 3); keep one"
    # a `<<` merge may override keys on purpose: not a duplicate
    assert yaml_load("a: &b {x: 1, y: 2}\nc: {<<: *b, x: 3}\n")["c"] == {"x": 3, "y": 2}
    p.write_bytes(b"env_id: CartPole-v1\nlr: \xff\n")
    with pytest.raises(ConfigError, match="not UTF-8 text.*save it as UTF-8") as e:
        load_config(p)
    assert "\n" not in str(e.value)
    p.write_text("lr: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(ConfigError, match="nesting is too deep") as e:
        load_config(p)
    assert "\n" not in str(e.value)


def test_stack_refuses_static_fields():
    with pytest.raises(ConfigError) as e:
        Hparams.stack([PPOConfig(num_minibatches=4), PPOConfig(num_minibatches=8, lr=1e-3),
                       PPOConfig(hidden_sizes=(32,))])
    msg = str(e.value)  # lr is an Hparams field: it may differ, and is not named
    assert "differ in num_minibatches, hidden_sizes, which are static" in msg
    assert "separate make_train calls" in msg and "\n" not in msg
    # Hparams fields may differ; Hparams mixed with configs stack too.
    hp = Hparams.stack([PPOConfig(lr=1e-3, gamma=0.9), Hparams.from_config(PPOConfig())])
    assert hp.gamma.shape == (2,) and float(hp.gamma[0]) == pytest.approx(0.9)
    with pytest.raises(ConfigError, match="no settings"):
        Hparams.stack([])


def test_parse_overrides_splits_at_the_first_equals_and_refuses_what_is_not_key_value():
    assert parse_overrides(None) == {} and parse_overrides([]) == {}
    assert parse_overrides([" lr =1e-3", "obs_field=a=b", "target_kl="]) == {
        "lr": 1e-3, "obs_field": "a=b", "target_kl": None}  # an empty value is YAML's null
    for item in ("lr", "=3"):
        with pytest.raises(ConfigError) as e:
            parse_overrides([item])
        assert str(e.value) == f"--set expects KEY=VALUE, got {item!r} (e.g. --set lr=1e-3)"
    with pytest.raises(ConfigError) as e:
        parse_overrides(["lr=[1,"])
    assert str(e.value) == "--set lr: cannot parse value '[1,'"


def test_yaml_load_refuses_a_duplicate_key_in_any_mapping():
    with pytest.raises(yaml.YAMLError, match=r"duplicate key 'a' \(lines 1 and 1\)"):
        yaml_load("env_kwargs: {a: 1, a: 2}\n")
    with pytest.raises(yaml.YAMLError, match=r"duplicate key 'x' \(lines 2 and 3\)"):
        yaml_load("env_params:\n  x: 1\n  x: 2\n")
    assert yaml_load("a: {x: 1}\nb: {x: 2}\n") == {"a": {"x": 1}, "b": {"x": 2}}


def test_check_config_key_names_where_the_key_came_from():
    check_config_key("lr", "--grid")
    with pytest.raises(ConfigError) as e:
        check_config_key("lerning_rate", "--grid")
    assert str(e.value) == "--grid: unknown key 'lerning_rate'; did you mean 'lr'?"


def test_divisors():
    assert divisors(1) == [1] and divisors(12) == [1, 2, 3, 4, 6, 12] and divisors(49) == [1, 7, 49]
    assert divisors(2**31 - 1) == [1, 2**31 - 1]  # a prime in the billions, in O(sqrt(n))


def test_hparams_check_refuses_concrete_values_and_passes_traced_ones():
    hp = Hparams.from_config(PPOConfig())
    assert hp.check() is hp
    for name, value, fix in [("gamma", 1.5, "use a value in [0, 1]"),
                             ("lr", 0.0, "use a positive number"),
                             ("ent_coef", -0.1, "use a number >= 0"),
                             ("vf_coef", np.nan, "use a number >= 0")]:
        with pytest.raises(ConfigError) as e:
            hp._replace(**{name: jnp.float32(value)}).check()
        assert str(e.value).startswith(f"hparams '{name}': got ") and str(e.value).endswith(f"; {fix}")
    with pytest.raises(ConfigError, match=r"hparams 'gamma': got \[0.5, 1.5\]; use a value"):
        hp._replace(gamma=jnp.array([0.5, 1.5])).check()  # stacked: every value is shown
    assert float(jax.jit(lambda h: h.check().gamma)(hp._replace(gamma=jnp.float32(0.5)))) == 0.5
