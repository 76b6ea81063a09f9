"""The environment protocol jaxppo trains on, and the check every environment passes first.

An environment is one object with gymnax's single-env API, pure functions of explicit state:

    env.default_params                                   -> params (any pytree, may be None)
    env.reset_env(key, params)                           -> (obs, state)
    env.step_env(key, state, action, params)             -> (obs, state, reward, terminated, info)
    env.observation_space(params), env.action_space(params)

`step_env` does not reset: its `obs` is the true next observation s'_t, which is what a
truncated episode bootstraps from, and `terminated` is true only where s'_t is terminal (its
value is 0). Optional, found by name:

    env.is_truncated(state, params) -> bool   time limit reached (gymnax: state.time >= limit)
    env.action_mask(state, params)  -> bool [A] (or [sum(nvec)] for MultiDiscrete): legal actions
    env.episode_metrics(state, params) -> {name: scalar}  logged as `env/<name>` at episode end
    env.max_episode_steps: int      jaxppo truncates (and bootstraps) after this many steps
    env.expensive_reset: bool       a costly reset (physics, world generation): `reset: auto`
                                    then draws a few per step (`resets.py`), not T x N
    env.default_obs_field: str      the `obs_field` used when the config sets none
    env.render(state, params) -> uint8 [H, W, 3]   one frame for `jaxppo eval --gif` (on the
                                    host, one unbatched state; NotImplementedError: cannot draw)

Any gymnax `Environment` subclass satisfies this unchanged. Every other source (Brax, MuJoCo
Playground, Craftax, Jumanji, Navix, XLand-MiniGrid) is an adapter to it in its own module.
Observations may be arrays or a pytree (dict / NamedTuple / dataclass): `obs_field` names the
field to train on (`"a,b"` flattens and joins several, `"*"` all); a field called
`action_mask` is the action mask when the env has no `action_mask` method.

`inspect_env` traces reset and one step abstractly (nothing compiles, nothing runs) and raises a
one-line `ConfigError` for anything jaxppo cannot train on, before any XLA error could.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxppo.envs.spaces import ActionSpec, action_spec
from jaxppo.errors import ConfigError

MASK_FIELD = "action_mask"
_API = ("jaxppo needs gymnax's single-env API: reset_env(key, params) -> (obs, state) and "
        "step_env(key, state, action, params) -> (obs, state, reward, terminated, info)")


def _fields(tree: Any) -> list[str] | None:
    """Top-level field names of a dict, NamedTuple or dataclass observation; None for arrays."""
    if isinstance(tree, dict):
        return [str(k) for k in tree]
    if hasattr(tree, "_fields"):
        return list(tree._fields)
    if dataclasses.is_dataclass(tree) and not isinstance(tree, type):
        return [f.name for f in dataclasses.fields(tree)]
    return None


def _get(tree: Any, name: str) -> Any:
    return tree[name] if isinstance(tree, dict) else getattr(tree, name)


def _flat_join(parts: list[jax.Array]) -> jax.Array:
    """Flatten each part (leading batch axes kept by the caller's vmap) and concatenate."""
    return jnp.concatenate([jnp.ravel(p).astype(jnp.float32) for p in parts])


@dataclasses.dataclass(frozen=True, eq=False)
class EnvInfo:
    """What `inspect_env` learned: how to read observations and masks, and the spaces."""

    obs_shape: tuple[int, ...]
    obs_dtype: Any
    read_obs: Callable[[Any], tuple[jax.Array, jax.Array | None]]  # one env's raw obs
    action: ActionSpec
    mask_from: str | None  # "method", "obs" or None
    truncates: bool  # has is_truncated
    metric_names: tuple[str, ...]
    state: Any = None  # one env's state, abstract (what a step takes)
    action_in: Any = None  # one env's action, abstract


def _obs_reader(obs: Any, obs_field: str | None, label: str):
    """`read(raw_obs) -> (obs array, mask or None)` for one env's observation `obs` (abstract)."""
    fields = _fields(obs)
    if fields is None:
        if obs_field:
            raise ConfigError(f"config key 'obs_field': {label} gives plain array observations, "
                              f"so there is no field {obs_field!r} to pick; remove obs_field")
        if not isinstance(obs, (jax.Array, jax.ShapeDtypeStruct, np.ndarray)):
            raise ConfigError(f"{label}: reset_env returned an observation of type "
                              f"{type(obs).__name__}; return a jax array (or a dict/NamedTuple "
                              "of arrays with obs_field set)")
        return lambda raw: (raw, None), False
    has_mask = MASK_FIELD in fields
    data = [f for f in fields if f != MASK_FIELD]
    if not data:
        raise ConfigError(f"{label}: observations are a {type(obs).__name__} whose only field is "
                          f"{MASK_FIELD!r} (the action mask), so there is nothing to train on; "
                          "add a field with the observation itself")
    if not obs_field:
        if len(data) != 1:
            raise ConfigError(
                f"{label}: observations are a {type(obs).__name__} with fields "
                f"{', '.join(fields)}; set config key 'obs_field' to the one to train on (e.g. "
                f"obs_field: {data[0]}), or to '*' to flatten and join "
                "them all")
        obs_field = data[0]
    names = data if obs_field == "*" else [n.strip() for n in obs_field.split(",") if n.strip()]
    missing = [n for n in names if n not in fields]
    if missing or not names:
        raise ConfigError(f"config key 'obs_field': {label}'s observations have no field "
                          f"{', '.join(repr(m) for m in missing) or repr(obs_field)}; "
                          f"use one of {', '.join(fields)} (or '*')")

    def read(raw):
        mask = _get(raw, MASK_FIELD) if has_mask else None
        if len(names) == 1:
            return _get(raw, names[0]), mask
        return _flat_join([_get(raw, n) for n in names]), mask

    return read, has_mask


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}".rstrip(": ")


