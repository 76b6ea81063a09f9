"""Watchdogs for the XLA:CPU deadlock of vmapped training programs (issue 22; BENCHMARKS.md).

jaxlib 0.10's CPU LAPACK kernels split a batched call (a QR of one matrix per vmapped seed) over
XLA:CPU's thread pool from inside a thread of that pool, then block until the pieces finish; two
such calls at once on a 2-thread pool wait for work no thread is left to run. Orthogonal init is
such a QR, so jaxppo draws each member's init in turn (`jaxppo.networks.orthogonal`)."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys

import jax
import pytest

from jaxppo import PPOConfig, make_train

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BATCH_DIMS = re.compile(r"custom_call @(lapack_\w+)\(.*?num_batch_dims = \"(\d+)\"")


def lapack_batch_dims(program_text: str) -> list[tuple[str, int]]:
    return [(name, int(n)) for name, n in BATCH_DIMS.findall(program_text)]


@pytest.mark.parametrize("change", [{}, {"network": "gru", "hidden_sizes": (16,)}])
def test_vmapped_programs_hold_no_batched_lapack_call(tiny_config, change):
    """Deterministic (the deadlock itself is a race): vmapped over seeds, the training program's
    orthogonal inits (MLP kernels, a GRU's recurrent kernel) are QRs of one matrix each."""
    config = dataclasses.replace(tiny_config, **change)
    keys = jax.random.split(jax.random.key(0), 2)
    text = jax.jit(jax.vmap(make_train(config))).lower(keys).as_text()
    calls = lapack_batch_dims(text)
    if jax.default_backend() == "cpu":
        assert calls, "no LAPACK call found: has the lowering changed? (update BATCH_DIMS)"
    assert all(n == 0 for _, n in calls), calls


HANGS = """
import jax, jaxppo
c = jaxppo.PPOConfig(env_id="CartPole-v1", num_envs=4, num_steps=16, total_timesteps=64,
                     num_minibatches=2, update_epochs=1, hidden_sizes=(512, 512))
train = jax.jit(jax.vmap(jaxppo.make_train(c)))
keys = jax.random.split(jax.random.key(0), 2)
for _ in range(3):
    jax.block_until_ready(train(keys))
print("ok")
"""
"""The smallest jaxppo program that deadlocked (BENCHMARKS.md: 3 runs of 3 hung before the fix):
2 vmapped seeds of 512-wide layers, whose inits were batched QRs long enough to overlap."""


def test_vmapped_wide_network_finishes():
    """Run in a subprocess with jaxppo's own XLA flags, so a deadlock fails by timeout."""
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAXPPO_KEEP_XLA_FLAGS")}
    try:
        proc = subprocess.run([sys.executable, "-c", HANGS], capture_output=True, text=True,
                              timeout=240, env=env, cwd=ROOT)
    except subprocess.TimeoutExpired:
        pytest.fail("2 vmapped seeds of a 512-wide CartPole network did not finish in 240 s: the "
                    "XLA:CPU deadlock of batched LAPACK calls is back (tests/test_hang.py)")
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-1500:]
