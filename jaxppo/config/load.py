"""Strict YAML for configs: YAML 1.2 numbers, no duplicate keys, one-line errors naming the file.

PyYAML's SafeLoader reads `3e-4` as a string and lets a repeated key silently win; both are how a
config quietly trains something other than what its file says, so this loader refuses them.
`--set KEY=VALUE` values are read by the same rules as the file.
"""

from __future__ import annotations

import os
import re
import stat
from typing import Any

import yaml

from jaxppo.config.names import check_config_key, config_from_dict
from jaxppo.config.schema import PPOConfig, takes_text
from jaxppo.errors import ConfigError

# YAML 1.2 floats. PyYAML implements YAML 1.1, whose floats need a dot and a signed exponent,
# so `3e-4` and `1e6` (the way people write learning rates and budgets) would load as strings.
# This resolver runs after 1.1's int resolver, so `1000` stays an int.
_FLOAT_1_2 = re.compile(r"""^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?
                             |[-+]?\.(?:inf|Inf|INF)
                             |\.(?:nan|NaN|NAN))$""", re.X)


class _DuplicateKeyError(yaml.constructor.ConstructorError):
    def __init__(self, key: Any, lines: tuple[int, int], mark: Any) -> None:
        super().__init__("while constructing a mapping", None,
                         f"found duplicate key {key!r} (lines {lines[0]} and {lines[1]})", mark)
        self.key, self.lines = key, lines


class _NestingTooDeepError(yaml.YAMLError):
    pass


class _Loader(yaml.SafeLoader):
    """SafeLoader (tags never construct objects) with YAML 1.2 floats and no duplicate keys."""

    def construct_mapping(self, node: Any, deep: bool = False) -> dict:
        lines: dict[Any, int] = {}
        for key_node, _ in node.value if isinstance(node, yaml.MappingNode) else ():
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag.endswith(":merge"):
                continue  # a `<<` merge may repeat keys on purpose; it overrides them
            key, line = self.construct_object(key_node), key_node.start_mark.line + 1
            if key in lines:
                raise _DuplicateKeyError(key, (lines[key], line), key_node.start_mark)
            lines[key] = line
        return super().construct_mapping(node, deep=deep)


_Loader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_1_2, list("-+.0123456789"))


def yaml_load(text: str) -> Any:
    """`yaml.safe_load(text)`, but numbers follow YAML 1.2 (`3e-4` and `1e6` are floats) and a
    key repeated in one mapping raises `yaml.YAMLError` instead of the last one silently winning."""
    loader = _Loader(text)
    try:
        return loader.get_single_data()
    except RecursionError:
        raise _NestingTooDeepError("nesting is too deep to parse") from None
    finally:
        loader.dispose()


MAX_VALUES = 1_000_000
"""A config's values, counted as they expand (YAML aliases repeat what they point at): more is an
alias bomb (a few lines of `&a [*b, *b, ...]` expanding to billions), refused before anything
walks it."""


def expanded_size(value: Any) -> int:
    """How many values `value` holds once YAML's aliases are expanded, counted in time linear in
    the distinct objects (a repeated alias is one object, counted as often as it appears)."""
    sizes: dict[int, int] = {}

    def size(x: Any) -> int:
        if not isinstance(x, (dict, list)):
            return 1
        if id(x) not in sizes:
            sizes[id(x)] = 0  # a cycle (a recursive alias) counts once
            items = [*x.keys(), *x.values()] if isinstance(x, dict) else x
            sizes[id(x)] = 1 + sum(min(size(v), MAX_VALUES + 1) for v in items)
        return min(sizes[id(x)], MAX_VALUES + 1)

    return size(value)


def _check_size(value: Any, where: str) -> None:
    n = expanded_size(value)
    if n > MAX_VALUES:
        raise ConfigError(f"{where}: holds more than {MAX_VALUES:,} values once its YAML "
                          "aliases are expanded (an alias bomb?); a config is a mapping of a few "
                          "dozen values: write them out, without aliases that repeat aliases")


