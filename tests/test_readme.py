"""Every command the README shows runs (at tiny budgets), so an example can never again be
wrong: each `jaxppo ...` line of its bash blocks, `tensorboard`, and each Python block."""

import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest
from conftest import stop_run_at

from jaxppo import load_config
from jaxppo.cli import build_parser, main

ROOT = os.path.dirname(os.path.dirname(__file__))
README = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
# Appended to every train/sweep/compare line: a budget of a few updates (later --set wins).
TINY = {"train": ["--set", "total_timesteps=4096", "--no-progress"],
        "sweep": ["--set", "total_timesteps=2048", "--no-progress", "--no-tensorboard"],
        "compare": ["--steps", "2048", "--repeats", "1", "--seeds", "2"]}
# Lines that need a cluster: checked by the parser only (the multi-process path itself runs in
# tests/test_sharding.py over loopback).
CLUSTER = ("--coordinator-address", "/shared/runs")
# Lines another test already runs through the same `main` with the same config and flags, at
# a budget of its own: here they are parsed and their config loaded (a renamed file or flag
# still fails), and the named test must exist.
COVERED = {"compare --config configs/atari_breakout.yaml": (
               "test_compare.py", "def test_jaxppo_atari_compare_end_to_end"),
           "compare --config configs/cartpole.yaml --set env_id=gymnasium/": (
               "test_compare.py", "def test_jaxppo_gymnasium_compare_end_to_end"),
           "jaxppo compare --config configs/cartpole.yaml": ("test_compare.py",
                                                             "def test_compare_runs_end_to_end"),
           "jaxppo compare --config configs/minatar_breakout_cnn.yaml": (
               "test_compare.py", "def test_sb3_minatar_side_runs_in_subprocesses"),
           "configs/brax_inverted_double_pendulum.yaml": ("test_brax.py", "def idp_run"),
           "--gif idp.gif --html idp.html": ("test_brax.py", "def test_eval_renders_gif_and_html")}


def bash_commands() -> list[str]:
    """Every command line of the README's bash blocks (continuations joined, comments cut)."""
    out = []
    for block in re.findall(r"```bash\n(.*?)```", README, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #")[0].strip()
            if line and not line.startswith("#"):
                out.append(line)
    return out


def jaxppo_lines() -> list[str]:
    lines = []
    for cmd in bash_commands():
        for part in cmd.split("&&"):
            part = part.strip()
            if part.startswith("srun "):
                part = part[len("srun "):]
            if part.startswith("jaxppo "):
                lines.append(part)
    return lines


def test_the_readme_shows_what_this_test_runs():
    lines = jaxppo_lines()
    assert len(lines) >= 10 and {line.split()[1] for line in lines} == {
        "train", "sweep", "eval", "compare", "config", "report"}
    assert any(c.startswith("tensorboard ") for c in bash_commands())


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A working directory like the repository root: `configs/` and a `runs/` of its own."""
    d = tmp_path_factory.mktemp("readme")
    os.symlink(os.path.join(ROOT, "configs"), d / "configs")
    os.symlink(os.path.join(ROOT, "scripts"), d / "scripts")  # the custom env example
    return d


@pytest.fixture(scope="module")
def stopped_run(workdir):
    """What `runs/<run-name>` stands for: a CartPole run stopped (as by Ctrl-C) half-way."""
    config = load_config(os.path.join(ROOT, "configs", "cartpole.yaml"),
                         {"total_timesteps": 4096})
    stop_run_at(config, workdir / "runs", "stopped", 4, chunk_updates=2)
    return os.path.join("runs", "stopped")


LAST_RUN: dict[str, str] = {}  # the run directory the latest `jaxppo train` line wrote


@pytest.mark.parametrize("index,line", list(enumerate(jaxppo_lines())))
def test_each_readme_command_runs(index, line, workdir, stopped_run, monkeypatch, capsys):
    """In README order: `runs/<run-name>` is the run of the train line above it (for `eval`),
    or a run stopped half-way (for `--resume`, which refuses a finished run)."""
    argv = shlex.split(line.replace("$RANK", "0"))[1:]
    if any(flag in line for flag in CLUSTER):
        build_parser().parse_args(argv)
        return
    covered = [test for text, test in COVERED.items() if text in line]
    if covered:
        args = build_parser().parse_args(argv)
        if getattr(args, "config", None):
            load_config(os.path.join(ROOT, args.config))
        test_file, definition = covered[0]
        with open(os.path.join(ROOT, "tests", test_file), encoding="utf-8") as f:
            assert definition in f.read(), (line, test_file, definition)
        return
    monkeypatch.chdir(workdir)
    if "--resume" in argv:
        target = os.path.join("runs", f"stopped-{index}")
        shutil.copytree(stopped_run, target)
        argv = [target if a == "runs/<run-name>" else a for a in argv]
    else:
        argv = [LAST_RUN.get("dir", stopped_run) if a == "runs/<run-name>" else a for a in argv]
        argv += TINY.get(argv[0], [])
    if argv[0] == "train" and "--resume" not in argv:
        argv += ["--run-name", f"line-{index}"]
    if argv[0] == "compare":
        argv += ["--out", str(workdir / "compare")]
    if "num_envs=65536" in argv:  # one update of 65,536 envs
        argv += ["--set", "num_steps=1", "--set", "total_timesteps=65536"]
    if "--seeds" in argv and int(argv[argv.index("--seeds") + 1]) > 64:  # one update of each
        argv += ["--set", "total_timesteps=512"]  # (cartpole.yaml: 4 envs x 128 steps)
    code = main(argv)
    _, err = capsys.readouterr()
    assert code == 0, (line, err[-2000:])
    if argv[0] == "train" and "--resume" not in argv:
        LAST_RUN["dir"] = os.path.join("runs", f"line-{index}")


def test_the_config_keys_table_is_generated_from_ppoconfig():
    """The README's table of config keys is `config_reference_markdown()`, character for
    character: a key added to PPOConfig (with its docstring) must be added here too."""
    from jaxppo.config import config_reference_markdown

    assert config_reference_markdown() in README


def test_tensorboard_reads_the_run_directories(workdir, stopped_run):
    """`tensorboard --logdir runs` (the tensorboard extra, part of the dev extra): its
    --inspect mode reads the event files without starting a server."""
    tb = os.path.join(os.path.dirname(sys.executable), "tensorboard")
    if not os.path.exists(tb):
        pytest.skip("tensorboard is not installed (pip install -e '.[tensorboard]')")
    p = subprocess.run([tb, "--inspect", "--logdir", "runs"], cwd=workdir, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "charts/episodic_return" in p.stdout + p.stderr


@pytest.mark.parametrize("index", range(len(re.findall(r"```python\n", README))))
def test_each_readme_python_block_runs(index, workdir):
    code = re.findall(r"```python\n(.*?)```", README, re.S)[index]
    assert '{"num_envs": 8}' in code  # the budget is cut here, and only here
    code = code.replace('{"num_envs": 8}', '{"num_envs": 8, "total_timesteps": 8192}')
    p = subprocess.run([sys.executable, "-c", code], cwd=workdir, capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
