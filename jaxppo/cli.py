"""The `jaxppo` command: train, sweep, eval.

    jaxppo train --config configs/cartpole.yaml [--seeds 8] [--set lr=1e-3]
    jaxppo sweep --config configs/cartpole.yaml --grid lr=1e-4,3e-4,1e-3 --seeds 4
    jaxppo eval runs/<run-name> --episodes 20 --gif cartpole.gif
    jaxppo compare --config configs/cartpole.yaml --repeats 3   (needs jaxppo[compare])

Bad input exits with status 2 and one line on stderr; Ctrl-C (or SIGTERM) saves a checkpoint
at the next chunk boundary and exits with 130 (143 for SIGTERM); `--resume RUN_DIR` continues.
A run whose loss, gradients or parameters turn NaN/Inf stops at the next chunk boundary with
status 3, keeping the last good checkpoint.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import itertools
import json
import os
import signal
import sys
import time

import yaml

from jaxppo.config import ConfigError, Hparams, PPOConfig, config_from_dict, load_config

EXAMPLE_CONFIG = os.path.join("configs", "cartpole.yaml")


class UsageError(Exception):
    """Bad command-line input: printed as one line, exit status 2."""


# --------------------------------------------------------------------------------------------
# argument parsing helpers
def parse_set(items: list[str]) -> dict:
    """`KEY=VALUE` pairs; VALUE is read as YAML (so 1e-3, true, [64, 64] mean what they say)."""
    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--set expects KEY=VALUE, got {item!r} (e.g. --set lr=1e-3)")
        try:
            out[key.strip()] = yaml.safe_load(value)
        except yaml.YAMLError:
            raise UsageError(f"--set {key}: cannot parse value {value!r}") from None
    return out


def parse_grid(items: list[str]) -> dict[str, list[float]]:
    grid = {}
    for item in items or []:
        key, sep, values = item.partition("=")
        key = key.strip()
        if not sep or not key or not values:
            raise UsageError(f"--grid expects KEY=V1,V2,..., got {item!r} (e.g. --grid lr=1e-4,3e-4)")
        if key not in Hparams._fields:
            raise UsageError(f"--grid {key}: only float hyperparameters can be swept in one "
                             f"compile: {', '.join(Hparams._fields)}")
        try:
            grid[key] = [float(v) for v in values.split(",")]
        except ValueError:
            raise UsageError(f"--grid {key}: values must be numbers, got {values!r}") from None
    if not grid:
        raise UsageError("sweep needs at least one --grid KEY=V1,V2,...")
    return grid


def positive_int(name: str):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{name} must be a positive integer, got {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{name} must be a positive integer, got {value}")
        return value
    return parse


def require_config(args) -> str:
    if not args.config:
        raise UsageError(f"--config is required (e.g. --config {EXAMPLE_CONFIG})")
    return args.config


def setup_compilation_cache(enabled: bool) -> None:
    """JAX's persistent compilation cache: a repeated command skips most of its compile."""
    if not enabled:
        return
    import jax

    cache_dir = os.environ.get("JAXPPO_CACHE_DIR",
                               os.path.join(os.path.expanduser("~"), ".cache", "jaxppo", "xla"))
    try:
        os.makedirs(cache_dir, exist_ok=True)
    except OSError:
        return  # an unwritable cache is not worth failing a run for
    jax.config.update("jax_compilation_cache_dir", cache_dir)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def jax_process_count() -> int:
    import jax

    return jax.process_count()


def setup_devices(args):
    """Join a multi-process run if asked (or if SLURM / Open MPI launched several tasks), then
    build the device mesh for `--devices`; None means one device, no sharding."""
    from jaxppo.sharding import init_distributed, make_mesh

    explicit = [args.coordinator_address, args.num_processes, args.process_id]
    if any(v is not None for v in explicit):
        if any(v is None for v in explicit):
            raise UsageError("multi-process runs need all of --coordinator-address HOST:PORT, "
                             "--num-processes P and --process-id I (or none, under SLURM / Open "
                             "MPI)")
        init_distributed(*explicit)
    elif int(os.environ.get("SLURM_NTASKS", "1")) > 1 or \
            int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1")) > 1:
        init_distributed()  # JAX reads the cluster's own variables
    multi = jax_process_count() > 1
    if args.devices is None and not multi:
        if args.shard != "seeds":
            raise UsageError("--shard needs --devices N|all")
        return None
    return make_mesh(args.devices or "all")


