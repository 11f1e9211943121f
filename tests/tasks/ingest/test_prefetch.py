"""The read-ahead worker: batches arrive in order, its errors surface in the caller, closing never hangs."""

from __future__ import annotations

import threading

import polars as pl
import pytest

from benchcert.tasks.ingest.adapters.generic import LINE, RawBatch
from benchcert.tasks.ingest.prefetch import ValidatedBatches

COLS = {"benchmark": None, "model": "model", "item_id": "item", "subject": None, "domain": None,
        "score": "score", "variant": None, "replicate": None}


def _batch(start: int, n: int = 3) -> RawBatch:
    return RawBatch(frame=pl.DataFrame({"model": ["m"] * n, "item": [f"q{start + i}" for i in range(n)],
                                        "score": ["1"] * (n - 1) + ["7"], LINE: list(range(start, start + n))}))


def test_batches_arrive_in_order_and_validated():
    got = list(ValidatedBatches((_batch(s) for s in (1, 4, 7)), COLS, "b"))
    assert [raw.frame[LINE][0] for raw, _, _ in got] == [1, 4, 7]
    assert [good.height for _, good, _ in got] == [2, 2, 2]
    assert [bad["line"].to_list() for _, _, bad in got] == [[3], [6], [9]]  # score 7 is outside [0, 1]


def test_an_error_of_the_reader_is_raised_in_the_caller_after_the_good_batches():
    def batches():
        yield _batch(1)
        raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")

    it = iter(ValidatedBatches(batches(), COLS, "b"))
    assert next(it)[0].frame[LINE][0] == 1
    with pytest.raises(UnicodeDecodeError):
        next(it)


def test_close_stops_a_worker_blocked_on_a_full_queue():
    """Nobody consumes: the worker has filled the queue and waits on it; close() alone must end it."""
    produced = []
    blocked = threading.Event()

    def endless():
        i = 0
        while True:
            produced.append(i)
            if len(produced) == 2:  # batch 1 sits in the queue; the worker now puts batch 2 and waits
                blocked.set()
            yield _batch(i)
            i += 3

    prefetch = ValidatedBatches(endless(), COLS, "b", depth=1)
    assert blocked.wait(60), "the worker never read its second batch"
    # close() in a thread of its own, so a close that waited for a consumer fails here
    # instead of hanging the run
    closer = threading.Thread(target=prefetch.close, daemon=True)
    closer.start()
    closer.join(60)
    assert not closer.is_alive(), "close() is waiting for a worker blocked on the full queue"
    assert not any(th.name == "benchcert-read" and th.is_alive() for th in threading.enumerate())
    assert len(produced) <= 3  # bounded read-ahead: it did not run through the source