def parse_value(text: str) -> Any:
    """One `--set KEY=VALUE` value, read as YAML would read it in a config file (`3e-4` -> 0.0003,
    `[64, 64]` -> a list, `null` -> None, `tanh` -> 'tanh'); raises `yaml.YAMLError` if it cannot."""
    value = yaml_load(text)
    _check_size(value, "--set value")
    return value


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """`KEY=VALUE` overrides (the CLI's `--set`); VALUE is read as YAML 1.2, so 3e-4, true and
    [64, 64] mean what they say. An unknown KEY is refused here, naming the `--set` it came
    from (not the config file); values are checked when the config is built. A string key's
    value that is no YAML (`obs_field=*`: `*` marks a YAML alias) is taken as written."""
    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set expects KEY=VALUE, got {item!r} (e.g. --set lr=1e-3)")
        check_config_key(key.strip(), f"--set {item}")
        try:
            out[key.strip()] = parse_value(value)
        except yaml.YAMLError:
            if not takes_text(key.strip()):
                raise ConfigError(f"--set {key}: cannot parse value {value!r}") from None
            out[key.strip()] = value.strip()
    return out


def _not_regular(mode: int) -> str | None:
    """What a file of `mode` is when it is not a regular file ("a FIFO"), else None."""
    if stat.S_ISREG(mode):
        return None
    return ("a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a directory" if stat.S_ISDIR(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "not a file")


def load_config(path: str | os.PathLike, overrides: dict[str, Any] | None = None) -> PPOConfig:
    """Read a YAML config (`yaml_load`: safe, YAML 1.2 numbers, no duplicate keys) and apply
    `overrides`.

    The file is a flat mapping of config keys (see `PPOConfig`); keys it leaves out keep their
    defaults. Numbers follow YAML 1.2 (`3e-4` and `1e6` are numbers, not strings), and a key
    given twice is refused instead of the last one silently winning.

    Args:
      path: the YAML file (the shipped ones are in `configs/`).
      overrides: `{key: value}` applied on top of the file, as the CLI's `--set` does
        (default: none).

    Returns:
      The validated `PPOConfig`.

    Raises:
      ConfigError: the file cannot be read or is not UTF-8, its YAML is malformed or not a
        mapping, a key appears twice, a key (in the file or in `overrides`) is unknown (the
        closest key is suggested), or a value is invalid.
    """
    try:
        kind = _not_regular(os.stat(path).st_mode)
        if kind:  # opening a FIFO waits for a writer for ever; a device may never end
            raise ConfigError(f"cannot read config file '{path}': it is {kind}, not a regular "
                              "file; save the config as a YAML file and pass that")
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ConfigError(f"cannot read config file '{path}': {e.strerror or e}; "
                          "check the path (shipped configs are in configs/)") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"config file '{path}': not UTF-8 text (byte {e.object[e.start]:#04x} "
                          f"at offset {e.start}); save it as UTF-8") from None
    try:
        values = yaml_load(text)
    except _DuplicateKeyError as e:
        raise ConfigError(f"config file '{path}': key '{e.key}' appears twice (lines "
                          f"{e.lines[0]} and {e.lines[1]}); keep one") from None
    except _NestingTooDeepError:
        raise ConfigError(f"config file '{path}': YAML nesting is too deep to parse; a config "
                          "is a flat mapping of key: value") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        line = text.splitlines()[mark.line] if mark and mark.line < len(text.splitlines()) \
            else ""
        value = line.partition(":")[2].strip()
        fix = (f"quote the value ('{value}'): a bare * or & starts a YAML alias or anchor"
               if value[:1] in ("*", "&") else "fix the YAML syntax (key: value per line)")
        raise ConfigError(f"config file '{path}': YAML error{where}: {problem}; {fix}") from None
    if values is None or values == {}:  # empty, or only comments: not "train the defaults"
        raise ConfigError(f"config file '{path}' holds no settings (it is empty); give at least "
                          "env_id (e.g. start from configs/cartpole.yaml)")
    if not isinstance(values, dict):
        raise ConfigError(f"config file '{path}': expected a mapping of key: value, "
                          f"got {type(values).__name__}")
    _check_size(values, f"config file '{path}'")
    for key in overrides or {}:  # a typo in the overrides is not the file's
        check_config_key(key, "overrides")
    return config_from_dict({**values, **(overrides or {})}, source=f"config file '{path}'")
