"""`jaxppo sweep --resume` of a static sweep with one file of its layout damaged (issue #53):
each file is checked as train's resume checks a run's. Damage is one line naming the file
(exit 2), or, for a result that the sweep's own records rebuild (a group's summary.json, the
sweep's table), a note naming it, the damaged copy kept aside. Before: a plan edited out of
its form was a traceback; a finished group's unreadable config.yaml or corrupt checkpoint
went unnoticed; a finished group's summary.json that the table cannot use refused the whole
resume ("finished; nothing to resume"), and so did a finished sweep's damaged table."""

import json
import os
import shutil

import pytest
from conftest import ROOT, run_cli

from jaxppo.config import load_config, parse_overrides
from jaxppo.rundir.plan import FILE as PLAN
from jaxppo.search.sweep import resume_sweep, sweep

pytestmark = pytest.mark.usefixtures("compile_cache")
CARTPOLE = os.path.join(ROOT, "configs", "cartpole.yaml")
# 8 updates of 4 envs x 16 steps; two static settings of two settings each
SETS = ["total_timesteps=512", "num_envs=4", "num_steps=16", "hidden_sizes=[16,16]"]
GRID = {"num_minibatches": [1, 2], "lr": [1e-3, 3e-4]}
DONE, STOPPED = "000_num_minibatches=1", "001_num_minibatches=2"
OPTS = dict(progress=False, tensorboard=False, checkpoint_every=1)


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    """A static sweep stopped at update 3 of its second group (the first finished), and the
    same sweep resumed to its end."""
    tmp = tmp_path_factory.mktemp("static_resume")
    stop = lambda e: not (e.info.config.num_minibatches == 2 and e.update >= 3)  # noqa: E731
    sweep(load_config(CARTPOLE, parse_overrides(SETS)), GRID, logdir=str(tmp), run_name="s",
          callbacks=[stop], **OPTS)
    stopped = os.path.join(str(tmp), "s")
    finished = os.path.join(str(tmp), "f")
    shutil.copytree(stopped, finished)
    resume_sweep(finished, **OPTS)
    return stopped, finished


def edit_json(path, change):
    data = json.load(open(path))
    change(data)
    open(path, "w").write(json.dumps(data))


def cut(path, keep=0.5):
    data = open(path, "rb").read()
    open(path, "wb").write(data[:int(len(data) * keep)])


def flip(path):
    data = bytearray(open(path, "rb").read())
    data[-100] ^= 0xFF
    open(path, "wb").write(bytes(data))


def plan_without_checksum(change):
    def edit(plan):
        plan.pop("sha256")
        change(plan)
    return edit


CKPT = os.path.join("checkpoint", "checkpoint.msgpack")
# (file, damage, words of the one line) -- refused, exit 2, nothing written
REFUSED = [
    (PLAN, lambda p: edit_json(p, lambda d: d.update(settings="x")),
     ["static_sweep.json' was edited since the sweep started (its checksum fails)"]),
    (PLAN, lambda p: edit_json(p, lambda d: d.update(groups=[1])),
     ["static_sweep.json' was edited since the sweep started (its checksum fails)"]),
    (PLAN, lambda p: edit_json(p, plan_without_checksum(lambda d: d["settings"].append(7))),
     ["static_sweep.json' is not a static sweep's plan (AttributeError", "cannot be resumed"]),
    (PLAN, lambda p: edit_json(p, plan_without_checksum(lambda d: d.update(groups={"a": 1}))),
     ["static_sweep.json' is not a static sweep's plan (TypeError"]),
    (PLAN, lambda p: open(p, "wb").write(b"\x00\xffnot json"),
     ["static_sweep.json' is not a static sweep's plan"]),
    (os.path.join(DONE, "config.yaml"), lambda p: open(p, "w").write("- not\n- a config\n"),
     [f"{DONE}/config.yaml' is not the config this run was started with"]),
    (os.path.join(DONE, CKPT), cut,
     [f"{DONE}/{CKPT}' is corrupt or truncated", f"static setting {DONE} had finished",
      "move", "aside"]),
    (os.path.join(STOPPED, "config.yaml"),
     lambda p: open(p, "a").write("gamma: 0.5\n"),
     [f"{STOPPED}/config.yaml' was edited since the run started (gamma)"]),
    (os.path.join(STOPPED, "metrics.csv"), cut, [f"{STOPPED}/metrics.csv' covers updates"]),
    (os.path.join(STOPPED, CKPT), flip, [f"{STOPPED}/{CKPT}' fails its checksum"]),
]


