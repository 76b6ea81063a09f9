"""Aggregate reports over seeds, the way Agarwal et al. (2021, "Deep RL at the edge of the
statistical precipice"; the `rliable` library) ask for them: mean, median, interquartile mean
(IQM) and optimality gap, each with a stratified-bootstrap 95% interval over seeds, per run (or
sweep setting) and across them; sample-efficiency curves with interval bands; performance
profiles. `jaxppo report RUN_DIR...` and `jaxppo.report(...)` write `report.json` (every number)
and three PNGs.

    rep = jaxppo.report(["runs/a", "runs/b"], out="report")   # -> Report; rep.table()

This module puts the report together: it checks the arguments, reads the runs (`read`), puts
their scores on one scale (`normalize`), computes every statistic (`stats`) into report.json's
content, writes it with the plots, and formats the table the CLI prints.
"""

from __future__ import annotations

import errno
import json
import math
import numbers
import os
import time
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from jaxppo.errors import UsageError
from jaxppo.plots import plot_intervals, plot_profiles, plot_sample_efficiency
from jaxppo.reports.normalize import check_normalize, gap_threshold_for, score_scale
from jaxppo.reports.read import SOURCES, Group, read_run
from jaxppo.reports.stats import (
    CI,
    interval_estimates,
    iqm,
    percentile_interval,
    profile,
    stratified_resamples,
)
from jaxppo.rundir import names
from jaxppo.rundir.files import write_atomic
from jaxppo.rundir.summary import json_safe
from jaxppo.writes import WRITE_FIXES

CURVE_POINTS = 100  # points per sample-efficiency curve (each one is a bootstrap)
PROFILE_POINTS = 101  # thresholds tau of a performance profile
FILES = ("report.json", "aggregate.png", "curves.png", "profile.png")


class Report(NamedTuple):
    """What `report` computed: `data` is report.json's content; `out` where it was written.

    Attributes:
      data: report.json's content (JSON-able): `groups` (one row per run, or per setting of a
        sweep, each with its `stats`: mean, median, IQM and optimality gap, each a value with
        its 95% interval), `aggregate` (the same across runs; None for one group), `curves`,
        `profiles`, `normalize`, `reps`, `seed`, `sources`, `notes` and the `method`.
      out: the directory report.json and the three PNGs were written to.
    """

    data: dict
    out: str | None

    def __repr__(self) -> str:
        agg = self.data.get("aggregate")
        iqm = ((agg or {}).get("stats") or {}).get("iqm") or {}
        across = "" if iqm.get("value") is None else f", IQM across them {iqm['value']:.4g}"
        return f"Report({len(self.data['groups'])} group(s){across}, out={self.out!r})"

    def table(self) -> str:
        """The table `jaxppo report` prints: per run (or setting) and across them.

        Returns:
          The text: one line per run (or setting) and one across them, with seeds, source,
            mean, median, IQM and optimality gap (intervals in brackets), then the legend of
            the sources and the report's notes.
        """
        rows = [*self.data["groups"], *([self.data["aggregate"]] if self.data["aggregate"] else [])]
        gammas = {r["gap_threshold"] for r in rows if r["gap_threshold"] is not None}
        gap_head = "opt. gap" + (f" (γ={gammas.pop():g})" if len(gammas) == 1
                                 else " (γ per env)" if gammas else "")
        # rows trained for different numbers of updates (a halving sweep's rungs, static groups
        # of other budgets) say how far each went
        ragged = len({r.get("updates") for r in self.data["groups"]}) > 1
        head = ("run / agents: setting", *(("updates",) if ragged else ()), "seeds", "source", "mean",
                "median", "IQM [95% CI]", f"{gap_head} [95% CI]")
        lines = [head]
        for r in rows:
            apart = [f"{r[k]} {k}" for k in ("diverged", "missing") if r.get(k)]
            seeds = f"{r['seeds']}" + (f" ({', '.join(apart)})" if apart else "")
            s = r["stats"]
            went = (("" if r.get("updates") is None else str(r["updates"]),) if ragged else ())
            lines.append((r["label"], *went, seeds, r["source"], _num(s, "mean"),
                          _num(s, "median"), _num(s, "iqm", True, r["seeds"]),
                          _num(s, "optimality_gap", True, r["seeds"])))
        widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
        text = ["  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip()
                for line in lines]
        scale = self.data["normalize"]
        unit = ("min-max normalised returns" if isinstance(scale, dict)
                else "raw returns")
        text.insert(0, f"{unit}; {self.data['reps']} stratified bootstrap resamples (seed "
                       f"{self.data['seed']}), 95% percentile intervals")
        legend = [f"{k}: {v}" for k, v in self.data["sources"].items()]
        return "\n".join([*text, *legend, *(f"note: {n}" for n in self.data["notes"])])


