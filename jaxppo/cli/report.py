"""`jaxppo report RUN_DIR...`: mean, median, IQM and optimality gap over seeds with 95%
bootstrap intervals, curves and profiles, across runs and envs."""

from __future__ import annotations

from jaxppo.cli.common import add_no_cache, positive_int
from jaxppo.reports import parse_normalize, report
from jaxppo.rundir import names


def add_parser(sub) -> None:
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
                   help=f"scores from {names.EVAL} (auto: where present) or the final training "
                        "return")
    add_no_cache(r)
    r.set_defaults(func=cmd_report)


def cmd_report(args) -> int:
    rep = report(args.run_dirs, args.out, reps=args.reps, seed=args.seed,
                 normalize=parse_normalize(args.normalize), gap_threshold=args.gap_threshold,
                 source=args.source)
    print(rep.table())
    print(f"wrote {rep.out}/: {', '.join(rep.data['files'])}")
    return 0
