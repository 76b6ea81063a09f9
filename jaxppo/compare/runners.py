"""One run of a Tianshou, TorchRL or torch-script system in `jaxppo compare`'s child process:
the env factory and the library's arguments from the config (`mapping`), then the library's
own module (`tianshou.py`, `torchrl.py`, `torch_ppo.py`), imported here, when it runs."""

from __future__ import annotations

import importlib.util
from importlib.metadata import PackageNotFoundError, version

from jaxppo.compare import mapping
from jaxppo.compare.gym_side import env_fn
from jaxppo.compare.systems import library
from jaxppo.config import PPOConfig
from jaxppo.errors import ConfigError
from jaxppo.run.stats import solve_threshold

MODULES = {"tianshou": ("tianshou",), "torchrl": ("torchrl", "tensordict"), "torch": ()}
"""What each library's systems import beside torch and gymnasium."""

INSTALL = {
    "tianshou": "pip install 'jaxppo[compare]' (it pins tianshou==2.0.1 beside torch==2.13.0)",
    "torchrl": "pip install 'jaxppo[compare]' (it pins torchrl==0.14.1 and tensordict==0.14.3)",
    "torch": "pip install 'jaxppo[compare]' (it pins torch==2.13.0, the CPU build)",
}


INSTALL_HINT = ("jaxppo compare needs the compare extra: pip install 'jaxppo[compare]' "
                "(it pins torch==2.13.0, the local CPU build; an unpinned torch pulls GBs of CUDA)")


def versions(kind: str, systems: tuple[str, ...] = ()) -> str:
    """The PyTorch side's package versions for an env of `kind` and these systems."""
    out = []
    extra = {"minatar": ("minatar",), "atari": ("ale-py",)}.get(kind, ())
    libs = {library(s) for s in systems}
    extra += tuple(p for lib, pkgs in (("tianshou", ("tianshou",)),
                                       ("torchrl", ("torchrl", "tensordict")))
                   if lib in libs for p in pkgs)
    for pkg in ("torch", "stable-baselines3", "gymnasium", *extra):
        try:
            out.append(f"{pkg} {version(pkg)}")
        except PackageNotFoundError:
            pass
    return ", ".join(out)


def check_installed(kind: str) -> None:
    """One line naming the compare extra when SB3's side (or an env's package) is missing."""
    extra = {"minatar": ("minatar",), "atari": ("ale_py", "cv2")}.get(kind, ())
    for mod in ("torch", "stable_baselines3", "gymnasium", *extra):
        if importlib.util.find_spec(mod) is None:
            raise ConfigError(INSTALL_HINT)


def check_library(system: str) -> None:
    """One line naming the install when a system's library is missing."""
    lib = library(system)
    for mod in ("torch", "gymnasium", *MODULES.get(lib, ())):
        if importlib.util.find_spec(mod) is None:
            raise ConfigError(f"--systems {system} needs {mod}: {INSTALL[lib]}")


def network(config: PPOConfig) -> dict:
    return {"hidden": list(config.hidden_sizes), "activation": config.activation}


def run_pytorch(system: str, config: PPOConfig, seed: int, t0: float, kind: str,
                gym_id: str) -> dict:
    """Run `system` once in this process (timings from `t0`)."""
    limit = None
    if kind == "minatar":
        from jaxppo.compare.sb3 import minatar_time_limit

        limit = minatar_time_limit(config.env_id, config.max_episode_steps)
    make = env_fn(kind, config.env_id, gym_id, config.env_imports, limit)
    threshold = solve_threshold(config.env_id)
    lib = library(system)
    if lib == "tianshou":
        from jaxppo.compare import tianshou

        return tianshou.run(mapping.tianshou_mapping(config), network(config), make,
                            system.endswith("subproc"), seed, threshold, t0,
                            config.num_updates, config.env_steps)
    if lib == "torchrl":
        from jaxppo.compare import torchrl

        return torchrl.run(mapping.torchrl_mapping(config), network(config), make,
                           system.endswith("parallel"), seed, threshold, t0,
                           config.num_updates, config.env_steps)
    from jaxppo.compare import torch_ppo

    return torch_ppo.run(mapping.torch_mapping(config).kwargs, make, system.endswith("async"),
                         system.startswith("torch-compile"), seed, threshold, t0,
                         config.env_steps)


def mapping_notes(systems: tuple[str, ...], config: PPOConfig) -> list[str]:
    """The table's notes on how each library's arguments were made equal, and every
    hyperparameter a library cannot express (it runs without it)."""
    funcs = {"tianshou": mapping.tianshou_mapping, "torchrl": mapping.torchrl_mapping,
             "torch": mapping.torch_mapping}
    notes = []
    for lib in dict.fromkeys(library(s) for s in systems):
        if lib in funcs:
            m = funcs[lib](config)
            notes += list(m.notes)
            notes += [f"NOT EXPRESSED by {lib}: {c}; it runs without it" for c in m.cannot]
    return notes
