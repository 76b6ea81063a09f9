"""Where a compiled program's kernels go: its optimized HLO, loop by loop, on this CPU or on a
GPU this machine does not have.

On XLA:CPU every top-level instruction of a computation (a fusion, a dot, a copy, a sort) is a
kernel the runtime dispatches, ~0.1-2 µs each before any arithmetic; on a GPU it is a launch
(a few µs each: a small RL update is latency-bound). So a small RL program's speed follows how
many of them run per update. This walks the program from its entry, multiplies each while
loop's body by its trip count (XLA records it as `known_trip_count`), inlines calls, and counts
kernels, copies and the bytes they write, per update and per loop. A `conditional` counts as
one kernel (its branches are not walked: in jaxppo's programs a reset fallback that
runs only when a reset pool runs short).

    python scripts/hlo_profile.py --config configs/cartpole.yaml
    python scripts/hlo_profile.py --config configs/cartpole.yaml --target h100 --purejaxrl PATH
    python scripts/hlo_profile.py --config configs/minatar_breakout.yaml --target h100 --seeds 16

`--target h100` (or `a100`, `h200`) compiles for that GPU on a machine with none: XLA's GPU
compiler runs here from the `gpu-profile` extra (`pip install -e '.[gpu-profile]'`, JAX's CUDA
PJRT plugin, no CUDA libraries) on a written-down description of the device. The program is
the one a real H100 would run but for autotuning (which needs the device: XLA keeps its
default kernels) and the init's QR (below). docs/how-to/gpu.md shows the output.

`scripts/benchmark.py --only hlo` prints the same tables for the CPU.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import logging
import os
import re
import sys
from collections import Counter
from dataclasses import dataclass, field


def _wants_gpu(argv: list[str]) -> bool:
    for i, a in enumerate(argv):
        value = a.split("=", 1)[1] if a.startswith("--target=") else (
            argv[i + 1] if a == "--target" and i + 1 < len(argv) else None)
        if value is not None and value != "cpu":
            return True
    return False


if __name__ == "__main__" and _wants_gpu(sys.argv[1:]):
    # Before JAX initializes its plugins (jaxppo's env suites may start it at import): the CUDA
    # plugin is wanted without a CUDA runtime (jax_plugins/jaxppo_xla_flags.py lets it run).
    os.environ.setdefault("JAX_SKIP_CUDA_CONSTRAINTS_CHECK", "1")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax._src import xla_bridge  # noqa: E402  (private: which plugins registered)
from jax._src.interpreters import mlir  # noqa: E402  (private: the QR's lowering, below)
from jax._src.lax import linalg  # noqa: E402
from jax.experimental import topologies  # noqa: E402  (compile-only devices)

from jaxppo import Hparams, load_config, make_train  # noqa: E402
from jaxppo.compat import cuda_pjrt_mismatch  # noqa: E402
from jaxppo.config.load import parse_overrides  # noqa: E402
from jaxppo.core.loss import Minibatch, ppo_loss  # noqa: E402
from jaxppo.core.networks import init_params  # noqa: E402

NOT_KERNELS = {"parameter", "tuple", "get-tuple-element", "constant", "bitcast", "after-all",
               "partition-id", "replica-id"}
INSTALL_HINT = ("needs the CUDA compiler plugin: pip install -e '.[gpu-profile]' "
                "(JAX's CUDA PJRT plugin; no GPU or CUDA libraries needed)")

# --- the GPUs, as XLA's GPU compiler reads them (stream_executor.GpuTargetConfigProto) ------
# Datasheet figures: SMs ("cores"), HBM bandwidth and size, L2, boost clock, and the per-SM
# limits of the architecture. XLA's fusion and tiling choices read these; nothing else does.
_SM90 = dict(cc=(9, 0), fpus=128, smem_core=233472, smem_optin=232448)  # Hopper
_SM80 = dict(cc=(8, 0), fpus=64, smem_core=167936, smem_optin=166912)  # Ampere A100
GPUS = {
    "h100": dict(_SM90, name="NVIDIA H100 80GB HBM3", cores=132, bandwidth=3.35e12,
                 memory=80 * 2**30, l2=50 * 2**20, ghz=1.98),
    "h200": dict(_SM90, name="NVIDIA H200", cores=132, bandwidth=4.8e12, memory=141 * 10**9,
                 l2=50 * 2**20, ghz=1.98),
    "a100": dict(_SM80, name="NVIDIA A100-SXM4-80GB", cores=108, bandwidth=2.039e12,
                 memory=80 * 2**30, l2=40 * 2**20, ghz=1.41),
}


def target_config(target: str) -> str:
    """The GPU's description in the text format XLA reads (`--target`'s device)."""
    g = GPUS[target]
    return f"""gpu_device_info {{
  threads_per_block_limit: 1024
  threads_per_warp: 32
  shared_memory_per_block: 49152
  shared_memory_per_core: {g['smem_core']}
  shared_memory_per_block_optin: {g['smem_optin']}
  threads_per_core_limit: 2048
  core_count: {g['cores']}
  fpus_per_core: {g['fpus']}
  block_dim_limit_x: 2147483647
  block_dim_limit_y: 65535
  block_dim_limit_z: 65535
  memory_bandwidth: {int(g['bandwidth'])}
  l2_cache_size: {g['l2']}
  clock_rate_ghz: {g['ghz']}
  device_memory_size: {g['memory']}
  registers_per_core_limit: 65536
  registers_per_block_limit: 65536
  cuda_compute_capability {{ major: {g['cc'][0]} minor: {g['cc'][1]} }}
}}
platform_name: "CUDA"
dnn_version_info {{ major: 9 minor: 8 }}
device_description_str: "{g['name']}"
"""


@contextlib.contextmanager
def _stderr_silenced():
    """The CUDA plugin's C++ side logs "no CUDA driver" to fd 2 as it loads: expected here."""
    fd = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(fd, 2)
        os.close(fd)


