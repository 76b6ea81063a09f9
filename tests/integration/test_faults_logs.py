"""The run's logs against its checkpoint: an older config.yaml and a cut CSV row resume; a
damaged metrics.csv is refused, then repaired keeping every good row (copies and shuffles are
no damage); a missing one starts fresh noting the gap; a finished sweep's missing or damaged
summary and table are rebuilt, the damaged one kept aside."""

import glob
import json
import os

import numpy as np
import pytest
from faults_setup import CARTPOLE, TINY, cli, copy_of, one_line

import jaxppo
from jaxppo import Experiment, load_checkpoint
from jaxppo._xla import setup_compilation_cache
from jaxppo.cli import main
from jaxppo.rundir.csv_log import check_metrics_log, gaps_summary, kept_rows
from jaxppo.rundir.metrics_csv import CSV_HEADER, read_metrics_csv

pytestmark = pytest.mark.usefixtures("compile_cache")


def test_an_older_config_yaml_and_a_cut_csv_row_still_resume(stopped_run, tmp_path, capsys):
    """A config.yaml written before a key existed (defaults fill it in) is not an edit; a row a
    kill cut short and rows past the checkpoint are dropped, the rest kept with today's columns."""
    run = copy_of(stopped_run, tmp_path)
    path = os.path.join(run, "config.yaml")
    lines = open(path).read().splitlines()
    open(path, "w").write("\n".join(line for line in lines if not line.startswith(
        "matmul_precision")) + "\n")
    csv_path = os.path.join(run, "metrics.csv")
    text = open(csv_path).read()
    open(csv_path, "w").write(text + "13,0,832,1.0,12.5,2")  # half a row, past the checkpoint
    code, _, err = cli(capsys, "train", "--resume", run, "--no-progress")
    assert code == 0, err
    m = read_metrics_csv(run)
    assert m["update"].shape == (1, 24)
    np.testing.assert_array_equal(m["update"][0], np.arange(1, 25))


def snapshot(run):
    """Every file of a run directory, as bytes (the lock file aside)."""
    out = {}
    for folder, _, files in os.walk(run):
        for name in files:
            path = os.path.join(folder, name)
            if name != ".lock":
                out[os.path.relpath(path, run)] = open(path, "rb").read()
    return out


def damage_log(run, how):
    """metrics.csv of the run stopped at update 12 (one seed), damaged as a hard stop or an
    editor leaves it; returns the updates 1..12 still whole in it."""
    path = os.path.join(run, "metrics.csv")
    data = open(path, "rb").read()
    lines = data.split(b"\r\n")
    if how == "cut":  # a file cut mid-way (header and updates 1-5, then half a row)
        open(path, "wb").write(b"\r\n".join(lines[:6]) + b"\r\n" + lines[6][:10])
        return list(range(1, 6))
    if how == "header":  # the header replaced
        open(path, "wb").write(b"a,b,c\r\n" + b"\r\n".join(lines[1:]))
        return []
    lines[3] = lines[3][:12] + b"\xff\xfe" + lines[3][12:]  # update 3: bytes that are not text
    open(path, "wb").write(b"\r\n".join(lines))
    return [u for u in range(1, 13) if u != 3]