def _trace(label: str, what: str, fn, *args):
    try:
        return jax.eval_shape(fn, *args)
    except ConfigError:
        raise
    except Exception as e:  # noqa: BLE001 - any failure of user code becomes one line
        raise ConfigError(f"{label}: {what} failed while tracing ({_first_line(e)}); call it "
                          "directly on one env to see the full traceback") from None


def _check_signature(env: Any, name: str, args: tuple, label: str) -> None:
    fn = getattr(env, name, None)
    if not callable(fn):
        raise ConfigError(f"{label} ({type(env).__name__}) has no method {name}; {_API}")
    try:
        inspect.signature(fn).bind(*args)
    except TypeError as e:
        raise ConfigError(f"{label}: {name}{inspect.signature(fn)} cannot be called as "
                          f"{name}({', '.join(a for a in _ARG_NAMES[name])}) ({e}); {_API}"
                          ) from None
    except ValueError:  # no signature (a builtin): let the trace speak
        pass


_ARG_NAMES = {"reset_env": ("key", "params"), "step_env": ("key", "state", "action", "params")}


def _shape_of(x: Any) -> tuple[int, ...] | None:
    return tuple(x.shape) if hasattr(x, "shape") else None


def _same_structure(a: Any, b: Any) -> bool:
    la, ta = jax.tree.flatten(a)
    lb, tb = jax.tree.flatten(b)
    return ta == tb and all(_shape_of(x) == _shape_of(y) and
                            getattr(x, "dtype", None) == getattr(y, "dtype", None)
                            for x, y in zip(la, lb, strict=True))


