"""TensorBoard event files (`tb/<run name>/`), with CleanRL's tag names and env steps on the
x-axis, written on a thread of their own."""

from __future__ import annotations

import os
import sys

from jaxppo.core.metrics import ENV_METRIC_PREFIX, EPISODE_METRICS, TB_TAGS
from jaxppo.run.events import ChunkEvent, RunInfo
from jaxppo.run.logs.background import BackgroundWriter


def import_tensorboardx():
    """Import tensorboardX without torch. Where torch is installed, tensorboardX imports it
    (~1 s) only to accept torch tensors, which jaxppo never logs; that second would otherwise
    sit between compiling and the first update of every run."""
    if "tensorboardX" not in sys.modules and "torch" not in sys.modules:
        sys.modules["torch"] = None  # `import torch` raises ImportError during this import
        try:
            import tensorboardX  # noqa: F401
        finally:
            del sys.modules["torch"]
    import tensorboardX

    return tensorboardX


class TensorBoardLogger(BackgroundWriter):
    """`tb/<run name>/`: one event file per run, CleanRL's tags, x-axis = env steps. A resumed
    run marks its restart step, so TensorBoard hides events a hard stop left after it.

    Each update is one event carrying every scalar (`charts/episodic_return` and
    `charts/episodic_length` only where an episode ended, the env's own episode metrics,
    `losses/...`, `charts/SPS`); a new run also writes its config as a `hyperparameters` text.
    Written on a thread of its own, overlapping the next chunk; tensorboardX is imported
    without torch.

    `Experiment(tensorboard=True)` (the default) adds one to every run with a run directory,
    on process 0; one given in `callbacks` replaces it. It takes no arguments.
    """

    def on_start(self, info: RunInfo) -> None:
        tbx = import_tensorboardx()
        from tensorboardX.proto.event_pb2 import Event, SessionLog
        from tensorboardX.proto.summary_pb2 import Summary

        self._summary = Summary
        self.writers = []
        batch = info.config.batch_size
        for name in info.run_names:
            w = tbx.FileWriter(os.path.join(info.run_dir, "tb", name))
            if info.start_update == 0:
                rows = "\n".join(f"|{k}|{v}|" for k, v in info.config.to_dict().items())
                w.add_summary(tbx.summary.text("hyperparameters", f"|param|value|\n|-|-|\n{rows}"))
            else:  # TensorBoard's purge: events at steps >= this one, from earlier, are hidden
                purge = info.start_update * batch + 1
                w.add_event(Event(step=purge, file_version="brain.Event:2"))
                w.add_event(Event(step=purge, session_log=SessionLog(status=SessionLog.START)))
            self.writers.append(w)
        self._start_writer()

    def _write(self, event: ChunkEvent) -> None:
        m = event.metrics
        sps = event.stats.sps_per_run
        C = m["episodes"].shape[1]
        for r, w in enumerate(self.writers):
            if event.active is not None and not event.active[r]:
                continue  # a halving sweep's stopped agent: not stepped, nothing to log
            for j in range(C):
                # One event per update carrying every scalar: ~12x fewer events than add_scalar.
                ended = m["episodes"][r, j] > 0
                values = [self._summary.Value(tag=tag, simple_value=float(m[k][r, j]))
                          for k, tag in TB_TAGS.items() if ended or k not in EPISODE_METRICS]
                if ended:  # the env's own episode metrics (Craftax achievements, ...)
                    values += [self._summary.Value(tag=k, simple_value=float(m[k][r, j]))
                               for k in m if k.startswith(ENV_METRIC_PREFIX)]
                values.append(self._summary.Value(tag="charts/SPS", simple_value=sps))
                w.add_summary(self._summary(value=values), int(m["env_steps"][r, j]))
            w.flush()

    def _close(self) -> None:
        for w in self.writers:
            w.close()
