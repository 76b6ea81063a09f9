"""A search space over config keys and a random draw from it. The draw is on the host with
numpy's `default_rng(seed)`, once, before compiling: the drawn settings become a sweep's
`hparams` list (one vmapped program, as a grid's do; one per static setting drawn), and the
checkpoint keeps them, so a resumed random sweep continues bit-exactly.

A space maps a key to an interval `(low, high)` (uniform), `(low, high, "log")` (log-uniform)
or a list of choices (uniform over them). On the command line: `KEY=LOW:HIGH[:log]` or
`KEY=a,b,c`. A static key (`jaxppo.search.static`: num_minibatches, hidden_sizes, ...) takes
choices only: each value it draws is a compiled program of its own.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from jaxppo.config import Hparams, PPOConfig
from jaxppo.errors import ConfigError, UsageError
from jaxppo.labels import value_text
from jaxppo.search.static import check_key, is_static, parse_values

# One entry of a checked space: ("uniform"|"log", low, high) or ("choice", values).
Entry = tuple


def parse_space(items: Sequence[str], search: str = "random") -> dict[str, Entry]:
    """The CLI's `--space` items as a checked space (every fault one line naming the item)."""
    space: dict[str, Entry] = {}
    given: dict[str, str] = {}
    for item in items or []:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key or not text:
            raise UsageError(f"--space expects KEY=LOW:HIGH[:log] or KEY=a,b,c, got {item!r} "
                             "(e.g. --space lr=1e-4:1e-2:log)")
        check_key(key, f"--space {key}")
        if key in space:  # argparse would keep only the last: one --space per key
            raise UsageError(f"--space {key} is given twice ({given[key]!r}, {text!r}); give "
                             "each key once")
        given[key] = text
        if is_static(key):
            if _RANGE.fullmatch(text):
                raise UsageError(_static_range(f"--space {item}", key))
            space[key] = ("choice", parse_values(key, text, f"--space {key}"))
            continue
        parts = text.split(":")
        try:
            if len(parts) == 1:
                value: Any = [float(v) for v in text.split(",")]
            elif len(parts) == 2 or (len(parts) == 3 and parts[2] == "log"):
                value = (float(parts[0]), float(parts[1]), *parts[2:])
            else:
                raise ValueError
        except ValueError:
            raise UsageError(f"--space {item}: expected LOW:HIGH, LOW:HIGH:log or a,b,c with "
                             "numbers (e.g. --space lr=1e-4:1e-2:log)") from None
        space[key] = _entry(value, f"--space {item}", UsageError)
    if not space:
        raise UsageError(f"--search {search} needs at least one --space KEY=LOW:HIGH[:log] "
                         "(or KEY=a,b,c)")
    return space


def check_space(space: dict, config: PPOConfig | None = None, *, cli: bool = False,
                population: str | None = None) -> dict[str, Entry]:
    """A space (as `jaxppo.sweep(space=...)` takes it, or `parse_space`'s) checked: sweepable
    keys, well-formed entries, and, with `config`, bounds and choices the config accepts (its
    own validation, so a clip_eps <= 0 is caught before any draw). `population` names a search
    that keeps every setting in one compiled program (halving, pbt): static keys refused."""
    error = UsageError if cli else ConfigError
    if not isinstance(space, dict) or not space:
        raise error("space: give at least one hyperparameter, e.g. "
                    "space={'lr': (1e-4, 1e-2, 'log')}")
    checked = {}
    for key, value in space.items():
        name = f"--space {key}" if cli else f"space {key!r}"
        check_key(key, name, error)
        if population is not None and is_static(key):
            search = f"--search {population}" if cli else f"search={population!r}"
            raise error(f"{name}: {key} is static (each value compiles its own program), and "
                        f"{search} keeps its whole population in one program: its space takes "
                        f"the float hyperparameters only ({', '.join(Hparams._fields)}); sweep "
                        f"{key} with --grid or --search random")
        if is_static(key) and not _is_entry(value):
            if not isinstance(value, list) or not value:
                raise error(_static_range(f"{name}={value!r}", key))
            entry = ("choice", list(value))
        else:
            entry = value if _is_entry(value) else _entry(value, f"{name}={value!r}", error)
        if config is not None:
            values = entry[1] if entry[0] == "choice" else entry[1:]
            for v in values:
                try:
                    dataclasses.replace(config, **{key: v})
                except ConfigError as e:
                    raise error(f"{name}: {value_text(v)} is not a valid {key} ({e})") from None
        checked[key] = entry
    return checked