def inspect_env(env: Any, params: Any, label: str, obs_field: str | None = None) -> EnvInfo:
    """Check `env` against the protocol abstractly and return how to drive it, or raise one
    line naming the problem. `label` names the env in messages (its id)."""
    key = jax.random.key(0)
    _check_signature(env, "reset_env", (key, params), label)
    _check_signature(env, "step_env", (key, None, None, params), label)
    for name in ("observation_space", "action_space"):
        if not callable(getattr(env, name, None)):
            raise ConfigError(f"{label} ({type(env).__name__}) has no method {name}(params); "
                              "give it one returning a jaxppo.envs.spaces (or gymnax) space")
    spec = action_spec(env.action_space(params), label)

    reset = _trace(label, "reset_env(key, params)", lambda k: env.reset_env(k, params), key)
    if not isinstance(reset, tuple) or len(reset) != 2:
        raise ConfigError(f"{label}: reset_env must return (obs, state); {_API}")
    raw_obs, state = reset
    read, mask_in_obs = _obs_reader(raw_obs, obs_field, label)
    complex_leaves = [x for x in jax.tree.leaves(raw_obs)
                      if jnp.issubdtype(getattr(x, "dtype", jnp.float32), jnp.complexfloating)]
    if complex_leaves:  # a cast to float32 would drop the imaginary part, with a warning only
        raise ConfigError(f"{label}: the observation is complex ({complex_leaves[0].dtype}); "
                          "a policy reads real numbers: return its real and imaginary parts "
                          "(e.g. jnp.stack([x.real, x.imag], -1)) or its magnitude")
    obs, obs_mask = _trace(label, "reading the observation", read, raw_obs)
    obs_shape = _shape_of(obs)
    if obs_shape is None or not (jnp.issubdtype(obs.dtype, jnp.number)
                                 or obs.dtype == jnp.bool_):
        raise ConfigError(f"{label}: the observation is not a numeric array ({obs!r})")
    space_shape = getattr(env.observation_space(params), "shape", None)
    if _fields(raw_obs) is None and space_shape is not None and \
            tuple(int(s) for s in space_shape) != obs_shape:
        raise ConfigError(f"{label}: reset_env's observation has shape {obs_shape} but "
                          f"observation_space(params).shape is {tuple(space_shape)}; make them "
                          "agree")
    if math.prod(obs_shape) == 0:
        raise ConfigError(f"{label}: the observation is empty (shape {obs_shape})")

    dtype = jnp.int32 if spec.kind != "continuous" else jnp.float32
    action = jax.ShapeDtypeStruct(spec.shape, dtype)
    out = _trace(label, "step_env(key, state, action, params)",
                 lambda k, s, a: env.step_env(k, s, a, params), key, state, action)
    if not isinstance(out, tuple) or len(out) != 5:
        n = len(out) if isinstance(out, tuple) else 1
        hint = (" (6 values looks like gymnax's auto-resetting step(); implement step_env, "
                "which does not reset)" if n == 6 else "")
        raise ConfigError(f"{label}: step_env returned {n} value(s){hint}; {_API}")
    s_obs, s_state, reward, terminated, _ = out
    if not _same_structure(s_obs, raw_obs):
        raise ConfigError(f"{label}: step_env's observation differs from reset_env's in "
                          "structure, shape or dtype; they must match (one lax.scan carries both)")
    if not _same_structure(s_state, state):
        raise ConfigError(f"{label}: step_env returns a state whose structure, shapes or dtypes "
                          "differ from reset_env's; they must match (a lax.scan carries it) - "
                          "check for Python ints that become arrays, or a changed dtype")
    for name, value in (("reward", reward), ("terminated", terminated)):
        if jnp.issubdtype(getattr(value, "dtype", jnp.float32), jnp.complexfloating):
            raise ConfigError(f"{label}: step_env's {name} is complex ({value.dtype}); it "
                              "must be a real scalar")
        if _shape_of(value) not in ((), (1,)):
            raise ConfigError(f"{label}: step_env's {name} has shape {_shape_of(value)}; it "
                              "must be a scalar (one env, unbatched)")

    truncates = callable(getattr(env, "is_truncated", None))
    if truncates:
        trunc = _trace(label, "is_truncated(state, params)",
                       lambda s: env.is_truncated(s, params), state)
        if _shape_of(trunc) not in ((), (1,)):
            raise ConfigError(f"{label}: is_truncated returned shape {_shape_of(trunc)}; it "
                              "must be a scalar bool")

    mask_from = None
    if callable(getattr(env, "action_mask", None)):
        mask_from = "method"
        mask = _trace(label, "action_mask(state, params)", lambda s: env.action_mask(s, params),
                      state)
    elif mask_in_obs:
        mask_from, mask = "obs", obs_mask
    if mask_from is not None:
        if spec.kind == "continuous":
            raise ConfigError(f"{label}: an action mask with a continuous action space; masks "
                              "apply to Discrete or MultiDiscrete actions")
        if _shape_of(mask) != (spec.logits_dim,):
            joint = spec.kind == "multidiscrete" and _shape_of(mask) == spec.nvec
            fix = ("a joint mask over MultiDiscrete actions: expose the actions as one "
                   f"Discrete({math.prod(spec.nvec)}) instead" if joint else
                   f"give one bool per action, shape ({spec.logits_dim},)")
            raise ConfigError(f"{label}: action mask of shape {_shape_of(mask)}; {fix}")

    metric_names: tuple[str, ...] = ()
    if callable(getattr(env, "episode_metrics", None)):
        metrics = _trace(label, "episode_metrics(state, params)",
                         lambda s: env.episode_metrics(s, params), state)
        if not isinstance(metrics, dict) or any(_shape_of(v) != () for v in metrics.values()):
            raise ConfigError(f"{label}: episode_metrics must return a dict of scalars")
        metric_names = tuple(str(k) for k in metrics)
    return EnvInfo(obs_shape, obs.dtype, read, spec, mask_from, truncates, metric_names, state,
                   action)
