"""The one table of search strategies: for each, the options it takes (and needs), how it
draws its settings, and the controller that changes its population while it runs, if any.
`jaxppo.sweep()`, `jaxppo.resume_sweep()` and `jaxppo sweep` all read it: the CLI builds its
flags from `OPTIONS` and keeps no dispatch of its own, so adding a strategy is its module plus
one row here.

An option is one keyword of `jaxppo.sweep` and one flag of `jaxppo sweep` (`trials=` and
`--trials`); the CLI hands over its raw texts (`--space lr=1e-4:1e-2:log`), Python its values
(`space={"lr": (1e-4, 1e-2, "log")}`), and `cli` says which (and how a refusal names it).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from jaxppo.config import PPOConfig
from jaxppo.envs import VecEnv
from jaxppo.envs.registry import host_source_of
from jaxppo.errors import ConfigError, UsageError
from jaxppo.run.controller import Controller
from jaxppo.run.memory import check_memory, check_run_count
from jaxppo.rundir import names
from jaxppo.rundir.record import RunRecord
from jaxppo.search.halving import HalvingController, halving_search
from jaxppo.search.pbt import DEFAULT_INTERVAL, DEFAULT_QUANTILE, PBTController, pbt_search
from jaxppo.search.space import parse_space, random_search
from jaxppo.search.static import check_key, is_static
from jaxppo.search.table import grid_settings, parse_grid


class Option(NamedTuple):
    """One strategy option: `jaxppo.sweep(name=...)` and `jaxppo sweep --name`."""

    name: str
    type: Callable[[str], Any]  # what the CLI's text becomes (`--grid`/`--space`: kept as text)
    metavar: str
    help: str
    repeat: bool = False  # given once per key (`--grid lr=...` `--grid ent_coef=...`)
    needs: str = ""  # what a strategy that needs it asks for, after the flag ("N (how many ...)")


OPTIONS: dict[str, Option] = {o.name: o for o in (
    Option("grid", str, "KEY=V1,V2,...", "with --search grid: a key's values (repeatable); "
           "every combination runs", repeat=True),
    Option("space", str, "KEY=LOW:HIGH[:log]|a,b,c",
           "with --search random/halving/pbt: a key's range or choices (repeatable; a static "
           "key: choices, and only with --search random)", repeat=True,
           needs="KEY=LOW:HIGH[:log] (or KEY=a,b,c), at least one"),
    Option("trials", int, "N", "with --search random/halving: how many settings to draw",
           needs="N (how many settings to draw)"),
    Option("eta", int, "ETA", "with --search halving: keep the best 1/ETA of the settings "
           "after each rung (default 3)"),
    Option("population", int, "N", "with --search pbt: how many members (at least 2)",
           needs="N (how many members, at least 2)"),
    Option("interval", int, "U", f"with --search pbt: exploit/explore every U updates "
           f"(default {DEFAULT_INTERVAL})"),
    Option("quantile", float, "Q", f"with --search pbt: the bottom Q copy the top Q (default "
           f"{DEFAULT_QUANTILE}; at most 0.5)"),
)}


class Strategy(NamedTuple):
    """A search strategy: its options, its draw, and its controller (None: the settings just
    run, as one vmapped program)."""

    name: str
    help: str
    takes: tuple[str, ...]  # its options
    needs: tuple[str, ...]  # of those, the ones it cannot do without
    usage: str  # what it takes, for a refusal's fix
    # (config, options, seed, cli) -> (settings, search record or None)
    draw: Callable[[PPOConfig, dict, int, bool], tuple[list[dict], dict | None]]
    # (config, search record, settings, seeds) -> its Controller
    controller: Callable[[PPOConfig, dict, list, int], Controller] | None = None
    one_seed_each: str = ""  # why --seeds must stay 1 (PBT: every member is one seed)
    one_device: bool = False  # it runs on one device (PBT's exploits copy between members)
    # (search record, settings, seeds) -> what the sweep's first line says it runs
    describe: Callable[[dict | None, int, int], str] = (
        lambda record, n, seeds: f"{n} settings x {seeds} seeds = {n * seeds} agents in one "
                                 "program")
    # summary.json -> lines to print after the table
    closing: Callable[[dict], list[str]] = lambda summary: []


def _grid(config: PPOConfig, opts: dict, seed: int, cli: bool) -> tuple[list[dict], None]:
    if cli:
        return grid_settings(parse_grid(opts.get("grid") or [])), None
    grid = opts.get("grid")
    if not grid:
        raise ConfigError("sweep needs at least one hyperparameter with a list of values")
    for key in grid:
        check_key(key, f"grid {key!r}", ConfigError)
    return grid_settings({k: list(v) for k, v in grid.items()}), None


def _space(opts: dict, cli: bool, search: str):
    return parse_space(opts.get("space") or [], search) if cli else opts.get("space")


def _random(config, opts, seed, cli):
    return random_search(config, _space(opts, cli, "random"), opts["trials"], seed, cli=cli)


def _halving(config, opts, seed, cli):
    eta = opts.get("eta")
    return halving_search(config, _space(opts, cli, "halving"), opts["trials"],
                          3 if eta is None else eta, seed, cli=cli)


def _pbt(config, opts, seed, cli):
    interval, quantile = opts.get("interval"), opts.get("quantile")
    return pbt_search(config, _space(opts, cli, "pbt"), opts["population"],
                      DEFAULT_INTERVAL if interval is None else interval,
                      DEFAULT_QUANTILE if quantile is None else quantile, seed, cli=cli)


STRATEGIES: dict[str, Strategy] = {s.name: s for s in (
    Strategy("grid", "every --grid combination", ("grid",), (),
             "--search grid takes --grid KEY=V1,V2,...", _grid),
    Strategy("random", "--trials settings drawn from --space with --seed", ("space", "trials"),
             ("trials", "space"),
             "--search random takes --trials N and --space KEY=LOW:HIGH[:log] or KEY=a,b,c",
             _random),
    Strategy("halving", "the same draw, trained in rungs, keeping the best 1/--eta after each",
             ("space", "trials", "eta"), ("trials", "space"),
             "--search halving takes --trials N, --space KEY=LOW:HIGH[:log] and --eta",
             _halving, lambda config, record, settings, seeds: HalvingController(record, seeds),
             describe=lambda record, n, seeds: f"{n} settings x {seeds} seeds = {n * seeds} "
                                               "agents in rungs (successive halving)"),
    Strategy("pbt", "population-based training of --population members drawn so",
             ("space", "population", "interval", "quantile"), ("population", "space"),
             "--search pbt trains --population N members drawn from --space", _pbt,
             lambda config, record, settings, seeds: PBTController.from_record(config, record,
                                                                                 settings),
             one_seed_each="every member is one seed of its own; size the search with "
                           "--population N",
             one_device=True,
             describe=lambda record, n, seeds: f"PBT: {n} members in one program, "
                                               f"exploit/explore every {record['interval']} "
                                               "updates",
             closing=lambda summary: [
                 f"PBT: {summary['pbt']['exploits']} exploits ({names.PBT}); each member's "
                 f"hyperparameters over time in {names.HPARAMS}; the settings above are the final "
                 "ones"] if "pbt" in summary else []),
)}


def _flag(name: str, cli: bool) -> str:
    return f"--{name}" if cli else f"{name}="


def _search(name: str, cli: bool) -> str:
    return f"--search {name}" if cli else f"search={name!r}"


def _worded(text: str, cli: bool) -> str:
    """A strategy's advice, written with the CLI's flags, in Python's words where asked."""
    if cli:
        return text
    text = re.sub(r"--search (\w+)", lambda m: f"search={m.group(1)!r}", text)
    return re.sub(r"--(\w+)(?: |=)?", r"\1=", text)