def gpu_device(target: str):
    """A compile-only device of `target` (no GPU needed), or SystemExit naming the extra."""
    if importlib.util.find_spec("jax_plugins.xla_cuda12") is None:
        raise SystemExit(f"hlo_profile: --target {target} {INSTALL_HINT}")
    if (mismatch := cuda_pjrt_mismatch()) is not None:
        raise SystemExit(f"hlo_profile: --target {target}: {mismatch}")
    logging.getLogger("jax_plugins.xla_cuda12").setLevel(logging.ERROR)
    with _stderr_silenced():
        jax.devices()  # JAX initializes its plugins (the CUDA one loads here)
    if "cuda" not in xla_bridge._backend_factories:
        raise SystemExit(f"hlo_profile: --target {target}: the CUDA plugin did not register "
                         "(JAX was started before JAX_SKIP_CUDA_CONSTRAINTS_CHECK was set?)")
    _lower_qr_without_cusolver()
    topo = topologies.get_topology_desc(target, "cuda", target_config=target_config(target),
                                        topology="1x1x1")
    return topo.devices[0]


def _lower_qr_without_cusolver() -> None:
    """Orthogonal init's QR lowers to cuSOLVER, whose handlers come with `jax-cuda12-plugin`
    (not installed: its extension modules log at every `import jax` on a machine without a CUDA
    driver). Without them it lowers to XLA's own expansion (as on a TPU). The QR runs once, in
    the init before the update loop: no per-update figure changes."""
    if importlib.util.find_spec("jax_cuda12_plugin") is not None:
        return
    mlir.register_lowering(linalg.geqrf_p, linalg._geqrf_lowering_rule, platform="cuda")
    mlir.register_lowering(linalg.householder_product_p,
                           linalg._householder_product_lowering, platform="cuda")