def make_run_dir(logdir: str, name: str | None, config: PPOConfig, runs: int) -> str:
    if os.path.exists(logdir) and not os.path.isdir(logdir):
        raise UsageError(f"--logdir {logdir!r} is a file; pass a directory")
    if name is None:
        name = f"{config.env_id.replace('/', '_')}__{time.strftime('%Y%m%d-%H%M%S')}__{runs}seed"
        name += "s" if runs > 1 else ""
    run_dir = os.path.join(logdir, name)
    base, i = run_dir, 1
    while os.path.exists(run_dir):
        i += 1
        run_dir = f"{base}-{i}"
    try:
        os.makedirs(run_dir)
    except OSError as e:
        raise UsageError(f"cannot create run directory {run_dir!r}: {e.strerror}; "
                         "pass a writable --logdir") from None
    return run_dir


# --------------------------------------------------------------------------------------------
# train
def _fmt_solved(env_id: str, solved: dict | None) -> str | None:
    if not solved:
        return None
    return (f"{env_id} solved in {solved['wall_s']:.1f} s after {solved['episodes']:,.0f} "
            f"episodes ({solved['env_steps']:,} steps)")


def cmd_train(args) -> int:

    mesh = setup_devices(args)  # before any JAX computation
    from jaxppo.checkpoint import (
        CheckpointError,
        keys_as_data,
        read_checkpoint,
        restore_into,
        save_checkpoint,
    )
    from jaxppo.driver import DIVERGENCE_HINT, Driver, StopFlag, find_nonfinite
    from jaxppo.logger import NullLogger, RunLogger, read_metrics_csv, write_config
    from jaxppo.plots import plot_curve
    from jaxppo.sharding import agree, gather, is_main_process

    main = is_main_process()  # only process 0 writes files and prints
    say = print if main else (lambda *a, **k: None)
    previous = None
    if args.resume:
        if args.set or args.seeds is not None or args.config:
            raise UsageError("--resume continues a run with its own config: drop --config, "
                             "--set and --seeds")
        try:
            header, state = read_checkpoint(args.resume)
            config = config_from_dict(header["config"], source="checkpoint config")
        except CheckpointError as e:
            raise UsageError(str(e)) from None
        run_dir = args.resume
        num_runs = int(header["num_runs"])
        start_update = int(header["update"])
        seed = int(header.get("extra", {}).get("seed", 0))
        summary_path = os.path.join(run_dir, "summary.json")
        if os.path.exists(summary_path):
            with open(summary_path, encoding="utf-8") as f:
                previous = json.load(f)
    else:
        config = load_config(require_config(args), parse_set(args.set))
        num_runs = args.seeds or 1
        seed = args.seed
        start_update = 0

    # Refuses a config that cannot fit, before any file is written.
    driver = Driver(config, num_runs, mesh=mesh, shard=args.shard)
    if not args.resume:
        if main:
            run_dir = make_run_dir(args.logdir, args.run_name, config, num_runs)
            write_config(run_dir, config)
        else:
            run_dir = os.path.join(args.logdir, args.run_name or "(process 0's run dir)")
    keys = driver.keys(seed)
    where = "" if mesh is None else (f" | {args.shard} sharded over {mesh.size} devices"
                                     f" ({jax_process_count()} process(es))")
    say(f"jaxppo: {config.env_id} | {num_runs} seed(s) | {config.env_steps:,} steps "
        f"({config.num_updates} updates of {config.batch_size}){where} | run dir {run_dir}",
        flush=True)
    restored = None
    if args.resume:  # check the checkpoint against the config's shapes before compiling
        try:
            restored = restore_into(driver.template(keys), state, run_dir)
        except CheckpointError as e:
            raise UsageError(str(e)) from None
    t_start = time.perf_counter()
    names = [f"seed_{i}" for i in range(num_runs)]
    logger = RunLogger(run_dir, config, num_runs, run_names=names, progress=not args.no_progress,
                       start_update=start_update, previous=previous) if main else NullLogger()
    driver.compile(keys)
    say(f"compiled in {driver.compile_s:.1f} s ({driver.chunk_updates} updates per chunk)",
        flush=True)
    if restored is not None:
        runner = driver.place(restored)
        say(f"resuming at update {start_update}/{config.num_updates}", flush=True)
    else:
        runner = driver.init(keys)

    # good: the newest state whose every update was finite; saved: the checkpoint on disk.
    state = {"update": start_update, "stopped": None, "diverged": None,
             "good": None, "saved": start_update if args.resume else None}
    every = args.checkpoint_every

    def save(runner, update):
        host = gather(keys_as_data(runner))  # a collective: every process calls save
        if main:
            save_checkpoint(run_dir, host, config, update, num_runs, extra={"seed": seed})
        state["saved"] = update

    with StopFlag() as stop:
        def on_chunk(runner, result):
            prev = state["update"]
            state["update"] = result.update
            logger.log_chunk(result)
            bad = find_nonfinite(result.metrics, prev)
            if bad is not None:  # stop before this state can reach a checkpoint
                state["diverged"] = bad
                return False
            state["good"] = (runner, result.update)
            signum = agree(stop.signum)  # process 0 decides, so every process stops together
            if signum is not None:
                state["stopped"] = signum
                save(runner, result.update)
                return False
            if every and result.update // every > prev // every:
                save(runner, result.update)
            return True

        runner = driver.run(runner, start_update, on_chunk, t_start)
    wall = time.perf_counter() - t_start
    diverged = state["diverged"]
    finished = state["update"] >= config.num_updates and diverged is None
    if finished:
        save(runner, state["update"])
    if diverged is not None and state["good"] is not None and (
            state["saved"] is None or state["good"][1] > state["saved"]):
        save(*state["good"])  # keep the last good state for inspection (`jaxppo eval`)
    summary = logger.close(
        compile_s=driver.compile_s, wall_s=wall, finished=finished,
        env_steps_done=state["update"] * config.batch_size,
        diverged=None if diverged is None else {"run": diverged[0], "update": diverged[1]})
    if not main:
        return 3 if diverged is not None else (
            128 + state["stopped"] if state["stopped"] is not None else 0)
    metrics = read_metrics_csv(run_dir)
    from jaxppo.envs import SOLVE_THRESHOLDS

    plot_curve(os.path.join(run_dir, "curve.png"), metrics["env_steps"][0],
               metrics["episodic_return"], config.env_id, SOLVE_THRESHOLDS.get(config.env_id))
    if diverged is not None:
        kept = (f"the last good checkpoint (update {state['saved']}) is kept in {run_dir}"
                if state["saved"] is not None else "no finite state was reached to checkpoint")
        print(f"jaxppo train: error: training diverged: NaN/Inf in the loss, gradients or "
              f"parameters at update {diverged[1]} (seed {diverged[0]}); {kept}; "
              f"{DIVERGENCE_HINT}", file=sys.stderr)
        return 3
    if state["stopped"] is not None:
        name = signal.Signals(state["stopped"]).name
        print(f"stopped by {name} at update {state['update']}/{config.num_updates}; checkpoint "
              f"saved. Continue with: jaxppo train --resume {run_dir}", file=sys.stderr)
        return 128 + state["stopped"]
    line = _fmt_solved(config.env_id, summary["solved"])
    if line:
        print(line)
    rets = summary["final_return"]
    spread = f" ± {summary['final_return_std']:.1f} over {len(rets)} seeds" if len(rets) > 1 else ""
    print(f"final return: {summary['final_return_mean']:.1f}{spread} | {summary['sps']:,.0f} SPS "
          f"| compile {summary['compile_s']:.1f} s | wall {summary['wall_s']:.1f} s")
    return 0


