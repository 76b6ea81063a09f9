"""A key `PPOConfig` does not have: refused in one line with the likely key, a typo of ours or
another library's name for it (CleanRL, Stable-Baselines3, PureJaxRL), the derivation for the
batch sizes other libraries set directly, or the flag for an option of the run."""

from __future__ import annotations

import difflib
from typing import Any

from jaxppo.config.schema import FIELDS, PPOConfig
from jaxppo.errors import ConfigError

# What CleanRL / Stable-Baselines3 / PureJaxRL call some of our keys, for the suggestion. Case
# is ignored when matching, so PureJaxRL's upper-case names (`LR`, `NUM_ENVS`) need no entry.
_OTHER_NAMES = {
    "learning_rate": "lr", "clip_coef": "clip_eps", "clip_range": "clip_eps",
    "n_steps": "num_steps", "n_epochs": "update_epochs", "n_envs": "num_envs",
    "env_name": "env_id", "env": "env_id", "anneal_learning_rate": "anneal_lr",
    "norm_advantage": "norm_adv", "normalize_advantage": "norm_adv", "net_arch": "hidden_sizes",
    "activation_fn": "activation", "clip_range_vf": "clip_vloss",
}
# Sizes other libraries set directly and jaxppo derives (SB3's `batch_size` is the minibatch
# size; jaxppo's `batch_size` is the read-only num_envs * num_steps), so no key is "the same".
_DERIVED = ("batch_size", "minibatch_size")
_DERIVED_FIX = ("jaxppo derives the batch (num_envs * num_steps) and the minibatch size from "
                "num_minibatches (minibatch = num_envs * num_steps / num_minibatches)")
_SUGGEST = {**{k.lower(): v for k, v in _OTHER_NAMES.items()}, **{k: k for k in FIELDS},
            **{k: k for k in _DERIVED}}


# Options of a run, not of the config: the CLI flag (and the Python argument) that sets each.
_RUN_OPTIONS = {"seed": "--seed N (Python: Experiment(config, seed=N))",
                "seeds": "--seeds N (Python: Experiment(config, seeds=N))",
                "logdir": "--logdir DIR (Python: Experiment(config, logdir=DIR))",
                "run_name": "--run-name NAME (Python: Experiment(config, run_name=NAME))"}


def _unknown_key_fix(key: Any) -> str:
    """The fix for an unknown key: the jaxppo key for a typo of ours or of another library's
    name (`lerning_rate` -> `lr`), the derivation for batch sizes, the flag for a run option,
    else the valid keys."""
    name = str(key).lower()
    if name in _RUN_OPTIONS:
        return f"{name!r} is an option of the run, not a config key: {_RUN_OPTIONS[name]}"
    close = [name] if name in _SUGGEST else difflib.get_close_matches(name, list(_SUGGEST), n=1)
    if not close:
        return f"valid keys: {', '.join(FIELDS)}"
    if _SUGGEST[close[0]] in _DERIVED:
        return _DERIVED_FIX
    return f"did you mean '{_SUGGEST[close[0]]}'?"


def check_config_key(key: str, where: str) -> None:
    """Refuse a key `PPOConfig` does not have, naming `where` it came from and the likely key."""
    if key not in FIELDS:
        raise ConfigError(f"{where}: unknown key '{key}'; {_unknown_key_fix(key)}")


def config_from_dict(values: dict[str, Any], source: str = "config") -> PPOConfig:
    """Build a `PPOConfig` from a plain mapping, rejecting unknown keys with a suggestion."""
    if not isinstance(values, dict):
        raise ConfigError(f"{source}: expected a mapping of key: value, got {type(values).__name__}")
    for key in values:
        check_config_key(key, source)
    return PPOConfig(**values)
