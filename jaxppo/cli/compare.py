"""`jaxppo compare`: jaxppo side by side with Stable-Baselines3 PPO on the same config, in
one run (the compare extra)."""

from __future__ import annotations

import os
import signal
import sys
import time

import jaxppo.compare.compare as cmp
from jaxppo.cli.common import EXAMPLE_CONFIG, add_import_arg, add_no_cache, load_run_config, positive_int
from jaxppo.compare.systems import ALIASES, DEFAULT_SYSTEMS, SYSTEMS, resolve
from jaxppo.config import parse_overrides
from jaxppo.errors import UsageError
from jaxppo.rundir.files import check_writable
from jaxppo.rundir.layout import flat_env_id


def add_parser(sub) -> None:
    c = sub.add_parser("compare", help="side by side with PyTorch PPO: SB3, Tianshou, TorchRL, a torch "
                       "script (the compare extra)")
    c.add_argument("--config", help=f"YAML config, e.g. {EXAMPLE_CONFIG}")
    c.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    c.add_argument("--steps", type=positive_int("--steps"), default=None,
                   help="total_timesteps per agent (default: the config's)")
    c.add_argument("--repeats", type=positive_int("--repeats"), default=3,
                   help="runs per system; SPS and times are medians (default 3)")
    c.add_argument("--seeds", type=positive_int("--seeds"), default=None,
                   help="vmapped seeds for the 'jaxppo-seeds' system (default 16)")
    c.add_argument("--systems", default=",".join(DEFAULT_SYSTEMS),
                   help=f"comma-separated subset of {','.join(SYSTEMS)}, or the aliases "
                   f"{','.join(ALIASES)} (default {','.join(DEFAULT_SYSTEMS)})")
    c.add_argument("--sb3-threads", type=positive_int("--sb3-threads"), default=1,
                   metavar="N", help="torch threads of each process of every PyTorch system "
                   "(SB3, Tianshou, TorchRL, the torch script; default 1: more "
                   "threads wait on each other on a busy machine)")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--out", default=None, help="output directory (default runs/compare__...)")
    c.add_argument("--warm-cache", action="store_true",
                   help="let jaxppo use its persistent compilation cache (default: cold compiles)")
    add_import_arg(c)
    add_no_cache(c)
    c.set_defaults(func=cmd_compare)


def cmd_compare(args) -> int:
    overrides = parse_overrides(args.set)
    if args.steps is not None:
        overrides["total_timesteps"] = args.steps
    config = load_run_config(args, overrides)
    systems = resolve([s.strip() for s in args.systems.split(",") if s.strip()])
    out_dir = args.out or os.path.join(  # flat, as train's run names
        "runs", f"compare__{flat_env_id(config.env_id)}__{time.strftime('%Y%m%d-%H%M%S')}")
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise UsageError(f"--out {out_dir!r} is a file; pass a directory")
    created = not os.path.exists(out_dir)
    try:  # before any run: an unwritable --out is found now, not after an hour of runs
        os.makedirs(out_dir, exist_ok=True)
    except OSError as e:
        raise UsageError(f"--out {out_dir!r}: cannot create it ({e.strerror}); pass a writable "
                         "directory") from None
    check_writable(os.path.join(out_dir, "compare.md"), "--out")
    try:
        md = cmp.compare_and_report(config, out_dir, repeats=args.repeats, seeds=args.seeds or 16,
                                    systems=systems, seed=args.seed, warm_cache=args.warm_cache,
                                    sb3_threads=args.sb3_threads,
                                    echo=lambda m: print(m, flush=True))
    except RuntimeError as e:
        print(f"jaxppo compare: error: {e}", file=sys.stderr)
        return 1
    except cmp.CompareInterrupted as e:  # what was measured is written: say so, and where
        name = signal.Signals(e.signum).name
        print(f"jaxppo compare: stopped by {name} after {sum(r['repeats'] for r in e.rows)} "
              f"complete run(s); wrote what was measured to {e.out_dir}/compare.md, "
              "compare.csv, compare.png", file=sys.stderr)
        return 128 + e.signum
    finally:  # refused or interrupted before writing anything: no empty folder is left
        if created and os.path.isdir(out_dir) and not os.listdir(out_dir):
            os.rmdir(out_dir)
    print()
    print(md)
    print(f"wrote {out_dir}/compare.md, compare.csv, compare.png")
    return 0
