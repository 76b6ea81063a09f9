"""An update's epochs: `update_epochs` shuffled passes of clipped minibatch updates (one
`lax.scan` over epochs of a `lax.scan` over minibatches), with the optimizer they step.

Two forms of the same arithmetic, chosen by whether the update is vmapped (`custom_vmap`):
- one agent alone: the parameters, the gradient and Adam's moments as one flat vector each
  for the epochs (the loss reads the parameters' tree back from the vector). Adam and the
  clip are then a few wide kernels, where per leaf they are twelve chains that XLA:CPU's
  runtime hands between its two threads (~90 hand-offs per update at 1 CartPole seed); on an
  H100 it is fewer kernels per update too;
- vmapped agents (seeds, a sweep's settings): per leaf, as the tree is. Flat vectors of many
  agents cost copies in and out of the epochs that the per-leaf form does not (32 CartPole
  seeds on the CPU 4-5% slower; 2048 agents on an H100 31% more bytes written per update).
The two agree within float rounding, not bit for bit (the global norm is one sum, not a sum
of per-leaf sums); a run alone equals the same seed vmapped within tolerance, and a run (or
its resume) is bit-exact with itself: the form depends only on how it is called.
docs/design/update-cost-on-xla-cpu.md has the measurements.

Axis legend: B = batch_size, S = len(STAT_FIELDS), M = num_minibatches, E = update_epochs.
"""

from __future__ import annotations

import functools

import chex
import jax
import jax.numpy as jnp
import optax
from jax.custom_batching import custom_vmap
from jax.flatten_util import ravel_pytree

from jaxppo.config import Hparams, PPOConfig
from jaxppo.core.batching import batched_like
from jaxppo.core.collectives import pmean
from jaxppo.core.loss import LossInfo, Minibatch, ppo_loss

STAT_FIELDS = (*(f for f in LossInfo._fields if f != "total_loss"), "grad_norm", "applied")
"""What `_minibatch_step` adds up over an update's minibatches, in its [S] vector: each loss
statistic and the gradient norm times `applied` (1.0 where the minibatch was applied), and
`applied` itself; the metrics are their means over the applied minibatches."""


def make_optimizer(hp: Hparams, config: PPOConfig) -> optax.GradientTransformation:
    """Global-norm clip then Adam's scaling; the learning rate is applied by the caller so it
    can be annealed per update from the update counter (exact on resume, sweepable by vmap).
    Its state is `(clip's, Adam's)`: `_ravel_state` knows that shape."""
    return optax.chain(optax.clip_by_global_norm(hp.max_grad_norm),
                       optax.scale_by_adam(eps=config.adam_eps))


def _minibatch_step(carry, idx, *, batch: Minibatch, hp: Hparams, lr, tx, network,
                    config: PPOConfig, axis_name: str | None = None, view=lambda p: p):
    """One clipped update on the minibatch `batch[idx]`, skipped once the KL stop has fired.
    `view` maps the carried parameters to the network's tree (the flat form's unravel).

    Its statistics are added into the carry's [S] vector (`STAT_FIELDS`) rather than stacked
    per minibatch: on an H100 the stacked outputs were 8 in-place writes and 7 copies of their
    zeros per epoch, and their sums more kernels after the epochs.

    Sharded over devices, every device holds its share of the minibatch; gradients and loss
    statistics are averaged, so every device applies the same update (one agent)."""
    params, opt_state, stopped, sums = carry
    mb = jax.tree.map(lambda x: jnp.take(x, idx, axis=0), batch)
    loss = lambda p: ppo_loss(view(p), network, mb, hp, clip_vloss=config.clip_vloss,  # noqa: E731
                              norm_adv=config.norm_adv, axis_name=axis_name)
    (_, info), grads = jax.value_and_grad(loss, has_aux=True)(params)
    grads, info = pmean((grads, info), axis_name)
    grad_norm = optax.tree.norm(grads)
    updates, new_opt_state = tx.update(grads, opt_state, params)
    new_params = jax.tree.map(lambda p, u: p - lr * u, params, updates)
    if config.target_kl is None:
        params, opt_state = new_params, new_opt_state
    else:
        # SB3's rule: a minibatch whose KL to the rollout policy is already too large is not
        # applied, and neither is any later one in this update.
        stopped = jnp.logical_or(stopped, info.approx_kl > config.target_kl)
        keep = lambda new, old: jnp.where(stopped, old, new)  # noqa: E731
        params = jax.tree.map(keep, new_params, params)
        opt_state = jax.tree.map(keep, new_opt_state, opt_state)
    applied = 1.0 - stopped.astype(jnp.float32)
    stats = jnp.stack([*(getattr(info, f) for f in STAT_FIELDS[:-2]), grad_norm, 1.0])
    return (params, opt_state, stopped, sums + applied * stats), None


