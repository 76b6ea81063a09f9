"""Craftax environments behind jaxppo's env protocol (`env_id: craftax/<name>`)."""
# Stub: to be written.

from __future__ import annotations

from typing import Any

from jaxppo.envs.suite import require
from jaxppo.errors import ConfigError

PREFIX = "craftax/"
SUITE = "Craftax"
INSTALL_HINT = "pip install 'jaxppo[craftax]'"


def env_ids() -> list[str]:
    require("craftax", SUITE, INSTALL_HINT)
    return []


def make(name: str, kwargs: dict[str, Any]) -> tuple[Any, Any]:
    raise ConfigError(f"config key 'env_id': {SUITE} is not supported yet")
