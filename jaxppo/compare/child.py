"""A run's process of `jaxppo compare` (`fit.CHILD` starts it with `python -c`): one system's
run, measured, as one JSON line on stdout; ended as the `jaxppo` command ends."""

from __future__ import annotations

import json
import os
import signal
import sys

from jaxppo._xla import setup_compilation_cache
from jaxppo.compare.compare import measure_subproc, run_system
from jaxppo.config import PPOConfig
from jaxppo.process import exit_process


def child_main(argv: list[str]) -> None:
    """A run's process' work (`child_entry` runs it: `fit.CHILD`, `python -m
    jaxppo.compare.child`): argv `SYSTEM CONFIG_JSON SEEDS SEED [SB3_THREADS]`; one JSON
    line on stdout (SYSTEM `measure`: `measure_subproc`'s)."""
    setup_compilation_cache(not os.environ.get("JAXPPO_COMPARE_NO_CACHE"))
    system, config_json, seeds, seed, *threads = argv
    if not system.startswith("jaxppo"):  # every PyTorch system, and `measure`
        import torch

        torch.set_num_threads(int(threads[0]) if threads else 1)
    config = PPOConfig(**json.loads(config_json))
    if system == "measure":
        print(json.dumps(measure_subproc(config, int(seed))), flush=True)
        return
    print(json.dumps(run_system(system, config, int(seeds), int(seed))), flush=True)


def child_entry(argv: list[str]) -> None:
    """A run's process (`fit.CHILD`): `child_main`, ended as the `jaxppo` command ends
    (`exit_process`). A stop signal the run held while XLA compiled is one line and 128 + N
    (not a traceback); a compile abandoned by a second one ends without Python's shutdown."""
    try:
        child_main(argv)
        code = 0
    except KeyboardInterrupt as e:  # the run's StopNow (the parent has the same signal)
        signum = getattr(e, "signum", signal.SIGINT)
        when = getattr(e, "when", None) or "at once"
        print(f"stopped by {signal.Signals(signum).name} {when}", file=sys.stderr)
        code = 128 + signum
    exit_process(code, "jaxppo compare's run")


if __name__ == "__main__":
    child_entry(sys.argv[1:])
