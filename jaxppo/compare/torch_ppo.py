"""jaxppo's own CleanRL-style single-file PyTorch PPO (written here): the `torch-*` systems of
`jaxppo compare`, on Gymnasium's `SyncVectorEnv` (one process) or `AsyncVectorEnv` (one
process per env), and the same script under `torch.compile` (`torch-compile-*`).

The algorithm is jaxppo's, field for field (`mapping.torch_mapping`): separate actor and critic
MLPs with orthogonal init (gains sqrt(2), 0.01 for the policy head, 1 for the value head),
GAE with termination and time-limit truncation kept apart (a truncated step bootstraps from
the value of its true last observation, `info["final_obs"]`), per-minibatch advantage
normalisation, clipped surrogate, CleanRL's max-form value clipping, 0.5 * MSE value loss,
global gradient-norm clip, linear learning-rate annealing, Adam with jaxppo's eps.

torch.compile compiles the acting step and the loss (forward and, through AOTAutograd, its
backward) with Inductor; on a CUDA device it would use mode "reduce-overhead" (CUDA graphs),
but compare runs the torch systems on the CPU, where there are no CUDA graphs.

This module imports torch and gymnasium at the top: only `compare.py` imports it, inside a
function, when the compare extra is installed.
"""

from __future__ import annotations

import math
import time

import gymnasium
import numpy as np
import torch
from torch import nn

from jaxppo.compare.mapping import annealed_lr_factor
from jaxppo.compare.track import EpisodeLog

ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "gelu": nn.GELU, "silu": nn.SiLU, "elu": nn.ELU}


def mlp(sizes: list[int], activation: str, out: int, gain: float) -> nn.Sequential:
    """An MLP with orthogonal init (hidden gain sqrt(2), output `gain`, zero biases)."""
    layers: list[nn.Module] = []
    for a, b in zip(sizes[:-1], sizes[1:], strict=True):
        layers += [init(nn.Linear(a, b), math.sqrt(2)), ACTIVATIONS[activation]()]
    layers.append(init(nn.Linear(sizes[-1], out), gain))
    return nn.Sequential(*layers)


def init(layer: nn.Linear, gain: float) -> nn.Linear:
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


