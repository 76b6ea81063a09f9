"""What a run is: the validated `PPOConfig`, its traced `Hparams`, YAML loading, the key reference.

Below `core/` (the compiled program reads a config) and above `envs/` (a config's `env_id` is
checked against the env sources). Code outside this package imports from here; the modules
inside import each other by full path, so nothing cycles through this face.
"""

from jaxppo.config.hparams import Hparams, check_settings
from jaxppo.config.load import load_config, parse_overrides, parse_value, yaml_load
from jaxppo.config.names import check_config_key, config_from_dict
from jaxppo.config.reference import config_reference, config_reference_markdown
from jaxppo.config.schema import FIELDS, PPOConfig, divisors

__all__ = [
    "FIELDS",
    "Hparams",
    "PPOConfig",
    "check_config_key",
    "check_settings",
    "config_from_dict",
    "config_reference",
    "config_reference_markdown",
    "divisors",
    "load_config",
    "parse_overrides",
    "parse_value",
    "yaml_load",
]