def _num(stats: dict, name: str, with_ci: bool = False, seeds: int = 1) -> str:
    """One cell: "none" where the statistic was not computed (no finite seed, or no gap
    threshold), so a gap is never shown as 0. No interval where each stratum (run or
    setting) has one seed: resampling one seed says nothing."""
    s = stats.get(name)
    if s is None or s["value"] is None:
        return "none"
    text = _fmt(s["value"])
    if with_ci:
        why = "1 seed" if seeds <= 1 else "1 seed per run or setting"
        text += f" [{_fmt(s['ci'][0])}, {_fmt(s['ci'][1])}]" if s["ci"] else f" [no CI: {why}]"
    return text


def _runs(runs: list[int]) -> str:
    """0, 2, 5 (at most 8 named, so a line stays a line)."""
    return ", ".join(map(str, runs[:8])) + (f", ... ({len(runs)} in all)" if len(runs) > 8
                                            else "")


def _fmt(x: float) -> str:
    """Four significant digits: returns from -500 to 10^4 and normalised scores alike."""
    return f"{x:.4g}"


def report(run_dirs: Sequence[str | os.PathLike] | str | os.PathLike,
           out: str | os.PathLike | None = None, *, reps: int = 2000, seed: int = 0,
           normalize: dict[str, tuple[float, float]] | str | None = None,
           gap_threshold: float | None = None, source: str = "auto") -> Report:
    """Aggregate statistics over seeds, per run (per setting of a sweep) and across runs, with
    stratified-bootstrap 95% intervals; writes `report.json`, `aggregate.png`, `curves.png`
    and `profile.png` to `out` (default: `RUN_DIR/report` for one run, else
    `report__<time>` beside the first run). Bad input raises UsageError before anything is written.

    The statistics follow Agarwal et al. (2021, "Deep RL at the edge of the statistical
    precipice"; the `rliable` library): mean, median, interquartile mean (IQM) and optimality
    gap over seeds, plus sample-efficiency curves and performance profiles. For scores that
    differ by policy rather than by luck, evaluate each run first: `jaxppo eval RUN_DIR` writes
    the `eval.json` this reads (`evaluate(run_dir, out=f"{run_dir}/eval.json")` in Python).

        rep = jaxppo.report(["runs/a", "runs/b"], out="report")
        print(rep.table())

    Args:
      run_dirs: one run directory or several (a sweep's directory reports each setting).
      out: the directory to write to (default: `RUN_DIR/report` for one run, else
        `report__<time>` beside the first run).
      reps: bootstrap resamples per interval.
      seed: the bootstrap's seed (an integer >= 0).
      normalize: needed when the runs trained on different envs: {env_id: (low, high)} maps
        each env's `low` return to 0 and `high` to 1 (min-max), or "raw" aggregates raw
        returns; None: raw returns of one env.
      gap_threshold: the optimality gap's gamma; default the env's solve threshold (1.0 on a
        normalised scale), and no gap where neither is known.
      source: "auto" (eval.json where a run has one, else the final training return), "eval"
        (every run must have eval.json) or "final".

    Returns:
      The `Report`: report.json's content and where it was written.

    Raises:
      UsageError: no run directory, one given twice, a directory that is not a run (or lacks
        the scores `source` asks for), runs on several envs without `normalize`, a bad
        `reps`, `seed`, `gap_threshold` or `source`, or an `out` that is a file or cannot be
        written.
    """
    run_dirs = [os.fspath(run_dirs)] if isinstance(run_dirs, (str, os.PathLike)) else [
        os.fspath(d) for d in run_dirs]
    if not run_dirs:
        raise UsageError("no run directory given; pass one or more (runs/<name>)")
    if source not in ("auto", "eval", "final"):
        raise UsageError(f"source={source!r}: choose auto, eval or final")
    if not (isinstance(reps, numbers.Integral) and reps >= 1):
        raise UsageError(f"--reps {reps!r}: give a positive number of bootstrap resamples")
    if not (isinstance(seed, numbers.Integral) and seed >= 0):
        raise UsageError(f"--seed {seed!r}: the bootstrap seed is an integer >= 0")
    if gap_threshold is not None and not math.isfinite(gap_threshold):
        raise UsageError(f"--gap-threshold {gap_threshold!r}: give a finite number")
    reps, seed = int(reps), int(seed)
    seen = {}
    for d in run_dirs:
        key = os.path.realpath(d)
        if key in seen:
            also = "" if seen[key] == d else f" (as '{seen[key]}')"
            raise UsageError(f"'{d}' is given twice{also}; give each run once")
        seen[key] = d
    groups, notes = [], []
    for d in run_dirs:
        g, n = read_run(d, source)
        groups += g
        notes += n
    if len(run_dirs) > 1:
        groups = [g._replace(label=f"{os.path.normpath(g.run_dir)} [{g.label}]")
                  if g.setting is not None else g for g in groups]
    check_normalize([g.env_id for g in groups], normalize)
    out = os.fspath(out) if out is not None else (
        os.path.join(run_dirs[0], names.REPORT_DIR) if len(run_dirs) == 1 else os.path.join(
            os.path.dirname(os.path.normpath(run_dirs[0])), f"report__{time.strftime('%Y%m%d-%H%M%S')}"))
    if os.path.exists(out) and not os.path.isdir(out):
        raise UsageError(f"--out '{out}' is a file; pass a directory")
    data = compute(groups, reps=reps, seed=seed, normalize=normalize,
                   gap_threshold=gap_threshold, notes=notes)
    write(data, groups, out)
    return Report(data, out)