class Agent(nn.Module):
    """Separate actor (logits) and critic (value) MLPs over flat observations."""

    def __init__(self, obs_dim: int, n_actions: int, hidden: list[int], activation: str):
        super().__init__()
        self.actor = mlp([obs_dim, *hidden], activation, n_actions, 0.01)
        self.critic = mlp([obs_dim, *hidden], activation, 1, 1.0)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(obs.flatten(1)).squeeze(-1)

    def act(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """A sampled action, its log-probability and the value (no gradient)."""
        logits = self.actor(obs.flatten(1))
        action = torch.multinomial(torch.softmax(logits, -1), 1).squeeze(-1)
        logp = torch.log_softmax(logits, -1).gather(-1, action[:, None]).squeeze(-1)
        return action, logp, self.value(obs)


def ppo_loss(agent: Agent, obs, actions, logp_old, adv, returns, values_old, kw: dict):
    """CleanRL's PPO loss on one minibatch: (loss, approx_kl)."""
    logits = agent.actor(obs.flatten(1))
    logps = torch.log_softmax(logits, -1)
    logp = logps.gather(-1, actions[:, None]).squeeze(-1)
    entropy = -(logps.exp() * logps).sum(-1).mean()
    log_ratio = logp - logp_old
    ratio = log_ratio.exp()
    approx_kl = ((ratio - 1) - log_ratio).mean()
    if kw["norm_adv"]:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    pg = torch.max(-adv * ratio, -adv * ratio.clamp(1 - kw["clip_eps"], 1 + kw["clip_eps"])).mean()
    v = agent.value(obs)
    if kw["clip_vloss"]:
        v_clip = values_old + (v - values_old).clamp(-kw["clip_eps"], kw["clip_eps"])
        v_loss = 0.5 * torch.max((v - returns) ** 2, (v_clip - returns) ** 2).mean()
    else:
        v_loss = 0.5 * ((v - returns) ** 2).mean()
    return pg - kw["ent_coef"] * entropy + kw["vf_coef"] * v_loss, approx_kl


def gae(rewards, values, next_values, terms, dones, gamma: float, lam: float):
    """GAE over [T, N] arrays: `next_values[t]` is V of the state after step t (the true last
    observation where t truncated); `terms` zero the bootstrap, `dones` cut the recursion."""
    adv = np.zeros_like(rewards)
    last = np.zeros(rewards.shape[1], np.float32)
    for t in reversed(range(rewards.shape[0])):
        delta = rewards[t] + gamma * next_values[t] * (1 - terms[t]) - values[t]
        last = delta + gamma * lam * (1 - dones[t]) * last
        adv[t] = last
    return adv


def warm_up(agent: Agent, act, loss_fn, value_fn, obs, kw: dict) -> None:
    """Compile now (setup, as jaxppo's compile): act and value on a rollout step's batch, the
    loss and its backward on a minibatch's shapes; the gradients are dropped. The loss's
    tensors are distinct, as the run's: one tensor passed thrice failed dynamo's aliasing
    guard, and the loss compiled again inside the run, counted as run time."""
    o = torch.as_tensor(obs, dtype=torch.float32)
    with torch.no_grad():
        act(o)
        value_fn(o)
    mb = kw["minibatch_size"]
    x = o[torch.arange(mb) % o.shape[0]]
    loss, _ = loss_fn(agent, x, torch.zeros(mb, dtype=torch.int64), torch.zeros(mb),
                      torch.randn(mb), torch.zeros(mb), torch.zeros(mb), kw)
    loss.backward()
    agent.zero_grad(set_to_none=True)


def make_vector(env_fn, num_envs: int, asynchronous: bool, seed: int):
    """Gymnasium's vector env, resetting a finished env in the same step (its last
    observation in `info["final_obs"]`); worker processes by forkserver, as SB3's."""
    same = gymnasium.vector.AutoresetMode.SAME_STEP
    if asynchronous:
        env = gymnasium.vector.AsyncVectorEnv([env_fn] * num_envs, context="forkserver",
                                              autoreset_mode=same)
    else:
        env = gymnasium.vector.SyncVectorEnv([env_fn] * num_envs, autoreset_mode=same)
    return env, env.reset(seed=seed)[0]


def run(kw: dict, env_fn, asynchronous: bool, compiled: bool, seed: int, threshold, t0: float,
        env_steps: int) -> dict:
    """Train once; the compare child's result dict (timings from `t0`)."""
    torch.manual_seed(seed)
    n, steps = kw["num_envs"], kw["num_steps"]
    envs, obs = make_vector(env_fn, n, asynchronous, seed)
    agent = Agent(int(np.prod(envs.single_observation_space.shape)),
                  int(envs.single_action_space.n), list(kw["hidden_sizes"]), kw["activation"])
    opt = torch.optim.Adam(agent.parameters(), lr=kw["lr"], eps=kw["adam_eps"])
    act, loss_fn, value_fn = agent.act, ppo_loss, agent.value
    if compiled:  # CUDA graphs ("reduce-overhead") need a CUDA device; this runs on the CPU
        act, loss_fn, value_fn = (torch.compile(f) for f in (act, ppo_loss, agent.value))
        warm_up(agent, act, loss_fn, value_fn, obs, kw)  # the compile counts as setup
    log = EpisodeLog(threshold, t0)
    ep_ret = np.zeros(n)
    setup = time.perf_counter() - t0
    buf = {k: np.zeros((steps, n), np.float32) for k in
           ("logp", "rew", "val", "next_val", "term", "done")}
    buf_obs = np.zeros((steps, n, *envs.single_observation_space.shape), np.float32)
    buf_act = np.zeros((steps, n), np.int64)
    done_steps = 0
    for k in range(kw["num_updates"]):
        if kw["anneal_lr"]:
            opt.param_groups[0]["lr"] = kw["lr"] * annealed_lr_factor(k, kw["num_updates"])
        with torch.no_grad():
            for t in range(steps):
                o = torch.as_tensor(obs, dtype=torch.float32)
                a, lp, v = act(o)
                buf_obs[t], buf_act[t], buf["logp"][t], buf["val"][t] = obs, a, lp, v
                obs, r, term, trunc, info = envs.step(a.numpy())
                nv = value_fn(torch.as_tensor(obs, dtype=torch.float32)).numpy()
                ended = term | trunc
                if trunc.any():  # bootstrap from the true last observation
                    last = np.stack([info["final_obs"][i] if trunc[i] else obs[i]
                                     for i in range(n)]).astype(np.float32)
                    nv = np.where(trunc, value_fn(torch.as_tensor(last)).numpy(), nv)
                buf["rew"][t], buf["next_val"][t] = r, nv
                buf["term"][t], buf["done"][t] = term, ended
                ep_ret += r
                log.add(ep_ret[ended].tolist())
                ep_ret[ended] = 0.0
        done_steps += steps * n
        adv = gae(buf["rew"], buf["val"], buf["next_val"], buf["term"], buf["done"],
                  kw["gamma"], kw["gae_lambda"])
        flat = lambda x: torch.as_tensor(x.reshape(steps * n, *x.shape[2:]))  # noqa: E731
        b = [flat(buf_obs), flat(buf_act), flat(buf["logp"]), flat(adv),
             flat(adv + buf["val"]), flat(buf["val"])]
        for _ in range(kw["update_epochs"]):
            perm = torch.randperm(steps * n)
            for start in range(0, steps * n, kw["minibatch_size"]):
                idx = perm[start:start + kw["minibatch_size"]]
                loss, kl = loss_fn(agent, *(x[idx] for x in b), kw)
                opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), kw["max_grad_norm"])
                opt.step()
            if kw["target_kl"] is not None and float(kl) > kw["target_kl"]:
                break
        log.end_update(done_steps)
    run_s = time.perf_counter() - t0 - setup
    envs.close()
    return log.result(setup, run_s, done_steps, env_steps, torch.get_num_threads())
