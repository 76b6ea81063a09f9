"""Draw the benchmark pages' figures from the recorded numbers in docs/benchmarks/data/.

    python scripts/benchmark_plots.py                 # writes docs/benchmarks/img/*.png
    python scripts/benchmark_plots.py --out DIR       # (the docs build's hook calls this)

Every figure is drawn from one JSON file of docs/benchmarks/data/, which holds the numbers as the
benchmark pages print them, with the machine, date, software and command they were measured
with; nothing here measures anything. Prints one line per file written. Needs only matplotlib
and NumPy (the Agg backend: no display), and runs in a few seconds.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import FuncFormatter, MaxNLocator  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "docs" / "benchmarks" / "data"
DEFAULT_OUT = ROOT / "docs" / "benchmarks" / "img"

WIDTH = 8.0  # inches; at DPI 100 every figure is 800 px wide
DPI = 100
JAXPPO, OTHER, THIRD, FOURTH = "#1f77b4", "#ff7f0e", "#2ca02c", "#7f7f7f"

plt.rcParams.update({
    "font.size": 10, "axes.titlesize": 11, "axes.labelsize": 10, "legend.fontsize": 9,
    "xtick.labelsize": 9, "ytick.labelsize": 9, "axes.grid": True, "grid.alpha": 0.3,
    "axes.spines.top": False, "axes.spines.right": False,
})


def load(name: str) -> dict:
    return json.loads((DATA / name).read_text())


def si(x, _pos=None) -> str:
    """Axis tick labels: 1.2M, 250k, 40."""
    for div, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            v = x / div
            return f"{v:.0f}{suffix}" if v == int(v) else f"{v:.1f}{suffix}"
    return f"{x:g}"


def header(fig, title: str, data: dict, machine: str | None = None, date: str | None = None) -> None:
    """The figure's title and, under it, the machine and date it was measured on."""
    fig.suptitle(title, fontsize=12, y=0.995)
    sub = f"{machine or data['machine']}; {date or data['date']}"
    fig.text(0.5, 0.935, sub, ha="center", va="top", fontsize=9, color="#444444", wrap=True)


def save(fig, out: Path, name: str) -> Path:
    path = out / name
    fig.savefig(path, dpi=DPI, metadata={"Software": None})
    plt.close(fig)
    return path


def sps_vs_seeds(out: Path) -> Path:
    d = load("cpu_seeds_vmapped.json")
    seeds, _, _, total, per = (np.array(c) for c in zip(*d["rows"], strict=True))
    fig, ax = plt.subplots(figsize=(WIDTH, 4.6), layout="constrained")
    fig.get_layout_engine().set(rect=(0, 0, 1, 0.9))
    ax.plot(seeds, total, "o-", color=JAXPPO, label="all seeds together")
    ax.plot(seeds, per, "s--", color=OTHER, label="per seed")
    for s, t in zip(seeds, total, strict=True):
        ax.annotate(si(t), (s, t), textcoords="offset points", xytext=(0, 7), ha="center", fontsize=9)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(seeds, [str(s) for s in seeds])
    ax.yaxis.set_major_formatter(FuncFormatter(si))
    ax.set_xlabel("seeds vmapped in one program")
    ax.set_ylabel("env steps per second (SPS)")
    ax.set_ylim(1e3, 6e5)
    ax.legend(loc="lower left")
    header(fig, "CartPole-v1, default config: SPS against seeds vmapped", d)
    return save(fig, out, "sps_vs_seeds.png")


def sps_vs_num_envs(out: Path) -> Path:
    d = load("cpu_num_envs.json")
    envs, updates, _, _, sps = (np.array(c) for c in zip(*d["rows"], strict=True))
    fig, ax = plt.subplots(figsize=(WIDTH, 4.4), layout="constrained")
    fig.get_layout_engine().set(rect=(0, 0, 1, 0.9))
    ax.plot(envs, sps, "o-", color=JAXPPO)
    for e, s, u in zip(envs, sps, updates, strict=True):
        ax.annotate(f"{si(s)}\n({u} upd.)", (e, s), textcoords="offset points", xytext=(0, 8),
                    ha="center", fontsize=8)
    ax.set_xscale("log", base=2)
    ax.set_xticks(envs, [str(e) for e in envs])
    ax.yaxis.set_major_formatter(FuncFormatter(si))
    ax.set_ylim(0, 320_000)
    ax.set_xlabel("num_envs (num_steps 128; 5e5 steps, or one update)")
    ax.set_ylabel("env steps per second (SPS)")
    header(fig, "CartPole-v1, one seed: SPS against num_envs", d)
    return save(fig, out, "sps_vs_num_envs.png")