# --- reading the optimized HLO ---------------------------------------------------------------
BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4,
         "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16}


def shape_bytes(shape: str) -> int:
    """Bytes of an HLO shape (`f32[128,4]{1,0}`, or a tuple of them)."""
    total = 0
    for dtype, dims in re.findall(r"\b([a-z]+\d*)\[([\d,]*)\]", shape):
        n = 1
        for d in filter(None, dims.split(",")):
            n *= int(d)
        total += BYTES.get(dtype, 0) * n
    return total


def _split(line: str) -> tuple[str, str, str]:
    """`name`, result shape and the rest (opcode onwards) of `%name = SHAPE opcode(...)`."""
    name, rhs = line.split(" = ", 1)
    if rhs.startswith("("):  # a tuple-shaped result
        depth, end = 0, 0
        while end == 0 or depth:
            depth += (rhs[end] == "(") - (rhs[end] == ")")
            end += 1
        return name.removeprefix("ROOT ").strip("% "), rhs[:end], rhs[end:].strip()
    shape, _, rest = rhs.partition(" ")
    return name.removeprefix("ROOT ").strip("% "), shape, rest


def _opcode(line: str) -> str:
    m = re.match(r"([\w\-]+)\(", _split(line)[2])
    return m.group(1) if m else "?"


def _computations(text: str) -> tuple[dict[str, list[str]], str]:
    comps: dict[str, list[str]] = {}
    cur, entry = None, ""
    for line in text.splitlines():
        if not line.startswith(" ") and line.rstrip().endswith("{") and "(" in line:
            name = re.match(r"^(?:ENTRY )?%?([\w.\-]+) ", line).group(1)
            comps[name], cur = [], name
            entry = name if line.startswith("ENTRY") else entry
        elif line.startswith("}"):
            cur = None
        elif cur and " = " in line:
            comps[cur].append(line.strip())
    return comps, entry


def _source_lines(text: str) -> dict[int, str]:
    """stack_frame_id -> `file.py:line function` of the frame (the tables atop the module)."""
    tables: dict[str, dict[int, str]] = {}
    section = None
    for line in text.splitlines()[:20000]:
        if line in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            section, tables[line] = line, {}
        elif section and re.match(r"^\d+ ", line):
            key, value = line.split(" ", 1)
            tables[section][int(key)] = value
        elif section and not line.strip():
            section = None
    files, funcs = tables.get("FileNames", {}), tables.get("FunctionNames", {})
    out = {}
    for frame, value in tables.get("StackFrames", {}).items():
        loc = tables.get("FileLocations", {}).get(
            int(re.search(r"file_location_id=(\d+)", value).group(1)), "")
        m = re.search(r"file_name_id=(\d+) function_name_id=(\d+) line=(\d+)", loc)
        if m:
            f, fn, ln = int(m.group(1)), int(m.group(2)), m.group(3)
            out[frame] = (f"{os.path.basename(files.get(f, '?').strip(chr(34)))}:{ln} "
                          f"{funcs.get(fn, '?').strip(chr(34))}")
    return out


@dataclass
class Loop:
    """A while loop (`lax.scan`, `fori_loop`, or XLA's own: threefry's rounds are one)."""

    depth: int
    trips: int  # iterations per execution of the loop
    kernels: int  # the body's own kernels per iteration (nested loops apart)
    executions: int  # kernels run by this loop and the loops inside it, per program run
    where: str = ""  # the source line of the loop (`rollout.py:196 rollout`)
    copies: int = 0  # like `executions`, copies only
    bytes: int = 0  # bytes written by those kernels, per program run
    parent: int | None = None  # index in `Profile.loops` of the loop this one runs in


