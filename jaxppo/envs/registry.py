"""Environment ids: what `env_id` may name, and the one place that turns an id into an env.

    CartPole-v1                    a gymnax id
    probe/Action-v0                a jaxppo probe env
    MyTask-v0                      an id given to `jaxppo.register_env`
    mypkg.module:MyEnv             a class (or factory) importable from Python
    mypkg.module:MyTask-v0         an id that `mypkg.module` registers when imported
    custom/<anything>              a label for an environment instance handed to `make_train`
                                   or `Experiment` as `env=` (it names the run, builds nothing)
    brax/hopper, playground/CartpoleBalance, craftax/Craftax-Classic-Symbolic-v1,
    jumanji/Snake-v1, navix/Navix-Empty-5x5-v0, xminigrid/MiniGrid-Empty-6x6
                                   a suite's id, through that suite's adapter (an optional extra)
    gymnasium/CartPole-v1, envpool/Breakout-v5
                                   an environment on the host (`HOST_SOURCES`), stepped by the
                                   bridge of `host.py` from inside the compiled program

Suites are looked up through their adapter module (`SOURCES`, `HOST_SOURCES`: the protocols
`JaxSuite` and `HostSuite` of `sources/protocol.py`); each imports its package only when one of
its ids is asked for, and says which `pip install` it needs when it is missing. gymnax is the
adapter of the bare ids (`GYMNAX`), asked only when nothing else names the id.
"""

from __future__ import annotations

import difflib
import inspect
import re
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

import jaxppo.envs.sources.brax as brax_env
import jaxppo.envs.sources.craftax as craftax_env
import jaxppo.envs.sources.envpool as envpool_env
import jaxppo.envs.sources.gymnasium as gymnasium_env
import jaxppo.envs.sources.gymnax as gymnax_env
import jaxppo.envs.sources.jumanji as jumanji_env
import jaxppo.envs.sources.navix as navix_env
import jaxppo.envs.sources.playground as playground_env
import jaxppo.envs.sources.xminigrid as xminigrid_env
from jaxppo.envs.imports import ended_by, import_module, missing_dependency
from jaxppo.envs.sources.protocol import HostSuite, JaxSuite
from jaxppo.errors import ConfigError
from jaxppo.process import signals_seen

_Suite = TypeVar("_Suite", JaxSuite, HostSuite)


def _by_prefix(protocol: type[_Suite], *modules: ModuleType) -> dict[str, _Suite]:
    """The table of `modules` by their PREFIX; an adapter missing a member of `protocol` fails
    here, at import, naming it (not at the first use of one of its ids)."""
    for m in modules:
        if not isinstance(m, protocol):
            members = [*protocol.__annotations__, *(k for k, v in vars(protocol).items()
                                                    if callable(v) and not k.startswith("_"))]
            raise TypeError(f"{m.__name__} is not a {protocol.__name__}: it lacks "
                            f"{', '.join(k for k in members if not hasattr(m, k))} "
                            "(jaxppo/envs/sources/protocol.py)")
    return {m.PREFIX: m for m in modules}


SOURCES: dict[str, JaxSuite] = _by_prefix(
    JaxSuite, brax_env, playground_env, craftax_env, jumanji_env, navix_env, xminigrid_env)
"""Suite prefix (`brax/`) -> its adapter module. Order matters where ids are guessed: the
first suite whose `suggest_id` answers a bare id is the one suggested."""

HOST_SOURCES: dict[str, HostSuite] = _by_prefix(HostSuite, gymnasium_env, envpool_env)
"""Host suite prefix (`gymnasium/`) -> its adapter module."""

GYMNAX: JaxSuite = _by_prefix(JaxSuite, gymnax_env)[""]
"""The adapter of the ids without a prefix (`CartPole-v1`). Not in `SOURCES`: an empty prefix
matches every id, and gymnax ids come after probes and registered ids (`make_env`)."""

CUSTOM_PREFIX = "custom/"
PROBE_PREFIX = "probe/"
_USER_ENVS: dict[str, Callable[..., Any]] = {}
_IMPORT_PATH = re.compile(r"^[A-Za-z_][\w.]*:[\w.\-/]+$")


_OVERWRITES: set[str] = set()  # built-in ids replaced on purpose (register_env(overwrite=True))


