"""An SB3 user's Dict observations (`MultiInputPolicy`): a Gymnasium env whose observations are
a Dict trains, evaluates and resumes; its keys are read sorted, each sub-space flattened as
`gymnasium.spaces.flatten` does (checked against it); `obs_field` picks one key (`--set`
included, `*` too). They used to be refused ("jaxppo trains on Box observations")."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from conftest import ROOT, run_cli

from jaxppo import Experiment, export_policy, load_config
from jaxppo.config.load import parse_overrides
from jaxppo.envs.host import HostVecEnv
from jaxppo.envs.sources.flatten import ObsReader
from jaxppo.errors import ConfigError

gym = pytest.importorskip("gymnasium")
spaces = gym.spaces
CARTPOLE = os.path.join(ROOT, "configs", "cartpole.yaml")
TINY = ["--set", "total_timesteps=1024", "--set", "num_envs=4", "--set", "num_steps=32",
        "--set", "hidden_sizes=[16,16]", "--no-progress"]
KEY_DOOR = '''
"""A corridor whose observation is a Dict: where the agent is (a Box), which door is open (a
Discrete), and a key nobody needs (a MultiBinary). Step right (1) to the end: reward 1."""
import gymnasium as gym
import numpy as np
from gymnasium import spaces


class KeyDoor(gym.Env):
    def __init__(self, size=3):
        self.size = size
        self.observation_space = spaces.Dict({
            "pos": spaces.Box(-1.0, 1.0, (2,), np.float32),
            "door": spaces.Discrete(3, start=1),
            "bits": spaces.MultiBinary(2)})
        self.action_space = spaces.Discrete(2)

    def _obs(self):
        return {"pos": np.array([self.pos / self.size, 1.0], np.float32),
                "door": 1 + self.pos % 3, "bits": np.array([1, 0], np.int8)}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.pos = 0
        return self._obs(), {}

    def step(self, action):
        self.pos = max(0, min(self.size, self.pos + (1 if int(action) == 1 else -1)))
        done = self.pos == self.size
        return self._obs(), float(done), done, False, {}


gym.register(id="KeyDoor-v0", entry_point="key_door:KeyDoor", max_episode_steps=20)
'''


@pytest.fixture
def here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "key_door.py").write_text(textwrap.dedent(KEY_DOOR))
    import key_door  # noqa: F401 - registers KeyDoor-v0 in this process

    return tmp_path


def fresh(argv, cwd):
    env = {**os.environ, "PYTHONPATH": ROOT}
    return subprocess.run([sys.executable, "-m", "jaxppo.cli", *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


NESTED = spaces.Dict({"b": spaces.Box(0, 255, (2, 2), np.uint8), "a": spaces.Discrete(3),
                      "c": spaces.Tuple((spaces.MultiDiscrete([2, 3]), spaces.Box(-1, 1, (1,)))),
                      "d": spaces.Dict({"y": spaces.MultiBinary(3), "x": spaces.Discrete(2,
                                                                                        start=-1)})})


def test_the_flat_order_is_gymnasiums_sorted_keys_each_flattened():
    NESTED.seed(3)
    reader = ObsReader(NESTED, None, "environment 'x'")
    samples = [NESTED.sample() for _ in range(4)]
    want = np.stack([spaces.flatten(NESTED, s) for s in samples]).astype(np.float32)
    batch = {k: np.stack([s[k] for s in samples]) for k in ("a", "b")}
    batch["c"] = tuple(np.stack([s["c"][i] for s in samples]) for i in range(2))
    batch["d"] = {k: np.stack([s["d"][k] for s in samples]) for k in ("x", "y")}
    assert reader.shape == (spaces.flatdim(NESTED),) == (3 + 4 + 5 + 1 + 2 + 3,)
    np.testing.assert_array_equal(reader.batch(batch), want)
    np.testing.assert_array_equal(reader.one(samples[2]), want[2])
    # the layout an export's sidecar carries: each field's columns, in the flat order
    assert [(f["field"], f["space"]) for f in reader.layout] == [
        ("a", "Discrete"), ("b", "Box"), ("c", "Tuple"), ("d", "Dict")]
    for f in reader.layout:
        start, end = f["columns"]
        field = np.stack([spaces.flatten(NESTED[f["field"]], s[f["field"]]) for s in samples])
        np.testing.assert_array_equal(reader.batch(batch)[:, start:end], field)


def test_obs_field_keeps_one_box_as_it_is_and_flattens_the_rest():
    image = ObsReader(NESTED, "b", "environment 'x'")
    assert image.shape == (2, 2) and image.dtype == np.uint8
    assert image.layout == [{"field": "b", "space": "Box", "kept": True}]
    two = ObsReader(NESTED, "d, a", "environment 'x'")  # joined in the order given
    assert two.shape == (5 + 3,)
    assert two.layout == [{"field": "d", "space": "Dict", "columns": [0, 5]},
                          {"field": "a", "space": "Discrete", "columns": [5, 8]}]
    assert ObsReader(NESTED, "*", "environment 'x'").shape == (spaces.flatdim(NESTED),)
    assert ObsReader(spaces.Discrete(4), None, "environment 'x'").shape == (4,)  # one-hot
    with pytest.raises(ConfigError, match=r"no key 'z'; use one of a, b, c, d"):
        ObsReader(NESTED, "a,z", "environment 'x'")
    with pytest.raises(ConfigError, match="gives Discrete observations, so there is no field"):
        ObsReader(spaces.Discrete(4), "a", "environment 'x'")
    with pytest.raises(ValueError, match="outside its space's 0..2"):
        ObsReader(spaces.Discrete(3), None, "x").batch(np.array([0, 3]))


def test_obs_field_star_is_accepted_from_set():
    """`*` is YAML's alias mark: `--set obs_field=*` could not be parsed."""
    assert parse_overrides(["obs_field=*", "obs_field=pos"]) == {"obs_field": "pos"}
    assert parse_overrides(["obs_field=*"]) == {"obs_field": "*"}
    with pytest.raises(ConfigError, match="--set lr: cannot parse value"):
        parse_overrides(["lr=*"])