@dataclass
class Profile:
    loops: list[Loop]  # outermost first, in program order
    by_op: Counter  # kernels per program run by opcode
    bytes: int = 0  # bytes the kernels write per program run
    by_op_bytes: Counter = field(default_factory=Counter)

    @property
    def kernels(self) -> int:
        return sum(self.by_op.values())

    @property
    def update_loop(self) -> Loop | None:
        """The outermost loop that runs the most kernels: the scan over updates."""
        top = [lp for lp in self.loops if lp.depth == 0]
        return max(top, key=lambda lp: lp.executions) if top else None

    def inside(self, outer: Loop) -> list[Loop]:
        """`outer` and the loops nested in it."""
        index = {id(lp): i for i, lp in enumerate(self.loops)}
        found = {index[id(outer)]}
        for i, lp in enumerate(self.loops):
            if lp.parent in found:
                found.add(i)
        return [self.loops[i] for i in sorted(found)]


def profile(text: str) -> Profile:
    """The loops of an optimized HLO module (`compiled.as_text()`), and the kernels, copies
    and bytes written per program run. A kernel's bytes are its result's, except an in-place
    update (a fusion whose root is a dynamic-update-slice), which writes only its update."""
    comps, entry = _computations(text)
    frames = _source_lines(text)
    shapes = {c: {_split(x)[0]: _split(x)[1] for x in lines} for c, lines in comps.items()}
    loops: list[Loop] = []
    by_op: Counter = Counter()
    by_op_bytes: Counter = Counter()

    def written(comp: str, line: str) -> int:
        _, shape, rest = _split(line)
        called = re.search(r"calls=%?([\w.\-]+)", rest)
        if called and called.group(1) in comps:
            fused = comps[called.group(1)]
            root = next((x for x in fused if x.startswith("ROOT ")), "")
            if root and _opcode(root) == "dynamic-update-slice":
                operand = re.findall(r"%([\w.\-]+)", _split(root)[2])[1]
                return shape_bytes(shapes[called.group(1)].get(operand, ""))
        return shape_bytes(shape)

    def walk(name: str, mult: int, depth: int, parent: int | None = None
             ) -> tuple[int, int, int]:
        kernels = copies = nbytes = 0
        for line in comps.get(name, []):
            op = _opcode(line)
            if op in NOT_KERNELS:
                continue
            if op == "while":
                body = re.search(r"body=%?([\w.\-]+)", line).group(1)
                cond = re.search(r"condition=%?([\w.\-]+)", line).group(1)
                trips = re.search(r'"known_trip_count":\{"n":"(\d+)"', line)
                trips = int(trips.group(1)) if trips else 1
                frame = re.search(r"stack_frame_id=(\d+)", line)
                index = len(loops)
                loops.append(Loop(depth, trips, 0, 0))
                inner = [a + b for a, b in zip(walk(body, mult * trips, depth + 1, index),
                                               walk(cond, mult * (trips + 1), depth + 1, index),
                                               strict=True)]
                own = sum(1 for x in comps.get(body, [])
                          if _opcode(x) not in NOT_KERNELS | {"while", "call"})
                loops[index] = Loop(depth, trips, own, inner[0],
                                    frames.get(int(frame.group(1)), "") if frame else "",
                                    inner[1], inner[2], parent)
                kernels, copies, nbytes = kernels + inner[0], copies + inner[1], nbytes + inner[2]
            elif op == "call":
                sub = walk(re.search(r"to_apply=%?([\w.\-]+)", line).group(1), mult, depth,
                           parent)
                kernels, copies, nbytes = kernels + sub[0], copies + sub[1], nbytes + sub[2]
            else:
                b = written(name, line) * mult
                by_op[op] += mult
                by_op_bytes[op] += b
                kernels, copies, nbytes = kernels + mult, copies + mult * (op == "copy"), nbytes + b
        return kernels, copies, nbytes

    walk(entry, 1, 0)
    return Profile(loops, by_op, sum(by_op_bytes.values()), by_op_bytes)


def _kb(n: float) -> str:
    return f"{n / 1e3:,.1f} kB" if n < 1e6 else f"{n / 1e6:,.2f} MB"


