"""XLand-MiniGrid environments behind jaxppo's env protocol (`env_id: xminigrid/<name>`)."""
# Stub: to be written.

from __future__ import annotations

from typing import Any

from jaxppo.envs.suite import require
from jaxppo.errors import ConfigError

PREFIX = "xminigrid/"
SUITE = "XLand-MiniGrid"
INSTALL_HINT = "pip install 'jaxppo[xminigrid]'"


def env_ids() -> list[str]:
    require("xminigrid", SUITE, INSTALL_HINT)
    return []


def make(name: str, kwargs: dict[str, Any]) -> tuple[Any, Any]:
    raise ConfigError(f"config key 'env_id': {SUITE} is not supported yet")
