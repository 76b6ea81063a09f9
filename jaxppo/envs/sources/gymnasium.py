"""`gymnasium/<id>`: any registered Gymnasium environment, vectorised with Gymnasium's own vector
API on the host, as a `HostSource` (`protocol.py`) that the bridge (`host.py`) steps from
inside the compiled training program.

    env_id: gymnasium/CartPole-v1
    env_id: gymnasium/myenvs:GoToTarget-v0   # Gymnasium's own `module:id`: myenvs is imported
                                             # first (it calls gymnasium.register)
    env_kwargs: {vectorization: sync}    # or async (one subprocess per env); the other keys
                                         # go to gymnasium.make (e.g. max_episode_steps)

The vector env runs with `autoreset_mode=SAME_STEP`: an env whose episode ended returns its
reset observation at once and the true last one in `info["final_obs"]`, which is the contract
exactly (no auto-reset transition with an ignored action reaches anyone). Termination and
truncation stay apart, as Gymnasium reports them; `score = reward`, `game_over = done`.
Discrete (any `start`), MultiDiscrete and Box actions; Box observations (uint8 images stay
uint8); Dict observations (SB3's `MultiInputPolicy`), and Discrete, MultiDiscrete, MultiBinary
or Tuple ones, read as one array in the documented order of `flatten.py` (`obs_field` picks
Dict keys). Gymnasium is imported only when a `gymnasium/` id is asked for.
"""

from __future__ import annotations

import difflib
import sys
import warnings
from typing import Any

import numpy as np

from jaxppo.envs.imports import import_env_modules
from jaxppo.envs.sources.flatten import ObsReader
from jaxppo.envs.sources.protocol import HostStep
from jaxppo.envs.sources.suite import kwargs_error
from jaxppo.errors import ConfigError

PREFIX = "gymnasium/"
SUITE = "Gymnasium"
INSTALL_HINT = "pip install 'jaxppo[gymnasium]'"
VECTORIZATION = ("sync", "async")
RENDER_KWARGS = {"render_mode": "rgb_array"}
"""What the bridge adds to `kwargs` for a source that draws frames (`jaxppo eval --gif`)."""


def _gym():
    """The gymnasium package, or one line naming the extra to install."""
    try:
        import gymnasium
    except ImportError:
        raise ConfigError(f"config key 'env_id': gymnasium/ ids need Gymnasium; "
                          f"{INSTALL_HINT}") from None
    return gymnasium


def env_ids() -> list[str]:
    """Every id registered with Gymnasium now (register yours before the config is built)."""
    return sorted(_gym().registry)


REGISTER_HINT = ("register it in a module of yours with gymnasium.register(id=..., "
                 "entry_point=...) and name the module: env_id: gymnasium/<module>:<id>, or "
                 "--import <module> (config key env_imports)")


def suggest_id(env_id: str) -> str | None:
    """`gymnasium/<id>` for a bare id that Gymnasium registers: one of its own, or one a module
    of yours registered (`--import myenvs`: Gymnasium is then imported already). A bare id is
    answered, not trained as the Gymnasium env: bare ids name gymnax and JAX envs, compiled
    with the learner, and the same id (`CartPole-v1`) must not change meaning with what a
    process imported. Gymnasium is not imported here (a typo stays fast): gymnax, which the
    bare ids were looked up in, imported it already; never raises."""
    registry = getattr(sys.modules.get("gymnasium"), "registry", None)
    try:
        known = registry is not None and env_id in registry
    except Exception:  # noqa: BLE001 - a suggestion never fails the line it helps
        known = False
    return PREFIX + env_id if known else None