def per_update(prof: Profile) -> dict[str, float]:
    """Kernels, copies and bytes written per update (the update loop's, cond included)."""
    lp = prof.update_loop
    if lp is None:
        return {"kernels": prof.kernels, "copies": prof.by_op["copy"], "bytes": prof.bytes,
                "updates": 1}
    return {"kernels": lp.executions / lp.trips, "copies": lp.copies / lp.trips,
            "bytes": lp.bytes / lp.trips, "updates": lp.trips}


def report(title: str, text: str, top: int = 12) -> tuple[str, dict[str, float]]:
    """A Markdown table of the loops that run the most kernels, and the per-update figures."""
    prof = profile(text)
    pu = per_update(prof)
    outer = prof.update_loop
    u = pu["updates"]
    outside = prof.kernels - (outer.executions if outer else 0)
    lines = [f"#### {title}", "",
             f"per update: **{pu['kernels']:,.0f} kernels**, {pu['copies']:,.0f} copies, "
             f"{_kb(pu['bytes'])} written; {u:,} updates; {prof.kernels:,} kernels in all "
             f"({outside:,} outside the update loop)", "",
             "| loop (its scan) | depth | trips | kernels per iteration "
             "| kernels per update | copies per update | bytes per update |",
             "|---|---|---|---|---|---|---|"]
    rows = sorted(prof.inside(outer) if outer else prof.loops, key=lambda lp: -lp.executions)[:top]
    lines += [f"| {lp.where or '?'} | {lp.depth} | {lp.trips} | {lp.kernels} "
              f"| {lp.executions / u:,.0f} | {lp.copies / u:,.0f} | {_kb(lp.bytes / u)} |"
              for lp in rows]
    kinds = ", ".join(f"{k} {v / u:,.0f}" for k, v in prof.by_op.most_common(8))
    lines += ["", f"per update by kind: {kinds}", ""]
    return "\n".join(lines), pu


def compiled_texts(config_path: str, purejaxrl: str | None, seeds: int = 1,
                   target: str = "cpu", overrides: dict | None = None) -> dict[str, str]:
    """The optimized HLO of jaxppo's `make_train` (and PureJaxRL's `ppo.py`) on a config, each
    vmapped over `seeds` as the benchmarks run them, compiled for `target` (`cpu`: this
    machine; a key of `GPUS`: that GPU, deviceless)."""
    device = None if target == "cpu" else gpu_device(target)  # before anything starts JAX
    cfg = load_config(config_path, overrides)
    keys = jax.random.split(jax.random.key(0), seeds)
    fns = {"jaxppo make_train": make_train(cfg)}
    if purejaxrl:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from gpu_suite import load_purejaxrl, purejaxrl_config

        fns["PureJaxRL ppo.py"] = load_purejaxrl(purejaxrl)(purejaxrl_config(cfg))
    out = {}
    for name, fn in fns.items():
        if device is None:
            out[name] = jax.jit(jax.vmap(fn)).lower(keys).compile().as_text()
        else:
            sharding = jax.sharding.SingleDeviceSharding(device)
            spec = jax.ShapeDtypeStruct(keys.shape, keys.dtype, sharding=sharding)
            out[name] = jax.jit(jax.vmap(fn), in_shardings=sharding).lower(spec).compile() \
                .as_text()
    return out


