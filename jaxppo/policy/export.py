"""A trained policy out of jaxppo: one agent's forward pass written as an ONNX model or as a
serialized JAX program (`jax.export`, StableHLO, parameters baked in), each with a JSON sidecar
that says what goes in and comes out. Neither needs jaxppo to run: ONNX Runtime (or any ONNX
runtime) runs the one, `jax.export.deserialize` in plain JAX the other, on a CPU or a GPU.

    result = jaxppo.export_policy("runs/cartpole", "onnx")   # runs/cartpole/export/agent0.onnx

The forward pass and its signature are `forward.py`'s; the ONNX graph is `onnx_graph.py`'s.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
from typing import Any, NamedTuple

import jax
import numpy as np
from jax import export as jax_export

from jaxppo.errors import UsageError
from jaxppo.policy.forward import carry_names, forward_fn, input_specs, signature
from jaxppo.policy.onnx_graph import OPSET, onnx_model_bytes
from jaxppo.policy.policy import Policy, _actor, load_policy
from jaxppo.rundir import names
from jaxppo.rundir.files import check_writable, write_atomic, write_failed
from jaxppo.rundir.layout import run_dir_of
from jaxppo.rundir.plan import is_static_sweep

FORMATS = {"onnx": ".onnx", "jax": ".jaxexport"}
"""The formats `export_policy` writes, and their files' default suffixes."""
SIDECAR_VERSION = 1
"""The version of the sidecar's layout (`format_version` in it)."""
FLATTENED = ("each field as gymnasium.spaces.flatten does: a Box reshaped to one row, a "
             "Discrete one-hot of (value - start), a MultiDiscrete one one-hot per entry, a Dict "
             "its keys sorted; the fields' rows joined in from_fields' order")
"""How a host env's non-Box observation becomes the model's input (the sidecar says it)."""
JAX_PLATFORMS = ("cpu", "cuda")
"""The platforms a `jax` export is lowered for: the program runs on either."""


class ExportResult(NamedTuple):
    """What `export_policy` wrote.

    Attributes:
      path: the model file (`.onnx`, or `.jaxexport`: `jax.export`'s serialized bytes).
      sidecar: the JSON file beside it (`path` + `.json`): the env, spaces, inputs and outputs
        and what they mean, the versions, the source run and agent.
      format: `onnx` or `jax`.
      agent: the agent's index in the run's checkpoint.
      notes: what the export changed or could not keep (one line each), for the caller to show.
    """

    path: str
    sidecar: str
    format: str
    agent: int
    notes: tuple[str, ...] = ()


def export_policy(run_dir: str | os.PathLike, format: str = "onnx", *, seed: int = 0,
                  out: str | os.PathLike | None = None, deterministic: bool = True,
                  env: Any = None, env_params: Any = None,
                  include_diverged: bool = False) -> ExportResult:
    """Write agent `seed` of the run in `run_dir` as a file that runs without jaxppo: its
    observation normaliser, network and action head (mode or sample, continuous actions clipped
    to the space), for any batch size, with a JSON sidecar describing it.

    `onnx` is an ONNX model (opset 17, built node by node with the `onnx` package: the
    `export` extra); `jax` is `jax.export`'s serialized StableHLO for CPU and CUDA, loaded with
    `jax.export.deserialize` and called as `exported.call({"obs": obs, ...})`. A stochastic
    export (`deterministic=False`) takes its randomness as an input, `noise`, so the same noise
    gives the same action everywhere.

    Args:
      run_dir: the run directory, its `checkpoint/` directory or the checkpoint file.
      format: `onnx` or `jax`.
      seed: the agent's index in the checkpoint's runs axis (a seed of a multi-seed run, a
        sweep row's `runs` entry, a PBT member); as `load_policy`'s.
      out: the model file to write (default `RUN_DIR/export/agent{seed}.onnx` or
        `.jaxexport`, `-stochastic` before the suffix for a stochastic export); the sidecar
        goes to `out` + `.json`.
      deterministic: act with the distribution's mode (True) or sample with a `noise` input.
      env: the environment instance the run trained on, if it trained on one.
      env_params: that instance's params.
      include_diverged: export an agent whose parameters or logged updates went NaN/Inf anyway.

    Returns:
      An `ExportResult`: the paths written and notes on what the export changed.

    Raises:
      CheckpointError: no checkpoint, or a corrupt or mismatched one.
      UsageError: an unknown format, a missing extra (`pip install 'jaxppo[export]'` for
        ONNX), a diverged agent (`DivergedAgent`), a seed out of range, a sweep over static
        settings, or an unwritable `out`.
    """
    if format not in FORMATS:
        raise UsageError(f"format {format!r}: export writes {' or '.join(FORMATS)} (an ONNX "
                         "model, or a jax.export program)")
    if is_static_sweep(run_dir):
        raise UsageError(f"'{os.fspath(run_dir)}' is a sweep over static settings: each "
                         f"setting is a run directory of its own ({names.SWEEP}: group); export "
                         "from one of them")
    if format == "onnx":
        _require_onnx()
    policy = load_policy(run_dir, seed, env=env, env_params=env_params,
                         include_diverged=include_diverged)
    path = os.fspath(out) if out is not None else default_path(run_dir, policy.seed, format,
                                                               deterministic)
    sidecar = path + ".json"
    if out is None:  # a folder that cannot be made is check_writable's line
        with contextlib.suppress(OSError):
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    for p, what in ((path, f"the {format} export"), (sidecar, "the export's sidecar")):
        check_writable(p, what)
    venv, network, _ = _actor(policy.config, policy.env, policy.env_params)
    sig = signature(venv, network, deterministic)
    notes = []
    meta = sidecar_dict(policy, venv, network, sig, format, deterministic, path, run_dir)
    if format == "onnx":
        if policy.config.compute_dtype != "float32":
            notes.append(f"the run computes in {policy.config.compute_dtype}; the ONNX model "
                         "computes in float32, so its actions may differ where that rounding "
                         "decides")
        data = onnx_model_bytes(venv, network, policy.train_state, policy.config.normalize_obs,
                                deterministic, sig, doc=f"jaxppo policy: {policy.config.env_id}",
                                metadata={"jaxppo": json.dumps(meta)})
    else:
        data = jax_program_bytes(venv, network, policy, deterministic, sig)
    for p, blob, what in ((path, data, f"the {format} export"),
                          (sidecar, json.dumps(meta, indent=2) + "\n", "the export's sidecar")):
        try:
            write_atomic(p, blob)
        except OSError as e:
            raise write_failed(p, what, e) from None
    return ExportResult(path, sidecar, format, policy.seed, tuple(notes))


