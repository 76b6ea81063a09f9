"""Final return of each shipped config over N vmapped seeds, as a Markdown table.

    python scripts/benchmark_returns.py --seeds 4                      # every config
    python scripts/benchmark_returns.py --configs configs/cartpole.yaml --max-steps 1e6

`--max-steps` caps a config's budget (for machines where 1e7 MinAtar steps take too long);
capped rows say so. The final return is each seed's mean episodic return over the episodes
that ended in its last update (as `summary.json` reports it).
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import os
import re
import time

import jax
import numpy as np

from jaxppo import load_config, make_train
from jaxppo.machine import describe

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def reference(path: str) -> str:
    """The reference return cited in the config's header comment."""
    with open(path, encoding="utf-8") as f:
        head = "".join(line for line in f if line.startswith("#"))
    m = re.search(r"Reference: (.*?)(?:\n# [A-Z]|\Z)", head, re.S)
    return " ".join(m.group(1).replace("#", " ").split()) if m else ""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--configs", nargs="*", default=sorted(glob.glob(f"{ROOT}/configs/*.yaml")))
    p.add_argument("--seeds", type=int, default=4)
    p.add_argument("--max-steps", type=float, default=None)
    p.add_argument("--out", default=None, help="also append the table to this file")
    args = p.parse_args()
    rows = [f"Machine: {describe()}; {args.seeds} seeds each.",
            "", "| config | env | steps | final return (mean ± std) | reference | wall s |",
            "|---|---|---|---|---|---|"]
    print("\n".join(rows), flush=True)
    for path in args.configs:
        cfg = load_config(path)
        capped = ""
        if args.max_steps and cfg.total_timesteps > args.max_steps:
            cfg = dataclasses.replace(cfg, total_timesteps=int(args.max_steps))
            capped = f" (capped from {load_config(path).total_timesteps:.0e})"
        t0 = time.perf_counter()
        out = jax.jit(jax.vmap(make_train(cfg)))(jax.random.split(jax.random.key(0), args.seeds))
        final = np.asarray(out.metrics["episodic_return"][:, -1])
        wall = time.perf_counter() - t0
        row = (f"| {os.path.basename(path)} | {cfg.env_id} | {cfg.env_steps:.2g}{capped} | "
               f"{final.mean():.1f} ± {final.std():.1f} | {reference(path)} | {wall:.0f} |")
        rows.append(row)
        print(row, flush=True)
    if args.out:
        with open(args.out, "a", encoding="utf-8") as f:
            f.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
