"""`jaxppo compare`: jaxppo side by side with the PyTorch pipelines people use today (SB3,
Tianshou, TorchRL, a plain torch script: `systems.py`) on the same hyperparameters and machine:
on classic control, MinAtar (the reference `minatar`), Atari (ALE under SB3's wrappers, against
jaxppo's EnvPool source) and any `gymnasium/<id>` (`sb3.py` builds the SB3 side).

Every (system, repeat) runs in a fresh child process, interleaved (repeat 1 of every system,
then repeat 2, ...), so slow drift of the machine hits all systems alike and no system inherits
another's warm caches or threads. Each child reports its setup time (jaxppo: compile; SB3: env
processes and model), its run time and SPS, the wall time at which it reached the solve
threshold counted from its start (so including compile/setup), and its final return. The solve
rule is the same code for every system (`stats.SolveTracker`: mean over seeds of each seed's
mean return over its last 20 episodes).

The mapping of `PPOConfig` to SB3's `PPO(...)` is `sb3_kwargs`; where the two algorithms differ
the difference is removed on the jaxppo side and printed (`comparable_config`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import time
from typing import Any

import jax
import numpy as np

from jaxppo.compare import systems as systems_mod
from jaxppo.compare.fit import (
    CHILD,
    check_peak_fits,
    check_subproc_fits,
    cpu_times,
    holds_jax,
    load_text,
    machine_load,
    measure_sb3,
    other_work,
    other_work_note,
    process_bytes,
    usable_cores,
)
from jaxppo.compare.runners import (
    check_installed,
    check_library,
    mapping_notes,
    run_pytorch,
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
from jaxppo.config import PPOConfig
from jaxppo.errors import ConfigError, UsageError
from jaxppo.machine import describe
from jaxppo.run.experiment import Experiment
from jaxppo.run.stats import SolveTracker, solve_threshold

SYSTEMS = systems_mod.SYSTEMS
"""jaxppo (1 seed, N vmapped seeds), SB3, Tianshou, TorchRL and jaxppo's own torch script, each
in its one-process and one-process-per-env form (`systems.py`)."""

GYMNASIUM_IDS = {
    "CartPole-v1": "CartPole-v1",
    "Acrobot-v1": "Acrobot-v1",
    "MountainCar-v0": "MountainCar-v0",
    "MountainCarContinuous-v0": "MountainCarContinuous-v0",
    "Pendulum-v1": "Pendulum-v1",
}
"""gymnax ids whose gymnasium twin has the same dynamics, spaces and time limit."""

MINATAR_IDS = ("Asterix-MinAtar", "Breakout-MinAtar", "Freeway-MinAtar", "Seaquest-MinAtar",
               "SpaceInvaders-MinAtar")
"""gymnax's MinAtar games; SB3 runs the reference `minatar` package (`sb3_side.MinAtarEnv`)."""

ATARI_PREFIX = "envpool/"
GYMNASIUM_PREFIX = "gymnasium/"
TORSOS = {"classic": ("mlp",), "gymnasium": ("mlp",), "minatar": ("mlp", "cnn"),
          "atari": ("nature_cnn",)}
"""Per kind of env, the torsos whose twin the SB3 side builds (`sb3_side.policy_setup`)."""
ATARI_SB3_SETTINGS = {"episodic_life": True, "reward_clip": True}
"""EnvPool settings an Atari config may spell out: SB3's `AtariWrapper` trains that way too."""


def env_kind(env_id: str) -> str:
    """Which SB3 twin `env_id` has: `classic` (gymnasium's classic control), `minatar` (the
    reference MinAtar), `atari` (EnvPool Atari vs ALE under SB3's Atari wrappers) or
    `gymnasium` (the same Gymnasium id on both sides); one line if none."""
    if env_id in GYMNASIUM_IDS:
        return "classic"
    if env_id in MINATAR_IDS:
        return "minatar"
    if env_id.startswith(ATARI_PREFIX) and env_id.endswith("-v5"):
        return "atari"
    if env_id.startswith(GYMNASIUM_PREFIX) and len(env_id) > len(GYMNASIUM_PREFIX):
        return "gymnasium"
    raise ConfigError(f"config key 'env_id': jaxppo compare runs envs that gymnasium has too "
                      f"({', '.join(GYMNASIUM_IDS)}), gymnax's MinAtar games, EnvPool's Atari "
                      f"games (envpool/<Game>-v5) and gymnasium/<id>, not {env_id!r}")


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


