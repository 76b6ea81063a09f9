"""The `jaxppo` command: argparse, printing and exit codes over `jaxppo.Experiment`.

    jaxppo train --config configs/cartpole.yaml [--seeds 8] [--set lr=1e-3]
    jaxppo sweep --config configs/cartpole.yaml --grid lr=1e-4,3e-4,1e-3 --seeds 4
    jaxppo sweep --config configs/cartpole.yaml --search random --trials 16 --space lr=1e-4:1e-2:log
    jaxppo sweep --config configs/cartpole.yaml --search pbt --population 16 --space lr=1e-4:1e-2:log
    jaxppo sweep --config configs/cartpole.yaml --search halving --trials 9 --space lr=1e-4:1e-2:log
    jaxppo eval runs/<run-name> --episodes 20 --gif cartpole.gif
    jaxppo compare --config configs/cartpole.yaml --repeats 3   (needs jaxppo[compare])
    jaxppo report runs/a runs/b --out report                     (IQM etc. with 95% CIs)
    jaxppo config --list                                         (every config key)

Bad input exits with status 2 and one line on stderr; Ctrl-C (or SIGTERM, SIGHUP) saves a
checkpoint at the next chunk boundary and exits with 128 + the signal; `--resume RUN_DIR`
continues. A run whose env output, normaliser, loss, gradients or parameters turn NaN/Inf (or
whose env's action mask allows nothing) stops at the next chunk boundary with status 3, keeping
its logs and the last good checkpoint; the line names the source and its fix.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

import jax

import jaxppo.compare.compare as cmp
from jaxppo._xla import setup_compilation_cache
from jaxppo.config import config_reference, load_config, parse_overrides
from jaxppo.errors import CheckpointError, ConfigError, EnvError, UsageError
from jaxppo.policy.policy import evaluate, load_policy
from jaxppo.policy.render import NoRenderer, render_gif, render_html
from jaxppo.reports.report import parse_normalize, report
from jaxppo.run.callbacks import Callback, Divergence, RunInfo
from jaxppo.run.distributed import is_main_process, join_processes, make_mesh
from jaxppo.run.experiment import Experiment, describe_divergence, run_dir_of
from jaxppo.run.files import PipeSafe, check_writable
from jaxppo.run.logs.writers import WandbLogger
from jaxppo.search import (
    SweepResult,
    grid_settings,
    parse_grid,
    parse_space,
    random_search,
    sweep_rows,
)
from jaxppo.search.halving import halving_search, is_halving
from jaxppo.search.pbt import DEFAULT_INTERVAL, DEFAULT_QUANTILE, PBTController, pbt_search
from jaxppo.search.static import group_config, has_static
from jaxppo.search.sweep import StaticSweep, is_static_sweep, sweep_from_checkpoint

EXAMPLE_CONFIG = os.path.join("configs", "cartpole.yaml")


# --------------------------------------------------------------------------------------------
# argument parsing helpers
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


def setup_devices(args):
    """Join a multi-process run if asked (before any JAX computation), then build the device
    mesh for `--devices`; None means one device, no sharding."""
    join_processes(args.coordinator_address, args.num_processes, args.process_id)
    if args.devices is None and jax.process_count() == 1:
        if args.shard != "seeds":
            raise UsageError("--shard needs --devices N|all")
        return None
    return make_mesh(args.devices or "all")


def _num(x: float) -> str:
    """A return to print: one decimal for CartPole's 500.0, three digits for MiniGrid's 0.961."""
    return f"{x:.1f}" if abs(x) >= 10 or x == 0 else f"{x:.3g}"


def _final_return(s: dict) -> str:
    """summary.json's final return as text; "none" for seeds in which no episode ended."""
    n, missing = len(s["final_return"]), s["runs_without_return"]
    bad = s.get("runs_nonfinite_return", 0)
    none = f"no episode ended in {s['env_steps']:,} steps"
    why = [f"none for {missing} of {n} seeds: {none}"] if missing else []
    why += [f"NaN/Inf for {bad} of {n} seeds: diverged"] if bad else []
    if s["final_return_mean"] is None:
        return f"none ({'; '.join(why) if bad else none})"
    have = n - missing - bad
    text = _num(s["final_return_mean"])
    if have > 1:
        text += f" ± {_num(s['final_return_std'])} over {have} seeds"
    return text + (f" ({'; '.join(why)})" if why else "")


