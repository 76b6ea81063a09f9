"""The parent's side of the PyTorch systems in `jaxppo compare`: whether their libraries are
installed (one line naming the extra), their versions, the mapping notes, and what each run's
process is given (`torch_job`: the config as plain data, and the solve threshold, which that
process, importing no JAX, cannot work out itself: `torch_child.py`)."""

from __future__ import annotations

import dataclasses
import importlib.util
from importlib.metadata import PackageNotFoundError, version

from jaxppo.compare import mapping
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


DERIVED = ("batch_size", "minibatch_size", "num_updates", "env_steps")
"""The sizes `PPOConfig` derives from its keys that the PyTorch systems read."""


def torch_side(config: PPOConfig) -> dict:
    """`config` as a PyTorch system's process reads it (`torch_child.py`): its keys and the
    sizes derived from them, as plain JSON, so that process needs no `PPOConfig` (whose module
    imports jaxppo's env registry, and so JAX)."""
    return {**config.to_dict(), **{k: getattr(config, k) for k in DERIVED}}


def torch_job(config: PPOConfig, measure: bool = False) -> dict:
    """What a PyTorch system's process is given (`torch_child.child_main`): the config's
    snapshot and what only jaxppo's env registry knows, the solve threshold. `measure`: for
    `sb3_run.measure_subproc`, the config with one env (one env to reset, one minibatch) and
    the run's own (num_envs, num_steps)."""
    job = {"config": torch_side(config), "threshold": solve_threshold(config.env_id)}
    if measure:
        one = dataclasses.replace(config, num_envs=1, num_minibatches=1, reset_batch=None)
        job.update(config=torch_side(one), full=[config.num_envs, config.num_steps])
    return job


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
