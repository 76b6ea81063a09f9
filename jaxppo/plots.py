"""Plots written into run directories (matplotlib, headless Agg backend)."""

from __future__ import annotations

import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def plot_curve(path: str, env_steps: np.ndarray, returns: np.ndarray, title: str,
               threshold: float | None = None, groups: dict[str, list[int]] | None = None) -> None:
    """Episodic return vs env steps: the mean over runs with a +-1 std band (returns: [R, U]),
    one curve per group of runs when `groups` (a sweep: {setting label: its runs}) is given. A
    NaN (a run before its first episode ended) is left out of the mean."""
    groups = groups or {f"mean over {returns.shape[0]} seed(s)": list(range(returns.shape[0]))}
    fig, ax = plt.subplots(figsize=(7, 4))
    for label, runs in groups.items():
        with warnings.catch_warnings():  # NaN: no episode had ended yet; all-NaN: no point
            warnings.simplefilter("ignore", RuntimeWarning)
            mean, std = np.nanmean(returns[runs], 0), np.nanstd(returns[runs], 0)
        line, = ax.plot(env_steps, mean, lw=1.5, label=label)
        ax.fill_between(env_steps, mean - std, mean + std, alpha=0.2, color=line.get_color(),
                        label="± 1 std" if len(groups) == 1 else None)
    if threshold is not None:
        ax.axhline(threshold, color="k", ls="--", lw=0.8, label=f"solved ({threshold:g})")
    ax.set_xlabel("environment steps")
    ax.set_ylabel("episodic return")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8 if len(groups) > 1 else None)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_sweep(path: str, labels: list[str], means: np.ndarray, stds: np.ndarray,
               title: str) -> None:
    """Final return per setting, mean +- std over seeds, best first."""
    order = np.argsort(-means)
    fig, ax = plt.subplots(figsize=(max(5, 0.6 * len(labels) + 2), 4))
    ax.bar(range(len(labels)), means[order], yerr=stds[order], capsize=3)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels([labels[i] for i in order], rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("final episodic return")
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_compare(path: str, rows: list[dict], title: str) -> None:
    """`jaxppo compare`: SPS (log scale) and time to solve, one bar per system."""
    fig = compare_figure(rows, title)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def compare_figure(rows: list[dict], title: str) -> plt.Figure:
    """The `plot_compare` figure. The time-to-solve panel is left out when no system solved:
    a panel of empty bars would only show a meaningless axis."""
    labels = [r["label"] for r in rows]
    y = np.arange(len(rows))
    any_solved = any(r["solve_s"] is not None for r in rows)
    height = 0.5 * len(rows) + 2
    if any_solved:
        fig, (a, b) = plt.subplots(1, 2, figsize=(11, height), sharey=True)
    else:
        fig, a = plt.subplots(figsize=(6.5, height))
        title = f"{title}\nno system solved within the budget"
    sps = [r["sps"] for r in rows]
    a.barh(y, sps, color="tab:blue")
    a.set_xscale("log")
    a.set_xlabel("environment steps per second (median, log scale)")
    for i, v in enumerate(sps):
        a.text(v, i, f" {v:,.0f}", va="center", fontsize=8)
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
