"""The run configuration (temporary face; replaced by the config split)."""

from jaxppo.config.schema import (  # noqa: F401
    Hparams,
    PPOConfig,
    check_config_key,
    config_from_dict,
    config_reference,
    config_reference_markdown,
    divisors,
    load_config,
    parse_overrides,
    parse_value,
)
