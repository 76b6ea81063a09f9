"""What `jaxppo.sweep` returns (`SweepResult`, the ranked table with the text the CLI prints)
and a grid's settings (`--grid KEY=V1,V2,...`). The ranking and the files a finished sweep
writes are the run's own (`run/sweep_table.py`)."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence

from jaxppo.errors import UsageError
from jaxppo.labels import agents_text
from jaxppo.run.events import RunResult
from jaxppo.search.static import check_key, parse_values


@dataclasses.dataclass
class SweepResult:
    """`jaxppo.sweep`'s ranked table: one row per setting, best first (ties keep grid order);
    in a halving sweep, settings that trained further first.

    What `sweep` and `resume_sweep` return. Settings are ranked by their final return's mean
    over seeds (settings without a return last).

        table = jaxppo.sweep(config, {"lr": [1e-4, 3e-4, 1e-3]}, seeds=2)
        print(table.table())
        policy = jaxppo.load_policy(table.run_dir, seed=table.best["runs"][0])

    Attributes:
      rows: one dict per setting, best first: `rank`, `setting` (its hyperparameters),
        `label`, `updates` (how far it trained), `final_return_mean`, `final_return_std`
        (None where no seed has a return), `seeds`, `diverged_seeds`,
        `seeds_without_return`, `runs` (indices into the run's seeds axis, for
        `load_policy(run_dir, seed=...)`); with static keys also `group` (the run
        directory's name) and `run_dir` (its path) of the runs.
      result: the sweep's `RunResult`; with static keys: the last group run in this session.
      run_dir: the sweep's directory (None: a sweep without files).
      groups: with static keys: each group's outcome (`jaxppo.search.static_sweep`); else
        None.
      summary: with static keys: what the sweep's summary.json holds; else None.
    """

    rows: list[dict]
    result: RunResult | None
    run_dir: str | None
    groups: list | None = None
    summary: dict | None = None

    @property
    def best(self) -> dict:
        """The first row: the best setting (its `runs` index the checkpoint's runs)."""
        return self.rows[0]

    def table(self) -> str:
        """The table the CLI prints.

        Returns:
          One line per setting: rank, its agents (the indices `jaxppo eval RUN --agent M` and
            `load_policy(RUN, seed=M)` take; in a static sweep, within the row's group's run
            directory), its setting (a PBT member's final one), how far it trained (where
            settings differ), and the final return's mean ± std over seeds, flagged where
            seeds diverged or no episode ended.
        """
        width = max(len(r["label"]) for r in self.rows)
        ragged = len({r.get("updates") for r in self.rows}) > 1  # halving: how far each went
        agents = [_agents(r["runs"]) for r in self.rows]
        aw = max(len("agent"), *map(len, agents))
        lines = [f"{'rank':>4}  {'agent':<{aw}}  {'setting':<{width}}  "
                 f"{'updates  ' if ragged else ''}final return"]
        for r, who in zip(self.rows, agents, strict=True):
            flag = (f"  (diverged: {r['diverged_seeds']}/{r['seeds']} seeds)"
                    if r["diverged_seeds"] else "")
            if r["seeds_without_return"]:
                flag += f"  (no episode ended: {r['seeds_without_return']}/{r['seeds']} seeds)"
            scored = r["seeds"] - r["seeds_without_return"] - r["diverged_seeds"]
            ret = ("    none" if r["final_return_mean"] is None else  # no spread of one seed
                   f"{r['final_return_mean']:8.2f}" + (f" ± {r['final_return_std']:.2f}"
                                                       if scored > 1 else ""))
            went = f"{r.get('updates')!s:>7}  " if ragged else ""
            lines.append(f"{r['rank']:>4}  {who:<{aw}}  {r['label']:<{width}}  {went}{ret}{flag}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        best = self.rows[0] if self.rows else None
        top = ("" if best is None else f", best {agents_text(best['runs'])}: {best['label']} "
               f"({_ret(best['final_return_mean'])})")
        return f"SweepResult({len(self.rows)} settings{top}, run_dir={self.run_dir!r})"


def _agents(runs) -> str:
    """A row's agents as the table's cell: `3`, `4-7`."""
    return agents_text(runs).split(" ", 1)[1]


def _ret(x) -> str:
    return "no return" if x is None else f"final return {x:.2f}"


def parse_grid(items: list[str]) -> dict[str, list]:
    """`KEY=V1,V2,...` items (the CLI's `--grid`) as a grid: numbers for the float
    hyperparameters, YAML values (as `--set` reads them) for static keys, which compile once
    per static setting."""
    grid, given = {}, {}
    for item in items or []:
        key, sep, values = item.partition("=")
        key = key.strip()
        if not sep or not key or not values:
            raise UsageError(f"--grid expects KEY=V1,V2,..., got {item!r} (e.g. --grid lr=1e-4,3e-4)")
        check_key(key, f"--grid {key}")
        if key in grid:  # argparse would keep only the last: one --grid per key
            raise UsageError(f"--grid {key} is given twice; give all its values in one: "
                             f"--grid {key}={given[key]},{values}")
        given[key] = values
        grid[key] = parse_values(key, values, f"--grid {key}")
    if not grid:
        raise UsageError("sweep needs at least one --grid KEY=V1,V2,...")
    return grid


def grid_settings(grid: dict[str, Sequence]) -> list[dict]:
    """Every combination of a grid `{key: [values]}`, in grid order."""
    return [dict(zip(grid, values, strict=True)) for values in itertools.product(*grid.values())]
