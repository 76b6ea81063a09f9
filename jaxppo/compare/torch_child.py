"""A PyTorch system's run process in `jaxppo compare` (`fit.TORCH_CHILD` starts it): SB3,
Tianshou, TorchRL or the torch script, one run on the config's plain snapshot, as one JSON line
on stdout.

It imports no JAX, so its memory and threads are the PyTorch pipeline's own, as a user's
script would have them: `fit.TORCH_CHILD` defers the `jaxppo` and `jaxppo.envs` package
initialisers (which import the public API, and so JAX), and every module this one imports is
free of JAX. What needs jaxppo's env registry (the solve threshold) the parent works out and
passes in (`runners.torch_job`). The line says `jax_loaded`: whether JAX's library was mapped
in this process after all (false, tested per system).
"""

from __future__ import annotations

import json
import os
import time
from types import SimpleNamespace

from jaxppo.compare import mapping
from jaxppo.compare.gym_side import env_fn
from jaxppo.compare.sb3_run import measure_subproc, run_sb3
from jaxppo.compare.systems import library
from jaxppo.compare.tree import holds_jax
from jaxppo.compare.twins import env_kind, gym_id, minatar_time_limit
from jaxppo.envs.imports import import_env_modules
from jaxppo.process import run_child


def network(config) -> dict:
    return {"hidden": list(config.hidden_sizes), "activation": config.activation}


def run(system: str, job: dict, seed: int, t0: float) -> dict:
    """Run `system` once in this process on `job` (`runners.torch_job`); timings from `t0`.
    Each library's module is imported here, when it runs (its import is setup time)."""
    config = SimpleNamespace(**job["config"])
    threshold, kind = job["threshold"], env_kind(config.env_id)
    if system in ("sb3-dummy", "sb3-subproc"):
        return run_sb3(config, system == "sb3-subproc", seed, t0, threshold)
    limit = minatar_time_limit(config.env_id, config.max_episode_steps)
    make = env_fn(kind, config.env_id, gym_id(config.env_id), tuple(config.env_imports), limit)
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


def child_main(argv: list[str]) -> None:
    """argv `SYSTEM JOB_JSON SEED [THREADS]` (SYSTEM `measure`: `sb3_run.measure_subproc`);
    one JSON line on stdout."""
    system, job_json, seed, *threads = argv
    import torch

    torch.set_num_threads(int(threads[0]) if threads else 1)
    job = json.loads(job_json)
    # the config's env modules, before the run's clock starts (as a user's script imports
    # them first): a module that fails is one line naming it
    import_env_modules(job["config"]["env_imports"])
    if system == "measure":
        out = measure_subproc(SimpleNamespace(**job["config"]), int(seed), job.get("full"))
    else:
        out = run(system, job, int(seed), time.perf_counter())
    print(json.dumps({**out, "jax_loaded": holds_jax(os.getpid())}), flush=True)


def child_entry(argv: list[str]) -> None:
    """The process's work (`child_main`, through `process.run_child`): a stop signal is one
    line and 128 + N, not a traceback."""
    run_child(child_main, argv, "jaxppo compare's run")