def minibatch_texts(config_path: str, seeds: int, target: str = "cpu",
                    overrides: dict | None = None) -> dict[str, str]:
    """The optimized HLO of one minibatch's loss gradient (the update's inner step, without
    the rollout: a program whose env steps through a host callback cannot be compiled for a
    GPU without one), for `seeds` agents two ways: `vmap` (what `--seeds` compiles: XLA sees
    one batched network, per-seed weights make a conv a grouped convolution) and `lax.map`
    (the seeds one after another)."""
    device = None if target == "cpu" else gpu_device(target)
    cfg = load_config(config_path, overrides)
    trainer = make_train(cfg)
    net, env, hp = trainer.network, trainer.env, Hparams.from_config(cfg)
    b = cfg.batch_size // cfg.num_minibatches
    params = jax.eval_shape(lambda k: init_params(net, k, env.obs_shape), jax.random.key(0))
    action = (jax.ShapeDtypeStruct((b,), jnp.int32) if env.discrete
              else jax.ShapeDtypeStruct((b, env.action_dim), jnp.float32))
    f32 = jax.ShapeDtypeStruct((b,), jnp.float32)
    batch = Minibatch(jax.ShapeDtypeStruct((b, *env.obs_shape), env.obs_dtype), action, f32,
                      f32, f32, f32)

    def grad(p, mb):
        return jax.grad(lambda p: ppo_loss(p, net, mb, hp, clip_vloss=cfg.clip_vloss,
                                           norm_adv=cfg.norm_adv)[0])(p)

    forms = {"vmap": jax.vmap(grad), "lax.map": lambda p, mb: jax.lax.map(lambda a: grad(*a),
                                                                           (p, mb))}
    sharding = None if device is None else jax.sharding.SingleDeviceSharding(device)
    stack = lambda x: jax.ShapeDtypeStruct((seeds, *x.shape), x.dtype,  # noqa: E731
                                           sharding=sharding)
    args = jax.tree.map(stack, (params, batch))
    out = {}
    for name, fn in forms.items():
        jitted = jax.jit(fn) if device is None else jax.jit(fn, in_shardings=sharding)
        out[f"one minibatch's gradient, {seeds} seeds by {name}"] = \
            jitted.lower(*args).compile().as_text()
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--config", default="configs/cartpole.yaml")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key (as in jaxppo train)")
    p.add_argument("--target", default="cpu", choices=["cpu", *GPUS],
                   help="cpu: this machine; a GPU: compiled for it here, without one")
    p.add_argument("--purejaxrl", default=None, metavar="PATH", help="a PureJaxRL checkout")
    p.add_argument("--seeds", type=int, default=1, help="vmapped agents")
    p.add_argument("--top", type=int, default=12, help="loops listed")
    p.add_argument("--part", default="train", choices=["train", "minibatch"],
                   help="train: the whole program; minibatch: one minibatch's loss gradient, "
                        "seeds by vmap and by lax.map (host-env configs too)")
    args = p.parse_args(argv)
    if args.part == "minibatch":
        for name, text in minibatch_texts(args.config, args.seeds, args.target,
                                          parse_overrides(args.set)).items():
            prof = profile(text)
            grouped = len(re.findall(r"feature_group_count=(?!1\b)\d+|batch_group_count="
                                     r"(?!1\b)\d+", text))
            print(f"{name}: {prof.kernels:,} kernels, {prof.by_op['copy']:,} copies, "
                  f"{_kb(prof.bytes)} written; grouped convolutions: {grouped}; by kind: "
                  + ", ".join(f"{k} {v:,}" for k, v in prof.by_op.most_common(6)))
        return
    where = "this CPU" if args.target == "cpu" else f"{GPUS[args.target]['name']}, deviceless"
    figures = {}
    for name, text in compiled_texts(args.config, args.purejaxrl, args.seeds, args.target,
                                     parse_overrides(args.set)).items():
        table, figures[name] = report(f"{name} on {where}, {args.seeds} agent(s): {args.config}"
                                      + "".join(f" --set {s}" for s in args.set), text, args.top)
        print(table)
    if len(figures) == 2:
        (a, fa), (b, fb) = figures.items()
        print(f"{a} / {b} per update: kernels {fa['kernels'] / fb['kernels']:.2f}x, copies "
              f"{fa['copies'] / max(fb['copies'], 1):.2f}x, bytes written "
              f"{fa['bytes'] / max(fb['bytes'], 1):.2f}x")


if __name__ == "__main__":
    main()
