"""`python -m jaxppo.cli ...`: the `jaxppo` command."""

from jaxppo.cli.app import entry

entry()
