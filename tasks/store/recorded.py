"""A record written once: a head row and its detail rows in one transaction (the rule of recorded
subsets and recorded plans, tasks/store/subsets.py and tasks/store/plans.py).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import polars as pl

from benchcert.tasks.store import schema
from benchcert.tasks.store.connection import transaction

__all__ = ["RecordTables", "record_once"]


@dataclass(frozen=True)
class RecordTables:
    """Where a kind of record is stored.

    Parameters
    ----------
    head : str
        The table of the records' rows, with a ``created_at`` column.
    key : str
        The id column of ``head``, repeated as the first column of ``details``.
    columns : tuple of str
        ``head``'s columns, in the table's order.
    details : str
        The table of each record's detail rows.
    detail_columns : tuple of str
        ``details``' columns after ``key``, in the table's order.
    """

    head: str
    key: str
    columns: tuple[str, ...]
    details: str
    detail_columns: tuple[str, ...]


def record_once(con, tables: RecordTables, head: dict, rows: pl.DataFrame) -> dt.datetime:
    """Record ``head`` and its ``rows`` once, in one transaction (the tables on first use).

    An id recorded before keeps its row, detail rows and time: the same record is stored once.

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
        The store, open for writing.
    tables : RecordTables
        The kind of record.
    head : dict
        The record's row: a value for each of ``tables.columns``.
    rows : polars.DataFrame
        The detail rows, with the columns ``tables.detail_columns`` (the id is added).

    Returns
    -------
    datetime.datetime
        The ``created_at`` stored: ``head``'s, or the earlier recording's.
    """
    schema.ensure_tables(con, tables.head, tables.details)
    key = head[tables.key]
    with transaction(con):
        exists = con.execute(f"SELECT created_at FROM {tables.head} WHERE {tables.key} = ?", [key]).fetchall()
        if exists:
            return exists[0][0]
        marks = ", ".join("?" * len(tables.columns))
        con.execute(f"INSERT INTO {tables.head} VALUES ({marks})", [head[c] for c in tables.columns])
        view = f"_{tables.details}_rows"
        con.register(view, rows.with_columns(pl.lit(key).alias(tables.key))
                     .select(tables.key, *tables.detail_columns).to_arrow())
        try:
            con.execute(f"INSERT INTO {tables.details} SELECT * FROM {view}")
        finally:
            con.unregister(view)
    return head["created_at"]