def _eval_return(returns, completed, per_seed: bool = False) -> str:
    """The mean ± std of the completed episodes' returns; a cut-off episode (still running at
    the step cap) is counted apart, and "none" is all there is when none completed."""
    n, cut = returns.size, int((~completed).sum())
    if cut == n:
        return f"none (all {n} episodes cut off)"
    done = returns[completed]
    text = f"{done.mean():.2f} ± {done.std():.2f}"
    if not per_seed:
        text += f" over {done.size} {'completed ' if cut else ''}episodes"
    return text + (f" ({cut} of {n} cut off)" if cut else "")


class _Header(Callback):
    """The CLI's first lines: what runs where, the compile time (when no progress display says
    it), and where a resumed run picks up."""

    def __init__(self, what: str, progress: bool):
        self.what, self.progress = what, progress

    def on_start(self, info: RunInfo) -> None:
        c = info.config
        where = f" | {info.description}" if info.description else ""
        print(f"{self.what} | {c.env_steps:,} steps ({c.num_updates} updates of "
              f"{c.batch_size}){where} | run dir {info.run_dir}", flush=True)

    def on_compiled(self, info: RunInfo, compile_s: float) -> None:
        if not self.progress:
            print(f"compiled in {compile_s:.1f} s ({info.chunk_updates} updates per chunk)",
                  flush=True)
        if info.start_update:
            print(f"resuming at update {info.start_update}/{info.config.num_updates}", flush=True)


def _run(exp: Experiment, args, what: str, resume_dir: str | None = None):
    """Run `exp` with the CLI's own callbacks; `(result, None)`, or `(None, exit status)` after
    one line for a run stopped at once (a second signal) or a file system failure. `resume_dir`:
    what `--resume` continues, when not the run's own directory (a static sweep's)."""
    if is_main_process():
        extra = [WandbLogger(project=args.wandb_project)] if args.wandb else []
        exp.callbacks = [_Header(what, exp.progress), *exp.callbacks, *extra]
    try:
        return exp.run(), None
    except KeyboardInterrupt as e:  # a second signal (StopNow), or Ctrl-C while compiling
        signum = getattr(e, "signum", signal.SIGINT)
        problem, code = f"stopped at once by {signal.Signals(signum).name}", 128 + signum
    except OSError as e:
        where = e.filename or exp.last_run_dir
        problem, code = f"cannot write the run directory ({e.strerror or e}: {where})", 1
    run_dir = exp.last_run_dir
    sweep_rest = (f"; the groups before it are kept: continue with: jaxppo {args.command} "
                  f"--resume {resume_dir}" if resume_dir else "")
    if run_dir and os.path.exists(os.path.join(run_dir, "checkpoint")):
        print(f"jaxppo {args.command}: error: {problem}; the newest checkpoint is kept; "
              f"continue with: jaxppo {args.command} --resume {resume_dir or run_dir}",
              file=sys.stderr)
    elif run_dir and os.path.exists(os.path.join(run_dir, "metrics.csv")):
        print(f"jaxppo {args.command}: error: {problem}; the logs are kept in {run_dir} (no "
              f"checkpoint had been saved yet){sweep_rest}", file=sys.stderr)
    else:
        gone = "" if run_dir and os.path.exists(run_dir) else " (no run directory is left)"
        group = " in this group" if resume_dir else ""
        print(f"jaxppo {args.command}: error: {problem}; nothing had run yet{group}{gone}"
              f"{sweep_rest}", file=sys.stderr)
    return None, code


def _stopped(result, command: str, resume_dir: str | None = None) -> int | None:
    """The exit status (after one line) of a run that stopped early; None if it finished.
    `resume_dir`: what `--resume` continues, when not the run's own directory."""
    if result.diverged is not None and command == "train":  # a sweep goes on: cmd_sweep
        what, fix = describe_divergence(result.diverged, result.config)
        kept = (f"the last good checkpoint (update {result.good_update}) is kept in "
                f"{result.run_dir}" if result.good_update else
                f"no finite state was reached to checkpoint (the logs are in {result.run_dir})")
        print(f"jaxppo {command}: error: {what}; {kept}; {fix}", file=sys.stderr)
        return 3
    if result.stop_signal is not None:
        name = signal.Signals(result.stop_signal).name
        print(f"stopped by {name} at update {result.update}/{result.config.num_updates}; "
              f"checkpoint saved. Continue with: jaxppo {command} --resume "
              f"{resume_dir or result.run_dir}",
              file=sys.stderr)
        return 128 + result.stop_signal
    return None