def register_env(env_id: str, factory: Callable[..., Any], *, overwrite: bool = False) -> None:
    """Make `env_id` name an environment in configs, YAML and the CLI.

    `factory(**env_kwargs)` returns an environment (the protocol of `jaxppo.envs.protocol`;
    any gymnax `Environment` works) or an `(env, env_params)` pair. Register before the config
    is built (e.g. at import of the module that defines the env). Ids with a suite's prefix
    (`brax/`, ...), `probe/`, `custom/` or a `:` would never reach the factory and are refused;
    replacing a built-in id (a gymnax or probe id, with its solve threshold) needs
    `overwrite=True` (the run then has no solve threshold).

        jaxppo.register_env("Corridor-v0", Corridor)      # Corridor(**env_kwargs)
        config = jaxppo.PPOConfig(env_id="Corridor-v0", env_kwargs={"length": 8})

    Args:
      env_id: the id configs will use (e.g. `MyTask-v0`).
      factory: a callable, `factory(**env_kwargs)` returning the environment or an
        `(env, env_params)` pair: the env class itself, or a function; not an instance (pass an
        instance as `env=` to `make_train` / `Experiment` instead).
      overwrite: replace a built-in id of the same name.

    Raises:
      TypeError: `env_id` is not a non-empty str, or `factory` is not callable.
      ConfigError: `env_id` has a reserved prefix or a `:`, or is a built-in id and
        `overwrite` is False (checked here once gymnax is imported, else when ids are first
        looked up).
    """
    if not isinstance(env_id, str) or not env_id:
        raise TypeError(f"register_env: env_id must be a non-empty str, got {env_id!r}")
    if not callable(factory):
        instance = hasattr(factory, "step_env") or hasattr(factory, "reset_env")
        raise TypeError(f"register_env({env_id!r}, ...): the factory must be callable (the env "
                        "class, or a function returning an instance), got "
                        + (f"an instance of {type(factory).__qualname__}; register its class, "
                           "or pass the instance as env= to make_train / Experiment"
                           if instance else type(factory).__qualname__))
    reserved = next((p for p in (*SOURCES, *HOST_SOURCES, CUSTOM_PREFIX, PROBE_PREFIX)
                     if env_id.startswith(p)), None)
    if reserved or ":" in env_id:
        why = (f"the prefix {reserved!r} belongs to " + (
            "environment instances (env=)" if reserved == CUSTOM_PREFIX else "jaxppo's probes"
            if reserved == PROBE_PREFIX else
            f"the {_SUITES[reserved].SUITE} suite")
               if reserved else "a ':' reads as module.path:Name")
        raise ConfigError(f"register_env({env_id!r}): {why}, so this id would never name your "
                          "environment; register it under another name (e.g. MyTask-v0)")
    if not overwrite and "gymnax" in sys.modules:  # else checked at first use (see _local)
        _check_builtin_clashes({env_id})
    (_OVERWRITES.add if overwrite else _OVERWRITES.discard)(env_id)
    _USER_ENVS[env_id] = factory


def is_replaced_builtin(env_id: str) -> bool:
    """Whether `env_id` is a built-in id replaced with `register_env(..., overwrite=True)`."""
    return env_id in _OVERWRITES


def _check_builtin_clashes(ids: set[str]) -> None:
    """A registered id that is also a gymnax or probe id, not registered with overwrite=True,
    is refused in one line (it used to replace the built-in env without a word). gymnax is
    imported only here: importing it starts JAX's backend (see `_local`)."""
    from jaxppo.envs.probes import PROBES

    builtin = set(GYMNAX.env_ids()) | set(PROBES)
    clash = sorted(i for i in ids if i in builtin and i not in _OVERWRITES)
    if clash:
        raise ConfigError(f"register_env({clash[0]!r}): that is a built-in id (with its own "
                          "environment and solve threshold); register yours under another name, "
                          "or pass overwrite=True to replace it")


def _local() -> dict[str, Callable[..., Any]]:
    """Registered ids and the probe envs. gymnax and the probes are imported here, not at module
    level: importing a gymnax env module creates arrays, which starts JAX's backend, and that
    must wait for `jax.distributed.initialize` in a multi-process run."""
    GYMNAX.import_gymnax()  # first: the probes import gymnax, whose render-only imports wait
    from jaxppo.envs.probes import PROBES

    _check_builtin_clashes(set(_USER_ENVS))
    return {**PROBES, **_USER_ENVS}


def available_env_ids() -> list[str]:
    """gymnax, probe and registered ids (suite ids are listed by their adapters)."""
    return sorted(set(GYMNAX.env_ids()) | set(_local()))


def solve_thresholds() -> dict[str, float]:
    """Every suite's solve thresholds (an adapter's optional `SOLVE_THRESHOLDS`), by env id."""
    return {env_id: threshold for m in (GYMNAX, *SOURCES.values(), *HOST_SOURCES.values())
            for env_id, threshold in getattr(m, "SOLVE_THRESHOLDS", {}).items()}


def source_of(env_id: str) -> JaxSuite | None:
    """The JAX suite adapter whose prefix `env_id` has (`brax/...`), else None."""
    return next((m for p, m in SOURCES.items() if env_id.startswith(p)), None)


