"""The pieces networks are built from that are not PPO's: the orthogonal initializer, the
conv torsos (their layer stacks, a convolution XLA:CPU runs fast, the check that an
observation fits a stack) and the dense layers' product on a few rows.

Kept apart from `networks.py` because each carries a workaround with its own reason
(a jaxlib QR deadlock, a slow CPU convolution, a CPU matmul call that costs more than its
arithmetic) that the actor-critic modules need not know.

Axis legend: B = batch, H x W = image height x width, C = channels, F = conv filters,
k = kernel size.
"""

from __future__ import annotations

import math
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
from jax.custom_batching import custom_vmap

from jaxppo.config import PPOConfig
from jaxppo.core.torso_specs import CONV_STACKS
from jaxppo.errors import ConfigError


def orthogonal(scale: float = 1.0):
    """Flax's orthogonal initializer, except that on the CPU a vmapped draw (seeds, or several
    networks) runs one member's QR at a time instead of one batched QR.

    jaxlib 0.10's CPU QR kernel splits a batch over XLA:CPU's thread pool from inside one of
    that pool's threads and blocks until the pieces finish: two such kernels at once on a
    2-thread pool both wait for work no thread is left to run, a deadlock at 0% CPU (vmapped
    Craftax's 512-wide layers every time, even with jaxppo's scheduler flag; BENCHMARKS.md).
    A member's draw is exactly the draw it makes alone, so seeds keep their values. A GPU
    keeps the batched QR: one member at a time there is a loop of ~1,700 kernels per member
    (2048 CartPole agents: 3.5M kernels before the first update, seconds of launches)."""
    draw_one = nn.initializers.orthogonal(scale)

    def init(key: jax.Array, shape, dtype=jnp.float32) -> jax.Array:
        @custom_vmap
        def draw(k):
            return draw_one(k, shape, dtype)

        @draw.def_vmap
        def _vmapped(axis_size, in_batched, k):
            batched = jax.vmap(lambda kk: draw_one(kk, shape, dtype))
            return jax.lax.platform_dependent(k, cpu=lambda k: jax.lax.map(draw, k),
                                              default=batched), True

        return draw(key)

    return init


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


FEW_ROWS = 4
"""Up to this many rows (an agent alone's rollout step over the default configs' 4 envs, an
act), a dense layer's product on the CPU is a multiply and a sum (`dense_dot`). Where it was
measured to gain: at 8 and 16 rows (CartPole, one seed, 8 or 16 envs) the two forms were
within their runs' spread."""


def _dot(lhs: jax.Array, rhs: jax.Array) -> jax.Array:
    """[..., I] x [I, O] -> [..., O] as a dot (a matmul call on the CPU)."""
    return jax.lax.dot_general(lhs, rhs, (((lhs.ndim - 1,), (0,)), ((), ())))


@custom_vmap
def _multiply_sum(lhs: jax.Array, rhs: jax.Array) -> jax.Array:
    """[..., I] x [I, O] -> [..., O] as elementwise products summed over I: loops XLA fuses
    with what comes before and after, where a dot is a call of its own."""
    return jnp.sum(lhs[..., :, None] * rhs, axis=-2)


@_multiply_sum.def_vmap
def _multiply_sum_vmapped(axis_size: int, in_batched, lhs, rhs):
    """Vmapped (seeds, settings), the rows are many: a batched dot is faster (the products
    and sums ran 5% slower at 32 seeds of CartPole's default config)."""
    axes = tuple(0 if b else None for b in in_batched)
    return jax.vmap(_dot, in_axes=axes)(lhs, rhs), True


@jax.custom_jvp
def _few_rows(lhs: jax.Array, rhs: jax.Array) -> jax.Array:
    return _multiply_sum(lhs, rhs)


@_few_rows.defjvp
def _few_rows_jvp(primals, tangents):
    """The product's derivative, as dots: JAX cannot transpose a `custom_vmap` (reverse mode),
    and a minibatch of few rows is differentiated through here."""
    (lhs, rhs), (d_lhs, d_rhs) = primals, tangents
    return _few_rows(lhs, rhs), _dot(d_lhs, rhs) + _dot(lhs, d_rhs)


def dense_dot(lhs: jax.Array, rhs: jax.Array, dimension_numbers, precision=None,
              preferred_element_type=None) -> jax.Array:
    """`nn.Dense`'s product (its `dot_general`). On the CPU, float32 inputs of at most
    `FEW_ROWS` rows (an agent alone's rollout step: `num_envs` rows) are multiplied and summed
    elementwise: XLA:CPU calls a matmul library for a dot, a call whose dispatch costs more than
    4 x 64 x 64 products (CartPole's default config, one seed: +6% SPS,
    docs/benchmarks/purejaxrl.md). Every larger or vmapped product, other dtypes and every
    other platform (cuBLAS on a GPU) keep the dot, as does a batch of symbolic size
    (`export_policy`'s). The same sums in another order: float rounding apart, the same
    values."""
    plain = (dimension_numbers == (((lhs.ndim - 1,), (0,)), ((), ())) and rhs.ndim == 2
             and lhs.dtype == rhs.dtype == jnp.float32 and preferred_element_type is None
             and precision is None and all(isinstance(d, int) for d in lhs.shape)
             and math.prod(lhs.shape[:-1]) <= FEW_ROWS)  # not a symbolic batch (an export)
    if not plain:
        return jax.lax.dot_general(lhs, rhs, dimension_numbers, precision=precision,
                                   preferred_element_type=preferred_element_type)
    # chosen for the platform the program is compiled for (`jaxppo profile --target h100`
    # compiles for a GPU on the CPU), as `Conv`'s is; `plain` makes `_dot` the product asked
    return jax.lax.platform_dependent(lhs, rhs, cpu=_few_rows, default=_dot)


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

        def conv(x, kernel):
            return jax.lax.conv_general_dilated(x, kernel, (s, s), "VALID",
                                                dimension_numbers=("NHWC", "HWIO", "NHWC"))

        # Chosen for the platform the program is compiled for (not the default backend's:
        # `jaxppo profile --target h100` compiles for a GPU on the CPU).
        y = (jax.lax.platform_dependent(x, kernel, cpu=lambda x, w: conv_as_matmul(x, w, s),
                                        default=conv) if k % s == 0 else conv(x, kernel))
        return y + bias.astype(self.dtype)


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