def registered_as(entry_point: str) -> list[str]:
    """The ids Gymnasium has for the class `module:Name` (`[]` where Gymnasium was never
    imported: nothing registered it), for the hint of `env_id: myenvs:Thermostat`."""
    registry = getattr(sys.modules.get("gymnasium"), "registry", None) or {}
    module, _, name = entry_point.partition(":")
    found = []
    for gid, spec in list(registry.items()):
        ep = getattr(spec, "entry_point", None)
        if ep == entry_point or (callable(ep) and getattr(ep, "__name__", None) == name
                                 and getattr(ep, "__module__", None) == module):
            found.append(gid)
    return sorted(found)


def split_id(name: str) -> tuple[str, str]:
    """`(module, id)` of Gymnasium's `module:id` form; `("", id)` for a plain id."""
    module, _, gid = name.rpartition(":")
    return module, gid


def check_id(name: str) -> None:
    """One line for an id Gymnasium does not know (after importing its module, in the
    `module:id` form), with close matches or the way to register one."""
    module, gid = split_id(name)
    if module:
        import_env_modules([module], f"config key 'env_id': {PREFIX + name!r}")
    ids = env_ids()
    if gid in ids:
        return
    if module:
        raise ConfigError(f"config key 'env_id': module {module!r} registers no Gymnasium "
                          f"environment {gid!r}; call gymnasium.register(id={gid!r}, "
                          "entry_point=...) in it")
    close = difflib.get_close_matches(name, ids, n=3, cutoff=0.5)
    hint = (f"did you mean {', '.join(repr(PREFIX + c) for c in close)}? Or, for an env of "
            f"your own, {REGISTER_HINT}" if close else REGISTER_HINT)
    raise ConfigError(f"config key 'env_id': unknown {SUITE} environment {PREFIX + name!r}; "
                      f"{hint}")


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}".rstrip(": ")


