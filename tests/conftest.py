"""What the test files share: the test envs they register, small configs, the compilation
cache, running the CLI in-process, and a run stopped half-way.

The suite's tiers are folders: `tests/unit/<layer>/` (pure pieces, no training, no optional
extra: `pytest tests/unit`, the fast loop), `tests/integration/` (the CLI, runs, run
directories, faults, env suites), `tests/learning/` (learning runs: marked `slow`),
`tests/docs/` (the site and every command it shows). A test's folder gives its marker
(`unit`, `slow`). Support modules the test files import
(`long_compile_env`, `slow_env`, `sharded_checks`) and `fixtures/` stay here, beside this file.

Compile options: most tests spend their time compiling, not running, so the suite's processes
(and the processes they start) compile at LLVM level 0 and with XLA:CPU's older loop emitters
instead of its MLIR fusion emitters, their code generated in one piece (`SUITE_FLAGS` in
`XLA_FLAGS`, set below before JAX starts; jaxppo leaves a level set there alone): the same XLA
programs, about half the compile, slower code. Learning runs (`slow`) run long enough for
that to matter: their training programs get XLA's and jaxppo's own options, as a user's do;
tests that compare two programs bit for bit (`exact`) get XLA's own emitters back, under which
jaxppo promises that (`default_compile_level`).
"""

import csv
import functools
import importlib.util
import json
import os
import signal

TESTS = os.path.dirname(os.path.abspath(__file__))
"""This folder: the test files' support modules (`long_compile_env`, `sharded_checks`) and
`fixtures/`; the test files are in its tiers' folders (unit/, integration/, learning/, docs/)."""
ROOT = os.path.dirname(TESTS)
"""The checkout: configs/, scripts/, docs/ (test files at any depth name it through here)."""
FIXTURES = os.path.join(TESTS, "fixtures")


