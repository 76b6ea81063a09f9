"""Checkpoints: the whole runner state (params, optimizer, normalizer, env state, RNG keys) plus
the config, in one msgpack file (flax.serialization; never pickle), written atomically.

Layout: `RUN_DIR/checkpoint/checkpoint.msgpack`. The file holds a small header (format tag,
version, config, update count, number of runs, SHA-256 of the payload) and the payload (the
runner state as a msgpack'd state dict). Loading checks all of it against what the config
builds, so a corrupt, truncated or mismatched file gives one clear `CheckpointError` line.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import os
import uuid
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import msgpack
import numpy as np
from flax import serialization

from jaxppo.config import PPOConfig, config_from_dict
from jaxppo.core.train import make_train
from jaxppo.envs.identity import class_name, env_mismatch
from jaxppo.errors import CheckpointError, ConfigError, UsageError
from jaxppo.keys import is_key, to_host
from jaxppo.labels import listed, tree_text
from jaxppo.rundir import names
from jaxppo.rundir.files import check_no_symlinks, remove_stale_temps, write_atomic
from jaxppo.rundir.record import RunRecord

FORMAT = "jaxppo-checkpoint"
VERSION = 2  # 2: the checksum covers the header too
FILENAME = names.CHECKPOINT
FILE = FILENAME
_MAGIC = b"\x82"  # a checkpoint file is a msgpack map of two entries: header and payload


RUN_ID_FILE = names.RUN_ID
"""`RUN_DIR/run_id`: the run's id, also in every checkpoint's header (`run_id`), so a checkpoint
copied into another run is refused. A run directory from before it has none: its checkpoint
belongs to it, and a resume gives it one."""


def run_id_of(run_dir: str) -> str | None:
    """The id in `run_dir/run_id`, or None (a run directory from before run ids)."""
    try:
        with open(os.path.join(run_dir, RUN_ID_FILE), encoding="ascii") as f:
            return f.read().strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def ensure_run_id(run_dir: str) -> str:
    """`run_dir`'s id, made now (random) where it has none."""
    have = run_id_of(run_dir)
    if have is None:
        have = uuid.uuid4().hex
        write_atomic(os.path.join(run_dir, RUN_ID_FILE), have + "\n")
    return have


def _check_run_id(header: dict, file: str) -> None:
    """Refuse a checkpoint written by another run than the directory it is in."""
    run_dir = os.path.dirname(os.path.dirname(os.path.abspath(file)))
    theirs = header.get("run_id")
    if theirs is None or not _is_run_dir(run_dir):
        return  # written before run ids (it belongs to its own directory), or a lone file
    mine = run_id_of(run_dir)
    if mine == theirs:
        return
    id_file = os.path.join(run_dir, RUN_ID_FILE)
    if os.path.exists(id_file) and not (mine and len(mine) == 32
                                        and all(c in "0123456789abcdef" for c in mine)):
        raise CheckpointError(f"'{id_file}' is damaged (it holds no run id jaxppo writes: cut, "
                              f"emptied or edited); if checkpoint '{file}' is this run's own, "
                              f"put its id back: echo {theirs} > {id_file}")
    held = (f"this run directory's id, in {id_file}, is {mine}" if mine else
            f"this run directory has no {RUN_ID_FILE} file")
    raise CheckpointError(f"checkpoint '{file}' belongs to another run (run id {theirs}; "
                          f"{held}): one of them was copied from another run directory, whose "
                          "seeds and logs are not this one's; resume that run, or put this "
                          "run's own checkpoint (or run_id) back")


def _check_v1(header: dict, state: dict, file: str) -> None:
    """Version 1 checksummed the payload alone: its header is checked against what the
    payload vouches for (each agent's update count), so an edited update is refused."""
    steps = np.asarray(state.get("train_state", {}).get("step", []) if isinstance(state, dict)
                       else [])
    if steps.size and int(steps.max()) != header["update"]:
        raise CheckpointError(f"checkpoint '{file}' (format version 1, whose checksum covers "
                              f"only its arrays) says update {header['update']} but its arrays "
                              f"were saved at update {int(steps.max())} (corrupt or edited); "
                              "restore it from a backup or start a new run")


def _is_run_dir(path: str) -> bool:
    """A directory jaxppo started a run in (it writes config.yaml first)."""
    config = os.path.join(path, names.CONFIG)
    return os.path.lexists(config) and not os.path.isdir(config)