class GymnasiumSource:
    """M Gymnasium envs in one `SyncVectorEnv` / `AsyncVectorEnv`, as a `HostSource`."""

    def __init__(self, name: str, num_envs: int, kwargs: dict[str, Any], evaluation: bool,
                 obs_field: str | None = None):
        gym = _gym()
        from gymnasium.vector import AutoresetMode

        kwargs = dict(kwargs)
        mode = kwargs.pop("vectorization", "sync")
        self.env_id = PREFIX + name
        if mode not in VECTORIZATION:
            raise ConfigError(f"config key 'env_kwargs': vectorization {mode!r} for "
                              f"{self.env_id!r}; use one of {list(VECTORIZATION)}")
        self.num_envs = num_envs
        del evaluation  # Gymnasium envs are measured as they are trained
        try:
            with warnings.catch_warnings():
                # JAX warns at every fork; an async pool's workers only step the Gymnasium env
                # (no JAX in them), so the warning is about a deadlock that cannot happen here
                warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called",
                                        category=RuntimeWarning)
                # `eval --gif` asks every env for frames; one that cannot draw is told once, in
                # jaxppo's line (`render`), not by Gymnasium's raw warning as well
                warnings.filterwarnings("ignore", message=r".*initiali[sz]ed with render_mode",
                                        category=UserWarning)
                self.vec = gym.make_vec(name, num_envs, vectorization_mode=mode,
                                        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
                                        **kwargs)
        except gym.error.DependencyNotInstalled as e:
            raise ConfigError(f"environment {self.env_id!r} needs a package that is not "
                              f"installed ({_first_line(e)})") from None
        except TypeError as e:
            raise kwargs_error(repr(self.env_id), kwargs, e) from None
        except Exception as e:  # noqa: BLE001 - the env's own constructor failed: one line
            raise ConfigError(f"environment {self.env_id!r}: building {num_envs} of it failed "
                              f"({_first_line(e)}); call gymnasium.make({name!r}) to see the "
                              "full traceback") from None
        self.observation_space = self.vec.single_observation_space
        self.action_space = self.vec.single_action_space
        self._reader: ObsReader | None = None
        self._check_spaces(obs_field)
        self._start = int(getattr(self.action_space, "start", 0) or 0) if hasattr(
            self.action_space, "n") else 0
        # integer actions reach the env in its space's own dtype (MultiBinary's int8, ...)
        dtype = np.dtype(getattr(self.action_space, "dtype", None) or np.float32)
        self._action_dtype = dtype if np.issubdtype(dtype, np.integer) else None
        spec = getattr(self.vec, "spec", None) or gym.spec(split_id(name)[1])
        limit = kwargs.get("max_episode_steps", getattr(spec, "max_episode_steps", None))
        self.max_episode_steps = int(limit) if limit else None

    def _check_spaces(self, obs_field: str | None) -> None:
        obs = self.observation_space
        if type(obs).__name__ != "Box" or obs_field:
            try:
                self._reader = ObsReader(obs, obs_field, f"environment {self.env_id!r}")
            except ConfigError:
                self.close()
                raise
            self.observation_space = self._reader.space
        nvec = getattr(self.action_space, "nvec", None)
        start = getattr(self.action_space, "start", None)
        if nvec is not None and start is not None and np.any(np.asarray(start) != 0):
            self.close()
            raise ConfigError(f"environment {self.env_id!r}: a MultiDiscrete action space "
                              "with a nonzero start; give it start=0")

    def reset(self, seed) -> np.ndarray:
        seeds = np.broadcast_to(np.asarray(seed, np.int64), (self.num_envs,)) if np.ndim(
            seed) else int(seed) + np.arange(self.num_envs)
        obs, _ = self.vec.reset(seed=[int(s) for s in seeds])
        return self._read(obs)

    @property
    def obs_layout(self) -> list[dict] | None:
        """Which observation field fills which columns (`ObsReader.layout`); None for a Box."""
        return None if self._reader is None else self._reader.layout

    def _read(self, obs: Any) -> np.ndarray:
        return np.asarray(obs) if self._reader is None else self._reader.batch(obs)

    def step(self, action: np.ndarray) -> HostStep:
        if self._start:
            action = action + self._start
        if self._action_dtype is not None:
            action = np.asarray(action).astype(self._action_dtype, copy=False)
        obs, reward, terminated, truncated, info = self.vec.step(action)
        obs = self._read(obs)
        final_obs = obs.copy()
        ended = info.get("_final_obs")
        if ended is not None and np.any(ended):
            for i in np.flatnonzero(ended):
                last = info["final_obs"][i]
                final_obs[i] = last if self._reader is None else self._reader.one(last)
        reward = np.asarray(reward, np.float32)
        terminated, truncated = np.asarray(terminated, bool), np.asarray(truncated, bool)
        return HostStep(obs, final_obs, reward, terminated, truncated, reward,
                        terminated | truncated)

    def render(self, index: int) -> np.ndarray:
        how = ("give its class metadata = {'render_modes': ['rgb_array']}, take render_mode in "
               "__init__ and return an RGB array from render()")
        if getattr(self.vec, "render_mode", None) != "rgb_array":
            raise NotImplementedError("it draws no frames: its render_mode stayed "
                                      f"{getattr(self.vec, 'render_mode', None)!r} when asked "
                                      f"for 'rgb_array' ({how})")
        frames = self.vec.render()
        if frames is None:
            raise NotImplementedError(f"it draws no frames: render() returned None ({how})")
        return np.asarray(frames[index], np.uint8)

    def close(self) -> None:
        vec = getattr(self, "vec", None)
        if vec is not None:
            self.vec = None
            vec.close()


def make_source(name: str, num_envs: int, kwargs: dict[str, Any],
                evaluation: bool = False, obs_field: str | None = None) -> GymnasiumSource:
    """`num_envs` copies of Gymnasium's `name`, vectorised (`kwargs`: see the module doc);
    `obs_field` picks keys of Dict observations (`flatten.ObsReader`)."""
    return GymnasiumSource(name, num_envs, kwargs, evaluation, obs_field)


TAKES_OBS_FIELD = True
"""`make_source` takes `obs_field` (a host suite without this member is given none)."""
