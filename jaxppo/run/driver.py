"""The pipelined chunk loop: the compiled update scan run a chunk at a time, so the host can
log, checkpoint and honour signals between chunks while the device keeps computing.

Each chunk is one compiled program (a `lax.scan` over `chunk_updates` updates, vmapped over
runs; a lone run on one device is not vmapped, its program keeps the runs axis of 1). Any
`num_updates` works: the chunks that fit take one program and a shorter remainder takes a
second (one extra compile at most). Chunked runs are bit-identical to one unbroken scan
(tested). Where the placement allows it, chunk k+1 is dispatched before the host handles chunk
k (JAX dispatch is asynchronous), so logging and checkpoints overlap with compute.

A "run" is one agent: a seed, or a (setting, seed) pair of a sweep. Axis legend: R = runs.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import NamedTuple

import jax
import numpy as np

from jaxppo._xla import compiler_options
from jaxppo.config import divisors
from jaxppo.core.train import RunnerState
from jaxppo.keys import keys_as_data
from jaxppo.process import StopNow as StopNow  # re-exported: a run's stop at once
from jaxppo.process import native_work
from jaxppo.run.controller import Controller
from jaxppo.run.distributed import gather
from jaxppo.run.placement import RunInputs

TARGET_CHUNKS = 25
MIN_CHUNKS = 12  # progress, a checkpoint and a clean stop at least this often
MAX_CHUNKS = 100  # a divisor giving more chunks than this costs more in host work than it saves


def pick_chunk(num_updates: int, target_chunks: int = TARGET_CHUNKS) -> int:
    """About `num_updates / target_chunks` updates per chunk. A divisor of `num_updates` where
    one gives between `MIN_CHUNKS` and `MAX_CHUNKS` chunks, the nearest: one program; else that
    length plus a remainder, whose program is a second compile (for a Brax env, ~15 s)."""
    want = max(1.0, num_updates / target_chunks)
    fits = [d for d in divisors(num_updates)
            if min(num_updates, MIN_CHUNKS) <= num_updates // d <= MAX_CHUNKS]
    if fits:
        return min(fits, key=lambda d: (abs(math.log(d / want)), d))
    return max(1, round(want))


def chunk_for_checkpoints(num_updates: int, every: int | None,
                          chunk_updates: int | None) -> int:
    """The chunk length: `chunk_updates` if asked for, else `pick_chunk`'s, at most `every`
    when checkpoints are due every that many updates (a chunk is indivisible, so a longer one
    would save less often than asked), preferring a divisor of `num_updates` not under half
    of that (one program)."""
    if chunk_updates is not None or not every:
        return chunk_updates or pick_chunk(num_updates)
    cap = min(pick_chunk(num_updates), every)
    best = max(d for d in divisors(num_updates) if d <= cap)
    return best if 2 * best >= cap else cap


def chunk_lengths(num_updates: int, chunk_updates: int, start_update: int = 0) -> list[int]:
    """The chunks from `start_update` to the end: full ones, then a shorter remainder."""
    rest = num_updates - start_update
    return [chunk_updates] * (rest // chunk_updates) + (
        [rest % chunk_updates] if rest % chunk_updates else [])


class ChunkResult(NamedTuple):
    first_update: int  # updates done before this chunk
    update: int  # updates done after it
    metrics: dict[str, np.ndarray]  # each [R, chunk]
    wall_s: float  # seconds since the run started (compile included)
    chunk_s: float  # seconds this chunk took


class _InFlight(NamedTuple):
    """A dispatched chunk whose results the host has not looked at yet."""

    runner: RunnerState
    metrics: dict
    first_update: int
    update: int


class Driver:
    """Compiles `init` and the chunk program(s) of one placement and steps through a run."""

    def __init__(self, placement, num_runs: int, num_updates: int, *,
                 chunk_updates: int | None = None, donate: bool = False):
        self.placement = placement
        # Donating the runner state a chunk consumes keeps one copy of params, optimizer and
        # env states on the device instead of two; chunk k's state then goes to the host before
        # chunk k+1 consumes it (callbacks and checkpoints see that host copy).
        self.donate = donate and placement.can_donate
        self.num_runs = num_runs
        self.num_updates = num_updates
        self.chunk_updates = chunk_updates or pick_chunk(num_updates)
        # All runs at once, one chunk of metrics: refused here, before any compile.
        placement.check(num_runs, metrics_updates=self.chunk_updates)
        self.compile_s = 0.0
        self._programs: dict[int, object] = {}

    def compile(self, inputs: RunInputs, start_update: int = 0, init: bool = True) -> None:
        """Compile (or fetch from the persistent cache) the init program (unless `init` is
        False: a state is given) and each chunk length the run still needs; time it."""
        t0 = time.perf_counter()
        opts = compiler_options(jax.default_backend())
        with native_work(acknowledge=True):  # a second signal: XLA compiles on, in its thread
            if init:
                lowered = self.placement.init_program(inputs).lower(*inputs)
                self._init = lowered.compile(compiler_options=opts)
                template = lowered.out_info  # what `template` traces for: init's shapes
            else:
                template = self.template(inputs)
            for n in sorted(set(chunk_lengths(self.num_updates, self.chunk_updates,
                                              start_update))):
                program = self.placement.run_program(inputs, n, donate=self.donate)
                self._programs[n] = program.lower(template, inputs.hparams).compile(
                    compiler_options=opts)
        self.compile_s = time.perf_counter() - t0

    @property
    def num_programs(self) -> int:
        """Chunk programs compiled (one per chunk length)."""
        return len(self._programs)

    def template(self, inputs: RunInputs):
        """Shapes and dtypes of the runner state (what a checkpoint must match)."""
        return jax.eval_shape(self.placement.init_program(inputs), *inputs)

    def place(self, runner: RunnerState) -> RunnerState:
        """Put a restored (host) runner state where the compiled chunks expect it."""
        first = next(iter(self._programs.values()))
        return self.placement.place_state(runner, first.input_shardings[0][0])

    def init(self, inputs: RunInputs) -> RunnerState:
        runner = self._init(*inputs)
        return runner if self.placement.pipelined else jax.block_until_ready(runner)

    def run(self, runner: RunnerState, hparams, start_update: int,
            on_chunk: Callable[[RunnerState, ChunkResult], bool], t_start: float,
            controller: Controller | None = None,
            stop: Callable[[], bool] | None = None) -> RunnerState:
        """Step chunk by chunk from `start_update` to the end; `on_chunk` returns False to stop.
        A stop after chunk k returns chunk k's state; a chunk already in flight is dropped.
        With donation, chunk k's state reaches `on_chunk` as a host copy (keys as raw data).
        A `controller` sees every chunk, and at its `due` updates the pipeline drains: it
        replaces the state and hparams before the next chunk starts (and before `on_chunk`,
        which then sees the new state while that chunk runs). `stop() -> True` (a stop
        signal came): no further chunk is dispatched; `on_chunk` then says stop."""
        lengths = iter(chunk_lengths(self.num_updates, self.chunk_updates, start_update))
        update = start_update
        inflight: _InFlight | None = None
        last = time.perf_counter()
        while True:
            nxt = None
            n = next(lengths, None)
            if n is not None and inflight is not None and stop is not None and stop():
                n = None  # chunk k's `on_chunk` stops the run: dispatch nothing more
            done_runner = None if inflight is None else inflight.runner
            hold = (controller is not None and inflight is not None
                    and controller.due(inflight.update))
            if n is not None and not hold:
                if self.donate and inflight is not None:  # before chunk k+1 consumes it
                    done_runner = jax.device_get(keys_as_data(inflight.runner))
                nxt = self._dispatch(runner, hparams, n, update)
                update += n
            if inflight is not None:
                metrics = gather(inflight.metrics)  # waits for that chunk only
                now = time.perf_counter()
                result = ChunkResult(inflight.first_update, inflight.update, metrics,
                                     now - t_start, now - last)
                last = now
                if controller is not None:
                    controller.observe(result)
                if hold:  # the pipeline drained: the next chunk starts from what it returns
                    runner, hparams = controller.replace(inflight.runner, hparams,
                                                         inflight.update)
                    done_runner = runner
                    if n is not None:  # dispatched before the callbacks, which overlap it
                        if self.donate:
                            done_runner = jax.device_get(keys_as_data(runner))
                        nxt = self._dispatch(runner, hparams, n, update)
                        update += n
                if not on_chunk(done_runner, result):
                    return done_runner
            if nxt is None:
                return runner  # the last chunk's state (or the input, if nothing was left)
            inflight = nxt
            runner = nxt.runner

    def _dispatch(self, runner: RunnerState, hparams, n: int, update: int) -> _InFlight:
        """Start the next `n` updates (asynchronously where the placement is pipelined)."""
        r_next, m_next = self._programs[n](runner, hparams)
        if not self.placement.pipelined:
            jax.block_until_ready((r_next, m_next))
        return _InFlight(r_next, m_next, update, update + n)
