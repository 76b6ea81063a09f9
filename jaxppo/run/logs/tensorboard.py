"""TensorBoard event files (`tb/<run name>/`), with CleanRL's tag names and env steps on the
x-axis, written on a thread of their own.

jaxppo writes the event files itself (TensorBoard's TFRecord framing of tensorboardX's
protobufs) rather than through tensorboardX's `FileWriter`, which keeps one open file, one
pipe and one thread per agent: a few hundred agents ran out of file descriptors, and a writer
thread that died on a full disk left the next write waiting forever on its queue. Here each
agent's file is opened, appended to and closed once per chunk, on the logger's one thread, and
a failed write is an `OSError` the run stops on at its next chunk."""

from __future__ import annotations

import errno
import os
import socket
import struct
import sys
import time

from jaxppo.core.metrics import ENV_METRIC_PREFIX, EPISODE_METRICS, TB_TAGS
from jaxppo.run.events import ChunkEvent, RunInfo
from jaxppo.run.logs.background import BackgroundWriter
from jaxppo.rundir import names


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


def _record(data: bytes, masked_crc32c) -> bytes:
    """One TFRecord: length, its masked CRC-32C, the data, its masked CRC-32C."""
    header = struct.pack("<Q", len(data))
    return (header + struct.pack("<I", masked_crc32c(header)) + data
            + struct.pack("<I", masked_crc32c(data)))


class EventFile:
    """One agent's event file, holding no file descriptor between writes: `write` opens it,
    appends every pending event and closes it. Its folder is made at the first write (a run
    that fails before its first chunk leaves no empty `tb/` folders), inside a run directory
    that must still exist (a deleted one is not silently recreated)."""

    def __init__(self, run_dir: str, name: str, masked_crc32c):
        self.run_dir, self.name, self.crc = run_dir, name, masked_crc32c
        self.path: str | None = None
        self.pending: list[bytes] = []

    def add(self, event) -> None:
        self.pending.append(event.SerializeToString())

    def _create(self) -> str:
        folder = self.run_dir
        if not os.path.isdir(folder):
            raise FileNotFoundError(errno.ENOENT, "the run directory was deleted", folder)
        for part in (names.TB_DIR, self.name):
            folder = os.path.join(folder, part)
            try:
                os.mkdir(folder)
            except FileExistsError:
                if os.path.islink(folder) or not os.path.isdir(folder):
                    raise OSError(errno.ENOTDIR, "not a real directory", folder) from None
        # tensorboardX's name (TensorBoard reads `*tfevents*`); a resumed run adds a new file
        base = os.path.join(folder, f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}")
        path, i = base, 1
        while os.path.lexists(path):
            i += 1
            path = f"{base}.{i}"
        return path

    def write(self) -> None:
        if not self.pending:
            return
        try:
            if self.path is None:
                self.path = self._create()
            data = b"".join(_record(e, self.crc) for e in self.pending)
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
            fd = os.open(self.path, flags, 0o644)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
        except OSError as e:
            if e.filename is None:  # name the file: os.write's error does not
                raise OSError(e.errno, e.strerror, self.path or self.run_dir) from None
            raise
        self.pending = []


class TensorBoardLogger(BackgroundWriter):
    """`tb/<run name>/`: one event file per run, CleanRL's tags, x-axis = env steps. A resumed
    run marks its restart step, so TensorBoard hides events a hard stop left after it.

    Each update is one event carrying every scalar (`charts/episodic_return` and
    `charts/episodic_length` only where an episode ended, the env's own episode metrics,
    `losses/...`, `charts/SPS`); a new run also writes its config as a `hyperparameters` text.
    Written on a thread of its own, overlapping the next chunk; no file stays open between
    chunks, whatever the number of agents.

    `Experiment(tensorboard=True)` (the default) adds one to every run with a run directory,
    on process 0; one given in `callbacks` replaces it. It takes no arguments.
    """

    def on_start(self, info: RunInfo) -> None:
        tbx = import_tensorboardx()
        from tensorboardX.proto.event_pb2 import Event, SessionLog
        from tensorboardX.proto.summary_pb2 import Summary
        from tensorboardX.record_writer import masked_crc32c

        self._summary, self._event = Summary, Event
        self.files = []
        batch = info.config.batch_size
        hparams = None
        if info.start_update == 0:
            rows = "\n".join(f"|{k}|{v}|" for k, v in info.config.to_dict().items())
            hparams = tbx.summary.text("hyperparameters", f"|param|value|\n|-|-|\n{rows}")
        for name in info.run_names:
            f = EventFile(info.run_dir, name, masked_crc32c)
            f.add(Event(wall_time=time.time(), file_version="brain.Event:2"))
            if hparams is not None:
                f.add(Event(wall_time=time.time(), step=0, summary=hparams))
            else:  # TensorBoard's purge: events at steps >= this one, from earlier, are hidden
                purge = info.start_update * batch + 1
                f.add(Event(step=purge, file_version="brain.Event:2"))
                f.add(Event(step=purge, session_log=SessionLog(status=SessionLog.START)))
            self.files.append(f)
        self._start_writer()

    def _write(self, event: ChunkEvent) -> None:
        m = event.metrics
        sps = event.stats.sps_per_run
        C = m["episodes"].shape[1]
        now = time.time()
        for r, f in enumerate(self.files):
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
                f.add(self._event(wall_time=now, step=int(m["env_steps"][r, j]),
                                  summary=self._summary(value=values)))
            f.write()
            self._tick()
