"""`jaxppo compare`: jaxppo side by side with the PyTorch pipelines people use today (SB3,
Tianshou, TorchRL, a plain torch script: `systems.py`) on the same hyperparameters and machine:
on classic control, MinAtar (the reference `minatar`), Atari (ALE under SB3's wrappers, against
jaxppo's EnvPool source) and any `gymnasium/<id>` (`sb3.py` builds the SB3 side).

Every (system, repeat) runs in a fresh child process, interleaved (repeat 1 of every system,
then repeat 2, ...), so slow drift of the machine hits all systems alike and no system inherits
another's warm caches or threads. Each child reports its setup time (jaxppo: compile; SB3: env
processes and model), its run time and SPS, the wall time at which it reached the solve
threshold counted from its start (so including compile/setup), and its final return. The solve
rule is the same code for every system (`solve.SolveTracker`: mean over seeds of each seed's
mean return over its last 20 episodes).

The mapping of `PPOConfig` to SB3's `PPO(...)` is `sb3_run.sb3_kwargs`; where the two
algorithms differ the difference is removed on the jaxppo side and printed
(`comparable_config`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import time

import jax

from jaxppo.compare import systems as systems_mod
from jaxppo.compare import torch_child
from jaxppo.compare.fit import (
    CHILD,
    TORCH_CHILD,
    check_peak_fits,
    check_subproc_fits,
    cpu_times,
    load_text,
    machine_load,
    measure_sb3,
    other_work,
    other_work_note,
    usable_cores,
)
from jaxppo.compare.runners import (
    check_installed,
    check_library,
    mapping_notes,
    torch_job,
    versions,
)
from jaxppo.compare.systems import MULTIPROCESS
from jaxppo.compare.table import (  # noqa: F401 - CompareInterrupted: the CLI's too
    CompareInterrupted,
    add_ratios,
    fairness,
    label,
    measured,
    skipped_row,
    stopped_early,
    table_markdown,
    write_outputs,
)
from jaxppo.compare.tree import Watch
from jaxppo.compare.twins import env_kind
from jaxppo.config import PPOConfig
from jaxppo.errors import ConfigError, UsageError
from jaxppo.machine import describe
from jaxppo.run.experiment import Experiment
from jaxppo.run.stats import solve_threshold

SYSTEMS = systems_mod.SYSTEMS
"""jaxppo (1 seed, N vmapped seeds), SB3, Tianshou, TorchRL and jaxppo's own torch script, each
in its one-process and one-process-per-env form (`systems.py`)."""

TORSOS = {"classic": ("mlp",), "gymnasium": ("mlp",), "minatar": ("mlp", "cnn"),
          "atari": ("nature_cnn",)}
"""Per kind of env, the torsos whose twin the SB3 side builds (`sb3_side.policy_setup`)."""
ATARI_SB3_SETTINGS = {"episodic_life": True, "reward_clip": True}
"""EnvPool settings an Atari config may spell out: SB3's `AtariWrapper` trains that way too."""


def comparable_config(config: PPOConfig) -> tuple[PPOConfig, list[str]]:
    """The config both sides run, and a note for every change made to get identical algorithms.

    CleanRL-style value clipping (`clip_vloss`: the max of the clipped and unclipped losses) has
    no SB3 equivalent: SB3's `clip_range_vf` clips the prediction itself, which at CartPole's
    return scale would pin the critic within `clip_eps` of its rollout values. So it is off on
    both sides. A bfloat16 `compute_dtype` becomes float32 (SB3's torch network is float32).
    An env with no solve threshold gets a note too: the table's solve columns read "-".
    """
    kind = env_kind(config.env_id)
    default = PPOConfig()
    fixed = ("network", "env_kwargs", "env_params", "obs_field")
    if kind != "minatar":  # MinAtar's SB3 side takes jaxppo's time limit (sb3_side.py)
        fixed += ("max_episode_steps",)
    differ = [k for k in fixed if getattr(config, k) != getattr(default, k)]
    if kind == "atari" and "env_kwargs" in differ and config.env_kwargs.items() <= \
            ATARI_SB3_SETTINGS.items():  # what SB3's Atari wrappers do anyway
        differ.remove("env_kwargs")
    if differ:
        raise ConfigError(f"config key '{differ[0]}': jaxppo compare runs SB3's feedforward "
                          f"policy on the stock gymnasium env, so {', '.join(differ)} would "
                          "compare different things; use the defaults for a side-by-side run")
    if config.torso not in TORSOS[kind]:
        raise ConfigError(f"config key 'torso': jaxppo compare's SB3 side has no twin of torso "
                          f"{config.torso!r} on {config.env_id}; use torso: "
                          f"{' or '.join(TORSOS[kind])}")
    if config.torso == "nature_cnn" and config.activation != "relu":
        raise ConfigError(f"config key 'activation': SB3's NatureCNN ends in a relu layer, so "
                          f"nature_cnn with {config.activation!r} would compare different "
                          "networks; use activation: relu")
    notes = []
    if solve_threshold(config.env_id) is None:
        notes.append(f"{config.env_id} has no solve threshold: time to solve is not defined "
                     "(-); compare the final return")
    if config.compute_dtype != "float32":
        notes.append(f"compute_dtype: float32 on every side (SB3's torch network is float32; "
                     f"{config.compute_dtype} would compare different arithmetic)")
        config = dataclasses.replace(config, compute_dtype="float32")
    if config.clip_vloss:
        config = dataclasses.replace(config, clip_vloss=False)
        notes.append("clip_vloss: off on every side (SB3 has no CleanRL-style max-form value "
                     "clipping; its clip_range_vf clips the prediction itself)")
    return config, notes