def test_a_host_env_picks_one_key_and_steps_it(here):
    env = HostVecEnv("gymnasium/KeyDoor-v0", 2, obs_field="door")
    assert env.obs_shape == (3,)  # Discrete(3, start=1): one-hot of door - 1
    obs = env.source.reset(0)
    np.testing.assert_array_equal(obs, [[1, 0, 0]] * 2)
    step = env.source.step(np.array([1, 1]))
    np.testing.assert_array_equal(step.obs, [[0, 1, 0]] * 2)
    env.close()
    with pytest.raises(ConfigError, match=r"'obs_field'.*no key 'key'; use one of bits, door, pos"):
        HostVecEnv("gymnasium/KeyDoor-v0", 2, obs_field="key")
    with pytest.raises(ConfigError, match="gives Box observations, so there is no field .pos."):
        HostVecEnv("gymnasium/CartPole-v1", 2, obs_field="pos")


@pytest.mark.parametrize("vectorization", ["sync", "async"])
def test_a_final_observation_is_flattened_too(here, vectorization):
    """Where an episode ends, the true last observation comes per env from `info`."""
    env = HostVecEnv("gymnasium/KeyDoor-v0", 1, env_kwargs={"vectorization": vectorization})
    src = env.source
    assert env.obs_shape == (2 + 3 + 2,)  # bits, door (one-hot), pos
    src.reset(0)
    for _ in range(2):
        src.step(np.array([1]))
    last = src.step(np.array([1]))
    assert last.terminated[0]
    np.testing.assert_array_equal(last.final_obs[0], [1, 0, 1, 0, 0, 1, 1])  # pos 3: door 1
    np.testing.assert_array_equal(last.obs[0], [1, 0, 1, 0, 0, 0, 1])  # reset: pos 0
    env.close()


