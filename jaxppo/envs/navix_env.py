"""Navix environments behind jaxppo's env protocol (`env_id: navix/<name>`)."""
# Stub: to be written.

from __future__ import annotations

from typing import Any

from jaxppo.envs.suite import require
from jaxppo.errors import ConfigError

PREFIX = "navix/"
SUITE = "Navix"
INSTALL_HINT = "pip install 'jaxppo[navix]'"


def env_ids() -> list[str]:
    require("navix", SUITE, INSTALL_HINT)
    return []


def make(name: str, kwargs: dict[str, Any]) -> tuple[Any, Any]:
    raise ConfigError(f"config key 'env_id': {SUITE} is not supported yet")
