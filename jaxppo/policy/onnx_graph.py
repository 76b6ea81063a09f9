"""The policy's forward pass as an ONNX graph, written node by node with the `onnx` package's
helper API from the checkpoint's parameters.

Why by hand and not through a converter (jax2onnx, tf2onnx via jax2tf): the networks jaxppo
trains are a short list of layers (dense, the MinAtar and Nature conv stacks, a GRU or LSTM
cell, the heads), and their ONNX is a few standard operators each, readable in Netron; a
converter would add a heavy dependency that follows JAX's internals release by release, for
programs this small. The graph mirrors `forward.forward_fn`, and the tests hold the two (and
`Policy.act`) equal on recorded observations.

Layout: ONNX's Conv is channel-first, jaxppo's images are channel-last (H, W, C): the graph
transposes to NCHW for the conv stack and back before flattening, so the features come out in
flax's order. Opset 17 (ONNX Runtime 1.13 and later; most runtimes), IR version 8.

Axis legend: B = batch, A = policy-head width, H = rnn_size.
"""

from __future__ import annotations

import math

import numpy as np

from jaxppo.core.distributions import MASKED_LOGIT
from jaxppo.core.torso_specs import CONV_STACKS, PIXEL_TORSOS
from jaxppo.policy.forward import carry_names

OPSET = 17
IR_VERSION = 8


