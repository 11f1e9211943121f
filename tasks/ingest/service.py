"""Ingest one log file into the store: reader -> validated batches -> one store write in one transaction.

:func:`ingest_file` is the one path of every file: :func:`~benchcert.tasks.ingest.readers.open_file`
decides what the path is (a table's plan or a harness log's source), the reader's batches are
validated one ahead on a worker thread (:class:`~benchcert.tasks.ingest.prefetch.ValidatedBatches`),
and :func:`~benchcert.tasks.ingest.one_file.stage_and_insert` checks and stores them in one
transaction (the file's own, or an ``--atomic`` command's).  Several files, and the batching of
small table files, are the policies of :mod:`benchcert.tasks.ingest.many`.

The file's report says what happened; a named error of the file (unreadable, invalid, conflicting:
:data:`~benchcert.tasks.ingest.errors.FILE_ERRORS`) becomes its ``error``/``conflict`` status, the
store's own errors ``locked``/``unusable``.  Anything else is a bug and propagates.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchcert.tasks.ingest.adapters import generic, native
from benchcert.tasks.ingest.errors import FILE_ERRORS, ConflictError, IngestError, reading
from benchcert.tasks.ingest.mapping import ColumnMapping
from benchcert.tasks.ingest.one_file import FileContext, stage_and_insert
from benchcert.tasks.ingest.prefetch import ValidatedBatches
from benchcert.tasks.ingest.readers import GenericPlan, open_file
from benchcert.tasks.ingest.reports import (NOT_TRIED, OK_STATUSES, ROLLED_BACK, FileReport, command_summary,
                                            summary_text, unchanged_message)
from benchcert.tasks.schemas import CANONICAL_FIELDS
from benchcert.tasks.store import responses
from benchcert.tasks.store.connection import DEFAULT_LOCK_TIMEOUT, StoreError, StoreLockedError, open_store

__all__ = ["ConflictError", "FileReport", "IngestError", "NOT_TRIED", "OK_STATUSES", "ROLLED_BACK",
           "command_summary", "ingest_file", "summary_text"]


@dataclass(frozen=True)
class _Source:
    """What the store write needs of a file, a table's or a harness log's alike."""

    ctx: FileContext
    batches: Any  # the reader's raw batches
    benchmark: str | None  # what validation fills a missing benchmark with
    unchanged: str  # the report's message when the content is stored already with the same settings
    log: native.NativeSource | None = None  # a harness log whose model name is checked (no --model)


def ingest_file(db: str | Path, path: str | Path, *, benchmark: str | None, mapping: ColumnMapping,
                allow_rejects: bool = False, lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
                batch_rows: int = generic.BATCH_ROWS, con=None, own_transaction: bool | None = None) -> FileReport:
    """Ingest one file; never raises for bad data, returns a report whose ``status`` says what happened.

    ``con``: an open store connection; unless ``own_transaction`` it is inside a transaction the
    caller commits or rolls back (an ``--atomic`` command).  By default (no ``con``) the store is
    opened for this file and the file is ingested in its own transaction.
    """
    path = Path(path)
    own = con is None if own_transaction is None else own_transaction
    report = FileReport(path=str(path), status="error")
    try:
        with reading(path):
            plan = open_file(path, mapping, benchmark, allow_rejects, report)
            source = (_table_source(plan, benchmark, allow_rejects, batch_rows) if isinstance(plan, GenericPlan)
                      else _log_source(plan, benchmark, allow_rejects, batch_rows, report,
                                       named=getattr(mapping, "model", None) is not None))
            if source is not None:
                if getattr(mapping, "replace_human_labels", False):  # --replace-human-labels, asked explicitly
                    source = dataclasses.replace(source, ctx=dataclasses.replace(source.ctx, replace_human=True))
                _store_source(db, source, report, lock_timeout=lock_timeout, con=con, own_transaction=own)
    except ConflictError as exc:
        report.status, report.message = "conflict", str(exc)
    except StoreLockedError as exc:
        report.status, report.message = "locked", str(exc)
    except StoreError as exc:
        report.status, report.message = "unusable", str(exc)
    except FILE_ERRORS as exc:
        report.status, report.message = "error", str(exc)
    return report


def _table_source(plan: GenericPlan, benchmark: str | None, allow_rejects: bool, batch_rows: int) -> _Source:
    """A table file (CSV, JSONL, JSON records, Parquet) as the store write takes it."""
    reader = plan.reader()
    ctx = FileContext(path=plan.path, reader=reader, cols=plan.cols, benchmark=benchmark, sha=plan.sha,
                      config=plan.config, allow_rejects=allow_rejects)
    return _Source(ctx=ctx, batches=reader.batches(batch_rows), benchmark=benchmark, unchanged="")


def _log_source(log: native.NativeSource, benchmark: str | None, allow_rejects: bool, batch_rows: int,
                report: FileReport, *, named: bool) -> _Source | None:
    """A harness log as the store write takes it (None for a metadata file, whose report is complete).

    The adapter yields canonical columns; the benchmark is the source's (flag or log), a constant.
    ``named``: ``--model`` names the model (the user's choice; the log is not checked against the
    names its content is stored under).
    """
    report.format, report.sha256, report.read = log.format, log.sha256, dict(log.read)
    if log.metadata_only:
        report.status = "metadata"
        report.message = f"{log.path}: {log.summary()}"
        return None
    cols = {f: (None if f == "benchmark" else f) for f in CANONICAL_FIELDS}
    config = json.dumps({"benchmark": benchmark, "format": log.format, "settings": log.settings,
                         "allow_rejects": allow_rejects}, sort_keys=True, default=str)
    ctx = FileContext(path=log.path, reader=log, cols=cols, benchmark=log.benchmark, sha=log.sha256, config=config,
                      allow_rejects=allow_rejects)
    return _Source(ctx=ctx, batches=log.batches(batch_rows), benchmark=log.benchmark,
                   unchanged=f" [{log.summary()}]", log=None if named else log)


def _store_source(db, source: _Source, report: FileReport, *, lock_timeout: float, con,
                  own_transaction: bool) -> None:
    """The file's validated batches into the store (or ``unchanged``), on ``con`` or a store opened for it."""
    ctx = source.ctx
    batches = ValidatedBatches(source.batches, ctx.cols, source.benchmark)  # starts reading now
    try:
        store = contextlib.nullcontext(con) if con is not None else open_store(db, write=True,
                                                                               lock_timeout=lock_timeout)
        with store as store_con:
            done = responses.stored_source(store_con, ctx.sha, ctx.config)
            if done is not None:
                report.status, report.source_id = "unchanged", done
                report.message = unchanged_message(ctx.path, done) + source.unchanged
                return
            if source.log is not None:
                _refuse_second_name(store_con, source.log)
            stage_and_insert(store_con, ctx, batches, report, own_transaction=own_transaction)
    finally:
        batches.close()
    if isinstance(ctx.reader, native.NativeSource):
        report.message += f" [{ctx.reader.summary()}]"


def _refuse_second_name(con, log: native.NativeSource) -> None:
    """A log whose content is stored already under another model name is refused (ConflictError).

    The same log read again with other settings (a repaired results file beside it, a folder
    renamed) must not store its rows a second time under a second name it read itself: one run
    would be two models in every audit.  ``--model`` is the user's explicit choice and is not
    checked.
    """
    model = log.read.get("model")
    if not model:
        return
    other = responses.other_model_names(con, log.sha256, log.benchmark, model)
    if other:
        named, source_id, where = other[0]
        raise ConflictError(
            f"{log.path}: this log (same content) is stored already as model {named!r} (source {source_id}, "
            f"{where}); storing it again as {model!r} would make one run two models; nothing ingested "
            "(pass --model to name the model yourself)")
