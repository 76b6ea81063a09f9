"""Aggregate reports over seeds, the way Agarwal et al. (2021, "Deep RL at the edge of the
statistical precipice"; the `rliable` library) ask for them: mean, median, interquartile mean
(IQM) and optimality gap, each with a stratified-bootstrap 95% interval over seeds, per run (or
sweep setting) and across them; sample-efficiency curves with interval bands; performance
profiles. `jaxppo report RUN_DIR...` and `jaxppo.reports.report(...)` write `report.json` (every number)
and three PNGs.

    rep = jaxppo.reports.report(["runs/a", "runs/b"], out="report")   # -> Report; rep.table()

The statistics are pure NumPy functions of a score array whose last axis is seeds, so one call
evaluates every bootstrap resample at once. They match rliable's definitions (rliable itself is
not a dependency: its `arch` needs a pandas older than the pinned one); tests/test_report.py
checks them against hand-computed values.

A run's score per seed is its mean return over `eval.json`'s completed episodes when `jaxppo
eval` was run, else its final return from training (`summary.json`, or `metrics.csv`'s latest
return when a kill left no summary); the report says which. A seed with no finished episode has
no score: it is counted as missing, never as 0.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import yaml

from jaxppo.errors import UsageError
from jaxppo.labels import setting_label
from jaxppo.plots import plot_intervals, plot_profiles, plot_sample_efficiency
from jaxppo.run.files import write_atomic
from jaxppo.run.logs.metrics_csv import forward_fill, read_metrics_csv
from jaxppo.run.stats import solve_threshold
from jaxppo.run.summary import json_safe

CI = 0.95
CURVE_POINTS = 100  # points per sample-efficiency curve (each one is a bootstrap)
PROFILE_POINTS = 101  # thresholds tau of a performance profile
STAT_NAMES = ("mean", "median", "iqm", "optimality_gap")
FILES = ("report.json", "aggregate.png", "curves.png", "profile.png")
SOURCES = {"eval.json": "each seed's mean return over its `jaxppo eval` episodes (cut-off ones left out)",
           "summary.json": "each seed's final training return (its latest episodes; no "
                           "eval.json)",
           "metrics.csv": "each seed's latest training return in metrics.csv (no eval.json or "
                          "summary.json)"}


# ---------------------------------------------------------------------------------------------
# statistics over the last axis (seeds): [..., N] -> [...]
def iqm(scores: np.ndarray) -> np.ndarray:
    """Interquartile mean: the mean of the scores left after cutting int(N / 4) from each end,
    as `scipy.stats.trim_mean(x, 0.25)` and rliable's `aggregate_iqm` do (no fractional
    weighting: N = 10 keeps the middle 6). For N < 4 nothing is cut: the plain mean."""
    x = np.sort(np.asarray(scores, float), axis=-1)
    n = x.shape[-1]
    cut = int(0.25 * n)
    return x[..., cut:n - cut].mean(axis=-1)


def optimality_gap(scores: np.ndarray, gamma: float) -> np.ndarray:
    """How far the scores fall short of `gamma` on average, scores above it counting as
    `gamma`: mean(max(0, gamma - x)), rliable's `aggregate_optimality_gap`."""
    return np.maximum(0.0, gamma - np.asarray(scores, float)).mean(axis=-1)


def aggregate(parts: Sequence[np.ndarray], gamma: float | None) -> dict[str, np.ndarray]:
    """The four statistics of scores split into parts (runs or settings, each [..., N_g]), as
    rliable defines them over tasks: IQM and optimality gap pool every seed; mean and median
    are over the parts' means (each part weighs the same). Of one part, the median is its
    seeds' median (rliable's median of one task's mean would only repeat the mean)."""
    parts = [np.asarray(p, float) for p in parts]
    pooled = np.concatenate(parts, axis=-1)
    means = np.stack([p.mean(axis=-1) for p in parts], axis=-1)
    out = {"mean": means.mean(axis=-1),
           "median": np.median(parts[0] if len(parts) == 1 else means, axis=-1),
           "iqm": iqm(pooled)}
    if gamma is not None:
        out["optimality_gap"] = optimality_gap(pooled, gamma)
    return out


