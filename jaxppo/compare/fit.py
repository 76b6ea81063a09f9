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
import subprocess
import sys

from jaxppo.compare.systems import MULTIPROCESS
from jaxppo.config import PPOConfig
from jaxppo.errors import UsageError
from jaxppo.run.memory import fmt_bytes, host_available

CHILD = (sys.executable, "-c",
         "import sys; from jaxppo.compare.child import child_entry; child_entry(sys.argv[1:])")
"""How compare starts a run's process: `CHILD + (SYSTEM, CONFIG_JSON, SEEDS, SEED, ...)`. Not
`python -m`: processes that multiprocessing starts (SB3's SubprocVecEnv workers) import the
parent's main module again, and a `-m jaxppo...` main would give every SB3 worker jaxppo and
JAX (~80 MB and seconds of setup each, counted on SB3's side); `-c` has none to import."""


def machine_load() -> float | None:
    """The 1-minute load average (None where the OS has none)."""
    try:
        return os.getloadavg()[0]
    except (OSError, AttributeError):
        return None


def cores() -> int:
    """The machine's cores (the load average counts runnable tasks over all of them)."""
    return os.cpu_count() or 1


def usable_cores() -> int:
    """The cores this process may run on (XLA:CPU sizes its thread pool by them)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return cores()


def load_note(loads: list[float | None]) -> str | None:
    """The note for a table measured on a busy machine (None: the load stayed within the
    cores, or the OS gives none)."""
    seen = [x for x in loads if x is not None]
    if not seen or max(seen) <= cores():
        return None
    return (f"figures unreliable: load {max(seen):.1f} on {cores()} cores (the 1-minute load "
            "average before a run exceeded the cores: other work shared the CPUs while this "
            "was measured); rerun on a quiet machine")


def threads_text(system: str, config: PPOConfig, reported: dict) -> str:
    """How many threads a system computed with, as its child reported them."""
    if system.startswith("jaxppo"):
        platform = reported.get("platform", "cpu")
        return (f"XLA:CPU pool of {reported['threads']}" if platform == "cpu"
                else f"{platform.upper()} (host: {reported['threads']} threads)")
    procs = f" + {config.num_envs} env procs" if system in MULTIPROCESS else ""
    return f"torch {reported['threads']}{procs}"


def process_bytes(pid: int) -> int | None:
    """A process's own memory: its private pages (what another copy of it adds), else its
    resident size; None where /proc has neither."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as f:
            private = [int(line.split()[1]) for line in f
                       if line.startswith(("Private_Clean:", "Private_Dirty:"))]
        if private:
            return sum(private) * 1024
    except (OSError, ValueError):
        pass
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return None


def holds_jax(pid: int) -> bool | None:
    """Whether process `pid` has JAX's compiled library mapped (None where /proc cannot say)."""
    try:
        with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as f:
            return "jaxlib" in f.read()
    except OSError:
        return None


def measure_sb3(config: PPOConfig, env: dict | None = None) -> dict:
    """{"worker": bytes, "main": bytes} (None where unknown): one `SubprocVecEnv` worker of
    `config`'s env and the SB3 process around it, measured in a child process (the SB3 side
    in `sb3.measure_subproc`)."""
    proc = subprocess.run([*CHILD, "measure", json.dumps(config.to_dict()), "1", "0"],
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
