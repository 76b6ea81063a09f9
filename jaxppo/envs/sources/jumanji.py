"""Jumanji environments behind jaxppo's env protocol (`env_id: jumanji/<name>`, e.g.
`jumanji/Snake-v1`, `jumanji/Maze-v0`, `jumanji/Game2048-v1`).

Jumanji's API is dm_env's: `reset(key) -> (state, timestep)`, `step(state, action) -> (state,
timestep)` with no key (randomness lives in the state), and a timestep whose LAST step ends an
episode. Its discount should say why (0: terminal, 1: cut short), but most Jumanji envs (Snake,
Maze, Tetris, RubiksCube...) end at their `time_limit` with discount 0 too. Treating that as
death would teach the critic that the last steps before the limit are worth nothing, so this
adapter calls a LAST step truncated when its discount is non-zero or the state's step counter
has reached the env's `time_limit`, and terminated otherwise.

Observations are NamedTuples; the adapter hands VecEnv a dict of arrays with the same field
names (a nested field such as Maze's `agent_position`, a `Position(row, col)`, is flattened into
one array) plus `action_mask` rewritten to one bool per policy logit: `[n]` for Discrete,
`[sum(nvec)]` for MultiDiscrete. A mask that is joint over a MultiDiscrete action (its shape is
`nvec`: Minesweeper, Tetris, Sudoku, BinPack, FlatPack) cannot be factorised per sub-action, so
those envs are exposed as one `Discrete(prod(nvec))` whose index is unravelled here. The default
`obs_field` is every non-mask field except the step counter (an unnormalised integer that grows
to the time limit); set `obs_field` to choose others.

Multi-agent envs (Connector, LevelBasedForaging, SearchAndRescue) are driven as one centralised
agent: their per-agent rewards are summed and the joint action is the MultiDiscrete (or Box)
vector of all agents' actions.

`env_kwargs` go to Jumanji's constructor (`Snake-v1: {num_rows: 6, num_cols: 6, time_limit:
200}`); a kwarg the constructor does not take but its default generator does (`Maze-v0:
{num_rows: 5, num_cols: 5}`) builds that generator with it.

Jumanji is an optional dependency (`pip install 'jaxppo[jumanji]'`), imported only for
`jumanji/` ids.
"""

from __future__ import annotations

import inspect
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxppo.envs.sources.suite import require
from jaxppo.envs.spaces import Box, Discrete, MultiDiscrete
from jaxppo.errors import ConfigError

PREFIX = "jumanji/"
SUITE = "Jumanji"
INSTALL_HINT = "pip install 'jaxppo[jumanji]'"
MASK = "action_mask"
COUNTERS = ("step_count", "step")  # the state/observation fields Jumanji counts steps in
# Envs whose mask is joint over their MultiDiscrete action (found by shape too; named here for
# boards where the shapes cannot tell, e.g. a 2-row Minesweeper's mask (2, c) = nvec = (2, c)).
JOINT_MASK = frozenset({"BinPack", "FlatPack", "Minesweeper", "Sudoku", "Tetris"})


def _jumanji(env_id: str = ""):
    return require("jumanji", SUITE, INSTALL_HINT, env_id)


NAMES = ("BinPack-v2", "CVRP-v1", "Cleaner-v0", "Connector-v3", "FlatPack-v0", "Game2048-v1",
         "GraphColoring-v1", "JobShop-v0", "Knapsack-v1", "LevelBasedForaging-v0", "MMST-v0",
         "Maze-v0", "Minesweeper-v0", "MultiCVRP-v0", "PacMan-v1", "RobotWarehouse-v0",
         "RubiksCube-partly-scrambled-v0", "RubiksCube-v0", "SearchAndRescue-v0",
         "SlidingTilePuzzle-v0", "Snake-v1", "Sokoban-v0", "Sudoku-v0", "Sudoku-very-easy-v0",
         "TSP-v1", "Tetris-v0")
"""Jumanji 1.1's registered ids, for suggestions without importing Jumanji (~1 s of CPU for
every typo); tests/integration/test_env_jumanji.py holds it to Jumanji's registry."""


def env_ids() -> list[str]:
    jumanji = _jumanji()
    return sorted(PREFIX + i for i in jumanji.registered_environments())


def suggest_id(env_id: str) -> str | None:
    """`jumanji/<id>` for a bare Jumanji id (`Snake-v1`; case and a missing version forgiven
    when only one id fits)."""
    names = NAMES
    if env_id in names:
        return PREFIX + env_id
    squash = env_id.strip().lower()
    hits = [n for n in names if squash in (n.lower(), n.lower().rsplit("-v", 1)[0])]
    return PREFIX + hits[0] if len(hits) == 1 else None


