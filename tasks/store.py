"""The DuckDB store: one file on disk holding responses, items, sources, rejects and runs.

DuckDB lets one process write a database file at a time, and a second process that opens
the file fails at once.  Every benchcert process therefore takes an exclusive file lock
(``<db>.lock``) before it opens the store and releases it as soon as it is done, so two
ingests (or an ingest and an audit) wait for each other instead of failing; after
``lock_timeout`` seconds the waiter gives up with :class:`StoreLockedError`.

The responses table has no declared primary key: a DuckDB index over five text columns
costs more memory than the 10-million-row target allows.  Uniqueness of
(benchmark, model, item_id, variant, replicate) is enforced by the ingest path instead,
which only ever inserts keys it has anti-joined against the table while holding the lock.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

import duckdb
import polars as pl
from filelock import FileLock, Timeout

STORE_VERSION = "1"
#: DuckDB's buffer pool per process: big scans and joins spill to disk beyond this, which keeps
#: a 10-million-row ingest's peak memory down at little cost (measured in benchmarks/).
DUCKDB_MEMORY_LIMIT = "1GB"
DEFAULT_LOCK_TIMEOUT = 600.0

DDL = [
    "CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR)",
    "CREATE SEQUENCE IF NOT EXISTS source_ids START 1",
    """CREATE TABLE IF NOT EXISTS sources (
        source_id BIGINT PRIMARY KEY,
        benchmark VARCHAR,
        path VARCHAR NOT NULL,
        sha256 VARCHAR NOT NULL,
        format VARCHAR NOT NULL,
        config VARCHAR NOT NULL,
        rows_read BIGINT NOT NULL,
        rows_accepted BIGINT NOT NULL,
        rows_added BIGINT NOT NULL,
        rows_rejected BIGINT NOT NULL,
        status VARCHAR NOT NULL,
        ingested_at TIMESTAMP NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS responses (
        benchmark VARCHAR NOT NULL,
        model VARCHAR NOT NULL,
        item_id VARCHAR NOT NULL,
        variant VARCHAR NOT NULL,
        replicate BIGINT NOT NULL,
        score DOUBLE NOT NULL,
        source_id BIGINT NOT NULL,
        line BIGINT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS items (
        benchmark VARCHAR NOT NULL,
        item_id VARCHAR NOT NULL,
        subject VARCHAR NOT NULL,
        domain VARCHAR NOT NULL,
        source_id BIGINT NOT NULL,
        line BIGINT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS rejects (
        source_id BIGINT NOT NULL,
        path VARCHAR NOT NULL,
        line BIGINT,
        field VARCHAR NOT NULL,
        reason VARCHAR NOT NULL,
        raw VARCHAR)""",
    """CREATE TABLE IF NOT EXISTS runs (
        run_id VARCHAR PRIMARY KEY,
        benchmark VARCHAR NOT NULL,
        flow_run_id VARCHAR,
        status VARCHAR NOT NULL,
        started_at TIMESTAMP NOT NULL,
        finished_at TIMESTAMP,
        run_dir VARCHAR,
        n_models BIGINT,
        n_items BIGINT,
        config VARCHAR,
        error VARCHAR)""",
    """CREATE TABLE IF NOT EXISTS run_results (
        run_id VARCHAR NOT NULL,
        benchmark VARCHAR NOT NULL,
        model VARCHAR NOT NULL,
        metric VARCHAR NOT NULL,
        method VARCHAR NOT NULL,
        estimate DOUBLE,
        lower DOUBLE,
        upper DOUBLE,
        half_width DOUBLE,
        alpha DOUBLE)""",
]


class StoreError(RuntimeError):
    """The store cannot be used (locked, missing, wrong version)."""


class StoreLockedError(StoreError):
    pass


def lock_path(db: Path) -> Path:
    return db.with_name(db.name + ".lock")


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
        try:
            con = duckdb.connect(str(db), read_only=False)
        except duckdb.IOException as exc:
            raise StoreLockedError(f"{db}: the database file is in use by another program: {exc}") from None
        try:
            con.execute("SET preserve_insertion_order = false")
            con.execute("SET memory_limit = ?", [DUCKDB_MEMORY_LIMIT])
            if write:
                _ensure_schema(con, db)
            else:
                _check_version(con, db)
            yield con
        finally:
            con.close()
    finally:
        lock.release()


def _ensure_schema(con: duckdb.DuckDBPyConnection, db: Path) -> None:
    for stmt in DDL:
        con.execute(stmt)
    rows = con.execute("SELECT value FROM meta WHERE key = 'store_version'").fetchall()
    row = rows[0] if rows else None
    if row is None:
        con.execute("INSERT INTO meta VALUES ('store_version', ?)", [STORE_VERSION])
    elif row[0] != STORE_VERSION:
        raise StoreError(f"{db}: store version {row[0]} is not supported (expected {STORE_VERSION})")


def _check_version(con: duckdb.DuckDBPyConnection, db: Path) -> None:
    try:
        rows = con.execute("SELECT value FROM meta WHERE key = 'store_version'").fetchall()
        row = rows[0] if rows else None
    except duckdb.CatalogException:
        raise StoreError(f"{db}: not a benchcert store (no meta table)") from None
    if row is None or row[0] != STORE_VERSION:
        raise StoreError(f"{db}: store version {row and row[0]} is not supported (expected {STORE_VERSION})")


def query_pl(con: duckdb.DuckDBPyConnection, sql: str, params: list | None = None) -> pl.DataFrame:
    """Run a parameterised query and return it as Polars (through Arrow, no copy to pandas)."""
    table = con.sql(sql, params=params or None).to_arrow_table()
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    return frame


def record_run(con, *, run_id: str, benchmark: str, flow_run_id: str | None, status: str, started_at,
               finished_at, config: dict, run_dir: str | None = None, n_models: int | None = None,
               n_items: int | None = None, error: str | None = None, results: pl.DataFrame | None = None) -> None:
    """Record one audit run (and its per-model intervals) in a single transaction."""
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute("INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [run_id, benchmark, flow_run_id, status, started_at, finished_at, run_dir, n_models, n_items,
                     json.dumps(config, sort_keys=True), error])
        if results is not None and results.height:
            con.register("_results", results.to_arrow())
            con.execute(
                "INSERT INTO run_results SELECT run_id, benchmark, model, metric, method, estimate, lower, upper, "
                "half_width, alpha FROM _results")
            con.unregister("_results")
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise


def list_runs(con, benchmark: str | None = None) -> pl.DataFrame:
    return query_pl(con, """
        SELECT run_id, benchmark, status, strftime(started_at, '%Y-%m-%dT%H:%M:%SZ') AS started_at,
               strftime(finished_at, '%Y-%m-%dT%H:%M:%SZ') AS finished_at, n_models, n_items, run_dir, flow_run_id, error
        FROM runs WHERE ? IS NULL OR benchmark = ? ORDER BY started_at, run_id""", [benchmark, benchmark])


def get_run(con, run_id: str) -> dict | None:
    rows = list_runs(con).filter(pl.col("run_id") == run_id).to_dicts()
    return rows[0] if rows else None
