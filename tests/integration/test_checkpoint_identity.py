"""A checkpoint belongs to its run: one copied from another run directory (even of the same
config) is refused, and no format version skips the checksum of what it restores (issue #54,
item 5). A run directory from before run ids keeps resuming (tests/integration/test_legacy.py)."""

import hashlib
import os
import shutil

import msgpack
import pytest
from conftest import stop_run_at
from faults_setup import cli, one_line

from jaxppo import PPOConfig, load_checkpoint
from jaxppo._xla import setup_compilation_cache
from jaxppo.rundir.checkpoint import RUN_ID_FILE, run_id_of

pytestmark = pytest.mark.usefixtures("compile_cache")
CONFIG = PPOConfig(total_timesteps=1536, num_envs=4, num_steps=16, num_minibatches=2,
                   update_epochs=2, hidden_sizes=(16, 16))


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """Two runs of one config, seeds 0 and 1, each stopped at update 12."""
    setup_compilation_cache()
    logdir = tmp_path_factory.mktemp("two")
    a = stop_run_at(CONFIG, logdir, "a", 12, chunk_updates=6)
    b = stop_run_at(CONFIG, logdir, "b", 6, chunk_updates=6)
    return a, b


def ckpt(run):
    return os.path.join(run, "checkpoint", "checkpoint.msgpack")


def test_each_run_has_an_id_in_its_directory_and_checkpoint(two_runs):
    a, b = two_runs
    assert run_id_of(a) and run_id_of(b) and run_id_of(a) != run_id_of(b)
    header = msgpack.unpackb(open(ckpt(a), "rb").read(), raw=False)["header"]
    assert header["run_id"] == run_id_of(a)


def test_a_checkpoint_copied_from_another_run_is_refused(two_runs, tmp_path, capsys):
    """Reproduction: run a's checkpoint copied into run b resumed silently, mixing two runs'
    seeds and logs in one metrics.csv."""
    a, b = two_runs
    b2 = shutil.copytree(b, str(tmp_path / "b"))
    shutil.copyfile(ckpt(a), ckpt(b2))
    for argv in (["train", "--resume", b2, "--no-progress"], ["eval", b2]):
        code, _, err = cli(capsys, *argv)
        assert code == 2
        one_line(err, "belongs to another run", f"run id {run_id_of(a)}", run_id_of(b2))


def test_a_copy_of_a_whole_run_directory_still_resumes(two_runs, tmp_path):
    copy = shutil.copytree(two_runs[0], str(tmp_path / "a"))
    assert load_checkpoint(copy).update == 12


def test_a_run_from_before_run_ids_resumes_and_gets_one(two_runs, tmp_path, capsys):
    old = shutil.copytree(two_runs[1], str(tmp_path / "old"))
    os.unlink(os.path.join(old, RUN_ID_FILE))
    outer = msgpack.unpackb(open(ckpt(old), "rb").read(), raw=False)
    del outer["header"]["run_id"]  # as written before: checksummed without it
    fields = {k: v for k, v in outer["header"].items() if k != "sha256"}
    outer["header"]["sha256"] = hashlib.sha256(
        msgpack.packb(fields, use_bin_type=True) + outer["payload"]).hexdigest()
    open(ckpt(old), "wb").write(msgpack.packb(outer, use_bin_type=True))
    code, _, err = cli(capsys, "train", "--resume", old, "--no-progress")
    assert code == 0, err
    assert run_id_of(old) and load_checkpoint(old).update == 24


def test_relabelling_as_version_1_does_not_skip_the_checksum(two_runs, tmp_path, capsys):
    """Reproduction: version 1 checksummed the payload alone; a checkpoint relabelled version 1
    with an edited update (and the payload's checksum) was replayed from that update."""
    run = shutil.copytree(two_runs[0], str(tmp_path / "v1"))
    outer = msgpack.unpackb(open(ckpt(run), "rb").read(), raw=False)
    outer["header"].update(version=1, update=3)
    outer["header"]["sha256"] = hashlib.sha256(outer["payload"]).hexdigest()
    open(ckpt(run), "wb").write(msgpack.packb(outer, use_bin_type=True))
    code, _, err = cli(capsys, "train", "--resume", run, "--no-progress")
    assert code == 2
    one_line(err, "format version 1", "says update 3", "saved at update 12", "edited")
