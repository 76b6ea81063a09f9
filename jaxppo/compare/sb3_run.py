"""The Stable-Baselines3 systems' run in `jaxppo compare`: the model from a config (its keyword
arguments: `sb3_kwargs`), one run judged by jaxppo's solve rule, and the memory one
`SubprocVecEnv` worker takes. It runs in a process that imports no JAX (`torch_child.py`), so
it takes what needs jaxppo's env registry (the solve threshold) as an argument, and a config
as `PPOConfig` or its plain snapshot (`runners.torch_side`)."""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from jaxppo.compare.tree import holds_jax, process_bytes
from jaxppo.compare.twins import env_kind, gym_id, minatar_time_limit
from jaxppo.run.solve import SolveTracker


class AnnealedLR:
    """SB3 learning-rate schedule equal to jaxppo's `lr * (1 - k / U)` at update k = 0..U-1.

    SB3 evaluates it at progress_remaining = 1 - (k + 1) / U (progress is advanced after the
    rollout, before the update), hence the `+ 1 / U`. A class, not a lambda: SB3 pickles it.
    """

    def __init__(self, lr: float, num_updates: int):
        self.lr, self.num_updates = lr, num_updates

    def __call__(self, progress_remaining: float) -> float:
        return self.lr * min(1.0, progress_remaining + 1.0 / self.num_updates)


def sb3_kwargs(config) -> dict[str, Any]:
    """A config (`PPOConfig`, or its `torch_side` snapshot) -> keyword arguments of
    `stable_baselines3.PPO` (torch is imported here)."""
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
        "clip_range_vf": None,  # see compare.comparable_config
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


def make_sb3(config, subproc: bool, seed: int):
    """The SB3 model with its vectorised env (wrapped in VecNormalize where jaxppo normalizes)."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.logger import Logger
    from stable_baselines3.common.vec_env import VecNormalize

    from jaxppo.compare.sb3 import make_vec, policy_setup

    kind = env_kind(config.env_id)
    limit = minatar_time_limit(config.env_id, config.max_episode_steps)
    env = make_vec(kind, config.env_id, config.num_envs, subproc, seed, time_limit=limit,
                   gym_id=gym_id(config.env_id), imports=tuple(config.env_imports))
    if config.normalize_obs or config.normalize_reward:
        env = VecNormalize(env, norm_obs=config.normalize_obs, norm_reward=config.normalize_reward,
                           gamma=config.gamma, clip_obs=10.0, clip_reward=10.0, epsilon=1e-8)
    model = PPO(policy_setup(kind, config.torso, config.shared_torso)[0], env, seed=seed,
                **sb3_kwargs(config))
    model.set_logger(Logger(folder=None, output_formats=[]))  # SB3's own left tmp/SB3-<date>
    return model


def run_sb3(config, subproc: bool, seed: int, t0: float, threshold: float | None) -> dict:
    """One SB3 run in this process (timings from `t0`), judged by `SolveTracker`."""
    from stable_baselines3.common.callbacks import BaseCallback

    model = make_sb3(config, subproc, seed)
    setup = time.perf_counter() - t0
    tracker = SolveTracker(threshold, 1)
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


def measure_subproc(config, seed: int = 0, full: tuple[int, int] | None = None) -> dict:
    """{"worker": bytes, "main": bytes, "worker_jax": bool or None}: one `SubprocVecEnv`
    worker of `config`'s env (each imports torch, SB3 and the env's modules), whether JAX is
    loaded in it (it must not be: a plain SB3 script's workers have none), and the SB3 process
    with its rollout buffer scaled to `num_envs` (float32 observations, n_steps x n_envs).
    `config` has one env (`runners.torch_job` makes it); `full`: the run's (num_envs, num_steps)."""
    num_envs, num_steps = full or (config.num_envs, config.num_steps)
    model = make_sb3(config, subproc=True, seed=seed)
    env = inner = model.get_env()
    env.reset()
    while hasattr(inner, "venv"):  # VecNormalize, VecFrameStack
        inner = inner.venv
    pid = inner.processes[0].pid
    worker, main, jax_there = process_bytes(pid), process_bytes(os.getpid()), holds_jax(pid)
    env.close()
    buffer = (num_envs - 1) * num_steps * 4 * int(np.prod(model.observation_space.shape))
    return {"worker": worker, "main": None if main is None else main + buffer,
            "worker_jax": jax_there}
