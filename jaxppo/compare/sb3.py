"""The Stable-Baselines3 side of `jaxppo compare`: for each jaxppo environment, the Gymnasium
environment SB3 runs, and a torch network with jaxppo's shapes.

    CartPole-v1 (gymnax)      -> gymnasium's CartPole-v1                       MlpPolicy
    Breakout-MinAtar (gymnax) -> `MinAtarEnv("breakout")`, the reference       MlpPolicy, or the
                                 `minatar` package (Young & Tian 2019)         `cnn` torso below
    envpool/Breakout-v5       -> ALE's BreakoutNoFrameskip-v4 under SB3's      CnnPolicy (Nature
                                 Atari wrappers, 4 frames stacked              CNN)
    gymnasium/<id>            -> the same Gymnasium id                         MlpPolicy

The environments themselves (`MinAtarEnv`, made equal to gymnax's MinAtar, and the factories)
are in `sb3_envs.py`, code that SB3's worker processes receive without importing jaxppo.

This module imports gymnasium, torch and SB3 at the top: only `compare.py` imports it, inside
functions, when the compare extra is installed.
"""

from __future__ import annotations

import functools
from typing import Any

import cloudpickle
import torch
from gymnasium import spaces
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor

import jaxppo.envs.imports
from jaxppo.compare import sb3_envs
from jaxppo.compare.sb3_envs import MinAtarEnv, make_atari, make_gym
from jaxppo.compare.twins import MINATAR_GAMES
from jaxppo.core.torso_specs import CONV_STACKS

BY_VALUE = (sb3_envs, jaxppo.envs.imports)
"""The modules whose code SubprocVecEnv's workers get by value: they import no jaxppo."""

def atari_gym_id(env_id: str) -> str:
    """`envpool/Breakout-v5` -> `BreakoutNoFrameskip-v4` (same game, minimal action set, no
    sticky actions, frame skip left to the wrappers)."""
    return env_id.removeprefix("envpool/").removesuffix("-v5") + "NoFrameskip-v4"


def make_vec(kind: str, env_id: str, num_envs: int, subproc: bool, seed: int,
             time_limit: int | None = None, gym_id: str | None = None,
             imports: tuple[str, ...] = ()):
    """SB3's vectorised env for one compare `kind` (`classic`, `minatar`, `atari`, `gymnasium`);
    every env sits in a `Monitor`, whose `info["episode"]` is the return compare logs.
    `time_limit`: a MinAtar game's, as jaxppo runs it (`twins.minatar_time_limit`)."""
    from stable_baselines3.common.env_util import make_atari_env, make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecFrameStack

    vec_cls = SubprocVecEnv if subproc else DummyVecEnv
    if subproc:
        for module in BY_VALUE:
            cloudpickle.register_pickle_by_value(module)
    if kind == "minatar":
        make = functools.partial(MinAtarEnv, MINATAR_GAMES[env_id], time_limit)
        return make_vec_env(make, n_envs=num_envs, seed=seed, vec_env_cls=vec_cls)
    if kind == "atari":
        # The Monitor sits under AtariWrapper (make_vec_env wraps it first): it sees the raw
        # env, so its episode is a whole game (all lives) and its return the unclipped score.
        env = make_atari_env(functools.partial(make_atari, atari_gym_id(env_id)),
                             n_envs=num_envs, seed=seed, vec_env_cls=vec_cls)
        return VecFrameStack(env, n_stack=4)
    return make_vec_env(functools.partial(make_gym, gym_id or env_id, tuple(imports)),
                        n_envs=num_envs, seed=seed, vec_env_cls=vec_cls)


class ConvTorso(BaseFeaturesExtractor):
    """jaxppo's conv torso (`torso_specs.CONV_STACKS[torso]`: VALID padding, ReLU after each conv,
    then the flatten) over channel-last observations [B, H, W, C]. The flatten runs over
    (H, W, C) as flax's does, so a weight copied across would line up."""

    def __init__(self, observation_space: spaces.Box, torso: str = "cnn"):
        h, w, c = observation_space.shape
        layers: list[torch.nn.Module] = []
        for filters, kernel, stride in CONV_STACKS[torso]:
            layers += [torch.nn.Conv2d(c, filters, kernel, stride), torch.nn.ReLU()]
            h, w, c = (h - kernel) // stride + 1, (w - kernel) // stride + 1, filters
        super().__init__(observation_space, features_dim=h * w * c)
        self.convs = torch.nn.Sequential(*layers)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = self.convs(obs.permute(0, 3, 1, 2))  # NHWC -> NCHW
        return x.permute(0, 2, 3, 1).flatten(1)


def policy_setup(kind: str, torso: str, shared: bool = False) -> tuple[str, dict[str, Any]]:
    """The SB3 policy class name and the keyword arguments that give it jaxppo's torso. Actor
    and critic each own their torso in jaxppo's `ActorCritic` unless `shared_torso`, hence
    `share_features_extractor` = `shared`; SB3 initialises the torso with gain sqrt(2), as
    jaxppo."""
    if torso == "mlp":
        return "MlpPolicy", {}
    if kind == "atari":  # SB3's NatureCNN: jaxppo's nature_cnn stack and its 512 relu layer
        return "CnnPolicy", {"share_features_extractor": shared}
    return "MlpPolicy", {"features_extractor_class": ConvTorso,
                         "features_extractor_kwargs": {"torso": torso},
                         "share_features_extractor": shared}