# --------------------------------------------------------------------------------------------
def cmd_train(args) -> int:
    if args.help_config:
        return cmd_config(args)
    mesh = setup_devices(args)  # before any JAX computation
    opts = dict(progress=not args.no_progress, mesh=mesh, shard=args.shard,
                checkpoint_every=args.checkpoint_every)
    if args.resume:
        _refuse_with_resume(args)
        exp = Experiment.from_checkpoint(args.resume, repair_log=args.repair_log, **opts)
    else:
        _refuse_repair_log(args)
        config = load_config(require_config(args), parse_overrides(args.set))
        exp = Experiment(config, seeds=args.seeds or 1, seed=args.seed or 0,
                         logdir=args.logdir or "runs", run_name=args.run_name, **opts)
    result, code = _run(exp, args, f"jaxppo: {exp.config.env_id} | {exp.num_runs} seed(s)")
    if result is None:
        return code
    if result.rebuilt:
        _say_rebuilt(result)
        return 0
    code = _stopped(result, "train")
    if code is not None or not is_main_process():
        return code or 0
    s = result.summary
    if result.solved:
        print(f"{exp.config.env_id} solved in {result.solved['wall_s']:.1f} s after "
              f"{result.solved['episodes']:,.0f} episodes ({result.solved['env_steps']:,} steps)")
    print(f"final return: {_final_return(s)} | {s['sps']:,.0f} SPS "
          f"| compile {s['compile_s']:.1f} s | wall {s['wall_s']:.1f} s")
    return 0


def _refuse_repair_log(args) -> None:
    if args.repair_log:
        raise UsageError("--repair-log repairs the metrics.csv of a run being resumed; use it "
                         "with --resume RUN_DIR")


def _say_rebuilt(result) -> None:
    """The line for a resume of a finished run that only rebuilt its missing results."""
    print(f"run '{result.run_dir}' had finished (update {result.update}/"
          f"{result.config.num_updates}); rebuilt {', '.join(result.rebuilt)} from its "
          "checkpoint's running account, nothing was trained")


def _refuse_with_resume(args) -> None:
    given = [f for f, v in (("--config", args.config), ("--set", args.set),
                            ("--seeds", args.seeds), ("--seed", args.seed),
                            ("--run-name", args.run_name), ("--logdir", args.logdir),
                            ("--grid", getattr(args, "grid", None)),
                            ("--space", getattr(args, "space", None)),
                            ("--search", getattr(args, "search", None)),
                            ("--trials", getattr(args, "trials", None)),
                            ("--population", getattr(args, "population", None)),
                            ("--interval", getattr(args, "interval", None)),
                            ("--quantile", getattr(args, "quantile", None)),
                            ("--eta", getattr(args, "eta", None))) if v]
    if given:
        raise UsageError(f"--resume continues a run with its own config, seeds and run "
                         f"directory: drop {', '.join(given)}")