@pytest.mark.parametrize("how", ["cut", "header", "bytes"])
def test_a_damaged_metrics_log_is_refused_then_repaired(stopped_run, tmp_path, capsys, how):
    run = copy_of(stopped_run, tmp_path)
    kept = damage_log(run, how)
    missing = [u for u in range(1, 13) if u not in kept]
    damaged = open(os.path.join(run, "metrics.csv"), "rb").read()
    before = snapshot(run)
    code, _, err = cli(capsys, "train", "--resume", run, "--no-progress")
    assert code == 2
    one_line(err, "metrics.csv", f"of the checkpoint's 12 ({len(missing)} missing",
             "--repair-log", "move the file away")
    if how == "cut":
        one_line(err, "covers updates 1-5 of the checkpoint's 12 (7 missing: 6-12)")
    if how == "bytes":
        one_line(err, "not UTF-8", "missing: 3)")
    assert snapshot(run) == before  # nothing written
    with pytest.raises(jaxppo.UsageError, match="metrics.csv"):
        Experiment.from_checkpoint(run)
    if how != "cut":
        with pytest.raises(jaxppo.UsageError, match="metrics.csv") as e:
            read_metrics_csv(run)  # the readers too: one line, no UnicodeDecodeError
        assert "\n" not in str(e.value)

    code, _, err = cli(capsys, "train", "--resume", run, "--no-progress", "--repair-log")
    assert code == 0, err
    m = read_metrics_csv(run)
    np.testing.assert_array_equal(m["update"][0], kept + list(range(13, 25)))  # none made up
    gaps = [[u, u] for u in missing] if how == "bytes" else [[missing[0], 12]]
    assert json.load(open(os.path.join(run, "summary.json")))["metrics_missing_updates"] == gaps
    assert load_checkpoint(run).extra["log_gaps"] == gaps  # a later resume knows them
    assert open(os.path.join(run, "metrics.csv.damaged"), "rb").read() == damaged  # kept
    if how == "cut":  # killed before summary.json: the rebuilt one still names the gap
        os.remove(os.path.join(run, "summary.json"))
        assert cli(capsys, "train", "--resume", run, "--no-progress")[0] == 0
        assert json.load(open(os.path.join(run, "summary.json")))["metrics_missing_updates"] == gaps


def log_lines(run):
    return open(os.path.join(run, "metrics.csv"), "rb").read().split(b"\r\n")


def test_copied_and_shuffled_rows_are_not_damage(stopped_run, tmp_path, capsys):
    """Identical copies of rows (updates 8-12 twice) lose nothing and rows out of order are
    still every row: the resume collapses and sorts them, with no refusal and no gap."""
    run = copy_of(stopped_run, tmp_path)
    lines = log_lines(run)
    body = [line for line in lines[1:] if line]
    open(os.path.join(run, "metrics.csv"), "wb").write(
        b"\r\n".join([lines[0], *body[6::-1], *body[7:], *body[7:]]) + b"\r\n")
    code, _, err = cli(capsys, "train", "--resume", run, "--no-progress")
    assert code == 0, err
    rows = [line.split(b",") for line in log_lines(run)[1:] if line]
    assert [int(r[0]) for r in rows] == list(range(1, 25))  # each once, in order
    assert "metrics_missing_updates" not in json.load(open(os.path.join(run, "summary.json")))
    assert not glob.glob(os.path.join(run, "metrics.csv.damaged*"))


def test_differing_copies_and_an_extra_column_are_repaired_keeping_every_row(
        stopped_run, tmp_path, capsys):
    """Two different rows for one update and run are refused (which one is true?); the repair
    keeps the first and records nothing as missing. A column jaxppo does not write goes, with
    the file kept as it was."""
    run = copy_of(stopped_run, tmp_path)
    lines = log_lines(run)
    body = [line for line in lines[1:] if line]
    other = body[3].split(b",")
    other[3] = b"999.0"  # update 4's wall_s, edited
    lines = [lines[0] + b",mine", *(line + b",1" for line in body), b",".join(other) + b",1"]
    open(os.path.join(run, "metrics.csv"), "wb").write(b"\r\n".join(lines) + b"\r\n")
    damaged, before = open(os.path.join(run, "metrics.csv"), "rb").read(), snapshot(run)
    code, _, err = cli(capsys, "train", "--resume", run, "--no-progress")
    assert code == 2
    one_line(err, "two different rows for the same update and run (update, run: 4 0)",
             "--repair-log")
    assert "missing" not in err[0].split("--repair-log")[0]
    assert snapshot(run) == before
    code, _, err = cli(capsys, "train", "--resume", run, "--no-progress", "--repair-log")
    assert code == 0, err
    note = [line for line in err if line.startswith("note:")]
    assert len(note) == 1 and "kept the first" in note[0] and "mine" in note[0], err
    assert open(os.path.join(run, "metrics.csv.damaged"), "rb").read() == damaged
    rows = log_lines(run)
    assert rows[0].split(b",") == [k.encode() for k in CSV_HEADER]
    assert rows[4] == body[3]  # the first of the two
    assert [int(r.split(b",")[0]) for r in rows[1:] if r] == list(range(1, 25))
    assert "metrics_missing_updates" not in json.load(open(os.path.join(run, "summary.json")))


