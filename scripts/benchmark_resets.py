"""The `resets` section of scripts/benchmark.py, and what a reset costs next to a step.

`shapes`: the same env steps as S vmapped agents of N envs and as one agent of S x N envs, for
each reset mode and network: the programs are compiled first, then run in turn (interleaved,
so a busy machine slows all alike), each figure the median of the repeats, run time only.
`cost`: for each env id, one batched reset and one batched step of 64 envs (compiled, the
median of 15 calls each), their ratio, XLA's estimate of it and what `reset: auto` picks
(`jaxppo/envs/resets.py`).

    python scripts/benchmark_resets.py --only cost --envs CartPole-v1,craftax/Craftax-Symbolic-v1
    python scripts/benchmark_resets.py --only shapes --configs craftax_classic_symbolic.yaml \\
        --shapes 4x16,8x8 --nets 64,64/512,512,512 --updates 6 --steps 16 --repeats 3
    python scripts/benchmark.py --only resets --reset-updates 8     # the same section
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxppo import load_config, make_train
from jaxppo._xla import compiler_options
from jaxppo.config.load import parse_overrides
from jaxppo.envs import VecEnv
from jaxppo.envs.resets import reset_cost_ratio
from jaxppo.machine import describe

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchmark_host import table  # noqa: E402  (scripts/, beside this file)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESET_CONFIGS = ("craftax_classic_symbolic.yaml", "brax_inverted_double_pendulum.yaml")
COST_ENVS = ("CartPole-v1", "Breakout-MinAtar", "xminigrid/MiniGrid-FourRooms",
             "navix/Navix-FourRooms-v0", "jumanji/Maze-v0",
             "craftax/Craftax-Classic-Symbolic-v1", "craftax/Craftax-Symbolic-v1",
             "brax/inverted_double_pendulum")


def bench_resets(config_names: list[str], updates: int, repeats: int, seeds: int = 4,
                 envs_per_seed: int = 16, num_steps: int | None = None,
                 modes: tuple[str, ...] = ("cond", "optimistic"),
                 overrides: dict | None = None,
                 shapes: list[tuple[int, int]] | None = None,
                 nets: list[tuple[int, ...]] | None = None) -> str:
    """Each shape in `shapes` (seeds x envs; default `seeds` x `envs_per_seed`) against one agent
    of as many envs, under each of `modes` and each network in `nets` (default the config's),
    `updates` updates of `num_steps` steps (default the config's)."""
    shapes = shapes or [(seeds, envs_per_seed)]
    rows = []
    for name in config_names:
        base = load_config(os.path.join(ROOT, "configs", name), overrides)
        steps = num_steps or base.num_steps
        programs = {}
        for net in nets or [base.hidden_sizes]:
            for mode in modes:
                for runs, n in sorted({s for sh in shapes for s in (sh, (1, sh[0] * sh[1]))}):
                    c = dataclasses.replace(base, reset=mode, num_envs=n, num_steps=steps,
                                            num_minibatches=4, hidden_sizes=tuple(net),
                                            total_timesteps=updates * n * steps)
                    train = make_train(c)
                    keys = jax.random.split(jax.random.key(0), runs)
                    t0 = time.perf_counter()
                    compiled = jax.jit(jax.vmap(train)).lower(keys).compile(
                        compiler_options=compiler_options(jax.default_backend()))
                    comp = time.perf_counter() - t0
                    resolved = train.env.reset_mode
                    programs[(tuple(net), mode, runs, n)] = (
                        compiled, keys, comp, runs * c.env_steps,
                        train.env.reset_batch if resolved == "optimistic" else "-",
                        resolved if mode == "auto" else mode)
                    print(f"# {base.env_id} {list(net)} reset={mode} {runs} x {n}: compiled "
                          f"in {comp:.0f} s", file=sys.stderr, flush=True)
        times: dict = {k: [] for k in programs}
        for _ in range(repeats):
            for k, (compiled, keys, *_rest) in programs.items():
                t0 = time.perf_counter()
                jax.block_until_ready(compiled(keys))
                times[k].append(time.perf_counter() - t0)
        for (net, mode, runs, n), (_, _, comp, total, k, resolved) in programs.items():
            run_s = float(np.median(times[(net, mode, runs, n)]))
            wide = float(np.median(times[(net, mode, 1, runs * n)]))
            shown = f"auto: {resolved}" if mode == "auto" else mode
            rows.append([base.env_id, str(list(net)), shown, k,
                         f"{runs} x {n}", f"{comp:.1f}", f"{run_s:.2f}",
                         f"{total / run_s:,.0f}", f"{run_s / wide:.2f}x"])
    return table(f"Costly resets: vmapped seeds vs one agent, same env steps ({updates} updates "
                 f"of {num_steps or 'its config'} steps, median of {repeats}, interleaved, "
                 "run time only)",
                 ["env", "network", "reset", "reset_batch", "seeds x envs", "compile s",
                  "run s", "SPS", "vs 1 agent"], rows)


def _median_call(fn, *args, calls: int = 15) -> float:
    jax.block_until_ready(fn(*args))
    ts = []
    for _ in range(calls):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def bench_reset_cost(env_ids: list[str], num_envs: int = 64) -> str:
    """What one reset costs next to one step, timed and as XLA estimates it, per env id; an id
    whose suite is not installed is skipped with a note."""
    rows = []
    for env_id in env_ids:
        try:
            vec = VecEnv(env_id, num_envs)
        except Exception as e:  # noqa: BLE001 - a suite not installed: say so, go on
            print(f"# {env_id}: skipped ({str(e).splitlines()[0][:120]})", file=sys.stderr)
            continue
        env, params, info = vec.env, vec.params, vec.info
        keys = jax.random.split(jax.random.key(0), num_envs)
        reset = jax.jit(jax.vmap(lambda k, env=env, params=params: env.reset_env(k, params)))
        _, states = reset(keys)
        actions = jnp.zeros((num_envs, *info.action_in.shape), info.action_in.dtype)
        step = jax.jit(jax.vmap(lambda k, s, a, env=env, params=params:
                                env.step_env(k, s, a, params)))
        t_reset, t_step = _median_call(reset, keys), _median_call(step, keys, states, actions)
        ratio = reset_cost_ratio(env, params, info.state, info.action_in)
        mode, why = vec.reset_choice
        rows.append([env_id, f"{t_reset * 1e6 / num_envs:,.1f}", f"{t_step * 1e6 / num_envs:,.1f}",
                     f"{t_reset / t_step:.2f}x", "-" if ratio is None else f"{ratio:.1f}x",
                     f"{mode} ({why})"])
    return table(f"What a reset costs next to a step ({num_envs} envs batched, median of 15 "
                 "calls; XLA's estimate: bytes accessed)",
                 ["env", "reset us/env", "step us/env", "reset / step (time)",
                  "reset / step (XLA's estimate)", "reset: auto picks"], rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--only", default="cost,shapes", help="cost, shapes, or both")
    p.add_argument("--envs", default=",".join(COST_ENVS), help="cost: env ids")
    p.add_argument("--configs", default=",".join(RESET_CONFIGS), help="shapes: configs/ files")
    p.add_argument("--shapes", default="4x16", metavar="SxN,...",
                   help="shapes: seeds x envs per agent (each against 1 x S*N)")
    p.add_argument("--nets", default=None, metavar="H,H/H,H,H",
                   help="shapes: hidden sizes, '/' between networks (default: each config's)")
    p.add_argument("--modes", default="auto", help="shapes: reset modes")
    p.add_argument("--updates", type=int, default=6)
    p.add_argument("--steps", type=int, default=16)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="shapes: override a key of each config")
    p.add_argument("--out", default=None, help="also write the Markdown here")
    args = p.parse_args()
    only = set(args.only.split(","))
    parts = [f"Machine: {describe()}\n"]
    if "cost" in only:
        parts.append(bench_reset_cost(args.envs.split(",")))
        print(parts[-1], flush=True)
    if "shapes" in only:
        nets = ([tuple(int(h) for h in n.split(",")) for n in args.nets.split("/")]
                if args.nets else None)
        parts.append(bench_resets(args.configs.split(","), args.updates, args.repeats,
                                  num_steps=args.steps, modes=tuple(args.modes.split(",")),
                                  overrides=parse_overrides(args.set),
                                  shapes=[tuple(int(x) for x in s.split("x"))
                                          for s in args.shapes.split(",")], nets=nets))
        print(parts[-1], flush=True)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write("\n".join(parts))


if __name__ == "__main__":
    main()