def draw(search: str, config: PPOConfig, options: dict, *, seeds: int | None = None,
         seed: int = 0, devices: Any = None, cli: bool = False
         ) -> tuple[list[dict], dict | None, Controller | None]:
    """A sweep's settings, its search record (None for a grid) and its controller (None
    where the settings just run), after checking the options against the strategy: every
    fault one line, before anything is written. `options` holds only what was given."""
    error = UsageError if cli else ConfigError
    strategy = STRATEGIES.get(search)
    if strategy is None:
        raise error(f"search: got {search!r}; use {', '.join(map(repr, STRATEGIES))}")
    for name in options:
        if name not in strategy.takes:
            owners = " or ".join(_search(s.name, cli) for s in STRATEGIES.values()
                                 if name in s.takes)
            raise error(f"{_flag(name, cli)} is not for {_search(search, cli)} (it is for "
                        f"{owners}); {_worded(strategy.usage, cli)}")
    for name in strategy.needs:
        if name == "space" and not cli:
            continue  # check_space says what a space needs, with an example
        if not options.get(name) and options.get(name) != 0:
            raise error(f"{_search(search, cli)} needs {_flag(name, cli)}{' ' if cli else ''}"
                        f"{OPTIONS[name].needs}")
    if strategy.one_seed_each and seeds not in (None, 1):
        raise error(f"{'--seeds' if cli else 'seeds:'} {seeds} with {_search(search, cli)}: "
                    f"{_worded(strategy.one_seed_each, cli)}")
    if strategy.one_device and devices is not None:
        raise error(f"{_search(search, cli)} runs on one device; drop "
                    f"{'--devices' if cli else 'devices=/mesh='}")
    check_size(strategy.name, config, options, seeds or 1, cli)
    settings, record = strategy.draw(config, options, seed, cli)
    controller = (None if strategy.controller is None else
                  strategy.controller(config, record, settings, seeds or 1))
    return settings, record, controller


