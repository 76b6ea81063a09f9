"""Recurrent and convolutional policies, and the env suites, on this machine (Markdown rows;
each SPS the median of interleaved repeats, compile time apart).

    python scripts/benchmark_policies.py --only networks   # MLP vs GRU vs LSTM, CartPole shape
    python scripts/benchmark_policies.py --only suites     # one shipped config per suite
    python scripts/benchmark_policies.py --only convs      # conv torsos: XLA conv vs matmul
    python scripts/benchmark_policies.py --quick           # tiny budgets: the script runs (CI)
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time

import jax
import numpy as np

from jaxppo import PPOConfig, load_config, make_train
from jaxppo._xla import compiler_options
from jaxppo.core.torsos import CONV_STACKS, conv_as_matmul
from jaxppo.machine import describe

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUITE_CONFIGS = ("playground_cartpole_balance", "craftax_classic_symbolic", "jumanji_snake",
                 "navix_empty", "xminigrid_empty")


def compiled(config: PPOConfig, seeds: int):
    keys = jax.random.split(jax.random.key(0), seeds)
    fn = jax.vmap(make_train(config))
    t0 = time.perf_counter()
    prog = jax.jit(fn).lower(keys).compile(compiler_options=compiler_options(jax.default_backend()))
    return prog, keys, time.perf_counter() - t0


def interleaved(programs: dict, repeats: int) -> dict[str, tuple[float, object]]:
    """Median wall time of each program over `repeats` rounds, run in turn each round."""
    times: dict[str, list[float]] = {k: [] for k in programs}
    outs = {}
    for _ in range(repeats):
        for name, (prog, keys) in programs.items():
            t0 = time.perf_counter()
            outs[name] = jax.block_until_ready(prog(keys))
            times[name].append(time.perf_counter() - t0)
    return {k: (float(np.median(v)), outs[k]) for k, v in times.items()}


def networks(quick: bool, repeats: int) -> str:
    """The default CartPole shape (4 envs x 128 steps, 4 x 4 minibatches), 1 seed."""
    base = PPOConfig(total_timesteps=512 if quick else 100_352)  # quick: one update
    variants = {"MLP [64, 64]": base,
                "GRU 128 (torso [64])": dataclasses.replace(base, network="gru",
                                                            hidden_sizes=(64,)),
                "LSTM 128 (torso [64])": dataclasses.replace(base, network="lstm",
                                                             hidden_sizes=(64,))}
    progs, compile_s = {}, {}
    for name, cfg in variants.items():
        prog, keys, compile_s[name] = compiled(cfg, 1)
        progs[name] = (prog, keys)
    timed = interleaved(progs, repeats)
    rows = ["| policy | compile s | run s | SPS |", "|---|---|---|---|"]
    for name, (run_s, _) in timed.items():
        rows.append(f"| {name} | {compile_s[name]:.1f} | {run_s:.2f} | "
                    f"{base.env_steps / run_s:,.0f} |")
    return "\n".join(rows) + "\n"


def suites(quick: bool, repeats: int, seeds: int, steps: int) -> str:
    rows = ["| config | env | steps x seeds | compile s | run s | SPS (all seeds) | final return "
            "(mean over seeds) |", "|---|---|---|---|---|---|---|"]
    for name in SUITE_CONFIGS:
        path = os.path.join(ROOT, "configs", f"{name}.yaml")
        try:
            cfg = load_config(path)
        except Exception as e:  # noqa: BLE001 - a missing extra: say so in the row
            rows.append(f"| {name} | - | - | - | - | - | skipped: {e} |")
            continue
        budget = cfg.batch_size * 2 if quick else max(cfg.batch_size, min(steps,
                                                                         cfg.total_timesteps))
        cfg = dataclasses.replace(cfg, total_timesteps=budget)
        prog, keys, compile_s = compiled(cfg, seeds)
        run_s, out = interleaved({name: (prog, keys)}, repeats)[name]
        ret = np.asarray(out.metrics["episodic_return"])[:, -1].mean()
        rows.append(f"| {name}.yaml | {cfg.env_id} | {cfg.env_steps:,} x {seeds} | "
                    f"{compile_s:.1f} | {run_s:.1f} | {cfg.env_steps * seeds / run_s:,.0f} | "
                    f"{ret:.3g} |")
        print(rows[-1], flush=True)
    return "\n".join(rows) + "\n"


CONV_SHAPES = {"nature_cnn": (84, 84, 4), "cnn": (10, 10, 4)}
NHWC = ("NHWC", "HWIO", "NHWC")


def _conv_stack(torso: str, shape: tuple[int, ...], impl: str):
    """`loss(kernels, x)` of the torso's conv stack (ReLU after each), by XLA's convolution
    or by `conv_as_matmul`, and kernels drawn for it."""
    kernels, c = [], shape[-1]
    for i, (f, k, _) in enumerate(CONV_STACKS[torso]):
        kernels.append(jax.random.normal(jax.random.key(i), (k, k, c, f)) * 0.05)
        c = f

    def loss(kernels, x):
        x = x.astype(np.float32) / 255.0
        for w, (_, _, s) in zip(kernels, CONV_STACKS[torso], strict=True):
            x = jax.nn.relu(conv_as_matmul(x, w, s) if impl == "matmul" else
                            jax.lax.conv_general_dilated(x, w, (s, s), "VALID",
                                                         dimension_numbers=NHWC))
        return x.sum()

    return loss, kernels


def _torch_ms(torso: str, shape: tuple[int, ...], batch: int, grad: bool, repeats: int):
    try:
        import torch  # the compare extra
    except ImportError:
        return None
    layers, c = [], shape[-1]
    for f, k, s in CONV_STACKS[torso]:
        layers += [torch.nn.Conv2d(c, f, k, s), torch.nn.ReLU()]
        c = f
    net = torch.nn.Sequential(*layers)
    x = torch.zeros(batch, shape[-1], *shape[:2])
    times = []
    for i in range(repeats + 1):
        t0 = time.perf_counter()
        out = net(x).sum()
        if grad:
            out.backward()
        if i:
            times.append(time.perf_counter() - t0)
    return 1e3 * float(np.median(times))


def convs(quick: bool, repeats: int) -> str:
    """The conv torsos alone: forward and gradient, XLA's convolution vs the same layers as one
    matmul over space-to-depth patches (what jaxppo runs on the CPU), and PyTorch's (SB3's)."""
    rows = ["| torso | batch | pass | XLA conv ms | matmul ms | speedup | torch ms |",
            "|---|---|---|---|---|---|---|"]
    for torso, shape in CONV_SHAPES.items():
        for batch in ((8,) if quick else (8, 256)):
            x = np.zeros((batch, *shape), np.uint8)
            for grad in (False, True):
                ms = {}
                for impl in ("xla", "matmul"):
                    loss, kernels = _conv_stack(torso, shape, impl)
                    fn = jax.jit(jax.grad(loss) if grad else loss)
                    jax.block_until_ready(fn(kernels, x))
                    times = []
                    for _ in range(repeats):
                        t0 = time.perf_counter()
                        jax.block_until_ready(fn(kernels, x))
                        times.append(time.perf_counter() - t0)
                    ms[impl] = 1e3 * float(np.median(times))
                t = _torch_ms(torso, shape, batch, grad, repeats)
                rows.append(f"| {torso} | {batch} | {'gradient' if grad else 'forward'} | "
                            f"{ms['xla']:.2f} | {ms['matmul']:.2f} | "
                            f"{ms['xla'] / ms['matmul']:.1f}x | "
                            f"{'-' if t is None else f'{t:.2f}'} |")
    return "\n".join(rows) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default="networks,suites")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seeds", type=int, default=4)
    p.add_argument("--steps", type=int, default=200_000, help="suites: steps per seed (cap)")
    args = p.parse_args(argv)
    print(f"machine: {describe()}\n")
    parts = args.only.split(",")
    if "networks" in parts:
        print("### MLP vs recurrent policies (CartPole-v1 default shape, 1 seed)\n")
        print(networks(args.quick, 1 if args.quick else args.repeats))
    if "convs" in parts:
        print("### Conv torsos: XLA's convolution vs one matmul (median ms per call)\n")
        print(convs(args.quick, 1 if args.quick else max(args.repeats, 5)))
    if "suites" in parts:
        print(f"### One shipped config per env suite ({args.seeds} seeds vmapped)\n")
        print(suites(args.quick, 1 if args.quick else args.repeats, args.seeds, args.steps))
    return 0


if __name__ == "__main__":
    sys.exit(main())
