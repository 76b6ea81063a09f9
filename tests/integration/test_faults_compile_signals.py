"""A stop signal while a command compiles (issue #53): JAX raises Ctrl-C's KeyboardInterrupt
inside XLA's compile, which compiles on in a thread of its own, and Python's shutdown then
crashes under it (`jaxppo eval`: a segmentation fault, exit -11 or -6, 3 of 3 tries). Every
verb that compiles holds the signal until the compile is done and stops with one line and
128 + N; a second signal stops at once, the process ending without Python's shutdown.

Each test starts the real command on tests/long_compile_env.py's environment, whose step
unrolls enough matrix products to compile for seconds, and signals it after JAX's log
(JAX_LOG_COMPILES) says the long program's XLA compile began."""

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from conftest import ROOT, TESTS
from long_compile_env import ENV_ID, OPS

from jaxppo import PPOConfig
from jaxppo.cli import main
from jaxppo.compare.fit import CHILD
from jaxppo.compare.tree import holds_jax

pytestmark = pytest.mark.usefixtures("compile_cache")
CARTPOLE = os.path.join(ROOT, "configs", "cartpole.yaml")
SETS = [f"env_id={ENV_ID}", "total_timesteps=1536", "num_envs=4", "num_steps=16",
        "num_minibatches=2", "update_epochs=1", "hidden_sizes=[16,16]"]
RUN = ["--import", "long_compile_env", "--config", CARTPOLE,
       *(a for s in SETS for a in ("--set", s)), "--no-progress", "--no-cache"]
LONG_OPS = 400  # seconds of XLA's compile (~2.5 s alone on 2 cores at level 0; more when busy)
CRASH = ("Traceback", "Fatal Python error", "Segmentation fault", "pure virtual method",
         "terminate called", "core dumped")


def child_env(ops: int) -> dict:
    """The environment of a child: this folder importable (for `--import long_compile_env`),
    JAX's compile log on, `ops` products per step."""
    path = os.pathsep.join(p for p in (TESTS, os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1", "JAX_LOG_COMPILES": "1",
            OPS: str(ops)}


def start(argv, ops: int = LONG_OPS) -> subprocess.Popen:
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            errors="replace", cwd=ROOT, env=child_env(ops))


def jaxppo(*argv, ops: int = LONG_OPS) -> subprocess.Popen:
    return start([sys.executable, "-m", "jaxppo.cli", *argv], ops)


def signal_when_compiling(proc, program: str, *signals, delay: float = 0.3,
                          after: str | None = None) -> list[str]:
    """Send `signals` (0.2 s apart) `delay` s after XLA began compiling `program` (its first
    lowering after JAX's log showed `after`: a sweep lowers small `<lambda>` programs while it
    plans, long before its run's); the output's lines (JAX's log and the command's), after it
    ended."""
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if after is not None:
            after = None if after in line else after
        elif f"Finished jaxpr to MLIR module conversion jit({program})" in line:
            break
    else:
        pytest.fail(f"{program} was never compiled:\n{''.join(seen)[-3000:]}")
    time.sleep(delay)
    for i, sig in enumerate(signals):
        time.sleep(0.2 if i else 0.0)
        proc.send_signal(sig)
    rest, _ = proc.communicate(timeout=300)
    return "".join(seen + [rest]).splitlines()


def own_lines(lines, prefix="jaxppo"):
    """The command's own lines (not JAX's compile log)."""
    return [line for line in lines if line.startswith(prefix)]


