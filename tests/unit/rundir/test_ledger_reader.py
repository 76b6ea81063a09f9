"""Each agent's ledger in the checkpoint's record (written by the run loop, derived on read for
a record from before it) and `RunDir`, the one reader of a run directory, on hand-made run
directories (no training)."""

import csv
import json
import os
import types

import numpy as np
from conftest import make_run

from jaxppo.config import PPOConfig
from jaxppo.run.callbacks import Checkpointer
from jaxppo.run.loop import RunLoop
from jaxppo.rundir import names
from jaxppo.rundir.checkpoint import save_checkpoint
from jaxppo.rundir.ledger import Ledger, agent_ledger, make_ledger, trained_updates
from jaxppo.rundir.reader import AgentStatus, RunDir
from jaxppo.rundir.record import RunRecord

HALVING = {"strategy": "halving", "trials": 2, "eta": 2, "rungs": [4, 8], "kept": [[0, 1], [1]]}


def test_a_ledger_from_what_a_live_run_knows_and_back():
    led = make_ledger(3, 8, run_updates=np.array([4, 8, 8]), diverged={2: 6},
                      renewed=np.array([-1, 5, -1]))
    assert led == Ledger((4, 8, 8), (None, None, 6), (None, 5, None))
    assert led.diverged_runs == [2]
    assert Ledger.from_dict(led.to_dict(), 3) == led
    # a ledger of another run count, or not of whole numbers, is no ledger: derived instead
    assert Ledger.from_dict(led.to_dict(), 2) is None
    assert Ledger.from_dict({**led.to_dict(), "updates": [4.5, 8, 8]}, 3) is None
    assert make_ledger(2, 5) == Ledger((5, 5), (None, None), (None, None))


def test_a_halving_record_from_before_the_ledger_says_how_far_each_agent_went():
    record = RunRecord(settings=[{"lr": 1.0}, {"lr": 2.0}], search=HALVING)
    # setting 0 stopped at its rung (update 4); setting 1 went on to 8; two seeds each
    assert trained_updates(record, 4, 8) == [4, 4, 8, 8]
    assert trained_updates(RunRecord(), 3, 7) == [7, 7, 7]
    ledger = {"updates": [1, 2, 3, 4], "diverged": [None] * 4, "renewed": [None] * 4}
    assert trained_updates(RunRecord(ledger=ledger), 4, 8) == [1, 2, 3, 4]


def _log(path, rows):
    with open(os.path.join(path, names.METRICS), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["update", "run", "env_steps", "wall_s", "nonfinite", "nonfinite_source"])
        w.writerows([u, r, 64 * u, 0.1, bad, 1 if bad else 0] for u, r, bad in rows)


def test_an_old_pbt_record_has_its_ledger_derived_from_its_log_and_its_exploits(tmp_path):
    # run 0 diverged at 3; run 1 at 2, was renewed at 5 and diverged again at 7; run 2 only
    # after the checkpoint (update 9): not at the checkpoint's update 8
    rows = [(u, r, int((u, r) in {(3, 0), (4, 0), (2, 1), (7, 1), (9, 2)}))
            for u in range(1, 10) for r in range(3)]
    _log(tmp_path, rows)
    record = RunRecord(settings=[{"lr": 1.0}] * 3, search={"strategy": "pbt"},
                       controller={"last_exploit": [-1, 5, -1]})
    led = agent_ledger(record, 3, 8, str(tmp_path))
    assert led == Ledger((8, 8, 8), (3, 7, None), (None, 5, None))
    # renewed after its divergence and healthy since: no divergence stands
    record = RunRecord(settings=[{"lr": 1.0}] * 3, search={"strategy": "pbt"},
                       controller={"last_exploit": [-1, 7, -1]})
    assert agent_ledger(record, 3, 8, str(tmp_path)).diverged == (3, None, None)
    # a record that holds a ledger is read as it is, whatever the log says
    kept = make_ledger(3, 8).to_dict()
    assert agent_ledger(RunRecord(ledger=kept), 3, 8, str(tmp_path)).diverged_runs == []


def test_the_run_loop_gives_every_checkpoint_the_ledger_of_its_update():
    exp = types.SimpleNamespace(run_updates=lambda u: np.array([min(u, 4), u]),
                                renewed_since=lambda: np.array([-1, 3]))
    info = types.SimpleNamespace(num_runs=2, start_update=0)
    ckpt = Checkpointer()
    loop = RunLoop(exp, info, None, [ckpt], 0.0)
    loop.live[0] = types.SimpleNamespace(update=6)
    assert ckpt.ledger is not None
    assert ckpt.ledger(8) == {"version": 1, "updates": [4, 8], "diverged": [6, None],
                              "renewed": [None, 3]}


def test_a_run_directory_without_a_checkpoint_reads_its_files(tmp_path):
    run = make_run(tmp_path / "run", final=(100.0, None))
    rd = RunDir(run)
    assert rd.config["env_id"] == "CartPole-v1" and rd.summary["num_runs"] == 2
    assert rd.header is None and rd.record is None and rd.status() == []
    scores = rd.scores()
    assert list(scores) == [names.SUMMARY]
    assert scores[names.SUMMARY][0] == 100.0 and np.isnan(scores[names.SUMMARY][1])
    assert rd.curves()["episodic_return"].shape == (2, 12)
    with open(os.path.join(run, names.EVAL), "w") as f:
        json.dump({"returns": [[1.0, 3.0], [5.0, 7.0]]}, f)
    assert RunDir(run).scores()[names.EVAL].tolist() == [2.0, 6.0]


def test_a_run_directory_with_a_checkpoint_reads_each_agents_status(tmp_path):
    run = make_run(tmp_path / "run", final=(1.0, 2.0, 3.0, 4.0))
    record = RunRecord(settings=[{"lr": 1.0}, {"lr": 2.0}], search=HALVING)
    save_checkpoint(run, {"w": np.zeros((4, 2), np.float32)}, PPOConfig(), 8, 4,
                    extra=record.to_extra())
    rd = RunDir(os.path.join(run, names.CHECKPOINT_DIR))  # its checkpoint folder: the same run
    assert rd.path == run and rd.update == 8 and rd.num_runs == 4 and rd.ragged
    # no ledger in the record (as before it was kept): derived from the halving record
    assert rd.status()[0] == AgentStatus(0, 4, None, None)
    assert [s.updates for s in rd.status()] == [4, 4, 8, 8]
    led = make_ledger(4, 8, [4, 4, 8, 8], {3: 7}).to_dict()
    save_checkpoint(run, {"w": np.zeros((4, 2), np.float32)}, PPOConfig(), 8, 4,
                    extra=RunRecord(ledger=led).to_extra())
    assert RunDir(run).status()[3] == AgentStatus(3, 8, 7, None)


def test_the_old_import_paths_the_docs_showed_still_work():
    from jaxppo.run.logs.metrics_csv import read_metrics_csv
    from jaxppo.run.record import RunRecord as Old
    from jaxppo.rundir import metrics_csv

    assert Old is RunRecord and read_metrics_csv is metrics_csv.read_metrics_csv
