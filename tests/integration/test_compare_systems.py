"""`jaxppo compare`'s Tianshou, TorchRL and torch-script systems, each run end to end at a tiny
budget in its own child process (as compare runs them), the libraries' own objects given the
mapped values, and the fairness flag on a system given a deliberately wrong mapping."""

import csv
import io
import json
import os
import pickle
import subprocess

import pytest
from conftest import ROOT

import jaxppo.compare.compare as compare_module
from jaxppo import PPOConfig
from jaxppo.cli import main
from jaxppo.compare import mapping

torch = pytest.importorskip("torch", reason="the compare extra (torch) is not installed")
pytest.importorskip("tianshou", reason="the compare extra (tianshou) is not installed")
pytest.importorskip("torchrl", reason="the compare extra (torchrl) is not installed")

CARTPOLE = os.path.join(ROOT, "configs", "cartpole.yaml")
TINY = ["--steps", "128", "--repeats", "1", "--set", "num_envs=2", "--set", "num_steps=32",
        "--set", "hidden_sizes=[16]"]


def _compare(tmp_path, config, systems):
    out = tmp_path / "cmp"
    assert main(["compare", "--config", config, "--systems", systems, *TINY,
                 "--out", str(out)]) == 0
    rows = {r["system"]: r for r in csv.DictReader(open(out / "compare.csv"))}
    return rows, (out / "compare.md").read_text()


def _reports(mp) -> dict:
    """Each child run's JSON line by system, kept as compare reads it (`subprocess.run`)."""
    reports, real = {}, subprocess.run

    def run(argv, **kw):
        proc = real(argv, **kw)
        if proc.stdout.strip():
            reports[argv[3]] = json.loads(proc.stdout.strip().splitlines()[-1])
        return proc

    mp.setattr(compare_module.subprocess, "run", run)
    return reports


@pytest.fixture(scope="module")
def cartpole(tmp_path_factory):
    """Every CartPole form in one compare run (rows, compare.md), which the two tests below
    read: one parent for all six (Tianshou's one-process form runs on MinAtar below).
    Tianshou's numba functions run as Python (~12 s of numba's compiles in a Tianshou child
    at 128 steps; what is tested is jaxppo's wiring of each system, not numba). The memory
    check before the runs (`fit.measure_sb3`, a child of ~4 s) is left out:
    tests/integration/test_compare.py measures it and asserts on it."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NUMBA_DISABLE_JIT", "1")
        mp.setattr(compare_module, "measure_sb3", lambda config, env=None: {})
        reports = _reports(mp)
        return (*_compare(tmp_path_factory.mktemp("forms"), CARTPOLE,
                          "tianshou,torchrl,torch,torchrl-serial,torch-async,torch-compile"),
                reports)


def test_plain_names_run_end_to_end(cartpole):
    """tianshou, torchrl, torch: each a child process at 128 steps; its tree's memory,
    processes and threads measured (so are the other forms', run beside them)."""
    rows, md, _ = cartpole
    assert list(rows)[:3] == ["tianshou-subproc", "torchrl-parallel", "torch-sync"]
    for r in rows.values():
        assert int(float(r["repeats"])) == 1 and float(r["sps"]) > 0, r
        assert float(r["peak_mb"]) > 50, r  # torch alone is more
        assert r["threads"].startswith("torch 1"), r  # pinned
    assert int(rows["tianshou-subproc"]["procs"]) >= 3  # the run and its 2 env processes
    assert int(rows["torchrl-parallel"]["procs"]) >= 3
    assert int(rows["torch-sync"]["procs"]) == 1
    assert "| Tianshou SubprocVectorEnv (2 procs) | torch 1 + 2 env procs |" in md
    assert "tianshou 2.0.1" in md and "torchrl 0.14.1" in md
    assert "critic_coeff = 0.5 x vf_coef" in md


def test_other_forms_run_end_to_end(cartpole):
    """The other vector forms, and torch.compile (its compile counted as setup)."""
    rows, _, _ = cartpole
    assert list(rows)[3:] == ["torchrl-serial", "torch-async", "torch-compile-sync"]
    assert float(rows["torch-compile-sync"]["setup_s"]) > float(rows["torch-async"]["setup_s"])
    assert int(rows["torch-async"]["procs"]) >= 3


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="reads /proc/PID/maps")
def test_the_pytorch_systems_processes_hold_no_jax(cartpole):
    """Each PyTorch system's run process holds what a user's PyTorch script would: its table
    row's memory and threads are the pipeline's own. Before, each imported jaxppo's package,
    and so JAX (~190 MB more peak memory, 15 threads), in the very process measured."""
    _, md, reports = cartpole
    assert sorted(reports) == sorted(["tianshou-subproc", "torchrl-parallel", "torch-sync",
                                      "torchrl-serial", "torch-async", "torch-compile-sync"])
    assert {s: r["jax_loaded"] for s, r in reports.items()} == dict.fromkeys(reports, False)
    assert "loaded JAX" not in md


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="reads /proc/PID/maps")
def test_a_pytorch_run_that_loaded_jax_is_noted(tmp_path):
    """Where a module the run imported loads JAX (here the env module named by --import), the
    run's process says so and the table notes it: its memory is not the PyTorch side's alone."""
    out = tmp_path / "cmp"
    with pytest.MonkeyPatch.context() as mp:
        reports = _reports(mp)
        assert main(["compare", "--config", CARTPOLE, "--systems", "torch-sync", *TINY,
                     "--set", "env_id=gymnasium/CartPole-v1", "--import", "jax",
                     "--out", str(out)]) == 0
    assert reports["torch-sync"]["jax_loaded"] is True
    assert ("torch-sync: its process loaded JAX (a module it imported did), so its peak "
            "memory includes JAX's") in (out / "compare.md").read_text()


