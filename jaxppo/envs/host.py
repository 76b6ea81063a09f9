"""`HostVecEnv`: an environment that lives on the host (a `HostSource`: Gymnasium's vector envs,
EnvPool's pools), stepped from inside the compiled training program by one `io_callback` per
vectorised step, behind the same interface as `VecEnv`, so the rollout, evaluation, policies,
checkpoints and memory estimates take either.

The scan carries nothing of the host's state: `EnvState.inner` is an int32 token per env that
every callback takes and gives back, so each step depends on the reset and on the step before
(through the token, and through the action, which depends on the last observation): that data
dependency is what orders them, so a program resets a host env only before it steps it (every
one jaxppo builds does: `init`, `restart_episodes` and evaluation are programs of their own).
The callbacks are side effects, so each runs once, even where nothing uses a result, and none is
merged with another of the same inputs (tested). They are not JAX's *ordered* effects: those
thread XLA tokens through the program, and XLA:GPU's fusion pass aborted the process compiling a
vmapped host-env program that held them (`Check failed: shape.IsArray() || shape.IsTuple()` in
its cost analysis; jaxlib 0.11.2, H200, BENCHMARKS.md).

Vmapped agents (`--seeds N`, sweeps, nested vmaps) share ONE pool of S x N envs stepped by ONE
callback per step: `io_callback`'s own batching rule would call the host S times in sequence,
so the callback is wrapped in a `custom_vmap` whose rule folds the mapped axis into the env axis
and calls itself again (nested vmaps fold one level at a time). Agent a owns envs
[a*N, (a+1)*N); the pool is built by the first reset, at the size the callback is called with.
Reset seeds come from each agent's key (env i of an agent from its seed + i), so a run is
determined by its seed, and agents sharing a pool get what each would get alone.

A source that raises (anything: `SystemExit`, and a Ctrl-C handled while it ran, included),
or hands back an array of the wrong shape or dtype, is not allowed to raise inside XLA (a long
runtime error, with the host's state unknown): the callback records the fault
(`HostVecEnv.fault`), returns zeros, and steps nothing more; the host side (the `Experiment`,
`evaluate`) turns it into one line naming the env and the step (a Ctrl-C: the stop it asked
for).

Axis legend: N = num_envs, M = the pool's envs (N x the vmapped agents), T = num_steps.
"""

from __future__ import annotations

import math
import signal
import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_batching import custom_vmap
from jax.experimental import io_callback

from jaxppo.envs.registry import check_host_id, host_source_of
from jaxppo.envs.sources.protocol import HostSource, HostStep, HostSuite
from jaxppo.envs.spaces import ActionSpec, action_spec
from jaxppo.envs.steps import EnvState, EnvStep
from jaxppo.errors import ConfigError, EnvError
from jaxppo.process import signals_seen


def host_call(host_fn: Callable[..., tuple], result_shapes: Callable[[int], tuple]):
    """A jax function calling `host_fn(*arrays)` (each [M, ...]) on the host, once per call
    even under `jax.vmap`: a mapped axis is folded into M (`result_shapes(M)` gives the
    outputs' shapes and dtypes), the results unfolded again."""

    @custom_vmap
    def call(*args):
        return io_callback(host_fn, result_shapes(args[0].shape[0]), *args, ordered=False)

    @call.def_vmap
    def _fold(axis_size, in_batched, *args):
        if not in_batched[0]:
            raise ValueError("a host env's state must be mapped wherever its inputs are: vmap "
                             "the reset (its key) together with the steps")
        args = [a if b else jnp.broadcast_to(a, (axis_size, *a.shape))
                for a, b in zip(args, in_batched, strict=True)]
        flat = call(*[a.reshape((-1, *a.shape[2:])) for a in args])
        out = jax.tree.map(lambda x: x.reshape((axis_size, -1, *x.shape[1:])), flat)
        return out, jax.tree.map(lambda _: True, out)

    return call


class Fault(NamedTuple):
    """The first thing a host env did wrong: where (`reset` or the step-th vectorised step
    since the last reset, 0-based) and what. `interrupt`: the KeyboardInterrupt (a second
    Ctrl-C's stop-at-once, raised by the signal handler on the thread that was inside the
    env) that ended it, which the host raises again once the program is out of XLA."""

    where: str
    step: int
    what: str
    interrupt: BaseException | None = None


class _Shapes:
    """What the memory estimate reads of an env (`reset_env` traced abstractly): one env's
    observation and its int32 token; the host's own state is not on the device."""

    def __init__(self, obs_shape: tuple[int, ...], obs_dtype: Any):
        self.obs_shape, self.obs_dtype = obs_shape, obs_dtype

    def reset_env(self, key, params):
        del key, params
        return jnp.zeros(self.obs_shape, self.obs_dtype), jnp.int32(0)


