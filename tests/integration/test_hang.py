"""Watchdogs for the XLA:CPU deadlock of vmapped training programs (issue 22; BENCHMARKS.md).

jaxlib 0.10's CPU LAPACK kernels split a batched call (a QR of one matrix per vmapped seed) over
XLA:CPU's thread pool from inside a thread of that pool, then block until the pieces finish; two
such calls at once on a 2-thread pool wait for work no thread is left to run. Orthogonal init is
such a QR, so jaxppo draws each member's init in turn (`jaxppo.core.torsos.orthogonal`)."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys

import jax
import pytest
from conftest import ROOT

from jaxppo import make_train

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
from jaxppo.core.torsos import orthogonal
init = orthogonal(2 ** 0.5)
draw = jax.jit(jax.vmap(lambda k: [init(kk, (512, 512)) for kk in jax.random.split(k, 4)]))
keys = jax.random.split(jax.random.key(0), 2)
for _ in range(5):
    jax.block_until_ready(draw(keys))
print("ok")
"""
"""The smallest program found that deadlocks: the kernel inits of 2 vmapped seeds of four
512-wide layers. With flax's orthogonal initializer (one batched QR per layer) it hung 3 runs in
3 with XLA:CPU's concurrency-optimized scheduler on, 0 in 5 with jaxppo's flag (BENCHMARKS.md)."""


def test_vmapped_orthogonal_init_finishes():
    """A subprocess with the scheduler flag off (where the batched QR hangs nearly every time;
    jaxppo's programs must not need the flag), so a deadlock fails by timeout, not forever."""
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env["JAXPPO_KEEP_XLA_FLAGS"] = "1"
    try:
        proc = subprocess.run([sys.executable, "-c", HANGS], capture_output=True, text=True,
                              timeout=120, env=env, cwd=ROOT)
    except subprocess.TimeoutExpired:
        pytest.fail("vmapped orthogonal inits of 512x512 kernels did not finish in 120 s: a "
                    "batched LAPACK QR is back in jaxppo's init, and XLA:CPU deadlocked on it "
                    "(tests/integration/test_hang.py, BENCHMARKS.md)")
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-1500:]