def test_an_env_a_library_lacks_is_a_dash_with_its_reason(tmp_path, monkeypatch):
    """MinAtar: the torch script and Tianshou (its one-process form, which the CartPole runs
    above leave to this test) run the reference game; TorchRL has none: "-" and why. Tianshou's
    numba functions (buffer indices, GAE) run as Python here, as in the CartPole runs above."""
    monkeypatch.setenv("NUMBA_DISABLE_JIT", "1")
    config = os.path.join(ROOT, "configs", "minatar_breakout.yaml")
    rows, md = _compare(tmp_path, config, "torch,tianshou-dummy,torchrl-serial")
    assert float(rows["torch-sync"]["sps"]) > 0 and float(rows["tianshou-dummy"]["sps"]) > 0
    assert int(rows["tianshou-dummy"]["procs"]) == 1 and "| Tianshou DummyVectorEnv (2 envs) |" in md
    assert "TorchRL has no MinAtar env" in rows["torchrl-serial"]["skipped"]
    assert "| TorchRL SerialEnv (2 envs) | - |" in md


def test_the_libraries_take_the_mapped_values():
    """Built by the libraries themselves: Tianshou's linear schedule gives lr * (1 - k/U) at
    update k; TorchRL's loss holds the halved critic coefficient and the l2 loss."""
    from tensordict.nn import TensorDictModule
    from tianshou.algorithm.optim import AdamOptimizerFactory, LRSchedulerFactoryLinear
    from torchrl.modules import ProbabilisticActor, ValueOperator
    from torchrl.objectives import ClipPPOLoss

    config = PPOConfig(total_timesteps=4 * 512, lr=1e-3, vf_coef=0.7)
    kw = mapping.tianshou_mapping(config).kwargs
    factory = AdamOptimizerFactory(**kw["adam"]).with_lr_scheduler_factory(
        LRSchedulerFactoryLinear(max_epochs=1, epoch_num_steps=kw["lr_updates"] * 512,
                                 collection_step_num_env_steps=512))
    opt, sched = factory.create_instances(torch.nn.Linear(2, 2))
    seen = []
    for _ in range(4):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()  # Tianshou steps it once per update()
    assert seen == pytest.approx([1e-3, 0.75e-3, 0.5e-3, 0.25e-3])
    actor = ProbabilisticActor(TensorDictModule(torch.nn.Linear(2, 2), in_keys=["observation"],
                                                out_keys=["logits"]),
                               in_keys=["logits"], distribution_class=torch.distributions.Categorical)
    value = ValueOperator(torch.nn.Linear(2, 1), in_keys=["observation"])
    loss = ClipPPOLoss(actor, value, **mapping.torchrl_mapping(config).kwargs["loss"])
    assert float(loss.critic_coeff) == pytest.approx(0.35) and loss.loss_critic_type == "l2"


def test_torchrl_workers_get_the_env_by_value():
    """TorchRL's ParallelEnv workers unpickle the env factory importing no jaxppo module (so
    no JAX, which a TorchRL script's workers do not hold): by reference, each imported it."""
    import cloudpickle

    from jaxppo.compare import torchrl
    from jaxppo.compare.gym_side import env_fn

    modules = []

    class Names(pickle.Unpickler):
        def find_class(self, module, name):
            modules.append(module)
            return super().find_class(module, name)

    factory = torchrl.make_env(env_fn("classic", "CartPole-v1", "CartPole-v1", ()))
    env = Names(io.BytesIO(cloudpickle.dumps(factory))).load()()
    env.close()
    assert modules and not [m for m in modules if m.split(".")[0] == "jaxppo"], modules


@pytest.mark.slow
def test_fairness_flags_a_system_given_a_wrong_mapping(monkeypatch):
    """The torch script learns CartPole with the right mapping; the same script given a wrong
    one (the learning rate dropped: lr 0) does not, and the band flags it, and only it."""
    from jaxppo.compare.compare import run_system
    from jaxppo.compare.table import aggregate, fairness

    torch.set_num_threads(1)  # as compare pins it: more threads wait on each other under load
    config = PPOConfig(total_timesteps=60_000, clip_vloss=False)
    right = run_system("torch-sync", config, 1, 0)
    right_mapping = mapping.torch_mapping
    monkeypatch.setattr(mapping, "torch_mapping",
                        lambda c: mapping.Mapped({**right_mapping(c).kwargs, "lr": 0.0}))
    wrong = run_system("torch-sync", config, 1, 0)
    rows = [aggregate("torch-sync", [right], config, 1), aggregate("torch-async", [wrong], config, 1)]
    notes = fairness(rows, 475.0)
    assert [r["band"] for r in rows] == ["ok", "OUT"], (right["final_return"], wrong["final_return"])
    assert len(notes) == 1 and "check this system's mapping" in notes[0]