def assert_clean(proc, lines, code, prefix, *words):
    """Exit `code`, no crash or traceback, and one line starting with `prefix` (the
    command's error), holding `words`."""
    text = "\n".join(lines)
    assert proc.returncode == code, (proc.returncode, text[-3000:])
    assert not any(c in text for c in CRASH), text[-3000:]
    mine = own_lines(lines, prefix)
    assert len(mine) == 1, mine
    for w in words:
        assert w in mine[0], (w, mine[0])


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A two-seed run of the long-compile env, trained with a quick compile (0 products)."""
    logdir = str(tmp_path_factory.mktemp("long_compile"))
    assert main(["train", *RUN, "--seeds", "2", "--logdir", logdir, "--run-name", "r"]) == 0
    return os.path.join(logdir, "r")


def test_ctrl_c_while_eval_compiles_stops_after_the_compile_in_one_line(trained):
    """Reproduction: a segmentation fault (exit -11) or abort (-6), not one line."""
    proc = jaxppo("eval", trained, "--episodes", "50", "--no-cache")
    lines = signal_when_compiling(proc, "_returns", signal.SIGINT)
    assert_clean(proc, lines, 128 + signal.SIGINT, "jaxppo eval: error",
                 "jaxppo eval: error: stopped by SIGINT while compiling",
                 "nothing was evaluated (no eval.json written)")
    assert not os.path.exists(os.path.join(trained, "eval.json"))


def test_a_second_signal_while_eval_compiles_stops_at_once(trained):
    """The compile is abandoned in XLA's thread: the process ends without Python's shutdown
    (which crashes under it), with one line and 128 + the second signal."""
    proc = jaxppo("eval", trained, "--episodes", "50", "--no-cache")
    t0 = time.monotonic()
    lines = signal_when_compiling(proc, "_returns", signal.SIGINT, signal.SIGTERM)
    assert_clean(proc, lines, 128 + signal.SIGTERM, "jaxppo eval: error",
                 "stopped at once by SIGTERM", "nothing was evaluated")
    assert time.monotonic() - t0 < 60  # at once, not after the compile and the episodes


@pytest.mark.parametrize("verb,extra,program", [("sweep", ["--grid", "lr=1e-3,3e-4"], "<lambda>")])
def test_ctrl_c_while_a_run_compiles_stops_before_training_in_one_line(tmp_path, verb, extra,
                                                                       program):
    """The same moment in the other verbs that train (they held it already): the same line.
    `train`'s: the test below (the same command, signal and moment). The run's program is the
    first `<lambda>` after its `init` (the plan's own lambdas compile first: signalled 1 s after
    one of those, a loaded machine was still starting the run)."""
    proc = jaxppo(verb, *RUN, *extra, "--logdir", str(tmp_path), "--run-name", "r")
    lines = signal_when_compiling(proc, program, signal.SIGINT, delay=1.0,
                                  after="Finished XLA compilation of jit(init)")
    assert_clean(proc, lines, 128 + signal.SIGINT, f"jaxppo {verb}: error",
                 f"jaxppo {verb}: error: stopped by SIGINT while compiling", "nothing had run")
    assert not os.path.exists(tmp_path / "r")  # nothing ran: no run directory is left


def test_ctrl_c_while_compiling_is_answered_before_the_compile_ends(tmp_path):
    """A first Ctrl-C during a long compile was silent until the compile ended (30 s on a busy
    machine): the watchdog says at once that the command stops when the compile ends."""
    proc = jaxppo("train", *RUN, "--logdir", str(tmp_path), "--run-name", "r")
    lines = signal_when_compiling(proc, "one", signal.SIGINT, delay=1.0)
    note = next(i for i, line in enumerate(lines) if line.startswith("jaxppo train: note: "))
    assert lines[note] == ("jaxppo train: note: SIGINT taken while XLA's compile runs: stopping "
                           "when it ends (a second signal stops within 5 s)")
    done = max(i for i, line in enumerate(lines) if "Finished XLA compilation of jit(" in line)
    assert note < done, "\n".join(x[:100] for x in lines[done - 3:note + 2])  # before the last
    assert_clean(proc, lines, 128 + signal.SIGINT, "jaxppo train: error",
                 "jaxppo train: error: stopped by SIGINT while compiling", "nothing had run")
    assert not os.path.exists(tmp_path / "r")  # nothing ran: no run directory is left


def test_a_compare_run_process_stopped_while_compiling_is_one_line(tmp_path):
    """`jaxppo compare`'s run processes: a traceback (StopNow) and exit 1, now one line and
    128 + N (the parent, which has the same Ctrl-C, says its own)."""
    config = PPOConfig(env_id=ENV_ID, env_imports=("long_compile_env",), total_timesteps=1536,
                       num_envs=4, num_steps=16, num_minibatches=2, update_epochs=1,
                       hidden_sizes=(16, 16))
    proc = start([*CHILD, "jaxppo", json.dumps(config.to_dict()), "1", "0"])
    lines = signal_when_compiling(proc, "one", signal.SIGINT, delay=1.0)
    assert_clean(proc, lines, 128 + signal.SIGINT, "stopped by", "stopped by SIGINT while "
                 "compiling")


@pytest.mark.slow
def test_a_signal_at_random_moments_of_eval_never_crashes(trained):
    """6 draws over the whole of `jaxppo eval` (its import, loading, a compile of seconds,
    the episodes, its output and exit), one in each sixth of its first 9 s (so every phase
    gets one, where 10 uniform draws could leave one out), a second signal in every third:
    each ends with 0 (it had finished) or 128 + N and at most one line of its own; never a
    crash, a traceback or a hang. (Fifty draws and more over every command:
    scripts/stop_anywhere.py.)"""
    draws = random.Random(53)
    for i in range(6):
        proc = jaxppo("eval", trained, "--episodes", "50", "--no-cache", "--no-json")
        t0 = time.monotonic()
        while not holds_jax(proc.pid):  # jaxppo's import is under way (it holds the signal)
            assert proc.poll() is None and time.monotonic() - t0 < 120, proc.communicate()
            time.sleep(0.01)
        moment = draws.uniform(1.5 * i, 1.5 * (i + 1))  # import ~3 s, compile ~3 s, episodes
        end = time.monotonic() + moment
        while time.monotonic() < end and proc.poll() is None:  # not idle past its end
            time.sleep(0.01)
        second = i % 3 == 2
        for _ in range(2 if second else 1):
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
            time.sleep(0.2)
        try:
            out, _ = proc.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail(f"draw {i}: hung after a signal {moment:.2f} s into eval")
        lines = out.splitlines()
        what = (i, round(moment, 2), second, proc.returncode, out[-3000:])
        assert proc.returncode in (0, 128 + signal.SIGINT), what
        assert not any(c in out for c in CRASH), what
        assert len(own_lines(lines, "jaxppo eval:")) <= 1, what
        if proc.returncode == 0:
            assert "return" in out, what


def test_a_second_signal_while_jaxppo_imports_ends_it_even_if_a_library_swallows_it():
    """A second stop signal while the command's imports hold signals ends the process in one
    line. It once raised KeyboardInterrupt, which a library being imported could swallow (a
    bare `except:` around an optional import): the signal was lost and eval ran to the end.
    The line names the verb from argv: the parser has not run yet."""
    code = textwrap.dedent("""
        import os, signal, sys, time
        sys.argv[:] = ["jaxppo", "eval", "runs/x"]  # the command (process.is_command)
        from jaxppo.process import hold_signals
        hold_signals()
        for _ in range(2):
            try:  # an import of a library that swallows whatever is raised in it
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.2)
            except BaseException:
                pass
        print("went on")
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 128 + signal.SIGINT, (proc.returncode, proc.stdout, proc.stderr)
    assert "went on" not in proc.stdout
    assert proc.stderr.strip().splitlines() == [
        # the verb named although the CLI never parsed argv (it once said "jaxppo: error")
        "jaxppo eval: error: stopped at once by SIGINT while starting; nothing was run"], proc.stderr
