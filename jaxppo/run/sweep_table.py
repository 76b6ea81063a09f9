"""A sweep's ranked table, the result files of a run with several settings: the settings
ranked by final return over their seeds, `sweep.csv`, `sweep.png` and `ranked` in
summary.json. Every search (grid, random, halving, PBT) ends in this one table; a static sweep
ranks its groups' settings with the same `rank_settings`."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from jaxppo.labels import setting_label
from jaxppo.run.events import Callback, RunInfo, RunResult
from jaxppo.run.solve import quiet_nonfinite
from jaxppo.run.stats import mean_std_or_none
from jaxppo.rundir.sweep_csv import sweep_title, write_sweep_files


@quiet_nonfinite
def rank_settings(settings: list[dict], final_return: np.ndarray, diverged: np.ndarray,
                  seeds: int, updates: Sequence[int] | None = None) -> list[dict]:
    """Settings best first by their mean final return over the seeds that have a finite one
    (NaN: no episode ended; NaN/Inf of a diverged seed, flagged apart); a setting none of whose
    seeds has one ranks last, its mean None. With `updates` [N] (how far each trained: a
    halving sweep's), the settings that went further rank first."""
    went = [0] * len(settings) if updates is None else [int(u) for u in updates]
    final = np.asarray(final_return, float).reshape(len(settings), seeds)
    bad = np.asarray(diverged, bool).reshape(len(settings), seeds)
    stats = [mean_std_or_none(row) for row in final]
    order = sorted(range(len(settings)),  # stable on ties; no return at all ranks last
                   key=lambda g: (-went[g], stats[g][0] is None, -(stats[g][0] or 0.0), g))
    return [{"rank": rank, "setting": settings[g], "label": setting_label(settings[g]),
             "updates": went[g] if updates is not None else None,
             "final_return_mean": stats[g][0], "final_return_std": stats[g][1],
             "seeds": seeds, "diverged_seeds": int(bad[g].sum()),
             # NaN with no divergence: no episode ended (a diverged seed is counted above)
             "seeds_without_return": int((~np.isfinite(final[g]) & ~bad[g]).sum()),
             "runs": list(range(g * seeds, (g + 1) * seeds))}
            for rank, g in enumerate(order, 1)]


def sweep_rows(result: RunResult) -> list[dict]:
    """The ranked rows of a sweep's result (a run with `hparams`); where its runs trained
    different numbers of updates (a halving sweep's), the settings that went further first."""
    s = result.summary
    diverged = np.isin(np.arange(result.num_runs), s["diverged_runs"])
    n = len(s["settings"])
    updates = ([result.update] * n if result.run_updates is None
               else np.asarray(result.run_updates).reshape(n, -1).max(axis=1).tolist())
    return rank_settings(s["settings"], result.final_return, diverged, s["seeds"], updates)


class SweepTable(Callback):
    """A sweep's run directory, once it finishes: `sweep.csv` (the ranked settings and each
    one's agents), `sweep.png`, and the ranking in `summary.json` (`ranked`, written by the
    `SummaryFile` after it). Added by `Experiment` to every run with `hparams`, so a resumed
    sweep writes them too."""

    def on_start(self, info: RunInfo) -> None:
        self.info = info

    def on_end(self, result: RunResult) -> None:
        # a sweep whose every agent diverged ran to its end too: its table says so
        if (result.status not in ("finished", "diverged")
                or result.update < result.config.num_updates):
            return
        rows = result.summary["ranked"] = sweep_rows(result)
        write_sweep_files(self.info.run_dir, rows, sorted(rows, key=lambda r: r["runs"][0]),
                          sweep_title(result.config.env_id, rows[0]["seeds"]))