def copy_of(run, tmp_path):
    dst = str(tmp_path / "copy")
    shutil.copytree(run, dst)
    for name in ("sweep.png",):  # nothing a resume would need
        if os.path.exists(os.path.join(dst, name)):
            os.remove(os.path.join(dst, name))
    return dst


def tree(run):
    return sorted(os.path.relpath(os.path.join(d, f), run)
                  for d, _, files in os.walk(run) for f in files)


@pytest.mark.parametrize("name,damage,words", REFUSED,
                         ids=["plan-settings", "plan-groups", "old-plan-settings",
                              "old-plan-groups", "plan-garbage", "finished-config",
                              "finished-checkpoint", "stopped-config", "stopped-metrics",
                              "stopped-checkpoint"])
def test_a_damaged_file_is_one_line_naming_it(sweeps, tmp_path, capsys, name, damage, words):
    run = copy_of(sweeps[0], tmp_path)
    damage(os.path.join(run, name))
    before = tree(run)
    code, err = run_cli(capsys, ["sweep", "--resume", run, "--no-progress"])
    assert code == 2, err
    assert len(err) == 1 and "Traceback" not in err[0], err
    for w in words:
        assert w in err[0], (w, err[0])
    assert tree(run) == before  # refused before anything ran or was written


@pytest.mark.parametrize("status", ["stopped", "zz"])
def test_a_finished_group_s_unusable_summary_is_rebuilt_and_the_sweep_goes_on(sweeps, tmp_path,
                                                                             capsys, status):
    """Its status (or returns) unusable for the table: the group counted as not finished, and
    its resume refused the sweep as finished; now the summary is rebuilt from its checkpoint."""
    run = copy_of(sweeps[0], tmp_path)
    path = os.path.join(run, DONE, "summary.json")
    whole = json.load(open(path))
    edit_json(path, lambda d: d.update(status=status))
    code, err = run_cli(capsys, ["sweep", "--resume", run, "--no-progress"])
    assert code == 0, err
    notes = [e for e in err if "summary.json' was damaged" in e]
    assert len(notes) == 1 and f"'{path}' was damaged (it says the run did not finish)" in \
        notes[0] and "rebuilt from the checkpoint" in notes[0], err
    rebuilt = json.load(open(path))
    assert rebuilt["status"] == "finished" and rebuilt["final_return"] == whole["final_return"]
    assert json.load(open(path + ".damaged"))["status"] == status
    assert json.load(open(os.path.join(run, "summary.json")))["status"] == "finished"


@pytest.mark.parametrize("name,damage,why", [
    ("summary.json", lambda p: edit_json(p, lambda d: d.update(ranked=None)),
     "it does not rank its 4 settings"),
    ("summary.json", lambda p: edit_json(p, lambda d: d.update(status="running")),
     "it says the sweep did not finish"),
    ("sweep.csv", lambda p: cut(p, 0.6), "it does not hold one whole row for each of the 4 settings"),
], ids=["summary-ranked", "summary-status", "sweep-csv"])
def test_a_finished_sweep_s_damaged_table_is_rebuilt_from_its_groups(sweeps, tmp_path, capsys,
                                                                    name, damage, why):
    """Refused as finished ("nothing to resume") with the damaged file left as it was."""
    run = copy_of(sweeps[1], tmp_path)
    path = os.path.join(run, name)
    whole = open(os.path.join(sweeps[1], name)).read()
    damage(path)
    code, err = run_cli(capsys, ["sweep", "--resume", run, "--no-progress"])
    assert code == 0, err
    assert [e for e in err if "was damaged" in e] == [
        f"note: '{path}' was damaged ({why}); it is kept as '{path}.damaged' and rebuilt "
        "from the groups' results"], err
    if name == "sweep.csv":
        assert open(path).read() == whole
    else:
        assert json.load(open(path))["ranked"] == json.loads(whole)["ranked"]
    code, err = run_cli(capsys, ["sweep", "--resume", run])  # whole again: finished
    assert code == 2 and "is finished" in err[0], err
