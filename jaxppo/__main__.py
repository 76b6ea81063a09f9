"""`python -m jaxppo ...`: the `jaxppo` command (as `python -m jaxppo.cli`)."""

from jaxppo.cli.app import entry

entry()