def checkpoint_path(path: str | os.PathLike) -> str:
    """Accept a run dir, its `checkpoint/` dir, or the file itself."""
    if not isinstance(path, (str, os.PathLike)):
        why = (" (a run with logdir=None writes no files, so it has no checkpoint to load: give "
               "it a logdir, or use its RunResult.train_state)" if path is None else "")
        raise UsageError(f"expected a run directory, got {path!r}{why}")
    path = os.fspath(path)
    if os.path.isdir(os.path.join(path, names.CHECKPOINT_DIR)) or _is_run_dir(path):
        return os.path.join(path, names.CHECKPOINT_DIR, FILENAME)
    if os.path.isdir(path):
        path = os.path.join(path, FILENAME)
    return path


def _digest(header: dict, payload: bytes) -> str:
    """SHA-256 over everything a checkpoint restores: the header (config, update, runs, the
    running account) without its own digest, then the payload."""
    fields = {k: v for k, v in header.items() if k != "sha256"}
    return hashlib.sha256(msgpack.packb(fields, use_bin_type=True) + payload).hexdigest()


def save_checkpoint(run_dir: str, runner, config: PPOConfig, update: int, num_runs: int,
                    extra: dict | None = None, allow_nonfinite: bool = False) -> str:
    """Write atomically: a temp file in the same dir, fsync, then rename over the old one.

    A kill during the save leaves the previous checkpoint intact (and the next save removes
    the temp file it left), and a diverged (non-finite) state is refused, so a bad state never
    replaces a good checkpoint (`allow_nonfinite`: a sweep, whose diverged agents are flagged
    and whose others go on).
    """
    host = to_host(runner)
    train_state = getattr(host, "train_state", host)
    if not allow_nonfinite and not all(np.isfinite(x).all() for x in jax.tree.leaves(train_state)
                                       if np.issubdtype(x.dtype, np.floating)):
        raise CheckpointError("refusing to save a checkpoint with NaN/Inf parameters (the run "
                              "diverged); the previous checkpoint is kept")
    if not os.path.isdir(run_dir):  # deleted under a running run: never recreate it silently
        raise FileNotFoundError(errno.ENOENT, "the run directory was deleted", run_dir)
    ckpt_dir = os.path.join(run_dir, names.CHECKPOINT_DIR)
    os.makedirs(ckpt_dir, exist_ok=True)
    remove_stale_temps(ckpt_dir)
    payload = serialization.msgpack_serialize(serialization.to_state_dict(host))
    header = {
        "format": FORMAT, "version": VERSION, "config": config.to_dict(), "update": int(update),
        "num_runs": int(num_runs), "extra": extra or {},
    }
    run_id = run_id_of(run_dir)
    if run_id is not None:  # covered by the checksum: another run's is refused on load
        header["run_id"] = run_id
    header["sha256"] = _digest(header, payload)
    final = os.path.join(ckpt_dir, FILENAME)
    write_atomic(final, msgpack.packb({"header": header, "payload": payload}, use_bin_type=True))
    return final


def saved_update(run_dir: str | None) -> int | None:
    """The update of `run_dir`'s checkpoint if one is there and reads back whole (checksum
    included), else None: what a line saying "the checkpoint is kept" must be checked against."""
    if run_dir is None or not os.path.isfile(os.path.join(run_dir, names.CHECKPOINT_DIR, FILENAME)):
        return None
    try:
        return int(read_checkpoint(run_dir)[0]["update"])
    except (CheckpointError, OSError):
        return None


def _check_header(header) -> None:
    """The header's structure; anything else is the one 'corrupt' line, not a KeyError."""
    ok = (isinstance(header, dict) and header.get("format") == FORMAT
          and isinstance(header.get("config"), dict) and isinstance(header.get("sha256"), str)
          and isinstance(header.get("extra", {}), dict)
          and all(isinstance(header.get(k), int) and not isinstance(header.get(k), bool)
                  for k in ("version", "update", "num_runs"))
          and header["update"] >= 0 and header["num_runs"] >= 1)
    if not ok:
        raise ValueError("header")


