"""Grid vs random search vs successive halving vs PBT at equal total env steps, and PBT's
overhead against a plain vmapped population of the same size: Markdown tables.

    python scripts/benchmark_search.py                     # CartPole, Acrobot, MinAtar-Breakout
    python scripts/benchmark_search.py --quick             # tiny budgets: proves it runs (CI)
    python scripts/benchmark_search.py --only overhead --out search.md

Every search gets 16 members over the same wide space (lr, ent_coef, clip_eps) and the same
total env steps: grid, random and PBT train 16 agents for the config's budget; halving trains
fewer agents further, so its config's budget is scaled until its total matches. "best" is the
best member's final return (one seed each: a single draw, so read it with the median beside it),
"median" the population's median final return, "wall s" the run's wall time with compiling.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time

import numpy as np

import jaxppo
from jaxppo import PPOConfig, load_config
from jaxppo._xla import setup_compilation_cache
from jaxppo.machine import describe
from jaxppo.search.halving import rung_ends, rung_sizes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MEMBERS = 16
SPACE = {"lr": (1e-5, 1e-2, "log"), "ent_coef": (1e-4, 1e-1, "log"), "clip_eps": (0.05, 0.5)}
GRID = {"lr": [1e-4, 3e-4, 1e-3, 3e-3], "ent_coef": [0.001, 0.03], "clip_eps": [0.1, 0.3]}
ENVS = {  # config, env steps per member at full size
    "CartPole-v1": ("cartpole.yaml", 200_000),
    "Acrobot-v1": ("acrobot.yaml", 200_000),
    "Breakout-MinAtar": ("minatar_breakout.yaml", 100_000),  # a CPU-sized budget
}
QUIET = {"logdir": None, "progress": False}


def table(title: str, header: list[str], rows: list[list]) -> str:
    lines = [f"### {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def _fmt(x) -> str:
    return "none" if x is None or not np.isfinite(x) else f"{x:.1f}"


def _row(name: str, out: jaxppo.SweepResult, wall: float) -> list:
    finals = np.array([np.nan if r["final_return_mean"] is None else r["final_return_mean"]
                       for r in out.rows], float)
    steps = out.result.summary["env_steps_total"]
    return [name, len(out.rows), f"{steps:,}", _fmt(np.nanmax(finals) if np.isfinite(finals).any()
                                                    else None),
            _fmt(np.nanmedian(finals) if np.isfinite(finals).any() else None), f"{wall:.1f}"]


def _halving_budget(cfg: PPOConfig, eta: int = 3) -> int:
    """The total_timesteps whose halving sweep (MEMBERS settings, `eta`) steps as many env
    steps in all as MEMBERS agents trained for `cfg`'s budget."""
    def total(updates: int) -> int:
        ends = rung_ends(updates, MEMBERS, eta) or [updates]
        sizes = rung_sizes(MEMBERS, eta)
        return sum(n * (e - s) for n, s, e in zip(sizes, [0, *ends[:-1]], ends, strict=False))
    want, updates = MEMBERS * cfg.num_updates, cfg.num_updates
    while total(updates + 1) <= want:
        updates += 1
    return updates * cfg.batch_size