def compile_vs_seeds(out: Path) -> Path:
    d = load("cpu_compile_vs_seeds.json")
    rows = [["unvmapped", *d["unvmapped"]]] + [[str(r[0]), *r[1:]] for r in d["rows"]]
    labels = [r[0] for r in rows]
    trace = np.array([r[1] for r in rows])
    xla = np.array([r[2] for r in rows])
    fig, ax = plt.subplots(figsize=(WIDTH, 4.2), layout="constrained")
    fig.get_layout_engine().set(rect=(0, 0, 1, 0.9))
    x = np.arange(len(rows))
    ax.bar(x, trace, color=OTHER, label="trace + lower (JAX)")
    ax.bar(x, xla, bottom=trace, color=JAXPPO, label="XLA compile")
    for i, r in enumerate(rows):
        ax.text(i, r[3] + 0.08, f"{r[3]:.2f} s", ha="center", fontsize=9)
    ax.set_xticks(x, labels)
    ax.set_xlabel("seeds vmapped (fresh process per bar, no compilation cache, LLVM O2)")
    ax.set_ylabel("compile time (s)")
    ax.set_ylim(0, 6)
    ax.legend(loc="upper left", ncols=2)
    header(fig, "CartPole-v1, default config: compile time against seeds vmapped", d)
    return save(fig, out, "compile_vs_seeds.png")


def gpu_agents(out: Path) -> Path:
    d = load("gpu_agents.json")
    agents, _, run, sps, *_ = (np.array(c) for c in zip(*d["rows"], strict=True))
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(WIDTH, 4.3), layout="constrained")
    fig.get_layout_engine().set(rect=(0, 0, 1, 0.86))
    ticks = [1, 4, 16, 64, 256, 1024, 4096]
    a1.plot(agents, sps[0] * agents, ":", color=FOURTH, label="linear: one agent's SPS x agents")
    a1.plot(agents, sps, "o-", color=JAXPPO, label="measured")
    for i, (a, s) in enumerate(zip(agents, sps, strict=True)):
        last = i == len(agents) - 1
        a1.annotate(si(s), (a, s), textcoords="offset points", xytext=(-4, 8) if last else (6, -12),
                    ha="right" if last else "left", fontsize=9)
    a1.set_yscale("log")
    a1.set_ylim(2e4, 5e8)
    a1.yaxis.set_major_formatter(FuncFormatter(si))
    a1.set_ylabel("env steps per second, all agents (SPS, log)")
    a1.set_title("throughput")
    a1.legend(loc="upper left", fontsize=8)
    a2.plot(agents, run, "o-", color=OTHER)
    for i, (a, r) in enumerate(zip(agents, run, strict=True)):
        a2.annotate(f"{r:.1f} s", (a, r), textcoords="offset points", xytext=(6, 6) if i == 0 else (-6, 6),
                    ha="left" if i == 0 else "right", fontsize=9)
    a2.set_ylim(0, 70)
    a2.set_ylabel("run time, 499,712 steps per agent (s)")
    a2.set_title("wall time (compile excluded)")
    for ax in (a1, a2):
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.set_xlim(0.7, 6000)
        ax.set_xlabel("vmapped agents (4 envs each; log)")
    header(fig, "CartPole-v1 agents vmapped on one GPU", d,
           machine="one NVIDIA H200, JAX 0.11.2 (CUDA 13)")
    return save(fig, out, "gpu_agents.png")


