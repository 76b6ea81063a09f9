"""The Gymnasium env the Tianshou, TorchRL and torch-script systems of `jaxppo compare` run for
a jaxppo env id: a picklable zero-argument factory (their worker processes call it), made of
`sb3_envs`' code, which those processes receive by value, so they import no jaxppo or JAX."""

from __future__ import annotations

import functools

import cloudpickle

import jaxppo.envs.imports
from jaxppo.compare import sb3_envs
from jaxppo.compare.twins import MINATAR_GAMES


def env_fn(kind: str, env_id: str, gym_id: str, imports: tuple[str, ...],
           minatar_limit: int | None = None):
    """`kind` as `twins.env_kind`: classic and gymnasium ids by `gymnasium.make` (after the
    config's imports), MinAtar by the reference package made equal to gymnax's
    (`sb3_envs.MinAtarEnv`, `minatar_limit` steps)."""
    for module in (sb3_envs, jaxppo.envs.imports):
        cloudpickle.register_pickle_by_value(module)
    if kind == "minatar":
        return functools.partial(sb3_envs.MinAtarEnv, MINATAR_GAMES[env_id], minatar_limit)
    return functools.partial(sb3_envs.make_gym, gym_id, tuple(imports))