def write_log(folder, rows, header=None):
    """A metrics.csv of `rows` (update, run) with made-up numbers; returns its path."""
    header = header or CSV_HEADER
    path = os.path.join(str(folder), "metrics.csv")
    with open(path, "w") as f:
        f.write(",".join(header) + "\n")
        for u, r in rows:
            f.write(",".join([str(u), str(r), str(64 * u), "1.0",
                              *(["0.5"] * (len(header) - 4))]) + "\n")
    return path


def test_a_repair_keeps_every_good_row_of_a_sweep_and_records_the_run_that_lacks_one(tmp_path):
    """Two runs, updates 1-6: run 1's row for update 5 deleted, a row for a run 7 that does not
    exist added at update 2. Only that row goes; run 0's update 5 and both of update 2 stay,
    and the record names run 1 at update 5."""
    rows = [(u, r) for u in range(1, 7) for r in range(2) if (u, r) != (5, 1)] + [(2, 7)]
    path = write_log(tmp_path, rows)
    with pytest.raises(jaxppo.UsageError) as e:
        check_metrics_log(str(tmp_path), 6, 2)
    assert "(1 missing: 5; only some runs' rows: run 1 at 5)" in str(e.value)
    assert "covers updates 1-4, 6 of the checkpoint's 6" in str(e.value)
    gaps, drops, _ = check_metrics_log(str(tmp_path), 6, 2, repair=True)
    assert gaps == [(5, 5, 1)]
    assert any("1 row(s) for runs that do not exist" in d for d in drops), drops
    kept = [tuple(int(x) for x in line.split(",")[:2])
            for line in kept_rows(path, 6, 2).splitlines()[1:]]
    assert kept == [(u, r) for u in range(1, 7) for r in range(2) if (u, r) != (5, 1)]
    assert gaps_summary(gaps, 2) == {"metrics_missing_updates": [[5, 5]],
                                     "metrics_missing_by_run": {"1": [[5, 5]]}}
    write_log(tmp_path, kept)  # the repaired file: a later resume knows its gap
    assert check_metrics_log(str(tmp_path), 6, 2, gaps) == ([(5, 5, 1)], [], [])
    # an older checkpoint's record (whole updates) still reads as every run's rows
    assert gaps_summary([[3, 4]], 2)["metrics_missing_by_run"] == {"0": [[3, 4]], "1": [[3, 4]]}
    # a row of no run, or a column jaxppo does not write, alone is no refusal: dropped, noted
    write_log(tmp_path, [*kept, (5, 1), (0, 0)], header=[*CSV_HEADER, "mine"])
    gaps, drops, _ = check_metrics_log(str(tmp_path), 6, 2)
    assert gaps == [] and len(drops) == 2 and "mine" in drops[1], drops
    # identical copies (a NaN cell equal to a NaN cell) are no damage at all
    path = write_log(tmp_path, [(u, r) for u in range(1, 7) for r in range(2)] * 2)
    text = open(path).read().replace("0.5", "nan")
    open(path, "w").write(text)
    assert check_metrics_log(str(tmp_path), 6, 2) == ([], [], [])


def test_a_missing_metrics_log_starts_a_fresh_one_noting_the_gap(stopped_run, tmp_path, capsys):
    run = copy_of(stopped_run, tmp_path)
    os.remove(os.path.join(run, "metrics.csv"))
    exp = Experiment.from_checkpoint(run, progress=False)
    assert "is missing" in capsys.readouterr().err
    result = exp.run()
    assert result.summary["metrics_missing_updates"] == [[1, 12]]
    np.testing.assert_array_equal(read_metrics_csv(run)["update"][0], np.arange(13, 25))


