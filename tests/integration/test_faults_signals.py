"""Stop signals at any moment of a run: while it imports, compiles, runs a chunk or writes;
a second SIGTERM; a closed stdout; a sweep stopped halfway. One line, nothing lost, the run
resumable (the random-moment pass at the end; scripts/stop_anywhere.py is the long one)."""

import json
import os
import signal
import time

import pytest
from faults_setup import CARTPOLE, LONG, LONG_UPDATES, TINY, child, cli, copy_of, one_line

from jaxppo import Experiment, load_checkpoint
from jaxppo.compare.tree import holds_jax
from jaxppo.run.logs.csv_logger import CsvLogger
from jaxppo.rundir.metrics_csv import read_metrics_csv

pytestmark = pytest.mark.usefixtures("compile_cache")


def test_ctrl_c_during_compile_leaves_no_orphan(tmp_path):
    proc = child("train", "--config", CARTPOLE, *LONG, "--logdir", str(tmp_path), "--run-name",
                 "r", "--no-cache")
    for line in proc.stdout:
        if line.startswith("compiling"):
            break
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    # its one line; while XLA compiles, first the note that it stops when the compile ends
    lines = [x for x in err.strip().splitlines() if "taken while XLA's compile runs" not in x]
    assert len(lines) == 1 and "Traceback" not in err, err
    run = str(tmp_path / "r")
    # Either the signal came during compile (nothing ran: no directory is left) or just after
    # (a clean stop with a checkpoint that resumes).
    assert not os.path.exists(run) or load_checkpoint(run).update > 0


def test_a_second_sigterm_stops_at_once_with_one_line(tmp_path):
    proc = child("train", "--config", CARTPOLE, *LONG, "--logdir", str(tmp_path), "--run-name",
                 "r", "--checkpoint-every", "1")
    for line in proc.stdout:
        if line.startswith("["):
            break
    proc.send_signal(signal.SIGTERM)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    if proc.returncode == 0:
        pytest.skip("the run finished before the signals")
    assert proc.returncode in (128 + signal.SIGTERM,), err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert load_checkpoint(str(tmp_path / "r")).update > 0


def test_a_closed_stdout_does_not_kill_the_run(tmp_path):
    proc = child("train", "--config", CARTPOLE, *TINY, "--logdir", str(tmp_path), "--run-name",
                 "r")
    proc.stdout.readline()
    proc.stdout.close()  # `| head -1`
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert json.load(open(tmp_path / "r" / "summary.json"))["finished"]


def test_ctrl_c_during_a_sweep_keeps_what_ran_and_resumes(tmp_path, capsys, monkeypatch):
    original = CsvLogger.on_chunk

    def log_and_interrupt(self, event):
        original(self, event)
        if event.update == 6:
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(CsvLogger, "on_chunk", log_and_interrupt)
    code, _, err = cli(capsys, "sweep", "--config", CARTPOLE, *TINY, "--grid", "lr=1e-3,1e-4",
                       "--logdir", str(tmp_path), "--run-name", "s", "--no-progress")
    assert code == 128 + signal.SIGINT
    one_line(err, "jaxppo sweep --resume")
    run = str(tmp_path / "s")
    assert 0 < load_checkpoint(run).update < 24
    assert not os.path.exists(os.path.join(run, "sweep.csv"))  # no ranking of a partial run
    cut = copy_of(run, tmp_path)  # its log cut after update 2 (two agents: 2 rows an update)
    lines = open(os.path.join(cut, "metrics.csv"), "rb").read().split(b"\r\n")
    open(os.path.join(cut, "metrics.csv"), "wb").write(b"\r\n".join(lines[:5]) + b"\r\n")
    code, _, err = cli(capsys, "sweep", "--resume", cut, "--no-progress")
    assert code == 2
    one_line(err, "covers updates 1-2 of the checkpoint's", "--repair-log")
    monkeypatch.setattr(CsvLogger, "on_chunk", original)
    code, out, err = cli(capsys, "sweep", "--resume", run, "--no-progress")
    assert code == 0, err
    assert "rank" in out and os.path.isfile(os.path.join(run, "sweep.csv"))
    assert read_metrics_csv(run)["update"].shape == (2, 24)