def make(name: str, kwargs: dict[str, Any]) -> tuple[JumanjiEnv, None]:
    """The adapter's entry point (`registry.make_env`): `name` is a registered Jumanji id."""
    env_id = PREFIX + name
    suite_env = _build(name, dict(kwargs), env_id)
    return JumanjiEnv(env_id, suite_env), None


def _build(name: str, kwargs: dict[str, Any], env_id: str) -> Any:
    """`jumanji.make(name, **kwargs)`, with the kwargs the constructor lacks given to its
    default generator, and any failure as one line."""
    jumanji = _jumanji(env_id)
    from jumanji import registration

    spec = registration._REGISTRY[name]  # noqa: SLF001 - Jumanji's registry: its entry point
    ctor = registration.load(spec.entry_point)
    takes = set(inspect.signature(ctor).parameters)
    own = {k: v for k, v in kwargs.items() if k in takes}
    rest = {k: v for k, v in kwargs.items() if k not in takes}
    try:
        if rest:
            own["generator"] = _generator(jumanji, name, own, rest, takes, env_id)
        return jumanji.make(name, **own)
    except ConfigError:
        raise
    except Exception as e:  # noqa: BLE001 - a bad value or an env that cannot build: one line
        text = (str(e).strip().splitlines() or [""])[0]
        what = f"with env_kwargs {sorted(kwargs)}" if kwargs else "as registered"
        raise ConfigError(f"config key 'env_kwargs': Jumanji's {env_id!r} cannot be built {what} "
                          f"({type(e).__name__}: {text})") from None


def _generator(jumanji: Any, name: str, own: dict, rest: dict, takes: set, env_id: str) -> Any:
    """The env's default generator rebuilt with `rest` (kwargs only the generator takes); its
    other arguments are read back from the default generator's attributes of the same name."""
    default = getattr(jumanji.make(name, **own), "generator", None) \
        if "generator" in takes and "generator" not in own else None
    gen_params = inspect.signature(type(default)).parameters if default is not None else {}
    unknown = sorted(k for k in rest if k not in gen_params)
    if unknown:
        accepted = sorted((takes | set(gen_params)) - {"self", "viewer", "generator",
                                                       "reward_fn", "render_mode"})
        raise ConfigError(f"config key 'env_kwargs': Jumanji's {env_id!r} takes no "
                          f"{', '.join(repr(k) for k in unknown)}; it takes {', '.join(accepted)}")
    args = {}
    for p in gen_params.values():
        if p.name in rest:
            args[p.name] = rest[p.name]
        elif hasattr(default, p.name):
            args[p.name] = getattr(default, p.name)
        elif p.default is inspect.Parameter.empty:
            raise ConfigError(f"config key 'env_kwargs': Jumanji's {env_id!r} generator "
                              f"{type(default).__name__} also needs {p.name!r}; set it too")
    return type(default)(**args)


@struct.dataclass
class JumanjiState:
    """The Jumanji state is kept as its leaves (`JumanjiEnv.suite_state` rebuilds it): Jumanji's
    chex dataclasses are not flax-serialisable, and checkpoints save the env state."""

    leaves: tuple  # the Jumanji env's own state, flattened (it carries its own PRNG key)
    truncated: jax.Array  # bool: the last step ended the episode by a time limit
    metrics: dict[str, jax.Array]  # the last step's scalar `extras`, float32


def _fields(obs: Any) -> dict[str, Any]:
    if hasattr(obs, "_fields"):
        return obs._asdict()
    if hasattr(obs, "__dataclass_fields__"):
        return {f: getattr(obs, f) for f in obs.__dataclass_fields__}
    if isinstance(obs, dict):
        return dict(obs)
    return {}


def _flatten(value: Any) -> jax.Array:
    """One array for a field: as is, or a nested field's leaves raveled and joined (float32 when
    their dtypes differ)."""
    leaves = jax.tree.leaves(value)
    if len(leaves) == 1:
        return jnp.asarray(leaves[0])
    dtypes = {jnp.asarray(x).dtype for x in leaves}
    dtype = dtypes.pop() if len(dtypes) == 1 else jnp.float32
    return jnp.concatenate([jnp.ravel(x).astype(dtype) for x in leaves])