class _Graph:
    """Nodes and constants being collected; each `op` returns its output's name."""

    def __init__(self, onnx):
        self.onnx, self.nodes, self.consts, self.count = onnx, [], [], 0

    def name(self, hint: str) -> str:
        self.count += 1
        return f"{hint}_{self.count}"

    def const(self, value, hint: str = "const") -> str:
        name = self.name(hint)
        self.consts.append(self.onnx.numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(self, op_type: str, *inputs: str, out: str | None = None, **attrs) -> str:
        out = out or self.name(op_type.lower())
        self.nodes.append(self.onnx.helper.make_node(op_type, list(inputs), [out], **attrs))
        return out

    def dense(self, x: str, p: dict) -> str:
        y = self.op("MatMul", x, self.const(np.asarray(p["kernel"], np.float32), "kernel"))
        if "bias" in p:
            y = self.op("Add", y, self.const(np.asarray(p["bias"], np.float32), "bias"))
        return y

    def activation(self, x: str, kind: str) -> str:
        if kind == "tanh":
            return self.op("Tanh", x)
        if kind == "relu":
            return self.op("Relu", x)
        if kind == "elu":
            return self.op("Elu", x, alpha=1.0)
        if kind == "silu":
            return self.op("Mul", x, self.op("Sigmoid", x))
        if kind == "gelu":  # flax's nn.gelu: the tanh approximation, as jax.nn.gelu writes it
            f = lambda v: self.const(np.float32(v))
            cube = self.op("Mul", f(0.044715), self.op("Pow", x, f(3.0)))
            inner = self.op("Mul", f(math.sqrt(2.0 / math.pi)), self.op("Add", x, cube))
            cdf = self.op("Mul", f(0.5), self.op("Add", f(1.0), self.op("Tanh", inner)))
            return self.op("Mul", x, cdf)
        raise ValueError(f"no ONNX form for the activation {kind!r}")


def _layers(p: dict, prefix: str) -> list[dict]:
    """`p`'s `{prefix}_0`, `{prefix}_1`, ... in order."""
    return [p[f"{prefix}_{i}"] for i in range(sum(k.startswith(f"{prefix}_") for k in p))]


def _mlp(g: _Graph, x: str, p: dict, *, activation: str, strides: tuple[int, ...],
         last_activated: bool) -> str:
    """`networks.MLP`: conv layers (ReLU) over [B, H, W, C], the flatten, dense layers with
    `activation` (the last one too where `last_activated`: a shared torso's, the encoder's)."""
    convs = _layers(p, "Conv")
    if convs:
        x = g.op("Transpose", x, perm=[0, 3, 1, 2])  # NHWC -> NCHW
        for layer, s in zip(convs, strides, strict=True):
            kernel = np.asarray(layer["kernel"], np.float32).transpose(3, 2, 0, 1)  # HWIO->OIHW
            x = g.op("Conv", x, g.const(kernel, "conv_kernel"),
                     g.const(np.asarray(layer["bias"], np.float32), "conv_bias"),
                     kernel_shape=list(kernel.shape[2:]), strides=[s, s], pads=[0, 0, 0, 0])
            x = g.op("Relu", x)
        x = g.op("Transpose", x, perm=[0, 2, 3, 1])  # back to NHWC: flax's flatten order
    x = g.op("Reshape", x, g.const(np.array([0, -1], np.int64), "flat"))
    dense = _layers(p, "Dense")
    for i, layer in enumerate(dense):
        x = g.dense(x, layer)
        if i < len(dense) - 1 or last_activated:
            x = g.activation(x, activation)
    return x


def _gru(g: _Graph, x: str, h: str, p: dict) -> str:
    """flax's `GRUCell`: the new hidden state."""
    r = g.op("Sigmoid", g.op("Add", g.dense(x, p["ir"]), g.dense(h, p["hr"])))
    z = g.op("Sigmoid", g.op("Add", g.dense(x, p["iz"]), g.dense(h, p["hz"])))
    n = g.op("Tanh", g.op("Add", g.dense(x, p["in"]), g.op("Mul", r, g.dense(h, p["hn"]))))
    one_minus_z = g.op("Sub", g.const(np.float32(1.0)), z)
    return g.op("Add", g.op("Mul", one_minus_z, n), g.op("Mul", z, h), out="carry_out")


def _lstm(g: _Graph, x: str, c: str, h: str, p: dict) -> tuple[str, str]:
    """flax's `OptimizedLSTMCell` (gates i, f, g, o from one matmul each of h and x): the new
    `(c, h)`."""
    gates = "ifgo"
    hk = np.concatenate([np.asarray(p[f"h{k}"]["kernel"], np.float32) for k in gates], -1)
    hb = np.concatenate([np.asarray(p[f"h{k}"]["bias"], np.float32) for k in gates], -1)
    ik = np.concatenate([np.asarray(p[f"i{k}"]["kernel"], np.float32) for k in gates], -1)
    dh = g.dense(h, {"kernel": hk, "bias": hb})
    di = g.dense(x, {"kernel": ik})
    size = hk.shape[-1] // 4
    split = g.const(np.full(4, size, np.int64), "split")
    hs = [g.name("dh") for _ in gates]
    xs = [g.name("di") for _ in gates]
    g.nodes.append(g.onnx.helper.make_node("Split", [dh, split], hs, axis=-1))
    g.nodes.append(g.onnx.helper.make_node("Split", [di, split], xs, axis=-1))
    i, f, gg, o = (g.op("Add", a, b) for a, b in zip(hs, xs, strict=True))
    i, f, o = (g.op("Sigmoid", v) for v in (i, f, o))
    new_c = g.op("Add", g.op("Mul", f, c), g.op("Mul", i, g.op("Tanh", gg)), out="carry_c_out")
    new_h = g.op("Mul", o, g.op("Tanh", new_c), out="carry_h_out")
    return new_c, new_h


def _head(g: _Graph, env, net, out: str, params: dict, deterministic: bool, masked: bool):
    """The action and the distribution's outputs from the actor head's `out` [B, A]."""
    if not net.discrete:
        log_std = np.asarray(params["log_std"], np.float32)
        shape = g.op("Shape", out)
        g.op("Identity", out, out="mean")
        g.op("Expand", g.const(log_std, "log_std"), shape, out="log_std")
        action = out
        if not deterministic:
            std = np.exp(log_std).astype(np.float32)
            action = g.op("Add", out, g.op("Mul", g.const(std, "std"), "noise"))
        low = np.broadcast_to(np.asarray(env.action_low, np.float32), log_std.shape)
        high = np.broadcast_to(np.asarray(env.action_high, np.float32), log_std.shape)
        action = g.op("Max", action, g.const(np.array(low), "low"))
        g.op("Min", action, g.const(np.array(high), "high"), out="action")
        return
    if masked:
        out = g.op("Where", "mask", out, g.const(np.float32(MASKED_LOGIT), "masked_logit"))
    g.op("Identity", out, out="logits")
    scores = out if deterministic else g.op("Add", out, "noise")
    if net.nvec:
        parts = [g.name("part") for _ in net.nvec]
        g.nodes.append(g.onnx.helper.make_node(
            "Split", [scores, g.const(np.array(net.nvec, np.int64), "nvec")], parts, axis=1))
        picks = [g.op("ArgMax", s, axis=1, keepdims=1) for s in parts]
        index = g.op("Concat", *picks, axis=1)
    else:
        index = g.op("ArgMax", scores, axis=1, keepdims=0)
    g.op("Cast", index, out="action", to=g.onnx.TensorProto.INT32)


def onnx_model_bytes(env, network, train_state, normalize: bool, deterministic: bool, sig,
                     doc: str = "", metadata: dict[str, str] | None = None) -> bytes:
    """The serialized ONNX model of `network`'s policy with `train_state`'s parameters (and
    observation normaliser where `normalize`), with `sig`'s inputs and outputs; `metadata`
    goes into the model's metadata_props (the sidecar travels inside the model too)."""
    import onnx  # the export extra

    g = _Graph(onnx)
    net = network
    params = train_state.params["params"]
    x = "obs"
    raw_pixels = sig.inputs[0].dtype == "uint8"
    if raw_pixels:
        x = g.op("Cast", x, to=onnx.TensorProto.FLOAT)
    if normalize:  # rms_normalize: clip((x - mean) / sqrt(var + 1e-8), -10, 10)
        rms = train_state.normalizer.obs
        mean = np.asarray(rms.mean, np.float32)
        std = np.sqrt(np.asarray(rms.var, np.float32) + np.float32(1e-8))
        x = g.op("Div", g.op("Sub", x, g.const(mean, "obs_mean")), g.const(std, "obs_std"))
        x = g.op("Clip", x, g.const(np.float32(-10.0)), g.const(np.float32(10.0)))
        raw_pixels = False  # normalised values are no longer 0-255 pixels
    if raw_pixels and net.torso in PIXEL_TORSOS:
        x = g.op("Div", x, g.const(np.float32(255.0)))
    strides = tuple(s for _, _, s in CONV_STACKS[net.torso])
    act = net.activation
    if carry_names(net):
        y = _mlp(g, x, params["encoder"], activation=act, strides=strides, last_activated=True)
        if net.cell == "gru":
            y = _gru(g, y, "carry", params["rnn"])
        else:
            _, y = _lstm(g, y, "carry_c", "carry_h", params["rnn"])
        out = _mlp(g, y, params["actor"], activation=act, strides=(), last_activated=False)
    else:
        if getattr(net, "shared_torso", False):
            x = _mlp(g, x, params["body"], activation=act, strides=strides, last_activated=True)
            strides = ()
        out = _mlp(g, x, params["actor"], activation=act, strides=strides, last_activated=False)
    _head(g, env, net, out, params, deterministic, env.masked)
    types = {"float32": onnx.TensorProto.FLOAT, "uint8": onnx.TensorProto.UINT8,
             "bool": onnx.TensorProto.BOOL, "int32": onnx.TensorProto.INT32}
    value = lambda p: onnx.helper.make_tensor_value_info(p.name, types[p.dtype], list(p.shape))
    graph = onnx.helper.make_graph(g.nodes, "policy", [value(p) for p in sig.inputs],
                                   [value(p) for p in sig.outputs], initializer=g.consts)
    model = onnx.helper.make_model(graph, producer_name="jaxppo", doc_string=doc,
                                   opset_imports=[onnx.helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    onnx.helper.set_model_props(model, metadata or {})
    onnx.checker.check_model(model, full_check=True)
    return model.SerializeToString()


__all__ = ["OPSET", "onnx_model_bytes"]
