"""Where a compiled program's kernels go: its optimized HLO (`compiled.as_text()`), loop by
loop.

On XLA:CPU every top-level instruction of a computation (a fusion, a dot, a copy, a sort) is a
kernel the runtime dispatches, ~0.1-2 us each before any arithmetic; on a GPU it is a launch
(a few us each: a small RL update is latency-bound). So a small RL program's speed follows how
many of them run per update. `read_hlo` walks the program from its entry, multiplies each while
loop's body by its trip count (XLA records it as `known_trip_count`), inlines calls, and counts
kernels, copies and the bytes they write, per update and per loop. A `conditional` counts as
one kernel (its branches are not walked: in jaxppo's programs a reset fallback that runs only
when a reset pool runs short). Text in, numbers out: nothing here starts JAX.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field

NOT_KERNELS = {"parameter", "tuple", "get-tuple-element", "constant", "bitcast", "after-all",
               "partition-id", "replica-id"}
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


def read_hlo(text: str) -> Profile:
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


def loop_table(title: str, text: str, top: int = 12) -> tuple[str, dict[str, float]]:
    """A Markdown table of the loops that run the most kernels, and the per-update figures."""
    prof = read_hlo(text)
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


def grouped_convolutions(text: str) -> int:
    """Convolutions XLA grouped (per-seed weights under `vmap` make a conv a grouped one)."""
    return len(re.findall(r"feature_group_count=(?!1\b)\d+|batch_group_count=(?!1\b)\d+", text))


def summary_line(name: str, text: str) -> str:
    """One line for a loop-free program: kernels, copies, bytes written, kernels by kind."""
    prof = read_hlo(text)
    return (f"{name}: {prof.kernels:,} kernels, {prof.by_op['copy']:,} copies, "
            f"{_kb(prof.bytes)} written; grouped convolutions: {grouped_convolutions(text)}; "
            "by kind: " + ", ".join(f"{k} {v:,}" for k, v in prof.by_op.most_common(6)))