def stratified_resamples(groups: Sequence[np.ndarray], reps: int,
                         rng: np.random.Generator) -> list[np.ndarray]:
    """[reps, N_g] per group: each group's N_g seeds drawn with replacement, independently per
    group (the strata): rliable's StratifiedBootstrap over runs, per task."""
    return [np.asarray(g, float)[rng.integers(0, len(g), (reps, len(g)))] for g in groups]


def percentile_interval(samples: np.ndarray, ci: float = CI) -> np.ndarray:
    """[2, ...]: the percentile interval of bootstrap `samples` [reps, ...] (arch's
    'percentile' method, which rliable uses: numpy's linear-interpolated percentiles)."""
    tail = round(100 * (1 - ci) / 2, 9)  # 2.5, not 2.5000000000000022
    return np.percentile(samples, [tail, 100 - tail], axis=0)


def interval_estimates(groups: Sequence[np.ndarray], gamma: float | None, reps: int,
                       rng: np.random.Generator) -> dict[str, dict]:
    """Every statistic of the joined `groups` (each a 1-D array of finite scores) with its
    stratified-bootstrap interval: {name: {"value", "ci": [low, high] or None}}. A single seed
    per group has no interval (every resample is the same: a zero width that says nothing)."""
    point = aggregate(groups, gamma)
    boot = aggregate(stratified_resamples(groups, reps, rng), gamma)
    spread = max(len(g) for g in groups) > 1
    return {k: {"value": float(v),
                "ci": percentile_interval(boot[k]).tolist() if spread else None}
            for k, v in point.items()}


def profile(groups: Sequence[np.ndarray], taus: np.ndarray, reps: int,
            rng: np.random.Generator) -> dict[str, list]:
    """A performance profile: the fraction of seeds scoring above each tau ([T]), with its
    stratified-bootstrap band (rliable's `run_score_distribution`)."""
    point = _fraction_above(np.concatenate(groups)[None], taus)[0]
    boot = _fraction_above(np.concatenate(stratified_resamples(groups, reps, rng), axis=1), taus)
    low, high = percentile_interval(boot)
    return {"fraction": point.tolist(), "ci_low": low.tolist(), "ci_high": high.tolist()}


def _fraction_above(x: np.ndarray, taus: np.ndarray) -> np.ndarray:
    """[B, T]: per row of x [B, N], the fraction of its N scores above each tau (one tau at a
    time: [B, N, T] at once would be reps x seeds x taus booleans)."""
    return np.stack([(x > t).mean(axis=-1) for t in taus], axis=-1)


# ---------------------------------------------------------------------------------------------
# reading run directories
class Group(NamedTuple):
    """One row of the report: a run's seeds, or one sweep setting's seeds."""

    label: str
    run_dir: str
    env_id: str
    setting: dict | None
    runs: list[int]  # indices into the run's seeds axis
    scores: np.ndarray  # [S] raw scores, NaN where a seed has none
    source: str  # "eval.json", "summary.json" or "metrics.csv"
    curve_steps: np.ndarray | None  # [U] env steps per update, None without metrics.csv
    curve: np.ndarray | None  # [S, U] latest return per seed, NaN before its first episode


