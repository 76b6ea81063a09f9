"""The `jaxppo` command (`main`), one module per verb over `jaxppo.cli.common`."""

from jaxppo.cli.app import build_parser, main

__all__ = ["build_parser", "main"]
