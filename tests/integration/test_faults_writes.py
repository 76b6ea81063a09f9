"""Files written beside the checkpoint (eval.json, compare's table, CSV and figure, sweep.csv)
are written whole or not at all: a full disk or a file-size limit leaves the earlier file as it
was, and the write error is one line naming the file and the fix, never a traceback."""

import errno
import json
import os

import pytest
from conftest import tiny_stopped_run
from test_faults import CARTPOLE, cli, limited_child, one_line

import jaxppo.compare.compare as cmp
from jaxppo.compare.table import aggregate

pytestmark = pytest.mark.usefixtures("compile_cache")


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    return tiny_stopped_run(tmp_path_factory.mktemp("done"), 99)


def test_eval_json_past_a_file_size_limit_keeps_the_earlier_one(finished_run, tmp_path, capsys):
    """Reproduction: eval.json was written in place; past `ulimit -f` the earlier one was cut
    to a half-written file (which then blocked `jaxppo report`) and the error a traceback."""
    code, _, err = cli(capsys, "eval", finished_run, "--episodes", "2")
    assert code == 0, err
    before = open(os.path.join(finished_run, "eval.json")).read()
    code, err = limited_child(tmp_path, "RLIMIT_FSIZE", 256, "eval", finished_run,
                              "--episodes", "3", "--no-cache")
    assert code == 2, err
    one_line(err, "eval.json", "File too large", "ulimit -f", "the earlier one is unchanged")
    assert open(os.path.join(finished_run, "eval.json")).read() == before
    assert not [n for n in os.listdir(finished_run) if n.startswith(".tmp-")]
    code, _, err = cli(capsys, "report", finished_run, "--out", str(tmp_path / "rep"))
    assert code == 0, err


def fake_compare(config, *, repeats, seeds, systems, **kw):
    result = {"setup_s": 1.0, "run_s": 2.0, "sps": 1000.0, "solve_s": None,
              "final_return": 20.0, "load": None, "threads": 1}
    return [aggregate(s, [result], config, seeds) for s in systems], []


def test_a_full_disk_after_compare_measured_prints_the_table_in_one_line(
        tmp_path, capsys, monkeypatch):
    """Reproduction: compare measured every run, then its in-place writes hit a full disk:
    a traceback, and the measurements were lost."""
    out = tmp_path / "cmp"
    out.mkdir()
    (out / "compare.md").write_text("earlier\n")
    monkeypatch.setattr(cmp, "compare", fake_compare)

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    code, stdout, err = cli(capsys, "compare", "--config", CARTPOLE, "--systems", "jaxppo",
                            "--repeats", "1", "--out", str(out))
    monkeypatch.undo()
    assert code == 2
    one_line(err, "compare.md", "No space left on device", "free some disk space",
             "the earlier one is unchanged", "printed above")
    assert "| jaxppo, 1 seed |" in stdout  # what was measured is not lost
    assert (out / "compare.md").read_text() == "earlier\n"
    assert sorted(os.listdir(out)) == ["compare.md"]


def test_compare_writes_its_files_whole(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cmp, "compare", fake_compare)
    out = tmp_path / "cmp"
    code, _, err = cli(capsys, "compare", "--config", CARTPOLE, "--systems", "jaxppo",
                       "--repeats", "1", "--out", str(out))
    assert code == 0, err
    assert sorted(os.listdir(out)) == ["compare.csv", "compare.md", "compare.png", "config.json"]
    assert json.load(open(out / "config.json"))["env_id"] == "CartPole-v1"


def test_a_report_on_a_full_disk_is_one_line_with_the_fix(finished_run, tmp_path, capsys,
                                                          monkeypatch):
    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    code, _, err = cli(capsys, "report", finished_run, "--out", str(tmp_path / "rep"))
    monkeypatch.undo()
    assert code == 2
    one_line(err, "cannot write the report", "No space left on device", "free some disk space")
    assert not [n for n in os.listdir(tmp_path / "rep") if n.startswith(".tmp-")]
