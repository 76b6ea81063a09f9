"""report keys an env by what it is, its id plus the modules the run imported first, not by
its id alone: a module's own `CartPole-v1` and the real one are never pooled into one IQM
(issue #54, item 7)."""

import os
import shutil

import pytest
import yaml
from conftest import tiny_stopped_run
from faults_setup import cli, one_line

pytestmark = pytest.mark.usefixtures("compile_cache")


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    return tiny_stopped_run(tmp_path_factory.mktemp("r"), 99)


def test_a_module_shadowed_env_is_not_pooled_with_the_real_one(finished, tmp_path, capsys):
    """Reproduction: a run whose --import module re-registered the id (returns 10,000) and a
    run of the real env (returns 23) were pooled into one 'all runs' IQM."""
    real = shutil.copytree(finished, str(tmp_path / "real"))
    shadow = shutil.copytree(finished, str(tmp_path / "shadow"))
    path = os.path.join(shadow, "config.yaml")
    cfg = yaml.safe_load(open(path))
    cfg["env_imports"] = ["my_cartpole"]
    open(path, "w").write(yaml.safe_dump(cfg, sort_keys=False))
    code, _, err = cli(capsys, "report", real, shadow, "--out", str(tmp_path / "rep"))
    assert code == 2
    one_line(err, "2 envs", "CartPole-v1 (with --import my_cartpole)", "--normalize")
    twin = shutil.copytree(finished, str(tmp_path / "twin"))
    code, out, err = cli(capsys, "report", real, twin, "--out", str(tmp_path / "rep2"))
    assert code == 0, err  # the same env twice still pools
    assert "all runs" in out