# --------------------------------------------------------------------------------------------
# sweep
def cmd_sweep(args) -> int:
    mesh = setup_devices(args)  # before any JAX computation
    if jax_process_count() > 1:
        raise UsageError("sweep runs in one process (use --devices to shard it over this "
                         "host's devices); multi-process runs are `jaxppo train`")
    import numpy as np

    from jaxppo.driver import Driver
    from jaxppo.logger import RunLogger
    from jaxppo.plots import plot_sweep

    config = load_config(require_config(args), parse_set(args.set))
    grid = parse_grid(args.grid)
    settings = [dict(zip(grid, values, strict=False)) for values in itertools.product(*grid.values())]
    for s in settings:  # validate every setting on the host before compiling
        dataclasses.replace(config, **s)
    seeds = args.seeds or 1
    hp_list = [Hparams.from_config(dataclasses.replace(config, **s))
               for s in settings for _ in range(seeds)]
    hparams = Hparams.stack(hp_list)
    num_runs = len(hp_list)
    driver = Driver(config, num_runs, hparams=hparams, mesh=mesh, shard=args.shard)
    run_dir = make_run_dir(args.logdir, args.run_name, config, num_runs)
    from jaxppo.logger import write_config

    write_config(run_dir, config)
    import jax

    # The same seeds for every setting (common random numbers make the ranking fairer).
    keys = driver.place_keys(
        jax.numpy.tile(jax.random.split(jax.random.key(args.seed), seeds), len(settings)))
    print(f"jaxppo sweep: {config.env_id} | {len(settings)} settings x {seeds} seeds = "
          f"{num_runs} agents in one program | run dir {run_dir}", flush=True)
    t0 = time.perf_counter()
    labels = [",".join(f"{k}={v:g}" for k, v in s.items()) for s in settings]
    names = [f"{i // seeds:03d}_{labels[i // seeds]}_seed{i % seeds}" for i in range(num_runs)]
    logger = RunLogger(run_dir, config, num_runs, run_names=names,
                       progress=not args.no_progress, tensorboard=not args.no_tensorboard)
    driver.compile(keys)
    print(f"compiled in {driver.compile_s:.1f} s", flush=True)
    diverged = np.zeros(num_runs, bool)  # a diverged agent does not stop the others

    def on_chunk(runner, result):
        logger.log_chunk(result)
        diverged[:] |= np.asarray(result.metrics["nonfinite"]).any(axis=1) > 0
        return True

    driver.run(driver.init(keys), 0, on_chunk, t0)
    summary = logger.close(compile_s=driver.compile_s, wall_s=time.perf_counter() - t0,
                           finished=True, env_steps_done=config.env_steps)
    final = np.array(summary["final_return"]).reshape(len(settings), seeds)
    bad = diverged.reshape(len(settings), seeds)
    means, stds = final.mean(1), final.std(1)
    order = np.argsort(-means)
    with open(os.path.join(run_dir, "sweep.csv"), "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["rank", *grid, "final_return_mean", "final_return_std", "seeds",
                    "diverged_seeds"])
        for rank, g in enumerate(order, 1):
            w.writerow([rank, *settings[g].values(), f"{means[g]:.4f}", f"{stds[g]:.4f}", seeds,
                        int(bad[g].sum())])
    plot_sweep(os.path.join(run_dir, "sweep.png"), labels, means, stds,
               f"{config.env_id}: {seeds} seed(s) per setting")
    width = max(len(x) for x in labels)
    print(f"{'rank':>4}  {'setting':<{width}}  final return")
    for rank, g in enumerate(order, 1):
        flag = f"  (diverged: {int(bad[g].sum())}/{seeds} seeds)" if bad[g].any() else ""
        print(f"{rank:>4}  {labels[g]:<{width}}  {means[g]:8.2f} ± {stds[g]:.2f}{flag}")
    print(f"{num_runs} agents, {summary['sps']:,.0f} SPS in total, wall {summary['wall_s']:.1f} s")
    return 0