@pytest.fixture(scope="module")
def finished_sweep(tmp_path_factory):
    """A two-setting sweep run to its end with --checkpoint-every 6; the updates it saved at."""
    from jaxppo.run.callbacks import Checkpointer

    logdir = str(tmp_path_factory.mktemp("sweep"))
    setup_compilation_cache()
    saves, original = [], Checkpointer.save

    def record(self, good):
        saves.append(good.update)
        original(self, good)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Checkpointer, "save", record)
        assert main(["sweep", "--config", CARTPOLE, *TINY, "--grid", "lr=1e-3,1e-4", "--logdir",
                     logdir, "--run-name", "s", "--no-progress", "--checkpoint-every", "6"]) == 0
    return os.path.join(logdir, "s"), saves


def test_a_sweep_checkpoints_every_n_updates(finished_sweep):
    _, saves = finished_sweep
    assert saves == [6, 12, 18, 24]


def test_a_finished_sweep_rebuilds_its_missing_table(finished_sweep, tmp_path, capsys):
    run = copy_of(finished_sweep[0], tmp_path)
    table = open(os.path.join(run, "sweep.csv")).read()
    summary = json.load(open(os.path.join(run, "summary.json")))
    for name in ("sweep.csv", "sweep.png", "summary.json", "curve.png"):
        os.remove(os.path.join(run, name))
    code, out, err = cli(capsys, "sweep", "--resume", run, "--no-progress")
    assert code == 0, err
    assert "sweep.csv" in out and "nothing was trained" in out and "rank" in out
    assert open(os.path.join(run, "sweep.csv")).read() == table  # identical
    rebuilt = json.load(open(os.path.join(run, "summary.json")))
    for k in ("ranked", "final_return", "episodes_per_run", "solved", "env_steps", "sps",
              "status"):
        assert rebuilt[k] == summary[k], k
    assert rebuilt["wall_s"] == pytest.approx(summary["wall_s"], abs=2.0)
    assert rebuilt["compile_s"] is None  # not known from a checkpoint: null, not 0
    assert all(os.path.isfile(os.path.join(run, n)) for n in ("sweep.png", "curve.png"))
    code, _, err = cli(capsys, "sweep", "--resume", run)  # nothing missing: refused as before
    assert code == 2
    one_line(err, "is finished")


def test_a_damaged_summary_or_sweep_table_is_rebuilt_and_kept_aside(finished_sweep, tmp_path,
                                                                    capsys):
    """An unreadable summary.json or sweep.csv is treated as a missing one: rebuilt from the
    checkpoint, the damaged file kept as `.damaged`, a note saying so."""
    run = copy_of(finished_sweep[0], tmp_path)
    table = open(os.path.join(run, "sweep.csv")).read()
    summary = json.load(open(os.path.join(run, "summary.json")))
    for name, garbage, argv in (("summary.json", '{"env_id": "Cart', ["train"]),
                                ("summary.json", '["not", "a", "summary"]', ["sweep"]),
                                ("summary.json", '{"env_id": "CartPole-v1"}', ["sweep"]),
                                ("sweep.csv", "rank,lr\n1,", ["sweep"])):
        path = os.path.join(run, name)
        open(path, "w").write(garbage)
        code, out, err = cli(capsys, *argv, "--resume", run, "--no-progress")
        assert code == 0, err
        assert f"rebuilt {name}" in out and "nothing was trained" in out, out
        one_line([e for e in err if e.startswith("note:")], f"'{path}' was damaged",
                 f"kept as '{path}.damaged", "rebuilt")
        assert open(path + ".damaged").read() == garbage
        os.remove(path + ".damaged")
    assert open(os.path.join(run, "sweep.csv")).read() == table
    assert json.load(open(os.path.join(run, "summary.json")))["ranked"] == summary["ranked"]
    code, _, err = cli(capsys, "sweep", "--resume", run)  # whole again: refused as before
    assert code == 2
    one_line(err, "is finished")
