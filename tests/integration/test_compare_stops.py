"""compare counts only whole measurements: a child that stopped early (a signal, a divergence,
a kill) is marked and never counted, and a Ctrl-C after some runs writes what was measured
instead of 'nothing was run' (issue #54, item 6). The children are faked: what is tested is
what the parent makes of what they report."""

import csv
import json
import subprocess

import pytest
from faults_setup import CARTPOLE, cli

import jaxppo.compare.compare as cmp

STEPS = 4096


def child_reports(monkeypatch, outcomes):
    """Each child run takes the next outcome: a dict to report, or an exception to raise."""
    it = iter(outcomes)

    def run(argv, **kw):
        out = next(it)
        if isinstance(out, BaseException):
            raise out
        if isinstance(out, int):
            return subprocess.CompletedProcess(argv, out, "", "")
        report = {"setup_s": 1.0, "run_s": 2.0, "env_steps": STEPS, "status": "finished",
                  "sps": 2048.0, "threads": 2, "platform": "cpu", "solve_s": None,
                  "solve_steps": None, "final_return": 20.0, **out}
        return subprocess.CompletedProcess(argv, 0, json.dumps(report) + "\n", "")

    monkeypatch.setattr(cmp.subprocess, "run", run)


ARGV = ["compare", "--config", CARTPOLE, "--set", f"total_timesteps={STEPS}",
        "--systems", "jaxppo"]


def test_a_child_stopped_early_is_marked_and_not_counted(tmp_path, capsys, monkeypatch):
    """Reproduction: a child stopped by SIGTERM at half its budget reported the config's whole
    budget and its SPS, and was a full repeat of the table."""
    child_reports(monkeypatch, [{}, {"status": "stopped", "env_steps": STEPS // 2}, -9])
    code, out, err = cli(capsys, *ARGV, "--repeats", "3", "--out", str(tmp_path / "c"))
    assert code == 0, err
    assert "jaxppo repeat 2 stopped early (stopped, 2,048 of 4,096 steps): not counted" in out
    assert "jaxppo repeat 3 stopped early (killed (exit -9)" in out
    with open(tmp_path / "c" / "compare.csv") as f:
        rows = list(csv.DictReader(f))
    assert rows[0]["repeats"] == "1"  # the one whole run
    assert "not counted" in (tmp_path / "c" / "compare.md").read_text()


def test_ctrl_c_after_some_runs_writes_what_was_measured(tmp_path, capsys, monkeypatch):
    """Reproduction: Ctrl-C in the second repeat said 'nothing was run' and wrote nothing."""
    child_reports(monkeypatch, [{}, KeyboardInterrupt()])
    out_dir = tmp_path / "c"
    code, _, err = cli(capsys, *ARGV, "--repeats", "3", "--out", str(out_dir))
    assert code == 130
    assert len(err) == 1 and "stopped by SIGINT after 1 complete run(s)" in err[0], err
    assert "nothing was run" not in err[0]
    md = (out_dir / "compare.md").read_text()
    assert "interrupted after 1 complete run(s) of 3" in md
    assert (out_dir / "compare.csv").exists() and (out_dir / "compare.png").exists()


def test_ctrl_c_before_any_run_completed_writes_nothing(tmp_path, capsys, monkeypatch):
    child_reports(monkeypatch, [KeyboardInterrupt()])
    code, _, err = cli(capsys, *ARGV, "--out", str(tmp_path / "c"))
    assert code == 130 and err == ["jaxppo compare: interrupted; nothing was run"], err
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("status", ["stopped", "diverged"])
def test_every_run_stopped_is_an_error_not_a_table(tmp_path, capsys, monkeypatch, status):
    child_reports(monkeypatch, [{"status": status}])
    code, _, err = cli(capsys, *ARGV, "--repeats", "1", "--out", str(tmp_path / "c"))
    assert code == 1 and "no system completed a run" in err[0], err
