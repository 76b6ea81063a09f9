"""GAE against a plain NumPy loop, and a case worked by hand."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxppo import compute_gae

pytestmark = pytest.mark.unit


def numpy_gae(rewards, values, next_values, terminated, dones, gamma, lam):
    T, N = rewards.shape
    adv = np.zeros((T, N))
    for n in range(N):
        running = 0.0
        for t in reversed(range(T)):
            bootstrap = 0.0 if terminated[t, n] else next_values[t, n]
            delta = rewards[t, n] + gamma * bootstrap - values[t, n]
            running = delta + (0.0 if dones[t, n] else gamma * lam * running)
            adv[t, n] = running
    return adv, adv + values


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_numpy_loop_with_terminations_and_truncations(seed):
    rng = np.random.default_rng(seed)
    T, N = 37, 5
    rewards = rng.normal(size=(T, N)).astype(np.float32)
    values = rng.normal(size=(T, N)).astype(np.float32)
    next_values = rng.normal(size=(T, N)).astype(np.float32)
    terminated = rng.random((T, N)) < 0.1
    truncated = (rng.random((T, N)) < 0.1) & ~terminated
    dones = terminated | truncated
    assert terminated.any() and truncated.any()
    gamma, lam = 0.97, 0.9
    adv, ret = compute_gae(rewards, values, next_values, terminated, dones, gamma, lam)
    ref_adv, ref_ret = numpy_gae(rewards, values, next_values, terminated, dones, gamma, lam)
    np.testing.assert_allclose(adv, ref_adv, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ret, ref_ret, rtol=1e-5, atol=1e-5)


def test_hand_worked_case():
    # One env, 4 steps: the episode is truncated after step 1 (bootstraps from V(s'_1) = 10),
    # and a new one terminates at step 3 (no bootstrap). gamma = 0.5, lambda = 0.5.
    r = np.array([[1.0], [2.0], [0.0], [4.0]], np.float32)
    v = np.array([[1.0], [1.0], [2.0], [2.0]], np.float32)
    nv = np.array([[1.0], [10.0], [2.0], [99.0]], np.float32)
    term = np.array([[0], [0], [0], [1]], bool)
    done = np.array([[0], [1], [0], [1]], bool)
    # deltas: d0 = 1 + .5*1 - 1 = .5 ; d1 = 2 + .5*10 - 1 = 6 ; d2 = 0 + .5*2 - 2 = -1 ;
    #         d3 = 4 + 0 - 2 = 2
    # A3 = 2 ; A2 = -1 + .25*2 = -.5 ; A1 = 6 (episode ended) ; A0 = .5 + .25*6 = 2
    adv, ret = compute_gae(r, v, nv, term, done, 0.5, 0.5)
    np.testing.assert_allclose(np.asarray(adv)[:, 0], [2.0, 6.0, -0.5, 2.0], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ret)[:, 0], [3.0, 7.0, 1.5, 4.0], rtol=1e-6)


def test_truncation_bootstraps_but_termination_does_not():
    r = np.zeros((1, 2), np.float32)
    v = np.zeros((1, 2), np.float32)
    nv = np.full((1, 2), 5.0, np.float32)
    term = np.array([[True, False]])
    done = np.array([[True, True]])
    adv, _ = compute_gae(r, v, nv, term, done, 0.9, 0.95)
    np.testing.assert_allclose(np.asarray(adv)[0], [0.0, 4.5], rtol=1e-6)


def test_lambda_one_is_discounted_return_minus_value():
    rng = np.random.default_rng(3)
    T = 10
    r = rng.normal(size=(T, 1)).astype(np.float32)
    v = rng.normal(size=(T, 1)).astype(np.float32)
    nv = np.concatenate([v[1:], np.zeros((1, 1), np.float32)])
    term = np.zeros((T, 1), bool)
    term[-1] = True
    adv, _ = compute_gae(r, v, nv, term, term, 0.9, 1.0)
    mc = np.array([sum(0.9**k * r[t + k, 0] for k in range(T - t)) for t in range(T)])
    np.testing.assert_allclose(np.asarray(adv)[:, 0], mc - v[:, 0], rtol=1e-5, atol=1e-5)


def test_the_advantages_differentiate_as_worked_by_hand_alone_and_vmapped():
    """A loss on the advantages is differentiable in reverse mode, under vmap too (a
    regression: the carry's `batched_like` once had no reverse-mode rule). Two steps, no
    episode end: A_1 = delta_1, A_0 = delta_0 + gamma * lam * delta_1, so the gradient of
    A_0 + A_1 with respect to V(s_0), V(s_1) is -1 and -(1 + gamma * lam)."""
    zeros = jnp.zeros((2, 1))

    def loss(values):
        return compute_gae(zeros, values, zeros, zeros, zeros, 0.99, 0.95)[0].sum()

    expected = np.array([[-1.0], [-(1 + 0.99 * 0.95)]])
    np.testing.assert_allclose(jax.grad(loss)(jnp.ones((2, 1))), expected, rtol=1e-6)
    batched = jax.jit(jax.vmap(jax.grad(loss)))(jnp.ones((3, 2, 1)))
    np.testing.assert_allclose(batched, np.broadcast_to(expected, (3, 2, 1)), rtol=1e-6)