# --------------------------------------------------------------------------------------------
# eval
def cmd_eval(args) -> int:
    import jax
    import numpy as np

    from jaxppo.checkpoint import CheckpointError, load_checkpoint
    from jaxppo.evaluate import evaluate, render_gif, render_html

    try:
        ckpt = load_checkpoint(args.run_dir)
    except CheckpointError as e:
        raise UsageError(str(e)) from None
    key = jax.random.key(args.seed)
    per_run = []
    for r in range(ckpt.num_runs):
        ts = jax.tree.map(lambda x, r=r: x[r], ckpt.runner_state.train_state)
        returns, _ = evaluate(ckpt.config, ts, jax.random.fold_in(key, r), args.episodes,
                              deterministic=args.deterministic)
        per_run.append(returns)
    all_returns = np.concatenate(per_run)
    mode = "deterministic" if args.deterministic else "stochastic"
    if ckpt.num_runs > 1:
        for r, ret in enumerate(per_run):
            print(f"seed {r}: {ret.mean():.2f} ± {ret.std():.2f}")
    print(f"{ckpt.config.env_id} ({mode}, update {ckpt.update}): return {all_returns.mean():.2f} "
          f"± {all_returns.std():.2f} over {all_returns.size} episodes")
    ts = jax.tree.map(lambda x: x[0], ckpt.runner_state.train_state)
    for flag, path, render in (("--gif", args.gif, render_gif), ("--html", args.html, render_html)):
        if not path:
            continue
        try:
            length = render(ckpt.config, ts, key, path, args.deterministic)
        except RuntimeError as e:
            print(f"jaxppo eval: {flag}: {e}", file=sys.stderr)
            return 1
        print(f"wrote {path} ({length} steps)")
    return 0


