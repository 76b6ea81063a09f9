"""The benchmark scripts run end to end at tiny budgets (no timing assertions: numbers vary)."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT


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


def test_benchmark_policies_quick():
    out = run("scripts/benchmark_policies.py", "--quick", "--only", "networks,convs", "--seeds",
              "1")
    assert "| GRU 128 (torso [64]) |" in out and "| LSTM 128 (torso [64]) |" in out
    assert "| nature_cnn | 8 | gradient |" in out and "| cnn | 8 | forward |" in out


def test_benchmark_search_quick():
    """Grid, random, halving and PBT at equal total env steps, and PBT's overhead, at toy size
    (one env): every search runs through the public `jaxppo.sweep`."""
    out = run("scripts/benchmark_search.py", "--quick", "--envs", "CartPole-v1")
    for row in ("| grid | 16 |", "| random | 16 |", "| halving (eta 3) | 16 |", "| PBT (interval",
                "| plain population |"):
        assert row in out, row


def test_benchmark_returns_tiny():
    out = run("scripts/benchmark_returns.py", "--configs", "configs/cartpole.yaml",
              "--max-steps", "2048", "--seeds", "2")
    assert "| cartpole.yaml | CartPole-v1 |" in out and "capped from" in out


def test_gpu_suite_tiny(tmp_path):
    """Every part of the GPU suite at toy sizes on the CPU (its first row each: every part's
    code runs), so the suite cannot rot between the sessions that are lent a GPU. In one
    process (one process per part, the default: the PureJaxRL test below)."""
    out = run("scripts/gpu_suite.py", "--tiny", "--one-row", "--one-process", "--out",
              str(tmp_path / "suite"))
    data = json.load(open(tmp_path / "suite.json"))
    assert data["device"]["platform"] == "cpu" and data["device"]["jax"]
    parts = {r["part"] for r in data["rows"]}
    assert parts == {"agents", "envs", "minatar", "brax", "precision", "policies", "suites",
                     "atari", "sb3", "purejaxrl"}
    sb3 = [r["what"] for r in data["rows"] if r["part"] == "sb3" and r["sps"]]
    with_sb3 = importlib.util.find_spec("stable_baselines3") is not None  # not on Python 3.12+
    assert sb3 == ["jaxppo, 1 seed", *(["SB3 DummyVecEnv (4 envs)"] if with_sb3 else [])]
    atari = [r for r in data["rows"] if r["part"] == "atari"]
    envpool = importlib.util.find_spec("jaxppo.envs.sources.envpool") is not None
    assert all((r["sps"] is not None) == envpool for r in atari), atari  # else: skipped rows
    measured = [r for r in data["rows"] if r["sps"] is not None]
    assert len(measured) >= 8 + with_sb3 and all(r["sps"] > 0 and r["compile_s"] > 0 for r in measured)
    assert len([r for r in measured if r["part"] == "precision"]) == 1  # --one-row
    assert (tmp_path / "suite.md").read_text().startswith("Device: **cpu**")
    assert "| agents | CartPole-v1 default | 1 |" in out  # rows print as they come


STUB_PPO = '''
"""A stand-in with PureJaxRL ppo.py's interface and the two things its shim must fix: it
unpacks gymnax's old 5-tuple `step`, and it imports distrax."""
import distrax
import gymnax
import jax
import jax.numpy as jnp


def make_train(config):
    env, params = gymnax.make(config["ENV_NAME"])
    n, t = config["NUM_ENVS"], config["NUM_STEPS"]
    updates = config["TOTAL_TIMESTEPS"] // (n * t)

    def train(rng):
        obs, state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(rng, n), params)

        def step(carry, key):
            state, ret = carry
            k1, k2 = jax.random.split(key)
            action = distrax.Categorical(logits=jnp.zeros((n, 2))).sample(seed=k1)
            obs, state, reward, done, info = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
                jax.random.split(k2, n), state, action, params)
            ret = jnp.where(done, 0.0, ret + reward)
            return (state, ret), ret

        _, rets = jax.lax.scan(step, (state, jnp.zeros(n)), jax.random.split(rng, updates * t))
        return {"runner_state": state,
                "metrics": {"returned_episode_returns": rets.reshape(updates, t, n)}}

    return train