def purejaxrl_sps(out: Path) -> Path:
    cpu, gpu = load("purejaxrl_cpu.json"), load("purejaxrl_gpu.json")
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(WIDTH, 4.4), layout="constrained")
    fig.get_layout_engine().set(rect=(0, 0, 1, 0.86))
    med = {(r[0], r[1]): r[3] for r in cpu["rows"]}
    before = {r[0]: r[1:] for r in cpu["before_shuffle_change"]["rows"]}
    groups = [1, 32]
    x = np.arange(len(groups))
    w = 0.2
    bars = [("jaxppo", [med[(s, "jaxppo")] for s in groups], JAXPPO, None),
            ("PureJaxRL", [med[(s, "PureJaxRL")] for s in groups], OTHER, None),
            ("jaxppo, before the shuffle change", [before[s][0] for s in groups], JAXPPO, "//"),
            ("PureJaxRL, same run", [before[s][1] for s in groups], OTHER, "//")]
    for i, (label, vals, color, hatch) in enumerate(bars):
        pos = x + (i - 1.5) * w
        a1.bar(pos, vals, w, color=color, hatch=hatch, alpha=1.0 if hatch is None else 0.45,
               label=label, edgecolor="white" if hatch is None else color)
        for p, v in zip(pos, vals, strict=True):
            a1.text(p, v + 6000, si(v), ha="center", fontsize=8, rotation=90)
    a1.set_xticks(x, [f"{s} seed{'s' if s > 1 else ''}" for s in groups])
    a1.yaxis.set_major_formatter(FuncFormatter(si))
    a1.set_ylim(0, 760_000)
    a1.set_ylabel("env steps per second, all seeds (SPS)")
    a1.set_title("2-core CPU, 2026-11-26 (medians)")
    a1.legend(loc="upper left", fontsize=7.5, ncols=2)
    # GPU: one bar pair per (lease, agents)
    keys = [("first lease", 1), ("second lease", 1), ("second lease", 2048)]
    val = {(r[0], r[1], r[2]): r[4] for r in gpu["rows"]}
    x = np.arange(len(keys))
    w = 0.38
    for i, (system, color) in enumerate((("jaxppo", JAXPPO), ("PureJaxRL", OTHER))):
        vals = np.array([val[(lease, n, system)] for lease, n in keys], dtype=float)
        pos = x + (i - 0.5) * w
        a2.bar(pos, vals, w, color=color, label=system)
        for p, v in zip(pos, vals, strict=True):
            a2.text(p, v * 1.15, si(v), ha="center", fontsize=8)
    a2.set_yscale("log")
    a2.set_ylim(2e4, 3e8)
    a2.yaxis.set_major_formatter(FuncFormatter(si))
    a2.set_xticks(x, ["1 agent\n(1st lease)", "1 agent\n(2nd lease)", "2048 agents\n(2nd lease)"])
    a2.set_ylabel("env steps per second, all agents (SPS, log)")
    a2.set_title("one NVIDIA H200, 2026-11-26")
    a2.legend(loc="upper left")
    fig.suptitle("CartPole-v1, default config: jaxppo against PureJaxRL ppo.py", fontsize=12, y=0.995)
    fig.text(0.5, 0.935, "left: 2-core CPU (AMD EPYC), JAX 0.10.2; right: one NVIDIA H200, JAX 0.11.2 "
             "(before the CPU-side shuffle change)", ha="center", va="top", fontsize=9, color="#444444")
    return save(fig, out, "purejaxrl_sps.png")


def _short(system: str) -> str:
    """A system's bar label, two short lines (`SB3\nDummy`; the torch.compile script: `compiled`)."""
    words = system.split(" (")[0].replace(", ", " ").replace("vmapped ", "").split()
    form = " ".join(words[1:]).replace("VecEnv", "").replace("VectorEnv", "")
    first = words[0].replace("torch.compile", "compiled")
    return f"{first}\n{form.replace('script ', '').replace('Env', '')}"


