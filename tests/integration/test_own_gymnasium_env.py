"""An SB3 user's own Gymnasium env, from the command line, end to end: a plain-NumPy
`gymnasium.Env` written in a module of the test's, registered with `gymnasium.register`, then
trained (`gymnasium/<module>:<id>`, or `--import <module>`), evaluated and resumed in fresh
processes (which must import the module again from what the run recorded), and compared with
SB3 on it. The misleading hints of before name the forms that work."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import yaml
from conftest import ROOT, run_cli

from jaxppo import Experiment, load_config

pytest.importorskip("gymnasium")
CARTPOLE = os.path.join(ROOT, "configs", "cartpole.yaml")
TINY = ["--set", "total_timesteps=2048", "--set", "num_envs=4", "--set", "num_steps=32",
        "--set", "hidden_sizes=[16,16]", "--no-progress"]
ENV_MODULE = '''
"""A corridor: step right (1) or left (0); the right end pays 1 and ends the episode."""
import gymnasium as gym
import numpy as np
from gymnasium import spaces


class GoToTarget(gym.Env):
    def __init__(self, size=4):
        self.size = size
        self.observation_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = spaces.Discrete(2)

    def _obs(self):
        return np.array([self.pos / self.size, 1.0], np.float32)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.pos = 0
        return self._obs(), {}

    def step(self, action):
        self.pos = max(-self.size, min(self.size, self.pos + (1 if int(action) == 1 else -1)))
        done = self.pos == self.size
        return self._obs(), float(done), done, False, {}


gym.register(id="ENV_ID", entry_point="MODULE:GoToTarget", max_episode_steps=40)
'''


def write_env(folder, module: str, env_id: str) -> None:
    (folder / f"{module}.py").write_text(textwrap.dedent(ENV_MODULE.replace("ENV_ID", env_id)
                                                         .replace("MODULE", module)))


def fresh(argv: list[str], cwd) -> subprocess.CompletedProcess:
    """`jaxppo *argv` in a new process (nothing registered but what it imports itself)."""
    env = {**os.environ, "PYTHONPATH": ROOT}
    return subprocess.run([sys.executable, "-m", "jaxppo.cli", *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.fixture
def here(tmp_path, monkeypatch):
    """A folder of the user's, the working directory, holding their env module."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_train_eval_resume_and_compare_from_the_cli(here, capsys):
    write_env(here, "corridor_env", "Corridor-v0")
    env_id = "gymnasium/corridor_env:Corridor-v0"
    code, err = run_cli(capsys, ["train", "--config", CARTPOLE, "--set", f"env_id={env_id}",
                                 *TINY, "--logdir", "runs", "--run-name", "a"])
    assert code == 0, err
    with open(here / "runs" / "a" / "config.yaml", encoding="utf-8") as f:
        assert yaml.safe_load(f)["env_id"] == env_id
    p = fresh(["eval", "runs/a", "--episodes", "2"], here)  # imports corridor_env by itself
    assert p.returncode == 0, p.stderr[-2000:]
    assert "return" in p.stdout
    # a run stopped half-way resumes in a fresh process
    config = load_config(CARTPOLE, {"env_id": env_id, "total_timesteps": 2048, "num_envs": 4,
                                    "num_steps": 32, "hidden_sizes": [16, 16]})
    Experiment(config, logdir="runs", run_name="stopped", progress=False, chunk_updates=4,
               callbacks=[lambda e: e.update < 8]).run()
    p = fresh(["train", "--resume", "runs/stopped", "--no-progress"], here)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "final return" in p.stdout
    # side by side with SB3 on the same env, the SB3 side in processes of its own (its
    # SubprocVecEnv: the user's module imported in each worker and in the memory check's child;
    # DummyVecEnv makes the env by the same gym.make("module:id"))
    pytest.importorskip("stable_baselines3")
    code, err = run_cli(capsys, ["compare", "--config", CARTPOLE, "--set", f"env_id={env_id}",
                                 "--set", "num_envs=4", "--set", "num_steps=32",
                                 "--set", "hidden_sizes=[16,16]", "--steps", "1024",
                                 "--repeats", "1", "--systems", "jaxppo,sb3-subproc",
                                 "--out", "cmp"])
    assert code == 0, err
    assert (here / "cmp" / "compare.md").is_file()


def test_import_flag_is_recorded_and_replayed(here, capsys):
    write_env(here, "corridor_mod", "Corridor2-v0")
    code, err = run_cli(capsys, ["train", "--config", CARTPOLE, "--import", "corridor_mod",
                                 "--set", "env_id=gymnasium/Corridor2-v0", *TINY,
                                 "--logdir", "runs", "--run-name", "b"])
    assert code == 0, err
    with open(here / "runs" / "b" / "config.yaml", encoding="utf-8") as f:
        assert yaml.safe_load(f)["env_imports"] == ["corridor_mod"]
    p = fresh(["eval", "runs/b", "--episodes", "2"], here)
    assert p.returncode == 0, p.stderr[-2000:]


