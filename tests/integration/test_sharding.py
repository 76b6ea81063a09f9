"""Scale-out on the CPU: 4 host devices (XLA_FLAGS) for the sharded paths, and two processes on
loopback joined by jax.distributed. Each runs in child processes: JAX fixes its devices when
it starts. What runs on one device (a resume on 1, an eval) runs in this process, as the CLI
(`run_cli`): a child's start-up would test nothing more."""

import json
import os
import socket
import subprocess
import sys

import jax
import numpy as np
import pytest
from conftest import ROOT, TESTS, run_cli

from jaxppo import load_checkpoint
from jaxppo.cli import main
from jaxppo.keys import to_host as _to_host

CARTPOLE = os.path.join(ROOT, "configs", "cartpole.yaml")
SMALL = ["--set", "total_timesteps=8192", "--set", "num_envs=8", "--set", "num_steps=16",
         "--set", "num_minibatches=2", "--set", "update_epochs=2", "--set", "hidden_sizes=[16, 16]"]
FOUR = {"XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} "  # the suite's compile level kept
                     "--xla_force_host_platform_device_count=4".strip()}


def child(argv, extra_env=None, timeout=600):
    env = {**os.environ, **(extra_env or {})}
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=timeout)


CHECKS = ["seeds", "envs_math", "envs_learns", "recurrent"]
REFUSALS = [
    (["--devices", "8"], "--devices 8"),
    (["--devices", "4", "--seeds", "3"], "--seeds 3"),
    (["--devices", "4", "--shard", "envs", "--set", "num_envs=6"], "num_envs"),
    (["--shard", "envs"], "--shard needs --devices"),
    (["--coordinator-address", "127.0.0.1:1"], "--num-processes"),
]
"""`test_sharding_bad_input_is_one_line`'s cases: (train's flags, the culprit its line names)."""


def refused_argv(argv):
    return ["train", "--config", CARTPOLE, *SMALL, "--logdir", "/nonexistent/never", *argv]


@pytest.fixture(scope="module")
def sharded_checks():
    """Every check of `sharded_checks.py` in one child on 4 devices (one start-up, not one per
    check); each says OK or FAIL on its own line, a failure's traceback on stderr. Then each
    refusal of `REFUSALS`, the CLI run in that child as `run_cli` runs it here."""
    refuse = json.dumps([refused_argv(argv) for argv, _ in REFUSALS])
    return child([os.path.join(TESTS, "sharded_checks.py"), *CHECKS, "--refuse", refuse])


@pytest.mark.parametrize("check", CHECKS)
def test_sharded_checks(sharded_checks, check):
    p = sharded_checks
    assert f"OK {check}" in p.stdout.splitlines(), (p.returncode, p.stdout, p.stderr[-3000:])


def jaxppo_cli(*args, extra_env=FOUR):
    return child(["-m", "jaxppo.cli", *args], extra_env)


def test_cli_env_sharded_run_stops_and_resumes_on_other_device_counts(tmp_path, capsys):
    """SIGTERM an env-sharded run on 4 devices mid-way; its checkpoint (global arrays)
    continues on 2 devices (a child with 4) and on 1 (this process, which has 1)."""
    import shutil
    import signal

    logdir = str(tmp_path)
    longer = [*SMALL, "--set", "total_timesteps=65536"]  # 512 updates: seconds, not less
    cmd = [sys.executable, "-m", "jaxppo.cli", "train", "--config", CARTPOLE, *longer, "--seeds",
           "2", "--devices", "4", "--shard", "envs", "--logdir", logdir, "--run-name", "run"]
    p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, **FOUR})
    for line in p.stdout:  # progress lines (not a terminal): the run is under way
        if line.startswith("["):
            p.send_signal(signal.SIGTERM)
            break
    out, err = p.communicate(timeout=600)
    assert p.returncode == 128 + signal.SIGTERM, err[-3000:]
    run = os.path.join(logdir, "run")
    ckpt = load_checkpoint(run)
    assert 0 < ckpt.update < 512
    assert ckpt.runner_state.env.obs.shape == (2, 8, 4)  # global: all 8 envs of both seeds

    for devices in ("2", None):
        copy = os.path.join(logdir, f"resume-{devices}")
        shutil.copytree(run, copy)
        if devices is None:
            code, err = run_cli(capsys, ["train", "--resume", copy, "--no-progress"])
            assert code == 0, err[-30:]
        else:
            p = jaxppo_cli("train", "--resume", copy, "--no-progress", "--devices", devices,
                           "--shard", "envs")
            assert p.returncode == 0, p.stderr[-3000:]
        assert load_checkpoint(copy).update == 512
        rows = open(os.path.join(copy, "metrics.csv")).read().splitlines()
        assert len(rows) == 1 + 2 * 512  # the log continues where it stopped
    capsys.readouterr()
    assert main(["eval", run, "--episodes", "2"]) == 0
    assert "return" in capsys.readouterr().out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


LOOPBACK = [*SMALL, "--set", "total_timesteps=1024"]
"""8 updates, each its own chunk: a chunk's results cross between the processes (up to ~0.6 s
each on a busy 2-core machine), so 64 updates in 32 chunks took seconds more."""


@pytest.mark.parametrize("shard", ["seeds", "envs"])
def test_two_processes_on_loopback(tmp_path, shard):
    """Two processes joined by jax.distributed (CPU collectives over loopback) finish a short
    run; only process 0 writes; seed-sharded results equal a one-process run."""
    port = free_port()
    logdir = str(tmp_path / "runs")
    cmd = [sys.executable, "-m", "jaxppo.cli", "train", "--config", CARTPOLE, *LOOPBACK,
           "--seeds", "2", "--devices", "all", "--shard", shard, "--logdir", logdir,
           "--run-name", "mp", "--no-progress", "--coordinator-address", f"127.0.0.1:{port}",
           "--num-processes", "2"]
    procs = [subprocess.Popen([*cmd, "--process-id", str(i)], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (_out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-3000:]
    assert f"{shard} sharded over 2 devices (2 process(es))" in outs[0][0]
    assert "final return" in outs[0][0] and "final return" not in outs[1][0]
    assert os.listdir(logdir) == ["mp"]
    summary = json.load(open(os.path.join(logdir, "mp", "summary.json")))
    assert summary["finished"] and summary["num_runs"] == 2
    ckpt = load_checkpoint(os.path.join(logdir, "mp"))
    assert ckpt.update == 8

    if shard == "seeds":  # the same two seeds in one process, one device
        assert main(["train", "--config", CARTPOLE, *LOOPBACK, "--seeds", "2", "--logdir",
                     str(tmp_path), "--run-name", "one", "--no-progress"]) == 0
        one = load_checkpoint(os.path.join(str(tmp_path), "one"))
        jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6),
                     _to_host(ckpt.train_state.params), _to_host(one.train_state.params))


@pytest.mark.parametrize("case", range(len(REFUSALS)), ids=[c for _, c in REFUSALS])
def test_sharding_bad_input_is_one_line(sharded_checks, case):
    """Refused in one line naming the culprit, exit 2 (on 4 devices: the `sharded_checks` child)."""
    culprit, p = REFUSALS[case][1], sharded_checks
    line = [x for x in p.stdout.splitlines() if x.startswith(f"REFUSED {case} ")]
    assert line, (p.returncode, p.stdout, p.stderr[-3000:])
    r = json.loads(line[0].split(" ", 2)[2])
    err = r["err"].strip().splitlines()
    assert r["code"] == 2 and len(err) == 1 and culprit in err[0], r["err"][-2000:]
