"""The action distributions a PPO policy head parameterises: categorical (optionally masked),
factorised categorical for MultiDiscrete actions, diagonal Gaussian.

One job: turn a head's output into log-probs, entropies and samples. They are plain pytrees
(no parameters), so the rollout, the loss and evaluation share them, and every `sample` is
`sample_from_noise` of noise drawn ahead (`action_noise_from_bits`: the rollout's noise comes
from the update's one draw of random bits).

Axis legend: A = discrete actions (or sum(nvec)), K = sub-actions of a MultiDiscrete action,
D = continuous action dims; `...` = any leading batch axes.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

_LOG_2PI = float(np.log(2.0 * np.pi))

MASKED_LOGIT = -1e9
"""Logit of an illegal action: exp(-1e9 - max) is exactly 0 in float32, and unlike -inf it keeps
the entropy's `p * log p` at 0 instead of NaN."""


def mask_logits(logits: jax.Array, mask: jax.Array | None) -> jax.Array:
    """Illegal actions (mask False) get zero probability; gradients do not reach their logits."""
    return logits if mask is None else jnp.where(mask, logits, MASKED_LOGIT)


class Categorical(NamedTuple):
    """Discrete policy. logits: [..., A] (already masked where the env masks actions)."""

    logits: jax.Array

    def sample(self, key: jax.Array) -> jax.Array:
        return self.sample_from_noise(jax.random.gumbel(key, self.logits.shape))

    def sample_from_noise(self, gumbel: jax.Array) -> jax.Array:
        """The Gumbel-max trick (what `jax.random.categorical` does), with noise drawn ahead."""
        return jnp.argmax(self.logits + gumbel, axis=-1)

    def mode(self) -> jax.Array:
        return jnp.argmax(self.logits, axis=-1)

    def log_prob(self, action: jax.Array) -> jax.Array:
        """The chosen action's log-probability, picked by a select and a sum over actions (the
        same value, bit for bit: one term and zeros): its gradient is a select too, where an
        indexed read's is a scatter-add, one more loop on the CPU and kernel on a GPU per
        minibatch."""
        logp_all = jax.nn.log_softmax(self.logits)
        chosen = jnp.arange(logp_all.shape[-1]) == action[..., None].astype(jnp.int32)
        return jnp.sum(jnp.where(chosen, logp_all, 0.0), axis=-1)

    def entropy(self) -> jax.Array:
        logp_all = jax.nn.log_softmax(self.logits)
        return -jnp.sum(jnp.exp(logp_all) * logp_all, axis=-1)


@struct.dataclass
class MultiCategorical:
    """MultiDiscrete policy: K independent categoricals, the k-th over `nvec[k]` actions, whose
    logits sit side by side in `logits [..., sum(nvec)]`. The joint log-prob and entropy are
    the sums over sub-actions (the factors are independent); actions are [..., K] ints."""

    logits: jax.Array
    nvec: tuple[int, ...] = struct.field(pytree_node=False)

    def _split(self, x: jax.Array) -> list[jax.Array]:
        return jnp.split(x, np.cumsum(self.nvec)[:-1].tolist(), axis=-1)

    def _parts(self) -> list[Categorical]:
        return [Categorical(part) for part in self._split(self.logits)]

    def sample(self, key: jax.Array) -> jax.Array:
        return self.sample_from_noise(jax.random.gumbel(key, self.logits.shape))

    def sample_from_noise(self, gumbel: jax.Array) -> jax.Array:
        noise = self._split(gumbel)
        return jnp.stack([c.sample_from_noise(g) for c, g in zip(self._parts(), noise,
                                                                  strict=True)], axis=-1)

    def mode(self) -> jax.Array:
        return jnp.stack([c.mode() for c in self._parts()], axis=-1)

    def log_prob(self, action: jax.Array) -> jax.Array:
        return sum(c.log_prob(action[..., k]) for k, c in enumerate(self._parts()))

    def entropy(self) -> jax.Array:
        return sum(c.entropy() for c in self._parts())


class DiagGaussian(NamedTuple):
    """Continuous policy. mean: [..., D]; log_std: [D] (state-independent)."""

    mean: jax.Array
    log_std: jax.Array

    def sample(self, key: jax.Array) -> jax.Array:
        return self.sample_from_noise(jax.random.normal(key, self.mean.shape, self.mean.dtype))

    def sample_from_noise(self, noise: jax.Array) -> jax.Array:
        return self.mean + jnp.exp(self.log_std) * noise

    def mode(self) -> jax.Array:
        return self.mean

    def log_prob(self, action: jax.Array) -> jax.Array:
        z = (action - self.mean) * jnp.exp(-self.log_std)
        return jnp.sum(-0.5 * z**2 - self.log_std - 0.5 * _LOG_2PI, axis=-1)

    def entropy(self) -> jax.Array:
        ent = jnp.sum(self.log_std + 0.5 * (1.0 + _LOG_2PI))
        return jnp.broadcast_to(ent, self.mean.shape[:-1])


Policy = Categorical | MultiCategorical | DiagGaussian


def head_distribution(net, out: jax.Array, mask: jax.Array | None) -> Policy:
    """The distribution the actor head's output `out` [..., A or D] parameterises; `net` (either
    network) says which family: its `nvec`, `discrete` and, if continuous, `log_std`."""
    if net.nvec:  # MultiDiscrete, even of one sub-action: actions [..., K]
        return MultiCategorical(mask_logits(out, mask), tuple(net.nvec))
    if net.discrete:
        return Categorical(mask_logits(out, mask))
    return DiagGaussian(out, net.log_std)


def action_noise_from_bits(bits: jax.Array, discrete: bool) -> jax.Array:
    """Noise for `sample_from_noise`, for many steps at once, from uniform random uint32
    `bits` (one per value; the training program draws all of an update's randomness in one
    call): Gumbel for a categorical policy (shape [..., A]), standard normal for a Gaussian one
    (shape [..., D]). A uniform u in [0, 1) from the 23 high bits as a float's mantissa, then
    -log(-log u) (u kept off 0) or sqrt(2) erfinv(2u - 1) (kept off -1)."""
    one = jax.lax.bitcast_convert_type(jnp.uint32(0x3F800000), jnp.float32)
    u = jax.lax.bitcast_convert_type((bits >> 9) | jnp.uint32(0x3F800000), jnp.float32) - one
    if discrete:
        u = jnp.maximum(u, jnp.finfo(jnp.float32).tiny)
        return -jnp.log(-jnp.log(u))
    lo = jnp.nextafter(jnp.float32(-1.0), jnp.float32(1.0))
    return jnp.sqrt(jnp.float32(2.0)) * jax.scipy.special.erfinv(jnp.maximum(2.0 * u - 1.0, lo))
