"""Tampered run directories and odd inputs (issue #52 item 3): each file of a stopped run's
layout cut, emptied, swapped with another run's, or its types or version changed (a checkpoint
header edited and signed again, as a user with the code could), an integer too large for its
key, a config path that is a FIFO: `train --resume` (or `train`) answers one line naming the
file and the fix, exit 2, never a traceback or a hang. One tiny run is built per module and
copied per case."""

import hashlib
import os
import shutil

import msgpack
import pytest
import yaml
from conftest import run_cli, stop_run_at, tiny_stopped_run

from jaxppo import PPOConfig

pytestmark = pytest.mark.usefixtures("compile_cache")
CKPT = os.path.join("checkpoint", "checkpoint.msgpack")


@pytest.fixture(scope="module")
def stopped(tmp_path_factory):
    """Two tiny runs stopped at update 6 (of 24): the one tampered with, and another of
    another lr."""
    logdir = tmp_path_factory.mktemp("tampered")
    other = PPOConfig(total_timesteps=1536, num_envs=4, num_steps=16, num_minibatches=2,
                      update_epochs=2, hidden_sizes=(16, 16), lr=1e-3)
    return (tiny_stopped_run(logdir / "a", 6, total_timesteps=1536),
            stop_run_at(other, logdir / "b", "r", 6, chunk_updates=6))


def resigned(path: str, edit) -> None:
    """Edit the checkpoint's header (`edit(header)`) and sign it again, as jaxppo signs."""
    with open(path, "rb") as f:
        outer = msgpack.unpackb(f.read(), raw=False)
    header = outer["header"]
    edit(header)
    fields = {k: v for k, v in header.items() if k != "sha256"}
    header["sha256"] = hashlib.sha256(msgpack.packb(fields, use_bin_type=True)
                                      + outer["payload"]).hexdigest()
    with open(path, "wb") as f:
        f.write(msgpack.packb(outer, use_bin_type=True))


def _set(*keys_value):
    *keys, value = keys_value

    def edit(header):
        d = header
        for k in keys[:-1]:
            d = d[k]
        d[keys[-1]] = value
    return edit


HEADER_EDITS = {
    "seed-a-string": _set("extra", "seed", "abc"),
    "seed-a-float": _set("extra", "seed", 1.5),
    "seed-huge": _set("extra", "seed", 2**64 - 1),  # msgpack's largest
    "stats-a-list": _set("extra", "stats", [1, 2]),
    "stats-update-a-string": _set("extra", "stats", "update", "x"),
    "episodes-strings": _set("extra", "stats", "episodes", ["a"]),
    "extra-env-a-string": _set("extra", "env", "abc"),
    "config-lr-a-string": _set("config", "lr", "abc"),
    "config-gamma-a-list": _set("config", "gamma", [1]),
    "config-hidden-a-string": _set("config", "hidden_sizes", "abc"),
    "config-unknown-key": _set("config", "lerning_rate", 1.0),
    "config-total-huge": _set("config", "total_timesteps", 2**64 - 1),
    "run-id-an-int": _set("run_id", 7),
    "version-3": _set("version", 3),
    "num-runs-2": _set("num_runs", 2),
    "update-past-end": _set("update", 10**6),
}


def _resume(capsys, run_dir):
    return run_cli(capsys, ["train", "--resume", run_dir, "--no-progress"])


def _copy(stopped, tmp_path) -> str:
    run = str(tmp_path / "run")
    shutil.copytree(stopped[0], run)
    return run


@pytest.mark.parametrize("case", list(HEADER_EDITS))
def test_a_checkpoint_header_edited_and_signed_again_is_one_line(stopped, tmp_path, capsys, case):
    run = _copy(stopped, tmp_path)
    resigned(os.path.join(run, CKPT), HEADER_EDITS[case])
    code, err = _resume(capsys, run)
    assert code == 2, err
    assert len(err) == 1 and "Traceback" not in err[0], err
    assert "checkpoint" in err[0] and run in err[0], err


def _cut(path):
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[:len(data) // 2])


def _empty(path):
    open(path, "wb").close()


def _swap(path, other):
    shutil.copyfile(other, path)


def _yaml_types(path):
    with open(path) as f:
        d = yaml.safe_load(f)
    d["num_envs"] = "four"
    with open(path, "w") as f:
        yaml.safe_dump(d, f)


LAYOUT = ["config.yaml", "run_id", CKPT, "metrics.csv"]


def _fifo(path):
    os.remove(path)
    os.mkfifo(path)  # opened for reading, it would wait for a writer for ever


@pytest.mark.parametrize("how", ["cut", "empty", "swap", "types", "fifo"])
@pytest.mark.parametrize("name", LAYOUT)
def test_each_file_of_a_run_damaged_is_one_line_naming_it(stopped, tmp_path, capsys, name, how):
    run = _copy(stopped, tmp_path)
    path = os.path.join(run, name)
    if how == "types" and name != "config.yaml":
        pytest.skip("only config.yaml has types a user edits (the checkpoint's: above)")
    {"cut": _cut, "empty": _empty, "types": _yaml_types, "fifo": _fifo,
     "swap": lambda p: _swap(p, os.path.join(stopped[1], name))}[how](path)
    code, err = _resume(capsys, run)
    if name == "metrics.csv" and how == "swap":  # another run's rows, at the same updates
        assert code in (0, 2), err  # its rows are as good as this run's: either is honest
        return
    assert code == 2, err
    assert len(err) == 1 and "Traceback" not in err[0], err
    assert os.path.basename(name) in err[0], err


HUGE = "9" * 150


@pytest.mark.parametrize("key", ["lr", "num_envs", "max_episode_steps", "rnn_size",
                                 "hidden_sizes", "total_timesteps"])
def test_an_integer_too_large_for_its_key_is_one_line(tmp_path, capsys, key):
    value = f"[{HUGE}]" if key == "hidden_sizes" else HUGE
    for argv in (["--set", f"{key}={value}"], None):
        if argv is None:  # the same in the YAML
            (tmp_path / "c.yaml").write_text(f"env_id: CartPole-v1\n{key}: {value}\n")
        config = str(tmp_path / "c.yaml") if argv is None else "configs/cartpole.yaml"
        code, err = run_cli(capsys, ["train", "--config", config, *(argv or []),
                                     "--logdir", str(tmp_path / "runs")])
        assert code == 2, err
        assert len(err) == 1 and f"config key '{key}'" in err[0], err
        assert len(err[0]) < 400, err  # not the 150 digits, several times
    assert not os.path.exists(tmp_path / "runs")


def test_a_config_path_that_is_a_fifo_is_refused_not_waited_on(tmp_path, capsys):
    fifo = str(tmp_path / "c.yaml")
    os.mkfifo(fifo)
    code, err = run_cli(capsys, ["train", "--config", fifo])
    assert code == 2
    assert err == [f"jaxppo train: error: cannot read config file '{fifo}': it is a FIFO (named "
                   "pipe), not a regular file; save the config as a YAML file and pass that"]
