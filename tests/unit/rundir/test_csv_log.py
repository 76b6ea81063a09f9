"""The one audit of an append-only CSV held against the checkpoint (`rundir/csv_log.py`): its
scan on hand-made rows for each file's description, and PBT's two logs on hand-made files."""

import pytest

from jaxppo.errors import UsageError
from jaxppo.rundir import names
from jaxppo.rundir.csv_log import HPARAMS_LOG, METRICS_LOG, PBT_LOG, audit_pbt_logs, scan

HEADERS = {names.PBT: ["update", "member", "parent", "member_return", "parent_return"],
           names.HPARAMS: ["update", "member", "lr"]}


def test_a_metrics_row_is_any_update_from_1_of_an_existing_run():
    rows = [{"update": "1", "run": "0", "x": "1"}, {"update": "1", "run": "0", "x": "1.0"},
            {"update": "2", "run": "0", "x": "2"}, {"update": "2", "run": "0", "x": "3"},
            {"update": "0", "run": "0", "x": ""}, {"update": "1", "run": "2", "x": ""},
            {"update": "9", "run": "0", "x": ""}]
    found = scan(METRICS_LOG, rows, last=3, owners=2)
    # an identical copy (1 is 1.0) collapses; the second of two that differ is a conflict;
    # update 0 and run 2 were written by no run; update 9 is past the checkpoint
    assert sorted(found.kept) == [(1, 0), (2, 0)] and found.kept[(2, 0)]["x"] == "2"
    assert found.conflicts == [(2, 0)] and found.alien == 2 and found.extra == 0


def test_hparams_rows_are_at_update_0_and_each_pbt_update_only():
    rows = [["0", "0", "1"], ["0", "1", "1"], ["5", "0", "1"], ["3", "0", "1"], ["5", "2", "1"],
            ["10", "0", "1"]]
    found = scan(HPARAMS_LOG, rows, last=5, owners=2, updates=[5])
    assert sorted(found.kept) == [(0, 0), (0, 1), (5, 0)] and found.alien == 2


def test_pbt_rows_are_counted_per_member_and_name_a_parent_of_the_population():
    rows = [["5", "0", "1", "", ""], ["10", "0", "1", "", ""], ["10", "1", "7", "", ""],
            ["0", "1", "0", "", ""]]
    found = scan(PBT_LOG, rows, last=10, owners=2, updates=[5, 10], limit={0: 1, 1: 1})
    # member 0 has one exploit in the checkpoint: its second row is one too many; member 1's
    # parent 7 is no member; no exploit happens at update 0
    assert list(found.kept) == [(5, 0)] and found.extra == 1 and found.alien == 2


def _write(folder, name, rows):
    text = "\n".join(",".join(map(str, r)) for r in [HEADERS[name], *rows]) + "\n"
    (folder / name).write_text(text)


def test_a_pbt_log_missing_a_row_is_refused_then_repaired_with_the_row_recorded(tmp_path):
    _write(tmp_path, names.PBT, [[5, 0, 1, 2.0, 3.0]])
    _write(tmp_path, names.HPARAMS, [[0, 0, 0.1], [0, 1, 0.1], [5, 0, 0.2]])  # (5, 1) lost
    saved = {"exploits": [1, 0]}
    with pytest.raises(UsageError) as e:
        audit_pbt_logs(str(tmp_path), 5, saved, 2, [5], HEADERS, repair=False)
    assert "hparams.csv' is damaged: it lacks 1 member row(s) (update(s) 5)" in str(e.value)
    assert "--repair-log" in str(e.value) and "\n" not in str(e.value)
    audit = audit_pbt_logs(str(tmp_path), 5, saved, 2, [5], HEADERS, repair=True)
    assert audit.missing == {names.HPARAMS: {(5, 1)}}
    assert audit.rows[names.HPARAMS] == [["0", "0", "0.1"], ["0", "1", "0.1"], ["5", "0", "0.2"]]
    assert audit.rows[names.PBT] == [["5", "0", "1", "2.0", "3.0"]]
    assert [c for c, _ in audit.copies] == [str(tmp_path / names.HPARAMS)]
    # the record, once kept, makes the same file whole to a later resume
    later = audit_pbt_logs(str(tmp_path), 5, {**saved, "log_missing": {names.HPARAMS: [[5, 1]]}},
                           2, [5], HEADERS, repair=False)
    assert later.copies == [] and later.notes == []


def test_a_missing_pbt_log_starts_afresh_with_its_exploits_recorded(tmp_path):
    _write(tmp_path, names.HPARAMS, [[0, 0, 0.1], [0, 1, 0.1], [5, 0, 0.2], [5, 1, 0.2]])
    audit = audit_pbt_logs(str(tmp_path), 5, {"exploits": [1, 1]}, 2, [5], HEADERS,
                           repair=False)
    assert audit.missing == {names.PBT: {0: 1, 1: 1}}
    assert len(audit.notes) == 1 and "records the 2 exploit row(s) it lacks" in audit.notes[0]
