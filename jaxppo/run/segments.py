"""A run cut into segments, each training only some of its runs in a program compiled for
that many (a controller's `segments`: successive halving's rungs). The host keeps the whole
runner state of every run between chunks; a segment's program takes its runs' rows and each
chunk's result is put back, so a run left out keeps its state from where it stopped, and
callbacks and checkpoints always see every run.

Axis legend: R = runs, C = updates in a chunk.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxppo.keys import is_key
from jaxppo.run.controller import Controller
from jaxppo.run.driver import ChunkResult, Driver, chunk_for_checkpoints

# Filler for a left-out run's cells in the [R, C] metrics of a chunk: no episode, no fault;
# every other metric NaN (it was not computed). env_steps stays the update's own.
_ZERO_FILLED = ("episodes", "nonfinite", "nonfinite_source")


def expand_metrics(metrics: dict[str, np.ndarray], runs: np.ndarray, num_runs: int
                   ) -> dict[str, np.ndarray]:
    """A segment's chunk metrics [len(runs), C] as [R, C]: the left-out runs' cells NaN (0 for
    episodes and faults; env_steps the update's own)."""
    out = {}
    for k, v in metrics.items():
        v = np.asarray(v)
        fill = 0 if k in _ZERO_FILLED else (v[0] if k == "env_steps" else np.nan)
        dtype = v.dtype if k in _ZERO_FILLED or k == "env_steps" else np.result_type(v, np.float32)
        full = np.empty((num_runs, *v.shape[1:]), dtype)
        full[...] = fill
        full[runs] = v
        out[k] = full
    return out


def to_host(tree):
    """A runner state as NumPy (typed keys as their raw data)."""
    return jax.tree.map(lambda x: np.asarray(jax.random.key_data(x) if is_key(x) else x), tree)


def take_runs(host, runs: np.ndarray, template):
    """The rows `runs` of a host runner state, typed as `template` (keys wrapped again)."""
    return jax.tree.map(lambda t, x: jax.random.wrap_key_data(jnp.asarray(x[runs]))
                        if is_key(t) else jnp.asarray(x[runs], t.dtype), template, host)


def put_runs(host, runs: np.ndarray, part):
    """A copy of the host runner state `host` with rows `runs` replaced by `part`'s."""
    def put(x, y):
        x = np.array(x)
        x[runs] = y
        return x
    return jax.tree.map(put, host, to_host(part))


def segment_drivers(placement, controller: Controller, start_update: int, *,
                    chunk_updates: int | None, donate: bool,
                    every: int | None = None) -> list[tuple[int, Driver]] | None:
    """(index, Driver) for each segment still to run, each for its runs only and ending at
    the segment's end (checked now, compiled when it starts); None for an unsegmented run.
    A segment's chunk length is picked for its own updates, so it is one program where it can
    be (not two), and at most `every` (checkpoints due every that many updates)."""
    segments = controller.segments(start_update)
    if segments is None:
        return None
    return [(k, Driver(placement, seg.size, seg.end, donate=donate,
                       chunk_updates=chunk_for_checkpoints(
                           seg.end - max(seg.start, start_update), every, chunk_updates)))
            for k, seg in segments]


def run_segments(exp, placement, drivers: list[tuple[int, Driver]], inputs, loop, info,
                 t_start: float):
    """Run `exp`'s segments one after another, each in the program compiled for its runs,
    through `loop.on_chunk` (which sees every run's state and [R, C] metrics); the whole
    state at the end (or where the loop stopped)."""
    controller = exp.controller
    keys, hparams = exp.keys(), exp.stacked_hparams()
    full = exp.resume_state()
    update = info.start_update
    for k, driver in drivers:
        runs = controller.segment_runs(k)
        whole = len(runs) == exp.num_runs
        part = inputs if whole else placement.place_inputs(
            keys[runs], jax.tree.map(lambda x, r=runs: x[r], hparams))
        driver.compile(part, update, init=full is None)
        loop.compile_s += driver.compile_s
        if k == drivers[0][0]:
            loop.stop_before_training("while compiling")
            for cb in loop.callbacks:
                cb.on_compiled(info, loop.compile_s)
        elif loop.stop_requested():  # a signal while this segment compiled: the last chunk's
            loop.status, loop.stop_signal = "stopped", loop.stop_flag.signum  # state is the
            break  # run's (saved at the end)
        if exp.progress:
            exp.note(f"{controller.segment_label(k, runs)}, updates {update + 1}-"
                     f"{driver.num_updates} ({driver.num_programs} program(s) for "
                     f"{len(runs)} runs, {driver.chunk_updates} updates per chunk, compiled "
                     f"in {driver.compile_s:.1f} s)")
        if full is None:
            runner = driver.init(part)
        elif whole:
            runner = driver.place(full)
        else:
            runner = driver.place(take_runs(to_host(full), runs, driver.template(part)))

        def on_chunk(state, chunk: ChunkResult, runs=runs, whole=whole) -> bool:
            nonlocal full
            if whole:
                full = state
                return loop.on_chunk(state, chunk)
            full = put_runs(to_host(full), runs, state)
            metrics = expand_metrics(chunk.metrics, runs, exp.num_runs)
            return loop.on_chunk(full, chunk._replace(metrics=metrics),
                                 np.isin(np.arange(exp.num_runs), runs))

        driver.run(runner, part.hparams, update, on_chunk, t_start, controller,
                   stop=loop.stop_requested)
        update = loop.stats.update
        if loop.status != "running":
            break
    return full
