"""The systems `jaxppo compare --systems` names: jaxppo, and the PyTorch PPO pipelines its users
come from, each in the vector-env form its users run (`-subproc`/`-parallel`/`-async`: one
process per env; `-dummy`/`-serial`/`-sync`: all in one process). The plain names are aliases
of the form the library's users most often run. Where a system has no twin of an env (or a
torso), `unsupported` says why: the table prints "-" and that reason.
"""

from __future__ import annotations

from jaxppo.errors import UsageError

SYSTEMS = ("jaxppo", "jaxppo-seeds", "sb3-dummy", "sb3-subproc",
           "tianshou-subproc", "tianshou-dummy", "torchrl-parallel", "torchrl-serial",
           "torch-sync", "torch-async", "torch-compile-sync", "torch-compile-async")
"""Every system; `compare --systems` takes these and `ALIASES`' keys."""

DEFAULT_SYSTEMS = ("jaxppo", "jaxppo-seeds", "sb3-dummy", "sb3-subproc")
"""What `--systems` runs when not given (the set compare ran before the others were added)."""

ALIASES = {"tianshou": "tianshou-subproc", "torchrl": "torchrl-parallel",
           "torch": "torch-sync", "torch-compile": "torch-compile-sync"}
"""Plain names: Tianshou's examples use SubprocVectorEnv, TorchRL's ParallelEnv; CleanRL's
script (and so `torch`) Gymnasium's SyncVectorEnv."""

MULTIPROCESS = ("sb3-subproc", "tianshou-subproc", "torchrl-parallel", "torch-async",
                "torch-compile-async")
"""The systems that start one process per env (checked against free memory first)."""

LIBRARY = {"tianshou": "Tianshou", "torchrl": "TorchRL", "torch": "the torch script"}


def library(system: str) -> str:
    """`jaxppo`, `sb3`, `tianshou`, `torchrl` or `torch` (the compiled script is `torch`)."""
    return system.split("-")[0]


def resolve(names: list[str]) -> tuple[str, ...]:
    """`--systems`' names -> systems, aliases expanded, order kept, each once; one line for
    an unknown name or an empty list."""
    out = []
    unknown = [s for s in names if s not in SYSTEMS and s not in ALIASES]
    if unknown or not names:
        raise UsageError(f"--systems: unknown {unknown or 'empty list'}; choose from "
                         f"{','.join(SYSTEMS)} (aliases: "
                         f"{', '.join(f'{a}={s}' for a, s in ALIASES.items())})")
    for s in names:
        s = ALIASES.get(s, s)
        if s not in out:
            out.append(s)
    return tuple(out)


def label(system: str, num_envs: int, seeds: int) -> str:
    """The table's name of a system."""
    return {
        "jaxppo": "jaxppo, 1 seed",
        "jaxppo-seeds": f"jaxppo, {seeds} vmapped seeds",
        "sb3-dummy": f"SB3 DummyVecEnv ({num_envs} envs)",
        "sb3-subproc": f"SB3 SubprocVecEnv ({num_envs} procs)",
        "tianshou-subproc": f"Tianshou SubprocVectorEnv ({num_envs} procs)",
        "tianshou-dummy": f"Tianshou DummyVectorEnv ({num_envs} envs)",
        "torchrl-parallel": f"TorchRL ParallelEnv ({num_envs} procs)",
        "torchrl-serial": f"TorchRL SerialEnv ({num_envs} envs)",
        "torch-sync": f"torch script SyncVectorEnv ({num_envs} envs)",
        "torch-async": f"torch script AsyncVectorEnv ({num_envs} procs)",
        "torch-compile-sync": f"torch.compile script SyncVectorEnv ({num_envs} envs)",
        "torch-compile-async": f"torch.compile script AsyncVectorEnv ({num_envs} procs)",
    }[system]


def unsupported(system: str, kind: str, torso: str) -> str | None:
    """Why `system` cannot run an env of `kind` (`twins.env_kind`) with `torso`; None: it
    can. jaxppo and SB3 run every kind compare accepts."""
    lib = library(system)
    if lib in ("jaxppo", "sb3"):
        return None
    name = LIBRARY[lib]
    if kind == "atari":
        return (f"{name}: no twin of jaxppo's EnvPool Atari settings is built for it (SB3's "
                "Atari wrappers are SB3's own)")
    if lib == "torchrl" and kind == "minatar":
        return "TorchRL has no MinAtar env (the reference package is not wrapped for it here)"
    if torso != "mlp":
        return f"{name}: only jaxppo's mlp torso is built for it, not {torso!r}"
    return None
