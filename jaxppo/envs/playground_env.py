"""Playground environments behind jaxppo's env protocol (`env_id: playground/<name>`)."""
# Stub: to be written.

from __future__ import annotations

from typing import Any

from jaxppo.envs.suite import require
from jaxppo.errors import ConfigError

PREFIX = "playground/"
SUITE = "Playground"
INSTALL_HINT = "pip install 'jaxppo[playground]'"


def env_ids() -> list[str]:
    require("mujoco_playground", SUITE, INSTALL_HINT)
    return []


def make(name: str, kwargs: dict[str, Any]) -> tuple[Any, Any]:
    raise ConfigError(f"config key 'env_id': {SUITE} is not supported yet")