class JumanjiEnv:
    """One Jumanji env with the protocol's API; Jumanji's step needs no key, so `step_env`
    ignores it (the env's own state carries its randomness)."""

    def __init__(self, env_id: str, suite_env: Any):
        from jumanji import specs

        self.env_id = env_id
        self.suite_env = suite_env
        self.time_limit = getattr(suite_env, "time_limit", None)
        state, ts = jax.eval_shape(suite_env.reset, jax.random.key(0))
        self._treedef = jax.tree.structure(state)
        self._counter = next((c for c in COUNTERS if isinstance(getattr(state, c, None),
                                                                 jax.ShapeDtypeStruct)), None)
        raw_fields = _fields(ts.observation)
        self._pytree_obs = bool(raw_fields)
        self._action_from_spec(suite_env.action_spec, specs, raw_fields.get(MASK),
                               type(suite_env).__name__ in JOINT_MASK)
        data = [f for f in raw_fields if f != MASK]
        keep = [f for f in data if f not in COUNTERS] or data
        self.default_obs_field = ",".join(keep) if self._pytree_obs else None
        # Scalar extras of a step become episode metrics; reset has none, so zeros stand in.
        step_ts = jax.eval_shape(suite_env.step, state,
                                 jax.ShapeDtypeStruct(self._suite_shape, self._suite_dtype))[1]
        extras = step_ts.extras if isinstance(step_ts.extras, dict) else {}
        self.metric_names = tuple(sorted(str(k) for k, v in extras.items()
                                         if getattr(v, "shape", None) == ()))

    # ---- actions ---------------------------------------------------------------------------
    def _action_from_spec(self, spec: Any, specs: Any, mask: Any, joint_hint: bool) -> None:
        """Decide the jaxppo action space and how an action and the mask map to Jumanji's."""
        self._suite_shape = tuple(spec.shape) if hasattr(spec, "shape") else None
        self._suite_dtype = getattr(spec, "dtype", jnp.int32)
        self._low = 0
        self._joint = False
        mask_shape = tuple(mask.shape) if mask is not None else None
        if isinstance(spec, specs.DiscreteArray):
            self.nvec = (int(spec.num_values),)
            self.kind = "discrete"
        elif isinstance(spec, specs.BoundedArray) and jnp.issubdtype(spec.dtype, jnp.integer):
            low = np.broadcast_to(np.asarray(spec.minimum), spec.shape).reshape(-1)
            high = np.broadcast_to(np.asarray(spec.maximum), spec.shape).reshape(-1)
            self.nvec = tuple(int(h - lo + 1) for lo, h in zip(low, high, strict=True))
            self._low = np.asarray(low, np.int32).reshape(spec.shape) if low.any() else 0
            self.kind = "discrete" if spec.shape == () else "multidiscrete"
            # A joint mask (shape nvec) is not one bool per sub-action: use one flat Discrete.
            per_sub = (len(self.nvec), max(self.nvec))
            if self.kind == "multidiscrete" and mask_shape == self.nvec and (
                    mask_shape != per_sub or joint_hint):
                self._joint, self.kind = True, "discrete"
        elif isinstance(spec, specs.Array):
            self.kind = "continuous"
            size = max(1, math.prod(spec.shape))
            lo = getattr(spec, "minimum", -np.inf)
            hi = getattr(spec, "maximum", np.inf)
            self._box = Box(np.broadcast_to(np.asarray(lo, np.float32), spec.shape).reshape(-1),
                            np.broadcast_to(np.asarray(hi, np.float32), spec.shape).reshape(-1),
                            (size,))
            self.nvec = ()
        else:
            raise ConfigError(f"{self.env_id}: Jumanji action spec {type(spec).__name__} is not "
                              "supported (jaxppo takes one discrete, multi-discrete or box action)")
        if mask_shape is not None and self.kind == "continuous":
            raise ConfigError(f"{self.env_id}: an action mask with continuous actions")
        if mask_shape is not None and not self._mask_fits(mask_shape):
            raise ConfigError(f"{self.env_id}: Jumanji's action mask of shape {mask_shape} fits "
                              f"neither the actions {self.nvec} nor one row per sub-action")

    def _mask_fits(self, shape: tuple[int, ...]) -> bool:
        if self.kind == "discrete":
            return math.prod(shape) == math.prod(self.nvec)
        return len(shape) == 2 and shape[0] == len(self.nvec)

    def _to_suite(self, action: jax.Array) -> jax.Array:
        if self.kind == "continuous":
            return jnp.reshape(action, self._suite_shape).astype(self._suite_dtype)
        if self._joint:
            parts = jnp.unravel_index(action, self.nvec)
            return jnp.stack(parts).reshape(self._suite_shape).astype(self._suite_dtype) \
                + jnp.asarray(self._low, self._suite_dtype)
        action = jnp.reshape(action, self._suite_shape) + jnp.asarray(self._low, jnp.int32)
        return action.astype(self._suite_dtype)

    def _mask(self, mask: jax.Array) -> jax.Array:
        """Jumanji's mask as one bool per policy logit."""
        mask = jnp.asarray(mask, bool)
        if self.kind == "discrete":
            return jnp.reshape(mask, (-1,))
        # Row k holds sub-action k's choices; values past the row's end (MultiCVRP's spec is one
        # wider than its mask) are illegal.
        width = mask.shape[1]
        return jnp.concatenate([mask[k, :n] if n <= width else
                                jnp.pad(mask[k], (0, n - width)) for k, n in enumerate(self.nvec)])

    # ---- the protocol ----------------------------------------------------------------------
    @property
    def default_params(self) -> None:
        return None

    def _obs(self, obs: Any) -> Any:
        if not self._pytree_obs:
            return obs
        out = {}
        for name, value in _fields(obs).items():
            out[name] = self._mask(value) if name == MASK else _flatten(value)
        return out

    def reset_env(self, key: jax.Array, params: Any = None):
        inner, ts = self.suite_env.reset(key)
        zeros = {k: jnp.float32(0.0) for k in self.metric_names}
        state = JumanjiState(tuple(jax.tree.leaves(inner)), jnp.bool_(False), zeros)
        return self._obs(ts.observation), state

    def step_env(self, key: jax.Array, state: JumanjiState, action: jax.Array, params: Any = None):
        del key  # Jumanji's step takes no key: its randomness is in the state
        inner, ts = self.suite_env.step(self.suite_state(state), self._to_suite(action))
        last = ts.step_type == 2  # StepType.LAST
        time_up = jnp.bool_(False)
        if self.time_limit is not None and self._counter is not None:
            time_up = getattr(inner, self._counter) >= self.time_limit
        # Jumanji ends most time limits with discount 0: the step counter says which it was.
        truncated = last & (jnp.any(ts.discount > 0) | time_up)
        terminated = last & ~truncated
        reward = jnp.sum(ts.reward).astype(jnp.float32)  # multi-agent: the team's reward
        metrics = {k: jnp.asarray(ts.extras[k], jnp.float32) for k in self.metric_names}
        new_state = JumanjiState(tuple(jax.tree.leaves(inner)), truncated, metrics)
        return self._obs(ts.observation), new_state, reward, terminated, dict(ts.extras)

    def suite_state(self, state: JumanjiState) -> Any:
        """Jumanji's own state (for its `render`, or to step it directly)."""
        return jax.tree.unflatten(self._treedef, state.leaves)

    def is_truncated(self, state: JumanjiState, params: Any = None) -> jax.Array:
        return state.truncated

    def episode_metrics(self, state: JumanjiState, params: Any = None) -> dict[str, jax.Array]:
        return dict(state.metrics)

    def render(self, state: JumanjiState, params: Any = None) -> np.ndarray:
        """One frame (uint8 [H, W, 3]) for `jaxppo eval --gif`: Jumanji's own matplotlib
        viewer, its figure read back as an array (the viewer's `rgb_array` mode) instead of
        shown in a window."""
        viewer = next((v for v in (getattr(self.suite_env, n, None) for n in
                                   ("_viewer", "_env_viewer", "viewer"))
                       if hasattr(v, "_display_rgb_array")), None)
        if viewer is None:
            raise NotImplementedError(f"Jumanji's {self.env_id} has no matplotlib viewer")
        viewer._display = viewer._display_rgb_array  # noqa: SLF001 - its rgb_array mode
        frame = viewer.render(self.suite_state(state))
        if frame is None:
            raise NotImplementedError(f"Jumanji's viewer for {self.env_id} returns no frame")
        return np.asarray(frame)[..., :3]

    def observation_space(self, params: Any = None) -> Any:
        """Only plain-array observations are checked against this (pytrees use `obs_field`)."""
        obs = jax.eval_shape(self.suite_env.reset, jax.random.key(0))[1].observation
        return None if self._pytree_obs else Box(-np.inf, np.inf, tuple(obs.shape))

    def action_space(self, params: Any = None) -> Discrete | MultiDiscrete | Box:
        if self.kind == "continuous":
            return self._box
        if self.kind == "discrete":
            return Discrete(math.prod(self.nvec))
        return MultiDiscrete(self.nvec)
