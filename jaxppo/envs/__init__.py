"""Environments: one protocol (`protocol.py`), one registry of ids (`registry.py`), the
vectorised stepper the train loop uses (`vec.py`), and one adapter module per source."""

from jaxppo.envs.host import HostVecEnv
from jaxppo.envs.protocol import EnvInfo, inspect_env
from jaxppo.envs.registry import (
    available_env_ids,
    check_env_id,
    make_env,
    register_env,
)
from jaxppo.envs.spaces import ActionSpec, Box, Discrete, MultiDiscrete, action_spec
from jaxppo.envs.steps import EnvState, EnvStep
from jaxppo.envs.vec import StepRandomness, VecEnv

__all__ = [
    "ActionSpec", "Box", "Discrete", "EnvInfo", "EnvState", "EnvStep", "HostVecEnv", "MultiDiscrete",
    "StepRandomness", "VecEnv", "action_spec", "available_env_ids", "check_env_id",
    "inspect_env", "make_env", "register_env",
]