def test_dict_obs_env_trains_evaluates_and_resumes_with_obs_field(here, capsys):
    code, err = run_cli(capsys, ["train", "--config", CARTPOLE, "--import", "key_door",
                                 "--set", "env_id=gymnasium/KeyDoor-v0", "--set", "obs_field=*",
                                 *TINY, "--logdir", "runs", "--run-name", "all"])
    assert code == 0, err
    # an own env that draws nothing: jaxppo's one line says so, without Gymnasium's raw
    # warning, and no longer that it "was not made with render_mode='rgb_array'" (it was)
    p = fresh(["eval", "runs/all", "--episodes", "2", "--gif", "x.gif"], here)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "--gif: no renderer for gymnasium/KeyDoor-v0: it draws no frames" in p.stderr
    assert "WARN" not in p.stderr and "was not made with" not in p.stderr, p.stderr
    assert not (here / "x.gif").exists()
    # the export's sidecar says how to build the model's input from the Dict, without jaxppo
    side = json.loads(open(export_policy("runs/all", "jax", seed=0).sidecar).read())
    assert side["observation"]["obs_field"] == "*"
    assert side["observation"]["shape"] == [7]
    assert side["observation"]["from_fields"] == [
        {"field": "bits", "space": "MultiBinary", "columns": [0, 2]},
        {"field": "door", "space": "Discrete", "columns": [2, 5]},
        {"field": "pos", "space": "Box", "columns": [5, 7]}]
    assert "one-hot" in side["observation"]["flattened"]
    config = load_config(CARTPOLE, {"env_id": "gymnasium/KeyDoor-v0", "obs_field": "pos",
                                    "env_imports": ["key_door"], "total_timesteps": 1024,
                                    "num_envs": 4, "num_steps": 32, "hidden_sizes": [16, 16]})
    Experiment(config, logdir="runs", run_name="stopped", progress=False, chunk_updates=2,
               callbacks=[lambda e: e.update < 4]).run()
    p = fresh(["train", "--resume", "runs/stopped", "--no-progress"], here)
    assert p.returncode == 0, p.stderr[-2000:]
    p = fresh(["eval", "runs/stopped", "--episodes", "2"], here)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "KeyDoor-v0" in p.stdout


CUE = '''
import gymnasium as gym
import numpy as np
from gymnasium import spaces


class Cue(gym.Env):
    """One step: the Dict's `cue` (a Discrete) says which action pays 1; `noise` hides it
    from a policy that reads only the wrong key."""

    def __init__(self):
        self.observation_space = spaces.Dict({"noise": spaces.Box(-1.0, 1.0, (3,), np.float32),
                                              "cue": spaces.Discrete(2)})
        self.action_space = spaces.Discrete(2)

    def _obs(self):
        self.cue = int(self.np_random.integers(2))
        return {"noise": self.np_random.uniform(-1, 1, 3).astype(np.float32), "cue": self.cue}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return self._obs(), {}

    def step(self, action):
        reward = float(int(action) == self.cue)
        return self._obs(), reward, True, False, {}


gym.register(id="Cue-v0", entry_point="cue_env:Cue")
'''


@pytest.mark.slow
def test_a_policy_learns_from_the_key_its_dict_observation_holds(tmp_path, monkeypatch):
    """A one-step bandit whose answer is only in the Dict's Discrete `cue`: learned (chance
    is 0.5) when the flattened observation holds it, not when obs_field picks `noise`."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "cue_env.py").write_text(textwrap.dedent(CUE))
    finals = {}
    for field in ("*", "noise"):
        config = load_config(CARTPOLE, {"env_id": "gymnasium/Cue-v0", "env_imports": ["cue_env"],
                                        "obs_field": field, "total_timesteps": 8192,
                                        "num_envs": 8, "num_steps": 32, "lr": 3e-3,
                                        "hidden_sizes": [32, 32]})
        result = Experiment(config, logdir="runs", progress=False, tensorboard=False).run()
        finals[field] = float(np.mean(result.final_return))
    assert finals["*"] > 0.85 and finals["noise"] < 0.7, finals
