"""The `jaxppo` command (`main`; `entry` is the console script), one module per verb over
`jaxppo.cli.common`."""

from jaxppo.cli.app import build_parser, entry, main

__all__ = ["build_parser", "entry", "main"]
