"""gymnax environments: they already are the protocol (`protocol.py` is gymnax's single-env
API), so this adapter only lists and builds them (`env_id: CartPole-v1`, no prefix: the
registry asks it last, after the prefixed suites, probes and registered ids).

gymnax is imported inside the functions: importing its environment modules creates arrays,
which starts JAX's backend, and that must wait for `jax.distributed.initialize` in a
multi-process run (and for jaxppo's XLA flags)."""

from __future__ import annotations

from typing import Any

from jaxppo.envs.sources.suite import kwargs_error

PREFIX = ""
SUITE = "gymnax"
INSTALL_HINT = "pip install jaxppo"  # gymnax is one of jaxppo's own dependencies

SOLVE_THRESHOLDS: dict[str, float] = {
    # Gymnasium's reward_threshold where it has one; MinAtar has none.
    "CartPole-v1": 475.0,
    "Acrobot-v1": -100.0,
    "MountainCar-v0": -110.0,
    "MountainCarContinuous-v0": 90.0,
    # Gymnasium gives Pendulum-v1 no reward_threshold; -200 is jaxppo's own mark (gymnax-blines
    # reports -130 for PPO).
    "Pendulum-v1": -200.0,
}


def env_ids() -> list[str]:
    import gymnax

    return sorted(gymnax.registered_envs)


def make(env_id: str, kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """`gymnax.make(env_id, **kwargs)`: `(env, default params)` (the name is the whole id)."""
    import gymnax

    try:
        return gymnax.make(env_id, **kwargs)
    except TypeError as e:
        raise kwargs_error(f"gymnax's {env_id!r}", kwargs, e) from None
