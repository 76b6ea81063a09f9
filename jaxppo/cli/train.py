"""`jaxppo train`: one config, N seeds in one compiled program; `--resume` continues a
stopped run."""

from __future__ import annotations

from jaxppo.cli.common import (
    add_resume_args,
    add_run_args,
    final_return_text,
    import_modules,
    load_run_config,
    refuse_repair_log,
    refuse_with_resume,
    run_experiment,
    runs_text,
    say_rebuilt,
    setup_devices,
    stopped,
    timing_text,
)
from jaxppo.cli.config import list_config
from jaxppo.errors import UsageError
from jaxppo.process import stop_point
from jaxppo.run.distributed import is_main_process
from jaxppo.run.experiment import Experiment
from jaxppo.run.memory import check_run_count


def add_parser(sub) -> None:
    t = sub.add_parser("train", help="train one config (N seeds at once)")
    add_run_args(t)
    add_resume_args(t, "run")
    t.set_defaults(func=cmd_train)


def cmd_train(args) -> int:
    if args.help_config:
        return list_config()
    if args.seeds:  # before anything else: a count no program holds
        check_run_count(args.seeds, f"--seeds {args.seeds}", UsageError,
                        "run fewer seeds, in several runs")
    mesh = setup_devices(args)  # before any JAX computation
    opts = dict(progress=not args.no_progress, tensorboard=not args.no_tensorboard, mesh=mesh,
                shard=args.shard, checkpoint_every=args.checkpoint_every)
    if args.resume:
        refuse_with_resume(args)
        import_modules(args)  # a run from before env_imports: its env's module
        exp = Experiment.from_checkpoint(args.resume, repair_log=args.repair_log, **opts)
    else:
        refuse_repair_log(args)
        config = load_run_config(args)
        exp = Experiment(config, seeds=args.seeds or 1, seed=args.seed or 0,
                         logdir=args.logdir or "runs", run_name=args.run_name, **opts)
    stop_point("while starting")  # a held signal that came while the env was built
    result, code = run_experiment(exp, args, f"jaxppo: {exp.config.env_id} | {runs_text(exp)}")
    if result is None:
        return code
    if result.rebuilt:
        say_rebuilt(result)
        return 0
    code = stopped(result, "train")
    if code is not None or not is_main_process():
        return code or 0
    s = result.summary
    if result.solved:  # its wall_s counts from the run's clock (before compiling)
        solved = result.solved
        since = ("" if args.resume else  # else its clock began in an earlier session
                 f"; {max(0.0, result.started - args.started) + solved['wall_s']:.1f} s since "
                 "the command started")
        print(f"{exp.config.env_id} solved in {solved['wall_s']:.1f} s after "
              f"{solved['episodes']:,.0f} episodes ({solved['env_steps']:,} steps){since}")
    unit = "seeds" if exp.settings is None else f"agents of {len(exp.settings)} settings"
    print(f"final return: {final_return_text(s, unit)} | {s['sps']:,.0f} SPS | "
          f"{timing_text(args, result)}")
    return 0
