"""`jaxppo config --list`: every config key with its type, default and meaning (from
`PPOConfig`'s field docstrings)."""

from __future__ import annotations

from jaxppo.cli.common import add_no_cache
from jaxppo.config import config_reference
from jaxppo.errors import UsageError


def add_parser(sub) -> None:
    k = sub.add_parser("config", help="the config keys: --list prints each with type, default "
                                      "and meaning")
    k.add_argument("--list", action="store_true", help="list every config key")
    add_no_cache(k)
    k.set_defaults(func=cmd_config)


def cmd_config(args) -> int:
    """Every config key with its type, default and meaning (`PPOConfig`'s field docstrings)."""
    if not (getattr(args, "list", False) or getattr(args, "help_config", False)):
        raise UsageError("give --list (every config key with its type, default and "
                         "meaning)")
    return list_config()


def list_config() -> int:
    """The table `--list` (and train/sweep's `--help-config`) prints."""
    rows = [("key", "type", "default", "meaning"), *config_reference()]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row[:3], widths, strict=True)) + "  " + row[3])
    return 0
