"""Recorded subsets (tables ``subsets`` and ``subset_items``): the SQL of tasks/subsample/subsets.py.

The tables are made on a subset's first recording (:func:`~benchcert.tasks.store.schema.ensure_tables`);
a store that never recorded one has neither, and reads find nothing.
"""

from __future__ import annotations

import datetime as dt

import polars as pl

from benchcert.tasks.store import schema
from benchcert.tasks.store.connection import query_pl
from benchcert.tasks.store.recorded import RecordTables, record_once

__all__ = ["SUBSET_TABLES", "SUBSET_COLUMNS", "record_subset", "read_subsets"]

#: Created on the first recorded subset (tasks/store/schema.py).
SUBSET_TABLES = ("subsets", "subset_items")

#: The columns of a subset's row in ``subsets``, in the table's order.
SUBSET_COLUMNS = ("subset_id", "benchmark", "n_items", "n_benchmark", "seed", "stratified", "strata", "created_at")

_RECORD = RecordTables(SUBSET_TABLES[0], "subset_id", SUBSET_COLUMNS, SUBSET_TABLES[1], ("item_id", "subject", "domain"))


def record_subset(con, head: dict, items: pl.DataFrame) -> dt.datetime:
    """Record a subset once, in one transaction (:func:`~benchcert.tasks.store.recorded.record_once`):
    its row ``head``, a value for each of :data:`SUBSET_COLUMNS` (``strata`` as JSON text or None),
    and its ``items`` (item_id, subject, domain). A subset id recorded before keeps its row, items
    and time (the same draw is one subset); the ``created_at`` stored is returned."""
    return record_once(con, _RECORD, head, items)


def read_subsets(con, benchmark: str) -> tuple[pl.DataFrame, pl.DataFrame] | None:
    """The benchmark's recorded subsets.

    Returns
    -------
    tuple of polars.DataFrame, or None
        The subsets' rows (subset_id, n_items, n_benchmark, seed, stratified, strata, and
        ``created_at`` as ISO text; oldest first) and their items (subset_id, item_id, subject,
        domain; by subset and item); None when the store never recorded a subset.
    """
    if not schema.has_tables(con, *SUBSET_TABLES):
        return None
    heads = query_pl(con, "SELECT subset_id, n_items, n_benchmark, seed, stratified, strata, "
                          "strftime(created_at, '%Y-%m-%dT%H:%M:%SZ') AS created_at FROM subsets "
                          "WHERE benchmark = ? ORDER BY created_at, subset_id", [benchmark])
    if heads.height == 0:
        return heads, pl.DataFrame(schema={"subset_id": pl.String, "item_id": pl.String, "subject": pl.String,
                                           "domain": pl.String})
    items = query_pl(con, "SELECT si.subset_id, si.item_id, si.subject, si.domain FROM subset_items si "
                          "JOIN subsets s USING (subset_id) WHERE s.benchmark = ? ORDER BY si.subset_id, si.item_id",
                     [benchmark])
    return heads, items
