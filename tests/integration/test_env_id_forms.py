"""What an SB3 user types first for `env_id`: a bare Gymnasium id (`LunarLander-v3`, or an own
`Thermostat-v0` registered by `--import`) is answered with its `gymnasium/` form (it used to
get "did you mean 'probe/Constant-v0'"), without importing Gymnasium for a typo; a Gymnasium
class named as `module:Class` is pointed at the id it is registered under (it used to suggest
an unrelated `MyEnv-v0`); the config reference's `env_id` row names every form there is."""

import os
import subprocess
import sys
import textwrap

import pytest
from conftest import ROOT, run_cli
from test_startup import HEAVY

from jaxppo.config.reference import config_reference
from jaxppo.envs.registry import CUSTOM_PREFIX, HOST_SOURCES, PROBE_PREFIX, SOURCES

CARTPOLE = os.path.join(ROOT, "configs", "cartpole.yaml")
THERMOSTAT = '''
import gymnasium as gym
import numpy as np
from gymnasium import spaces


class Thermostat(gym.Env):
    def __init__(self):
        self.observation_space = spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.action_space = spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(1, np.float32), {}

    def step(self, action):
        return np.zeros(1, np.float32), 0.0, False, True, {}


class Unregistered(Thermostat):
    pass


gym.register(id="Thermostat-v0", entry_point="thermo_envs:Thermostat")
'''


@pytest.fixture
def here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "thermo_envs.py").write_text(textwrap.dedent(THERMOSTAT))
    return tmp_path


def one_line(capsys, env_id, *extra):
    code, err = run_cli(capsys, ["train", "--config", CARTPOLE, *extra, "--set",
                                 f"env_id={env_id}", "--no-progress", "--logdir", "runs"])
    assert code == 2 and len(err) == 1, err
    return err[0]


def test_an_own_bare_gymnasium_id_is_answered_with_its_gymnasium_form(here, capsys):
    line = one_line(capsys, "Thermostat-v0", "--import", "thermo_envs")
    assert "env_id: gymnasium/Thermostat-v0" in line and "probe/" not in line, line
    assert not (here / "runs").exists()


def test_a_gymnasium_class_is_pointed_at_the_id_it_is_registered_under(here, capsys):
    line = one_line(capsys, "thermo_envs:Thermostat")
    assert "registers it as 'Thermostat-v0'; use env_id: gymnasium/thermo_envs:Thermostat-v0" \
        in line, line
    line = one_line(capsys, "thermo_envs:Unregistered")
    assert "MyEnv" not in line and "id='Unregistered-v0'" in line, line
    assert "env_id: gymnasium/thermo_envs:Unregistered-v0" in line, line


def test_a_builtin_bare_gymnasium_id_is_answered_without_importing_a_suite():
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        import sys
        from jaxppo.cli import main
        code = main(["train", "--config", {CARTPOLE!r}, "--set", "env_id=LunarLander-v3",
                     "--no-progress"])
        print(code, sorted(m for m in {HEAVY!r} if m in sys.modules))
    """)], capture_output=True, text=True, cwd=ROOT, timeout=300,
        env={**os.environ, "PYTHONPATH": ROOT})
    assert out.stdout.split("\n")[-2] == "2 []", (out.stdout, out.stderr)
    err = out.stderr.strip().splitlines()
    assert len(err) == 1 and "env_id: gymnasium/LunarLander-v3" in err[0], err


def test_the_env_id_row_names_every_form():
    row = next(r for r in config_reference() if r[0] == "env_id")[3]
    for prefix in (*SOURCES, *HOST_SOURCES, PROBE_PREFIX, CUSTOM_PREFIX):
        assert f"`{prefix}" in row, prefix
    for form in ("`CartPole-v1`", "`mypkg.module:MyEnv`", "`gymnasium/<module>:<id>`",
                 "`jaxppo.register_env`"):
        assert form in row, form