# --------------------------------------------------------------------------------------------
# compare
def cmd_compare(args) -> int:
    from jaxppo import compare as cmp

    overrides = parse_set(args.set)
    if args.steps is not None:
        overrides["total_timesteps"] = args.steps
    config = load_config(require_config(args), overrides)
    systems = tuple(s.strip() for s in args.systems.split(",") if s.strip())
    unknown = [s for s in systems if s not in cmp.SYSTEMS]
    if unknown or not systems:
        raise UsageError(f"--systems: unknown {unknown or 'empty list'}; choose from "
                         f"{','.join(cmp.SYSTEMS)}")
    seeds = args.seeds or 16
    same, notes = cmp.comparable_config(config)
    out_dir = args.out or os.path.join(
        "runs", f"compare__{config.env_id}__{time.strftime('%Y%m%d-%H%M%S')}")
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise UsageError(f"--out {out_dir!r} is a file; pass a directory")
    print(f"jaxppo compare: {config.env_id}, {same.env_steps:,} steps, {args.repeats} repeat(s) "
          f"each, interleaved, one child process per run | out {out_dir}", flush=True)
    for n in notes:
        print(f"note: {n}", flush=True)
    try:
        rows, notes = cmp.compare(config, repeats=args.repeats, seeds=seeds, systems=systems,
                                  seed=args.seed, warm_cache=args.warm_cache,
                                  echo=lambda m: print(m, flush=True))
    except RuntimeError as e:
        print(f"jaxppo compare: error: {e}", file=sys.stderr)
        return 1
    cmp.add_ratios(rows)
    from jaxppo.machine import describe

    cache = "warm persistent compilation cache" if args.warm_cache else "cold compile every run"
    header = (f"{config.env_id}, {same.env_steps:,} steps per agent, medians of {args.repeats} "
              f"interleaved repeat(s); {describe()}; {cmp.versions()}; jaxppo: {cache}")
    md = cmp.write_outputs(out_dir, rows, same, notes, header)
    print()
    print(md)
    print(f"wrote {out_dir}/compare.md, compare.csv, compare.png")
    return 0