def _sweep_settings(args, config) -> tuple[list[dict], dict | None]:
    """A sweep's settings: `--grid`'s every combination, or `--trials` drawn from `--space`
    (`--search random`, or `halving`: the same draw, trained in rungs), or a PBT population's
    initial draw (`--search pbt`), with the sweep's seed; and the search's record (None for a
    grid)."""
    pbt_flags = [f for f, v in (("--population", args.population), ("--interval", args.interval),
                                ("--quantile", args.quantile)) if v is not None]
    if args.eta is not None and args.search != "halving":
        raise UsageError("--eta is for --search halving (the share of settings kept after "
                         "each rung is 1/eta)")
    if args.search == "pbt":
        if args.grid or args.trials is not None:
            raise UsageError(f"{'--grid' if args.grid else '--trials'} is not for --search pbt, "
                             "which trains --population N members drawn from --space")
        if args.seeds not in (None, 1):
            raise UsageError(f"--seeds {args.seeds} with --search pbt: every member is one seed "
                             "of its own; size the search with --population N")
        if args.population is None:
            raise UsageError("--search pbt needs --population N (how many members, at least 2)")
        if not args.space:
            raise UsageError("--search pbt needs at least one --space KEY=LOW:HIGH[:log] (or "
                             "KEY=a,b,c)")
        if args.devices is not None:
            raise UsageError("--search pbt runs on one device; drop --devices")
        return pbt_search(config, parse_space(args.space), args.population,
                          DEFAULT_INTERVAL if args.interval is None else args.interval,
                          DEFAULT_QUANTILE if args.quantile is None else args.quantile,
                          args.seed or 0, cli=True)
    if pbt_flags:
        raise UsageError(f"{pbt_flags[0]} is for --search pbt")
    if (args.search or "grid") == "grid":
        if args.space:
            raise UsageError("--space is for --search random; a grid sweep takes --grid "
                             "KEY=V1,V2,...")
        if args.trials is not None:
            raise UsageError("--trials is for --search random (a grid runs every combination)")
        return grid_settings(parse_grid(args.grid)), None
    if args.grid:
        raise UsageError(f"--grid is for --search grid; a {args.search} search takes --space "
                         "KEY=LOW:HIGH[:log] or KEY=a,b,c")
    if args.trials is None:
        raise UsageError(f"--search {args.search} needs --trials N (how many settings to draw)")
    if args.search == "halving":
        return halving_search(config, parse_space(args.space, "halving"), args.trials,
                              3 if args.eta is None else args.eta, args.seed or 0, cli=True)
    return random_search(config, parse_space(args.space), args.trials, args.seed or 0, cli=True)


def cmd_sweep(args) -> int:
    if args.help_config:
        return cmd_config(args)
    mesh = setup_devices(args)  # before any JAX computation
    if jax.process_count() > 1:
        raise UsageError("sweep runs in one process (use --devices to shard it over this "
                         "host's devices); multi-process runs are `jaxppo train`")
    opts = dict(progress=not args.no_progress, tensorboard=not args.no_tensorboard, mesh=mesh,
                shard=args.shard, checkpoint_every=args.checkpoint_every)
    if args.resume:
        _refuse_with_resume(args)
        if is_static_sweep(args.resume):
            return _static_sweep(StaticSweep.from_dir(args.resume, repair_log=args.repair_log,
                                                      **opts), args)
        exp = sweep_from_checkpoint(args.resume, repair_log=args.repair_log, **opts)
    else:
        _refuse_repair_log(args)
        config = load_config(require_config(args), parse_overrides(args.set))
        settings, search = _sweep_settings(args, config)
        if has_static(settings):
            return _static_sweep(StaticSweep.start(
                config, settings, args.seeds or 1, search, where=args.search or "grid", cli=True,
                seed=args.seed or 0, logdir=args.logdir or "runs", run_name=args.run_name,
                **opts), args)
        pbt = search is not None and search.get("strategy") == "pbt"
        exp = Experiment(config, seeds=args.seeds or 1, hparams=settings, seed=args.seed or 0,
                         logdir=args.logdir or "runs", run_name=args.run_name, search=search,
                         controller=(PBTController.from_record(config, search, settings)
                                     if pbt else None), **opts)
    n = len(exp.settings)
    if exp.controller is not None:
        what = (f"PBT: {n} members in one program, exploit/explore every "
                f"{exp.search['interval']} updates")
    else:
        how = "in rungs (successive halving)" if is_halving(exp.search) else "in one program"
        what = f"{n} settings x {exp.seeds} seeds = {exp.num_runs} agents {how}"
    result, code = _run(exp, args, f"jaxppo sweep: {exp.config.env_id} | {what}")
    if result is None:
        return code
    code = _stopped(result, "sweep")
    if code is not None:
        return code
    print(SweepResult(sweep_rows(result), result, result.run_dir).table())
    if "pbt" in result.summary:
        print(f"PBT: {result.summary['pbt']['exploits']} exploits (pbt.csv); each member's "
              "hyperparameters over time in hparams.csv; the settings above are the final ones")
    if result.rebuilt:
        _say_rebuilt(result)
    s = result.summary
    if result.diverged is not None:  # the first diverged agent's cause, by its source
        d = result.diverged
        what, fix = describe_divergence(d, result.config, f"agent {d.run}: "
                                        f"{exp.run_names()[d.run]}")
        n = len(s["diverged_runs"])
        if result.status == "diverged":
            print(f"jaxppo sweep: error: every agent diverged ({n} of {exp.num_runs}); the "
                  f"first: {what}; {fix}", file=sys.stderr)
            return 3
        print(f"note: {n} of {exp.num_runs} agents diverged; the first: {what}; {fix}",
              file=sys.stderr)
    rescued = sorted({d["run"] for d in s.get("divergences", [])} - set(s["diverged_runs"]))
    if rescued and "pbt" in s:
        print(f"note: agent(s) {' '.join(map(str, rescued))} went NaN/Inf and PBT's exploit "
              "replaced their learner with a healthy one (summary.json: divergences)",
              file=sys.stderr)
    if result.rebuilt:
        return 0
    print(f"{exp.num_runs} agents, {s['sps']:,.0f} SPS in total, wall {s['wall_s']:.1f} s")
    return 0


