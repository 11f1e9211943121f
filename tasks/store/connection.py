"""The DuckDB store: one file on disk holding responses, items, sources, rejects and runs.

DuckDB lets one process write a database file at a time, and a second process that opens
the file fails at once.  Every benchcert process therefore takes an exclusive file lock
(``<db>.lock``) before it opens the store and releases it as soon as it is done, so two
ingests (or an ingest and an audit) wait for each other instead of failing; after
``lock_timeout`` seconds the waiter gives up with :class:`StoreLockedError`.

Responses are stored as integer codes (``response_codes``: model_id, item_key, variant_id,
replicate, score, source_id, line) with three small dictionaries (``models``, ``items``,
``variants``) holding the text; the ``responses`` view joins them back to the canonical
columns (benchmark, model, item_id, variant, replicate, score, source_id, line), so readers
query text while a 10-million-row ingest appends only numbers.  Appending text costs DuckDB
about 4x the time of integers (string compression analysis on every row group), and an audit
reading codes holds a fraction of the memory.  A code belongs to one benchmark: the
dictionaries carry the benchmark, and the key (benchmark, model, item_id, variant,
replicate) maps one-to-one onto (model_id, item_key, variant_id, replicate).

There is no declared primary key: a DuckDB index over 10 million rows costs more memory
than the target allows.  Uniqueness is enforced by the ingest path, which only ever
inserts keys it has anti-joined against the table while holding the lock.

Every table, its migrations and the store version are defined in :mod:`benchcert.tasks.store.schema`;
this module opens, locks, creates or upgrades the store and records audit runs.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import polars as pl
from filelock import FileLock, Timeout

from benchcert.tasks.store import schema
from benchcert.tasks.store.schema import STORE_VERSION
from benchcert.tasks.errors import StoreUnusableError

__all__ = ["STORE_VERSION", "DUCKDB_MEMORY_LIMIT", "DEFAULT_LOCK_TIMEOUT", "StoreError", "StoreLockedError",
           "open_store", "transaction", "query_pl", "RunRecord", "record_run", "list_runs", "get_run", "get_default_variant",
           "set_default_variant", "lock_path"]

#: DuckDB's buffer pool per process: big scans and joins spill to disk beyond this, which keeps
#: a 10-million-row ingest's peak memory down at little cost (measured in benchmarks/).
DUCKDB_MEMORY_LIMIT = "1GB"
#: Row groups an uncommitted append buffers before writing them to the file (DuckDB's default 5).
WRITE_BUFFER_ROW_GROUPS = 1
#: DuckDB's allocator returns the pages it freed from a background thread, as they age, instead of
#: only when a query allocates again: a million-row ingest peaks some 5 MB lower (benchmarks/json_memory.py).
ALLOCATOR_BACKGROUND_THREADS = True
from benchcert.tasks.store import DEFAULT_LOCK_TIMEOUT  # noqa: E402  (re-exported; defined where the CLI reads it)


class StoreError(StoreUnusableError):
    """The store cannot be used (locked, wrong version, not a store, disk full; exit code 3)."""


class StoreLockedError(StoreError):
    """Another process holds the store's lock past the lock timeout (exit code 3)."""


def lock_path(db: Path) -> Path:
    return db.with_name(db.name + ".lock")


def require_store(db: str | os.PathLike) -> Path:
    """``db`` if it is a file; else :class:`~benchcert.tasks.errors.MissingStoreError` (exit 3), before
    a command reads it (opening it would create an empty one)."""
    from benchcert.tasks.errors import MissingStoreError

    if not Path(db).is_file():
        raise MissingStoreError(f"{db}: no such store; ingest something first")
    return Path(db)


