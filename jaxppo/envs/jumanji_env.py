"""Jumanji environments behind jaxppo's env protocol (`env_id: jumanji/<name>`)."""
# Stub: to be written.

from __future__ import annotations

from typing import Any

from jaxppo.envs.suite import require
from jaxppo.errors import ConfigError

PREFIX = "jumanji/"
SUITE = "Jumanji"
INSTALL_HINT = "pip install 'jaxppo[jumanji]'"


def env_ids() -> list[str]:
    require("jumanji", SUITE, INSTALL_HINT)
    return []


def make(name: str, kwargs: dict[str, Any]) -> tuple[Any, Any]:
    raise ConfigError(f"config key 'env_id': {SUITE} is not supported yet")