def _epoch(carry, perm, *, batch: Minibatch, minibatch_step, config: PPOConfig):
    idx = perm.reshape(config.num_minibatches, -1)
    carry, _ = jax.lax.scan(functools.partial(minibatch_step, batch=batch), carry, idx)
    return carry, None


def _scan(params, opt_state, batch: Minibatch, perms: jax.Array, hp: Hparams, lr: jax.Array,
          *, config: PPOConfig, network, axis_name: str | None, view=lambda p: p):
    """The epochs over `params` as given (a tree, or the flat form's vector with its `view`):
    `(params, opt_state, sums [S])`."""
    minibatch_step = functools.partial(_minibatch_step, hp=hp, lr=lr,
                                       tx=make_optimizer(hp, config), network=network,
                                       config=config, axis_name=axis_name, view=view)
    epoch = functools.partial(_epoch, batch=batch, minibatch_step=minibatch_step, config=config)
    sums = batched_like(jnp.zeros((len(STAT_FIELDS),), jnp.float32), params)
    stopped = jnp.bool_(False)
    if config.target_kl is not None:  # only then does it change, with the agent's KL
        stopped = batched_like(stopped, params)
    (params, opt_state, _, sums), _ = jax.lax.scan(
        epoch, (params, opt_state, stopped, sums), perms)
    return params, opt_state, sums


def _ravel_state(opt_state, ravel):
    """`make_optimizer`'s state with Adam's moments mapped by `ravel` (to or from vectors)."""
    clip, adam = opt_state
    return clip, adam._replace(mu=ravel(adam.mu), nu=ravel(adam.nu))


def run_epochs(params, opt_state, batch: Minibatch, perms: jax.Array, hp: Hparams,
               lr: jax.Array, *, config: PPOConfig, network, axis_name: str | None = None):
    """The update's epochs: `(params, opt_state, sums [S])`, `perms` [E, B] the shuffles.

    Flat vectors for one agent alone, per leaf under `jax.vmap` (the module docstring says
    why); per leaf too for an agent whose envs are split over devices (`axis_name`)."""
    chex.assert_shape(perms, (config.update_epochs, None))
    scan = functools.partial(_scan, config=config, network=network, axis_name=axis_name)
    if axis_name is not None:
        return scan(params, opt_state, batch, perms, hp, lr)

    @custom_vmap
    def epochs(params, opt_state, batch, perms, hp, lr):
        flat, unravel = ravel_pytree(params)
        to_flat = lambda tree: ravel_pytree(tree)[0]  # noqa: E731 - same order as `flat`
        flat, flat_state, sums = scan(flat, _ravel_state(opt_state, to_flat), batch, perms,
                                      hp, lr, view=unravel)
        return unravel(flat), _ravel_state(flat_state, unravel), sums

    @epochs.def_vmap
    def _per_leaf(axis_size, in_batched, *args):
        """Under `jax.vmap`: the per-leaf form, vmapped over what is batched (the rule sees
        one vmap level at a time; an outer one batches this rule's result as plain code)."""
        axes = tuple(jax.tree.map(lambda b: 0 if b else None, b) for b in in_batched)
        out = jax.vmap(scan, in_axes=axes)(*args)
        return out, jax.tree.map(lambda _: True, out)

    return epochs(params, opt_state, batch, perms, hp, lr)
