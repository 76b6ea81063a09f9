"""EnvPool's C++ environment pools as a host source (`env_id: envpool/<task>`): Atari
(`envpool/Breakout-v5`), MuJoCo (`envpool/HalfCheetah-v4`) and the rest of `envpool.list_all_envs()`
with array observations and Discrete or Box actions. The bridge (`host.py`) steps it from inside
the compiled program; this module only speaks EnvPool's Gymnasium API (`protocol.py` is the
contract).

What EnvPool does at an episode's end (checked by experiment on envpool 1.2.5, and by
tests/integration/test_envpool_env.py): the step that ends an episode reports it (`terminated` or, at
`max_episode_steps`, `truncated`) with the true last observation; the pool then resets that env
on its NEXT step, which ignores the action and returns the first observation with reward 0. This
source takes that reset step at once, for the ended envs only (EnvPool's sync pools step a subset
by `env_id`), so the learner never sees it: `final_obs` is the last observation and `obs` the
reset one, as `VecEnv` reports a JAX env's end.

Atari follows the published PPO setting (CleanRL's `ppo_atari_envpool.py`, EnvPool's defaults):
84x84 gray frames, 4 stacked, frame skip 4, up to 30 no-op starts, FIRE at reset, no sticky
actions, a 27,000-step (108,000-frame) limit, and for training `episodic_life` and
`reward_clip`. Then a lost life is terminal for the learner (its reset step keeps the game and
the frame stack, presses FIRE), and the reward trained on is clipped to its sign. The logged
return is the game's score: `score` is EnvPool's `info["reward"]` (unclipped) and `game_over`
its `info["terminated"]` (the game, all lives) or the time limit. `evaluation=True` turns both
off. Frames go to the learner as uint8 (H, W, C): EnvPool's (C, H, W) stack, transposed.

MuJoCo tasks give float64 observations (passed on as float32) and take float64 actions (cast
here, and clipped to the space: EnvPool clips the torques but charges its control cost on the
action as given); EnvPool truncates at the task's time limit (1,000 steps), which bootstraps.

`env_kwargs` go to `envpool.make` (its config fields: `episodic_life`, `reward_clip`,
`stack_num`, `num_threads`, `max_episode_steps`, ...); jaxppo owns `num_envs` and the seeds.
EnvPool is an optional dependency (`pip install 'jaxppo[envpool]'`); its ROMs and MuJoCo models
come with it (the `envpool-assets` packages).
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import io
import re
import warnings
from types import ModuleType
from typing import Any

import numpy as np

from jaxppo.envs.sources.protocol import HostStep
from jaxppo.errors import ConfigError

PREFIX = "envpool/"
SUITE = "EnvPool"
INSTALL_HINT = "pip install 'jaxppo[envpool]'"
ASSETS_HINT = ("pip install --force-reinstall 'envpool-assets>=0.3,<0.4' (and unset "
               "ENVPOOL_ASSETS_PATH if it points elsewhere)")

ATARI_TRAINING = {"episodic_life": True, "reward_clip": True}
"""jaxppo's training defaults for Atari on top of EnvPool's own (which has both off)."""
ATARI_EVALUATION = {"episodic_life": False, "reward_clip": False}
"""How a score is measured: whole games, the game's own points (overrides env_kwargs)."""

OWNED = ("num_envs", "batch_size", "seed", "env_seed", "gym_reset_return_info", "base_path",
         "max_num_players", "task")
"""EnvPool settings jaxppo sets itself: the pool is synchronous, one env per slot, seeded from
the run's seed; the env id names the task (an Atari `task` without a ROM exits the process)."""

_AT_LEAST = {"num_threads": 0, "thread_affinity_offset": -1, "max_episode_steps": 1,
             "stack_num": 1, "frame_skip": 1, "noop_max": 1, "img_height": 1, "img_width": 1,
             "frame_stack": 1}
"""Integer settings EnvPool takes unchecked and dies on (the process aborts in C++) below
these bounds, found by trying: `noop_max: 0`, `stack_num: 0`, `img_height: 0`,
`num_threads: -3` all kill the interpreter."""

_SEED_RANGE = 2**31  # EnvPool's seeds are int32


