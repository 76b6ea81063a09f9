"""A callback whose writes run on a thread of their own, overlapping the next chunk's
compute (XLA releases the GIL while it runs). A failed write (disk full, too many open files, a
read-only or failing disk) is re-raised on the main thread at the next chunk, so it stops the
run loudly instead of being lost; a writer that stops making progress (a hung file system) is
an error too, never a wait without end."""

from __future__ import annotations

import errno
import queue
import threading
import time

from jaxppo.run.events import Callback, ChunkEvent, RunResult

STALL_S = 120.0
"""A writer that has finished nothing for this long while chunks wait for it has failed."""


class BackgroundWriter(Callback):
    """Runs `_write(event)` on a writer thread; errors surface on the main thread. Waiting for
    it (`flush`, `on_end`) wakes often (signals are handled), ends at its first error and gives
    up on a writer stalled for `STALL_S` seconds."""

    stall_s = STALL_S

    def _start_writer(self) -> None:
        self._queue: queue.Queue = queue.Queue()
        self._error: BaseException | None = None
        self._pending = 0
        self._done = threading.Condition()
        self._progress = time.monotonic()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is not None and self._error is None:
                try:
                    self._write(item)
                except BaseException as e:  # noqa: BLE001 - re-raised on the main thread
                    self._error = e
            with self._done:
                self._pending -= 1
                self._progress = time.monotonic()
                self._done.notify_all()
            if item is None:
                return

    def _tick(self) -> None:
        """Called by `_write` as it goes: a long write that moves is not a stalled one."""
        self._progress = time.monotonic()

    def _wait(self) -> None:
        """Until everything queued is written, the writer failed, or it stalled."""
        if getattr(self, "_thread", None) is None:
            return
        with self._done:
            while self._pending and self._error is None and self._thread.is_alive():
                if time.monotonic() - self._progress > self.stall_s:
                    self._error = OSError(
                        errno.EIO, f"its {type(self).__name__} wrote nothing for "
                                   f"{self.stall_s:.0f} s (a hung file system?)")
                    break
                self._done.wait(0.25)  # short waits: a signal is handled between them

    def flush(self) -> None:
        """Wait until every chunk given so far is written. A failed write raises here: the
        checkpoint about to be saved would otherwise get ahead of the log."""
        self._wait()
        self._raise()

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error

    def _put(self, item) -> None:
        with self._done:
            if self._pending == 0:  # an idle writer's clock starts with this item
                self._progress = time.monotonic()
            self._pending += 1
        self._queue.put(item)

    def on_chunk(self, event: ChunkEvent) -> None:
        self._raise()
        self._put(event)

    def on_end(self, result: RunResult) -> None:
        if getattr(self, "_thread", None) is None:  # on_start failed before the thread began
            self._close()
            return
        self._put(None)
        self._wait()
        self._close()
        self._raise()

    def _write(self, event: ChunkEvent) -> None:
        raise NotImplementedError

    def _close(self) -> None:
        pass
