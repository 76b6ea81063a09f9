"""An environment whose programs take as long to compile as a test needs: its step unrolls
`JAXPPO_TEST_COMPILE_OPS` small matrix products (read each time the step is traced; 0 by
default, a quick compile). For the tests that stop a command while XLA compiles
(tests/integration/test_faults_compile_signals.py): a run trains quickly, then its `jaxppo eval` (or a
second run) is started with thousands of them. A child process imports it with `--import
long_compile_env` (this folder on its PYTHONPATH); the run records it, so eval imports it too.
"""

import os

import jax.numpy as jnp

from jaxppo.envs import Box, Discrete, register_env

ENV_ID = "test/LongCompile-v0"
OPS = "JAXPPO_TEST_COMPILE_OPS"


class LongCompile:
    """Reward about 1 per step (it depends on the products, so none is pruned); episodes of
    20 steps (also the evaluation's time limit)."""

    default_params = None
    max_steps_in_episode = 20

    def reset_env(self, key, params):
        return jnp.zeros((4,)), jnp.int32(0)

    def step_env(self, key, state, action, params):
        x = jnp.full((4,), 0.1) + action
        for i in range(int(os.environ.get(OPS, "0"))):  # distinct constants: nothing folds
            x = jnp.tanh(x @ jnp.full((4, 4), 0.1 + i * 1e-6))
        return jnp.tanh(x), state + 1, 1.0 + 1e-3 * jnp.tanh(x).sum(), state + 1 >= 20, {}

    def observation_space(self, params):
        return Box(-1.0, 1.0, (4,))

    def action_space(self, params):
        return Discrete(2)


register_env(ENV_ID, LongCompile)
