"""Actor and critic networks and the action distributions PPO needs: categorical (optionally
masked), factorised categorical for MultiDiscrete actions, diagonal Gaussian.

Separate actor and critic MLPs (a conv torso shared between them if `shared_torso`, as CleanRL's
and SB3's Atari networks have it), orthogonal init with gains sqrt(2) for hidden
layers, 0.01 for the policy head and 1.0 for the value head, zero biases: the CleanRL /
PureJaxRL choices, so their published returns are a fair check. A continuous policy is a
diagonal Gaussian with a state-independent, learned log-std.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from jax.custom_batching import custom_vmap

from jaxppo.config import PPOConfig
from jaxppo.errors import ConfigError

_LOG_2PI = float(np.log(2.0 * np.pi))

_ACTIVATIONS = {"tanh": nn.tanh, "relu": nn.relu, "gelu": nn.gelu, "silu": nn.silu, "elu": nn.elu}


MASKED_LOGIT = -1e9
"""Logit of an illegal action: exp(-1e9 - max) is exactly 0 in float32, and unlike -inf it keeps
the entropy's `p * log p` at 0 instead of NaN."""


def mask_logits(logits: jax.Array, mask: jax.Array | None) -> jax.Array:
    """Illegal actions (mask False) get zero probability; gradients do not reach their logits."""
    return logits if mask is None else jnp.where(mask, logits, MASKED_LOGIT)


def orthogonal(scale: float = 1.0):
    """Flax's orthogonal initializer, except that a vmapped draw (seeds, or several networks)
    runs one member's QR at a time instead of one batched QR.

    jaxlib 0.10's CPU QR kernel splits a batch over XLA:CPU's thread pool from inside one of
    that pool's threads and blocks until the pieces finish: two such kernels at once on a
    2-thread pool both wait for work no thread is left to run, a deadlock at 0% CPU (vmapped
    Craftax's 512-wide layers every time, even with jaxppo's scheduler flag; BENCHMARKS.md).
    A member's draw is exactly the draw it makes alone, so seeds keep their values."""
    draw_one = nn.initializers.orthogonal(scale)

    def init(key: jax.Array, shape, dtype=jnp.float32) -> jax.Array:
        @custom_vmap
        def draw(k):
            return draw_one(k, shape, dtype)

        @draw.def_vmap
        def _one_member_at_a_time(axis_size, in_batched, k):
            return jax.lax.map(draw, k), True

        return draw(key)

    return init


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
        logp_all = jax.nn.log_softmax(self.logits)
        return jnp.take_along_axis(logp_all, action[..., None].astype(jnp.int32), axis=-1)[..., 0]

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


CONV_STACKS: dict[str, tuple[tuple[int, int, int], ...]] = {
    "mlp": (),
    # MinAtar (Young & Tian 2019): one 3x3 layer of 16 filters over the 10x10xC grid.
    "cnn": ((16, 3, 1),),
    # DQN's "Nature" stack (Mnih et al. 2015), for 64x64 and larger images.
    "nature_cnn": ((32, 8, 4), (64, 4, 2), (64, 3, 1)),
}
"""Per torso, its conv layers as (filters, kernel, stride), VALID padding, then the flatten."""
_TORSO_HIDDEN = {"nature_cnn": (512,)}  # a dense layer the stack itself ends with
_PIXEL_TORSOS = ("nature_cnn",)
"""Torsos that read uint8 input as 0-255 pixels and scale it to [0, 1] (DQN's and CleanRL's
Atari convention). Other torsos take uint8 as numbers: xminigrid's and navix's symbolic grids
are small uint8 tile ids."""


def conv_as_matmul(x: jax.Array, kernel: jax.Array, stride: int) -> jax.Array:
    """A VALID convolution of `x` [B, H, W, C] with `kernel` [k, k, C, F] at `stride` (k a
    multiple of it), as one matmul: space-to-depth by the stride turns it into a stride-1 conv
    of a (k/stride)^2 kernel, whose patches are that many shifted slices side by side. The same
    sum of products as `lax.conv`, in another order (float rounding apart); XLA:CPU runs it ~3x
    faster than its own convolution on the Nature CNN (BENCHMARKS.md)."""
    k, _, c, f = kernel.shape
    b, h, w, _ = x.shape
    ho, wo = (h - k) // stride + 1, (w - k) // stride + 1
    q = k // stride
    x = x[:, :(ho - 1) * stride + k, :(wo - 1) * stride + k, :]  # the pixels the conv reads
    if stride > 1:
        hh, ww = x.shape[1] // stride, x.shape[2] // stride
        x = x.reshape(b, hh, stride, ww, stride, c).transpose(0, 1, 3, 2, 4, 5)
        x = x.reshape(b, hh, ww, stride * stride * c)
        kernel = kernel.reshape(q, stride, q, stride, c, f).transpose(0, 2, 1, 3, 4, 5)
    cols = jnp.concatenate([x[:, i:i + ho, j:j + wo, :] for i in range(q) for j in range(q)],
                           axis=-1)
    return cols @ kernel.reshape(-1, f)