def pbt_interval(cfg: PPOConfig) -> int:
    """PBT's exploit/explore interval for `cfg`: a fifth of its updates, at most 20."""
    return max(1, min(20, cfg.num_updates // 5))


def quick_config(cfg: PPOConfig) -> PPOConfig:
    """`--quick`'s toy size of `cfg`: 4 envs x 16 steps, 9 updates."""
    cfg = dataclasses.replace(cfg, num_envs=4, num_steps=16, hidden_sizes=(16,))
    return dataclasses.replace(cfg, total_timesteps=cfg.batch_size * 9)


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def compare(cfg: PPOConfig, seed: int) -> str:
    """One table: the four searches on one env at equal total env steps."""
    rows = []
    out, wall = _timed(lambda: jaxppo.sweep(cfg, GRID, seeds=1, seed=seed, **QUIET))
    rows.append(_row("grid", out, wall))
    out, wall = _timed(lambda: jaxppo.sweep(cfg, space=SPACE, search="random", trials=MEMBERS,
                                            seed=seed, **QUIET))
    rows.append(_row("random", out, wall))
    # Halving trains fewer agents further: scale its budget until its total matches.
    halving = dataclasses.replace(cfg, total_timesteps=_halving_budget(cfg))
    out, wall = _timed(lambda: jaxppo.sweep(halving, space=SPACE, search="halving",
                                            trials=MEMBERS, eta=3, seed=seed, **QUIET))
    rows.append(_row("halving (eta 3)", out, wall))
    interval = pbt_interval(cfg)
    out, wall = _timed(lambda: jaxppo.sweep(cfg, space=SPACE, search="pbt", population=MEMBERS,
                                            interval=interval, seed=seed, **QUIET))
    rows.append(_row(f"PBT (interval {interval})", out, wall))
    return table(f"{cfg.env_id}: {MEMBERS} members, {cfg.total_timesteps:,} env steps per "
                 "member (halving: the same total)",
                 ["search", "settings", "total env steps", "best final return",
                  "median final return", "wall s"], rows)


def overhead(cfg: PPOConfig, interval: int, repeats: int) -> str:
    """PBT against the same population without exploit/explore (a random search of the same
    size), interleaved; run time without compiling, medians."""
    times: dict[str, list[float]] = {"plain": [], "pbt": []}
    for _ in range(repeats):
        for name in times:
            kw = ({"search": "pbt", "population": MEMBERS, "interval": interval}
                  if name == "pbt" else {"search": "random", "trials": MEMBERS})
            out = jaxppo.sweep(cfg, space=SPACE, seed=0, **kw, **QUIET)
            times[name].append(out.result.wall_s - out.result.compile_s)
    plain, pbt = (float(np.median(times[k])) for k in ("plain", "pbt"))
    steps = cfg.num_updates * cfg.batch_size * MEMBERS
    rows = [["plain population", f"{plain:.2f}", f"{steps / plain:,.0f}", ""],
            [f"PBT, interval {interval}", f"{pbt:.2f}", f"{steps / pbt:,.0f}",
             f"{100 * (pbt / plain - 1):+.1f}%"]]
    return table(f"PBT overhead ({cfg.env_id}, {MEMBERS} members, {cfg.num_updates} updates, "
                 f"median of {repeats}, interleaved)",
                 ["program", "run s", "total SPS", "overhead"], rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="tiny budgets (CI smoke run)")
    p.add_argument("--only", default="compare,overhead")
    p.add_argument("--envs", default=",".join(ENVS), help="envs for the compare section")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="also write the Markdown here")
    args = p.parse_args()
    only = set(args.only.split(","))
    if args.quick:  # a smoke run: the overhead section reads CartPole's programs back
        setup_compilation_cache()
    parts = [f"Machine: {describe()}\n"]
    for env_id in args.envs.split(",") if "compare" in only else []:
        name, steps = ENVS[env_id]
        cfg = load_config(os.path.join(ROOT, "configs", name))
        cfg = quick_config(cfg) if args.quick else dataclasses.replace(cfg, total_timesteps=steps)
        parts.append(compare(cfg, args.seed))
        print(parts[-1], flush=True)
    if "overhead" in only:
        cfg = load_config(os.path.join(ROOT, "configs", "cartpole.yaml"))
        cfg = (quick_config(cfg) if args.quick
               else dataclasses.replace(cfg, total_timesteps=cfg.batch_size * 200))
        parts.append(overhead(cfg, pbt_interval(cfg), 1 if args.quick else args.repeats))
        print(parts[-1], flush=True)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write("\n".join(parts))


if __name__ == "__main__":
    main()