def compute(groups: list[Group], *, reps: int, seed: int, normalize, gap_threshold,
            notes: list[str]) -> dict:
    """report.json's content (JSON-able) from the groups; pure but for the seeded RNG."""
    rng = np.random.default_rng(seed)
    notes = list(notes)
    rows, finite = [], []
    for g in groups:
        offset, width = score_scale(g.env_id, normalize)
        scores = (g.scores - offset) / width
        ok = np.isfinite(scores)
        diverged = [r for r in g.runs if r in g.diverged]
        missing = [g.runs[i] for i in np.flatnonzero(~ok) if g.runs[i] not in g.diverged]
        gamma = gap_threshold_for({g.env_id}, normalize, gap_threshold)
        row = {"label": g.label, "run_dir": g.run_dir, "env_id": g.env_id, "setting": g.setting,
               "runs": g.runs, "source": g.source, "scores": scores.tolist(),
               "raw_scores": g.scores.tolist(), "seeds": int(ok.sum()),
               "missing": len(missing), "missing_runs": missing,
               "diverged": len(diverged), "diverged_runs": diverged, "gap_threshold": gamma,
               "updates": g.updates, "stats": {}}
        if missing:
            notes.append(f"{g.label}: {len(missing)} seed(s) with no finished episode (runs "
                         f"{_runs(missing)}) are missing from its statistics")
        if diverged:
            notes.append(f"{g.label}: {len(diverged)} seed(s) diverged (runs {_runs(diverged)}): "
                         "no policy, so no score; left out of its statistics")
        if ok.any():
            row["stats"] = interval_estimates([scores[ok]], gamma, reps, rng)
            finite.append(scores[ok])
        rows.append(row)
    no_gap = sorted({r["env_id"] for r in rows if r["gap_threshold"] is None})
    if no_gap:
        notes.append(f"no optimality gap for {', '.join(no_gap)}: no known solve threshold; "
                     "give one with --gap-threshold")
    sources = sorted({g.source for g in groups})
    if len(sources) > 1:
        notes.append(f"the scores come from different sources ({', '.join(sources)}): an "
                     "evaluation and a training return are not the same measurement")
    envs = {g.env_id for g in groups}
    agg_gamma = gap_threshold_for(envs, normalize, gap_threshold)
    agg = None
    budgets = sorted({g.updates for g in groups if g.updates is not None})
    if len(budgets) > 1:  # pooled, a longer-trained agent would stand for a shorter one
        notes.append(f"the rows trained for different numbers of updates ({_runs(budgets)}: "
                     "a halving sweep's rungs, or groups of other budgets): no 'all runs' row "
                     "pools them; compare rows of one budget (the updates column)")
    if len(groups) > 1 and finite and len(budgets) <= 1:
        agg = {"label": "all runs", "source": "+".join(sorted({g.source for g in groups})),
               "seeds": int(sum(len(f) for f in finite)),
               "missing": int(sum(r["missing"] for r in rows)),
               "diverged": int(sum(r["diverged"] for r in rows)), "gap_threshold": agg_gamma,
               "stats": interval_estimates(finite, agg_gamma, reps, rng)}
        if agg_gamma is None and not no_gap:
            notes.append("no optimality gap across runs: their envs' thresholds differ on raw "
                         "returns; give --gap-threshold, or --normalize")
        if len({len(f) for f in finite}) > 1:
            notes.append("the runs have different numbers of seeds: across runs, IQM and "
                         "optimality gap weigh each seed the same, mean and median each run")
    profiles = None
    if finite:
        pooled = np.concatenate(finite)
        taus = np.linspace(pooled.min(), pooled.max(), PROFILE_POINTS)
        profiles = {"tau": taus.tolist(),
                    "groups": {r["label"]: profile([f], taus, reps, rng)
                               for r, f in zip([r for r in rows if r["seeds"]], finite,
                                               strict=True)}}
        if agg is not None:
            profiles["all runs"] = profile(finite, taus, reps, rng)
    curves = [_curve(g, normalize, reps, rng) for g in groups if g.curve is not None]
    return json_safe({
        "normalize": ({k: list(v) for k, v in normalize.items()} if isinstance(normalize, dict)
                      else normalize),
        "reps": reps, "seed": seed, "ci": CI,
        "method": "stratified bootstrap over seeds (each run or setting a stratum), "
                  "percentile intervals; IQM cuts int(N/4) seeds from each end; across runs "
                  "(rliable's definitions) IQM and optimality gap pool the seeds, mean and "
                  "median are over the runs' means",
        "sources": {k: SOURCES[k] for k in sources},
        "groups": rows, "aggregate": agg, "curves": curves, "profiles": profiles,
        "notes": notes, "files": list(FILES),
    })