class Conv(nn.Module):
    """`nn.Conv` with VALID padding and the same parameters (`kernel` [k, k, C, F], `bias`),
    computed as `conv_as_matmul` on the CPU and as XLA's convolution elsewhere (cuDNN on a GPU).
    """

    features: int
    kernel_size: int
    stride: int
    dtype: jnp.dtype = jnp.float32
    kernel_init: Any = nn.initializers.lecun_normal()

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        k, s = self.kernel_size, self.stride
        kernel = self.param("kernel", self.kernel_init, (k, k, x.shape[-1], self.features),
                            jnp.float32)
        bias = self.param("bias", nn.initializers.zeros, (self.features,), jnp.float32)
        x, kernel = x.astype(self.dtype), kernel.astype(self.dtype)
        if jax.default_backend() == "cpu" and k % s == 0:
            y = conv_as_matmul(x, kernel, s)
        else:
            y = jax.lax.conv_general_dilated(x, kernel, (s, s), "VALID",
                                             dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return y + bias.astype(self.dtype)


def head_distribution(net, out: jax.Array, mask: jax.Array | None) -> Policy:
    """The distribution the actor head's output `out` parameterises, for either network."""
    if net.nvec:  # MultiDiscrete, even of one sub-action: actions [..., K]
        return MultiCategorical(mask_logits(out, mask), tuple(net.nvec))
    if net.discrete:
        return Categorical(mask_logits(out, mask))
    return DiagGaussian(out, net.log_std)


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
        for width in self.hidden_sizes:
            x = nn.Dense(width, dtype=self.dtype, param_dtype=jnp.float32,
                         kernel_init=orthogonal(np.sqrt(2)),
                         bias_init=nn.initializers.zeros)(x)
            x = act(x)
        if not self.out_dim:
            return x
        x = nn.Dense(self.out_dim, dtype=self.dtype, param_dtype=jnp.float32,
                     kernel_init=orthogonal(self.out_gain),
                     bias_init=nn.initializers.zeros)(x)
        return x.astype(jnp.float32)


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
        conv = dict(conv=CONV_STACKS[self.torso], pixels=self.torso in _PIXEL_TORSOS)
        torso_hidden = _TORSO_HIDDEN.get(self.torso, ())
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
        hidden = (*_TORSO_HIDDEN.get(self.torso, ()), *self.hidden_sizes[:-1])
        self.encoder = MLP(hidden_sizes=hidden, out_dim=self.hidden_sizes[-1],
                           out_gain=float(np.sqrt(2)), activation=self.activation,
                           dtype=self.dtype, conv=CONV_STACKS[self.torso],
                           pixels=self.torso in _PIXEL_TORSOS)
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


def draw_action_noise(key: jax.Array, discrete: bool, shape: tuple[int, ...]) -> jax.Array:
    """Noise for `sample_from_noise`, for many steps at once: Gumbel for a categorical
    policy (shape [..., A]), standard normal for a Gaussian one (shape [..., D])."""
    return jax.random.gumbel(key, shape) if discrete else jax.random.normal(key, shape)


def check_torso(config: PPOConfig, obs_shape: tuple[int, ...]) -> None:
    """A conv torso needs (H, W, C) observations large enough for its stack: one line if not."""
    stack = CONV_STACKS[config.torso]
    if not stack:
        return
    mlp = "torso: mlp" + (" with shared_torso: false" if config.shared_torso else "") + (
        " and hidden_sizes: [64, 64]" if not config.hidden_sizes else "")
    if len(obs_shape) != 3:
        raise ConfigError(f"config key 'torso': {config.torso} needs image observations "
                          f"(H, W, C), but {config.env_id} gives shape {obs_shape}; use {mlp}")
    h, w = obs_shape[:2]
    for _, kernel, stride in stack:
        h, w = (h - kernel) // stride + 1, (w - kernel) // stride + 1
    if h < 1 or w < 1:
        raise ConfigError(f"config key 'torso': {config.torso}'s conv stack does not fit "
                          f"{obs_shape[0]}x{obs_shape[1]} images; use torso: cnn (3x3) or {mlp}")


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
