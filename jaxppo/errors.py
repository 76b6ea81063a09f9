"""jaxppo's exceptions, on the ground floor so every layer can raise them without importing
the layer that defines a config, a checkpoint or the command line.

Each message is one line naming the problem and the fix; the CLI prints it as is.
"""

from __future__ import annotations


class ConfigError(ValueError):
    """A bad configuration value; the message names the key and the fix."""


class CheckpointError(ValueError):
    """A checkpoint that cannot be used; the message names the problem."""


class UsageError(Exception):
    """Bad command-line or API input (a path, a flag combination): exit status 2 in the CLI."""


class EnvError(RuntimeError):
    """An environment on the host failed mid-run (raised, or gave a wrong shape or dtype); the
    message names the env and the step. Exit status 2 in the CLI; earlier checkpoints stand."""