def _curve(g: Group, normalize, reps: int, rng: np.random.Generator) -> dict:
    """IQM over seeds of each seed's latest return vs env steps, with its bootstrap band, at
    up to CURVE_POINTS updates (where no seed has finished an episode yet: null)."""
    offset, width = score_scale(g.env_id, normalize)
    curve = (g.curve - offset) / width
    cols = np.unique(np.linspace(0, curve.shape[1] - 1, CURVE_POINTS).round().astype(int))
    value, low, high, seeds = [], [], [], []
    for j in cols:
        x = curve[:, j][np.isfinite(curve[:, j])]
        seeds.append(int(len(x)))
        if len(x) == 0:
            value.append(None)
            low.append(None)
            high.append(None)
            continue
        value.append(float(iqm(x)))
        lo, hi = percentile_interval(iqm(stratified_resamples([x], reps, rng)[0]))
        low.append(float(lo))
        high.append(float(hi))
    return {"label": g.label, "env_steps": g.curve_steps[cols].astype(int).tolist(),
            "iqm": value, "ci_low": low, "ci_high": high, "seeds": seeds}


def write(data: dict, groups: list[Group], out: str) -> None:
    """report.json and the PNGs into `out` (created). An unwritable place is one line."""
    try:
        os.makedirs(out, exist_ok=True)
        write_atomic(os.path.join(out, "report.json"),
                     json.dumps(data, indent=1, allow_nan=False))
        scale = "normalised score" if isinstance(data["normalize"], dict) else "return"
        rows = [r for r in [*data["groups"], data["aggregate"]] if r and r["stats"]]
        envs = sorted({r["env_id"] for r in data["groups"]})
        env = envs[0] if len(envs) == 1 else f"{len(envs)} envs ({', '.join(envs)})"
        source = "+".join(sorted({r["source"] for r in data["groups"]}))
        plot_intervals(os.path.join(out, "aggregate.png"), rows, scale,
                       f"{env}: per-seed scores from {source}, 95% CIs")
        one = all(r["seeds"] <= 1 for r in data["groups"])  # each line one seed's
        plot_sample_efficiency(os.path.join(out, "curves.png"), data["curves"], scale,
                               f"{env}: training return" + ("" if one else ", IQM over seeds"),
                               one_seed=one, empty=f"no {names.METRICS}: no curve")
        profiles, what = data["profiles"], "performance profile"
        if profiles and "all runs" in profiles and one:
            # one seed's profile is a step from 1 to 0; many of them draw over each other
            profiles, what = {**profiles, "groups": {}}, "performance profile (one seed per run)"
        plot_profiles(os.path.join(out, "profile.png"), profiles, scale, f"{env}: {what}")
    except OSError as e:
        fix = WRITE_FIXES.get(e.errno) if e.errno != errno.EACCES else None
        raise UsageError(f"cannot write the report to '{out}' ({e.strerror or e}); "
                         f"{fix + ', or pass another --out' if fix else 'pass a writable --out'}"
                         "; files written before are whole (each is written or left as it "
                         "was)") from None


__all__ = ["CURVE_POINTS", "FILES", "PROFILE_POINTS", "Report", "compute", "report", "write"]