# --------------------------------------------------------------------------------------------
class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (the full usage is one `--help` away)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="jaxppo", description="PPO compiled into one lax.scan.")
    sub = p.add_subparsers(dest="command", required=True)

    def common(sp):
        sp.add_argument("--config", help=f"YAML config, e.g. {EXAMPLE_CONFIG}")
        sp.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config key (repeatable)")
        sp.add_argument("--seeds", type=positive_int("--seeds"), default=None,
                        help="number of seeds, vmapped in one compiled program")
        sp.add_argument("--seed", type=int, default=0, help="base seed (default 0)")
        sp.add_argument("--logdir", default="runs", help="parent of run directories")
        sp.add_argument("--run-name", default=None, help="run directory name")
        sp.add_argument("--no-progress", action="store_true", help="no live progress output")
        sp.add_argument("--no-cache", action="store_true",
                        help="skip JAX's persistent compilation cache")

    def devices(sp):
        g = sp.add_argument_group("devices and hosts (jax.sharding, jax.distributed)")
        g.add_argument("--devices", default=None, metavar="N|all",
                       help="shard over this many devices (default: one device, no sharding)")
        g.add_argument("--shard", choices=("seeds", "envs"), default="seeds",
                       help="split the seeds over devices, or each seed's envs (one agent)")
        g.add_argument("--coordinator-address", default=None, metavar="HOST:PORT",
                       help="process 0's address, for jax.distributed.initialize")
        g.add_argument("--num-processes", type=positive_int("--num-processes"), default=None)
        g.add_argument("--process-id", type=int, default=None)

    t = sub.add_parser("train", help="train one config (N seeds at once)")
    common(t)
    devices(t)
    t.add_argument("--checkpoint-every", type=positive_int("--checkpoint-every"), default=None,
                   metavar="UPDATES", help="save a checkpoint every this many updates")
    t.add_argument("--resume", metavar="RUN_DIR", help="continue a stopped run")
    t.set_defaults(func=cmd_train)

    s = sub.add_parser("sweep", help="grid of float hyperparameters x seeds, one compile")
    common(s)
    devices(s)
    s.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2,...")
    s.add_argument("--no-tensorboard", action="store_true", help="skip per-agent event files")
    s.set_defaults(func=cmd_sweep)

    c = sub.add_parser("compare", help="side by side with Stable-Baselines3 PPO (the compare extra)")
    c.add_argument("--config", help=f"YAML config, e.g. {EXAMPLE_CONFIG}")
    c.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    c.add_argument("--steps", type=positive_int("--steps"), default=None,
                   help="total_timesteps per agent (default: the config's)")
    c.add_argument("--repeats", type=positive_int("--repeats"), default=3,
                   help="runs per system; SPS and times are medians (default 3)")
    c.add_argument("--seeds", type=positive_int("--seeds"), default=None,
                   help="vmapped seeds for the 'jaxppo-seeds' system (default 16)")
    c.add_argument("--systems", default=",".join(("jaxppo", "jaxppo-seeds", "sb3-dummy",
                                                   "sb3-subproc")),
                   help="comma-separated subset of jaxppo,jaxppo-seeds,sb3-dummy,sb3-subproc")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--out", default=None, help="output directory (default runs/compare__...)")
    c.add_argument("--warm-cache", action="store_true",
                   help="let jaxppo use its persistent compilation cache (default: cold compiles)")
    c.add_argument("--no-cache", action="store_true", help=argparse.SUPPRESS)
    c.set_defaults(func=cmd_compare)

    e = sub.add_parser("eval", help="evaluate a run's checkpoint")
    e.add_argument("run_dir")
    e.add_argument("--episodes", type=positive_int("--episodes"), default=10)
    e.add_argument("--deterministic", dest="deterministic", action="store_true", default=True)
    e.add_argument("--stochastic", dest="deterministic", action="store_false")
    e.add_argument("--gif", metavar="PATH", help="render one episode to a GIF")
    e.add_argument("--html", metavar="PATH",
                   help="write one episode as Brax's interactive 3D viewer (Brax envs only)")
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--no-cache", action="store_true")
    e.set_defaults(func=cmd_eval)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)  # argparse itself exits 2 with one usage line on bad flags
    setup_compilation_cache(not args.no_cache)
    try:
        return args.func(args)
    except (ConfigError, UsageError) as e:
        print(f"jaxppo {args.command}: error: {e}", file=sys.stderr)
        return 2


__all__ = ["main", "build_parser"]

if __name__ == "__main__":
    sys.exit(main())
