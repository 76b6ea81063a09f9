"""The TorchRL side of `jaxppo compare` (`torchrl-parallel`, `torchrl-serial`): the PyTorch PPO
tutorial's pipeline on TorchRL 0.14, the Gymnasium env under `GymWrapper` in a `ParallelEnv`
(one process per env) or a `SerialEnv` (one process), a `Collector`, `GAE`, `ClipPPOLoss`,
a replay buffer sampled without replacement, Adam with the gradient-norm clip.

One difference from the tutorial, made so the algorithm is jaxppo's: the tutorial recomputes
GAE at the start of every epoch with the current critic; here, as jaxppo, SB3, Tianshou and
CleanRL, it is computed once per rollout. Arguments from `mapping.torchrl_mapping`; networks
as jaxppo's (the orthogonal-init MLPs of `torch_ppo`).

Imports torch and TorchRL at the top: `compare.py` imports it inside a function.
"""

from __future__ import annotations

import sys
import time

import cloudpickle
import numpy as np
import torch
from tensordict.nn import TensorDictModule
from torchrl.collectors import Collector
from torchrl.data.replay_buffers import ReplayBuffer
from torchrl.data.replay_buffers.samplers import SamplerWithoutReplacement
from torchrl.data.replay_buffers.storages import LazyTensorStorage
from torchrl.envs import ParallelEnv, RewardSum, SerialEnv, TransformedEnv
from torchrl.envs.libs.gym import GymWrapper
from torchrl.modules import ProbabilisticActor, ValueOperator
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.value import GAE

from jaxppo.compare.mapping import Mapped, annealed_lr_factor
from jaxppo.compare.torch_ppo import mlp
from jaxppo.compare.track import EpisodeLog


class MakeEnv:
    """A picklable env factory for TorchRL's workers: the Gymnasium env in a `GymWrapper`,
    integer (not one-hot) actions."""

    def __init__(self, env_fn):
        self.env_fn = env_fn

    def __call__(self):
        return GymWrapper(self.env_fn(), categorical_action_encoding=True)


def make_env(env_fn) -> MakeEnv:
    """`MakeEnv(env_fn)`, which TorchRL's workers get by value (TorchRL sends it with
    cloudpickle), as the env's own code (`gym_side`): by reference, each worker imported this
    module, so jaxppo and JAX, which a TorchRL script's workers do not (~1 s and ~80 MB each,
    counted on TorchRL's side)."""
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    return MakeEnv(env_fn)


def run(mapped: Mapped, net: dict, env_fn, parallel: bool, seed: int, threshold, t0: float,
        num_updates: int, env_steps: int) -> dict:
    """Train once; the compare child's result dict (timings from `t0`)."""
    kw = mapped.kwargs
    torch.manual_seed(seed)
    n = kw["num_envs"]
    base = (ParallelEnv(n, make_env(env_fn), mp_start_method="forkserver") if parallel
            else SerialEnv(n, make_env(env_fn)))
    env = TransformedEnv(base, RewardSum())
    env.set_seed(seed)
    obs_dim = int(np.prod(env.observation_spec["observation"].shape[1:]))
    n_actions = int(env.action_spec.space.n)
    actor = TensorDictModule(mlp([obs_dim, *net["hidden"]], net["activation"], n_actions, 0.01),
                             in_keys=["observation"], out_keys=["logits"])
    policy = ProbabilisticActor(actor, spec=env.action_spec, in_keys=["logits"],
                                distribution_class=torch.distributions.Categorical,
                                return_log_prob=True)
    value = ValueOperator(mlp([obs_dim, *net["hidden"]], net["activation"], 1, 1.0),
                          in_keys=["observation"])
    advantage = GAE(value_network=value, **kw["gae"])
    loss_module = ClipPPOLoss(actor_network=policy, critic_network=value, **kw["loss"])
    optim = torch.optim.Adam(loss_module.parameters(), **kw["adam"])
    batch, mb = kw["frames_per_batch"], kw["sub_batch_size"]
    collector = Collector(env, policy, frames_per_batch=batch, total_frames=num_updates * batch,
                          split_trajs=False, auto_register_policy_transforms=False)
    buffer = ReplayBuffer(storage=LazyTensorStorage(batch), sampler=SamplerWithoutReplacement(),
                          batch_size=mb)
    log = EpisodeLog(threshold, t0)
    setup = time.perf_counter() - t0
    done = 0
    for k, data in enumerate(collector):
        if kw["lr_updates"] is not None:
            optim.param_groups[0]["lr"] = kw["adam"]["lr"] * annealed_lr_factor(
                k, kw["lr_updates"])
        ended = data["next", "done"].squeeze(-1)
        log.add(data["next", "episode_reward"].squeeze(-1)[ended].tolist())
        done += data.numel()
        with torch.no_grad():
            advantage(data)  # once per rollout, as jaxppo (the tutorial: every epoch)
        buffer.empty()
        buffer.extend(data.reshape(-1))
        for _ in range(kw["num_epochs"]):
            for _ in range(batch // mb):
                losses = loss_module(buffer.sample())
                loss = (losses["loss_objective"] + losses["loss_critic"]
                        + losses.get("loss_entropy", 0.0))
                loss.backward()
                torch.nn.utils.clip_grad_norm_(loss_module.parameters(), kw["max_grad_norm"])
                optim.step()
                optim.zero_grad()
        log.end_update(done)
    run_s = time.perf_counter() - t0 - setup
    collector.shutdown()  # closes the env too
    return log.result(setup, run_s, done, env_steps, torch.get_num_threads())
