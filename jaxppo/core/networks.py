"""The actor-critic networks PPO trains: feedforward (`ActorCritic`) and recurrent
(`RecurrentActorCritic`, replayed over sequences by `unroll`), and `make_network`, which picks
one for a config.

Separate actor and critic MLPs (a conv torso shared between them if `shared_torso`, as CleanRL's
and SB3's Atari networks have it), orthogonal init with gains sqrt(2) for hidden
layers, 0.01 for the policy head and 1.0 for the value head, zero biases: the CleanRL /
PureJaxRL choices, so their published returns are a fair check. The heads' outputs become
distributions in `distributions.py` (a continuous policy: a diagonal Gaussian with a
state-independent, learned log-std); the conv torsos and the initializer are in `torsos.py`.

Axis legend: B = batch (envs), n = env sequences, T = steps, A = policy-head width,
F = torso features, H = rnn_size.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jaxppo.config import PPOConfig
from jaxppo.core.distributions import Policy, head_distribution
from jaxppo.core.torso_specs import CONV_STACKS, PIXEL_TORSOS, TORSO_HIDDEN
from jaxppo.core.torsos import (
    Conv,
    check_torso,
    dense_dot,
    orthogonal,
)

_ACTIVATIONS = {"tanh": nn.tanh, "relu": nn.relu, "gelu": nn.gelu, "silu": nn.silu, "elu": nn.elu}


class MLP(nn.Module):
    """Optional conv layers over a channel-last image (ReLU), then hidden layers with
    orthogonal(sqrt 2) init, then a linear head of `out_dim` (none where `out_dim` is 0: the
    last layer's features, a shared torso's output)."""

    hidden_sizes: Sequence[int]
    out_dim: int
    out_gain: float
    activation: str = "tanh"
    dtype: jnp.dtype = jnp.float32
    conv: tuple[tuple[int, int, int], ...] = ()
    pixels: bool = False  # uint8 input is 0-255 pixels: scale it to [0, 1]

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        act = _ACTIVATIONS[self.activation]
        scale = self.pixels and x.dtype == jnp.uint8
        x = x.astype(self.dtype)  # uint8/bool images become numbers only here
        x = x / 255.0 if scale else x
        if self.conv:
            lead = x.shape[:-3]
            x = x.reshape((-1, *x.shape[-3:]))
            for i, (filters, kernel, stride) in enumerate(self.conv):
                # named as nn.Conv's were, so checkpoints from before load unchanged
                x = Conv(filters, kernel, stride, dtype=self.dtype, name=f"Conv_{i}",
                         kernel_init=orthogonal(np.sqrt(2)))(x)
                x = nn.relu(x)
            x = x.reshape((*lead, -1))

        def dense(width: int, gain: float) -> nn.Dense:
            return nn.Dense(width, dtype=self.dtype, param_dtype=jnp.float32,
                            kernel_init=orthogonal(gain), dot_general=dense_dot,
                            bias_init=nn.initializers.zeros)

        for width in self.hidden_sizes:
            x = act(dense(width, np.sqrt(2))(x))
        if not self.out_dim:
            return x
        return dense(self.out_dim, self.out_gain)(x).astype(jnp.float32)


class ActorCritic(nn.Module):
    """Maps observations [B, *obs_shape] to (policy distribution, value [B])."""

    action_dim: int  # width of the policy head: A, sum(nvec) or D
    discrete: bool
    obs_ndim: int = 1
    nvec: tuple[int, ...] = ()  # MultiDiscrete sub-action sizes; () otherwise
    hidden_sizes: Sequence[int] = (64, 64)
    activation: str = "tanh"
    dtype: jnp.dtype = jnp.float32
    torso: str = "mlp"
    shared_torso: bool = False  # one conv torso read by both (CleanRL's and SB3's Atari nets)

    def setup(self):
        conv = dict(conv=CONV_STACKS[self.torso], pixels=self.torso in PIXEL_TORSOS)
        torso_hidden = TORSO_HIDDEN.get(self.torso, ())
        if self.shared_torso:
            # the torso (conv stack and its own dense layer) once; each head its hidden layers
            self.body = MLP(hidden_sizes=torso_hidden, out_dim=0, out_gain=0.0,
                            activation=self.activation, dtype=self.dtype, **conv)
            conv, torso_hidden = {}, ()
        kw = dict(hidden_sizes=(*torso_hidden, *self.hidden_sizes), activation=self.activation,
                  dtype=self.dtype, **conv)
        self.actor = MLP(out_dim=self.action_dim, out_gain=0.01, **kw)
        self.critic = MLP(out_dim=1, out_gain=1.0, **kw)
        if not self.discrete:
            self.log_std = self.param("log_std", nn.initializers.zeros, (self.action_dim,))

    def features(self, obs: jax.Array) -> jax.Array:
        """What the heads read: the shared torso's output, or the observation itself (each
        head then has its own torso)."""
        return self.body(obs) if self.shared_torso else self._flat(obs)

    def _flat(self, obs: jax.Array) -> jax.Array:
        """Flatten image observations (MinAtar's [10, 10, C]) to one feature axis for an MLP
        torso; a conv torso takes them as they are."""
        if CONV_STACKS[self.torso]:
            return obs
        lead = obs.shape[: obs.ndim - self.obs_ndim]
        return obs.reshape((*lead, -1))

    def __call__(self, obs: jax.Array, mask: jax.Array | None = None) -> tuple[Policy, jax.Array]:
        x = self.features(obs)  # a shared torso runs once for both heads
        return head_distribution(self, self.actor(x), mask), self.critic(x)[..., 0]

    def policy(self, obs: jax.Array, mask: jax.Array | None = None) -> Policy:
        """The action distribution at `obs`; `mask [..., action_dim]` (bool) removes illegal
        actions of a discrete or multi-discrete policy."""
        return head_distribution(self, self.actor(self.features(obs)), mask)

    def act_and_values(self, obs: jax.Array, extra: jax.Array,
                       mask: jax.Array | None = None) -> tuple[Policy, jax.Array]:
        """The policy at `obs [N, ...]` and the values of `obs` and `extra` ([2N]), with a
        shared torso read once over both (the rollout's step: `extra` is the final
        observations a truncation bootstraps from)."""
        x = self.features(jnp.concatenate([obs, extra]))
        n = obs.shape[0]
        return head_distribution(self, self.actor(x[:n]), mask), self.critic(x)[..., 0]

    def value(self, obs: jax.Array) -> jax.Array:
        return self.critic(self.features(obs))[..., 0]


class RecurrentActorCritic(nn.Module):
    """A policy with memory: torso (MLP or CNN) -> GRU/LSTM cell -> separate actor and critic
    heads (one hidden layer each). Actor and critic share the torso and the cell, so one hidden
    state per env is carried (PureJaxRL's `ppo_rnn` and CleanRL's `ppo_atari_lstm` do the
    same).

    The carry is `[B, rnn_size]` (GRU) or a `(c, h)` pair (LSTM); `cell_step` resets it to
    zeros where `start` is true (the first step of an episode) before reading the input."""

    action_dim: int
    discrete: bool
    obs_ndim: int = 1
    nvec: tuple[int, ...] = ()
    hidden_sizes: Sequence[int] = (64, 64)
    activation: str = "tanh"
    dtype: jnp.dtype = jnp.float32
    torso: str = "mlp"
    cell: str = "gru"
    rnn_size: int = 128

    recurrent = True

    def setup(self):
        hidden = (*TORSO_HIDDEN.get(self.torso, ()), *self.hidden_sizes[:-1])
        self.encoder = MLP(hidden_sizes=hidden, out_dim=self.hidden_sizes[-1],
                           out_gain=float(np.sqrt(2)), activation=self.activation,
                           dtype=self.dtype, conv=CONV_STACKS[self.torso],
                           pixels=self.torso in PIXEL_TORSOS)
        cell_cls = nn.GRUCell if self.cell == "gru" else nn.OptimizedLSTMCell
        self.rnn = cell_cls(features=self.rnn_size, param_dtype=jnp.float32,
                            recurrent_kernel_init=orthogonal())
        kw = dict(hidden_sizes=(self.hidden_sizes[-1],), activation=self.activation,
                  dtype=self.dtype)
        self.actor = MLP(out_dim=self.action_dim, out_gain=0.01, **kw)
        self.critic = MLP(out_dim=1, out_gain=1.0, **kw)
        if not self.discrete:
            self.log_std = self.param("log_std", nn.initializers.zeros, (self.action_dim,))

    def initial_carry(self, batch: int):
        """The carry of `batch` envs at an episode's start (zeros; no parameters needed)."""
        zeros = jnp.zeros((batch, self.rnn_size), jnp.float32)
        return zeros if self.cell == "gru" else (zeros, zeros)

    def encode(self, obs: jax.Array) -> jax.Array:
        """[..., *obs_shape] -> [..., F], batched over any leading axes."""
        if not CONV_STACKS[self.torso]:
            obs = obs.reshape((*obs.shape[: obs.ndim - self.obs_ndim], -1))
        return _ACTIVATIONS[self.activation](self.encoder(obs))

    def cell_step(self, carry, x: jax.Array, start: jax.Array):
        """One step of the cell for B envs: `carry` [B, H], input `x` [B, F], `start` [B]."""
        carry = jax.tree.map(lambda c: jnp.where(start[:, None], 0.0, c), carry)
        return self.rnn(carry, x)

    def policy_head(self, y: jax.Array, mask: jax.Array | None = None) -> Policy:
        return head_distribution(self, self.actor(y), mask)

    def value_head(self, y: jax.Array) -> jax.Array:
        return self.critic(y)[..., 0]

    def __call__(self, obs: jax.Array, carry, start: jax.Array, mask: jax.Array | None = None):
        """One step for B envs: `(dist, value, new_carry)`; also what `init` traces."""
        carry, y = self.cell_step(carry, self.encode(obs), start)
        return self.policy_head(y, mask), self.value_head(y), carry


def unroll(network: RecurrentActorCritic, params, obs: jax.Array, start: jax.Array, carry0,
           mask: jax.Array | None = None) -> tuple[Policy, jax.Array, Any]:
    """Re-run the cell over whole env sequences, as the update replays them.

    obs [n, T, *obs_shape], start [n, T] (bool: step t begins an episode, so the carry resets
    there first), carry0 [n, H] (the carry before step 0), mask [n, T, A] or None. Returns
    `(dist over [n, T], values [n, T], the carry after each step [T, n, H])`: the torso and
    heads run batched over all n x T steps, only the cell runs step by step."""
    x = network.apply(params, obs, method="encode")  # [n, T, F]

    def step(carry, inputs):
        x_t, start_t = inputs
        carry, y = network.apply(params, carry, x_t, start_t, method="cell_step")
        return carry, (y, carry)

    _, (y, carries) = jax.lax.scan(step, carry0, (jnp.swapaxes(x, 0, 1), start.T))
    y = jnp.swapaxes(y, 0, 1)  # [n, T, H]
    return (network.apply(params, y, mask, method="policy_head"),
            network.apply(params, y, method="value_head"), carries)


def is_recurrent(network) -> bool:
    return bool(getattr(network, "recurrent", False))


def initial_memory(network, n: int):
    """`(carry, start)` of n envs about to begin episodes: a recurrent network's zero carry and
    all-true start flags; `(None, None)` for a feedforward one (nothing is carried)."""
    if not is_recurrent(network):
        return None, None
    return network.initial_carry(n), jnp.ones((n,), bool)


def make_network(config: PPOConfig, env) -> ActorCritic | RecurrentActorCritic:
    """Build the network for `config` and a `VecEnv`-like object (obs_shape, action_dim, discrete)."""
    check_torso(config, env.obs_shape)
    if config.network != "feedforward":
        return RecurrentActorCritic(
            action_dim=env.action_dim, discrete=env.discrete, obs_ndim=len(env.obs_shape),
            nvec=tuple(env.nvec) if env.multi_discrete else (),
            hidden_sizes=tuple(config.hidden_sizes), activation=config.activation,
            dtype=jnp.bfloat16 if config.compute_dtype == "bfloat16" else jnp.float32,
            torso=config.torso, cell=config.network, rnn_size=config.rnn_size)
    return ActorCritic(
        action_dim=env.action_dim,
        discrete=env.discrete,
        obs_ndim=len(env.obs_shape),
        nvec=tuple(env.nvec) if env.multi_discrete else (),
        hidden_sizes=tuple(config.hidden_sizes),
        activation=config.activation,
        dtype=jnp.bfloat16 if config.compute_dtype == "bfloat16" else jnp.float32,
        torso=config.torso,
        shared_torso=config.shared_torso,
    )


def init_params(network: ActorCritic | RecurrentActorCritic, key: jax.Array,
                obs_shape: tuple[int, ...]):
    obs = jnp.zeros((1, *obs_shape), jnp.float32)
    if is_recurrent(network):
        return network.init(key, obs, network.initial_carry(1), jnp.ones((1,), bool))
    return network.init(key, obs)
