"""Plots written into run directories and reports (matplotlib, headless Agg backend)."""

from __future__ import annotations

import functools
import importlib
import io
import textwrap
import warnings
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from jaxppo.writes import write_atomic

if TYPE_CHECKING:
    from matplotlib.figure import Figure


@functools.cache
def pyplot() -> ModuleType:
    """matplotlib's pyplot under the headless Agg backend, imported when the first figure is
    drawn: importing it costs ~0.3 s of every jaxppo process's start-up (more on a busy
    machine), and most commands draw nothing."""
    importlib.import_module("matplotlib").use("Agg")
    return importlib.import_module("matplotlib.pyplot")


def save_figure(fig, path: str, **kw) -> None:
    """Render `fig` (in the format its name ends with) and write it whole (`write_atomic`): a
    full disk leaves the earlier figure, never half of one."""
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format=path.rsplit(".", 1)[-1].lower() if "." in path else "png", **kw)
    finally:
        pyplot().close(fig)
    write_atomic(path, buf.getvalue())


LINESTYLES = ("-", "--", ":", "-.")


def series_styles(n: int) -> list[dict]:
    """`n` line styles a reader can tell apart: tab10's colours up to 10 series, tab20's up
    to 20, then tab20's again with dashed, dotted and dash-dotted lines (80 in all; past that
    the styles repeat)."""
    if n <= 10:
        return [{"color": f"C{i}", "ls": "-"} for i in range(n)]
    colors = pyplot().get_cmap("tab20").colors
    return [{"color": colors[i % 20], "ls": LINESTYLES[(i // 20) % len(LINESTYLES)]}
            for i in range(n)]


def legend_outside(ax, n: int) -> None:
    """The legend right of the axes, where it covers no line (25 entries per column)."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7 if n > 10 else 8,
              ncol=max(1, -(-n // 25)), frameon=False)


def fit_title(title: str, width_in: float, fontsize: float = 12.0) -> str:
    """`title` wrapped to lines that fit a figure `width_in` inches wide (a report's title
    names every env and source: one line of it ran past the figure's edges, cut off)."""
    chars = max(20, int(width_in * 72 / (0.6 * fontsize)))
    return "\n".join(textwrap.fill(line, chars, break_on_hyphens=False, break_long_words=False)
                     for line in title.splitlines()) or title


def padded_limits(values, pad: float = 0.06) -> tuple[float, float] | None:
    """Axis limits around the finite `values`, padded so a marker at the extreme value stays
    off the spine (None: no finite value)."""
    x = np.asarray([v for v in values if v is not None], float)
    x = x[np.isfinite(x)]
    if not len(x):
        return None
    lo, hi = float(x.min()), float(x.max())
    width = hi - lo or max(abs(hi), 1.0)
    return lo - pad * width, hi + pad * width


def plot_curve(path: str, env_steps: np.ndarray, returns: np.ndarray, title: str,
               threshold: float | None = None, groups: dict[str, list[int]] | None = None) -> None:
    """Episodic return vs env steps: the mean over runs with a +-1 std band (returns: [R, U]),
    one curve per group of runs when `groups` (a sweep: {setting label: its runs}) is given. A
    NaN (a run before its first episode ended) is left out of the mean."""
    one = returns.shape[0] == 1
    groups = groups or {"1 seed" if one else f"mean over {returns.shape[0]} seeds":
                        list(range(returns.shape[0]))}
    fig, ax = pyplot().subplots(figsize=(7, 4))
    many = len(groups) > 1
    for (label, runs), style in zip(groups.items(), series_styles(len(groups)), strict=True):
        with warnings.catch_warnings():  # NaN: no episode had ended yet; all-NaN: no point
            warnings.simplefilter("ignore", RuntimeWarning)
            mean, std = np.nanmean(returns[runs], 0), np.nanstd(returns[runs], 0)
        ax.plot(env_steps, mean, lw=1.5, label=label, **style)
        if len(runs) > 1:  # one seed has no spread: no band, and no legend entry for one
            ax.fill_between(env_steps, mean - std, mean + std, alpha=0.12 if many else 0.2,
                            color=style["color"], label=None if many else "± 1 std")
    if threshold is not None:
        ax.axhline(threshold, color="k", ls="--", lw=0.8, label=f"solved ({threshold:g})")
    ax.set_xlabel("environment steps")
    ax.set_ylabel("episodic return" + (" (mean ± 1 std over seeds)" if many else ""))
    ax.set_title(fit_title(title, 7))
    ax.grid(alpha=0.3)
    if many:
        legend_outside(ax, len(groups) + (threshold is not None))
    else:
        ax.legend(loc="lower right")
    save_figure(fig, path, dpi=110, bbox_inches="tight")


def plot_sweep(path: str, labels: list[str], means: np.ndarray, stds: np.ndarray,
               title: str) -> None:
    """Final return per setting, mean +- std over seeds, best first. A non-finite mean (a
    diverged setting's Inf/NaN return) gets no bar: it would break the axis limits."""
    means = np.where(np.isfinite(means), means, np.nan)
    stds = np.where(np.isfinite(stds), stds, np.nan)
    order = np.argsort(-means, kind="stable")
    fig, ax = pyplot().subplots(figsize=(max(5, 0.6 * len(labels) + 2), 4))
    ax.bar(range(len(labels)), means[order], yerr=stds[order], capsize=3)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels([labels[i] for i in order], rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("final episodic return")
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)


def plot_compare(path: str, rows: list[dict], title: str) -> None:
    """`jaxppo compare`: SPS (linear axis, ratios on the bars) and time to solve, one bar per
    system."""
    fig = compare_figure(rows, title)
    save_figure(fig, path, dpi=110)


def ratio_reference(rows: list[dict]) -> dict:
    """The row the figure's ratios are to: SB3 DummyVecEnv where it ran, else the slowest."""
    return next((r for r in rows if r.get("system") == "sb3-dummy"),
                min(rows, key=lambda r: r["sps"]))


def has_bar(row: dict) -> bool:
    """Whether a row's env has a solve threshold (rows written before the field: `solved` not
    "-")."""
    return bool(row.get("has_threshold", row.get("solved") != "-"))


def compare_figure(rows: list[dict], title: str) -> Figure:
    """The `plot_compare` figure. The time-to-solve panel is left out when no system solved
    (a panel of empty bars would only show a meaningless axis), or when the env has no solve
    threshold (MinAtar, Atari, `gymnasium/` ids)."""
    labels = [r["label"] for r in rows]
    y = np.arange(len(rows))
    any_solved = any(r["solve_s"] is not None for r in rows)
    height = 0.5 * len(rows) + 2
    if any_solved:
        fig, (a, b) = pyplot().subplots(1, 2, figsize=(11, height), sharey=True)
    else:
        fig, a = pyplot().subplots(figsize=(6.5, height))
        no_bar = not any(has_bar(r) for r in rows)
        title = (f"{title}\nno solve threshold for this env" if no_bar
                 else f"{title}\nno system solved within the budget")
    sps = [r["sps"] for r in rows]
    a.barh(y, sps, color="tab:blue")
    # A linear axis, and each bar's ratio written on it: on a log axis a 2.2x gap looked 20x.
    a.set_xscale("linear")
    ref = ratio_reference(rows)
    a.set_xlabel(f"environment steps per second (median, linear; x = ratio to {ref['label']})")
    a.set_xlim(0, max(sps) * 1.45)
    for i, v in enumerate(sps):
        a.text(v, i, f" {v:,.0f} ({v / ref['sps']:.1f}x)", va="center", fontsize=8)
    a.set_yticks(y)
    a.set_yticklabels(labels, fontsize=8)
    a.invert_yaxis()
    a.grid(axis="x", alpha=0.3)
    if any_solved:
        solve = [r["solve_s"] if r["solve_s"] is not None else 0.0 for r in rows]
        b.barh(y, solve, color="tab:green")
        b.set_xlabel("wall time to solve, incl. compile/setup (s)")
        for i, r in enumerate(rows):
            b.text(solve[i], i, f" {r['solve_s']:.1f} s" if r["solve_s"] is not None
                   else " not solved", va="center", fontsize=8)
        b.grid(axis="x", alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


# `jaxppo report` (jaxppo/report.py): rliable's three figures, from report.json's numbers.
STAT_TITLES = {"median": "Median", "iqm": "IQM", "mean": "Mean",
               "optimality_gap": "Optimality gap"}


def _empty(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes)
    ax.set_axis_off()


def plot_intervals(path: str, rows: list[dict], scale: str, title: str = "") -> None:
    """One panel per statistic, one row per run (setting) and 'all runs': the point estimate
    and its 95% interval (rows: report.json's groups, each with `label` and `stats`); the
    x-axis padded so an estimate at the extreme (a return of 500, a gap of 0) stays off the
    spine."""
    names = [k for k in STAT_TITLES if any(k in r["stats"] for r in rows)]
    width = 2.8 * max(len(names), 1) + 2
    title = fit_title(title, width)
    fig, axes = pyplot().subplots(1, max(len(names), 1), sharey=True,
                                  figsize=(width, 0.45 * len(rows) + 1.9 + 0.2 * title.count("\n")),
                                  squeeze=False)
    if not rows:
        _empty(axes[0, 0], "no seed has a score")
    y = np.arange(len(rows))
    styles = series_styles(sum(r["label"] != "all runs" for r in rows))
    colors = [("k" if r["label"] == "all runs" else styles.pop(0)["color"]) for r in rows]
    for ax, name in zip(axes[0], names, strict=False):
        seen = []
        for i, r in enumerate(rows):
            s = r["stats"].get(name)
            if s is None or s["value"] is None:
                continue
            if s["ci"]:
                ax.barh(i, s["ci"][1] - s["ci"][0], left=s["ci"][0], height=0.6,
                        color=colors[i], alpha=0.35)
                seen += s["ci"]
            ax.plot([s["value"]] * 2, [i - 0.3, i + 0.3], color=colors[i], lw=2)
            seen.append(s["value"])
        limits = padded_limits(seen)
        if limits:
            ax.set_xlim(*limits)
        ax.set_title(STAT_TITLES[name])
        ax.xaxis.set_major_locator(pyplot().MaxNLocator(4))  # a narrow panel: no ticks run together
        ax.set_xlabel(scale)
        ax.grid(axis="x", alpha=0.3)
    axes[0, 0].set_yticks(y)
    axes[0, 0].set_yticklabels([r["label"] for r in rows], fontsize=8)
    axes[0, 0].set_ylim(max(len(rows), 1) - 0.5, -0.5)  # first row on top, none on the spine
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    save_figure(fig, path, dpi=110, bbox_inches="tight")


def plot_sample_efficiency(path: str, curves: list[dict], scale: str, title: str = "",
                           one_seed: bool = False, empty: str = "no curve") -> None:
    """IQM over seeds vs env steps with its 95% band, one line per run (setting); the legend
    outside the axes, every series its own colour or line style. `one_seed`: every line is
    one seed's (no IQM, no band to speak of): the axis says so. `empty`: the text drawn where
    there is no curve (the caller names the missing file)."""
    fig, ax = pyplot().subplots(figsize=(7, 4))
    if not curves:
        _empty(ax, empty)
    for c, style in zip(curves, series_styles(len(curves)), strict=True):
        x = np.asarray(c["env_steps"], float)
        ax.plot(x, np.array(c["iqm"], float), lw=1.5, label=c["label"], **style)
        ax.fill_between(x, np.array(c["ci_low"], float), np.array(c["ci_high"], float),
                        alpha=0.2 if len(curves) <= 10 else 0.1, color=style["color"])
    if curves:
        ax.set_xlabel("environment steps")
        ax.set_ylabel(scale if one_seed else f"IQM {scale} (95% CI)")
        ax.grid(alpha=0.3)
        legend_outside(ax, len(curves))
    ax.set_title(fit_title(title, 7))
    save_figure(fig, path, dpi=110, bbox_inches="tight")


def plot_profiles(path: str, profiles: dict | None, scale: str, title: str = "") -> None:
    """Performance profiles: the fraction of seeds scoring above tau, with 95% bands."""
    fig, ax = pyplot().subplots(figsize=(7, 4))
    if not profiles:
        _empty(ax, "no seed has a score")
    else:
        tau = np.asarray(profiles["tau"], float)
        lines = list(profiles["groups"].items())
        styles = series_styles(len(lines))
        if "all runs" in profiles:
            lines.append(("all runs", profiles["all runs"]))
            styles.append({"color": "k", "ls": "-"})
        for (label, p), style in zip(lines, styles, strict=True):
            ax.plot(tau, p["fraction"], lw=2 if label == "all runs" else 1.5, label=label,
                    **style)
            ax.fill_between(tau, p["ci_low"], p["ci_high"], alpha=0.2 if len(lines) <= 10
                            else 0.1, color=style["color"])
        ax.set_xlabel(f"{scale} τ")
        ax.set_ylabel("fraction of seeds with score > τ")
        ax.set_ylim(-0.05, 1.05)
        ax.grid(alpha=0.3)
        legend_outside(ax, len(lines))
    ax.set_title(fit_title(title, 7))
    save_figure(fig, path, dpi=110, bbox_inches="tight")