@contextlib.contextmanager
def open_store(db: str | os.PathLike, *, write: bool,
               lock_timeout: float = DEFAULT_LOCK_TIMEOUT) -> Iterator[duckdb.DuckDBPyConnection]:
    """Open the store under the process lock; create the schema when writing."""
    db = Path(db)
    if not write and not db.exists():
        raise StoreError(f"{db}: no such store; ingest something first (benchcert ingest ... --db {db})")
    db.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(lock_path(db)), timeout=lock_timeout)
    try:
        lock.acquire()
    except Timeout:
        raise StoreLockedError(
            f"{db}: another benchcert process has held the store for more than {lock_timeout:g} s "
            f"(lock file {lock_path(db)}); try again later or raise --lock-timeout") from None
    try:
        new_file = not db.exists()  # under the lock: nobody else can be creating it
        problem = None if new_file else _not_a_duckdb_file(db)
        if problem:
            raise StoreError(f"{db}: {problem}; not a benchcert store (give another --db, or move this file away)")
        try:
            con = duckdb.connect(str(db), read_only=False)
        except duckdb.IOException as exc:
            if "lock" in str(exc).lower():
                raise StoreLockedError(f"{db}: the database file is in use by another program: {exc}") from None
            raise StoreError(f"{db}: cannot open the store (damaged or truncated?): {exc}") from None
        except duckdb.Error as exc:
            raise StoreError(f"{db}: cannot open the store (damaged or truncated?): {exc}") from None
        try:
            try:
                con.execute("SET preserve_insertion_order = false")
                con.execute("SET memory_limit = ?", [DUCKDB_MEMORY_LIMIT])
                # DuckDB draws a progress bar on stdout for a query past 2 s (on a loaded machine, any
                # query): it would corrupt a command's --json output.
                con.execute("SET enable_progress_bar = false")
                # An ingest appends a file's rows inside one transaction; DuckDB writes them to the file
                # a row group (122,880 rows) at a time instead of buffering five, which keeps ~40 MB
                # less of a million-row file in memory until the commit (benchmarks/json_memory.py).
                con.execute("SET write_buffer_row_group_count = ?", [WRITE_BUFFER_ROW_GROUPS])
                con.execute("SET allocator_background_threads = ?", [ALLOCATOR_BACKGROUND_THREADS])
                if write:
                    _ensure_schema(con, db, new_file=new_file)
                else:
                    _check_version(con, db)
            except duckdb.Error as exc:
                raise StoreError(f"{db}: cannot open the store (damaged or truncated?): {exc}") from None
            yield con
        finally:
            con.close()
    finally:
        lock.release()


def _not_a_duckdb_file(db: Path) -> str | None:
    """Why ``db`` is not a DuckDB database file, or None when its header says it is one."""
    if not db.is_file():
        return "not a regular file"
    try:
        with open(db, "rb") as fh:
            head = fh.read(12)
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    if len(head) == 0:
        return None  # an empty file: DuckDB makes a database of it
    if len(head) < 12 or head[8:12] != b"DUCK":
        return "not a DuckDB database file (no DuckDB header; truncated, or another kind of file)"
    return None