def declared_reset_cost(env_id: str) -> bool | None:
    """Whether the suite that builds `env_id` says its resets are costly (its optional
    `EXPENSIVE_RESET`, set from measurement: `jaxppo/envs/resets.py`); None for an id of
    yours (registered or importable), whose cost `reset: auto` estimates."""
    source = source_of(env_id)
    if source is not None:
        return getattr(source, "EXPENSIVE_RESET", None)
    if env_id in _local() or is_import_path(env_id) or env_id.startswith(CUSTOM_PREFIX):
        return None
    return getattr(GYMNAX, "EXPENSIVE_RESET", None)


_SUITES = {**SOURCES, **HOST_SOURCES}


def host_source_of(env_id: str) -> HostSuite | None:
    """The host source module whose prefix `env_id` has (`gymnasium/...`), else None."""
    return next((m for p, m in HOST_SOURCES.items() if env_id.startswith(p)), None)


def check_host_id(env_id: str) -> None:
    """A host source's id, checked by its module (one line: unknown id with close matches, or
    the missing extra); nothing is built."""
    source = host_source_of(env_id)
    name = env_id[len(source.PREFIX):]
    check = getattr(source, "check_id", None)
    if check is not None:
        check(name)
        return
    ids = list(source.env_ids())
    if name not in ids:
        raise _unknown(env_id, [source.PREFIX + i for i in ids], f"{source.SUITE} environment")


def is_import_path(env_id: str) -> bool:
    return bool(_IMPORT_PATH.match(env_id))


def _import_target(env_id: str) -> Any:
    """The object `pkg.module:Name` names, or a one-line ConfigError."""
    module_name, _, attr = env_id.partition(":")
    seen = signals_seen()
    try:
        obj: Any = import_module(module_name)
    except ModuleNotFoundError as e:
        dep = missing_dependency(module_name, e)
        if dep:
            raise ConfigError(f"config key 'env_id': {dep}") from None
        raise ConfigError(f"config key 'env_id': cannot import {module_name!r} for {env_id!r} "
                          f"({e}); install it or add its folder to PYTHONPATH") from None
    except (SystemExit, KeyboardInterrupt) as e:
        ended = ended_by(module_name, "config key 'env_id'", e, seen)
        if ended is None:
            raise
        raise ended from None
    except ImportError as e:
        raise ConfigError(f"config key 'env_id': cannot import {module_name!r} for {env_id!r} "
                          f"({e}); install it or add its folder to PYTHONPATH") from None
    except Exception as e:  # noqa: BLE001 - the user's module failed at import: one line
        raise ConfigError(f"config key 'env_id': importing {module_name!r} failed "
                          f"({type(e).__name__}: {e})") from None
    if not hasattr(obj, attr.split(".")[0]) and attr in _USER_ENVS:
        return _USER_ENVS[attr]  # `mypkg.envs:MyTask-v0`: an id the module registers at import
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"config key 'env_id': module {module_name!r} has no {attr!r} "
                              "(nor registers it); give module.path:ClassName or "
                              "module.path:registered-id")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ConfigError(f"config key 'env_id': {env_id!r} is not a class or factory")
    return obj


def _unknown(env_id: str, ids: list[str], what: str, extra_hint: str | None = None) -> ConfigError:
    close = difflib.get_close_matches(env_id, ids, n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(repr(c) for c in close)}?" if close else (
        f"known ids: {', '.join(ids)}" if len(ids) <= 40 else
        f"{len(ids)} are known, e.g. {', '.join(ids[:8])}")
    return ConfigError(f"config key 'env_id': unknown {what} {env_id!r}; {extra_hint or hint}")


def check_env_id(env_id: str) -> None:
    """Raise `ConfigError` naming close matches (or the missing extra) when `env_id` names no
    environment. Nothing is built: a suite's ids come from its registry."""
    if is_import_path(env_id):
        _import_target(env_id)
        return
    if env_id.startswith(CUSTOM_PREFIX) and len(env_id) > len(CUSTOM_PREFIX):
        return
    if host_source_of(env_id) is not None:
        check_host_id(env_id)
        return
    source = source_of(env_id)
    if source is not None:
        ids = source.env_ids()
        unsupported = getattr(source, "unsupported_reason", None)
        reason = unsupported(env_id) if unsupported and env_id not in ids else None
        if reason:  # a real id of the suite that this adapter cannot offer (assets online)
            raise ConfigError(f"config key 'env_id': {reason}")
        if env_id not in ids:
            raise _unknown(env_id, ids, f"{source.SUITE} environment")
        return
    ids = available_env_ids()
    if env_id in ids:
        return
    hint = None
    for module in _SUITES.values():  # the first suite that knows it answers (no more imported)
        suggest = getattr(module, "suggest_id", None)
        hit = suggest(env_id) if suggest else None
        if hit:
            hint = f"did you mean the {module.SUITE} environment {hit!r}?"
        if hit and module in HOST_SOURCES.values() and hit == module.PREFIX + env_id:
            hint += (f" It is one: env_id: {hit} (jaxppo steps those on the host; a bare id "
                     "names a gymnax or registered JAX environment)")
        if hint:
            break
    raise _unknown(env_id, ids, "environment", hint)