def test_a_python_made_run_evaluates_from_the_cli_with_import(here, capsys):
    """A run trained from Python on an env its session registered (no env_imports recorded):
    the CLI says how to import the module, and does with --import."""
    write_env(here, "corridor_py", "Corridor3-v0")
    import corridor_py  # noqa: F401 - registers Corridor3-v0 in this process

    config = load_config(CARTPOLE, {"env_id": "gymnasium/Corridor3-v0", "total_timesteps": 1024,
                                    "num_envs": 4, "num_steps": 32, "hidden_sizes": [16, 16]})
    Experiment(config, logdir="runs", run_name="c", progress=False).run()
    p = fresh(["eval", "runs/c", "--episodes", "2"], here)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr[-2000:]
    assert len(p.stderr.strip().splitlines()) == 1
    assert "--import" in p.stderr and "gymnasium/<module>:<id>" in p.stderr
    p = fresh(["eval", "runs/c", "--episodes", "2", "--import", "corridor_py"], here)
    assert p.returncode == 0, p.stderr[-2000:]


@pytest.mark.parametrize("env_id, culprits", [
    ("gymnasium/NotRegistered-v0", ["gymnasium/<module>:<id>", "--import", "gymnasium.register"]),
    ("gymnasium/no_such_module_q:A-v0", ["cannot import 'no_such_module_q'", "PYTHONPATH"]),
    ("gymnasium/corridor_hint:Other-v0", ["'corridor_hint' registers no Gymnasium environment "
                                          "'Other-v0'"]),
    ("corridor_hint:GoToTarget", ["is a Gymnasium env", "registers it as 'CorridorHint-v0'",
                                  "env_id: gymnasium/corridor_hint:CorridorHint-v0"]),
])
def test_each_wrong_form_names_the_right_one(here, capsys, env_id, culprits):
    write_env(here, "corridor_hint", "CorridorHint-v0")
    code, err = run_cli(capsys, ["train", "--config", CARTPOLE, "--set", f"env_id={env_id}",
                                 *TINY, "--logdir", "runs"])
    assert code == 2 and len(err) == 1, err
    for c in culprits:
        assert c in err[0], (c, err[0])
    assert not (here / "runs").exists() or not os.listdir(here / "runs")


def test_a_module_that_fails_at_import_is_one_line(here, capsys):
    (here / "broken_envs.py").write_text("raise RuntimeError('boom at import')\n")
    code, err = run_cli(capsys, ["train", "--config", CARTPOLE, "--import", "broken_envs",
                                 *TINY, "--logdir", "runs"])
    assert code == 2 and len(err) == 1, err
    assert "--import: importing 'broken_envs' failed (RuntimeError: boom at import)" in err[0]


def test_a_constructor_argument_it_lacks_is_named_not_an_empty_list(here, capsys):
    """A registered env whose constructor needs an argument env_kwargs did not give: the
    line says what the constructor asked for (it used to read "does not take []")."""
    (here / "needs_arg.py").write_text(textwrap.dedent('''
        import gymnasium as gym
        class NeedsArg(gym.Env):
            def __init__(self, size):
                raise AssertionError("never built")
        gym.register(id="NeedsArg-v0", entry_point="needs_arg:NeedsArg")
        '''))
    code, err = run_cli(capsys, ["train", "--config", CARTPOLE,
                                 "--set", "env_id=gymnasium/needs_arg:NeedsArg-v0", *TINY,
                                 "--logdir", "runs"])
    assert code == 2 and len(err) == 1, err
    assert "[]" not in err[0] and "missing 1 required positional argument: 'size'" in err[0]
    assert "give the arguments its constructor needs in env_kwargs" in err[0]


def test_a_multibinary_env_trains_with_0_1_actions_in_its_own_dtype(here):
    """MultiBinary(3) is three two-way choices (it used to be taken for Discrete(3)): the env
    sees int8 vectors of 0s and 1s, and a run over it trains."""
    (here / "switches.py").write_text(textwrap.dedent('''
        import gymnasium as gym
        import numpy as np
        from gymnasium import spaces
        SEEN = []
        class Switches(gym.Env):
            def __init__(self):
                self.observation_space = spaces.Box(0.0, 1.0, (3,), np.float32)
                self.action_space = spaces.MultiBinary(3)
            def reset(self, seed=None, options=None):
                super().reset(seed=seed)
                self.t = 0
                return np.zeros(3, np.float32), {}
            def step(self, action):
                SEEN.append(np.array(action))
                self.t += 1
                reward = float(np.sum(action == np.array([1, 0, 1])))
                return action.astype(np.float32), reward, False, self.t >= 8, {}
        gym.register(id="Switches-v0", entry_point="switches:Switches")
        '''))
    config = load_config(CARTPOLE, {"env_id": "gymnasium/switches:Switches-v0",
                                    "total_timesteps": 512, "num_envs": 4, "num_steps": 32,
                                    "hidden_sizes": [16, 16]})
    result = Experiment(config, logdir=None, progress=False).run()
    assert result.status == "finished"
    import switches

    seen = np.stack(switches.SEEN)
    assert seen.shape[-1] == 3 and seen.dtype == np.int8
    assert set(np.unique(seen)) <= {0, 1} and len(np.unique(seen.reshape(-1, 3), axis=0)) > 1