def _envpool(env_id: str = "") -> ModuleType:
    """`envpool`, or one ConfigError line: the extra is missing, or its assets are (EnvPool
    lists ROM and map folders at import and raises FileNotFoundError without them)."""
    try:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return importlib.import_module("envpool")
    except ImportError as e:
        what = f"{env_id!r} needs {SUITE}" if env_id else f"{SUITE} is needed"
        raise ConfigError(f"config key 'env_id': {what}, which is not installed ({e}); "
                          f"install it with: {INSTALL_HINT}") from None
    except OSError as e:
        raise ConfigError(f"config key 'env_id': {SUITE}'s assets (Atari ROMs, maps, models) "
                          f"are missing ({e}); reinstall them: {ASSETS_HINT}") from None


def env_ids() -> list[str]:
    """EnvPool's task names (`Breakout-v5`), without the prefix, as the registry lists them."""
    return list(_envpool().list_all_envs())


def check_id(name: str) -> None:
    """`name` is one of EnvPool's tasks, or one line (close matches; the ROM folder for an
    Atari-looking id; the missing extra)."""
    names = _envpool(PREFIX + name).list_all_envs()
    if name not in names:
        raise _unknown(PREFIX + name, names)


def suggest_id(env_id: str) -> str | None:
    """`envpool/<id>` for an Atari or MuJoCo id typed without the prefix (`Breakout-v5`,
    `HalfCheetah-v4`). Other version tags are not looked up: it would import EnvPool (~2 s) for
    every typo of a gymnax id (`Cartpole-v1`)."""
    if not re.fullmatch(r"[A-Za-z0-9]+-v[345]", env_id):
        return None
    try:
        names = _envpool().list_all_envs()
    except ConfigError:
        return None
    return PREFIX + env_id if env_id in names else None


def _unknown(env_id: str, names: list[str]) -> ConfigError:
    """One line for an id EnvPool does not list, with close matches; for an Atari-looking id,
    also where the ROMs are (EnvPool registers one `<Game>-v5` per ROM file it finds there, so
    a game whose ROM is absent is simply not listed)."""
    close = difflib.get_close_matches(env_id, [PREFIX + n for n in names], n=3, cutoff=0.5)
    hint = (f"did you mean {', '.join(repr(c) for c in close)}?" if close
            else "envpool.list_all_envs() lists them")
    if re.fullmatch(r"[A-Z][A-Za-z0-9]*-v5", env_id[len(PREFIX):]):
        rom_dir = importlib.import_module("envpool.atari.registration").atari_rom_path
        hint += f" ({SUITE} has one <Game>-v5 per ROM in {rom_dir})"
    return ConfigError(f"config key 'env_id': unknown {SUITE} environment {env_id!r}; {hint}")


def _family(envpool: ModuleType, task: str) -> str:
    """`atari`, `mujoco` (Gymnasium's MuJoCo tasks) or `other`, from EnvPool's registry."""
    import_path = envpool.registration.registry.specs[task][0]
    return {"envpool.atari": "atari", "envpool.mujoco.gym": "mujoco"}.get(import_path, "other")