def _compare_cartpole(data: str, png: str, title: str, out: Path) -> Path:
    """SPS on a linear axis, each bar labelled with its ratio to SB3 DummyVecEnv (a log axis
    drew a 2.2x gap like 20x), and the time to solve with each repeat's tick."""
    d = load(data)
    rows = d["rows"]
    names = [_short(r[0]) for r in rows]
    sps, solve = [r[2] for r in rows], [r[3] for r in rows]
    base = next(r[2] for r in rows if r[0].startswith("SB3 DummyVecEnv"))
    colors = [JAXPPO if r[0].startswith("jaxppo") else OTHER for r in rows]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(WIDTH, 4.3), layout="constrained")
    fig.get_layout_engine().set(rect=(0, 0, 1, 0.88))
    x = np.arange(len(rows))
    a1.bar(x, sps, color=colors)
    for i, v in enumerate(sps):
        a1.text(i, v + max(sps) * 0.02, f"{si(v)}\n{v / base:.1f}x", ha="center", fontsize=8)
    a1.set_ylim(0, max(sps) * 1.2)
    a1.yaxis.set_major_formatter(FuncFormatter(si))
    a1.set_xticks(x, names, fontsize=7, rotation=0)
    a1.set_ylabel("env steps per second (SPS, median, linear)")
    a1.set_title("training speed; ratio to SB3 DummyVecEnv on each bar")
    top = max(max(v) for v in d["per_repeat_time_to_solve_s"].values())
    for i, v in enumerate(solve):
        if v is None:
            a2.text(i, top * 0.05, "not solved\n(all 16 seeds\nat once)", ha="center", fontsize=7)
        else:
            a2.bar(i, v, color=colors[i])
            a2.text(i, v + top * 0.02, f"{v:g} s", ha="center", fontsize=8)
    for name, reps in d["per_repeat_time_to_solve_s"].items():
        i = [r[0] for r in rows].index(name)
        a2.plot([i] * len(reps), reps, "k_", markersize=14)
    a2.set_xticks(x, names, fontsize=7, rotation=0)
    a2.set_ylim(0, top * 1.15)
    a2.set_ylabel("time to solve, setup/compile included (s)")
    a2.set_title("time to solve (median; ticks: each repeat)")
    header(fig, title, d)
    return save(fig, out, png)


def sb3_cartpole(out: Path) -> Path:
    return _compare_cartpole("sb3_cartpole.json", "sb3_cartpole.png",
                             "CartPole-v1, identical hyperparameters: jaxppo against SB3 PPO", out)


def pytorch_cartpole(out: Path) -> Path:
    return _compare_cartpole("pytorch_cartpole.json", "pytorch_cartpole.png",
                             "CartPole-v1, identical hyperparameters: jaxppo against the PyTorch "
                             "pipelines", out)


def sb3_by_task(out: Path) -> Path:
    d = load("sb3_by_task.json")
    rows = d["rows"]
    fig, ax = plt.subplots(figsize=(WIDTH, 4.6), layout="constrained")
    fig.get_layout_engine().set(rect=(0, 0, 1, 0.85))
    y = np.arange(len(rows))[::-1]
    h = 0.38
    for yi, r in zip(y, rows, strict=True):
        one = r[3] / r[6]
        ax.barh(yi + h / 2, one, h, color=JAXPPO, label="jaxppo, 1 seed" if yi == y[0] else None)
        ax.text(one * 1.05, yi + h / 2, f"{one:.1f}x", va="center", fontsize=9)
        if r[5] is not None:
            many = r[5] / r[6]
            ax.barh(yi - h / 2, many, h, color=THIRD,
                    label="jaxppo, vmapped seeds (all together)" if yi == y[0] else None)
            ax.text(many * 1.05, yi - h / 2, f"{many:.1f}x ({r[4]} seeds)", va="center", fontsize=9)
    ax.axvline(1.0, color="k", lw=1)
    ax.set_xscale("log")
    ax.set_xlim(0.5, 300)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}x"))
    ax.set_yticks(y, [f"{r[0]}\n{r[1]}, {r[2]}" for r in rows], fontsize=8)
    ax.set_xlabel("jaxppo SPS / SB3 DummyVecEnv SPS (log; 1x = parity)")
    ax.legend(loc="center right")
    fig.suptitle("How many times SB3's speed, same algorithm and settings, by task", fontsize=12, y=0.995)
    fig.text(0.5, 0.94, "2-core CPU (AMD EPYC), quiet, 2026-11-21 and 2026-11-25;\nMinAtar CNN: jaxppo on "
             "one NVIDIA H200, SB3 on its host's CPU (Intel Xeon, 16 cores), 2026-11-26", ha="center",
             va="top", fontsize=9, color="#444444")
    return save(fig, out, "sb3_by_task.png")