# ---------------------------------------------------------------------------------------------
# one system, in a child process
def _run_jaxppo(config: PPOConfig, seeds: int, seed: int, t0: float) -> dict:
    result = Experiment(config, seeds=seeds, seed=seed, logdir=None, progress=False).run()
    before = result.started - t0  # work before the run's clock started (env, checks, placing)
    setup = before + result.compile_s
    run_s = time.perf_counter() - t0 - setup
    solved = result.solved
    done = result.update * config.batch_size * seeds  # a stopped run's own, not the config's
    return {"setup_s": setup, "run_s": run_s, "env_steps": done, "status": result.status,
            "sps": done / run_s, "threads": usable_cores(),
            "platform": jax.default_backend(),
            "solve_s": before + solved["wall_s"] if solved else None,
            "solve_steps": solved["env_steps"] if solved else None,
            "final_return": result.summary["final_return_mean"]}  # None: no episode ended


def run_system(system: str, config: PPOConfig, seeds: int, seed: int) -> dict:
    """Run one system once in this process; timings count from this call (a PyTorch system's
    from `torch_child.run`'s, as in its own process)."""
    t0 = time.perf_counter()
    if system == "jaxppo":
        return _run_jaxppo(config, 1, seed, t0)
    if system == "jaxppo-seeds":
        return _run_jaxppo(config, seeds, seed, t0)
    if system in SYSTEMS:
        job = torch_job(config)
        return torch_child.run(system, job, seed, time.perf_counter())
    raise ValueError(f"unknown system {system!r}")


def jax_notes(systems) -> list[str]:
    """A note per PyTorch system whose run's process loaded JAX after all (a module it
    imported, such as the config's env module, did): its memory is not the PyTorch side's
    alone. Their processes import none of their own (`torch_child.py`)."""
    return [f"{s}: its process loaded JAX (a module it imported did), so its peak memory "
            "includes JAX's" for s in systems]