'''


def test_gpu_suite_runs_purejaxrl_through_its_shim(tmp_path):
    """`--purejaxrl PATH`: a checkout's ppo.py runs beside jaxppo, with gymnax 1.0's step and
    without distrax (here a stand-in with ppo.py's interface; no checkout can be fetched).
    Two parts, each in a process of its own (the default), their rows in one report; each
    part's first row (`--one-row`: PureJaxRL's first is a pair, its row and jaxppo's)."""
    (tmp_path / "purejaxrl").mkdir()
    (tmp_path / "purejaxrl" / "ppo.py").write_text(STUB_PPO)
    out = run("scripts/gpu_suite.py", "--tiny", "--one-row", "--parts", "agents,purejaxrl",
              "--purejaxrl", str(tmp_path), "--out", str(tmp_path / "suite"))
    assert "| purejaxrl | PureJaxRL ppo.py (shimmed) | 1 |" in out
    assert "| purejaxrl | jaxppo, same config | 1 |" in out
    rows = json.load(open(tmp_path / "suite.json"))["rows"]
    assert [r["part"] for r in rows] == ["agents", "purejaxrl", "purejaxrl"], rows


def test_benchmark_runs_one_seed_as_each_projects_users_do(tmp_path):
    """The purejaxrl section's child: one seed as `jax.jit(train)(key)` (PureJaxRL's ppo.py and
    a `make_train` user run it so), more seeds vmapped. PureJaxRL (a stand-in) runs in a child
    process, as the section runs it: its shim patches gymnax for the process."""
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    import benchmark

    config = os.path.join(ROOT, "configs", "cartpole.yaml")
    for seeds, form in ((1, "jit(train)(key)"), (2, "jit(vmap(train))(keys)")):
        r = benchmark._child_run("jaxppo", config, seeds, None, steps=1024)
        assert r["form"] == form and r["run_s"] > 0 and r["compile_s"] > 0, r
        assert r["sps"] == pytest.approx(seeds * 1024 / r["run_s"])
    (tmp_path / "purejaxrl").mkdir()
    (tmp_path / "purejaxrl" / "ppo.py").write_text(STUB_PPO)
    out = run("scripts/benchmark.py", "--child", "purejaxrl", "--config", config,
              "--child-seeds", "1", "--purejaxrl", str(tmp_path), "--child-steps", "1024")
    r = json.loads(out.strip().splitlines()[-1])
    assert r["form"] == "jit(train)(key)" and r["sps"] > 0, r


def test_benchmark_host_quick():
    """Vmapped agents sharing one pool (2 x 2), and the rows picked by env id."""
    out = run("scripts/benchmark.py", "--quick", "--only", "host", "--host-shapes", "2x2",
              "--host-envs", "gymnasium/CartPole-v1")
    assert "| gymnasium/CartPole-v1 | 2 | 2 |" in out
    assert "Breakout" not in out


def test_random_play_scores_whole_games():
    """Breakout's random play, 3 whole games (all lives); a JAX env is refused in one line."""
    pytest.importorskip("envpool", reason="EnvPool has no wheel for this platform")
    out = run("scripts/random_play.py", "--config", "configs/atari_breakout.yaml", "--games", "3")
    assert out.startswith("envpool/Breakout-v5: random play, 3 whole games: mean ")
    proc = subprocess.run([sys.executable, "scripts/random_play.py", "--config",
                           "configs/cartpole.yaml"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "CartPole-v1 is not a host env" in proc.stderr


def test_startup_script_times_the_first_line_and_a_typo():
    """scripts/startup.py: both cases, their lines quoted (the typo's is its error)."""
    out = run("scripts/startup.py", "--repeats", "1")
    assert "| train CartPole: first line, warm |" in out and "`jaxppo: CartPole-v1 |" in out
    assert ", cold |" not in out  # the page cache is dropped only when asked (--cold)
    assert "`jaxppo train: error: config key 'env_id': unknown environment 'CartPoleX-v9'" in out


def test_benchmark_resets_quick():
    """What a reset costs next to a step (a suite not installed is skipped), and vmapped seeds
    against one agent of as many envs, per network, with what `reset: auto` picked."""
    out = run("scripts/benchmark_resets.py", "--envs", "CartPole-v1,nosuch/Env-v0",
              "--configs", "cartpole.yaml", "--shapes", "2x4", "--nets", "8/16",
              "--updates", "1", "--steps", "4", "--repeats", "1")
    assert "| CartPole-v1 | " in out and "predrawn (cheap reset, declared by its suite) |" in out
    assert "nosuch" not in out
    for net in ("[8]", "[16]"):
        assert f"| CartPole-v1 | {net} | auto: predrawn | - | 1 x 8 |" in out
        assert f"| CartPole-v1 | {net} | auto: predrawn | - | 2 x 4 |" in out