class AnnealedLR:
    """SB3 learning-rate schedule equal to jaxppo's `lr * (1 - k / U)` at update k = 0..U-1.

    SB3 evaluates it at progress_remaining = 1 - (k + 1) / U (progress is advanced after the
    rollout, before the update), hence the `+ 1 / U`. A class, not a lambda: SB3 pickles it.
    """

    def __init__(self, lr: float, num_updates: int):
        self.lr, self.num_updates = lr, num_updates

    def __call__(self, progress_remaining: float) -> float:
        return self.lr * min(1.0, progress_remaining + 1.0 / self.num_updates)


def sb3_kwargs(config: PPOConfig) -> dict[str, Any]:
    """`PPOConfig` -> keyword arguments of `stable_baselines3.PPO` (torch is imported here)."""
    import torch

    from jaxppo.compare.sb3 import policy_setup

    activations = {"tanh": torch.nn.Tanh, "relu": torch.nn.ReLU, "gelu": torch.nn.GELU,
                   "silu": torch.nn.SiLU, "elu": torch.nn.ELU}
    hidden = list(config.hidden_sizes)
    return {
        "n_steps": config.num_steps,
        "batch_size": config.minibatch_size,  # SB3's batch_size is the minibatch
        "n_epochs": config.update_epochs,
        "learning_rate": (AnnealedLR(config.lr, config.num_updates) if config.anneal_lr
                          else config.lr),
        "gamma": config.gamma,
        "gae_lambda": config.gae_lambda,
        "clip_range": config.clip_eps,
        "clip_range_vf": None,  # see comparable_config
        "normalize_advantage": config.norm_adv,
        "ent_coef": config.ent_coef,
        # jaxppo's value loss is 0.5 * MSE (CleanRL); SB3's is the MSE itself.
        "vf_coef": 0.5 * config.vf_coef,
        "max_grad_norm": config.max_grad_norm,
        # SB3 stops once approx_kl > 1.5 * target_kl; jaxppo at approx_kl > target_kl.
        "target_kl": None if config.target_kl is None else config.target_kl / 1.5,
        "policy_kwargs": {
            "net_arch": {"pi": hidden, "vf": hidden},  # separate actor and critic MLPs
            "activation_fn": activations[config.activation],
            "ortho_init": True,  # gains sqrt(2) / 0.01 / 1, as jaxppo and CleanRL
            "log_std_init": 0.0,
            "optimizer_kwargs": {"eps": config.adam_eps},
            **policy_setup(env_kind(config.env_id), config.torso, config.shared_torso)[1],
        },
        "device": "cpu",
        "verbose": 0,
    }