def _load_json(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise UsageError(f"cannot read '{path}' ({getattr(e, 'strerror', None) or e}); restore "
                         f"it or move it away") from None


def _as_scores(values, what: str) -> np.ndarray:
    """A JSON list of numbers/nulls as floats, null (or NaN/Inf) as NaN."""
    if not isinstance(values, list) or not all(
            v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in values):
        raise UsageError(f"{what} is not a list of numbers; it was not written by this jaxppo: "
                         "re-run the command that writes it")
    x = np.array([np.nan if v is None else v for v in values], float)
    x[~np.isfinite(x)] = np.nan
    return x


def eval_scores(path: str) -> tuple[np.ndarray, dict]:
    """Per-seed mean return over an eval.json's completed episodes ([R], NaN where none
    completed) and what else it says (episodes, cut-off counts, update). Reads both the format
    with `cut_off` (episodes still running at the step cap, left out) and the one without."""
    data = _load_json(path)
    what = f"'{path}'"
    if not isinstance(data, dict):
        raise UsageError(f"{what} is not an eval.json; re-run jaxppo eval")
    returns = data.get("returns")
    if isinstance(returns, list) and returns and all(isinstance(r, list) for r in returns):
        cut = data.get("cut_off")
        rows = []
        for i, r in enumerate(returns):
            x = _as_scores(r, f"{what} returns[{i}]")
            if isinstance(cut, list) and i < len(cut) and isinstance(cut[i], list) \
                    and len(cut[i]) == len(x):
                x[np.asarray(cut[i], bool)] = np.nan
            rows.append(np.nanmean(x) if np.isfinite(x).any() else np.nan)
        scores = np.array(rows, float)
    elif "mean_per_run" in data:
        scores = _as_scores(data["mean_per_run"], f"{what} mean_per_run")
    else:
        raise UsageError(f"{what} holds no per-seed returns; re-run jaxppo eval")
    cut_total = None
    if isinstance(data.get("cut_off_per_run"), list):
        cut_total = int(sum(c for c in data["cut_off_per_run"] if isinstance(c, (int, float))))
    return scores, {"episodes": data.get("episodes"), "update": data.get("update"),
                    "env_id": data.get("env_id"), "cut_off": cut_total}


def read_run(run_dir: str, source: str = "auto") -> tuple[list[Group], list[str]]:
    """A run directory's groups (one, or one per sweep setting) and notes on what was used."""
    if not os.path.isdir(run_dir):
        raise UsageError(f"'{run_dir}' is not a directory; pass run directories (runs/<name>)")
    notes: list[str] = []
    summary_path = os.path.join(run_dir, "summary.json")
    summary = _load_json(summary_path) if os.path.exists(summary_path) else None
    if summary is not None and not isinstance(summary, dict):
        raise UsageError(f"'{summary_path}' is not a run summary; move it away or resume the "
                         "run to rebuild it")
    env_id = _env_id(run_dir, summary)
    metrics_path = os.path.join(run_dir, "metrics.csv")
    metrics = _read_metrics(run_dir) if os.path.exists(metrics_path) else {}
    if not os.path.exists(metrics_path):
        notes.append(f"{run_dir}: no metrics.csv, so no sample-efficiency curve")
    curve = (forward_fill(metrics["episodic_return"], metrics["episodes"]) if metrics
             else None)
    steps = metrics["env_steps"][0] if metrics else None
    eval_path = os.path.join(run_dir, "eval.json")
    if source == "eval" and not os.path.exists(eval_path):
        raise UsageError(f"'{run_dir}' has no eval.json; run jaxppo eval {run_dir} first, or "
                         "drop --source eval to use the final training returns")
    if source != "final" and os.path.exists(eval_path):
        scores, info = eval_scores(eval_path)
        used = "eval.json"
        if info["env_id"] not in (None, env_id):
            raise UsageError(f"'{eval_path}' evaluated {info['env_id']}, but the run trained on "
                             f"{env_id}; re-run jaxppo eval {run_dir}")
        last = int(metrics["update"][0, -1]) if metrics else None
        if last is not None and isinstance(info["update"], int) and info["update"] < last:
            notes.append(f"{run_dir}: eval.json was played at update {info['update']}; the run "
                         f"has since reached update {last} (re-run jaxppo eval for the latest "
                         "policy)")
        if info["cut_off"]:
            notes.append(f"{run_dir}: {info['cut_off']} eval episode(s) were cut off at the step "
                         "cap and left out of the scores")
    elif summary is not None and "final_return" in summary:
        scores = _as_scores(summary["final_return"], f"'{summary_path}' final_return")
        used = "summary.json"
    elif curve is not None:
        scores = curve[:, -1]
        used = "metrics.csv"
        notes.append(f"{run_dir}: no summary.json (the run was killed before writing it): "
                     "scores are each seed's latest return in metrics.csv")
    else:
        raise UsageError(f"'{run_dir}' holds no eval.json, summary.json or metrics.csv; is it "
                         "a jaxppo run directory?")
    counts = {"metrics.csv": None if curve is None else curve.shape[0],
              "summary.json": summary.get("num_runs") if summary else None}
    for name, n in counts.items():
        if isinstance(n, int) and n != len(scores):
            fix = f"re-run jaxppo eval {run_dir}" if used == "eval.json" else \
                "move the file that does not belong to this run away"
            raise UsageError(f"'{run_dir}': {used} holds {len(scores)} seed(s) but {name} "
                             f"{n}; {fix}")
    diverged = summary.get("diverged_runs") if summary else None
    if diverged:
        notes.append(f"{run_dir}: run(s) {', '.join(map(str, diverged))} diverged (summary.json's "
                     "diverged_runs); their scores are included as logged")
    settings = summary.get("settings") if summary else None
    if settings is None and os.path.exists(os.path.join(run_dir, "sweep.csv")):
        raise UsageError(f"'{run_dir}' is a sweep without its summary.json, which names each "
                         f"agent's setting; rebuild it with: jaxppo sweep --resume {run_dir}")
    if settings is None:
        return [Group(os.path.normpath(run_dir), run_dir, env_id, None, list(range(len(scores))),
                      scores, used, steps, curve)], notes
    if not isinstance(settings, list) or not settings or len(scores) % len(settings):
        raise UsageError(f"'{summary_path}': its {len(scores)} seed(s) do not split into its "
                         f"settings; move it away and rebuild it with jaxppo sweep --resume "
                         f"{run_dir}")
    seeds = len(scores) // len(settings)
    groups = []
    for g, s in enumerate(settings):
        runs = list(range(g * seeds, (g + 1) * seeds))
        groups.append(Group(setting_label(s), run_dir, env_id, dict(s), runs, scores[runs], used,
                            steps, None if curve is None else curve[runs]))
    return groups, notes


def _read_metrics(run_dir: str) -> dict[str, np.ndarray]:
    """metrics.csv through the logger's reader; a damaged or unreadable file is one line."""
    path = os.path.join(run_dir, "metrics.csv")
    fix = ("move it away (e.g. to metrics.csv.damaged) to report this run without its "
           "sample-efficiency curve")
    try:
        return read_metrics_csv(run_dir)
    except UsageError as e:
        raise UsageError(f"{e}; {fix}") from None
    except OSError as e:
        raise UsageError(f"cannot read '{path}' ({e.strerror}); {fix}") from None


def _env_id(run_dir: str, summary: dict | None) -> str:
    config_path = os.path.join(run_dir, "config.yaml")
    env_id = None
    if os.path.exists(config_path):
        try:
            with open(config_path, encoding="utf-8") as f:
                env_id = (yaml.safe_load(f) or {}).get("env_id")
        except (OSError, UnicodeDecodeError, yaml.YAMLError, AttributeError):
            env_id = None
    if env_id is None and summary is not None:
        env_id = summary.get("env_id")
    if not isinstance(env_id, str):
        raise UsageError(f"'{run_dir}' has no readable config.yaml or summary.json naming its "
                         "env; is it a jaxppo run directory?")
    return env_id


# ---------------------------------------------------------------------------------------------
def parse_normalize(items: Sequence[str]) -> dict[str, tuple[float, float]] | str | None:
    """`--normalize` values: `ENV=LOW,HIGH` (repeatable) or the one word `raw`."""
    if not items:
        return None
    if list(items) == ["raw"]:
        return "raw"
    refs = {}
    for item in items:
        env, sep, rest = item.rpartition("=")
        try:
            low, high = (float(v) for v in rest.split(","))
        except ValueError:
            low = high = math.nan
        if not sep or not env or not (math.isfinite(low) and math.isfinite(high)) or low == high:
            raise UsageError(f"--normalize {item!r}: give ENV=LOW,HIGH (two different numbers: "
                             "the reference returns that become 0 and 1, e.g. "
                             "CartPole-v1=22,500), or the one word raw")
        refs[env] = (low, high)
    return refs


def _check_normalize(env_ids: list[str], normalize) -> None:
    envs = sorted(set(env_ids))
    if normalize is None and len(envs) > 1:
        raise UsageError(f"these runs trained on {len(envs)} envs ({', '.join(envs)}), whose "
                         "returns are on different scales: give each env's reference returns "
                         "with --normalize ENV=LOW,HIGH (Python: normalize={env: (low, high)}), "
                         "or --normalize raw to aggregate the raw returns anyway")
    if isinstance(normalize, dict):
        for env, ref in normalize.items():
            ok = (isinstance(ref, (tuple, list)) and len(ref) == 2
                  and all(isinstance(v, numbers.Real) and math.isfinite(v) for v in ref))
            if not ok or ref[0] == ref[1]:
                raise UsageError(f"normalize[{env!r}] = {ref!r}: give (low, high), two different "
                                 "finite returns that become 0 and 1")
        missing = [e for e in envs if e not in normalize]
        unused = [e for e in normalize if e not in envs]
        if missing or unused:
            what = (f"has no reference for {', '.join(missing)}" if missing
                    else f"names {', '.join(unused)}, which no run trained on")
            raise UsageError(f"--normalize {what} (the runs' envs: {', '.join(envs)}); give "
                             "ENV=LOW,HIGH once for each of them")
    elif normalize not in (None, "raw"):
        raise UsageError(f"normalize={normalize!r}: give {{env_id: (low, high)}}, 'raw' or None")


class Report(NamedTuple):
    """What `report` computed: `data` is report.json's content; `out` where it was written."""

    data: dict
    out: str | None

    def table(self) -> str:
        """The table `jaxppo report` prints: per run (or setting) and across them."""
        rows = [*self.data["groups"], *([self.data["aggregate"]] if self.data["aggregate"] else [])]
        gammas = {r["gap_threshold"] for r in rows if r["gap_threshold"] is not None}
        gap_head = "opt. gap" + (f" (γ={gammas.pop():g})" if len(gammas) == 1
                                 else " (γ per env)" if gammas else "")
        head = ("run / setting", "seeds", "source", "mean", "median", "IQM [95% CI]",
                f"{gap_head} [95% CI]")
        lines = [head]
        for r in rows:
            seeds = f"{r['seeds']}" + (f" ({r['missing']} missing)" if r["missing"] else "")
            s = r["stats"]
            lines.append((r["label"], seeds, r["source"], _num(s, "mean"), _num(s, "median"),
                          _num(s, "iqm", True), _num(s, "optimality_gap", True)))
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


def _num(stats: dict, name: str, with_ci: bool = False) -> str:
    s = stats.get(name)
    if s is None or s["value"] is None:
        return "none"
    text = _fmt(s["value"])
    if with_ci:
        text += f" [{_fmt(s['ci'][0])}, {_fmt(s['ci'][1])}]" if s["ci"] else " [no CI: 1 seed]"
    return text


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def report(run_dirs: Sequence[str | os.PathLike] | str | os.PathLike,
           out: str | os.PathLike | None = None, *, reps: int = 2000, seed: int = 0,
           normalize: dict[str, tuple[float, float]] | str | None = None,
           gap_threshold: float | None = None, source: str = "auto") -> Report:
    """Aggregate statistics over seeds, per run (per setting of a sweep) and across runs, with
    stratified-bootstrap 95% intervals; writes `report.json`, `aggregate.png`, `curves.png`
    and `profile.png` to `out` (default: RUN_DIR/report for one run, else report__<time>
    beside the first run). Bad input raises UsageError before anything is written.

    normalize: needed when the runs trained on different envs: {env_id: (low, high)} maps each
        env's `low` return to 0 and `high` to 1 (min-max), or "raw" aggregates raw returns.
    gap_threshold: the optimality gap's gamma; default the env's solve threshold (1.0 on a
        normalised scale), and no gap where neither is known.
    source: "auto" (eval.json where a run has one, else the final training return), "eval"
        (every run must have eval.json) or "final"."""
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
    _check_normalize([g.env_id for g in groups], normalize)
    out = os.fspath(out) if out is not None else (
        os.path.join(run_dirs[0], "report") if len(run_dirs) == 1 else os.path.join(
            os.path.dirname(os.path.normpath(run_dirs[0])), f"report__{time.strftime('%Y%m%d-%H%M%S')}"))
    if os.path.exists(out) and not os.path.isdir(out):
        raise UsageError(f"--out '{out}' is a file; pass a directory")
    data = compute(groups, reps=reps, seed=seed, normalize=normalize,
                   gap_threshold=gap_threshold, notes=notes)
    write(data, groups, out)
    return Report(data, out)


def _scale(g: Group, normalize) -> tuple[float, float]:
    """(offset, width) that map the group's raw returns to its scores."""
    if isinstance(normalize, dict):
        low, high = normalize[g.env_id]
        return low, high - low
    return 0.0, 1.0


def _gamma(envs: set[str], normalize, gap_threshold: float | None) -> float | None:
    if gap_threshold is not None:
        return float(gap_threshold)
    if isinstance(normalize, dict):
        return 1.0
    if len(envs) == 1:
        return solve_threshold(next(iter(envs)))
    return None


def compute(groups: list[Group], *, reps: int, seed: int, normalize, gap_threshold,
            notes: list[str]) -> dict:
    """report.json's content (JSON-able) from the groups; pure but for the seeded RNG."""
    rng = np.random.default_rng(seed)
    notes = list(notes)
    rows, finite = [], []
    for g in groups:
        offset, width = _scale(g, normalize)
        scores = (g.scores - offset) / width
        ok = np.isfinite(scores)
        missing = [g.runs[i] for i in np.flatnonzero(~ok)]
        gamma = _gamma({g.env_id}, normalize, gap_threshold)
        row = {"label": g.label, "run_dir": g.run_dir, "env_id": g.env_id, "setting": g.setting,
               "runs": g.runs, "source": g.source, "scores": scores.tolist(),
               "raw_scores": g.scores.tolist(), "seeds": int(ok.sum()),
               "missing": len(missing), "missing_runs": missing, "gap_threshold": gamma,
               "stats": {}}
        if missing:
            notes.append(f"{g.label}: {len(missing)} seed(s) with no finished episode (runs "
                         f"{', '.join(map(str, missing))}) are missing from its statistics")
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
    agg_gamma = _gamma(envs, normalize, gap_threshold)
    agg = None
    if len(groups) > 1 and finite:
        agg = {"label": "all runs", "source": "+".join(sorted({g.source for g in groups})),
               "seeds": int(sum(len(f) for f in finite)),
               "missing": int(sum(r["missing"] for r in rows)), "gap_threshold": agg_gamma,
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
    offset, width = _scale(g, normalize)
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
        plot_intervals(os.path.join(out, "aggregate.png"), rows, scale)
        plot_sample_efficiency(os.path.join(out, "curves.png"), data["curves"], scale)
        plot_profiles(os.path.join(out, "profile.png"), data["profiles"], scale)
    except OSError as e:
        raise UsageError(f"cannot write the report to '{out}' ({e.strerror or e}); pass a "
                         "writable --out") from None


__all__ = ["Report", "report", "iqm", "optimality_gap", "interval_estimates",
           "stratified_resamples", "percentile_interval", "profile"]