def _count(value) -> int | None:
    """An option's count (trials, population) if it is a plain positive int, else None (the
    strategy's own check refuses it)."""
    ok = isinstance(value, int | np.integer) and not isinstance(value, bool) and value >= 1
    return int(value) if ok else None


def check_size(search: str, config: PPOConfig, options: dict, seeds: int, cli: bool) -> None:
    """Before any setting is drawn or checked: the sweep's agents counted from its options
    alone, refused in one line if there are more than one program holds (`MAX_RUNS`) or more
    than the device's memory holds (the estimate of the one program they share; a static key
    makes a program per value, each checked when drawn)."""
    error = UsageError if cli else ConfigError
    if search == "grid":
        grid = options.get("grid")
        grid = parse_grid(grid or []) if cli else grid
        if not isinstance(grid, dict) or not grid or not all(
                isinstance(v, Sequence) and not isinstance(v, str) for v in grid.values()):
            return  # the strategy's draw says what is wrong
        sizes = {k: len(v) for k, v in grid.items()}
        n = math.prod(sizes.values())
        per_program = math.prod(v for k, v in sizes.items() if not is_static(k))
        what = (f"{'--grid' if cli else 'grid'} ({' x '.join(map(str, sizes.values()))} = {n:,} "
                "settings)")
    else:
        name = "population" if search == "pbt" else "trials"
        n = _count(options.get(name))
        if n is None:
            return
        space = options.get("space") or {}
        keys = ([item.partition("=")[0].strip() for item in space] if cli
                else list(space) if isinstance(space, dict) else [])
        per_program = None if any(is_static(k) for k in keys) else n
        what = f"--{name} {n:,}" if cli else f"{name}={n}"
    if seeds > 1:
        what += f" x {'--seeds' if cli else 'seeds='} {seeds}"
    check_run_count(n * seeds, what, error)
    if per_program is None or host_source_of(config.env_id) is not None:
        return
    try:
        env = VecEnv.from_config(config, 1, evaluation=True)
    except ConfigError:  # an env instance (env=), or one the run itself will refuse
        return
    try:
        check_memory(config, per_program * seeds, env=env)
    except ConfigError as e:
        raise error(f"{what}: {e}") from None


def controller_for(config: PPOConfig, record: RunRecord, num_runs: int) -> Controller | None:
    """The controller that continues a checkpoint's sweep (None for one that needs none)."""
    strategy = STRATEGIES.get(record.strategy or "")
    if strategy is None or strategy.controller is None or record.settings is None:
        return None
    return strategy.controller(config, record.search, record.settings,
                               num_runs // len(record.settings))
