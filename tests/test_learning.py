"""Learning tests: the CartPole configs must solve CartPole-v1 within their budgets."""

import os

import jax
import numpy as np
import pytest

from jaxppo import load_config, make_train

ROOT = os.path.dirname(os.path.dirname(__file__))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["cartpole.yaml", "cartpole_fast.yaml"])
def test_cartpole_configs_solve(name):
    cfg = load_config(os.path.join(ROOT, "configs", name))
    out = jax.jit(jax.vmap(make_train(cfg)))(jax.random.split(jax.random.key(0), 4))
    final = np.asarray(out.metrics["episodic_return"][:, -1])
    assert final.mean() >= 475, f"final returns per seed: {final}"
