"""The Tianshou side of `jaxppo compare` (`tianshou-subproc`, `tianshou-dummy`): Tianshou 2.0's
`PPO` algorithm with a `DiscreteActorPolicy`, a `Collector` on a `SubprocVectorEnv` (one
process per env, forkserver as SB3's) or a `DummyVectorEnv` (one process), and the loop
Tianshou's `OnPolicyTrainer` runs, without its test collector and logger: collect one rollout
(`num_envs * num_steps` steps), `update` over it (`update_epochs` passes of `minibatch_size`),
empty the buffer. Arguments from `mapping.tianshou_mapping`; networks as jaxppo's (the
orthogonal-init MLPs of `torch_ppo`).

Imports torch, gymnasium and Tianshou at the top: `compare.py` imports it inside a function.
"""

from __future__ import annotations

import time

import numpy as np
import torch
from tianshou.algorithm import PPO
from tianshou.algorithm.modelfree.reinforce import DiscreteActorPolicy
from tianshou.algorithm.optim import AdamOptimizerFactory, LRSchedulerFactoryLinear
from tianshou.data import Collector, VectorReplayBuffer
from tianshou.env import DummyVectorEnv, SubprocVectorEnv
from tianshou.utils.torch_utils import policy_within_training_step, torch_train_mode
from torch import nn

from jaxppo.compare.mapping import Mapped
from jaxppo.compare.torch_ppo import mlp
from jaxppo.compare.track import EpisodeLog


class Actor(nn.Module):
    """Tianshou's actor protocol: (obs, state, info) -> (logits, state)."""

    def __init__(self, obs_dim: int, n_actions: int, hidden: list[int], activation: str):
        super().__init__()
        self.net = mlp([obs_dim, *hidden], activation, n_actions, 0.01)

    def forward(self, obs, state=None, info=None):
        return self.net(torch.as_tensor(obs, dtype=torch.float32).flatten(1)), state


class Critic(nn.Module):
    """obs -> V(obs), [B, 1]."""

    def __init__(self, obs_dim: int, hidden: list[int], activation: str):
        super().__init__()
        self.net = mlp([obs_dim, *hidden], activation, 1, 1.0)

    def forward(self, obs, **_):
        return self.net(torch.as_tensor(obs, dtype=torch.float32).flatten(1))


def run(mapped: Mapped, net: dict, env_fn, subproc: bool, seed: int, threshold, t0: float,
        num_updates: int, env_steps: int) -> dict:
    """Train once; the compare child's result dict (timings from `t0`)."""
    kw = mapped.kwargs
    torch.manual_seed(seed)
    n = kw["num_envs"]
    envs = (SubprocVectorEnv([env_fn] * n, context="forkserver") if subproc
            else DummyVectorEnv([env_fn] * n))
    envs.seed(seed)
    obs_space, act_space = envs.observation_space[0], envs.action_space[0]
    obs_dim = int(np.prod(obs_space.shape))
    actor = Actor(obs_dim, int(act_space.n), net["hidden"], net["activation"])
    critic = Critic(obs_dim, net["hidden"], net["activation"])
    optim = AdamOptimizerFactory(**kw["adam"])
    if kw["lr_updates"] is not None:  # max_update_num = ceil(U*B / B) * 1 = U
        optim = optim.with_lr_scheduler_factory(LRSchedulerFactoryLinear(
            max_epochs=1, epoch_num_steps=kw["lr_updates"] * kw["collect_steps"],
            collection_step_num_env_steps=kw["collect_steps"]))
    policy = DiscreteActorPolicy(actor=actor, action_space=act_space, observation_space=obs_space)
    algo = PPO(policy=policy, critic=critic, optim=optim, **kw["algorithm"])
    collector = Collector(algo, envs, VectorReplayBuffer(kw["collect_steps"], n))
    collector.reset()
    log = EpisodeLog(threshold, t0)
    setup = time.perf_counter() - t0
    done = 0
    for _ in range(num_updates):
        with policy_within_training_step(policy), torch_train_mode(policy, False):
            stats = collector.collect(n_step=kw["collect_steps"])
        done += int(stats.n_collected_steps)
        log.add(np.asarray(stats.returns).tolist())
        with policy_within_training_step(policy), torch_train_mode(algo):
            algo.update(buffer=collector.buffer, batch_size=kw["batch_size"],
                        repeat=kw["repeat"])
        collector.reset_buffer(keep_statistics=True)
        log.end_update(done)
    run_s = time.perf_counter() - t0 - setup
    envs.close()
    return log.result(setup, run_s, done, env_steps, torch.get_num_threads())
