"""`jaxppo export RUN_DIR --format onnx|jax`: one agent's policy as a file that runs without
jaxppo (an ONNX model, or a `jax.export` program), with its JSON sidecar."""

from __future__ import annotations

import sys

from jaxppo.cli.common import add_import_arg, add_no_cache, import_modules
from jaxppo.policy.export import FORMATS, export_policy


def add_parser(sub) -> None:
    e = sub.add_parser("export", help="write an agent's policy as ONNX or a jax.export program, "
                                      "runnable without jaxppo")
    e.add_argument("run_dir")
    e.add_argument("--format", choices=tuple(FORMATS), default="onnx",
                   help="onnx: an ONNX model (needs jaxppo[export]); jax: jax.export's "
                        "serialized StableHLO for CPU and CUDA, loaded with plain jax")
    who = e.add_mutually_exclusive_group()
    who.add_argument("--agent", type=int, default=0, metavar="N",
                     help="agent N of a multi-seed run or sweep (a row's runs, a PBT member; "
                          "default 0)")
    who.add_argument("--seed", type=int, dest="agent", metavar="N", help="the same as --agent")
    e.add_argument("--out", metavar="FILE",
                   help="the model file (default RUN_DIR/export/agentN.onnx or .jaxexport); "
                        "the sidecar is FILE.json")
    e.add_argument("--deterministic", dest="deterministic", action="store_true", default=True,
                   help="act with the distribution's mode (the default)")
    e.add_argument("--stochastic", dest="deterministic", action="store_false",
                   help="sample: the model takes a `noise` input (Gumbel or standard normal)")
    e.add_argument("--include-diverged", action="store_true",
                   help="export an agent that diverged (NaN/Inf) anyway")
    add_import_arg(e)
    add_no_cache(e)
    e.set_defaults(func=cmd_export)


def cmd_export(args) -> int:
    import_modules(args)  # a run from before env_imports: the module that registers its env
    result = export_policy(args.run_dir, args.format, seed=args.agent, out=args.out,
                           deterministic=args.deterministic,
                           include_diverged=args.include_diverged)
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    mode = "deterministic" if args.deterministic else "stochastic"
    print(f"wrote {result.path} ({result.format}, agent {result.agent}, {mode}) and "
          f"{result.sidecar}")
    return 0
