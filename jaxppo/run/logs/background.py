"""A callback whose writes run on a thread of their own, overlapping the next chunk's
compute (XLA releases the GIL while it runs). A failed write (disk full, ...) is re-raised on
the main thread at the next chunk, so it stops the run loudly instead of being lost."""

from __future__ import annotations

import queue
import threading

from jaxppo.run.events import Callback, ChunkEvent, RunResult


class BackgroundWriter(Callback):
    """Runs `_write(event)` on a writer thread; errors surface on the main thread."""

    def _start_writer(self) -> None:
        self._queue: queue.Queue = queue.Queue()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                if self._error is None:
                    try:
                        self._write(item)
                    except BaseException as e:  # noqa: BLE001 - re-raised on the main thread
                        self._error = e
            finally:
                self._queue.task_done()

    def flush(self) -> None:
        """Wait until every chunk given so far is written. A failed write raises here: the
        checkpoint about to be saved would otherwise get ahead of the log."""
        if getattr(self, "_thread", None) is not None and self._thread.is_alive():
            self._queue.join()
        self._raise()

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error

    def on_chunk(self, event: ChunkEvent) -> None:
        self._raise()
        self._queue.put(event)

    def on_end(self, result: RunResult) -> None:
        self._queue.put(None)
        self._thread.join()
        self._close()
        self._raise()

    def _write(self, event: ChunkEvent) -> None:
        raise NotImplementedError

    def _close(self) -> None:
        pass
