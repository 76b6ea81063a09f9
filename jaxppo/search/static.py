"""Static settings in a sweep. The float hyperparameters (`Hparams`) are traced, so a sweep
vmaps them in one compiled program; every other config key (`num_minibatches`,
`update_epochs`, `hidden_sizes`, `network`, ...) fixes a shape, a loop length or a switch at
trace time, so a sweep over it runs one compiled program per static setting.

Here, as pure functions: which keys are static, their values read with the config's own types
and checked before anything compiles, the settings grouped by their static values (one group:
one program, one run directory), and the ranked rows placed where each group's agents live.
Running the groups one after another is `jaxppo.search.sweep`'s job.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from typing import Any, NamedTuple

import yaml

from jaxppo.config import Hparams, PPOConfig, check_config_key, parse_value
from jaxppo.errors import ConfigError, UsageError
from jaxppo.labels import setting_label

# Keys a sweep does not vary, and why (one line each).
NOT_SWEPT = {"env_id": "a sweep ranks the returns of one environment; run one sweep per "
                       "env_id"}


class Group(NamedTuple):
    """The settings of a sweep that share their static values: one compiled program."""

    name: str  # its run directory's name inside the sweep's (`000_num_minibatches=2`)
    static: dict  # the static values its settings share (as the config holds them)
    indices: list[int]  # its settings' places in the sweep's settings (grid or draw order)


def is_static(key: str) -> bool:
    """A config key fixed at trace time: not one of the traced `Hparams`."""
    return key not in Hparams._fields


def has_static(settings: Sequence[dict]) -> bool:
    return any(is_static(k) for s in settings for k in s)


def check_key(key: str, name: str, error: type = UsageError) -> None:
    """A key a sweep can vary: any config key (a typo gets the likely one), but `NOT_SWEPT`."""
    try:
        check_config_key(key, name)
    except ConfigError as e:
        raise error(str(e)) from None
    if key in NOT_SWEPT:
        raise error(f"{name}: {NOT_SWEPT[key]}")


def split_values(text: str) -> list[str]:
    """`a,b,c` split at its top-level commas: a comma inside `[...]` or `{...}` is part of
    one value, so `[64,64],[256,256]` is two values, as `--set` reads each."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch in "[{") - (ch in "]}")
        if ch == "," and depth == 0:
            out.append(text[start:i])
            start = i + 1
    return [v.strip() for v in [*out, text[start:]]]


def parse_values(key: str, text: str, name: str) -> list[Any]:
    """The values of one `--grid`/`--space` item: numbers for a traced hyperparameter, each
    read as `--set` reads it (YAML: `2`, `relu`, `true`, `[64,64]`, `null`) for a static key."""
    parts = split_values(text)
    if not all(parts):
        raise UsageError(f"{name}: an empty value in {text!r}; separate values with one comma")
    if not is_static(key):
        try:
            return [float(v) for v in parts]
        except ValueError:
            raise UsageError(f"{name}: values must be numbers, got {text!r}") from None
    out = []
    for part in parts:
        try:
            out.append(parse_value(part))
        except yaml.YAMLError:
            raise UsageError(f"{name}: cannot parse value {part!r} (each value is read as "
                             f"--set reads it, e.g. {key}=[64,64])") from None
    return out


def normalize(config: PPOConfig, settings: Sequence[dict], name: str = "grid",
              error: type = ConfigError) -> list[dict]:
    """The settings with each static value as the config holds it after its own coercion
    (`[64, 64]` and `(64, 64)`, `2` and `2.0` are one value; lists, so JSON and YAML keep
    them), every static combination and every setting checked by the config before anything
    compiles: a bad one is one line naming it."""
    out = []
    for s in settings:
        static = {k: v for k, v in s.items() if is_static(k)}
        try:
            c = dataclasses.replace(config, **static)
        except ConfigError as e:
            raise error(f"{name} {setting_label(static)}: {e}") from None
        try:
            dataclasses.replace(c, **{k: v for k, v in s.items() if not is_static(k)})
        except ConfigError as e:
            raise error(f"{name} {setting_label(s)}: {e}") from None
        held = c.to_dict()
        out.append({k: held[k] if is_static(k) else float(v) for k, v in s.items()})
    return out


def group_settings(settings: Sequence[dict]) -> list[Group]:
    """The settings grouped by their static values, groups in order of first appearance."""
    found: dict[str, tuple[dict, list[int]]] = {}
    for i, s in enumerate(settings):
        static = {k: v for k, v in s.items() if is_static(k)}
        found.setdefault(json.dumps(static, sort_keys=True), (static, []))[1].append(i)
    return [Group(group_name(g, static), static, indices)
            for g, (static, indices) in enumerate(found.values())]


def group_name(index: int, static: dict) -> str:
    """A group's run directory name: its index (unique) and its static values, readable and
    safe as one path component."""
    label = re.sub(r"[^\w.=,+-]", "_", setting_label(static))[:80]
    return f"{index:03d}_{label}"


def traced_settings(settings: Sequence[dict], group: Group) -> list[dict]:
    """A group's settings without their static keys: its program's vmapped `hparams`."""
    return [{k: v for k, v in settings[i].items() if not is_static(k)} for i in group.indices]


def group_config(config: PPOConfig, group: Group) -> PPOConfig:
    return dataclasses.replace(config, **group.static)


def group_rows(rows: list[dict], groups: Sequence[Group], seeds: int,
               order: Sequence[int]) -> list[dict]:
    """`rank_settings`' rows over the sweep's settings `order` (its `runs` count `seeds`
    agents per setting in that order), each placed where its agents live: `group` (the run
    directory's name) and `runs` (indices into that directory's agents, what `jaxppo eval`
    and `load_policy(..., seed=)` take)."""
    where = {i: (g.name, j) for g in groups for j, i in enumerate(g.indices)}
    out = []
    for r in rows:
        name, j = where[order[r["runs"][0] // seeds]]
        out.append({**r, "runs": list(range(j * seeds, (j + 1) * seeds)), "group": name})
    return out