def test_a_signal_while_compiling_lets_xla_finish_then_stops_before_training(tmp_path,
                                                                             monkeypatch,
                                                                             tiny_config):
    """JAX raises a Ctrl-C's KeyboardInterrupt inside XLA's compile, which then compiles on in
    a thread of its own (the process crashed at exit: LLVM ERROR, free(): corrupted, -6/-11)
    or, now and then, swallows it (the run trained to the end). The run holds the signal: the
    compile ends, then the run stops before training, leaving nothing behind."""
    from jaxppo.run.driver import Driver, StopNow

    real, compiled = Driver.compile, []

    def compile_with_a_signal(self, *a, **kw):
        os.kill(os.getpid(), signal.SIGINT)
        real(self, *a, **kw)
        compiled.append(True)

    monkeypatch.setattr(Driver, "compile", compile_with_a_signal)
    with pytest.raises(StopNow) as e:
        Experiment(tiny_config, logdir=str(tmp_path), run_name="r", progress=False).run()
    assert compiled and (e.value.signum, e.value.when) == (signal.SIGINT, "while compiling")
    assert os.listdir(tmp_path) == []  # nothing ran: no run directory is left
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back


def test_a_signal_while_a_chunk_runs_dispatches_no_further_chunk(tmp_path, monkeypatch,
                                                                 tiny_config):
    """A stop request is read before each dispatch: a signal while chunk 1 computes stops
    the run after chunk 1, and chunk 2 is never started."""
    from jaxppo.run.driver import Driver

    real, dispatched = Driver._dispatch, []

    def dispatch(self, *a):
        out = real(self, *a)
        dispatched.append(a[-1])
        if len(dispatched) == 1:  # as if Ctrl-C came while this chunk computes
            os.kill(os.getpid(), signal.SIGTERM)
        return out

    monkeypatch.setattr(Driver, "_dispatch", dispatch)
    result = Experiment(tiny_config, logdir=str(tmp_path), run_name="r", progress=False,
                        chunk_updates=1).run()
    assert result.status == "stopped" and result.stop_signal == signal.SIGTERM
    assert result.update == 1 and dispatched == [0]
    assert load_checkpoint(str(tmp_path / "r")).update == 1


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="reads /proc/PID/maps")
def test_ctrl_c_while_jaxppo_imports_is_one_line(tmp_path):
    proc = child("train", "--config", CARTPOLE, *TINY, "--logdir", str(tmp_path))
    t0 = time.time()
    while not holds_jax(proc.pid):  # importing JAX: jaxppo's import is under way
        assert proc.poll() is None and time.time() - t0 < 120, proc.communicate()
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    one_line(err.strip().splitlines(), "interrupted; nothing was run")
    assert os.listdir(tmp_path) == []


# (the stdout line it follows, seconds after it, signal)
MOMENTS = [("jaxppo:", 0.0, signal.SIGINT), ("compiling", 0.0, signal.SIGINT),
           ("compiling", 0.4, signal.SIGTERM), ("compiling", 1.5, signal.SIGINT),
           ("[", 0.0, signal.SIGINT), ("[", 0.3, signal.SIGHUP)]


def test_a_signal_at_any_moment_stops_the_run_with_one_line(tmp_path):
    """Signals at several moments of a real run (starting, compiling, training, a checkpoint
    being written: every chunk saves one): each stops it with one line and exit 128 + N,
    leaving no run directory (nothing ran) or one whose checkpoint resumes; never a
    traceback, a crash at exit, or a run that trains on to the end."""
    for i, (anchor, delay, sig) in enumerate(MOMENTS):
        proc = child("train", "--config", CARTPOLE, *LONG, "--seeds", "2", "--logdir",
                     str(tmp_path), "--run-name", f"r{i}", "--no-cache", "--checkpoint-every", "1")
        for line in proc.stdout:
            if line.startswith(anchor):
                break
        time.sleep(delay)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=600)
        moment = f"{sig.name} {delay} s after {anchor!r}"
        assert proc.returncode == 128 + sig, (moment, proc.returncode, err)
        # its one line (while XLA compiles, after the note that it stops when the compile ends)
        one_line([x for x in err.strip().splitlines() if "taken while XLA's compile runs" not in x],
                 sig.name)
        run = tmp_path / f"r{i}"
        if run.exists():  # it trained: stopped early, resumable
            assert load_checkpoint(str(run)).update < LONG_UPDATES, moment
            assert json.loads((run / "summary.json").read_text())["status"] == "stopped"
        else:
            assert "nothing" in err, (moment, err)
