"""The machine `jaxppo compare` measures on: whether it was quiet (its load against its cores),
how many threads each side used, and whether the SB3 `SubprocVecEnv`'s processes fit in its
memory (measured, before any run starts).

A figure measured while other work shares the CPUs is not the system's: on a loaded machine
the same SB3 PPO ran 2,422 SPS with 1 torch thread and 136 SPS with 2 (the threads wait on each
other), so a ratio taken there can be 20x off. Hence SB3's torch threads are pinned (1 by
default) and stated, and the load is read before every run.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time

from jaxppo.compare.runners import torch_job
from jaxppo.compare.systems import MULTIPROCESS
from jaxppo.config import PPOConfig
from jaxppo.errors import UsageError
from jaxppo.run.memory import fmt_bytes, host_available

CHILD = (sys.executable, "-c",
         "import sys; from jaxppo.compare.child import child_entry; child_entry(sys.argv[1:])")
"""How compare starts a jaxppo system's run: `CHILD + (SYSTEM, CONFIG_JSON, SEEDS, SEED, ...)`
(the PyTorch systems': `TORCH_CHILD`). Not `python -m`, in both: processes that
multiprocessing starts (SB3's SubprocVecEnv workers) import the parent's main module again,
and a `-m jaxppo...` main would give every worker jaxppo and JAX (~80 MB and seconds of setup
each); `-c` has none to import."""

TORCH_CHILD = (sys.executable, "-c", "\n".join([
    "import importlib.util, sys",
    "def defer(name):",  # the package's module, its __init__ run only when a name is asked for
    "    spec = importlib.util.find_spec(name)",
    "    pkg = sys.modules[name] = importlib.util.module_from_spec(spec)",
    "    def load(attr):",  # a probe for a dunder (hasattr, pickle's search) runs nothing
    "        if attr.startswith('__') and attr != '__all__':",
    "            raise AttributeError(attr)",
    "        del pkg.__getattr__",
    "        try:",
    "            spec.loader.exec_module(pkg)",
    "        except BaseException:",  # the package's own error, and a later try, not a stub's
    "            pkg.__getattr__ = load",
    "            raise",
    "        return getattr(pkg, attr)",
    "    pkg.__getattr__ = load",
    "    parent, _, child = name.rpartition('.')",
    "    if parent:",
    "        setattr(sys.modules[parent], child, pkg)",
    "defer('jaxppo')",
    "defer('jaxppo.envs')",
    "from jaxppo.compare.torch_child import child_entry",
    "child_entry(sys.argv[1:])"]))
"""How compare starts a PyTorch system's run: `TORCH_CHILD + (SYSTEM, JOB_JSON, SEED,
THREADS)` (`torch_child.py`). The `jaxppo` and `jaxppo.envs` package initialisers import the
public API, and so JAX; here they run only if something asks the package for a name, so the
run's process holds what a user's PyTorch script would, not JAX as well (in compare's table,
~190 MB and 15 threads more for a one-process row; ~1.5 s of CPU)."""


def machine_load() -> float | None:
    """The 1-minute load average (None where the OS has none)."""
    try:
        return os.getloadavg()[0]
    except (OSError, AttributeError):
        return None


def cpu_times() -> tuple[float, float, float] | None:
    """(the machine's busy CPU seconds so far, this process's and its waited-for descendants',
    a monotonic time); None where there is no /proc/stat. Steal time counts as busy: a
    hypervisor giving the CPU to a neighbour is other work too."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = f.readline().split()
        ticks = [int(x) for x in fields[1:9]]  # user nice system idle iowait irq softirq steal
    except (OSError, ValueError):
        return None
    if fields[0] != "cpu" or len(ticks) < 8:
        return None
    busy = (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")
    own = sum(getattr(resource.getrusage(who), part) for part in ("ru_utime", "ru_stime")
              for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return busy, own, time.monotonic()


def other_work(before: tuple[float, float, float] | None, after: tuple[float, float, float] | None,
               run_cpu_s: float = 0.0) -> float | None:
    """The cores other work kept busy on average between two `cpu_times` readings: the
    machine's busy time less this process's, its waited-for descendants' and `run_cpu_s` (the
    run's processes as its watch saw them, for those no one here waited for), over the wall
    time. The load average cannot say this: it still holds the previous run's own processes
    for a minute after they end."""
    if before is None or after is None or after[2] <= before[2]:
        return None
    own = max(after[1] - before[1], run_cpu_s)
    return max(0.0, (after[0] - before[0]) - own) / (after[2] - before[2])


BUSY_CORES = 0.5
"""Other work using more than this many cores on average during a run makes a table's figures
unreliable (one core of 2 taken by another process halves a single-threaded system's SPS)."""


def cores() -> int:
    """The machine's cores (the load average counts runnable tasks over all of them)."""
    return os.cpu_count() or 1


def usable_cores() -> int:
    """The cores this process may run on (XLA:CPU sizes its thread pool by them)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return cores()


def other_work_note(others: list[float | None]) -> str | None:
    """The note for a table measured while other work used the CPUs (None: it used at most
    `BUSY_CORES` on average during every run, or the OS cannot say)."""
    seen = [x for x in others if x is not None]
    if not seen or max(seen) <= BUSY_CORES:
        return None
    return (f"figures unreliable: other work kept {max(seen):.1f} of {cores()} cores busy on "
            "average during a run (the machine's CPU time less the runs' own); rerun on a "
            "quiet machine")


def load_text(rows: list[dict]) -> str:
    """The table header's word on the machine while it measured: the most cores other work
    kept busy during a run, and the highest load average read before one."""
    others = [r["other_cores"] for r in rows if r.get("other_cores") is not None]
    loads = [r["load"] for r in rows if r.get("load") is not None]
    return ((f"; other work during runs at most {max(others):.1f} of {cores()} cores" if others
             else "") + (f"; load average before runs at most {max(loads):.1f} (the previous "
                         "run's own processes included)" if loads else ""))


def threads_text(system: str, config: PPOConfig, reported: dict) -> str:
    """How many threads a system computed with, as its child reported them."""
    if system.startswith("jaxppo"):
        platform = reported.get("platform", "cpu")
        return (f"XLA:CPU pool of {reported['threads']}" if platform == "cpu"
                else f"{platform.upper()} (host: {reported['threads']} threads)")
    procs = f" + {config.num_envs} env procs" if system in MULTIPROCESS else ""
    return f"torch {reported['threads']}{procs}"


def measure_sb3(config: PPOConfig, env: dict | None = None) -> dict:
    """{"worker": bytes, "main": bytes} (None where unknown): one `SubprocVecEnv` worker of
    `config`'s env and the SB3 process around it, measured in a child process (the SB3 side
    in `sb3_run.measure_subproc`)."""
    proc = subprocess.run([*TORCH_CHILD, "measure", json.dumps(torch_job(config, measure=True)),
                           "0"],
                          capture_output=True, text=True,
                          env={**(env or os.environ), "JAX_PLATFORMS": "cpu"})
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"measuring SB3's SubprocVecEnv failed (exit {proc.returncode}): "
                           f"{tail}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def check_subproc_fits(config: PPOConfig, systems: tuple[str, ...], measured: dict) -> None:
    """Refuse (one line naming --systems) the systems that start one process per env
    (`systems.MULTIPROCESS`: SB3's SubprocVecEnv, Tianshou's SubprocVectorEnv, TorchRL's
    ParallelEnv, Gymnasium's AsyncVectorEnv) when `num_envs` processes of the measured size
    (an SB3 SubprocVecEnv worker: torch and the env; the others' workers import the same),
    with the main process, exceed the host's available memory."""
    free = host_available()
    worker, main = measured.get("worker"), measured.get("main") or 0
    many = [s for s in systems if s in MULTIPROCESS]
    if not many or worker is None or free is None:
        return
    need = config.num_envs * worker + main
    if need <= free:
        return
    rest = ",".join(s for s in systems if s not in MULTIPROCESS)
    them = "it" if len(many) == 1 else "them"
    drop = f"leave {them} out (--systems {rest})" if rest else "pick other --systems"
    raise UsageError(f"--systems {','.join(many)}: each would start "
                     f"{config.num_envs} processes (one per env) of ~{fmt_bytes(worker)} each (measured; "
                     f"~{fmt_bytes(need)} with the main one) but the host has {fmt_bytes(free)} "
                     f"free; {drop} or lower num_envs (--set num_envs=...)")


def check_peak_fits(system: str, peak_bytes: int | None) -> None:
    """Before a later repeat: refuse a system whose last run's process tree peaked above the
    host's available memory now (other work took it meanwhile)."""
    free = host_available()
    if peak_bytes is None or free is None or peak_bytes <= free:
        return
    raise UsageError(f"--systems {system}: its last run's processes peaked at "
                     f"~{fmt_bytes(peak_bytes)} but the host now has {fmt_bytes(free)} free; "
                     "free memory or leave it out of --systems")
