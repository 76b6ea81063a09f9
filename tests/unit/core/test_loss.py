"""The clipped objective and value loss against hand-computed values."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxppo.core.loss import clipped_policy_loss, normalize_advantages, value_loss

pytestmark = pytest.mark.unit


def test_ratio_inside_clip_is_plain_surrogate():
    logp_old = jnp.log(jnp.array([0.5, 0.5]))
    logp = jnp.log(jnp.array([0.55, 0.45]))  # ratios 1.1, 0.9: inside [0.8, 1.2]
    adv = jnp.array([2.0, -1.0])
    loss, kl, old_kl, clipfrac = clipped_policy_loss(logp, logp_old, adv, 0.2)
    # -(1.1*2 + 0.9*-1)/2 = -0.65
    assert float(loss) == pytest.approx(-0.65, abs=1e-6)
    assert float(clipfrac) == 0.0
    # k3 estimator: mean((r - 1) - log r)
    r = np.array([1.1, 0.9])
    assert float(kl) == pytest.approx(np.mean((r - 1) - np.log(r)), rel=1e-5)
    # k1 estimator (CleanRL's old_approx_kl): mean(-log r) = -(log 1.1 + log 0.9) / 2
    assert float(old_kl) == pytest.approx(-(np.log(1.1) + np.log(0.9)) / 2, rel=1e-4)
    assert float(old_kl) == pytest.approx(0.0050252, rel=1e-4)


def test_ratio_outside_clip_is_clipped_when_it_helps():
    logp_old = jnp.zeros(4)
    ratio = jnp.array([1.5, 1.5, 0.5, 0.5])
    logp = jnp.log(ratio)
    adv = jnp.array([1.0, -1.0, 1.0, -1.0])
    loss, _, old_kl, clipfrac = clipped_policy_loss(logp, logp_old, adv, 0.2)
    # min(r*A, clip(r)*A): [1.2, -1.5, 0.5, -0.8] -> mean = -0.15 -> loss 0.15
    assert float(loss) == pytest.approx(0.15, abs=1e-6)
    assert float(clipfrac) == 1.0
    # mean(-log r) = -(2 log 1.5 + 2 log 0.5) / 4 = -log(0.75) / 2: the naive estimate
    assert float(old_kl) == pytest.approx(-np.log(0.75) / 2, rel=1e-5)


def test_gradient_is_zero_beyond_the_clip():
    adv = jnp.array([1.0, -1.0])
    logp_old = jnp.zeros(2)

    def f(logp):
        return clipped_policy_loss(logp, logp_old, adv, 0.2)[0]

    # Ratio 1.5 with A > 0 and ratio 0.5 with A < 0: clipped, no gradient.
    g = jax.grad(f)(jnp.log(jnp.array([1.5, 0.5])))
    np.testing.assert_allclose(g, [0.0, 0.0])
    # Inside the clip the gradient is -A * ratio / B.
    g = jax.grad(f)(jnp.log(jnp.array([1.1, 0.9])))
    np.testing.assert_allclose(g, [-1.1 / 2, 0.9 / 2], rtol=1e-6)


def test_value_loss_unclipped_and_clipped():
    v = jnp.array([3.0, 0.0])
    v_old = jnp.array([1.0, 0.0])
    ret = jnp.array([4.0, 1.0])
    # unclipped: 0.5 * mean([1, 1]) = 0.5
    assert float(value_loss(v, v_old, ret, 0.2, clip_vloss=False)) == pytest.approx(0.5)
    # clipped V = [1.2, 0.0]: losses max([1, 7.84], [1, 1]) -> 0.5 * mean([7.84, 1]) = 2.21
    assert float(value_loss(v, v_old, ret, 0.2, clip_vloss=True)) == pytest.approx(2.21)


def test_advantage_normalization():
    a = normalize_advantages(jnp.array([1.0, 2.0, 3.0, 4.0]))
    assert float(a.mean()) == pytest.approx(0.0, abs=1e-6)
    assert float(a.std()) == pytest.approx(1.0, abs=1e-5)


def test_every_loss_statistic_is_a_metric_the_memory_estimate_counts():
    from jaxppo.core.loss import LossInfo
    from jaxppo.core.metrics import METRIC_NAMES
    from jaxppo.run.memory import _METRICS_PER_UPDATE

    assert set(LossInfo._fields) - {"total_loss"} <= set(METRIC_NAMES)
    assert len(METRIC_NAMES) <= _METRICS_PER_UPDATE