def read_checkpoint(path: str | os.PathLike, decode: bool = True) -> tuple[dict, dict]:
    """Return `(header, state_dict)` after checking format, version and checksum (which
    covers the header too: a flipped bit in `gamma` or an edited `update` is refused).
    `decode` False: the header alone, checked (the state dict empty; a reader of the record)."""
    file = checkpoint_path(path)
    run_dir = os.path.dirname(os.path.dirname(file)) or "."
    if _is_run_dir(run_dir):  # nothing in it is read that could wait for ever (a FIFO)
        check_no_symlinks(run_dir, links=False)
    if not os.path.isfile(file) and _is_run_dir(run_dir):
        raise CheckpointError(f"run '{run_dir}' has no checkpoint: no checkpoint was written "
                              "before the run stopped, so there is nothing to resume or "
                              f"evaluate; start it again (its config: {run_dir}/config.yaml)")
    if not os.path.isfile(file):
        given = os.fspath(path)
        inner = sorted(d for d in os.listdir(given) if _is_run_dir(os.path.join(given, d))) \
            if os.path.isdir(given) else []
        if inner:  # a folder of runs: a static sweep's (its plan gone), or a --logdir
            sweep = (names.PLAN in os.listdir(given) or
                     os.path.isfile(os.path.join(given, names.SWEEP)) or
                     all(d[:3].isdigit() and d[3:4] == "_" for d in inner))
            why = (" (a sweep over static settings whose plan, static_sweep.json, is missing: "
                   "restore it to go on with the whole sweep)" if sweep else "")
            raise CheckpointError(f"'{given}' is no run directory: it holds the run "
                                  f"directories {listed(inner, 4)}{why}; pass one of them, "
                                  f"e.g. '{os.path.join(given, inner[0])}'")
        raise CheckpointError(f"no checkpoint at '{path}' (looked for {file}); pass a run "
                              "directory (what jaxppo train or jaxppo sweep wrote)")
    with open(file, "rb") as f:
        data = f.read()
    if os.path.basename(file) != FILENAME and data[:1] != _MAGIC:
        inside = os.path.dirname(os.path.abspath(file))
        where = next((d for d in (inside, os.path.dirname(inside)) if _is_run_dir(d)), None)
        raise CheckpointError(f"'{file}' is not a checkpoint; pass the run directory"
                              + (f" ('{where}')" if where else " (jaxppo keeps its checkpoint "
                                 f"in RUN_DIR/checkpoint/{FILENAME})"))
    try:
        outer = msgpack.unpackb(data, raw=False)
        header, payload = outer["header"], outer["payload"]
        _check_header(header)
        if not isinstance(payload, bytes):
            raise TypeError("payload")
    except (msgpack.exceptions.ExtraData, msgpack.exceptions.UnpackException, ValueError,
            KeyError, TypeError, RecursionError) as e:
        raise CheckpointError(f"checkpoint '{file}' is corrupt or truncated ({type(e).__name__}); "
                              "restore it from a backup or start a new run") from None
    if header["version"] not in (1, VERSION):
        raise CheckpointError(f"checkpoint '{file}' has format version {header['version']}, "
                              f"this jaxppo reads versions 1 and {VERSION}; use the matching jaxppo")
    # Version 1 (jaxppo 0.1) checksummed the payload alone.
    digest = hashlib.sha256(payload).hexdigest() if header["version"] == 1 else _digest(header,
                                                                                        payload)
    if digest != header["sha256"]:
        raise CheckpointError(f"checkpoint '{file}' fails its checksum (corrupt or edited); "
                              "restore it from a backup or start a new run")
    if not decode:
        _check_run_id(header, file)
        return header, {}
    try:
        state = serialization.msgpack_restore(payload)
    except Exception as e:  # noqa: BLE001 - any decode failure is a corrupt file
        raise CheckpointError(f"checkpoint '{file}' payload does not decode ({type(e).__name__}); "
                              "restore it from a backup or start a new run") from None
    if header["version"] == 1:
        _check_v1(header, state, file)
    _check_run_id(header, file)
    return header, state


def _with_new_empty_fields(template: Any, saved: Any) -> Any:
    """`saved` with the fields that later versions added and that hold nothing in this run
    (a feedforward run's `hidden`, an unmasked env's `mask`: None) filled in, so checkpoints
    written before those fields existed still load."""
    if not isinstance(template, dict) or not isinstance(saved, dict):
        return saved
    out = dict(saved)
    for k, t in template.items():
        if k in out:
            out[k] = _with_new_empty_fields(t, out[k])
        elif t is None or t == {}:
            out[k] = t
    return out


