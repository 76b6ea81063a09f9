"""An exported policy's forward pass: what goes in, what comes out, and the pure JAX function
of named arrays that `jax.export` serializes (the ONNX graph, `onnx_graph.py`, computes the
same from the same parameters).

Both formats share one signature, so a deployment can switch between them: inputs `obs`
(and `mask` for a masked env, the recurrent carry for a GRU/LSTM policy, `noise` for a
stochastic export), outputs `action` and the distribution's parameters (`logits`, or `mean`
and `log_std`), and the next carry. Every array has a leading batch axis of any size.

The pass is `Policy.act`'s: the saved observation normaliser, the network, the mode (or a
sample from the noise given: what `dist.sample(key)` draws from `key`), continuous actions
clipped to the action space. A recurrent policy's carry is never reset inside: pass zeros at
an episode's start, as `Policy.initial_state()` gives.

Axis legend: B = batch, A = policy-head width (discrete actions, sum(nvec) or D), K =
sub-actions of a multi-discrete action, D = continuous action dims, H = rnn_size.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxppo.core.distributions import DiagGaussian
from jaxppo.core.normalize import rms_normalize

BATCH = "batch"
"""The name of every input's and output's leading, dynamic axis."""


class Port(NamedTuple):
    """One named input or output: its shape (`"batch"` for the dynamic axis), dtype, meaning."""

    name: str
    shape: tuple
    dtype: str
    meaning: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype,
                "meaning": self.meaning}


class Signature(NamedTuple):
    """An exported policy's inputs and outputs, in order."""

    inputs: tuple[Port, ...]
    outputs: tuple[Port, ...]


def carry_names(network) -> tuple[str, ...]:
    """The recurrent carry's inputs: `carry` (GRU) or `carry_c`, `carry_h` (LSTM; flax's
    `(c, h)`); none for a feedforward policy."""
    if not getattr(network, "recurrent", False):
        return ()
    return ("carry",) if network.cell == "gru" else ("carry_c", "carry_h")


def obs_dtype(env) -> str:
    """The observation's dtype as `Policy.act` feeds it: uint8 frames stay uint8 (a pixel
    torso scales them), everything else (bool grids too) is float32."""
    return "uint8" if env.obs_dtype == jnp.uint8 else "float32"


def signature(env, network, deterministic: bool) -> Signature:
    """The inputs and outputs of `env`'s policy `network`, exported deterministic or not."""
    b, a = BATCH, network.action_dim
    obs = Port("obs", (b, *env.obs_shape), obs_dtype(env),
               "observations as the env gives them (normalised inside, as in training)")
    inputs, outputs = [obs], []
    if env.masked:
        inputs.append(Port("mask", (b, a), "bool", "legal actions (true = allowed); all true "
                           "where the env masks nothing"))
    h = (b, network.rnn_size) if carry_names(network) else None
    for name in carry_names(network):
        part = {"carry": "the GRU's hidden state", "carry_c": "the LSTM's cell state c",
                "carry_h": "the LSTM's hidden state h"}[name]
        inputs.append(Port(name, h, "float32", f"{part}: zeros at an episode's start, then "
                           f"the {name}_out of the step before"))
    if not deterministic:
        noise = ("standard Gumbel noise, one per logit (-log(-log(u)), u uniform in (0, 1))"
                 if env.discrete else "standard normal noise, one per action dim")
        inputs.append(Port("noise", (b, a), "float32", f"{noise}: the sample's randomness"))
    how = "the mode" if deterministic else "a sample (argmax of logits + noise)"
    if env.multi_discrete:
        outputs.append(Port("action", (b, len(env.nvec)), "int32",
                            f"one action per sub-space (nvec {list(env.nvec)}): {how}"))
    elif env.discrete:
        outputs.append(Port("action", (b,), "int32", f"the action index: {how}"))
    else:
        how = "the mean" if deterministic else "a sample, mean + exp(log_std) * noise"
        outputs.append(Port("action", (b, a), "float32",
                            f"{how}, clipped to the action space's bounds"))
    if env.discrete:
        split = " (the sub-spaces' logits side by side)" if env.multi_discrete else ""
        outputs.append(Port("logits", (b, a), "float32",
                            f"unnormalised log-probabilities{split}; a masked action's are -1e9"))
    else:
        outputs.append(Port("mean", (b, a), "float32", "the Gaussian's mean (before clipping)"))
        outputs.append(Port("log_std", (b, a), "float32",
                            "the Gaussian's log standard deviation (state-independent)"))
    for name in carry_names(network):
        outputs.append(Port(f"{name}_out", h, "float32", f"the next step's {name}"))
    return Signature(tuple(inputs), tuple(outputs))


def forward_fn(env, network, train_state, normalize: bool, deterministic: bool):
    """The policy's forward pass as a pure function `{input name: [B, ...]} -> {output name:
    [B, ...]}`, its parameters and normaliser closed over (constants of the exported program).
    """
    params = train_state.params
    rms = train_state.normalizer.obs
    names = carry_names(network)

    def forward(inputs: dict[str, jax.Array]) -> dict[str, jax.Array]:
        obs = inputs["obs"]
        x = rms_normalize(rms, obs) if normalize else obs
        mask = inputs.get("mask")
        out = {}
        if names:
            carry = tuple(inputs[n] for n in names)
            carry = carry[0] if len(carry) == 1 else carry
            start = jnp.zeros((obs.shape[0],), bool)  # as Policy.act: the caller resets it
            dist, _, carry = network.apply(params, x, carry, start, mask)
            carry = (carry,) if len(names) == 1 else carry
            out.update({f"{n}_out": c for n, c in zip(names, carry, strict=True)})
        else:
            dist = network.apply(params, x, mask, method="policy")
        action = dist.mode() if deterministic else dist.sample_from_noise(inputs["noise"])
        out["action"] = env.clip_action(action)
        if isinstance(dist, DiagGaussian):
            out["mean"] = dist.mean
            out["log_std"] = jnp.broadcast_to(dist.log_std, dist.mean.shape)
        else:
            out["logits"] = dist.logits
        return out

    return forward


def input_specs(sig: Signature, batch) -> dict[str, jax.ShapeDtypeStruct]:
    """The abstract inputs of `sig`, with `batch` (a symbolic dimension) as the batch axis."""
    return {p.name: jax.ShapeDtypeStruct(tuple(batch if d == BATCH else d for d in p.shape),
                                         np.dtype(p.dtype)) for p in sig.inputs}


__all__ = ["BATCH", "Port", "Signature", "carry_names", "forward_fn", "input_specs", "signature"]
