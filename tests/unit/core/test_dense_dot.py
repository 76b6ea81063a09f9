"""`dense_dot`, the dense layers' product: on the CPU a few rows (an agent alone's rollout
step) are a multiply and a sum, every other product a dot; the same values and derivatives as
the dot, alone, vmapped, differentiated, exported and in the GPU's program.

What each program holds is read from its lowered text (StableHLO: `dot_general` for a dot,
`reduce` for the sum); the values against `x @ w` computed by numpy in float64."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export

from jaxppo.core.torsos import FEW_ROWS, dense_dot

DN = (((1,), (0,)), ((), ()))


def _dense(x, w):
    return dense_dot(x, w, (((x.ndim - 1,), (0,)), ((), ())))


def _inputs(rows, key=0, batch=()):
    kx, kw = jax.random.split(jax.random.key(key))
    x = jax.random.normal(kx, (*batch, rows, 8))
    w = jax.random.normal(kw, (*batch, 8, 5))
    return x, w


def _text(fn, *args, platforms=None):
    return jax.jit(fn).trace(*args).lower(lowering_platforms=platforms).as_text()


def _reference(x, w):
    return np.asarray(x, np.float64) @ np.asarray(w, np.float64)


@pytest.mark.parametrize("rows", [1, 2, FEW_ROWS])
def test_few_rows_on_the_cpu_are_a_multiply_and_sum_of_the_dots_value(rows):
    x, w = _inputs(rows)
    text = _text(_dense, x, w)
    assert "dot_general" not in text and "reduce" in text
    np.testing.assert_allclose(jax.jit(_dense)(x, w), _reference(x, w), rtol=1e-5, atol=1e-5)
    lead = jax.random.normal(jax.random.key(1), (2, rows // 2 or 1, 8))  # rows over two axes
    np.testing.assert_allclose(_dense(lead, w), _reference(lead, w), rtol=1e-5, atol=1e-5)


def test_more_rows_other_dtypes_and_the_gpu_keep_the_dot():
    x, w = _inputs(FEW_ROWS + 1)
    assert "dot_general" in _text(_dense, x, w)
    small, w = _inputs(4)
    half = (small.astype(jnp.bfloat16), w.astype(jnp.bfloat16))
    assert "dot_general" in _text(_dense, *half)
    gpu = _text(_dense, small, w, platforms=("cuda",))  # lowered only: no GPU needed
    assert "dot_general" in gpu and "reduce" not in gpu
    with_precision = _text(lambda x, w: dense_dot(x, w, DN, precision="highest"), small, w)
    assert "dot_general" in with_precision


@pytest.mark.parametrize("batched", ["both", "rows", "weights"])
def test_vmapped_it_is_a_batched_dot_of_each_agents_value(batched):
    """Seeds or settings vmapped: many rows in all, so a dot (the products and sums ran slower
    there); each agent's value is its own product, whichever input the vmap maps."""
    x, w = _inputs(4, batch=(3,))
    x = x if batched != "weights" else x[0]
    w = w if batched != "rows" else w[0]
    axes = (0 if batched != "weights" else None, 0 if batched != "rows" else None)
    fn = jax.vmap(_dense, in_axes=axes)
    assert "dot_general" in _text(fn, x, w)
    out = jax.jit(fn)(x, w)
    for i in range(3):
        xi = x[i] if axes[0] == 0 else x
        wi = w[i] if axes[1] == 0 else w
        np.testing.assert_allclose(out[i], _reference(xi, wi), rtol=1e-5, atol=1e-5)


def test_its_derivatives_are_the_dots():
    """Reverse mode (a minibatch of few rows is trained through it) and forward mode, against
    the dot's own, alone and vmapped."""
    x, w = _inputs(4)
    ct = jax.random.normal(jax.random.key(2), (4, 5))

    def loss(fn):
        return lambda x, w: jnp.sum(fn(x, w) * ct)

    got = jax.jit(jax.grad(loss(_dense), argnums=(0, 1)))(x, w)
    want = jax.grad(loss(lambda x, w: x @ w), argnums=(0, 1))(x, w)
    for g, r in zip(got, want, strict=True):
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5)
    _, tangent = jax.jvp(_dense, (x, w), (jnp.ones_like(x), jnp.zeros_like(w)))
    np.testing.assert_allclose(tangent, _reference(np.ones_like(x), w), rtol=1e-5, atol=1e-5)
    xs, ws = _inputs(4, batch=(2,))
    per_agent = jax.jit(jax.vmap(jax.grad(loss(_dense), argnums=1)))(xs, ws)
    for i in range(2):
        np.testing.assert_allclose(per_agent[i], np.asarray(xs[i]).T @ np.asarray(ct),
                                   rtol=1e-5, atol=1e-5)


def test_a_symbolic_batch_is_exported_as_a_dot():
    """`export_policy`'s batch is symbolic: its size cannot be compared with `FEW_ROWS`."""
    (b,) = export.symbolic_shape("b")
    w = _inputs(4)[1]
    exported = export.export(jax.jit(_dense))(jax.ShapeDtypeStruct((b, 8), jnp.float32), w)
    assert "dot_general" in exported.mlir_module()
    x = _inputs(7)[0]
    np.testing.assert_allclose(exported.call(x, w), _reference(x, w), rtol=1e-5, atol=1e-5)
