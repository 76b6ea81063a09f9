"""The run configuration: a frozen `PPOConfig`, its coercion and validation, and unknown keys.

Static settings (shapes, loop lengths, switches) live in `PPOConfig` and are fixed at trace time;
every way a config is made (`PPOConfig(...)`, a YAML file, a checkpoint's dict, `--set`) ends in
`__post_init__`, so a bad value is refused once, here, in one line that names its key.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import types
import typing
from typing import Any

import numpy as np

from jaxppo.envs import check_env_id
from jaxppo.envs.imports import import_env_modules
from jaxppo.envs.registry import host_source_of
from jaxppo.envs.resets import RESETS
from jaxppo.errors import ConfigError

ACTIVATIONS = ("tanh", "relu", "gelu", "silu", "elu")
TORSOS = ("mlp", "cnn", "nature_cnn")
NETWORKS = ("feedforward", "gru", "lstm")
COMPUTE_DTYPES = ("float32", "bfloat16")
FLOAT32_MAX = 3.4028234663852886e38
MATMUL_PRECISIONS = ("default", "high", "highest")
_INT32_MAX = 2**31 - 1


@dataclasses.dataclass(frozen=True)
class PPOConfig:
    """Everything that defines a PPO run. Defaults are CleanRL's / PureJaxRL's CartPole settings.

    Build it with keywords (`PPOConfig(env_id="Acrobot-v1", num_envs=8)`), from a YAML file
    (`load_config`), or get the one a run trained with (`load_checkpoint(run_dir).config`).
    Every way ends in the same validation, on the host before anything is traced, so a bad
    value is refused once, in one line naming its key and the fix. Each field below is a
    config key; the [config reference](../config.md) lists them all with type, default and
    meaning (`jaxppo config --list` prints the same table).

    Every field is static: shapes, loop lengths and switches are fixed when `make_train`
    traces the program, and changing one means a new compile. The float hyperparameters
    (`lr`, `gamma`, `gae_lambda`, `clip_eps`, `ent_coef`, `vf_coef`, `max_grad_norm`) are also
    copied into `Hparams`, which `train` takes as data: a sweep over them is one compile.

    The class is frozen: derive a variant with `dataclasses.replace(config, key=value)` (which
    re-validates), never by mutation. Configs hash and compare by content.

    Raises:
      ConfigError: a value of the wrong type or out of range, sizes that do not fit together
        (`num_minibatches` must divide `num_envs * num_steps`), or an unknown `env_id`.
    """

    env_id: str = "CartPole-v1"
    """The environment, one of: a gymnax id (`CartPole-v1`, `Breakout-MinAtar`); a probe
    (`probe/Action-v0`); an id given to `jaxppo.register_env`; `mypkg.module:MyEnv` (a JAX env
    class or factory) or `mypkg.module:MyTask-v0` (an id the module registers); a JAX suite's
    id (`brax/hopper`, `playground/CartpoleBalance`, `craftax/Craftax-Classic-Symbolic-v1`,
    `jumanji/Snake-v1`, `navix/Navix-Empty-5x5-v0`, `xminigrid/MiniGrid-Empty-6x6`); an env
    stepped on the host, `gymnasium/<id>` or `gymnasium/<module>:<id>` (a Gymnasium env) or
    `envpool/<task>` (`envpool/Breakout-v5`); or `custom/<name>`, a label for an environment
    instance given as `make_train(..., env=)`. A bare Gymnasium id (`LunarLander-v3`) is
    answered with its `gymnasium/` form rather than trained: bare ids name gymnax envs, which
    compile with the learner, and `CartPole-v1` must not change meaning with what a process
    imported."""
    env_imports: tuple[str, ...] = ()
    """Python modules imported before the environment is built: modules that register
    environments at import (`gymnasium.register`, `jaxppo.register_env`), as rl-zoo's
    `--gym-packages` (`--import MODULE` adds one). The run records them, so `jaxppo eval` and
    `--resume` import them again."""
    env_kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Keyword arguments for the environment's constructor (or its suite's adapter)."""
    env_params: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Fields of the environment's params to replace (gymnax's `EnvParams`: e.g.
    `{memory_length: 20}` for MemoryChain-bsuite, `{max_steps_in_episode: 200}`)."""
    obs_field: str | None = None
    """For dict/NamedTuple observations (a Gymnasium env's Dict too): the field to train on
    (`"a,b"` joins several, `"*"` all of them, flattened). A Gymnasium Dict without it is read
    whole, its keys sorted and each flattened (docs/how-to/gymnasium-env.md)."""
    max_episode_steps: int | None = None
    """Truncate episodes after this many steps (bootstrapped, like any time limit), on top of
    the environment's own limit; None keeps the environment's (or its adapter's) own."""
    reset: str = "auto"
    """How an env whose episode ended gets its next initial state: `auto`, `predrawn`, `cond` or
    `optimistic` (docs/explanation/resets.md). With `auto`, envs whose reset is costly get
    `optimistic` and the rest `predrawn`: costly as the env or its suite declares it (Brax,
    Playground, Craftax), else as XLA estimates it (a reset of 12 steps or more); the run's
    first line says which and why. `predrawn` draws T x N reset states before
    each rollout; `cond` resets all envs inside a `lax.cond` on steps where one ended, which a
    vmap over seeds turns into a reset on every step; `optimistic` draws `reset_batch` fresh
    states per step into a small pool, the same work vmapped or not."""
    reset_batch: int | None = None
    """Fresh reset states drawn per step under `reset: optimistic` (null: num_envs / 8, rounded
    up; with `--shard envs`, per device)."""
    total_timesteps: int = 500_000
    """Environment steps in the whole run, summed over `num_envs`."""
    num_envs: int = 4
    """Parallel environments stepped in lockstep (vmapped) per agent."""
    num_steps: int = 128
    """Rollout length per environment per update (T)."""
    update_epochs: int = 4
    """Passes over each rollout batch."""
    num_minibatches: int = 4
    """Minibatches per epoch; must divide `num_envs * num_steps`."""
    lr: float = 2.5e-4
    """Adam learning rate (the start value when `anneal_lr`)."""
    anneal_lr: bool = True
    """Decay the learning rate linearly to ~0 over the updates (CleanRL's schedule)."""
    gamma: float = 0.99
    """Discount factor."""
    gae_lambda: float = 0.95
    """GAE lambda: 0 is one-step TD, 1 is Monte Carlo."""
    clip_eps: float = 0.2
    """PPO ratio clip (the paper's epsilon); also clips the value update when `clip_vloss`."""
    clip_vloss: bool = True
    """Clip the value update around the rollout-time value (CleanRL / PureJaxRL default)."""
    ent_coef: float = 0.01
    """Entropy bonus coefficient."""
    vf_coef: float = 0.5
    """Value loss coefficient (the value loss already carries CleanRL's factor 0.5)."""
    max_grad_norm: float = 0.5
    """Global-norm gradient clip."""
    target_kl: float | None = None
    """Skip the rest of an update's minibatches once one's approx KL exceeds this (None = off)."""
    norm_adv: bool = True
    """Normalize advantages per minibatch."""
    normalize_obs: bool = False
    """Running mean/std observation normalization, kept in the train state."""
    normalize_reward: bool = False
    """Scale rewards by the running std of the discounted return (gym's NormalizeReward)."""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """Hidden layer widths of the actor and of the (separate) critic; `[]` with a conv torso
    puts both heads right on the torso's features."""
    network: str = "feedforward"
    """`feedforward`, or a policy with memory: `gru` or `lstm` (torso -> cell -> actor and
    critic heads; the update replays whole env sequences, so `num_envs` must split into
    `num_minibatches`)."""
    rnn_size: int = 128
    """Width of the GRU/LSTM hidden state (recurrent networks only)."""
    torso: str = "mlp"
    """What reads the observation before the hidden layers: `mlp` (flattened input), `cnn`
    (MinAtar's: 16 filters 3x3, for small (H, W, C) grids) or `nature_cnn` (DQN's 32-64-64
    stack and a 512 layer, for larger images; it reads uint8 as pixels, scaled to [0, 1]).
    Actor and critic each have their own, unless `shared_torso`."""
    shared_torso: bool = False
    """One conv torso read by both actor and critic (their hidden layers stay their own), as
    CleanRL's and SB3's Atari networks have it: the critic's regression trains the features the
    actor reads. Feedforward policies with a `cnn` or `nature_cnn` torso only."""
    activation: str = "tanh"
    """Hidden activation: one of tanh, relu, gelu, silu, elu."""
    compute_dtype: str = "float32"
    """Network compute dtype (`bfloat16` keeps params and losses in float32)."""
    matmul_precision: str = "default"
    """float32 matmul precision (`jax.default_matmul_precision`): `default` lets XLA use TF32 on
    Ampere/Hopper GPUs (MuJoCo Playground users found that can break training), `highest` is
    full float32. No effect on the CPU."""
    adam_eps: float = 1e-5
    """Adam epsilon: 1e-5 as CleanRL/PureJaxRL (optax's own default is 1e-8)."""

    # ---- derived sizes ---------------------------------------------------------------------
    @property
    def batch_size(self) -> int:
        """Transitions per update: `num_envs * num_steps`."""
        return self.num_envs * self.num_steps

    @property
    def minibatch_size(self) -> int:
        """Transitions per minibatch: `batch_size // num_minibatches`."""
        return self.batch_size // self.num_minibatches

    @property
    def num_updates(self) -> int:
        """Updates in the run; `total_timesteps` is rounded down to whole batches."""
        return self.total_timesteps // self.batch_size

    @property
    def env_steps(self) -> int:
        """Environment steps the run really takes (`num_updates * batch_size`)."""
        return self.num_updates * self.batch_size

    def __post_init__(self) -> None:
        _validate(self)

    def __hash__(self) -> int:  # env_kwargs is a dict: hash its canonical text instead
        return hash(tuple(repr(freeze(getattr(self, f))) for f in FIELDS))

    def to_dict(self) -> dict[str, Any]:
        """The config as plain, YAML-ready data (lists for tuples, plain dicts for mappings).

        Returns:
          `{key: value}` for every field, in field order: what a run's `config.yaml` and a
            checkpoint's header hold; `PPOConfig(**config.to_dict())` builds an equal config.
        """
        d = dataclasses.asdict(self)
        d["hidden_sizes"] = list(self.hidden_sizes)
        d["env_kwargs"] = thaw(self.env_kwargs)
        d["env_params"] = thaw(self.env_params)
        return d


def freeze(value: Any) -> Any:
    """A hashable, order-independent twin of a config value (dicts as sorted item tuples), so
    configs hash and compare by content (`Hparams.stack` finds the keys they differ in)."""
    if isinstance(value, dict):
        return tuple(sorted((str(k), freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


def _plain(key: str, value: Any) -> Any:
    """YAML- and checkpoint-ready data (NumPy scalars as Python numbers), or one line."""
    if isinstance(value, dict):
        return {k: _plain(key, v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(key, v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    _fail(key, f"holds {value!r} ({type(value).__name__})",
          "use plain numbers, strings, booleans, lists and mappings (what YAML can hold)")


def thaw(value: Any) -> Any:
    """Plain YAML-ready data: dicts and lists, recursively (YAML cannot write a tuple)."""
    if isinstance(value, dict):
        return {str(k): thaw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [thaw(v) for v in value]
    return value


FIELDS: dict[str, dataclasses.Field] = {f.name: f for f in dataclasses.fields(PPOConfig)}
_HINTS = typing.get_type_hints(PPOConfig)


def takes_text(key: str) -> bool:
    """The key's value is a string (`env_id`, `obs_field`, ...): a `--set` value that is no
    YAML (`obs_field=*`, YAML's alias mark) is then that text as written."""
    hint = _HINTS.get(key)
    return hint is str or (typing.get_origin(hint) in (typing.Union, types.UnionType)
                           and str in typing.get_args(hint))


def _fail(key: str, problem: str, fix: str) -> typing.NoReturn:
    raise ConfigError(f"config key '{key}': {problem}; {fix}")


def _as_int(value: Any) -> int | None:
    """`value` as an int if it is one (a NumPy integer too, or an integral float such as YAML's
    `1e6`), else None. Booleans are not integers here."""
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real) and math.isfinite(value) and float(value).is_integer():
        return int(value)
    return None


def _coerce(key: str, value: Any) -> Any:
    """`value` as the field's Python type, or a one-line ConfigError. What YAML and NumPy hand
    over naturally is accepted: lists for tuples, ints for floats, integral floats for ints,
    NumPy scalars for their Python twins."""
    hint = _HINTS[key]
    optional = type(None) in typing.get_args(hint)
    if value is None:
        if not optional:
            _fail(key, "must not be null", f"give a value (default {FIELDS[key].default!r})")
        return None
    base = [a for a in typing.get_args(hint) if a is not type(None)][0] if optional else hint
    out: Any = None
    if base is bool:
        out = bool(value) if isinstance(value, (bool, np.bool_)) else None
    elif base is int:
        out = _as_int(value)
    elif base is float:
        real = isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))
        out = float(value) if real else None
    elif base is str:
        out = str(value) if isinstance(value, str) else None
    elif typing.get_origin(base) is dict:
        if isinstance(value, dict) and all(isinstance(k, str) for k in value):
            out = _plain(key, thaw(value))
    elif typing.get_origin(base) is tuple and typing.get_args(base)[0] is str:
        names = [value] if isinstance(value, str) else value  # one name needs no list
        ok = isinstance(names, (list, tuple)) and all(isinstance(v, str) and v for v in names)
        if not ok:
            _fail(key, f"got {value!r}", "use a list of module names, e.g. [myenvs]")
        out = tuple(names)
    elif isinstance(value, (list, tuple)):  # tuple[int, ...]
        ints = [_as_int(v) for v in value]
        out = tuple(ints) if None not in ints else None
    if out is None:
        want = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
        if typing.get_origin(base) is dict:
            _fail(key, f"got {value!r} ({type(value).__name__})",
                  "use a mapping of argument names to values, e.g. {impl: jax}")
        _fail(key, f"got {value!r} ({type(value).__name__})",
              f"use {want.get(base, 'a list of integers')}")
    return out


def _shown(n: int) -> str:
    """`n` with thousands separators, or its number of digits past 40 of them."""
    return f"{n:,}" if len(str(abs(n))) <= 40 else f"an integer of {len(str(abs(n)))} digits"


def _validate(c: PPOConfig) -> None:
    for name in FIELDS:
        v = _coerce(name, getattr(c, name))
        object.__setattr__(c, name, v)
        if isinstance(v, float) and not math.isfinite(v):
            _fail(name, f"got {v!r}", "use a finite number")
        if isinstance(v, float) and abs(v) > FLOAT32_MAX:  # would be Inf once on the device
            _fail(name, f"got {v!r}, more than float32 (what the run computes in) holds "
                  f"(largest {FLOAT32_MAX:.4g})", "use a smaller number")
        ints = [x for x in (v if isinstance(v, tuple) else (v,))
                if isinstance(x, int) and not isinstance(x, bool)]
        big = next((x for x in ints if abs(x) > _INT32_MAX), None)
        if big is not None and name not in ("total_timesteps", "num_envs", "num_steps"):
            _fail(name, f"got {_shown(big)}, more than int32 (what the run counts and indexes in) "
                  f"holds (largest {_INT32_MAX:,})", "use a smaller number")

    if c.reset not in RESETS:
        _fail("reset", f"got {c.reset!r}", f"use one of {list(RESETS)}")
    if c.reset_batch is not None:
        if c.reset_batch <= 0:
            _fail("reset_batch", f"got {c.reset_batch}", "use a positive integer, or null")
        if c.reset in ("predrawn", "cond"):
            _fail("reset_batch", f"set to {c.reset_batch}, but reset: {c.reset} draws no batch",
                  "remove reset_batch, or use reset: optimistic")
        if c.reset_batch > c.num_envs:  # never more than every env at once: not capped quietly
            _fail("reset_batch", f"{c.reset_batch} is more than num_envs ({c.num_envs}): at "
                  "most every env ends on one step", f"use at most {c.num_envs}")
    if isinstance(c.env_id, str) and host_source_of(c.env_id) is not None and (
            c.reset != "auto" or c.reset_batch is not None):
        key, what = (("reset_batch", f"set to {c.reset_batch}") if c.reset_batch is not None
                     else ("reset", f"set to {c.reset}"))
        _fail(key, f"{what}, but {c.env_id!r} lives on the host, which resets its episodes "
              "itself (reset and reset_batch choose how a JAX env is reset)",
              "remove reset and reset_batch")
    if c.max_episode_steps is not None and c.max_episode_steps <= 0:
        _fail("max_episode_steps", f"got {c.max_episode_steps}",
              "use a positive integer, or null for the environment's own limit")
    for name in ("total_timesteps", "num_envs", "num_steps", "update_epochs", "num_minibatches"):
        if getattr(c, name) <= 0:
            _fail(name, f"got {getattr(c, name)}", "use a positive integer")
    for name in ("lr", "clip_eps", "max_grad_norm", "adam_eps"):
        if getattr(c, name) <= 0:
            _fail(name, f"got {getattr(c, name)}", "use a positive number")
    for name in ("ent_coef", "vf_coef"):
        if getattr(c, name) < 0:
            _fail(name, f"got {getattr(c, name)}", "use a number >= 0")
    for name in ("gamma", "gae_lambda"):
        if not 0.0 <= getattr(c, name) <= 1.0:
            _fail(name, f"got {getattr(c, name)}", "use a value in [0, 1]")
    if c.target_kl is not None and c.target_kl <= 0:
        _fail("target_kl", f"got {c.target_kl}", "use a positive number, or null to turn it off")
    if (c.shared_torso and c.torso in TORSOS and c.network in NETWORKS
            and (c.torso == "mlp" or c.network != "feedforward")):
        _fail("shared_torso", f"{c.network} policy with torso {c.torso}",
              "use it with a feedforward policy and torso cnn or nature_cnn (an mlp torso has "
              "nothing to share; a gru/lstm policy shares its torso and cell already)")
    heads_only = c.network == "feedforward" and c.torso != "mlp"  # the torso ends in features
    if (not c.hidden_sizes and not heads_only) or any(h <= 0 for h in c.hidden_sizes):
        _fail("hidden_sizes", f"got {list(c.hidden_sizes)}",
              "use a list of positive widths, e.g. [64, 64] (empty only for a feedforward "
              "policy with a conv torso: the heads then read the torso's features)")
    if c.activation not in ACTIVATIONS:
        _fail("activation", f"unknown activation {c.activation!r}", f"use one of {list(ACTIVATIONS)}")
    if c.network not in NETWORKS:
        _fail("network", f"got {c.network!r}", f"use one of {list(NETWORKS)}")
    if c.rnn_size <= 0:
        _fail("rnn_size", f"got {c.rnn_size}", "use a positive integer")
    if c.network != "feedforward" and c.num_envs % c.num_minibatches:
        _fail("num_minibatches", f"a {c.network} policy's minibatches are whole env sequences, "
              f"and {c.num_envs} envs do not split into {c.num_minibatches}",
              f"pick a divisor of num_envs (e.g. {_near_divisor(c.num_envs, c.num_minibatches)})")
    if c.torso not in TORSOS:
        _fail("torso", f"got {c.torso!r}", f"use one of {list(TORSOS)}")
    if c.compute_dtype not in COMPUTE_DTYPES:
        _fail("compute_dtype", f"got {c.compute_dtype!r}", f"use one of {list(COMPUTE_DTYPES)}")
    if c.matmul_precision not in MATMUL_PRECISIONS:
        _fail("matmul_precision", f"got {c.matmul_precision!r}",
              f"use one of {list(MATMUL_PRECISIONS)}")
    if c.batch_size > _INT32_MAX:
        _fail("num_envs", f"num_envs * num_steps = {_shown(c.batch_size)} transitions per update "
              f"exceeds {_INT32_MAX:,} (int32 indexing)", "lower num_envs or num_steps")
    if c.batch_size % c.num_minibatches:
        _fail("num_minibatches",
              f"num_envs * num_steps = {c.batch_size} does not split into {c.num_minibatches} "
              "minibatches",
              f"pick a divisor of {c.batch_size} (e.g. {_near_divisor(c.batch_size, c.num_minibatches)})")
    if c.total_timesteps < c.batch_size:
        _fail("total_timesteps",
              f"{c.total_timesteps} is less than one update's batch (num_envs * num_steps = "
              f"{c.batch_size})", f"use at least {c.batch_size}, or lower num_envs or num_steps")
    if c.total_timesteps > _INT32_MAX:
        _fail("total_timesteps", f"{_shown(c.total_timesteps)} exceeds {_INT32_MAX}",
              "split the run, or use fewer steps")
    import_env_modules(c.env_imports)  # they register the env the id names
    check_env_id(c.env_id)


def divisors(n: int) -> list[int]:
    """All divisors of `n` in increasing order, in O(sqrt(n)) (n may be in the billions)."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small) | {n // d for d in small})


def _near_divisor(n: int, k: int) -> int:
    return min(divisors(n), key=lambda d: (abs(d - k), d))
