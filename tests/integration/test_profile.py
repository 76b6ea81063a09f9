"""`jaxppo profile` and `jaxppo.profile_config`: kernels per update of a config's compiled
program, on this CPU or compiled for a GPU this machine does not have; and what it refuses in
one line."""

import importlib.util
import os
import subprocess
import sys

import pytest
from conftest import ROOT

from jaxppo import load_config, profile_config
from jaxppo.cli.app import main
from jaxppo.errors import UsageError
from jaxppo.profile import GPUS

HAS_CUDA_COMPILER = __import__("importlib.util").util.find_spec("jax_plugins.xla_cuda12") is not None
needs_cuda_compiler = pytest.mark.skipif(
    not HAS_CUDA_COMPILER, reason="the gpu-profile extra (jax-cuda12-pjrt) is not installed: "
    "pip install -e '.[gpu-profile]'")
TINY = ["--set", "total_timesteps=1024", "--set", "num_steps=16"]


def cli(*argv, **env):
    return subprocess.run([sys.executable, "-m", "jaxppo.cli", *argv], capture_output=True,
                          text=True, cwd=ROOT, timeout=900, env={**os.environ, **env})


def table_rows(out: str) -> list[list[str]]:
    """The loop table's rows: where, depth, trips, ..."""
    return [[c.strip() for c in line.split("|")[1:-1]] for line in out.splitlines()
            if line.startswith("| ") and line.split("|")[2].strip().isdigit()]


@pytest.mark.exact
def test_profile_command_on_this_cpu_walks_the_update_scan(capsys, monkeypatch):
    """The update scan (num_updates trips) holds the rollout and GAE scans (num_steps trips)
    and the epoch scan (update_epochs). The command runs in this process (the CPU target
    needs no fresh one: the GPU targets' tests start theirs)."""
    monkeypatch.chdir(ROOT)
    capsys.readouterr()
    code = main(["profile", "--config", "configs/cartpole.yaml"])
    out, err = capsys.readouterr()
    assert code == 0, err[-2000:]
    rows = table_rows(out)
    assert [int(r[2]) for r in rows[:2]] == [976, 128] and 4 in [int(r[2]) for r in rows]
    assert rows[0][1] == "0" and "rollout.py" in rows[1][0]
    assert "per update: **" in out and "this CPU" in out


def test_profile_config_in_python_and_its_minibatch_part():
    """The public function, as a user calls it: per-update figures that add up (the update
    loop's kernels are at least the rollout's), and the minibatch part by vmap and lax.map."""
    cfg = load_config("configs/cartpole.yaml", {"total_timesteps": 2048, "num_steps": 16})
    result = profile_config(cfg, seeds=2)
    assert result.where == "this CPU" and result.per_update["updates"] == 2048 // (4 * 16)
    rows = table_rows(result.text)
    rollout = next(r for r in rows if "rollout.py" in r[0])
    assert result.per_update["kernels"] >= int(rollout[4].replace(",", "")) > 0
    mb = profile_config(cfg, seeds=2, part="minibatch")
    assert mb.per_update == {} and len(mb.hlo) == 2
    assert "2 seeds by vmap" in mb.text and "2 seeds by lax.map" in mb.text
    with pytest.raises(UsageError, match="--seeds 0"):
        profile_config(cfg, seeds=0)
    with pytest.raises(UsageError, match="--target 'tpu'"):
        profile_config(cfg, target="tpu")


