"""Where a compiled program's kernels go: its optimized HLO, loop by loop.

On XLA:CPU every top-level instruction of a computation (a fusion, a dot, a copy, a sort) is a
kernel the runtime dispatches, ~0.1-2 µs each before any arithmetic; on a GPU it is a launch.
So a small RL program's speed follows how many of them run per update. This walks the program
from its entry, multiplies each while loop's body by its trip count (XLA records it as
`known_trip_count`), inlines calls, and counts kernels per loop and per run. A `conditional`
counts as one kernel (its branches are not walked: jaxppo's training programs hold none).

    python scripts/hlo_profile.py --config configs/cartpole.yaml
    python scripts/hlo_profile.py --config configs/cartpole.yaml --purejaxrl PATH

`scripts/benchmark.py --only hlo` prints the same table.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections import Counter
from typing import NamedTuple

import jax

from jaxppo import load_config, make_train

NOT_KERNELS = {"parameter", "tuple", "get-tuple-element", "constant", "bitcast", "after-all"}


class Loop(NamedTuple):
    """A while loop (`lax.scan`, `fori_loop`, or XLA's own: threefry's 5 rounds of 4 are one)."""

    depth: int
    trips: int  # iterations per execution of the loop
    kernels: int  # the body's own kernels per iteration (nested loops apart)
    executions: int  # kernels run by this loop and the loops inside it, per run of the program


def _computations(text: str) -> tuple[dict[str, list[str]], str]:
    comps: dict[str, list[str]] = {}
    cur, entry = None, ""
    for line in text.splitlines():
        if not line.startswith(" ") and line.rstrip().endswith("{") and "(" in line:
            name = re.match(r"^(?:ENTRY )?%?([\w.\-]+) ", line).group(1)
            comps[name], cur = [], name
            entry = name if line.startswith("ENTRY") else entry
        elif line.startswith("}"):
            cur = None
        elif cur and " = " in line:
            comps[cur].append(line.strip())
    return comps, entry


def _opcode(line: str) -> str:
    rhs = line.split(" = ", 1)[1]
    if rhs.startswith("("):  # a tuple-shaped result: skip its shape
        depth, end = 0, 0
        while end == 0 or depth:
            depth += (rhs[end] == "(") - (rhs[end] == ")")
            end += 1
        rhs = "x" + rhs[end:]
    m = re.match(r"\S*\s+([\w\-]+)\(", rhs)
    return m.group(1) if m else "?"


def profile(text: str) -> tuple[list[Loop], Counter]:
    """The loops of an optimized HLO module (`compiled.as_text()`), outermost first, and the
    kernels run per program run by opcode."""
    comps, entry = _computations(text)
    loops: list[Loop] = []
    by_op: Counter = Counter()

    def walk(name: str, mult: int, depth: int) -> int:
        total = 0
        for line in comps.get(name, []):
            op = _opcode(line)
            if op in NOT_KERNELS:
                continue
            if op == "while":
                body = re.search(r"body=%?([\w.\-]+)", line).group(1)
                cond = re.search(r"condition=%?([\w.\-]+)", line).group(1)
                trips = re.search(r'"known_trip_count":\{"n":"(\d+)"', line)
                trips = int(trips.group(1)) if trips else 1
                index = len(loops)
                loops.append(Loop(depth, trips, 0, 0))
                inner = walk(body, mult * trips, depth + 1) + walk(cond, mult * (trips + 1),
                                                                  depth + 1)
                own = sum(1 for x in comps.get(body, [])
                          if _opcode(x) not in NOT_KERNELS | {"while", "call"})
                loops[index] = loops[index]._replace(kernels=own, executions=inner)
                total += inner
            elif op == "call":
                total += walk(re.search(r"to_apply=%?([\w.\-]+)", line).group(1), mult, depth)
            else:
                by_op[op] += mult
                total += mult
        return total

    walk(entry, 1, 0)
    return loops, by_op


def report(title: str, text: str, top: int = 12) -> tuple[str, int]:
    """A Markdown table of the loops that run the most kernels, and the total."""
    loops, by_op = profile(text)
    total = sum(by_op.values())
    rows = sorted(loops, key=lambda lp: -lp.executions)[:top]
    lines = [f"#### {title}: {total:,} kernels per run", "",
             "| loop depth | trips | kernels per iteration | kernels per run (nested ones too) |",
             "|---|---|---|---|"]
    lines += [f"| {lp.depth} | {lp.trips} | {lp.kernels} | {lp.executions:,} |" for lp in rows]
    lines += ["", "by kind: " + ", ".join(f"{k} {v:,}" for k, v in by_op.most_common(8)), ""]
    return "\n".join(lines), total


def compiled_texts(config_path: str, purejaxrl: str | None, seeds: int = 1) -> dict[str, str]:
    """The optimized HLO of jaxppo's `make_train` (and PureJaxRL's `ppo.py`) on a config, each
    vmapped over `seeds` as the benchmarks run them."""
    cfg = load_config(config_path)
    keys = jax.random.split(jax.random.key(0), seeds)
    fns = {"jaxppo make_train": make_train(cfg)}
    if purejaxrl:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from gpu_suite import load_purejaxrl, purejaxrl_config

        fns["PureJaxRL ppo.py"] = load_purejaxrl(purejaxrl)(purejaxrl_config(cfg))
    return {name: jax.jit(jax.vmap(fn)).lower(keys).compile().as_text()
            for name, fn in fns.items()}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--config", default="configs/cartpole.yaml")
    p.add_argument("--purejaxrl", default=None, metavar="PATH", help="a PureJaxRL checkout")
    p.add_argument("--seeds", type=int, default=1)
    args = p.parse_args(argv)
    for name, text in compiled_texts(args.config, args.purejaxrl, args.seeds).items():
        print(report(name, text)[0])


if __name__ == "__main__":
    main()