# ---------------------------------------------------------------------------------------------
# the parent: interleave, aggregate, report
def compare(config: PPOConfig, *, repeats: int, seeds: int, systems: tuple[str, ...], seed: int,
            warm_cache: bool, sb3_threads: int = 1, echo=print) -> tuple[list[dict], list[str]]:
    """Run every system `repeats` times (interleaved, each in a child process); return one row
    per system with medians, and the notes on how the configs were made identical and on the
    other work during the runs. A system that starts one process per env (`systems.MULTIPROCESS`) whose
    processes cannot fit in memory is refused first; a system with no twin of the env is a "-"
    row with the reason (`systems.unsupported`)."""
    kind = env_kind(config.env_id)
    if any(s.startswith("sb3") or s in MULTIPROCESS for s in systems):
        check_installed(kind)
    skipped = {s: why for s in systems
               if (why := systems_mod.unsupported(s, kind, config.torso)) is not None}
    if len(skipped) == len(systems):
        raise ConfigError(f"no system of --systems runs {config.env_id}: "
                          + "; ".join(skipped.values()))
    for s in systems:
        if s not in skipped and not s.startswith(("jaxppo", "sb3")):
            check_library(s)
    systems = tuple(s for s in systems if s not in skipped)
    config, notes = comparable_config(config)
    notes += mapping_notes(systems, config)
    # PyTorch systems' torch threads pinned, env processes too (XLA:CPU: one thread per core)
    pinned = {k: str(sb3_threads) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    if any(s in MULTIPROCESS for s in systems):
        check_subproc_fits(config, systems, measure_sb3(config, {**os.environ, **pinned}))
    env = dict(os.environ)
    if not warm_cache:  # a cold compile is what a new user pays: count it (torch.compile's too)
        env.update(JAXPPO_COMPARE_NO_CACHE="1", TORCHINDUCTOR_FORCE_DISABLE_CACHES="1")
    runs: dict[str, list[dict]] = {s: [] for s in systems}
    threshold = solve_threshold(config.env_id)
    payload = json.dumps(config.to_dict())
    torch_payload = json.dumps(torch_job(config))
    loads, others, short = [], [], []
    with_jax: dict[str, None] = {}  # PyTorch systems whose process loaded JAX after all
    try:
        for k, system in ((k, s) for k in range(repeats) for s in systems):
            echo(f"[{k + 1}/{repeats}] {label(system, config, seeds)} ...")
            # The PyTorch sides import no JAX (`torch_child.py`); should a user's env module
            # import it, it stays off the accelerator (no GPU memory, no device start-up).
            jaxppo_side = system.startswith("jaxppo")
            child_env = env if jaxppo_side else {**env, **pinned, "JAX_PLATFORMS": "cpu"}
            argv = ([*CHILD, system, payload, str(seeds)] if jaxppo_side
                    else [*TORCH_CHILD, system, torch_payload])
            if runs[system]:  # memory taken by other work since its last run
                check_peak_fits(system, runs[system][-1].get("peak_bytes"))
            loads.append(machine_load())  # before the run (the previous run's own included)
            before = cpu_times()  # and the machine's CPU time, for the other work during it
            with Watch() as tree:  # the child's whole process tree: peak memory, procs
                proc = subprocess.run([*argv, str(seed + k), str(sb3_threads)],
                                      capture_output=True, text=True, env=child_env)
            others.append(other_work(before, cpu_times(), tree.cpu_s))  # during the run
            if tree.left_behind:  # a library's worker or forkserver outlived the run
                echo(f"      ended {len(tree.left_behind)} process(es) the run left behind")
            lines = proc.stdout.strip().splitlines()
            killed = proc.returncode < 0 or proc.returncode >= 128  # a signal ended the child
            if proc.returncode != 0 and not killed:
                tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
                raise RuntimeError(f"{system} failed (exit {proc.returncode}): {tail}")
            result = ({**json.loads(lines[-1]), "load": loads[-1], "other_cores": others[-1],
                       **tree.peak}
                      if lines and not killed else
                      {"status": f"killed (exit {proc.returncode})", "env_steps": 0})
            cut = stopped_early(system, k, result, config, seeds)
            if cut:  # a stopped or short child is no measurement
                short.append(cut)
                echo(f"      {cut}")
                continue
            runs[system].append(result)
            if result.get("jax_loaded"):
                with_jax[system] = None
            solve = (f"{result['solve_s']:.1f} s" if result["solve_s"] is not None
                     else "not solved" if threshold is not None else "no threshold")
            final = result["final_return"]
            echo(f"      setup {result['setup_s']:.1f} s, {result['sps']:,.0f} SPS, "
                 f"solved: {solve}, final return "
                 f"{'- (no episode ended)' if final is None else f'{final:.1f}'}")
    except KeyboardInterrupt as e:  # what was measured is kept: the caller writes it
        stop = e
    else:
        stop = None
    busy = other_work_note(others)
    try:
        rows, notes = measured(runs, config, seeds, threshold is not None,
                               notes + short + jax_notes(with_jax) + ([busy] if busy else []),
                               stop, repeats)
    except CompareInterrupted as e:
        e.notes = e.notes + fairness(e.rows, threshold)
        e.rows += [skipped_row(s, config, seeds, why) for s, why in skipped.items()]
        raise
    notes = notes + fairness(rows, threshold)
    return rows + [skipped_row(s, config, seeds, why) for s, why in skipped.items()], notes


def compare_and_report(config: PPOConfig, out_dir: str, *, repeats: int, seeds: int,
                       systems: tuple[str, ...], seed: int, warm_cache: bool,
                       sb3_threads: int = 1, echo=print) -> str:
    """`jaxppo compare`: say how the configs were made identical, run every system, write
    compare.md/.csv/.png into `out_dir`; returns the markdown table."""
    same, notes = comparable_config(config)
    echo(f"jaxppo compare: {config.env_id}, {same.env_steps:,} steps, {repeats} repeat(s) "
         f"each, interleaved, one child process per run | out {out_dir}")
    for n in notes:
        echo(f"note: {n}")
    stop = None
    try:
        rows, notes = compare(config, repeats=repeats, seeds=seeds, systems=systems, seed=seed,
                              warm_cache=warm_cache, sb3_threads=sb3_threads, echo=echo)
    except CompareInterrupted as e:  # written below, then raised again
        rows, notes, stop = e.rows, e.notes, e
    add_ratios(rows)
    cache = "warm persistent compilation cache" if warm_cache else "cold compile every run"
    ran = [r for r in rows if not r.get("skipped")]
    load = load_text(rows)
    threads = (f"; threads: SB3's torch pinned to {sb3_threads} per process (--sb3-threads), "
               "as every PyTorch system's, "
               f"jaxppo's XLA:CPU (on the CPU) one per core it may use ({usable_cores()})")
    ran = versions(env_kind(config.env_id), tuple(r["system"] for r in ran))
    header = (f"{config.env_id}, {same.env_steps:,} steps per agent, medians of {repeats} "
              f"interleaved repeat(s); {describe()}; {ran}; jaxppo: {cache}"
              f"{threads}{load}")
    try:
        md = write_outputs(out_dir, rows, same, notes, header)
        if stop is not None:
            stop.out_dir = out_dir
            raise stop
        return md
    except UsageError as e:  # a full disk after every run: the measurements are not lost
        echo("")
        echo(table_markdown(rows, notes, header))
        raise UsageError(f"{e} (the table is printed above)") from None
