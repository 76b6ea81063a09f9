"""What the fault tests share (tests/integration/test_faults_*.py): the tiny and long CartPole
settings, `jaxppo` in this process (`cli`) or a child (`child`), the one-line check, and a copy
of a run to damage (`copy_of`; the run: conftest's `stopped_run`)."""

import os
import subprocess
import sys

import msgpack
from conftest import ROOT

from jaxppo.cli import main

CARTPOLE = os.path.join(ROOT, "configs", "cartpole.yaml")
TINY = ["--set", "total_timesteps=1536", "--set", "num_envs=4", "--set", "num_steps=16",
        "--set", "num_minibatches=2", "--set", "update_epochs=2", "--set", "hidden_sizes=[16, 16]"]
# 2400 updates of 64 steps: long enough (several seconds) to be killed in the middle.
LONG = ["--set", "total_timesteps=153600", *TINY[2:]]
LONG_UPDATES = 2400


def cli(capsys, *argv):
    """(exit status, stdout, stderr lines) of `jaxppo *argv` in this process."""
    capsys.readouterr()
    try:
        code = main(list(argv))
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err.strip().splitlines()


def one_line(err, *words):
    assert len(err) == 1 and "Traceback" not in err[0], err
    for w in words:
        assert w in err[0], (w, err[0])


def child(*argv, **kw):
    return subprocess.Popen([sys.executable, "-m", "jaxppo.cli", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"}, **kw)


def copy_of(run, tmp_path):
    import shutil

    return shutil.copytree(run, str(tmp_path / "copy"))


def edit_header(run, **changes):
    path = os.path.join(run, "checkpoint", "checkpoint.msgpack")
    outer = msgpack.unpackb(open(path, "rb").read(), raw=False)
    for k, v in changes.items():
        if k == "header":
            outer["header"] = v
        elif isinstance(v, dict):
            outer["header"][k].update(v)
        else:
            outer["header"][k] = v
    open(path, "wb").write(msgpack.packb(outer, use_bin_type=True))
