"""jaxppo's exceptions, on the ground floor so every layer can raise them without importing
the layer that defines a config, a checkpoint or the command line.

Each message is one line naming the problem and the fix; the CLI prints it as is.
"""

from __future__ import annotations


class ConfigError(ValueError):
    """A bad configuration value; the message names the key and the fix.

    Raised on the host, before anything is traced or compiled: by `PPOConfig(...)` and
    `dataclasses.replace(config, ...)` (a value out of range, sizes that do not divide, an
    unknown environment), `load_config` (an unreadable file, bad YAML, an unknown key, with the
    closest key suggested), `Hparams.stack` / `Hparams.check`, `register_env`, and
    `Experiment.run()` when the config (times its runs) cannot fit the device's free memory.
    A `ValueError`; the CLI prints the line and exits with status 2.
    """


class CheckpointError(ValueError):
    """A checkpoint that cannot be used; the message names the problem.

    Raised by `load_checkpoint`, `load_policy`, `evaluate` and `Experiment.resume` for a run
    that has no checkpoint, a file that is not one, a corrupt or truncated file, a failed
    checksum (an edited header), another format version, or a checkpoint that does not match
    its config or the environment passed as `env=`. Nothing is written. A `ValueError`; the CLI
    prints the line and exits with status 2.
    """


class UsageError(Exception):
    """Bad command-line or API input (a path, a flag combination): exit status 2 in the CLI.

    The input is refused in one line naming what to pass instead, before anything is written:
    e.g. a run directory in use by another process, a finished run given to resume, a seed out
    of a checkpoint's range in `load_policy`, `Policy.act` asked to sample without a key, or
    `report` given no run directory.
    """


class EnvError(RuntimeError):
    """An environment on the host failed mid-run (raised, or gave a wrong shape or dtype); the
    message names the env and the step. Exit status 2 in the CLI; earlier checkpoints stand."""


class UserCodeExit(Exception):
    """A module of yours (`--import`, `env_imports`, `env_id: gymnasium/<module>:<id>` or
    `<module>:<Name>`) raised SystemExit, or KeyboardInterrupt with no Ctrl-C, while jaxppo
    imported it; the message names the module and what it raised. Exit status 4 in the CLI:
    never 0 (nothing succeeded), 3 (nothing diverged) or 128 + N (no signal came)."""


USER_CODE_EXIT = 4
"""The CLI's exit status for `UserCodeExit`."""