@contextlib.contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """Commit what the block did, or roll all of it back if it raises."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def _ensure_schema(con: duckdb.DuckDBPyConnection, db: Path, *, new_file: bool = False) -> None:
    version = None if new_file else schema.stored_version(con)
    if version == "1":
        _migrate_v1(con, db)
        return
    if version in ("2", "3"):
        _migrate_columns(con, version)
        return
    if version not in (None, STORE_VERSION):
        raise StoreError(f"{db}: store version {version} is not supported (expected {STORE_VERSION}); "
                         "it was written by a newer benchcert")
    if version == STORE_VERSION:
        return  # the schema is complete; re-running the DDL would rewrite the view on every open
    with transaction(con):  # one commit for the whole schema, not one per statement
        schema.create_core(con)


def _check_version(con: duckdb.DuckDBPyConnection, db: Path) -> None:
    version = schema.stored_version(con)
    if version is None:
        raise StoreError(f"{db}: not a benchcert store (no store version in a meta table)")
    if version == "1":
        # Readers hold the same exclusive lock as writers, so upgrading here is safe.
        _migrate_v1(con, db)
    elif version in ("2", "3"):
        _migrate_columns(con, version)
    elif version != STORE_VERSION:
        raise StoreError(f"{db}: store version {version} is not supported (expected {STORE_VERSION}); "
                         "it was written by a newer benchcert")


def _migrate_columns(con: duckdb.DuckDBPyConnection, version: str) -> None:
    """Version 2 had no human_score column, version 3 no parsed column: add what is missing, in
    one transaction (catalog changes, no data moves)."""
    with transaction(con):
        if version == "2":
            schema.migrate_v2(con)
        schema.migrate_v3(con)


def _migrate_v1(con: duckdb.DuckDBPyConnection, db: Path) -> None:
    """Version 1 kept responses as text; move them to codes in one transaction, losing nothing."""
    with transaction(con):
        n_lost = schema.migrate_v1(con)
        if n_lost:
            raise StoreError(f"{db}: cannot upgrade the store from version 1: {n_lost} response(s) "
                             "have no item row; the store is left as it was")


def query_pl(con: duckdb.DuckDBPyConnection, sql: str, params: list | None = None) -> pl.DataFrame:
    """Run a parameterised query and return it as Polars (through Arrow, no copy to pandas)."""
    table = con.sql(sql, params=params or None).to_arrow_table()
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    return frame


@dataclass(frozen=True)
class RunRecord:
    """One audit run's row in ``runs`` (times are naive UTC; ``config`` is stored as sorted JSON)."""

    run_id: str
    benchmark: str
    flow_run_id: str | None
    status: str
    started_at: dt.datetime
    finished_at: dt.datetime | None
    config: dict
    run_dir: str | None = None
    n_models: int | None = None
    n_items: int | None = None
    error: str | None = None

    def row(self) -> list:
        """The values in the column order of ``runs``."""
        return [self.run_id, self.benchmark, self.flow_run_id, self.status, self.started_at, self.finished_at,
                self.run_dir, self.n_models, self.n_items, json.dumps(self.config, sort_keys=True), self.error]


def record_run(con, run: RunRecord, results: pl.DataFrame | None = None) -> None:
    """Record one audit run (and its per-model intervals, ``results``) in a single transaction.

    Recording a run id again replaces its row (a retried task, or a completed run whose
    publication failed afterwards and is recorded as failed).
    """
    with transaction(con):
        con.execute("DELETE FROM run_results WHERE run_id = ?", [run.run_id])
        con.execute("DELETE FROM runs WHERE run_id = ?", [run.run_id])
        con.execute("INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", run.row())
        if results is not None and results.height:
            con.register("_results", results.to_arrow())
            con.execute(
                "INSERT INTO run_results SELECT run_id, benchmark, model, metric, method, estimate, lower, upper, "
                "half_width, alpha FROM _results")
            con.unregister("_results")


def list_runs(con, benchmark: str | None = None) -> pl.DataFrame:
    return query_pl(con, """
        SELECT run_id, benchmark, status, strftime(started_at, '%Y-%m-%dT%H:%M:%SZ') AS started_at,
               strftime(finished_at, '%Y-%m-%dT%H:%M:%SZ') AS finished_at, n_models, n_items, run_dir, flow_run_id, error
        FROM runs WHERE ? IS NULL OR benchmark = ? ORDER BY started_at, run_id""", [benchmark, benchmark])


def get_run(con, run_id: str) -> dict | None:
    rows = list_runs(con).filter(pl.col("run_id") == run_id).to_dicts()
    return rows[0] if rows else None


# --- per-benchmark settings (the default variant) ------------------------------------------
# The table is created on first use (tasks/store/schema.py), so stores that never set one are
# unchanged; a reader of an older store finds no table and no setting.


def get_default_variant(con, benchmark: str) -> str | None:
    """The variant set as ``benchmark``'s default, or None when none was set."""
    if not schema.has_tables(con, "benchmark_settings"):
        return None
    rows = con.execute("SELECT default_variant FROM benchmark_settings WHERE benchmark = ?", [benchmark]).fetchall()
    return rows[0][0] if rows else None


def set_default_variant(con, benchmark: str, variant: str | None) -> None:
    """Store (or, with None, clear) the variant every command uses for ``benchmark`` when none is given."""
    with transaction(con):
        schema.ensure_tables(con, "benchmark_settings")
        con.execute("DELETE FROM benchmark_settings WHERE benchmark = ?", [benchmark])
        if variant is not None:
            con.execute("INSERT INTO benchmark_settings VALUES (?, ?, current_timestamp)", [benchmark, variant])
