"""`jaxppo sweep`: a search's settings x seeds in one compiled program (one per static
setting). The strategies, their flags and their dispatch are `jaxppo.search.strategies`'
table: this verb only reads it."""

from __future__ import annotations

import signal
import sys

import jax

from jaxppo.cli.common import (
    add_resume_args,
    add_run_args,
    import_modules,
    load_run_config,
    print_note,
    refuse_repair_log,
    refuse_with_resume,
    run_experiment,
    say_rebuilt,
    setup_devices,
    since_start,
    stopped,
    timing_text,
)
from jaxppo.cli.config import list_config
from jaxppo.errors import UsageError
from jaxppo.run.divergence import describe_divergence
from jaxppo.run.events import Divergence
from jaxppo.run.experiment import Experiment
from jaxppo.run.sweep_table import sweep_rows
from jaxppo.rundir import names
from jaxppo.rundir.plan import is_static_sweep
from jaxppo.search.static import group_config, has_static
from jaxppo.search.static_sweep import StaticSweep
from jaxppo.search.strategies import OPTIONS, STRATEGIES, draw
from jaxppo.search.sweep import sweep_from_checkpoint
from jaxppo.search.table import SweepResult


def add_parser(sub) -> None:
    s = sub.add_parser("sweep", help="grid (or random search) x seeds: the float "
                                     "hyperparameters in one compile, one per static setting")
    add_run_args(s)
    s.add_argument("--search", choices=tuple(STRATEGIES), default=None,
                   help="; ".join(f"{name}{' (default)' if name == 'grid' else ''}: {s.help}"
                                  for name, s in STRATEGIES.items()))
    for o in OPTIONS.values():  # each strategy's own options, from its row of the table
        s.add_argument(f"--{o.name}", type=o.type, metavar=o.metavar, help=o.help,
                       **({"action": "append", "default": []} if o.repeat else {"default": None}))
    add_resume_args(s, "sweep")
    s.set_defaults(func=cmd_sweep)


def cmd_sweep(args) -> int:
    if args.help_config:
        return list_config()
    mesh = setup_devices(args)  # before any JAX computation
    if jax.process_count() > 1:
        raise UsageError("sweep runs in one process (use --devices to shard it over this "
                         "host's devices); multi-process runs are `jaxppo train`")
    opts = dict(progress=not args.no_progress, tensorboard=not args.no_tensorboard, mesh=mesh,
                shard=args.shard, checkpoint_every=args.checkpoint_every)
    if args.resume:
        refuse_with_resume(args)
        import_modules(args)  # a sweep from before env_imports: its env's module
        if is_static_sweep(args.resume):
            return _static_sweep(StaticSweep.from_dir(args.resume, repair_log=args.repair_log,
                                                      **opts), args)
        exp = sweep_from_checkpoint(args.resume, repair_log=args.repair_log, **opts)
    else:
        refuse_repair_log(args)
        config = load_run_config(args)
        search = args.search or "grid"
        options = {name: getattr(args, name) for name in OPTIONS
                   if getattr(args, name) not in (None, [])}
        settings, record, controller = draw(search, config, options, seeds=args.seeds,
                                            seed=args.seed or 0, devices=args.devices, cli=True)
        if has_static(settings):
            return _static_sweep(StaticSweep.start(
                config, settings, args.seeds or 1, record, where=search, cli=True,
                seed=args.seed or 0, logdir=args.logdir or "runs", run_name=args.run_name,
                **opts), args)
        exp = Experiment(config, seeds=args.seeds or 1, hparams=settings, seed=args.seed or 0,
                         logdir=args.logdir or "runs", run_name=args.run_name, search=record,
                         controller=controller, **opts)
    strategy = STRATEGIES[(exp.search or {}).get("strategy") or "grid"]
    what = strategy.describe(exp.search, len(exp.settings), exp.seeds)
    result, code = run_experiment(exp, args, f"jaxppo sweep: {exp.config.env_id} | {what}")
    if result is None:
        return code
    code = stopped(result, "sweep")
    if code is not None:
        return code
    print(SweepResult(sweep_rows(result), result, result.run_dir).table())
    for line in strategy.closing(result.summary):
        print(line)
    if result.rebuilt:
        say_rebuilt(result)
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
        print_note(f"{n} of {exp.num_runs} agents diverged; the first: {what}; {fix}")
    rescued = sorted({d["run"] for d in s.get("divergences", [])} - set(s["diverged_runs"]))
    if rescued:  # only a controller renews a learner (PBT's exploit)
        print_note(f"agent(s) {' '.join(map(str, rescued))} went NaN/Inf and {strategy.name}'s "
                   f"exploit replaced their learner with a healthy one ({names.SUMMARY}: "
                   "divergences)")
    if result.rebuilt:
        return 0
    print(f"{exp.num_runs} agents, {s['sps']:,.0f} SPS in total | {timing_text(args, result)}")
    return 0


def _static_sweep(sw: StaticSweep, args) -> int:
    """A sweep over static settings: each group one compiled program, run one after another
    through `run_experiment` (the same lines as one sweep's), then the table over every setting."""
    n, todo = len(sw.groups), len(sw.pending())
    done = f"{n - todo} finished, " if todo < n else ""
    print(f"jaxppo sweep: {n} static settings: {done}{todo} compile{'s' * (todo != 1)}, one "
          f"program each, run one after another | sweep dir {sw.run_dir}", flush=True)
    failed = []

    def run_group(exp: Experiment, group) -> object:
        what = (f"jaxppo sweep: {exp.config.env_id} | {group.name}: {len(exp.settings)} "
                f"settings x {exp.seeds} seeds = {exp.num_runs} agents in one program")
        result, code = run_experiment(exp, args, what, resume_dir=sw.run_dir)
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
        code = stopped(table.result, "sweep", sw.run_dir)
        if code is not None:
            return code
    print(table.table())
    best = table.best
    print(f"each setting's agents are in its group's run dir ({names.SWEEP}: group, runs); the "
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
        print_note(f"{n_bad} of {sw.num_runs} agents diverged; the first: {what}; {fix}")
    print(f"{sw.num_runs} agents in {n} programs ({n} static settings; {todo} compiled in this "
          f"session), wall {since_start(args):.1f} s since the command started")
    return 0
