"""jaxppo's own speed on this machine, as Markdown tables (each figure the median of repeats,
compile time reported apart from run time).

    python scripts/benchmark.py                 # the full set (minutes on a 2-core CPU)
    python scripts/benchmark.py --quick         # tiny budgets: proves the script runs (CI)
    python scripts/benchmark.py --only seeds,logging --out bench.md

Sections: `seeds` (SPS and compile time vs vmapped seeds), `envs` (SPS vs num_envs),
`split` (one update: rollout vs learning), `logging` (live progress in chunks vs one scan),
`dtype` (bf16 vs f32), `memory` (peak host RSS vs rollout size and vs number of updates),
`resets` (costly resets: 4 vmapped seeds x 16 envs vs one agent of 64 envs, `reset: cond` vs
`optimistic`, on Craftax-Classic and Brax; not in the default set: it needs those suites;
`scripts/benchmark_resets.py` has more of it),
`purejaxrl` (jaxppo's `make_train` against PureJaxRL's `ppo.py` on the same config, each run in a
fresh process, the two interleaved; not in the default set: it needs a PureJaxRL checkout),
`host` (a host env: the io_callback bridge's rollout inside the compiled program vs a
host-driven rollout around a compiled policy vs the bare vector env, on Gymnasium's CartPole
and, if EnvPool is installed, its Breakout; not in the default set), `hlo` (kernels per loop of
the compiled program, jaxppo's and, with `--purejaxrl`, PureJaxRL's: `scripts/kernels.py`;
not in the default set).

    python scripts/benchmark.py --only resets --reset-updates 8
    python scripts/benchmark.py --only purejaxrl --purejaxrl PATH --pjr-seeds 1,32 --repeats 5
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time

import jax
import numpy as np

from jaxppo import Experiment, PPOConfig, load_config, make_train
from jaxppo._xla import FLAG, compiler_options, setup_compilation_cache
from jaxppo.config.load import parse_overrides
from jaxppo.core.rollout import RolloutSettings, rollout
from jaxppo.machine import describe

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kernels  # noqa: E402  (scripts/, beside this file)
from benchmark_host import bench_host, table  # noqa: E402
from benchmark_resets import RESET_CONFIGS, bench_resets  # noqa: E402
from purejaxrl_side import load_purejaxrl, purejaxrl_config  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def machine() -> str:
    return describe()


def timed(fn, *args, repeats: int):
    """(compile_s, median run_s) of `jax.jit(fn)(*args)`, compiled as `jaxppo train` compiles."""
    t0 = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile(
        compiler_options=compiler_options(jax.default_backend()))
    compile_s = time.perf_counter() - t0
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        runs.append(time.perf_counter() - t0)
    return compile_s, float(np.median(runs))


def bench_seeds(cfg: PPOConfig, seeds: list[int], repeats: int) -> str:
    train = make_train(cfg)
    rows = []
    for s in seeds:
        keys = jax.random.split(jax.random.key(0), s)
        c, r = timed(jax.vmap(train), keys, repeats=repeats)
        rows.append([s, f"{c:.2f}", f"{r:.2f}", f"{s * cfg.env_steps / r:,.0f}",
                     f"{cfg.env_steps / r:,.0f}"])
    return table(f"Seeds vmapped in one program ({cfg.env_id}, {cfg.env_steps:,} steps each)",
                 ["seeds", "compile s", "run s", "total SPS", "SPS per seed"], rows)


def bench_envs(cfg: PPOConfig, envs: list[int], repeats: int) -> str:
    rows = []
    for n in envs:
        c = dataclasses.replace(cfg, num_envs=n, total_timesteps=max(cfg.total_timesteps,
                                                                     n * cfg.num_steps))
        comp, r = timed(make_train(c), jax.random.key(0), repeats=repeats)
        rows.append([n, c.num_updates, f"{comp:.2f}", f"{r:.2f}", f"{c.env_steps / r:,.0f}"])
    return table(f"num_envs ({cfg.env_id}, num_steps {cfg.num_steps}, "
                 f"{cfg.total_timesteps:,} steps or one update)",
                 ["num_envs", "updates", "compile s", "run s", "SPS"], rows)


def bench_split(cfg: PPOConfig, repeats: int) -> str:
    """Rollout alone vs the whole update, over all updates of the run."""
    from jaxppo.config import Hparams

    train = make_train(cfg)
    hp = Hparams.from_config(cfg)
    runner = jax.jit(train.init)(jax.random.key(0))
    settings = RolloutSettings(cfg.num_steps, cfg.normalize_obs, cfg.normalize_reward)

    def rollouts_only(r):
        def body(r, _):
            ts = r.train_state
            key, k = jax.random.split(r.key)
            env, norm, traj, _, _ = rollout(k, r.env, ts.normalizer, ts.params, env=train.env,
                                            network=train.network, gamma=hp.gamma,
                                            settings=settings)
            return r._replace(env=env, key=key), traj.reward.sum()
        return jax.lax.scan(body, r, None, length=cfg.num_updates)

    _, t_roll = timed(rollouts_only, runner, repeats=repeats)
    _, t_all = timed(lambda r: train.run(r, None), runner, repeats=repeats)
    per = 1e3 / cfg.num_updates
    rows = [["rollout (env steps + acting)", f"{t_roll * per:.3f}", f"{100 * t_roll / t_all:.0f}%"],
            ["learning (GAE + epochs x minibatches)", f"{(t_all - t_roll) * per:.3f}",
             f"{100 * (t_all - t_roll) / t_all:.0f}%"],
            ["whole update", f"{t_all * per:.3f}", "100%"]]
    return table(f"One update, split ({cfg.env_id}, batch {cfg.batch_size}, "
                 f"{cfg.update_epochs}x{cfg.num_minibatches} minibatches)",
                 ["part", "ms per update", "share"], rows)


def bench_logging(cfg: PPOConfig, seeds: int, repeats: int) -> str:
    """One unbroken scan vs `jaxppo.Experiment`'s chunked scan with CSV/TensorBoard/checkpoint
    between chunks (what `jaxppo train` runs), compile excluded from both."""
    train = make_train(cfg)
    keys = jax.random.split(jax.random.key(0), seeds)
    _, t_scan = timed(jax.vmap(train), keys, repeats=repeats)
    times = []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as d:
            result = Experiment(cfg, seeds=seeds, logdir=d, progress=False).run()
            # from the run's start (no compile) to the writer threads drained and files closed
            times.append(time.perf_counter() - result.started - result.compile_s)
    t_chunk = float(np.median(times))
    rows = [["one scan, no logging", f"{t_scan:.2f}", f"{seeds * cfg.env_steps / t_scan:,.0f}", "—"],
            ["Experiment: chunks + CSV + TensorBoard + checkpoint",
             f"{t_chunk:.2f}", f"{seeds * cfg.env_steps / t_chunk:,.0f}",
             f"{100 * (t_chunk - t_scan) / t_scan:+.1f}%"]]
    return table(f"Live logging overhead ({cfg.env_id}, {seeds} seed(s), compile excluded)",
                 ["mode", "run s", "SPS", "overhead"], rows)


def bench_dtype(cfg: PPOConfig, repeats: int) -> str:
    rows = []
    for dtype in ("float32", "bfloat16"):
        c = dataclasses.replace(cfg, compute_dtype=dtype)
        comp, r = timed(make_train(c), jax.random.key(0), repeats=repeats)
        rows.append([dtype, f"{comp:.2f}", f"{r:.2f}", f"{c.env_steps / r:,.0f}"])
    return table(f"Network compute dtype ({cfg.env_id}, hidden {list(cfg.hidden_sizes)})",
                 ["compute_dtype", "compile s", "run s", "SPS"], rows)


ONE_SEED_FORM, SEEDS_FORM = "jit(train)(key)", "jit(vmap(train))(keys)"
"""How the purejaxrl section runs one seed, and more than one."""


def _child_run(system: str, config: str, seeds: int, purejaxrl: str | None,
               steps: int | None = None) -> dict:
    """One fresh-process run (`--child`): compile, then one timed run; what the parent reads.
    Seeds vmapped; one seed as both projects' users run one, `jax.jit(train)(key)` (PureJaxRL's
    ppo.py; jaxppo's `make_train`), not a vmap over a batch of one key, a form neither runs
    (in which jaxppo's program, init and updates in one, ran 10-25% slower on XLA:CPU)."""
    cfg = load_config(config, {"total_timesteps": steps} if steps else None)
    keys = jax.random.split(jax.random.key(0), seeds)
    if system == "purejaxrl":
        fn = load_purejaxrl(purejaxrl)(purejaxrl_config(cfg))
    else:
        fn = make_train(cfg)
    fn, arg = (fn, keys[0]) if seeds == 1 else (jax.vmap(fn), keys)
    form = ONE_SEED_FORM if arg.ndim == 0 else SEEDS_FORM  # what ran
    t0 = time.perf_counter()
    compiled = jax.jit(fn).lower(arg).compile()
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    jax.block_until_ready(compiled(arg))
    run_s = time.perf_counter() - t0
    return {"compile_s": compile_s, "run_s": run_s, "sps": seeds * cfg.env_steps / run_s,
            "form": form, "flag": FLAG in os.environ.get("XLA_FLAGS", ""),
            "nproc": os.environ.get("NPROC")}


_NO_FLAG = {"JAXPPO_SAFE_SCHEDULER": "", "XLA_FLAGS": "", "NPROC": ""}
_FLAG = {**_NO_FLAG, "JAXPPO_SAFE_SCHEDULER": "1"}
_ONE_THREAD = {**_NO_FLAG, "NPROC": "1"}
PJR_SYSTEMS = {
    "jaxppo": ("jaxppo make_train", _NO_FLAG),
    "jaxppo-flag": ("jaxppo make_train, JAXPPO_SAFE_SCHEDULER=1", _FLAG),
    "jaxppo-1thread": ("jaxppo make_train, XLA:CPU pool of 1 thread (NPROC=1)", _ONE_THREAD),
    "purejaxrl": ("PureJaxRL ppo.py (as its users run it)", _NO_FLAG),
    "purejaxrl-flag": ("PureJaxRL ppo.py, the scheduler flag on", _FLAG),
    "purejaxrl-1thread": ("PureJaxRL ppo.py, XLA:CPU pool of 1 thread (NPROC=1)", _ONE_THREAD),
}
"""Each system in a fresh process; `-flag`: XLA:CPU's concurrency-optimized scheduler off;
`-1thread`: XLA:CPU's intra-op thread pool of one thread (XLA reads NPROC when JAX creates the
CPU backend)."""


def bench_purejaxrl(config: str, path: str | None, seeds: list[int], repeats: int,
                    timeout: float, systems: list[str] | None = None,
                    steps: int | None = None, before: str | None = None) -> str:
    """jaxppo vs PureJaxRL on one config: every run a fresh process, the systems interleaved
    within each repeat (a busy machine slows all alike), medians; a run that gives no result
    within `timeout` seconds is reported as hung, not dropped. `before`: a checkout of an
    earlier jaxppo (a git worktree) run beside them, its package first on the path."""
    if not path:
        raise SystemExit("--only purejaxrl needs --purejaxrl PATH (a PureJaxRL checkout)")
    cfg = load_config(config, {"total_timesteps": steps} if steps else None)
    unknown = sorted(set(systems or ()) - set(PJR_SYSTEMS))
    if unknown:
        raise SystemExit(f"--pjr-systems: unknown {unknown}; choose from {','.join(PJR_SYSTEMS)}")
    chosen = {s: v for s, v in PJR_SYSTEMS.items() if not systems or s in systems}
    if before:
        chosen["jaxppo-before"] = (f"jaxppo make_train at {os.path.basename(before.rstrip('/'))}",
                                   {**_NO_FLAG, "PYTHONPATH": os.path.abspath(before)})
    results: dict = {(s, n): [] for s in chosen for n in seeds}
    for _ in range(repeats):
        for n in seeds:
            for system, (_, env) in chosen.items():
                cmd = [sys.executable, os.path.abspath(__file__), "--child",
                       "jaxppo" if system == "jaxppo-before" else system,
                       "--config", config, "--child-seeds", str(n), "--purejaxrl", path,
                       *(["--child-steps", str(steps)] if steps else [])]
                try:
                    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                                         env={**os.environ, **env}, check=True)
                    results[(system, n)].append(json.loads(out.stdout.strip().splitlines()[-1]))
                except subprocess.TimeoutExpired:
                    results[(system, n)].append(None)
                print(f"# {system} {n} seed(s): {results[(system, n)][-1]}", file=sys.stderr,
                      flush=True)
    rows = []
    for n in seeds:
        base = None
        for system, (label, _) in chosen.items():
            done = [r for r in results[(system, n)] if r is not None]
            hung = len(results[(system, n)]) - len(done)
            sps = float(np.median([r["sps"] for r in done])) if done else None
            base = sps if system == "jaxppo" else base
            rows.append([n, label, f"{np.median([r['compile_s'] for r in done]):.1f}" if done
                         else "-", f"{sps:,.0f}" if sps else "-",
                         f"{base / sps:.2f}x" if sps and base and system != "jaxppo" else "-",
                         f"{hung}/{len(results[(system, n)])}"])
    return table(f"jaxppo vs PureJaxRL ({cfg.env_id}, {cfg.env_steps:,} steps per seed, fresh "
                 f"processes interleaved, median of {repeats}; 1 seed: {ONE_SEED_FORM}, more: "
                 f"{SEEDS_FORM})",
                 ["seeds", "system", "compile s", "SPS", "jaxppo / it", "hung"], rows)