def _static_sweep(sw: StaticSweep, args) -> int:
    """A sweep over static settings: each group one compiled program, run one after another
    through `_run` (the same lines as one sweep's), then the table over every setting."""
    n, todo = len(sw.groups), len(sw.pending())
    done = f"{n - todo} finished, " if todo < n else ""
    print(f"jaxppo sweep: {n} static settings: {done}{todo} compile{'s' * (todo != 1)}, one "
          f"program each, run one after another | sweep dir {sw.run_dir}", flush=True)
    failed = []

    def run_group(exp: Experiment, group) -> object:
        what = (f"jaxppo sweep: {exp.config.env_id} | {group.name}: {len(exp.settings)} "
                f"settings x {exp.seeds} seeds = {exp.num_runs} agents in one program")
        result, code = _run(exp, args, what, resume_dir=sw.run_dir)
        failed.append(code)
        return result

    try:
        table = sw.run(run_group)
    except KeyboardInterrupt as e:  # between two groups' runs: each group's files are safe
        signum = getattr(e, "signum", signal.SIGINT)
        print(f"jaxppo sweep: error: stopped at once by {signal.Signals(signum).name}; the "
              f"groups that ran are kept; continue with: jaxppo sweep --resume {sw.run_dir}",
              file=sys.stderr)
        return 128 + signum
    if table is None:
        return failed[-1]
    if table.result is not None:
        code = _stopped(table.result, "sweep", sw.run_dir)
        if code is not None:
            return code
    print(table.table())
    best = table.best
    print(f"each setting's agents are in its group's run dir (sweep.csv: group, runs); the "
          f"best's are runs {' '.join(map(str, best['runs']))} of: jaxppo eval {best['run_dir']}")
    s = table.summary
    diverged = [(g, o) for g, o in zip(sw.groups, table.groups, strict=True)
                if o.summary.get("diverged")]
    if diverged:  # the first diverged agent's cause, by its source
        g, o = diverged[0]
        d = Divergence(**o.summary["diverged"])
        what, fix = describe_divergence(d, group_config(sw.config, g),
                                        f"agent {d.run} of {g.name}")
        n_bad = sum(int(o.diverged.sum()) for o in table.groups)
        if s["status"] == "diverged":
            print(f"jaxppo sweep: error: every agent diverged ({n_bad} of {sw.num_runs}); the "
                  f"first: {what}; {fix}", file=sys.stderr)
            return 3
        print(f"note: {n_bad} of {sw.num_runs} agents diverged; the first: {what}; {fix}",
              file=sys.stderr)
    print(f"{sw.num_runs} agents in {n} programs ({n} static settings; {todo} compiled in this "
          f"session), wall {s['wall_s']:.1f} s")
    return 0