@pytest.mark.parametrize("argv, says", [
    (["--config", "nope.yaml"], "cannot read config file 'nope.yaml'"),
    (["--config", "configs/cartpole.yaml", "--set", "lr=-1"], "config key 'lr'"),
    (["--config", "configs/cartpole.yaml", "--seeds", "-3"], "--seeds must be a positive"),
    ([], "--config is required"),
])
def test_profile_refuses_bad_input_in_one_line(argv, says, capsys):
    """What scripts/hlo_profile.py answered with tracebacks: one line, status 2."""
    with pytest.raises(SystemExit) if "--seeds" in argv else _nothing():
        code = main(["profile", *argv])
        assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("jaxppo profile: error: ") and says in err[0], err


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.mark.unit
def test_profile_names_the_extra_when_the_cuda_plugin_is_missing():
    """No CUDA plugin: one line naming the extra, no traceback."""
    code = ("import sys, types\nimport jaxppo.profile.gpu as g\n"
            "g.importlib = types.SimpleNamespace(util=types.SimpleNamespace("
            "find_spec=lambda name, *a: None))\nfrom jaxppo.cli.app import main\n"
            "sys.exit(main(['profile', '--config', 'configs/cartpole.yaml', '--target', 'h100']))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "jaxppo profile: error: --target h100 needs the CUDA compiler plugin: pip install -e "
        "'.[gpu-profile]' (JAX's CUDA PJRT plugin; no GPU or CUDA libraries needed)"]


@needs_cuda_compiler
def test_profile_compiles_for_an_h100_without_one(tmp_path):
    """`--target h100`: XLA's GPU compiler runs here on a written-down H100 (no GPU, no CUDA
    libraries): kernels are counted, the outermost loop runs num_updates times, and nothing
    reaches stderr (the plugin's C++ side logs the missing driver as it loads: silenced). The
    GPU program is not written to the persistent cache, which a compile-only client cannot
    load back (JAX warned so on every run but the first, and each config left ~0.5 MB there:
    the small CPU programs of the env's set-up stay, under 20 kB). With no GPU program there,
    a rerun has nothing to warn about: the sizes below hold that, without a second run."""
    cache = tmp_path / "cache"
    proc = cli("profile", "--config", "configs/cartpole.yaml", "--target", "h100", *TINY,
               "--seeds", "2", JAXPPO_CACHE_DIR=str(cache))
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr[-2000:]
    sizes = {p.name: p.stat().st_size for p in cache.iterdir()}
    assert sizes and max(sizes.values()) < 100_000, sizes
    assert GPUS["h100"]["name"] in proc.stdout
    kernels = int(proc.stdout.split("per update: **")[1].split(" kernels")[0].replace(",", ""))
    rows = table_rows(proc.stdout)
    assert kernels > 100 and rows[0][1] == "0" and int(rows[0][2]) == 1024 // (4 * 16)
    assert any("rollout.py" in r[0] and int(r[2]) == 16 for r in rows)


@needs_cuda_compiler
def test_profile_of_a_host_env_for_a_gpu_is_one_line():
    """A Gymnasium env steps on the host through a callback: no GPU form of its whole program
    (it was a 20-line traceback ending "Unknown backend: 'gpu' requested"); its update alone
    (`--part minibatch`) compiles."""
    proc = cli("profile", "--config", "configs/cartpole.yaml", "--target", "h100",
               "--set", "env_id=gymnasium/CartPole-v1", *TINY)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines() == [
        "jaxppo profile: error: gymnasium/CartPole-v1 steps on the host (through a callback), "
        "so its whole program has no h100 form: profile its update alone with --part "
        "minibatch, or its whole program with --target cpu"]
    proc = cli("profile", "--config", "configs/cartpole.yaml", "--target", "h100",
               "--set", "env_id=gymnasium/CartPole-v1", *TINY, "--part", "minibatch")
    assert proc.returncode == 0 and "1 seeds by vmap" in proc.stdout, proc.stderr[-2000:]


def test_kernels_script_profiles_jaxppo_alone_without_purejaxrl(capsys, monkeypatch):
    """The benchmark driver that puts PureJaxRL's ppo.py beside jaxppo (scripts/kernels.py):
    without a checkout, jaxppo's table alone. Its `main`, run in this process (a CPU target
    needs no fresh one)."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the script puts scripts/ on it
    spec = importlib.util.spec_from_file_location(
        "_kernels_script", os.path.join(ROOT, "scripts", "kernels.py"))
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    capsys.readouterr()
    script.main(TINY)
    out = capsys.readouterr().out
    assert out.count("#### ") == 1 and "jaxppo make_train on this CPU" in out
