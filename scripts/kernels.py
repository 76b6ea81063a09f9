"""Kernels per update of jaxppo's compiled program beside PureJaxRL's `ppo.py` on the same config,
on this CPU or compiled for a GPU this machine does not have (`jaxppo profile`'s instrument,
`jaxppo.profile`, applied to both programs; the benchmark pages' deviceless figures).

    python scripts/kernels.py --purejaxrl PATH --config configs/cartpole.yaml --target h100
    python scripts/kernels.py --purejaxrl PATH --target h100 --seeds 2048

Without `--purejaxrl` it profiles jaxppo's program alone, as `jaxppo profile` does.
"""

from __future__ import annotations

import argparse
import os
import sys

from jaxppo import load_config, make_train
from jaxppo.config.load import parse_overrides
from jaxppo.profile import GPUS, as_users_run, compiled_text, gpu_device, loop_table

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from purejaxrl_side import load_purejaxrl, purejaxrl_config  # noqa: E402  (scripts/, beside this)


def texts(config: str, purejaxrl: str | None, seeds: int = 1, target: str = "cpu",
          overrides: dict | None = None) -> dict[str, str]:
    """The optimized HLO of jaxppo's `make_train` (and PureJaxRL's `ppo.py`) on `config`, each
    vmapped over `seeds` keys (one seed: called alone, as both projects' users run one),
    compiled for `target`."""
    device = None if target == "cpu" else gpu_device(target)  # before anything starts JAX
    cfg = load_config(config, overrides)
    fns = {"jaxppo make_train": make_train(cfg)}
    if purejaxrl:
        fns["PureJaxRL ppo.py"] = load_purejaxrl(purejaxrl)(purejaxrl_config(cfg))
    return {name: compiled_text(*as_users_run(fn, seeds), device) for name, fn in fns.items()}


def tables(config: str, purejaxrl: str | None, seeds: int = 1, target: str = "cpu",
           overrides: dict | None = None, top: int = 12) -> str:
    """Each program's loop table, and the ratios of their per-update figures."""
    where = "this CPU" if target == "cpu" else f"{GPUS[target]['name']}, deviceless"
    out, figures = [], {}
    for name, text in texts(config, purejaxrl, seeds, target, overrides).items():
        table, figures[name] = loop_table(f"{name} on {where}, {seeds} agent(s): {config}",
                                          text, top)
        out.append(table)
    if len(figures) == 2:
        (a, fa), (b, fb) = figures.items()
        out.append(f"{a} / {b} per update: kernels {fa['kernels'] / fb['kernels']:.2f}x, copies "
                   f"{fa['copies'] / max(fb['copies'], 1):.2f}x, bytes written "
                   f"{fa['bytes'] / max(fb['bytes'], 1):.2f}x")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--config", default="configs/cartpole.yaml")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--target", default="cpu", choices=["cpu", *GPUS])
    p.add_argument("--purejaxrl", default=None, metavar="PATH", help="a PureJaxRL checkout")
    p.add_argument("--seeds", type=int, default=1, help="vmapped agents")
    p.add_argument("--top", type=int, default=12, help="loops listed")
    args = p.parse_args(argv)
    if args.target != "cpu":
        gpu_device(args.target)  # JAX starts here, its CUDA plugin quiet
    print(tables(args.config, args.purejaxrl, args.seeds, args.target,
                 parse_overrides(args.set), args.top))


if __name__ == "__main__":
    main()
