"""Recorded checkpoint verdicts (tables ``verdicts`` and ``verdict_items``): the SQL of tasks/compare/verdicts.py.

A question is the key (benchmark, variant, baseline, candidate); each recorded look is a row
of ``verdicts``, and ``verdict_items`` is its ledger: each shared item once, with the
difference it had at the look where it entered. The tables are made on the first recorded
look (:func:`~benchcert.tasks.store.schema.ensure_tables`, with the columns added since); a
store that never recorded one has neither, and reads find nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from benchcert.tasks.store import schema
from benchcert.tasks.store.connection import query_pl, transaction

__all__ = ["VERDICT_TABLES", "LOOK_COLUMNS", "LEDGER_SCHEMA", "read_question_rows", "record_look"]

#: Created on the first recorded look (tasks/store/schema.py, with the columns added since).
VERDICT_TABLES = ("verdicts", "verdict_items")

#: The columns a look's row fills, in the order :func:`record_look` takes its values.
LOOK_COLUMNS = ("benchmark", "variant", "baseline", "candidate", "look", "recorded_at", "alpha", "first_look_share",
                "verdict", "decided_by", "decided_at_look", "fixed_verdict", "method", "gap", "lower", "upper", "se",
                "p_value", "p_exact", "hoeffding_lower", "hoeffding_upper", "mde", "power", "n_shared",
                "n_only_baseline", "n_only_candidate", "n_excluded", "n_new", "n_sequential", "log_e_improved",
                "log_e_regressed", "anytime_p", "cs_lower", "cs_upper", "first_p_value", "first_gap", "question",
                "estimand", "first_method", "first_lower", "first_upper")

#: A question's ledger as read back.
LEDGER_SCHEMA = {"item_id": pl.String, "look": pl.Int64, "d": pl.Float64}

_KEY = "benchmark = ? AND variant = ? AND baseline = ? AND candidate = ?"
_INSERT_LOOK = (f"INSERT INTO verdicts ({', '.join(LOOK_COLUMNS)}) "
                f"VALUES ({', '.join('?' * len(LOOK_COLUMNS))})")


def read_question_rows(con, key: Sequence[str]) -> tuple[pl.DataFrame, pl.DataFrame] | None:
    """What the store holds about one question.

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
        The store.
    key : sequence of str
        The question: (benchmark, variant, baseline, candidate).

    Returns
    -------
    tuple of polars.DataFrame, or None
        Its recorded looks (every column of ``verdicts``, oldest first) and its ledger
        (:data:`LEDGER_SCHEMA`, by look and item); None when the store never recorded a look.
    """
    if not schema.has_tables(con, *VERDICT_TABLES):
        return None
    key = list(key)
    return (query_pl(con, f"SELECT * FROM verdicts WHERE {_KEY} ORDER BY look", key),
            query_pl(con, f"SELECT item_id, look, d FROM verdict_items WHERE {_KEY} ORDER BY look, item_id", key))


def record_look(con, row: Sequence, items: pl.DataFrame | None = None) -> None:
    """Add a look and the items it brings to the ledger, in one transaction (the tables on first use).

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
        The store, open for writing.
    row : sequence
        The look's values, in :data:`LOOK_COLUMNS` order.
    items : polars.DataFrame, optional
        The items entering the ledger at this look: benchmark, variant, baseline, candidate,
        item_id, look, d (none: the look adds no item).

    Raises
    ------
    ValueError
        ``row`` does not hold one value per column.
    """
    if len(row) != len(LOOK_COLUMNS):
        raise ValueError(f"a look's row has {len(LOOK_COLUMNS)} values; got {len(row)}")
    with transaction(con):
        schema.ensure_tables(con, *VERDICT_TABLES)
        con.execute(_INSERT_LOOK, list(row))
        if items is not None and items.height:
            con.register("_verdict_items", items.to_arrow())
            try:
                con.execute("INSERT INTO verdict_items SELECT benchmark, variant, baseline, candidate, item_id, "
                            "look, d FROM _verdict_items")
            finally:
                con.unregister("_verdict_items")
