"""Actor and critic networks and the two action distributions PPO needs.

Separate actor and critic MLPs (no shared torso), orthogonal init with gains sqrt(2) for hidden
layers, 0.01 for the policy head and 1.0 for the value head, zero biases: the CleanRL /
PureJaxRL choices, so their published returns are a fair check. A continuous policy is a
diagonal Gaussian with a state-independent, learned log-std.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jaxppo.config import PPOConfig

_LOG_2PI = float(np.log(2.0 * np.pi))

_ACTIVATIONS = {"tanh": nn.tanh, "relu": nn.relu, "gelu": nn.gelu, "silu": nn.silu, "elu": nn.elu}


class Categorical(NamedTuple):
    """Discrete policy. logits: [..., A]."""

    logits: jax.Array

    def sample(self, key: jax.Array) -> jax.Array:
        return self.sample_from_noise(jax.random.gumbel(key, self.logits.shape))

    def sample_from_noise(self, gumbel: jax.Array) -> jax.Array:
        """The Gumbel-max trick (what `jax.random.categorical` does), with noise drawn ahead."""
        return jnp.argmax(self.logits + gumbel, axis=-1)

    def mode(self) -> jax.Array:
        return jnp.argmax(self.logits, axis=-1)

    def log_prob(self, action: jax.Array) -> jax.Array:
        logp_all = jax.nn.log_softmax(self.logits)
        return jnp.take_along_axis(logp_all, action[..., None].astype(jnp.int32), axis=-1)[..., 0]

    def entropy(self) -> jax.Array:
        logp_all = jax.nn.log_softmax(self.logits)
        return -jnp.sum(jnp.exp(logp_all) * logp_all, axis=-1)


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


class MLP(nn.Module):
    """Hidden layers with orthogonal(sqrt 2) init, then a linear head of `out_dim`."""

    hidden_sizes: Sequence[int]
    out_dim: int
    out_gain: float
    activation: str = "tanh"
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        act = _ACTIVATIONS[self.activation]
        x = x.astype(self.dtype)
        for width in self.hidden_sizes:
            x = nn.Dense(width, dtype=self.dtype, param_dtype=jnp.float32,
                         kernel_init=nn.initializers.orthogonal(np.sqrt(2)),
                         bias_init=nn.initializers.zeros)(x)
            x = act(x)
        x = nn.Dense(self.out_dim, dtype=self.dtype, param_dtype=jnp.float32,
                     kernel_init=nn.initializers.orthogonal(self.out_gain),
                     bias_init=nn.initializers.zeros)(x)
        return x.astype(jnp.float32)


class ActorCritic(nn.Module):
    """Maps observations [B, *obs_shape] to (policy distribution, value [B])."""

    action_dim: int
    discrete: bool
    obs_ndim: int = 1
    hidden_sizes: Sequence[int] = (64, 64)
    activation: str = "tanh"
    dtype: jnp.dtype = jnp.float32

    def setup(self):
        kw = dict(hidden_sizes=self.hidden_sizes, activation=self.activation, dtype=self.dtype)
        self.actor = MLP(out_dim=self.action_dim, out_gain=0.01, **kw)
        self.critic = MLP(out_dim=1, out_gain=1.0, **kw)
        if not self.discrete:
            self.log_std = self.param("log_std", nn.initializers.zeros, (self.action_dim,))

    def _flat(self, obs: jax.Array) -> jax.Array:
        """Flatten image observations (MinAtar's [10, 10, C]) to one feature axis."""
        lead = obs.shape[: obs.ndim - self.obs_ndim]
        return obs.reshape((*lead, -1))

    def __call__(self, obs: jax.Array) -> tuple[Categorical | DiagGaussian, jax.Array]:
        return self.policy(obs), self.value(obs)

    def policy(self, obs: jax.Array) -> Categorical | DiagGaussian:
        out = self.actor(self._flat(obs))
        if self.discrete:
            return Categorical(out)
        return DiagGaussian(out, self.log_std)

    def value(self, obs: jax.Array) -> jax.Array:
        return self.critic(self._flat(obs))[..., 0]


def draw_action_noise(key: jax.Array, discrete: bool, shape: tuple[int, ...]) -> jax.Array:
    """Noise for `sample_from_noise`, for many steps at once: Gumbel for a categorical
    policy (shape [..., A]), standard normal for a Gaussian one (shape [..., D])."""
    return jax.random.gumbel(key, shape) if discrete else jax.random.normal(key, shape)


def make_network(config: PPOConfig, env) -> ActorCritic:
    """Build the network for `config` and a `VecEnv`-like object (obs_shape, action_dim, discrete)."""
    return ActorCritic(
        action_dim=env.action_dim,
        discrete=env.discrete,
        obs_ndim=len(env.obs_shape),
        hidden_sizes=tuple(config.hidden_sizes),
        activation=config.activation,
        dtype=jnp.bfloat16 if config.compute_dtype == "bfloat16" else jnp.float32,
    )


def init_params(network: ActorCritic, key: jax.Array, obs_shape: tuple[int, ...]):
    return network.init(key, jnp.zeros((1, *obs_shape), jnp.float32))