def check_trials(trials, *, cli: bool) -> None:
    """`trials` is a positive int (not a bool), or one line naming the flag or the key."""
    if isinstance(trials, bool) or not isinstance(trials, int | np.integer) or trials < 1:
        raise (UsageError if cli else ConfigError)(
            f"{'--trials' if cli else 'trials:'} {trials}: use a positive integer")


def draw_settings(space: dict[str, Entry], trials: int, seed: int = 0) -> list[dict]:
    """`trials` settings drawn from a checked space with `default_rng(seed)`: the same seed
    draws the same settings (the CLI's and `jaxppo.sweep`'s alike)."""
    check_trials(trials, cli=True)
    rng = np.random.default_rng(seed)
    columns = {}
    for key, entry in space.items():
        kind = entry[0]
        if kind == "choice":
            columns[key] = [entry[1][i] for i in rng.integers(len(entry[1]), size=trials)]
        elif kind == "log":
            columns[key] = np.exp(rng.uniform(math.log(entry[1]), math.log(entry[2]), trials))
        else:
            columns[key] = rng.uniform(entry[1], entry[2], trials)
    # a choice keeps its value (a static key's int, tuple or name); a draw is a float
    return [{k: columns[k][i] if space[k][0] == "choice" else float(columns[k][i])
             for k in space} for i in range(trials)]


def random_search(config: PPOConfig, space: dict, trials: int, seed: int = 0, *,
                  cli: bool = False, population: str | None = None) -> tuple[list[dict], dict]:
    """A random search's settings and its record for summary.json (`search`; `strategy`, and
    `kind` as older runs have it). `population` as `check_space`'s."""
    check_trials(trials, cli=cli)
    checked = check_space(space, config, cli=cli, population=population)
    settings = draw_settings(checked, trials, seed)
    return settings, {"strategy": "random", "kind": "random", "trials": trials, "seed": seed,
                      "space": space_record(checked)}


def space_record(space: dict[str, Entry]) -> dict:
    """The space as JSON for summary.json: `[low, high]`, `[low, high, "log"]` or `{"choices":
    [...]}` per key."""
    return {k: ({"choices": list(e[1])} if e[0] == "choice"
                else [e[1], e[2], *(["log"] if e[0] == "log" else [])]) for k, e in space.items()}


_RANGE = re.compile(r"[^,\[\]{}]*:[^,\[\]{}]*")  # LOW:HIGH[:log], not a choice like [64,64]


def _static_range(name: str, key: str) -> str:
    return (f"{name}: {key} is static (each value compiles its own program): give a list of "
            f"choices, e.g. --space {key}=a,b,c (Python: space={{'{key}': [a, b, c]}})")


def _is_entry(value) -> bool:
    return (isinstance(value, tuple) and len(value) in (2, 3) and isinstance(value[0], str)
            and value[0] in ("uniform", "log", "choice"))


def _entry(value, name: str, error: type) -> Entry:
    """`(low, high)`, `(low, high, "log")` or a list of choices as a checked entry."""
    if isinstance(value, list):
        if not value:
            raise error(f"{name}: an empty list of choices")
        try:
            choices = [float(v) for v in value]
        except (TypeError, ValueError):
            raise error(f"{name}: choices must be numbers") from None
        if not all(math.isfinite(v) for v in choices):
            raise error(f"{name}: choices must be finite numbers")
        return ("choice", choices)
    if isinstance(value, tuple) and len(value) in (2, 3):
        log = len(value) == 3
        if log and value[2] != "log":
            raise error(f"{name}: the third item can only be 'log'")
        try:
            low, high = float(value[0]), float(value[1])
        except (TypeError, ValueError):
            raise error(f"{name}: LOW and HIGH must be numbers") from None
        if not (math.isfinite(low) and math.isfinite(high)):
            raise error(f"{name}: LOW and HIGH must be finite numbers")
        if low >= high:
            raise error(f"{name}: LOW must be below HIGH, got {low:g} >= {high:g}")
        if log and low <= 0:
            raise error(f"{name}: a log range needs LOW > 0, got {low:g}")
        return ("log" if log else "uniform", low, high)
    raise error(f"{name}: give (LOW, HIGH), (LOW, HIGH, 'log') or a list of choices")