def _as_pair(made: Any, label: str) -> tuple[Any, Any]:
    if isinstance(made, tuple) and len(made) == 2:
        return made
    if made is None:
        raise ConfigError(f"{label}: the factory returned None; return the environment")
    if isinstance(made, type):
        raise ConfigError(f"{label}: the factory returned the class {made.__qualname__}, not an "
                          f"environment; return an instance ({made.__qualname__}(...)), or "
                          f"register the class itself as the factory")
    return made, getattr(made, "default_params", None)


def _rejects_kwargs(factory: Callable[..., Any], kwargs: dict[str, Any]) -> bool:
    """Whether `factory`'s signature refuses `kwargs` (a TypeError then means a wrong
    env_kwargs, not a bug inside the factory); True where the signature cannot be read."""
    try:
        inspect.signature(factory).bind(**kwargs)
    except (TypeError, ValueError):
        return True
    return False


def _raised(env_id: str, e: BaseException) -> ConfigError:
    text = str(e).strip().splitlines()
    return ConfigError(f"config key 'env_id': building environment {env_id!r} raised: "
                       f"{type(e).__name__}: {text[0] if text else ''}; call it directly to see "
                       "the full traceback")


def _looks_gymnasium(env: Any) -> bool:
    """A Gymnasium env (or a wrapper of one): its own `step`/`reset` and spaces, none of the
    protocol's `step_env`/`reset_env`."""
    return (all(hasattr(env, a) for a in ("step", "reset", "observation_space", "action_space"))
            and not (hasattr(env, "step_env") or hasattr(env, "reset_env")))


def _gymnasium_class_hint(env_id: str) -> str:
    """The line for `env_id: module:Class` naming a Gymnasium env class: the id it is
    registered under, or how to register it (under the class's own name, not a made-up one)."""
    module, _, name = env_id.partition(":") if is_import_path(env_id) else ("<module>", "",
                                                                            env_id)
    ids = gymnasium_env.registered_as(env_id) if is_import_path(env_id) else []
    what = (f"config key 'env_id': {env_id!r} is a Gymnasium env (step/reset, not gymnax's "
            "step_env/reset_env), which jaxppo steps on the host: ")
    if ids:
        return what + f"{module} registers it as {ids[0]!r}; use env_id: gymnasium/{module}:{ids[0]}"
    gid = f"{name.rpartition('.')[2]}-v0"
    return what + (f"register it in {module} with gymnasium.register(id={gid!r}, "
                   f"entry_point={env_id!r}) and use env_id: gymnasium/{module}:{gid}")


def make_env(env_id: str, env_kwargs: dict[str, Any] | None = None) -> tuple[Any, Any]:
    """`(env, env_params)` for a known `env_id`; `env_kwargs` go to the env's constructor
    (or, for a suite, to its adapter: see each adapter's docstring)."""
    check_env_id(env_id)
    if env_id.startswith(CUSTOM_PREFIX):
        raise ConfigError(f"config key 'env_id': {env_id!r} labels an environment instance; "
                          "pass it as env= from Python (make_train, Experiment, load_policy, "
                          "jaxppo.evaluate(run_dir, env=...)), or name an importable one: "
                          "env_id: mypkg.module:MyEnv")
    if host_source_of(env_id) is not None:
        raise ConfigError(f"config key 'env_id': {env_id!r} lives on the host and has no "
                          "single-env JAX form; build it with VecEnv.from_config(config, n) "
                          "(a HostVecEnv), as make_train does")
    kwargs = dict(env_kwargs or {})
    label = f"environment {env_id!r}"
    source = source_of(env_id)
    if source is not None:
        return source.make(env_id[len(source.PREFIX):], kwargs)
    local = _local()
    if env_id in local or is_import_path(env_id):
        factory = local[env_id] if env_id in local else _import_target(env_id)
        try:
            made = factory(**kwargs)
        except ConfigError:
            raise
        except TypeError as e:
            if kwargs and _rejects_kwargs(factory, kwargs):
                raise ConfigError(f"config key 'env_kwargs': {env_id!r} does not take "
                                  f"{sorted(kwargs)} ({e})") from None
            raise _raised(env_id, e) from None
        except Exception as e:  # noqa: BLE001 - the user's constructor failed: one line
            raise _raised(env_id, e) from None
        env = made[0] if isinstance(made, tuple) and len(made) == 2 else made
        if _looks_gymnasium(env):
            raise ConfigError(_gymnasium_class_hint(env_id))
        return _as_pair(made, label)
    return GYMNAX.make(env_id, kwargs)
