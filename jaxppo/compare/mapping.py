"""One `PPOConfig`, said in each PyTorch library's own words: pure functions, one per system,
each returning the library's arguments, the notes on how its documented differences were
handled, and the hyperparameters it cannot express (named in the table, never dropped
silently). SB3's mapping is `sb3_run.sb3_kwargs`; these are the others'.

The differences handled (checked in each library's source, Tianshou 2.0.1, TorchRL 0.14.1):
- value loss: jaxppo's is 0.5 * MSE (CleanRL); Tianshou's `PPO` and TorchRL's `ClipPPOLoss`
  with `loss_critic_type="l2"` take the MSE itself, so their coefficient is 0.5 * vf_coef;
- advantage normalisation: all three per minibatch (Tianshou's `advantage_normalization`,
  TorchRL's `normalize_advantage`);
- the annealed learning rate: lr * (1 - k / U) at update k = 0..U-1; Tianshou's
  `LRSchedulerFactoryLinear` steps once per `update()` and gives exactly that when its
  max_update_num is U; TorchRL has none, so a `LambdaLR` stepped once per update;
- minibatch meaning: Tianshou's `batch_size` and TorchRL's sub-batch are the minibatch
  (jaxppo's `minibatch_size`), not the rollout;
- target_kl: neither Tianshou's `PPO` nor TorchRL's `ClipPPOLoss` has a KL early stop;
- value clipping: Tianshou's `value_clip` and TorchRL's `clip_value` clip with the ratio's
  clip range, as jaxppo's `clip_vloss` (compare turns it off everywhere: SB3 has none).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: the PyTorch systems' process imports no JAX
    from jaxppo.config import PPOConfig


@dataclasses.dataclass(frozen=True)
class Mapped:
    """A library's arguments for one config, how they were made equal, and what it lacks."""

    kwargs: dict[str, Any]
    notes: tuple[str, ...] = ()
    cannot: tuple[str, ...] = ()
    """Hyperparameters set in the config that the library cannot express (run without)."""


def annealed_lr_factor(k: int, num_updates: int) -> float:
    """The learning-rate multiplier jaxppo uses at update k (0-based): 1 - k / U."""
    return 1.0 - k / num_updates


def _cannot(config: PPOConfig, what: str) -> tuple[str, ...]:
    """The set hyperparameters a library without a KL stop and without jaxppo's running
    observation/reward normalisation cannot express."""
    out = []
    if config.target_kl is not None:
        out.append(f"target_kl={config.target_kl} ({what} has no KL early stop)")
    if config.normalize_obs:
        out.append(f"normalize_obs ({what}'s side here has no running obs normalisation)")
    if config.normalize_reward:
        out.append(f"normalize_reward ({what}'s side here has no reward scaling)")
    return tuple(out)


def tianshou_mapping(config: PPOConfig) -> Mapped:
    """`PPOConfig` -> Tianshou 2.0 `PPO(...)` keywords (`algorithm`), its Adam factory's
    (`adam`), the linear schedule's update count (`lr_updates`, None: constant), and the
    loop's collect/update sizes."""
    algorithm = {
        "eps_clip": config.clip_eps,
        "dual_clip": None,
        "value_clip": config.clip_vloss,
        "advantage_normalization": config.norm_adv,
        "recompute_advantage": False,
        "vf_coef": 0.5 * config.vf_coef,  # Tianshou's value loss is the MSE itself
        "ent_coef": config.ent_coef,
        "max_grad_norm": config.max_grad_norm,
        "gae_lambda": config.gae_lambda,
        "gamma": config.gamma,
        "max_batchsize": config.minibatch_size,  # GAE and logp_old computed per minibatch
        "return_scaling": False,
    }
    return Mapped(
        {"algorithm": algorithm, "adam": {"lr": config.lr, "eps": config.adam_eps},
         "lr_updates": config.num_updates if config.anneal_lr else None,
         "collect_steps": config.batch_size, "batch_size": config.minibatch_size,
         "repeat": config.update_epochs, "num_envs": config.num_envs},
        ("Tianshou: vf_coef x 0.5 (its value loss is the MSE, jaxppo's 0.5 MSE); its "
         "advantage std is torch's unbiased one",),
        _cannot(config, "Tianshou's PPO"))


def torchrl_mapping(config: PPOConfig) -> Mapped:
    """`PPOConfig` -> TorchRL 0.14 `ClipPPOLoss(...)` keywords (`loss`), `GAE(...)`'s
    (`gae`), the collector/epoch sizes, Adam's and the schedule's, as the PyTorch PPO
    tutorial wires them."""
    loss = {
        "clip_epsilon": config.clip_eps,
        "entropy_bonus": config.ent_coef > 0,
        "entropy_coeff": config.ent_coef,
        "critic_coeff": 0.5 * config.vf_coef,  # "l2" is the MSE itself
        "loss_critic_type": "l2",
        "normalize_advantage": config.norm_adv,
        "clip_value": config.clip_eps if config.clip_vloss else None,
    }
    return Mapped(
        {"loss": loss, "gae": {"gamma": config.gamma, "lmbda": config.gae_lambda,
                               "average_gae": False},
         "adam": {"lr": config.lr, "eps": config.adam_eps},
         "lr_updates": config.num_updates if config.anneal_lr else None,
         "frames_per_batch": config.batch_size, "sub_batch_size": config.minibatch_size,
         "num_epochs": config.update_epochs, "max_grad_norm": config.max_grad_norm,
         "num_envs": config.num_envs},
        ("TorchRL: critic_coeff = 0.5 x vf_coef with loss_critic_type l2 (the MSE; its default "
         "smooth_l1 is another loss); the annealed lr is a LambdaLR stepped per update",),
        _cannot(config, "TorchRL's ClipPPOLoss"))


def torch_mapping(config: PPOConfig) -> Mapped:
    """`PPOConfig` -> jaxppo's own single-file PyTorch PPO (`torch_ppo.py`): the same
    algorithm as jaxppo's, field for field (CleanRL's), so the mapping is the identity on the
    fields it reads; it has a KL stop (after each epoch, as CleanRL), no obs/reward
    normalisation."""
    fields = ("num_envs", "num_steps", "update_epochs", "num_minibatches", "lr", "anneal_lr",
              "gamma", "gae_lambda", "clip_eps", "clip_vloss", "ent_coef", "vf_coef",
              "max_grad_norm", "target_kl", "norm_adv", "hidden_sizes", "activation",
              "adam_eps")
    kwargs = {f: getattr(config, f) for f in fields}
    kwargs.update(minibatch_size=config.minibatch_size, num_updates=config.num_updates)
    notes = (("torch: target_kl checked after each epoch (CleanRL's place)",)
             if config.target_kl is not None else ())
    cannot = tuple(c for c in _cannot(config, "the torch script") if "target_kl" not in c)
    return Mapped(kwargs, notes, cannot)