def _options(envpool: ModuleType, task: str, kwargs: dict[str, Any], evaluation: bool
             ) -> dict[str, Any]:
    """The `envpool.make` settings: jaxppo's defaults, then `kwargs` (checked against the
    task's config fields), then what evaluation requires."""
    env_id = PREFIX + task
    fields = [f for f in envpool.make_spec(task).config._fields if f not in OWNED]
    for key, value in kwargs.items():
        if key in OWNED:
            raise ConfigError(f"config key 'env_kwargs': {key!r} is set by jaxppo for "
                              f"{env_id!r} (num_envs and the seed come from the config and the "
                              "run's seed, the task from env_id; the pool is synchronous); "
                              "remove it")
        if key not in fields:
            close = difflib.get_close_matches(key, fields, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigError(f"config key 'env_kwargs': {env_id!r} takes no {key!r}; "
                              f"{hint}it takes {', '.join(fields)}")
        low = _AT_LEAST.get(key)
        if low is not None and (isinstance(value, bool) or not isinstance(value, int)
                                or value < low):
            raise ConfigError(f"config key 'env_kwargs': {key} for {env_id!r} must be an "
                              f"integer >= {low}, got {value!r}")
    atari = _family(envpool, task) == "atari"
    options = {**(ATARI_TRAINING if atari else {}), **kwargs}
    if atari and evaluation:
        options.update(ATARI_EVALUATION)
    return options


def make_source(name: str, num_envs: int, kwargs: dict[str, Any], evaluation: bool
                ) -> EnvPoolSource:
    """The module's entry point: `num_envs` envs of EnvPool's task `name` (e.g. `Breakout-v5`)
    as a `HostSource`. Everything that can be refused is refused here, in one line, before the
    bridge compiles anything, by a pool of one env; the pool of `num_envs` comes at the first
    `reset(seed)`, seeded from the run's seed."""
    check_id(name)
    envpool = _envpool(PREFIX + name)
    if isinstance(num_envs, bool) or not isinstance(num_envs, int | np.integer) or num_envs < 1:
        raise ConfigError(f"config key 'num_envs': {SUITE} needs at least one environment, got "
                          f"{num_envs!r}")
    return EnvPoolSource(envpool, name, int(num_envs),
                         _options(envpool, name, dict(kwargs), evaluation))


def _space(space: Any, what: str, env_id: str) -> None:
    import gymnasium

    kinds = ((gymnasium.spaces.Box,) if what == "observation" else
             (gymnasium.spaces.Box, gymnasium.spaces.Discrete))
    if not isinstance(space, kinds):
        takes = "array observations" if what == "observation" else "Discrete or Box actions"
        raise ConfigError(f"config key 'env_id': {env_id!r} has a {type(space).__name__} "
                          f"{what} space; jaxppo's {SUITE} source takes {takes}")


class EnvPoolSource:
    """`num_envs` envs of one EnvPool task, stepped together (`protocol.HostSource`)."""

    def __init__(self, envpool: ModuleType, task: str, num_envs: int, options: dict[str, Any]):
        import gymnasium

        self.env_id = PREFIX + task
        self.num_envs = num_envs
        self._envpool = envpool
        self._task = task
        self._options = options
        self._family = _family(envpool, task)
        self._pool: Any = None
        self._fresh_seed: tuple[int, ...] | None = None  # seeds of a pool built, not yet reset
        # A pool of one env refuses what EnvPool refuses (a setting, a missing ROM) and gives
        # the spaces, before anything compiles; the run's first reset builds the pool of
        # `num_envs` with its own seeds (seeds are fixed at `make`). A full pool here would be
        # built twice: ~4 s more for 64 Atari envs.
        self._build(self._seeds(0)[:1])
        obs_space = self._pool.observation_space
        _space(obs_space, "observation", self.env_id)
        _space(self._pool.action_space, "action", self.env_id)
        # Image stacks come as (C, H, W); jaxppo's conv torsos read (H, W, C).
        self._chw = obs_space.dtype == np.uint8 and len(obs_space.shape) == 3
        if self._chw:
            c, h, w = obs_space.shape
            self.observation_space = gymnasium.spaces.Box(0, 255, (h, w, c), np.uint8)
        else:
            dtype = np.uint8 if obs_space.dtype == np.uint8 else np.float32
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # float64 bounds lowered to float32
                self.observation_space = gymnasium.spaces.Box(
                    obs_space.low, obs_space.high, obs_space.shape, dtype)
        act = self._pool.action_space
        self._act_dtype = act.dtype
        self._bounds = None
        if isinstance(act, gymnasium.spaces.Discrete):
            self.action_space = gymnasium.spaces.Discrete(int(act.n))
        else:
            self._bounds = (act.low, act.high)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self.action_space = gymnasium.spaces.Box(act.low, act.high, act.shape,
                                                         np.float32)
        self.max_episode_steps = int(self._pool.spec.config.max_episode_steps)

    def _seeds(self, seed: int | np.ndarray) -> tuple[int, ...]:
        """Env i's seed: `seed + i` for an int, `seed[i]` for the bridge's array [M]."""
        if np.ndim(seed) == 0:
            return tuple((int(seed) + i) % _SEED_RANGE for i in range(self.num_envs))
        seeds = np.asarray(seed).reshape(-1)
        if seeds.size != self.num_envs:
            raise ValueError(f"{self.env_id}: {seeds.size} seeds for {self.num_envs} envs")
        return tuple(int(s) % _SEED_RANGE for s in seeds)

    def _build(self, seeds: tuple[int, ...]) -> None:
        """A fresh pool of `len(seeds)` envs, env i seeded `seeds[i]` (EnvPool's seeds are
        fixed at `make`: `reset(seed=...)` on a pool is ignored, so a new seed needs a new
        pool)."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        seeds = list(seeds)
        render = {"render_mode": "rgb_array"} if self._family == "atari" else {}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self._pool = self._envpool.make(self._task, env_type="gymnasium",
                                                num_envs=len(seeds), seed=seeds,
                                                **render, **self._options)
        except (AssertionError, RuntimeError, TypeError, ValueError) as e:
            text = str(e).strip().splitlines()
            text = text[0] if text else type(e).__name__
            if "Error opening file" in text or "No such file" in text:
                raise ConfigError(f"config key 'env_id': {self.env_id!r} cannot open a file "
                                  f"it needs ({text}); if it is one of {SUITE}'s own, "
                                  f"reinstall them: {ASSETS_HINT}") from None
            raise ConfigError(f"config key 'env_kwargs': envpool.make({self._task!r}, "
                              f"num_envs={self.num_envs}, {self._options}) refused: {text}"
                              ) from None
        self._fresh_seed = tuple(seeds)
        self._ids = np.arange(len(seeds), dtype=np.int32)

    def reset(self, seed: int | np.ndarray) -> np.ndarray:
        """Every env afresh, env i from `seed + i` (or `seed[i]`); the same seeds give the
        same episodes."""
        seeds = self._seeds(seed)
        if self._fresh_seed != seeds:
            self._build(seeds)
        self._fresh_seed = None
        obs, info = self._pool.reset()
        return self._obs(obs)[np.argsort(info["env_id"])]

    def step(self, action: np.ndarray) -> HostStep:
        """Step every env with `action` [M, *action_shape]; where an episode ended, also take
        EnvPool's reset step for those envs (its action is ignored, its reward 0) so `obs` is
        the next episode's first observation."""
        act = self._action(action)
        obs, reward, terminated, truncated, info = self._pool.step(act, self._ids)
        order = np.argsort(info["env_id"])
        final_obs = self._obs(obs)[order]
        terminated = np.asarray(terminated, bool)[order]
        truncated = np.asarray(truncated, bool)[order]
        reward = np.asarray(reward, np.float32)[order]
        if self._family == "atari":
            score = np.asarray(info["reward"], np.float32)[order]
            game_over = np.asarray(info["terminated"], bool)[order] | truncated
        else:
            score, game_over = reward, terminated | truncated
        next_obs = final_obs
        ended = np.flatnonzero(terminated | truncated).astype(np.int32)
        if ended.size:
            r_obs, _, _, _, r_info = self._pool.step(act[ended], ended)
            next_obs = final_obs.copy()
            next_obs[r_info["env_id"]] = self._obs(r_obs)
        return HostStep(next_obs, final_obs, reward, terminated, truncated, score, game_over)

    def _action(self, action: np.ndarray) -> np.ndarray:
        action = np.asarray(action)
        shape = (self.num_envs, *self.action_space.shape)
        if action.shape != shape:
            raise ValueError(f"{self.env_id}: actions of shape {action.shape}, expected {shape}")
        if self._bounds is not None:  # EnvPool's MuJoCo charges its control cost unclipped
            action = np.clip(action, *self._bounds)
        return action.astype(self._act_dtype)

    def _obs(self, obs: np.ndarray) -> np.ndarray:
        if self._chw:
            return np.ascontiguousarray(np.transpose(obs, (0, 2, 3, 1)))
        return np.asarray(obs, self.observation_space.dtype)

    def render(self, index: int) -> np.ndarray:
        """Atari: the emulator's screen (uint8 [210, 160, 3]). Other tasks raise
        NotImplementedError: EnvPool's MuJoCo renderer needs an OpenGL context and aborts the
        process without one, which no Python handler can catch."""
        if self._family != "atari":
            raise NotImplementedError(f"{self.env_id}: jaxppo draws EnvPool's Atari games only")
        if not 0 <= index < self._ids.size:  # EnvPool's C++ reads past its envs: a segfault
            before = " (one env until the first reset builds the run's pool)" if (
                self._ids.size < self.num_envs) else ""
            raise IndexError(f"{self.env_id}: no env {index} to draw; the pool holds "
                             f"{self._ids.size}{before}")
        return np.asarray(self._pool.render(np.array([index], np.int32))[0], np.uint8)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None