def restore_into(template, state_dict: dict, source: str, env_label: str | None = None):
    """Fill `template` (a runner state, leaves may be ShapeDtypeStructs) from `state_dict`,
    checking that every leaf's shape matches; keys come back as typed PRNG keys. `env_label`
    names the environment instance the template was built on (given as env=): a mismatch is
    then blamed on it, not on the config."""
    what, fix = ((f"the environment passed as env= ({env_label})",
                  "pass the environment instance the run trained on") if env_label else
                 ("its config and environment as built now", "restore the environment as it "
                  "was when the run trained (or start a new run), or undo the config's edit"))
    host_template = jax.tree.map(
        lambda x: jax.eval_shape(jax.random.key_data, x) if is_key(x) else x, template)
    state_dict = _with_new_empty_fields(serialization.to_state_dict(host_template), state_dict)
    try:
        restored = serialization.from_state_dict(host_template, state_dict)
    except (ValueError, KeyError, TypeError) as e:
        raise CheckpointError(f"checkpoint '{source}' does not match {what} "
                              f"({str(e).splitlines()[0][:120]}); {fix}") from None
    problems = []

    def check(t, x):
        if tuple(np.shape(x)) != tuple(t.shape):
            problems.append(f"{tuple(np.shape(x))} vs {tuple(t.shape)}")
        return x

    jax.tree.map(check, host_template, restored)
    if problems:
        cause = "" if env_label else (  # the config is the checkpoint's own: the env moved
            " (the environment's observation or action shape changed since the run was saved, "
            "or the checkpoint's config was edited: other network sizes or num_envs)")
        raise CheckpointError(f"checkpoint '{source}' does not match {what}: array shapes "
                              f"{problems[0]}{cause}; {fix}")
    # Keys are stored as raw data of the default implementation (what the CLI seeds with).
    return jax.tree.map(
        lambda t, x: jax.random.wrap_key_data(jnp.asarray(x, jnp.uint32))
        if is_key(t) else jnp.asarray(x, t.dtype), template, restored)


def _with_pool(runner, pool):
    env = runner.env
    return runner._replace(env=env._replace(env_state=env.env_state._replace(pool=pool)))


@dataclass
class Checkpoint:
    """What `load_checkpoint` returns.

    R = runs (seeds, or settings x seeds of a sweep).

    Attributes:
      config: the `PPOConfig` the run trained with.
      train_state: the learner (`TrainState`); leading axis = run (seed) when
        `num_runs > 1`, none for a single run.
      update: updates done when it was saved.
      num_runs: R.
      runner_state: the whole carry of the update scan (learner, env states, PRNG keys),
        leading axis = run, always: what a resume continues from, bit-exactly.
      extra: the header's record of the run, as saved (read it typed: `record`).
    """

    config: PPOConfig
    train_state: Any
    update: int
    num_runs: int
    runner_state: Any
    extra: dict

    @property
    def record(self) -> RunRecord:
        """What the checkpoint carries beside the learner state, typed: the base seed, the
        running account, a sweep's settings and search, the `env=` instance's description, the
        search controller's state and the log's gaps (`jaxppo.rundir.record.RunRecord`)."""
        return RunRecord.from_extra(self.extra)

    def __repr__(self) -> str:
        c = self.config
        return (f"Checkpoint({c.env_id}, update {self.update}/{c.num_updates}, "
                f"{self.num_runs} run(s), runner state: {tree_text(self.runner_state)})")


def _build_target(config: PPOConfig, num_runs: int, env: Any = None, env_params: Any = None):
    """The `Trainer` a checkpoint of `num_runs` runs of `config` restores into, and the shapes
    of its runner state (`init` traced, nothing run)."""
    train = make_train(config, env=env, env_params=env_params)
    return train, jax.eval_shape(jax.vmap(train.init),
                                 jax.random.split(jax.random.key(0), num_runs))


@functools.lru_cache(maxsize=4)
def _restore_target(config: PPOConfig, num_runs: int):
    """`_build_target` for `config.env_id`'s environment, kept: `jaxppo eval` loads a run's
    checkpoint for its returns, then again for a GIF and an HTML page, and tracing `init`
    costs seconds for a physics env."""
    return _build_target(config, num_runs)