def make_sb3(config: PPOConfig, subproc: bool, seed: int):
    """The SB3 model with its vectorised env (wrapped in VecNormalize where jaxppo normalizes)."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.logger import Logger
    from stable_baselines3.common.vec_env import VecNormalize

    from jaxppo.compare.sb3 import make_vec, policy_setup

    kind = env_kind(config.env_id)
    gym_id = (GYMNASIUM_IDS.get(config.env_id) if kind == "classic"
              else config.env_id.removeprefix(GYMNASIUM_PREFIX))
    env = make_vec(kind, config.env_id, config.num_envs, subproc, seed,
                   max_episode_steps=config.max_episode_steps, gym_id=gym_id,
                   imports=config.env_imports)
    if config.normalize_obs or config.normalize_reward:
        env = VecNormalize(env, norm_obs=config.normalize_obs, norm_reward=config.normalize_reward,
                           gamma=config.gamma, clip_obs=10.0, clip_reward=10.0, epsilon=1e-8)
    model = PPO(policy_setup(kind, config.torso, config.shared_torso)[0], env, seed=seed,
                **sb3_kwargs(config))
    model.set_logger(Logger(folder=None, output_formats=[]))  # SB3's own left tmp/SB3-<date>
    return model


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


def _run_sb3(config: PPOConfig, subproc: bool, seed: int, t0: float) -> dict:
    from stable_baselines3.common.callbacks import BaseCallback

    model = make_sb3(config, subproc, seed)
    setup = time.perf_counter() - t0
    tracker = SolveTracker(solve_threshold(config.env_id), 1)
    state = {"solve_s": None, "solve_steps": None, "final": None, "episodes": []}

    class Track(BaseCallback):
        """Per rollout: the mean return of the episodes that ended in it (as jaxppo per update)."""

        def _on_step(self) -> bool:
            state["episodes"] += [i["episode"]["r"] for i in self.locals["infos"] if "episode" in i]
            return True

        def _on_rollout_end(self) -> None:
            eps = state["episodes"]
            if eps:
                state["final"] = float(np.mean(eps))
            if tracker.add([np.mean(eps) if eps else 0.0], [len(eps)]) and state["solve_s"] is None:
                state["solve_s"] = time.perf_counter() - t0
                state["solve_steps"] = int(self.model.num_timesteps)
            state["episodes"] = []

    model.learn(total_timesteps=config.env_steps, callback=Track())
    run_s = time.perf_counter() - t0 - setup
    model.get_env().close()
    import torch

    done = int(model.num_timesteps)
    return {"setup_s": setup, "run_s": run_s, "env_steps": done,
            "status": "finished" if done >= config.env_steps else "stopped",
            "sps": done / run_s, "threads": torch.get_num_threads(),
            "solve_s": state["solve_s"],
            "solve_steps": state["solve_steps"], "final_return": state["final"]}


def run_system(system: str, config: PPOConfig, seeds: int, seed: int) -> dict:
    """Run one system once in this process; timings count from this call."""
    t0 = time.perf_counter()
    if system == "jaxppo":
        return _run_jaxppo(config, 1, seed, t0)
    if system == "jaxppo-seeds":
        return _run_jaxppo(config, seeds, seed, t0)
    if system in ("sb3-dummy", "sb3-subproc"):
        return _run_sb3(config, system == "sb3-subproc", seed, t0)
    if system in SYSTEMS:
        kind = env_kind(config.env_id)
        gym_id = (GYMNASIUM_IDS.get(config.env_id) if kind == "classic"
                  else config.env_id.removeprefix(GYMNASIUM_PREFIX))
        return run_pytorch(system, config, seed, t0, kind, gym_id)
    raise ValueError(f"unknown system {system!r}")


def measure_subproc(config: PPOConfig, seed: int = 0) -> dict:
    """{"worker": bytes, "main": bytes, "worker_jax": bool or None}: one `SubprocVecEnv`
    worker of `config`'s env (each imports torch, SB3 and the env's modules), whether JAX is
    loaded in it (it must not be: a plain SB3 script's workers have none), and the SB3 process
    with its rollout buffer scaled to `num_envs` (float32 observations, n_steps x n_envs)."""
    one = dataclasses.replace(config, num_envs=1, num_minibatches=1)
    model = make_sb3(one, subproc=True, seed=seed)
    env = inner = model.get_env()
    env.reset()
    while hasattr(inner, "venv"):  # VecNormalize, VecFrameStack
        inner = inner.venv
    pid = inner.processes[0].pid
    worker, main, jax_there = process_bytes(pid), process_bytes(os.getpid()), holds_jax(pid)
    env.close()
    buffer = (config.num_envs - 1) * config.num_steps * 4 * int(np.prod(model.observation_space.shape))
    return {"worker": worker, "main": None if main is None else main + buffer,
            "worker_jax": jax_there}


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
    loads, others, short = [], [], []
    try:
        for k, system in ((k, s) for k in range(repeats) for s in systems):
            echo(f"[{k + 1}/{repeats}] {label(system, config, seeds)} ...")
            # The PyTorch sides touch JAX only to read gymnax's MinAtar time limit: keep them off
            # the accelerator (no GPU memory grabbed, no device start-up in their setup time).
            child_env = (env if system.startswith("jaxppo")
                         else {**env, **pinned, "JAX_PLATFORMS": "cpu"})
            if runs[system]:  # memory taken by other work since its last run
                check_peak_fits(system, runs[system][-1].get("peak_bytes"))
            loads.append(machine_load())  # before the run (the previous run's own included)
            before = cpu_times()  # and the machine's CPU time, for the other work during it
            with Watch() as tree:  # the child's whole process tree: peak memory, procs
                proc = subprocess.run([*CHILD, system, payload, str(seeds), str(seed + k),
                                       str(sb3_threads)], capture_output=True, text=True,
                                      env=child_env)
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
                               notes + short + ([busy] if busy else []), stop, repeats)
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