def cmd_eval(args) -> int:
    if is_static_sweep(args.run_dir):
        first = sorted(d for d in os.listdir(args.run_dir)
                       if os.path.isdir(os.path.join(args.run_dir, d, "checkpoint")))
        raise UsageError(f"'{args.run_dir}' is a sweep over static settings: each static "
                         "setting is a run directory of its own (sweep.csv: group); evaluate "
                         f"one: jaxppo eval {os.path.join(args.run_dir, (first or ['GROUP'])[0])}")
    for path, what in ((args.gif, "GIF"), (args.html, "HTML")):
        if path is not None:  # '' too: an empty path is bad input, not "no GIF"
            check_writable(path, what)  # before any episode is played
    out = os.path.join(run_dir_of(args.run_dir), "eval.json") if args.json else None
    if out is not None and os.path.isdir(run_dir_of(args.run_dir)):
        try:
            check_writable(out, "eval.json")
        except UsageError as e:
            print(f"note: {e} (or --no-json); evaluating without it", file=sys.stderr)
            out = None
    res = evaluate(args.run_dir, args.episodes, seed=args.seed, deterministic=args.deterministic,
                   out=out)
    mode = "deterministic" if args.deterministic else "stochastic"
    done = res.completed  # an episode cut off at the step cap has no return, only a sum
    agent = 0 if args.agent is None else args.agent
    per_run = res.updates_per_run or [res.update] * res.returns.shape[0]
    ragged = len(set(per_run)) > 1  # a halving sweep: agents stopped at their rungs
    update = res.update
    if args.agent is not None:  # one agent of a sweep (a PBT member, a row's `runs` entry)
        if not 0 <= args.agent < res.returns.shape[0]:
            raise UsageError(f"--agent {args.agent}: this run has agents 0.."
                             f"{res.returns.shape[0] - 1} (a sweep row's runs, a PBT member)")
        one = slice(agent, agent + 1)
        res = res._replace(returns=res.returns[one], lengths=res.lengths[one],
                           cut_off=None if res.cut_off is None else res.cut_off[one],
                           updates_per_run=per_run[one])
        update = per_run[agent]
        done = res.completed
        print(f"agent {agent}:", end=" ")
    elif res.returns.shape[0] > 1:
        for r, ret in enumerate(res.returns):
            went = f" (update {per_run[r]})" if ragged else ""
            print(f"seed {r}: {_eval_return(ret, done[r], per_seed=True)}{went}")
    print(f"{res.env_id} ({mode}, update {update}): return "
          f"{_eval_return(res.returns, done)}")
    if not done.all():
        print(f"note: {int((~done).sum())} of {done.size} episodes were still running at the "
              f"evaluation's cap of {res.max_steps} steps (the env states no shorter time "
              "limit; set max_episode_steps to give it one): cut off, left out of the mean, "
              "marked in eval.json (cut_off)", file=sys.stderr)
    for flag, path, render in (("--gif", args.gif, render_gif), ("--html", args.html, render_html)):
        if not path:
            continue
        policy = load_policy(args.run_dir, agent)
        try:
            length = render(policy.config, policy.train_state, jax.random.key(args.seed), path,
                            args.deterministic)
        except NoRenderer as e:  # the evaluation stands: one line, its exit status
            print(f"jaxppo eval: {flag}: {e}; no GIF written", file=sys.stderr)
            continue
        except RuntimeError as e:
            print(f"jaxppo eval: {flag}: {e}", file=sys.stderr)
            return 1
        print(f"wrote {path} ({length} steps)")
    return 0


def cmd_compare(args) -> int:
    overrides = parse_overrides(args.set)
    if args.steps is not None:
        overrides["total_timesteps"] = args.steps
    config = load_config(require_config(args), overrides)
    systems = tuple(s.strip() for s in args.systems.split(",") if s.strip())
    unknown = [s for s in systems if s not in cmp.SYSTEMS]
    if unknown or not systems:
        raise UsageError(f"--systems: unknown {unknown or 'empty list'}; choose from "
                         f"{','.join(cmp.SYSTEMS)}")
    out_dir = args.out or os.path.join(
        "runs", f"compare__{config.env_id}__{time.strftime('%Y%m%d-%H%M%S')}")
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise UsageError(f"--out {out_dir!r} is a file; pass a directory")
    try:  # before any run: an unwritable --out is found now, not after an hour of runs
        os.makedirs(out_dir, exist_ok=True)
    except OSError as e:
        raise UsageError(f"--out {out_dir!r}: cannot create it ({e.strerror}); pass a writable "
                         "directory") from None
    check_writable(os.path.join(out_dir, "compare.md"), "--out")
    try:
        md = cmp.compare_and_report(config, out_dir, repeats=args.repeats, seeds=args.seeds or 16,
                                    systems=systems, seed=args.seed, warm_cache=args.warm_cache,
                                    echo=lambda m: print(m, flush=True))
    except RuntimeError as e:
        print(f"jaxppo compare: error: {e}", file=sys.stderr)
        return 1
    print()
    print(md)
    print(f"wrote {out_dir}/compare.md, compare.csv, compare.png")
    return 0


