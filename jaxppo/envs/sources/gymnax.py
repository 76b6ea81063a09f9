"""gymnax environments: they already are the protocol (`protocol.py` is gymnax's single-env
API), so this adapter only lists and builds them (`env_id: CartPole-v1`, no prefix).

gymnax is imported inside the functions: importing its environment modules creates arrays,
which starts JAX's backend, and that must wait for `jax.distributed.initialize` in a
multi-process run (and for jaxppo's XLA flags)."""

from __future__ import annotations

from typing import Any

from jaxppo.errors import ConfigError

SUITE = "gymnax"


def env_ids() -> list[str]:
    import gymnax

    return sorted(gymnax.registered_envs)


def make(env_id: str, kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """`gymnax.make(env_id, **kwargs)`: `(env, default params)`."""
    import gymnax

    try:
        return gymnax.make(env_id, **kwargs)
    except TypeError as e:
        raise ConfigError(f"config key 'env_kwargs': gymnax's {env_id!r} does not take "
                          f"{sorted(kwargs)} ({e})") from None