def _compat():
    """jaxppo/compat.py read on its own: importing the package would import JAX, and XLA_FLAGS
    must be set first."""
    path = os.path.join(ROOT, "jaxppo", "compat.py")
    spec = importlib.util.spec_from_file_location("_jaxppo_compat_for_flags", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


LOOP_EMITTERS = _compat().XLA_CPU_LOOP_EMITTERS  # jaxlib 0.10 only: see jaxppo/compat.py
LEVEL_FLAG = "--xla_backend_optimization_level"
SUITE_FLAGS = (f"{LEVEL_FLAG}=0", *(("--xla_cpu_use_fusion_emitters=false",) if LOOP_EMITTERS
                                   else ()), "--xla_cpu_parallel_codegen_split_count=1")
"""The suite's compile flags: level first (`with_xla_emitters` keeps it alone). LLVM's code
generation in one piece, not split for threads: two workers already keep both cores busy, and
a tiny CartPole program compiled ~8% quicker (8 programs, medians 1.37 s against 1.49 s)."""
FUSION_EMITTERS = {"xla_cpu_use_fusion_emitters": True} if LOOP_EMITTERS else {}
"""The option that gives a program XLA's own emitters back (none where they are the only ones)."""
if LEVEL_FLAG not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = " ".join([os.environ.get("XLA_FLAGS", ""), *SUITE_FLAGS]).strip()
    os.environ["JAXPPO_SUITE_SET_LEVEL"] = "1"  # marked: pytest-xdist's workers inherit it
OWN_LEVEL = "JAXPPO_SUITE_SET_LEVEL" not in os.environ  # a level you set yourself wins

import jax  # noqa: E402 - after XLA_FLAGS: XLA reads them when JAX starts its backend
import pytest  # noqa: E402
from jax._src import compiler as jax_compiler  # noqa: E402

from jaxppo import Experiment, PPOConfig  # noqa: E402
from jaxppo._xla import CPU_LEVEL, setup_compilation_cache  # noqa: E402
from jaxppo.cli import main  # noqa: E402
from jaxppo.envs import Box, Discrete, register_env  # noqa: E402
from jaxppo.envs.probes import ProbeState, _Probe  # noqa: E402


class Explode(_Probe):
    """Reward 0 until step 40 of an episode, then 1e38: returns overflow to inf, the critic's
    loss goes non-finite. A deterministic way to make a run diverge at a known update (the
    third of 16-step updates)."""

    def reset_env(self, key, params):
        s = ProbeState(obs=jax.numpy.float32(0.0), time=0)
        return self.get_obs(s), s

    def step_env(self, key, state, action, params):
        reward = jax.numpy.where(state.time >= 40, 1e38, 0.0)
        return self._out(state.replace(time=state.time + 1), reward, False)


register_env("test/Explode-v0", Explode)


class Poison(Explode):
    """Like Explode, but at steps 40-44 of its 45-step episodes the env itself misbehaves:
    `what` = "obs" returns NaN observations, "reward" +Inf rewards, "huge" observations of 1e30
    (finite, but their square overflows a normaliser's float32 variance), "mask" an action mask
    that allows nothing. Steps 40+ are first collected in the third of 16-step updates."""

    def __init__(self, what: str = "obs"):
        super().__init__()
        self.what = what

    def step_env(self, key, state, action, params):
        state = state.replace(time=state.time + 1)
        late = state.time >= 40
        bad = {"obs": jax.numpy.nan, "huge": 1e30}.get(self.what)
        if bad is not None:
            state = state.replace(obs=jax.numpy.where(late, bad, 0.0).astype(jax.numpy.float32))
        reward = jax.numpy.where(late & (self.what == "reward"), jax.numpy.inf, 0.0)
        return self._out(state, reward, state.time >= 45)

    def observation_space(self, params):
        return Box(-1e31, 1e31, (1,))


class Endless:
    """Reward 1 per step, forever: no termination and no time limit, so no episode ever ends
    in training, and evaluation can only stop at its step cap."""

    default_params = None

    def reset_env(self, key, params):
        return jax.numpy.zeros((1,)), jax.numpy.int32(0)

    def step_env(self, key, state, action, params):
        return jax.numpy.zeros((1,)), state + 1, jax.numpy.float32(1.0), jax.numpy.bool_(False), {}

    def observation_space(self, params):
        return Box(-1.0, 1.0, (1,))

    def action_space(self, params):
        return Discrete(2)


class NoAction(Poison):
    """Two actions, both masked from step 40 on."""

    num_actions_ = 2

    def action_mask(self, state, params):
        return jax.numpy.full((2,), state.time < 40)


for _what in ("obs", "reward", "huge"):
    register_env(f"test/Poison-{_what}-v0", functools.partial(Poison, _what))
register_env("test/NoAction-v0", functools.partial(NoAction, "mask"))
register_env("test/Endless-v0", Endless)


@pytest.fixture(scope="session", autouse=True)
def _cache_dir(tmp_path_factory):
    """Every compile cache of this session in its temp dir, never the user's ~/.cache: the CLI
    turns the cache on (`jaxppo train` does), and `compile_cache` does for the tests that
    build runs themselves. One dir for all of pytest-xdist's workers (their base temps share a
    parent), so a program one worker compiled, another reads back."""
    base = tmp_path_factory.getbasetemp()
    path = str((base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "xla-cache")
    old = os.environ.get("JAXPPO_CACHE_DIR")
    os.environ["JAXPPO_CACHE_DIR"] = path
    yield path
    if old is None:
        os.environ.pop("JAXPPO_CACHE_DIR", None)
    else:
        os.environ["JAXPPO_CACHE_DIR"] = old


USER_LEVEL = {"xla_backend_optimization_level": CPU_LEVEL}
"""The compiler options of a test that compiles a learning run itself: jaxppo's own level."""

XLA_OWN = {"xla_backend_optimization_level": 3, **FUSION_EMITTERS}
"""XLA's own defaults for what `SUITE_FLAGS` changes."""


def _keep_of_suite_flags(flags: str, keep: tuple[str, ...]) -> str:
    """`flags` without the part of `SUITE_FLAGS` not in `keep`."""
    return " ".join(f for f in flags.split() if f not in SUITE_FLAGS or f in keep)


def _compile_with(monkeypatch, keep: tuple[str, ...], options: dict,
                  asked_only: bool = False) -> None:
    """This test's programs compile with `options` under the ones a program asks for itself
    (jaxppo's driver asks for its level), and the processes it starts get XLA_FLAGS with only
    the `keep` part of `SUITE_FLAGS`. XLA read XLA_FLAGS once, when this process started; per
    program it takes options (JAX's compile options, wrapped here: a private function, so the
    suite's own concern)."""
    flags = _keep_of_suite_flags(os.environ["XLA_FLAGS"], keep)
    if flags:
        monkeypatch.setenv("XLA_FLAGS", flags)
    else:
        monkeypatch.delenv("XLA_FLAGS", raising=False)
    real = jax_compiler.get_compile_options

    def get_compile_options(*args, env_options_overrides=None, **kwargs):
        if asked_only and not env_options_overrides:
            return real(*args, env_options_overrides=env_options_overrides, **kwargs)
        return real(*args, env_options_overrides={**options, **(env_options_overrides or {})},
                    **kwargs)

    monkeypatch.setattr(jax_compiler, "get_compile_options", get_compile_options)


def with_xla_emitters(env: dict[str, str]) -> dict[str, str]:
    """`env` for a process that compiles with XLA's own emitters (at the suite's level)."""
    return {**env, "XLA_FLAGS": _keep_of_suite_flags(env.get("XLA_FLAGS", ""), SUITE_FLAGS[:1])}


def compile_as_a_user(monkeypatch) -> None:
    """XLA's own options from here on for the training programs (those that ask for options
    of their own: jaxppo's driver asks for its level, a learning test passes `USER_LEVEL`) and
    for every program of the processes it starts; an eval or env program in this process keeps
    the suite's. For a fixture of a wider scope than a test's, which runs before
    `default_compile_level`: pass it a `pytest.MonkeyPatch.context()`."""
    if not OWN_LEVEL:
        _compile_with(monkeypatch, (), XLA_OWN, asked_only=True)


def compile_exactly(monkeypatch) -> None:
    """XLA's own emitters from here on, at the suite's level (for a fixture a test marked
    `exact` compares against: see `compile_as_a_user`). JAX's in-memory caches are emptied:
    a program compiled before under `SUITE_FLAGS` is compiled again, not reused."""
    if not OWN_LEVEL:
        _compile_with(monkeypatch, SUITE_FLAGS[:1], FUSION_EMITTERS)
        jax.clear_caches()


@pytest.fixture(autouse=True)
def default_compile_level(request, monkeypatch):
    """A learning run (`slow`) compiles its training programs as a user's run does (XLA's own
    options, jaxppo's level: `compile_as_a_user`). A test marked `exact` compares two compiled
    programs bit for bit (a resume and the run it continues, chunks and one scan, vmapped and
    alone): jaxppo promises that under XLA's own emitters, which it gets back (at the suite's
    level: `compile_exactly`)."""
    if OWN_LEVEL:
        return
    if request.node.get_closest_marker("slow"):
        compile_as_a_user(monkeypatch)
    elif request.node.get_closest_marker("exact"):
        compile_exactly(monkeypatch)


@pytest.fixture(autouse=True)
def python_sigint_handler():
    """Each test runs with Python's own SIGINT handler, as a user's process has (and the
    processes it starts inherit): pytest-xdist starts its workers with SIGINT ignored, which a
    Ctrl-C test would otherwise see or not depending on which tests ran before it."""
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.fixture(scope="session", autouse=True)
def _sighup_not_passed_on_ignored():
    """A suite started under `nohup` has SIGHUP ignored, and the processes its tests start
    would inherit that: jaxppo keeps an ignored SIGHUP ignored (what `nohup` asks), so a test
    that sends its run SIGHUP saw it train to the end. A no-op handler instead: this process
    still outlives a hangup, and a process it starts gets SIGHUP's default (exec resets a
    handled signal, not an ignored one)."""
    hup = getattr(signal, "SIGHUP", None)
    if hup is None or signal.getsignal(hup) is not signal.SIG_IGN:
        yield
        return
    signal.signal(hup, lambda *_: None)
    yield
    signal.signal(hup, signal.SIG_IGN)


@pytest.fixture
def compile_cache(_cache_dir):
    """JAX's persistent compilation cache on, shared by the whole session: a program a test
    compiled before is read back, not compiled again."""
    setup_compilation_cache()
    return _cache_dir


def stop_run_at(config: PPOConfig, logdir, name: str, update: int, chunk_updates: int) -> str:
    """A run of `config` stopped (as by Ctrl-C) after `update` updates: its run directory."""
    Experiment(config, logdir=str(logdir), run_name=name, progress=False,
               chunk_updates=chunk_updates, callbacks=[lambda e: e.update < update]).run()
    return os.path.join(str(logdir), name)


def tiny_stopped_run(logdir, update: int, total_timesteps: int = 384) -> str:
    """A tiny CartPole run (24 updates at the default budget, chunks of 6) stopped after
    `update` updates (past its end: finished), compiled with the session's cache."""
    setup_compilation_cache()
    config = PPOConfig(total_timesteps=total_timesteps, num_envs=4, num_steps=16,
                       num_minibatches=2, update_epochs=2, hidden_sizes=(16, 16))
    return stop_run_at(config, logdir, "r", update, chunk_updates=6)


@pytest.fixture(scope="session")
def stopped_run(tmp_path_factory):
    """A run stopped at update 12 of 24 (resumable), to damage in copies (never written to:
    each test that damages it copies it first)."""
    return tiny_stopped_run(tmp_path_factory.mktemp("stopped"), 12, total_timesteps=1536)


@pytest.fixture(scope="session")
def tiny_config():
    """A CartPole run small enough to compile and run in a few seconds on 2 cores."""
    return PPOConfig(env_id="CartPole-v1", total_timesteps=4 * 16 * 6, num_envs=4, num_steps=16,
                     num_minibatches=2, update_epochs=2, hidden_sizes=(16, 16))


@pytest.fixture(scope="session")
def keys():
    return jax.random.split(jax.random.key(42), 3)


def run_cli(capsys, argv):
    """(exit status, stderr lines) of `jaxppo *argv`, run in this process."""
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as e:  # argparse's own errors
        code = e.code
    return code, capsys.readouterr().err.strip().splitlines()


def assert_sweep_refused(capsys, tmp_path, argv, culprits):
    """`jaxppo sweep *argv` is refused in one line naming every culprit, exit 2, and writes
    no run directory."""
    code, err = run_cli(capsys, ["sweep", *argv, "--logdir", str(tmp_path / "runs"),
                                 "--no-progress"])
    assert code == 2, err
    assert len(err) == 1 and "Traceback" not in err[0], err
    for c in culprits:
        assert c in err[0], (c, err[0])
    assert not os.path.exists(tmp_path / "runs")


NEWER_LINE = (
    "tests/integration/test_keys.py",  # every key form users write
    "tests/integration/test_startup.py",  # what a command imports before it answers
    "tests/integration/test_train.py",  # the train fn: determinism, vmapped equals alone, chunks
    "tests/integration/test_program_forms.py",  # the CPU and GPU forms, alone and vmapped
    "tests/integration/test_probes.py",  # value, discounting, bootstrapping, the better action
    "tests/learning/test_learning.py::test_cartpole_configs_solve_and_stay_solved",  # MLP learns
    "tests/learning/test_recurrent_learns.py::test_memory_probe_needs_memory",  # GRU and LSTM
    "tests/integration/test_networks.py::test_cnn_torso_trains_through_make_train",  # MinAtar CNN
    "tests/learning/test_brax_learns.py::test_inverted_double_pendulum_learns_on_cpu",  # Brax
    "tests/integration/test_export.py::test_every_policy_family_exports",  # each family
    "tests/docs/test_docs.py::test_the_site_builds_strictly_with_every_name_flag_and_key",
    "tests/integration/test_profile.py::test_profile_compiles_for_an_h100_without_one",
    "tests/integration/test_profile.py::test_profile_of_a_host_env_for_a_gpu_is_one_line",
)
"""CI's subset on the newer line (Python 3.12 + JAX 0.12: `.ci/run`), beside every unit test:
node ids or whole files."""


TIERS = {"unit": "unit", "learning": "slow"}
"""A tier's folder and the marker its tests carry."""


def pytest_collection_modifyitems(config, items):
    """Mark each test with its folder's tier (tests/unit: `unit`, tests/learning: `slow`), and
    the newer line's subset `newer_line` (pyproject's markers say what they are)."""
    for item in items:
        parts = os.path.relpath(str(item.path), TESTS).split(os.sep)
        if parts[0] in TIERS and not item.get_closest_marker(TIERS[parts[0]]):
            item.add_marker(getattr(pytest.mark, TIERS[parts[0]]))
        if item.get_closest_marker("unit") or item.nodeid.split("[")[0].startswith(NEWER_LINE):
            item.add_marker(pytest.mark.newer_line)


def make_run(path, env_id="CartPole-v1", final=(100.0, 200.0, 300.0, 400.0), updates=12,
             settings=None, summary=True):
    """A run directory as jaxppo writes it, made by hand for the report's tests (no training):
    config.yaml, metrics.csv (no episode ends in updates 1-2 and in every 4th update),
    summary.json."""
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.yaml"), "w") as f:
        f.write(f"env_id: {env_id}\nnum_envs: 4\nnum_steps: 16\n")
    runs = len(final)
    with open(os.path.join(path, "metrics.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["update", "run", "env_steps", "wall_s", "episodic_return", "episodes"])
        for u in range(1, updates + 1):
            for r in range(runs):
                ended = u > 2 and u % 4
                w.writerow([u, r, 64 * u, 0.1, f"{10 * u + r}" if ended else "", int(bool(ended))])
    if summary:
        s = {"env_id": env_id, "num_runs": runs, "final_return": list(final)}
        if settings:
            s |= {"settings": settings, "seeds": runs // len(settings)}
        with open(os.path.join(path, "summary.json"), "w") as f:
            json.dump(s, f)
    return str(path)
