"""Ingest's errors, in the taxonomy of tasks/errors.py, and the read failures of a user's file.

A file that cannot be ingested as given is a :class:`IngestError` (a
:class:`~benchcert.tasks.errors.DataError`, exit 1); one that contradicts the store is a
:class:`ConflictError`.  The ingest records a file as ``error`` only for these and the adapters'
named errors (:data:`FILE_ERRORS`); any other exception is a bug in benchcert and propagates.

What the libraries raise while a user's file is read (an OSError, DuckDB or Polars failing on
its bytes, a truncated gzip stream) is a fact about that file, not a bug: :func:`reading` wraps
the places where a file is read and turns those (:data:`READ_FAILURES`) into a
:class:`FileReadError` whose message names the file.
"""

from __future__ import annotations

import contextlib
import gzip
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pyarrow as pa
from polars.exceptions import PanicException, PolarsError

from benchcert.tasks.errors import DataError, is_disk_full
from benchcert.tasks.ingest.adapters import generic, limits


class IngestError(DataError):
    """The file cannot be ingested as given (unreadable, mapping does not fit)."""


class ConflictError(IngestError):
    """The file contradicts what the store already holds."""


class FileReadError(IngestError):
    """Reading or storing the file's content failed in a library (the message names the file)."""


#: The named errors of a file that the ingest reports as the file's ``error`` (the store's own
#: errors, locked or unusable, are reported apart).
FILE_ERRORS = (IngestError, generic.AdapterError, limits.DecompressionLimitError)

#: What the readers' libraries raise on the bytes of a user's file.  RecursionError: a document
#: nested deeper than the parser goes.
READ_FAILURES = (OSError, EOFError, zlib.error, zipfile.BadZipFile, UnicodeDecodeError, RecursionError,
                 PolarsError, PanicException, pa.ArrowException)
#: What DuckDB raises when the file's values cannot be stored: the disk or memory ran out, a
#: value out of a column's range.  Any other DuckDB error (a binder or parser error) is a bug.
STORE_FAILURES = (OSError, duckdb.IOException, duckdb.OutOfMemoryException, duckdb.ConversionException,
                  duckdb.OutOfRangeException, duckdb.ConstraintException)


@contextlib.contextmanager
def reading(path: Path) -> Iterator[None]:
    """Turn a library's failure on the file at ``path``, read or stored, into a :class:`FileReadError`
    naming it."""
    try:
        yield
    except FILE_ERRORS:
        raise
    except (*READ_FAILURES, *STORE_FAILURES) as exc:
        raise FileReadError(describe_failure(path, exc)) from exc


def describe_failure(path: Path, exc: BaseException) -> str:
    """One line naming the file and what is wrong with it, for a library's failure on its content."""
    if isinstance(exc, limits.DecompressionLimitError):
        return str(exc)
    if is_disk_full(exc):
        target = getattr(exc, "filename", None) or "the store or its temporary files"
        return (f"{path}: disk full (ENOSPC) writing {target} ({' '.join(str(exc).split())[:300]}); "
                "nothing from this file is stored; free some space and ingest it again")
    if isinstance(exc, UnicodeDecodeError):
        return str(generic.not_utf8(path, exc))
    if isinstance(exc, (EOFError, zlib.error, gzip.BadGzipFile)):
        return f"{path}: truncated or corrupt compressed data ({exc}); nothing from this file is stored"
    if isinstance(exc, RecursionError):
        return f"{path}: nested too deeply to read; nothing from this file is stored"
    if isinstance(exc, OSError):
        return f"{path}: cannot be read: {exc.strerror or exc}; nothing from this file is stored"
    return f"{path}: cannot be read ({type(exc).__name__}: {exc}); nothing from this file is stored"