def _close(box: list) -> None:
    """Close the pool held in `box` (a finalizer: it must not hold the env itself)."""
    pool = box[0]
    box[0] = None
    if pool is not None:
        pool.close()


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}".rstrip(": ")


class HostVecEnv:
    """`num_envs` envs of a host source behind `VecEnv`'s interface (see the module doc).

    `env_kwargs` go to the source (`make_source`), `max_episode_steps` too (the source's own
    time limit, which it truncates at), and `obs_field` (Dict keys, for a source with
    `TAKES_OBS_FIELD`); `evaluation=True` asks for the source's evaluation
    setting; `render=True` for frames (`source.render`), if the source says how
    (`RENDER_KWARGS`)."""

    reset_mode = "host"  # episodes restart on the host, inside the source
    lazy_reset = True  # no reset states are drawn ahead
    reset_batch = 0
    reset_note = ""  # the header line says nothing of resets: the host source does them
    masked = False
    metric_names: tuple[str, ...] = ()
    params = None

    def __init__(self, env_id: str, num_envs: int, *, env_kwargs: dict[str, Any] | None = None,
                 max_episode_steps: int | None = None, evaluation: bool = False,
                 render: bool = False, obs_field: str | None = None):
        module = host_source_of(env_id)
        if module is None:
            raise ConfigError(f"config key 'env_id': {env_id!r} is not a host environment")
        check_host_id(env_id)
        if obs_field and not getattr(module, "TAKES_OBS_FIELD", False):
            raise ConfigError(f"config key 'obs_field': environment {env_id!r} gives plain "
                              f"array observations, so there is no field {obs_field!r} to "
                              "pick; remove obs_field")
        self.env_id, self.num_envs, self.evaluation = env_id, int(num_envs), evaluation
        self._obs_field = {"obs_field": obs_field} if obs_field else {}
        self._module: HostSuite = module
        kwargs = dict(env_kwargs or {})
        if max_episode_steps is not None:
            kwargs["max_episode_steps"] = int(max_episode_steps)
        drawing = getattr(module, "RENDER_KWARGS", {}) if render else {}
        self._kwargs = {**kwargs, **drawing}
        self._box: list[HostSource | None] = [None]
        seen = signals_seen()  # a KeyboardInterrupt with no new signal is the env's own
        weakref.finalize(self, _close, self._box)
        try:
            try:
                pool = self._build(self.num_envs)
            except ConfigError:
                if not drawing:
                    raise
                self._kwargs = kwargs  # an env that takes no render mode: observation frames
                pool = self._build(self.num_envs)
        except SystemExit as e:  # an env's constructor that exits would end jaxppo silently
            raise ConfigError(f"config key 'env_id': building environment {env_id!r} raised "
                              f"SystemExit({e.code!r}); call it directly to see why") from None
        except KeyboardInterrupt:
            if signals_seen() > seen or signal.getsignal(signal.SIGINT) is \
                    signal.default_int_handler:
                raise  # a Ctrl-C: the user's stop
            raise ConfigError(f"config key 'env_id': building environment {env_id!r} raised "
                              "KeyboardInterrupt (no Ctrl-C came: its own code raised it); "
                              "call it directly to see why") from None
        label = f"environment {env_id!r}"
        obs_space = pool.observation_space
        self.obs_layout: list[dict] | None = getattr(pool, "obs_layout", None)
        self.obs_shape: tuple[int, ...] = tuple(int(s) for s in obs_space.shape)
        if math.prod(self.obs_shape) == 0:
            raise ConfigError(f"{label}: the observation is empty (shape {self.obs_shape})")
        self._space_dtype = np.dtype(obs_space.dtype)
        # uint8/bool observations (images) stay so until the network casts them, as in VecEnv
        compact = self._space_dtype in (np.uint8, np.bool_)
        self.obs_dtype = jnp.dtype(self._space_dtype) if compact else jnp.dtype(jnp.float32)
        spec: ActionSpec = action_spec(pool.action_space, label)
        self.action_spec = spec
        self.discrete = spec.kind != "continuous"
        self.multi_discrete = spec.kind == "multidiscrete"
        self.nvec = spec.nvec
        self.action_shape: tuple[int, ...] = spec.shape
        self.action_dim = spec.logits_dim
        self.action_low = None if self.discrete else jnp.asarray(spec.low)
        self.action_high = None if self.discrete else jnp.asarray(spec.high)
        limit = pool.max_episode_steps
        self.max_episode_steps: int | None = int(limit) if limit else None
        self.env = _Shapes(self.obs_shape, self.obs_dtype)
        self.fault: Fault | None = None
        self._closing = False  # callbacks in flight while closing step nothing
        self.steps = 0  # vectorised steps since the last reset (names a fault's step)
        self._seen = signals_seen()  # as a reset or step began: a Ctrl-C after it is real
        self._reset_call = host_call(self._host_reset, self._reset_shapes)
        self._step_call = host_call(self._host_step, self._step_shapes)

    @classmethod
    def from_config(cls, config: Any, num_envs: int, *, evaluation: bool = False,
                    render: bool = False) -> HostVecEnv:
        return cls(config.env_id, num_envs, env_kwargs=config.env_kwargs,
                   max_episode_steps=config.max_episode_steps, evaluation=evaluation,
                   render=render, obs_field=config.obs_field)

    # ---- the pool, on the host -------------------------------------------------------------
    def _build(self, num_envs: int) -> HostSource:
        """The pool of `num_envs` (the one held, if it has that size)."""
        pool = self._box[0]
        if pool is not None and pool.num_envs == num_envs:
            return pool
        _close(self._box)
        name = self.env_id[len(self._module.PREFIX):]
        self._box[0] = self._module.make_source(name, num_envs, self._kwargs, self.evaluation,
                                                **self._obs_field)
        return self._box[0]

    @property
    def source(self) -> HostSource:
        """The pool as last built (num_envs, or S x num_envs once vmapped agents reset it)."""
        return self._box[0] if self._box[0] is not None else self._build(self.num_envs)

    def close(self) -> None:
        """Close the pool (subprocesses of an async one included); a later reset rebuilds it.
        A program still in flight (a dropped chunk) first runs out on no-op callbacks, so the
        pool is never closed under a step."""
        self._closing = True
        try:
            jax.effects_barrier()
        finally:
            _close(self._box)
            self._closing = False

    def check(self) -> None:
        """Raise the recorded fault as one line (`EnvError`), and forget it."""
        fault, self.fault = self.fault, None
        if fault is not None and fault.interrupt is not None:
            raise fault.interrupt  # a Ctrl-C inside the env: the stop it asked for
        if fault is not None:
            where = "reset" if fault.where == "reset" else f"vectorised step {fault.step + 1}"
            raise EnvError(f"environment {self.env_id!r} failed at its {where}: {fault.what}")

    def _reset_shapes(self, m: int) -> tuple:
        return (jax.ShapeDtypeStruct((m, *self.obs_shape), self.obs_dtype),
                jax.ShapeDtypeStruct((m,), jnp.int32))

    def _step_shapes(self, m: int) -> tuple:
        obs = jax.ShapeDtypeStruct((m, *self.obs_shape), self.obs_dtype)
        f32, flag = (jax.ShapeDtypeStruct((m,), t) for t in (jnp.float32, jnp.bool_))
        return obs, obs, f32, flag, flag, f32, flag, jax.ShapeDtypeStruct((m,), jnp.int32)

    def _zeros(self, shapes: tuple) -> tuple:
        return tuple(np.zeros(s.shape, s.dtype) for s in shapes)

    def _record(self, where: str, e: BaseException) -> None:
        """Keep the first fault. Any exception is one: a source's `SystemExit` or a Ctrl-C
        raised while it ran must not escape into XLA (a runtime error, tracebacks)."""
        if self.fault is None:
            signalled = (hasattr(e, "signum") or signals_seen() > self._seen
                         or signal.getsignal(signal.SIGINT) is signal.default_int_handler)
            interrupt = e if isinstance(e, KeyboardInterrupt) and signalled else None
            what = ("interrupted" if interrupt is not None else
                    "KeyboardInterrupt (no Ctrl-C came: the env's own code raised it)"
                    if isinstance(e, KeyboardInterrupt) else _first_line(e))
            self.fault = Fault(where, self.steps, what, interrupt)

    def _obs(self, x: Any, m: int, name: str) -> np.ndarray:
        """`x` as the [M, *obs_shape] array the program expects, or ValueError naming why."""
        x = np.asarray(x)
        if x.shape != (m, *self.obs_shape):
            raise ValueError(f"{name} of shape {x.shape}, expected {(m, *self.obs_shape)}")
        if not np.can_cast(x.dtype, self._space_dtype, "same_kind"):
            raise ValueError(f"{name} of dtype {x.dtype}, expected {self._space_dtype}")
        with np.errstate(over="ignore", invalid="ignore"):  # said below, as one line
            out = x.astype(self.obs_dtype)
        if x.dtype.kind == "f" and x.dtype.itemsize > out.dtype.itemsize:  # finite, too big:
            big = np.isfinite(x) & ~np.isfinite(out)  # not the env's NaN/Inf, the cast's
            if big.any():
                raise ValueError(f"{name} holds {x[big].flat[0]:.3g}, a finite {x.dtype} value "
                                 f"beyond {out.dtype}'s range (largest "
                                 f"{np.finfo(out.dtype).max:.3g}), which the policy reads; "
                                 "scale it down in the env")
        return out

    def _flags(self, x: Any, m: int, name: str, dtype) -> np.ndarray:
        x = np.asarray(x)
        if x.shape != (m,):
            raise ValueError(f"{name} of shape {x.shape}, expected {(m,)}")
        return x.astype(dtype)

    def _host_reset(self, seeds: np.ndarray) -> tuple:
        m = seeds.shape[0]
        self.steps, self._seen = 0, signals_seen()
        if self.fault is None and not self._closing:
            try:
                pool = self._build(m)
                obs = self._obs(pool.reset(np.asarray(seeds, np.int64)), m, "reset observation")
                return obs, np.zeros((m,), np.int32)
            except BaseException as e:  # noqa: BLE001 - reported on the host, as one line
                self._record("reset", e)
        return self._zeros(self._reset_shapes(m))

    def _host_step(self, token: np.ndarray, action: np.ndarray) -> tuple:
        m = token.shape[0]
        self._seen = signals_seen()
        if self.fault is None and not self._closing:
            try:
                pool = self._box[0]
                if pool is None or pool.num_envs != m:
                    raise RuntimeError(f"stepped with {m} actions before a reset of {m} envs")
                out: HostStep = pool.step(np.asarray(action))
                result = (self._obs(out.obs, m, "observation"),
                          self._obs(out.final_obs, m, "final observation"),
                          self._flags(out.reward, m, "reward", np.float32),
                          self._flags(out.terminated, m, "terminated", bool),
                          self._flags(out.truncated, m, "truncated", bool),
                          self._flags(out.score, m, "score", np.float32),
                          self._flags(out.game_over, m, "game_over", bool),
                          np.asarray(token, np.int32))
                self.steps += 1
                return result
            except BaseException as e:  # noqa: BLE001 - reported on the host, as one line
                self._record("step", e)
        return self._zeros(self._step_shapes(m))

    # ---- VecEnv's interface, on the device -------------------------------------------------
    def reset(self, key: jax.Array) -> tuple[jax.Array, EnvState]:
        """Reset every env: env i from this key's seed + i."""
        seed = jax.random.bits(key, dtype=jnp.uint32)
        obs, token = self._reset_call(seed + jnp.arange(self.num_envs, dtype=jnp.uint32))
        zeros = jnp.zeros((self.num_envs,), jnp.float32)
        return obs, EnvState(token, zeros, jnp.zeros((self.num_envs,), jnp.int32))

    keys_per_step = 0
    """The host env has its own randomness, seeded at reset: it takes no keys."""

    def randomness_from_keys(self, keys: jax.Array) -> jax.Array:
        """[T] zeros for the rollout's scan to walk over (`keys` is [T, 0])."""
        return jnp.zeros((keys.shape[0],), jnp.int8)

    def draw_randomness(self, key: jax.Array, num_steps: int) -> jax.Array:
        """Nothing to draw: [T] zeros for the rollout's scan to walk over."""
        del key
        return jnp.zeros((num_steps,), jnp.int8)

    def step(self, key: jax.Array, state: EnvState, action: jax.Array) -> tuple[EnvState, EnvStep]:
        del key
        return self.step_with(None, state, action)

    def clip_action(self, action: jax.Array) -> jax.Array:
        return action if self.discrete else jnp.clip(action, self.action_low, self.action_high)

    def step_with(self, rand: Any, state: EnvState,
                  action: jax.Array) -> tuple[EnvState, EnvStep]:
        """Step every env once on the host; episodes that ended restart there (the source's
        `obs` is then a reset one, `final_obs` the true last one)."""
        del rand
        action = self.clip_action(action)
        obs, final_obs, reward, terminated, truncated, score, game_over, token = (
            self._step_call(state.inner, action))
        ep_return = state.episode_return + score
        ep_length = state.episode_length + 1
        new_state = EnvState(token, jnp.where(game_over, 0.0, ep_return),
                             jnp.where(game_over, 0, ep_length))
        step = EnvStep(obs, final_obs, reward, terminated, terminated | truncated, ep_return,
                       ep_length, {}, game_over)
        return new_state, step

    def action_mask(self, state: EnvState) -> None:
        del state
        return None

    def allows_nothing(self, mask: jax.Array) -> jax.Array:
        return jnp.zeros(mask.shape[:1], bool)