def default_path(run_dir, seed: int, format: str, deterministic: bool) -> str:
    """`RUN_DIR/export/agent{seed}[-stochastic].{onnx,jaxexport}`."""
    mode = "" if deterministic else "-stochastic"
    return os.path.join(run_dir_of(run_dir), names.EXPORT_DIR, f"agent{seed}{mode}{FORMATS[format]}")


def _require_onnx() -> None:
    try:
        import onnx  # noqa: F401  (the export extra)
    except ImportError:
        raise UsageError("exporting to ONNX (--format onnx) needs the onnx package: pip install "
                         "'jaxppo[export]'; or export with --format jax, which needs nothing "
                         "more") from None


def jax_program_bytes(env, network, policy: Policy, deterministic: bool, sig) -> bytes:
    """`jax.export`'s serialization of the forward pass, for CPU and CUDA, with a symbolic
    batch axis; the parameters are constants of the program."""
    fn = forward_fn(env, network, policy.train_state, policy.config.normalize_obs, deterministic)
    batch, = jax_export.symbolic_shape("batch")
    exported = jax_export.export(jax.jit(fn), platforms=JAX_PLATFORMS)(input_specs(sig, batch))
    return bytes(exported.serialize())


def jaxppo_version() -> str:
    try:
        return importlib.metadata.version("jaxppo")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _bounds(x) -> list:
    """Bounds as JSON: a float per dim, null where unbounded."""
    return [float(v) if np.isfinite(v) else None for v in np.asarray(x, np.float64).ravel()]


def sidecar_dict(policy: Policy, env, network, sig, format: str, deterministic: bool,
                 path: str, run_dir) -> dict[str, Any]:
    """The sidecar's content: enough to feed the model and read its outputs without jaxppo."""
    c = policy.config
    if env.multi_discrete:
        action = {"kind": "multidiscrete", "nvec": [int(n) for n in env.nvec]}
    elif env.discrete:
        action = {"kind": "discrete", "n": int(env.action_dim)}
    else:
        action = {"kind": "continuous", "shape": [int(env.action_dim)],
                  "low": _bounds(env.action_low), "high": _bounds(env.action_high),
                  "clipped": True}
    names = carry_names(network)
    recurrent = None if not names else {
        "cell": c.network, "size": int(c.rnn_size), "carry": list(names),
        "at_episode_start": "zeros; then feed each step's *_out back (per env of the batch)"}
    observation = {"shape": [int(d) for d in env.obs_shape], "dtype": sig.inputs[0].dtype,
                   "normalized_inside": bool(c.normalize_obs)}
    layout = getattr(env, "obs_layout", None)
    if layout is not None:  # a Dict (or Discrete, ...) observation read as one array
        observation["obs_field"] = c.obs_field
        observation["from_fields"] = layout
        observation["flattened"] = FLATTENED
    if format == "onnx":
        how = {"runtime": "onnxruntime", "opset": OPSET,
               "call": "onnxruntime.InferenceSession(path).run(None, {'obs': obs, ...})"}
    else:
        how = {"platforms": list(JAX_PLATFORMS),
               "call": "jax.export.deserialize(bytearray(open(path, 'rb').read()))"
                       ".call({'obs': obs, ...})"}
    return {
        "format": format, "format_version": SIDECAR_VERSION, "jaxppo_version": jaxppo_version(),
        "file": os.path.basename(path), "env_id": c.env_id,
        "observation": observation,
        "action": action, "masked": bool(env.masked), "recurrent": recurrent,
        "deterministic": bool(deterministic),
        "inputs": [p.to_dict() for p in sig.inputs],
        "outputs": [p.to_dict() for p in sig.outputs],
        "batch_axis": "the leading axis of every input and output: any size, one row per env",
        "source": {"run_dir": os.path.abspath(run_dir_of(run_dir)), "agent": policy.seed,
                   "update": int(policy.update), "trained_updates": policy.trained_updates,
                   "network": {"kind": c.network, "torso": c.torso,
                               "hidden_sizes": list(c.hidden_sizes),
                               "activation": c.activation, "shared_torso": c.shared_torso}},
        format: how,
    }