def returns_vs_reference(out: Path) -> Path:
    d = load("returns_shipped.json")
    rows = d["rows"]
    n = len(rows)
    fig, axes = plt.subplots(n, 1, figsize=(WIDTH, 0.62 * n + 1.3))
    height = 0.62 * n + 1.5
    fig.set_size_inches(WIDTH, height)
    fig.subplots_adjust(left=0.29, right=0.63, top=1 - 0.95 / height, bottom=0.8 / height, hspace=1.25)
    ref_style = [("D", OTHER), ("^", FOURTH)]
    for ax, r in zip(axes, rows, strict=True):
        vals = [r["mean"] - r["std"], r["mean"] + r["std"]]
        ax.errorbar([r["mean"]], [0], xerr=[r["std"]], fmt="o", color=JAXPPO, capsize=4, markersize=7,
                    zorder=5)
        refs = []
        for j, ref in enumerate(r["references"]):
            marker, color = ref_style[j % 2]
            std = ref.get("std", 0)
            ax.errorbar([ref["mean"]], [0], xerr=[std], fmt=marker, color=color, capsize=3, markersize=6,
                        alpha=0.9)
            vals += [ref["mean"] - std, ref["mean"] + std]
            refs.append(f"{ref['mean']:,}" + (f" ± {std:,}" if "std" in ref else "") + f" ({ref['source']})")
        lo, hi = min(vals), max(vals)
        pad = 0.12 * (hi - lo) if hi > lo else max(1.0, 0.02 * abs(hi))
        ax.set_xlim(lo - pad, hi + pad)
        ax.set_ylim(-1, 1)
        ax.set_yticks([])
        ax.spines["left"].set_visible(False)
        ax.grid(axis="y", visible=False)
        ax.tick_params(axis="x", labelsize=8, pad=1)
        ax.xaxis.set_major_locator(MaxNLocator(nbins=5))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:,g}"))
        ax.text(-0.02, 0.5, f"{r['env']}\n{r['steps']} steps, {r['seeds']} seeds", transform=ax.transAxes,
                ha="right", va="center", fontsize=8.5)
        ax.text(1.03, 0.5, f"jaxppo {r['mean']:,} ± {r['std']:,}\nref. " + "; ".join(refs),
                transform=ax.transAxes, ha="left", va="center", fontsize=7, wrap=True)
    axes[-1].set_xlabel("final episodic return (each row on its own scale)")
    handles = [Line2D([], [], marker="o", color=JAXPPO, ls="", label="jaxppo, mean ± std over seeds"),
               Line2D([], [], marker="D", color=OTHER, ls="", label="first reference (CleanRL where it has "
                      "the task, else gymnax-blines)"),
               Line2D([], [], marker="^", color=FOURTH, ls="", label="second reference")]
    fig.legend(handles=handles, loc="lower center", ncols=3, fontsize=7.5, frameon=False,
               bbox_to_anchor=(0.5, 0.0))
    fig.suptitle("Final returns of the shipped configs against published references", fontsize=12,
                 y=0.995)
    fig.text(0.5, 1 - 0.42 / height, f"{d['machine']}; 2026-11-21 to 2026-11-26 (per row: "
             "returns.md)", ha="center", va="top", fontsize=9, color="#444444")
    return save(fig, out, "returns_vs_reference.png")


def atari_scores(out: Path) -> Path:
    d = load("atari_scores.json")
    rows = d["rows"]
    mid = np.array([(r[1] + r[2]) / 2 for r in rows])
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(WIDTH, 4.2), layout="constrained")
    fig.get_layout_engine().set(rect=(0, 0, 1, 0.86))
    for ax, col, game, rnd in ((a1, 4, "Breakout", d["random_play"]["breakout"][0]),
                               (a2, 6, "Pong", d["random_play"]["pong"][0])):
        vals = np.array([r[col] for r in rows])
        ax.plot(mid, vals, "o-", color=JAXPPO, label="jaxppo, mean score of the window's games")
        ax.axhline(rnd, color=FOURTH, ls="--", label=f"random play ({rnd:g})")
        ax.set_xlabel("env steps (millions; window of 204,800 steps)")
        ax.set_ylabel("game score (whole games, unclipped)")
        ax.set_title(f"{game}, 2e6 steps, one seed")
        ax.set_xlim(0, 2.05)
    a1.annotate(f"last 100 games: {d['last_100_games']['breakout']:g}", (mid[-1], rows[-1][4]),
                textcoords="offset points", xytext=(-5, -60), ha="center", fontsize=9,
                arrowprops={"arrowstyle": "->", "color": "k"})
    a1.set_ylim(0, 50)
    a2.set_ylim(-21.5, 21.5)  # the game's whole range: -21 (every point lost) to 21
    a1.legend(loc="upper left", fontsize=8)
    a2.legend(loc="upper left", fontsize=8)
    header(fig, "Atari game scores while training (the configs' former network: own torsos)", d,
           machine="2-core CPU (AMD EPYC, 2 cores), the two runs side by side",
           date="date not recorded (entered the record 2026-11-26)")
    return save(fig, out, "atari_scores.png")


