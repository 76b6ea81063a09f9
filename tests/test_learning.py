"""Learning tests: the default config must solve CartPole-v1 within its budget."""

import os

import jax
import numpy as np
import pytest

from jaxppo import load_config, make_train

ROOT = os.path.dirname(os.path.dirname(__file__))


@pytest.mark.slow
def test_cartpole_default_config_solves():
    cfg = load_config(os.path.join(ROOT, "configs", "cartpole.yaml"))
    out = jax.jit(jax.vmap(make_train(cfg)))(jax.random.split(jax.random.key(0), 4))
    final = np.asarray(out.metrics["episodic_return"][:, -1])
    assert final.mean() >= 475, f"final returns per seed: {final}"