def _peak_rss_child(code: str) -> float:
    """Peak RSS (MiB) of a fresh interpreter running `code`."""
    out = subprocess.run([sys.executable, "-c", code + "\nimport resource;"
                          "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"],
                         capture_output=True, text=True, check=True)
    return int(out.stdout.strip().splitlines()[-1]) / 1024


def bench_memory(cfg: PPOConfig) -> str:
    """Peak host RSS grows with the rollout size (num_envs x num_steps), not with updates."""
    base = ("import jax; from jaxppo import PPOConfig, make_train; "
            "c = PPOConfig(env_id='{env}', num_envs={n}, num_steps={t}, total_timesteps={steps},"
            " hidden_sizes=(64, 64)); jax.block_until_ready(jax.jit(make_train(c))(jax.random.key(0)))")
    rows = []
    for n, t, updates in [(4, 128, 10), (4, 128, 200), (256, 128, 10), (1024, 128, 10)]:
        steps = n * t * updates
        rss = _peak_rss_child(base.format(env=cfg.env_id, n=n, t=t, steps=steps))
        rows.append([n, t, updates, f"{n * t:,}", f"{rss:,.0f}"])
    return table("Peak host memory (fresh process, CPU)",
                 ["num_envs", "num_steps", "updates", "rollout transitions", "peak RSS MiB"], rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--config", default=os.path.join(ROOT, "configs", "cartpole.yaml"))
    p.add_argument("--quick", action="store_true", help="tiny budgets, the compilation cache on "
                   "(CI smoke run)")
    p.add_argument("--repeats", type=int, default=None)
    p.add_argument("--only", default="seeds,envs,split,logging,dtype,memory")
    p.add_argument("--out", default=None, help="also write the Markdown here")
    p.add_argument("--seeds", default="1,4,16,64,256", help="seed counts for the seeds section")
    p.add_argument("--envs", default="4,16,64,256,1024,4096", help="num_envs values")
    p.add_argument("--host-shapes", default=None, metavar="SxN,...",
                   help="host section: seeds x num_envs per row (default 1x8,4x8,1x64; "
                   "--quick: 1x4)")
    p.add_argument("--host-envs", default=None, metavar="ID,...",
                   help="host section: only these env ids (default: every installed source)")
    p.add_argument("--reset-configs", default=",".join(RESET_CONFIGS),
                   help="shipped configs (configs/) for the resets section")
    p.add_argument("--reset-updates", type=int, default=8, help="updates per run (resets)")
    p.add_argument("--reset-modes", default="cond,optimistic", help="resets section: modes")
    p.add_argument("--reset-set", action="append", default=[], metavar="KEY=VALUE",
                   help="resets section: override a key of each config")
    p.add_argument("--reset-steps", type=int, default=None,
                   help="num_steps for the resets section (default: each config's)")
    p.add_argument("--reset-shapes", default="4x16", metavar="SxN,...",
                   help="resets section: seeds x envs per agent, each against 1 x S*N")
    p.add_argument("--purejaxrl", default=None, metavar="PATH", help="a PureJaxRL checkout")
    p.add_argument("--pjr-seeds", default="1,32", help="seed counts for the purejaxrl section")
    p.add_argument("--pjr-systems", default=None,
                   help=f"comma-separated subset of {','.join(PJR_SYSTEMS)} (default: all)")
    p.add_argument("--pjr-steps", type=int, default=None,
                   help="env steps per seed in the purejaxrl section (default: the config's)")
    p.add_argument("--pjr-before", default=None, metavar="PATH",
                   help="purejaxrl section: also an earlier jaxppo checkout (e.g. a worktree)")
    p.add_argument("--pjr-timeout", type=float, default=600.0,
                   help="seconds before a purejaxrl-section run counts as hung")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--child-seeds", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--child-steps", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(_child_run(args.child.split("-")[0], args.config, args.child_seeds,
                                    args.purejaxrl, args.child_steps)))
        return
    cfg = load_config(args.config)
    only = set(args.only.split(","))
    if args.quick:
        setup_compilation_cache()  # a smoke run: a program another section compiled is read back
        cfg = dataclasses.replace(cfg, total_timesteps=cfg.batch_size * 4, hidden_sizes=(16,))
        seeds, envs, repeats = [1], [4], args.repeats or 1  # a row each: each is a compile
    else:
        seeds = [int(s) for s in args.seeds.split(",")]
        envs = [int(n) for n in args.envs.split(",")]
        repeats = args.repeats or 3
    parts = [f"Machine: {machine()}\n"]
    sections = {
        "seeds": lambda: bench_seeds(cfg, seeds, repeats),
        "envs": lambda: bench_envs(cfg, envs, repeats),
        "split": lambda: bench_split(cfg, repeats),
        "logging": lambda: bench_logging(cfg, 1, repeats),
        "dtype": lambda: bench_dtype(cfg, repeats),
        "memory": lambda: bench_memory(cfg),
        "host": lambda: bench_host(repeats, args.quick,
                                   [tuple(int(x) for x in s.split("x"))
                                    for s in args.host_shapes.split(",")]
                                   if args.host_shapes else None,
                                   args.host_envs.split(",") if args.host_envs else None),
        "resets": lambda: bench_resets(args.reset_configs.split(","),
                                       1 if args.quick else args.reset_updates, repeats,
                                       num_steps=8 if args.quick else args.reset_steps,
                                       modes=tuple(args.reset_modes.split(",")),
                                       overrides=parse_overrides(args.reset_set),
                                       shapes=[tuple(int(x) for x in sh.split("x"))
                                               for sh in args.reset_shapes.split(",")]),
        "hlo": lambda: kernels.tables(args.config, args.purejaxrl),
        "purejaxrl": lambda: bench_purejaxrl(args.config, args.purejaxrl,
                                             [int(n) for n in args.pjr_seeds.split(",")],
                                             repeats, args.pjr_timeout,
                                             args.pjr_systems.split(",") if args.pjr_systems
                                             else None, args.pjr_steps, args.pjr_before),
    }
    for name, fn in sections.items():
        if name in only and not (args.quick and name == "memory"):
            text = fn()
            print(text, flush=True)
            parts.append(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write("\n".join(parts))


if __name__ == "__main__":
    main()
