"""`jaxppo profile --config C [--target h100]`: the kernels, copies and bytes written per update
of a config's compiled program, loop by loop, on this CPU or compiled for a GPU this machine
does not have (docs/how-to/gpu.md)."""

from __future__ import annotations

from jaxppo.cli.common import add_import_arg, add_no_cache, load_run_config, positive_int
from jaxppo.profile import GPUS, PARTS, TARGETS, gpu_device, profile_config


def add_parser(sub) -> None:
    p = sub.add_parser("profile", help="count the kernels per update of a config's compiled "
                                       "program, here or for a GPU without one (deviceless)")
    p.add_argument("--config", help="YAML config, e.g. configs/cartpole.yaml")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key (repeatable)")
    p.add_argument("--target", default="cpu", choices=TARGETS,
                   help="cpu: this machine (the default); " + ", ".join(GPUS) + ": compiled "
                        "for that GPU here, without one (needs jaxppo[gpu-profile])")
    p.add_argument("--seeds", type=positive_int("--seeds"), default=1,
                   help="vmapped agents (default 1)")
    p.add_argument("--part", default="train", choices=PARTS,
                   help="train: the whole program (the default); minibatch: one minibatch's "
                        "loss gradient, seeds by vmap and by lax.map (host-env configs too)")
    p.add_argument("--top", type=positive_int("--top"), default=12,
                   help="loops listed (default 12)")
    add_import_arg(p)
    add_no_cache(p)
    p.set_defaults(func=cmd_profile)


def cmd_profile(args) -> int:
    if args.target != "cpu":
        gpu_device(args.target)  # JAX starts here, its CUDA plugin quiet: before any env
    config = load_run_config(args)
    title = args.config + "".join(f" --set {s}" for s in args.set)
    result = profile_config(config, target=args.target, seeds=args.seeds, part=args.part,
                            top=args.top, title=title)
    print(result.text)
    return 0