def cmd_report(args) -> int:
    rep = report(args.run_dirs, args.out, reps=args.reps, seed=args.seed,
                 normalize=parse_normalize(args.normalize), gap_threshold=args.gap_threshold,
                 source=args.source)
    print(rep.table())
    print(f"wrote {rep.out}/: {', '.join(rep.data['files'])}")
    return 0


def cmd_config(args) -> int:
    """Every config key with its type, default and meaning (`PPOConfig`'s field docstrings)."""
    if not (getattr(args, "list", False) or getattr(args, "help_config", False)):
        raise UsageError("give --list (every config key with its type, default and "
                         "meaning)")
    rows = [("key", "type", "default", "meaning"), *config_reference()]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row[:3], widths, strict=True)) + "  " + row[3])
    return 0


# --------------------------------------------------------------------------------------------
class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (the full usage is one `--help` away)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="jaxppo", description="PPO compiled into one lax.scan.")
    p.add_argument("--no-cache", action="store_true",
                   help="skip JAX's persistent compilation cache")
    sub = p.add_subparsers(dest="command", required=True)

    def common(sp):
        sp.add_argument("--config", help=f"YAML config, e.g. {EXAMPLE_CONFIG}")
        sp.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config key (repeatable)")
        sp.add_argument("--seeds", type=positive_int("--seeds"), default=None,
                        help="number of seeds, vmapped in one compiled program")
        sp.add_argument("--seed", type=int, default=None, help="base seed (default 0)")
        sp.add_argument("--logdir", default=None, help="parent of run directories (default runs)")
        sp.add_argument("--run-name", default=None, help="run directory name")
        sp.add_argument("--no-progress", action="store_true", help="no live progress output")
        sp.add_argument("--help-config", action="store_true",
                        help="list every config key (type, default, meaning) and exit")
        sp.add_argument("--no-cache", action="store_true", default=argparse.SUPPRESS,
                        help="skip JAX's persistent compilation cache")
        sp.add_argument("--wandb", action="store_true",
                        help="also log to Weights & Biases (pip install 'jaxppo[wandb]')")
        sp.add_argument("--wandb-project", default="jaxppo", help="W&B project (default jaxppo)")
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
    t.add_argument("--checkpoint-every", type=positive_int("--checkpoint-every"), default=None,
                   metavar="UPDATES", help="save a checkpoint every this many updates")
    t.add_argument("--resume", metavar="RUN_DIR", help="continue a stopped run")
    t.add_argument("--repair-log", action="store_true",
                   help="with --resume: keep a damaged metrics.csv's good rows and record the "
                        "rows it lost (they cannot be recreated) instead of refusing")
    t.set_defaults(func=cmd_train)

    s = sub.add_parser("sweep", help="grid (or random search) x seeds: the float "
                                     "hyperparameters in one compile, one per static setting")
    common(s)
    s.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2,...")
    s.add_argument("--search", choices=("grid", "random", "halving", "pbt"), default=None,
                   help="grid (default): every --grid combination; random: --trials settings "
                        "drawn from --space with --seed; halving: the same draw, trained in "
                        "rungs, keeping the best 1/--eta after each; pbt: population-based "
                        "training of --population members drawn so")
    s.add_argument("--space", action="append", default=[], metavar="KEY=LOW:HIGH[:log]|a,b,c",
                   help="with --search random/halving/pbt: a key's range or choices (a static "
                        "key: choices, and only with --search random)")
    s.add_argument("--trials", type=positive_int("--trials"), default=None, metavar="N",
                   help="with --search random/halving: how many settings to draw")
    s.add_argument("--eta", type=int, default=None, metavar="ETA",
                   help="with --search halving: keep the best 1/ETA of the settings after "
                        "each rung (default 3)")
    s.add_argument("--population", type=int, default=None, metavar="N",
                   help="with --search pbt: how many members (at least 2)")
    s.add_argument("--interval", type=int, default=None, metavar="U",
                   help=f"with --search pbt: exploit/explore every U updates (default "
                        f"{DEFAULT_INTERVAL})")
    s.add_argument("--quantile", type=float, default=None, metavar="Q",
                   help=f"with --search pbt: the bottom Q copy the top Q (default "
                        f"{DEFAULT_QUANTILE}; at most 0.5)")
    s.add_argument("--no-tensorboard", action="store_true", help="skip per-agent event files")
    s.add_argument("--checkpoint-every", type=positive_int("--checkpoint-every"), default=None,
                   metavar="UPDATES", help="save a checkpoint every this many updates")
    s.add_argument("--resume", metavar="RUN_DIR", help="continue a stopped sweep")
    s.add_argument("--repair-log", action="store_true",
                   help="with --resume: keep a damaged metrics.csv's good rows and record the "
                        "rows it lost (they cannot be recreated) instead of refusing")
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
    c.add_argument("--systems", default=",".join(cmp.SYSTEMS),
                   help=f"comma-separated subset of {','.join(cmp.SYSTEMS)}")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--out", default=None, help="output directory (default runs/compare__...)")
    c.add_argument("--warm-cache", action="store_true",
                   help="let jaxppo use its persistent compilation cache (default: cold compiles)")
    c.add_argument("--no-cache", action="store_true", default=argparse.SUPPRESS,
                   help=argparse.SUPPRESS)
    c.set_defaults(func=cmd_compare)

    e = sub.add_parser("eval", help="evaluate a run's checkpoint (every seed in one program)")
    e.add_argument("run_dir")
    e.add_argument("--episodes", type=positive_int("--episodes"), default=10)
    e.add_argument("--deterministic", dest="deterministic", action="store_true", default=True)
    e.add_argument("--stochastic", dest="deterministic", action="store_false")
    e.add_argument("--gif", metavar="PATH", help="render one episode to a GIF")
    e.add_argument("--html", metavar="PATH",
                   help="write one episode as Brax's interactive 3D viewer (Brax envs only)")
    e.add_argument("--seed", type=int, default=0, help="evaluation seed (default 0)")
    e.add_argument("--agent", type=int, default=None, metavar="M",
                   help="only agent M of a multi-seed run or sweep (a row's runs, a PBT member); "
                        "its return, and its GIF/HTML (default: every agent, GIF of agent 0)")
    e.add_argument("--no-json", dest="json", action="store_false",
                   help="do not write RUN_DIR/eval.json (per-seed returns)")
    e.add_argument("--no-cache", action="store_true", default=argparse.SUPPRESS,
                   help=argparse.SUPPRESS)
    e.set_defaults(func=cmd_eval)

    r = sub.add_parser("report", help="mean, median, IQM and optimality gap with 95%% "
                                      "bootstrap intervals over seeds; curves, profiles")
    r.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    r.add_argument("--out", default=None, metavar="DIR",
                   help="where report.json and the PNGs go (default RUN_DIR/report for one "
                        "run, else report__<time> beside the first)")
    r.add_argument("--reps", type=positive_int("--reps"), default=2000,
                   help="bootstrap resamples (default 2000)")
    r.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    r.add_argument("--normalize", action="append", default=[], metavar="ENV=LOW,HIGH|raw",
                   help="min-max reference returns per env (LOW -> 0, HIGH -> 1; repeatable), "
                        "needed for runs of different envs; or raw")
    r.add_argument("--gap-threshold", type=float, default=None, metavar="GAMMA",
                   help="the optimality gap's threshold (default: the env's solve threshold, "
                        "1 when normalised)")
    r.add_argument("--source", choices=("auto", "eval", "final"), default="auto",
                   help="scores from eval.json (auto: where present) or the final training "
                        "return")
    r.add_argument("--no-cache", action="store_true", default=argparse.SUPPRESS,
                   help=argparse.SUPPRESS)
    r.set_defaults(func=cmd_report)

    k = sub.add_parser("config", help="the config keys: --list prints each with type, default "
                                      "and meaning")
    k.add_argument("--list", action="store_true", help="list every config key")
    k.add_argument("--no-cache", action="store_true", default=argparse.SUPPRESS,
                   help=argparse.SUPPRESS)
    k.set_defaults(func=cmd_config)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)  # argparse itself exits 2 with one usage line on bad flags
    setup_compilation_cache(not args.no_cache)
    stdout, sys.stdout = sys.stdout, PipeSafe(sys.stdout)
    try:
        return args.func(args)
    except (ConfigError, UsageError, CheckpointError, EnvError) as e:
        print(f"jaxppo {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # before a run started (a run's own interrupt is handled in _run)
        print(f"jaxppo {args.command}: interrupted; nothing was run", file=sys.stderr)
        return 130
    finally:
        sys.stdout.flush()  # while a closed reader is still caught
        sys.stdout = stdout


__all__ = ["main", "build_parser"]

