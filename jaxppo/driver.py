"""Drive a training run on the host: the compiled update scan in chunks, with logging,
checkpoints and signal handling between chunks.

Each chunk is the same compiled program (a `lax.scan` over `chunk_updates` updates, vmapped
over runs), so a run compiles once and the device never waits on Python inside a chunk. The
chunk length is a divisor of `num_updates`, so every chunk has the same shape (one compile),
and chunked runs are bit-identical to one unbroken scan (tested).

A "run" is one agent: a seed, or a (setting, seed) pair of a sweep. Axis legend: R = runs.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jax
import numpy as np

from jaxppo._xla import compiler_options
from jaxppo.config import Hparams, PPOConfig, divisors
from jaxppo.memory import check_memory
from jaxppo.sharding import gather
from jaxppo.train import RunnerState, make_train


def pick_chunk(num_updates: int, target_chunks: int = 25) -> int:
    """The divisor of `num_updates` closest to `num_updates / target_chunks`."""
    want = max(1.0, num_updates / target_chunks)
    return min(divisors(num_updates), key=lambda d: (abs(np.log(d / want)), d))


DIVERGENCE_HINT = ("lower lr or max_grad_norm, or turn on normalize_obs / normalize_reward "
                   "(see README: when things go wrong)")


def find_nonfinite(metrics: dict[str, np.ndarray], first_update: int) -> tuple[int, int] | None:
    """`(run, update)` of the earliest update in a chunk whose loss, gradients or params went
    non-finite (`update` counts from 1, as the CSV does), or None when the chunk is clean."""
    bad = np.asarray(metrics["nonfinite"]) > 0  # [R, C]
    if not bad.any():
        return None
    j = int(np.argmax(bad.any(axis=0)))
    return int(np.argmax(bad[:, j])), first_update + j + 1


class StopFlag:
    """Set by SIGINT/SIGTERM; checked at chunk boundaries so the stop is clean and resumable."""

    def __init__(self):
        self.signum: int | None = None
        self._old = {}

    def __enter__(self):
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                self._old[sig] = signal.signal(sig, self._handle)
            except ValueError:  # not the main thread: leave signals alone
                pass
        return self

    def _handle(self, signum, frame):
        if self.signum is not None:  # a second Ctrl-C: stop now
            raise KeyboardInterrupt
        self.signum = signum

    def __exit__(self, *exc):
        for sig, old in self._old.items():
            signal.signal(sig, old)
        return False


@dataclass
class ChunkResult:
    update: int  # updates done after this chunk
    metrics: dict[str, np.ndarray]  # each [R, chunk]
    wall_s: float  # seconds since the driver started (compile included)
    chunk_s: float  # seconds this chunk took


@dataclass
class Driver:
    """Compiles `init` and one chunk for `num_runs` runs and steps through the run.

    With a `mesh`, the same two programs run sharded over its devices (`sharding.py`): the
    runs split over devices (`shard="seeds"`) or each run's envs do (`shard="envs"`).
    """

    config: PPOConfig
    num_runs: int
    hparams: Hparams | None = None  # leaves [R] for a sweep; None = the config's values
    chunk_updates: int | None = None
    mesh: Any = None  # a jax.sharding.Mesh, or None for the default device
    shard: str = "seeds"
    compile_s: float = field(default=0.0, init=False)

    def __post_init__(self):
        if self.chunk_updates is None:
            self.chunk_updates = pick_chunk(self.config.num_updates)
        if self.config.num_updates % self.chunk_updates:
            raise ValueError(f"chunk_updates={self.chunk_updates} must divide num_updates="
                             f"{self.config.num_updates}")
        hp_axis = None if self.hparams is None else 0
        chunk = self.chunk_updates
        if self.mesh is not None:
            from jaxppo.sharding import ShardedTrain

            self.sharded = ShardedTrain(self.config, self.mesh, self.shard)
            self.sharded.check_runs(self.num_runs)
            # What one device holds: its runs (seeds), or its share of every run (envs).
            per_device = self.num_runs // self.mesh.size if self.shard == "seeds" else self.num_runs
            check_memory(self.sharded.local, per_device, metrics_updates=chunk)
            self.train = self.sharded.train
            # One program at a time where XLA:CPU's collectives can deadlock (see
            # ShardedTrain.serial); GPUs order collectives on streams and keep the pipeline.
            self.pipelined = not self.sharded.serial
            self._init = self.sharded.init_fn(self.num_runs, hp_axis)
            self._chunk = self.sharded.run_fn(self.num_runs, hp_axis, chunk)
            return
        self.sharded = None
        self.pipelined = True
        # All runs at once, one chunk of metrics: refused here, before any compile.
        check_memory(self.config, self.num_runs, metrics_updates=chunk)
        self.train = make_train(self.config, memory_check=False)
        self._init = jax.jit(jax.vmap(self.train.init, in_axes=(0, hp_axis)))
        # No buffer donation: while chunk k+1 runs, chunk k's state must stay valid for its
        # checkpoint (the runner state is small: params, optimizer, env state).
        self._chunk = jax.jit(
            jax.vmap(lambda r, hp: self.train.run(r, hp, chunk), in_axes=(0, hp_axis)))

    def keys(self, seed: int) -> jax.Array:
        """One key per run, placed on the mesh when there is one (the same on every process)."""
        return self.place_keys(jax.random.split(jax.random.key(seed), self.num_runs))

    def place_keys(self, keys: jax.Array) -> jax.Array:
        """Put the run keys (and the sweep's hparams) where the sharded programs take them,
        with the initial params the sharded init starts from (`ShardedTrain.initial_params`)."""
        if self.sharded is not None:
            self._params = self.sharded.initial_params(keys)
            keys, self.hparams = self.sharded.place(keys, self.hparams)
        return keys

    def _init_args(self, keys: jax.Array) -> tuple:
        if self.sharded is None:
            return keys, self.hparams
        return keys, self.hparams, self._params

    def compile(self, keys: jax.Array) -> None:
        """Compile (or fetch from the persistent cache) both programs; time it."""
        t0 = time.perf_counter()
        opts = compiler_options(jax.default_backend())
        self._init_c = self._init.lower(*self._init_args(keys)).compile(compiler_options=opts)
        self._chunk_c = self._chunk.lower(self.template(keys), self.hparams).compile(
            compiler_options=opts)
        self.compile_s = time.perf_counter() - t0

    def template(self, keys: jax.Array):
        """Shapes and dtypes of the runner state (what a checkpoint must match)."""
        return jax.eval_shape(self._init, *self._init_args(keys))

    def place(self, runner: RunnerState) -> RunnerState:
        """Put a restored (host) runner state where the compiled chunk expects it."""
        if self.sharded is None:
            return runner
        from jaxppo.sharding import put_global

        return put_global(runner, self._chunk_c.input_shardings[0][0])

    def init(self, keys: jax.Array) -> RunnerState:
        runner = self._init_c(*self._init_args(keys))
        return runner if self.pipelined else jax.block_until_ready(runner)

    def run(self, runner: RunnerState, start_update: int,
            on_chunk: Callable[[RunnerState, ChunkResult], bool], t_start: float) -> RunnerState:
        """Step chunk by chunk from `start_update` to the end. `on_chunk` returns False to stop.

        Pipelined: chunk k+1 is dispatched (JAX dispatch is asynchronous) before the host logs
        chunk k, so logging and checkpointing overlap with compute instead of stalling it.
        A stop after chunk k returns chunk k's state; chunk k+1's result is dropped.
        """
        update = start_update
        inflight = None  # (runner, metrics, update) of the chunk being computed
        last = time.perf_counter()
        while True:
            nxt = None
            if update < self.config.num_updates:
                r_next, m_next = self._chunk_c(runner, self.hparams)
                if not self.pipelined:
                    jax.block_until_ready((r_next, m_next))
                update += self.chunk_updates
                nxt = (r_next, m_next, update)
            if inflight is not None:
                r_done, m_done, u_done = inflight
                metrics = gather(m_done)  # waits for that chunk only
                now = time.perf_counter()
                result = ChunkResult(u_done, metrics, now - t_start, now - last)
                last = now
                if not on_chunk(r_done, result):
                    return r_done
            if nxt is None:
                return runner  # the last chunk's state (or the input, if nothing was left)
            inflight = nxt
            runner = nxt[0]
