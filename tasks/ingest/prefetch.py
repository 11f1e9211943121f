"""Read and validate a file's batches on a worker thread, one batch ahead of the store.

Reading and validating a batch (Arrow/Polars decoding, column-wise checks) needs nothing
from the store, while coding and inserting the previous batch needs nothing from the file:
the two overlap on two cores, and the first batch is read while the store is being opened.
The worker never touches the DuckDB connection.  At most ``depth`` validated batches wait
in the queue, so memory stays bounded by a few batches whatever the file size.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator

import polars as pl

from benchcert.tasks.ingest.adapters.generic import RawBatch
from benchcert.tasks.ingest.validate import validate_batch

_END = object()


class ValidatedBatches:
    """Iterate ``(raw, good, bad)`` for each batch; errors of the worker are raised here."""

    def __init__(self, batches: Iterable[RawBatch], columns: dict, benchmark: str | None, *, depth: int = 1):
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._work, args=(batches, columns, benchmark),
                                        name="benchcert-read", daemon=True)
        self._thread.start()

    def _work(self, batches: Iterable[RawBatch], columns: dict, benchmark: str | None) -> None:
        try:
            for raw in batches:
                if self._stop.is_set():
                    return
                if raw.frame.height:
                    good, bad = validate_batch(raw.frame, columns, benchmark=benchmark)
                else:
                    good = bad = pl.DataFrame()
                if not self._put((raw, good, bad)):
                    return
            self._put(_END)
        except BaseException as exc:  # handed to the consumer, which raises it in its own thread
            self._put(exc)

    def _put(self, item) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def __iter__(self) -> Iterator[tuple[RawBatch, pl.DataFrame, pl.DataFrame]]:
        while True:
            item = self._queue.get()
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item

    def close(self) -> None:
        """Stop the worker (after the batch it is reading) and wait for it."""
        self._stop.set()
        self._thread.join()
