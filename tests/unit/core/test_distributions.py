"""The categorical policy's log-probability against a plain reference: numpy's log-softmax
picked by index, bit for bit, masked actions included, and its gradient against the indexed
read's."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxppo.core.distributions import MASKED_LOGIT, Categorical, MultiCategorical


def _reference(logits: np.ndarray, action: np.ndarray) -> np.ndarray:
    z = logits - logits.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    return np.take_along_axis(logp, action[..., None], -1)[..., 0]


def test_log_prob_is_the_chosen_entry_of_the_log_softmax_bit_for_bit():
    logits = jax.random.normal(jax.random.key(0), (64, 5)) * 3.0
    logits = logits.at[::7, 2].set(MASKED_LOGIT)  # illegal actions, as `mask_logits` writes them
    action = jax.random.randint(jax.random.key(1), (64,), 0, 5)
    got = Categorical(logits).log_prob(action)
    picked = jnp.take_along_axis(jax.nn.log_softmax(logits), action[:, None], -1)[:, 0]
    np.testing.assert_array_equal(got, picked)  # the indexed read, exactly
    np.testing.assert_allclose(got, _reference(np.asarray(logits, np.float64),
                                               np.asarray(action)), rtol=1e-5, atol=1e-5)
    assert np.isneginf(np.asarray(got)).sum() == 0 and np.asarray(got)[::7].size > 0


def test_log_prob_gradient_is_the_indexed_reads():
    logits = jax.random.normal(jax.random.key(2), (16, 4))
    action = jax.random.randint(jax.random.key(3), (16,), 0, 4)
    grad = jax.grad(lambda x: Categorical(x).log_prob(action).sum())(logits)
    ref = jax.grad(lambda x: jnp.take_along_axis(jax.nn.log_softmax(x), action[:, None],
                                                 -1).sum())(logits)
    np.testing.assert_allclose(grad, ref, rtol=1e-6, atol=1e-7)
    # d/dlogit_j log p(a) = 1[j = a] - p_j
    p = jax.nn.softmax(logits)
    np.testing.assert_allclose(grad, jax.nn.one_hot(action, 4) - p, rtol=1e-5, atol=1e-6)


def test_multi_categorical_log_prob_sums_its_factors():
    logits = jax.random.normal(jax.random.key(4), (8, 2 + 3))
    action = jnp.stack([jnp.arange(8) % 2, jnp.arange(8) % 3], axis=-1)
    got = MultiCategorical(logits, (2, 3)).log_prob(action)
    want = (_reference(np.asarray(logits[:, :2]), np.asarray(action[:, 0]))
            + _reference(np.asarray(logits[:, 2:]), np.asarray(action[:, 1])))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