def load_checkpoint(path: str | os.PathLike, *, env: Any = None,
                    env_params: Any = None) -> Checkpoint:
    """Load a checkpoint from a run dir, its `checkpoint/` dir, or the file. A run trained on an
    environment instance (`make_train(config, env=...)`) needs that `env` again here.

    Everything is checked before it is used: the format and version, a SHA-256 over the header
    (config, update, runs) and the payload, and every array's shape against what the config
    builds. Checkpoints of an earlier format version still load.

    Args:
      path: the run directory, its `checkpoint/` directory, or `checkpoint.msgpack` itself.
      env: the environment instance the run trained on, if it trained on one (it is compared
        with the one the checkpoint records).
      env_params: that instance's params (default: its `default_params`).

    Returns:
      The `Checkpoint`: config, learner state, full runner state, update and runs.

    Raises:
      CheckpointError: no checkpoint there (or a run that stopped before its first), a file
        that is not one, a corrupt, truncated or edited one, an unknown format version, an
        invalid config inside, or arrays that do not match the config or `env`.
      UsageError: `path` is not a path (e.g. None: a run with `logdir=None` has no
        checkpoint).
    """
    header, state = read_checkpoint(path)
    try:
        config = config_from_dict(header["config"], source="checkpoint config")
    except ConfigError as e:
        if str(e).startswith(("config key 'env_id'", "config key 'env_imports'")):
            raise CheckpointError(f"checkpoint '{path}': its environment cannot be built in "
                                  f"this process ({e})") from None
        raise CheckpointError(f"checkpoint '{path}' holds an invalid config: {e}") from None
    try:
        record = RunRecord.from_extra(header.get("extra"))
        stats = record.stats or {}
        if any(len(stats.get(k, ())) != header["num_runs"] for k in ("episodes", "final_return")
               if k in stats):
            raise ValueError("stats for another number of runs")
        if header["update"] > config.num_updates:
            raise ValueError(f"update {header['update']} of a run of {config.num_updates}")
    except ValueError as e:
        raise CheckpointError(f"checkpoint '{checkpoint_path(path)}' holds a record of its run "
                              f"that jaxppo did not write ({e}): it was edited, and its checksum "
                              "made again; restore it from a backup or start a new run") from None
    saved_env = header.get("extra", {}).get("env")
    if env is not None and isinstance(saved_env, dict):
        mismatch = env_mismatch(saved_env, env, env_params)
        if mismatch:
            raise CheckpointError(f"checkpoint '{path}' ({config.env_id}): {mismatch}; pass the "
                                  "environment instance the run trained on")
    num_runs = int(header["num_runs"])
    if env is None:
        train, template = _restore_target(config, num_runs)
    else:
        train, template = _build_target(config, num_runs, env, env_params)
    label = None if env is None else f"{config.env_id}, a {class_name(env)}"
    saved_envs = state.get("env", {}).get("env_state") if isinstance(state, dict) else None
    # A pool is saved under `optimistic` only (None or absent otherwise): written before
    # `reset: optimistic` existed, or while `reset: auto` picked another mode for the env (its
    # declaration or XLA's estimate changed since), a run goes on with a fresh pool (below);
    # one saved with a pool where auto now picks another mode drops its unused draws.
    pooled = isinstance(saved_envs, dict) and saved_envs.get("pool") is not None
    no_pool = train.env.reset_mode == "optimistic" and isinstance(saved_envs, dict) and not pooled
    if pooled and train.env.reset_mode != "optimistic":
        state = {**state, "env": {**state["env"], "env_state": {**saved_envs, "pool": None}}}
    if no_pool:  # written before `reset: optimistic` (its costly resets ran under a cond)
        template = _with_pool(template, None)
    runner = restore_into(template, state, checkpoint_path(path), label)
    if no_pool:  # it goes on with a full pool of fresh draws, from a key the run never draws
        # (an update splits its key in 3: the 4th of a split in 4 is none of them)
        runner = _with_pool(runner, jax.vmap(
            lambda k: train.env.reset(jax.random.split(k, 4)[3])[1].pool)(runner.key))
    ts = runner.train_state
    if num_runs == 1:
        ts = jax.tree.map(lambda x: x[0], ts)
    return Checkpoint(config, ts, int(header["update"]), num_runs, runner, header.get("extra", {}))
