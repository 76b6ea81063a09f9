"""A run directory's life outside its logs: making a new one (never reusing a name),
finding it from a path a user gives, writing its `config.yaml`, refusing a config.yaml edited
since the run started, and listing the result files a finished run lacks (which a resume
rebuilds from the checkpoint instead of training)."""

from __future__ import annotations

import os
import re
import time

import yaml

from jaxppo.config import PPOConfig, config_from_dict
from jaxppo.errors import ConfigError, UsageError
from jaxppo.rundir import names
from jaxppo.rundir.checkpoint import checkpoint_path
from jaxppo.rundir.files import check_run_name, write_atomic
from jaxppo.rundir.summary import summary_problem
from jaxppo.rundir.sweep_csv import sweep_csv_problem

FILE = names.CONFIG
VERSION = 1
"""config.yaml's layout: every key of `PPOConfig` (a file from an older jaxppo lacks newer keys,
read with their defaults: `config_from_dict`)."""


def flat_env_id(env_id: str) -> str:
    """An env id as one folder name: a '/' or ':' (`envpool/Breakout-v5`) would nest folders."""
    return re.sub(r'[/:]', '_', env_id)


def default_run_name(config: PPOConfig, runs: int) -> str:
    """`<env>__<time>__<N>seeds`, the env id flattened."""
    name = f"{flat_env_id(config.env_id)}__{time.strftime('%Y%m%d-%H%M%S')}__{runs}seed"
    return name + ("s" if runs > 1 else "")


def make_run_dir(logdir: str, name: str | None, config: PPOConfig, runs: int) -> str:
    """A new directory under `logdir` (never an existing one: `-2`, `-3`, ... are appended)."""
    if os.path.exists(logdir) and not os.path.isdir(logdir):
        raise UsageError(f"--logdir {logdir!r} is a file; pass a directory")
    run_dir = os.path.join(logdir, check_run_name(name or default_run_name(config, runs)))
    base, i = run_dir, 1
    while os.path.lexists(run_dir):
        i += 1
        run_dir = f"{base}-{i}"
    try:
        os.makedirs(run_dir)
    except OSError as e:
        raise UsageError(f"cannot create run directory {run_dir!r}: {e.strerror}; "
                         "pass a writable --logdir") from None
    return run_dir


def run_dir_of(path: str | os.PathLike) -> str:
    """The run directory of a path given to resume or eval: the run dir itself, its
    `checkpoint/` folder or the checkpoint file (relative paths stay relative)."""
    return os.path.dirname(os.path.dirname(checkpoint_path(path))) or "."


def write_config(run_dir: str, config: PPOConfig) -> None:
    write_atomic(os.path.join(run_dir, names.CONFIG),
                 yaml.safe_dump(config.to_dict(), sort_keys=False))


def read_yaml(path: str):
    """A run directory's YAML file (`config.yaml`) as data; None where it cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            return yaml.safe_load(f)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None


def check_config_file(run_dir: str, config: PPOConfig) -> None:
    """A resumed run continues with its checkpoint's config; a `config.yaml` edited since would
    be silently ignored, so it is refused (one line, naming the keys that differ)."""
    path = os.path.join(run_dir, names.CONFIG)
    if not os.path.isfile(path):
        return
    on_disk = read_yaml(path)
    saved = config.to_dict()
    if not isinstance(on_disk, dict):
        raise UsageError(f"'{path}' is not the config this run was started with (unreadable); "
                         "restore it (the checkpoint holds the run's config) or delete it")
    try:  # a file from an older jaxppo lacks newer keys: compare with defaults filled in
        on_disk = config_from_dict(on_disk, source=path).to_dict()
    except ConfigError:
        pass  # compared raw: every key that differs is named
    changed = sorted(k for k in set(saved) | set(on_disk) if on_disk.get(k) != saved.get(k))
    if changed:
        raise UsageError(f"'{path}' was edited since the run started ({', '.join(changed)}); a "
                         "resumed run keeps its own config: undo the edit, or start a new run "
                         "with --config")


def missing_results(run_dir: str, settings: list | None, num_runs: int | None = None,
                    env_steps: int | None = None) -> list[tuple[str, str]]:
    """The result files a finished run lacks, as (name, what is wrong with the one there, ""
    when there is none), when its summary.json (or a sweep's sweep.csv) is among them: a run
    killed between its last checkpoint and writing them, or a file damaged since (checked
    against the checkpoint's `num_runs` and the config's `env_steps`)."""
    wanted = [names.SUMMARY, names.CURVE, *([names.SWEEP, names.SWEEP_PNG] if settings else [])]
    missing = [(n, "") for n in wanted if not os.path.exists(os.path.join(run_dir, n))]
    for name in (names.SUMMARY, names.SWEEP):
        path = os.path.join(run_dir, name)
        if name in wanted and os.path.exists(path):
            why = (summary_problem(path, settings, num_runs, env_steps) if name == names.SUMMARY
                   else sweep_csv_problem(path, settings))
            missing += [(name, why)] if why else []
    return missing if {names.SUMMARY, names.SWEEP} & {n for n, _ in missing} else []
