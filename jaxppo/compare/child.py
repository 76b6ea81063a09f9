"""A jaxppo system's run process in `jaxppo compare` (`fit.CHILD` starts it with `python -c`):
one run, measured, as one JSON line on stdout; ended as the `jaxppo` command ends. The PyTorch
systems run in `torch_child.py`'s, which imports no JAX."""

from __future__ import annotations

import json
import os
import sys

from jaxppo._xla import setup_compilation_cache
from jaxppo.compare.compare import run_system
from jaxppo.config import PPOConfig
from jaxppo.process import run_child


def child_main(argv: list[str]) -> None:
    """A run's process' work (`child_entry` runs it: `fit.CHILD`, `python -m
    jaxppo.compare.child`): argv `SYSTEM CONFIG_JSON SEEDS SEED [THREADS]` (SYSTEM `jaxppo` or
    `jaxppo-seeds`; THREADS, the PyTorch systems', is not read); one JSON line on stdout."""
    setup_compilation_cache(not os.environ.get("JAXPPO_COMPARE_NO_CACHE"))
    system, config_json, seeds, seed, *_ = argv
    config = PPOConfig(**json.loads(config_json))
    print(json.dumps(run_system(system, config, int(seeds), int(seed))), flush=True)


def child_entry(argv: list[str]) -> None:
    """A run's process (`fit.CHILD`): `child_main` (`process.run_child`). A stop signal the run
    held while XLA compiled is one line and 128 + N (not a traceback); a compile abandoned by
    a second one ends without Python's shutdown."""
    run_child(child_main, argv, "jaxppo compare's run")


if __name__ == "__main__":
    child_entry(sys.argv[1:])
