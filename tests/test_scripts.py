"""The benchmark scripts run end to end at tiny budgets (no timing assertions: numbers vary)."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(__file__))


def run(*args):
    proc = subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_benchmark_quick(tmp_path):
    out = run("scripts/benchmark.py", "--quick", "--out", str(tmp_path / "b.md"))
    for section in ("Seeds vmapped", "num_envs", "One update, split", "Live logging overhead",
                    "compute dtype"):
        assert section in out, section
    assert (tmp_path / "b.md").read_text().startswith("Machine:")


def test_benchmark_returns_tiny():
    out = run("scripts/benchmark_returns.py", "--configs", "configs/cartpole.yaml",
              "--max-steps", "2048", "--seeds", "2")
    assert "| cartpole.yaml | CartPole-v1 |" in out and "capped from" in out