def pong_shared_torso(out: Path) -> Path:
    d = load("pong_shared_torso.json")
    rows = d["rows"]
    mid = np.array([(r[1] + r[2]) / 2 for r in rows])
    later = d["shared_later"]["rows"]
    mid_later = np.array([(r[1] + r[2]) / 2 for r in later])
    fig, ax = plt.subplots(figsize=(WIDTH, 4.2), layout="constrained")
    fig.get_layout_engine().set(rect=(0, 0, 1, 0.9))
    ax.plot(mid, [r[3] for r in rows], "o-", color=FOURTH, label="own torso per actor and critic (former)")
    ax.plot(np.concatenate([mid, mid_later]), [r[6] for r in rows] + [r[3] for r in later], "o-",
            color=JAXPPO, label="one shared torso (CleanRL's network, the configs now)")
    ax.axhline(d["random_play"], color=FOURTH, ls="--", lw=1, label=f"random play ({d['random_play']:g})")
    ax.axhline(0, color="k", lw=0.6)
    ax.set_xlabel("env steps (millions; windows of 102,400 steps)")
    ax.set_ylabel("Pong game score (whole games, -21 to 21)")
    ax.set_ylim(-22, 16)
    ax.set_xlim(0, 1.0)
    ax.legend(loc="upper left")
    header(fig, "Pong: own torsos against a shared torso (2e6-step budget, one seed)", d)
    return save(fig, out, "pong_shared_torso.png")


def host_bridge(out: Path) -> Path:
    d = load("host_bridge_cpu.json")
    fig, axes = plt.subplots(1, 2, figsize=(WIDTH, 4.4), layout="constrained")
    fig.get_layout_engine().set(rect=(0, 0, 1, 0.88))
    series = [("bridge (one compiled scan)", 3, JAXPPO), ("host-driven (policy per step)", 4, OTHER),
              ("bare pool (no policy)", 5, FOURTH),
              ("SB3 SubprocVecEnv + Atari wrappers (no policy)", 6, THIRD)]
    for ax, env in zip(axes, ("gymnasium/CartPole-v1", "envpool/Breakout-v5"), strict=True):
        rows = [r for r in d["rows"] if r[0] == env]
        x = np.arange(len(rows))
        w = 0.2
        for i, (label, col, color) in enumerate(series):
            vals = [r[col] for r in rows]
            if all(v is None for v in vals):
                continue
            pos = x + (i - 1.5) * w
            ax.bar([p for p, v in zip(pos, vals, strict=True) if v is not None],
                   [v for v in vals if v is not None], w, color=color, label=label)
        ax.set_xticks(x, [f"{r[1]} x {r[2]}" for r in rows])
        ax.set_xlabel("seeds x envs")
        ax.yaxis.set_major_formatter(FuncFormatter(si))
        ax.set_title(env)
    axes[0].set_ylabel("env steps per second (rollouts)")
    axes[0].set_ylim(0, 200_000)
    axes[1].set_ylim(0, 6_000)
    handles, labels = axes[1].get_legend_handles_labels()
    axes[1].legend(handles, labels, loc="upper left", fontsize=7.5)
    header(fig, "Host environments: the io_callback bridge against the alternatives", d)
    return save(fig, out, "host_bridge.png")


FIGURES = (sps_vs_seeds, sps_vs_num_envs, compile_vs_seeds, gpu_agents, purejaxrl_sps, sb3_cartpole,
           pytorch_cartpole, sb3_by_task, returns_vs_reference, atari_scores, pong_shared_torso, host_bridge)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=DEFAULT_OUT,
                   help="folder for the PNGs (default: docs/benchmarks/img)")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for figure in FIGURES:
        print(figure(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
