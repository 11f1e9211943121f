"""Predicted option probabilities kept beside the responses (table ``option_probs``): the read
behind the calibration analysis and ``benchcert gof`` (tasks/gof/).

The table is made by the first ingest that carries probabilities; a store without it has none.
Its ``label`` column (the correct option) came later (``COLUMN_MIGRATIONS`` in
tasks/store/schema.py): a store that never wrote probabilities since reads every label as unknown.
"""

from __future__ import annotations

import polars as pl

from benchcert.tasks.store import schema
from benchcert.tasks.store.connection import query_pl

__all__ = ["PROBS_SCHEMA", "load_option_probs"]

#: One row per (model, item): the item's subject and domain, the replicate read, the probabilities
#: and the correct option (null: not known).
PROBS_SCHEMA = {"model": pl.String, "item_id": pl.String, "subject": pl.String, "domain": pl.String,
                "replicate": pl.Int64, "probs": pl.List(pl.Float64), "label": pl.Int64}

# The one row of each (model, item): the lowest replicate logged.
_READ = """
    SELECT o.model, o.item_id, i.subject, i.domain, o.replicate, o.probs, CAST(o.label AS BIGINT) AS label
    FROM option_probs o JOIN items i ON i.benchmark = o.benchmark AND i.item_id = o.item_id
    WHERE o.benchmark = ? AND o.variant = ?
    QUALIFY row_number() OVER (PARTITION BY o.model, o.item_id ORDER BY o.replicate) = 1
    ORDER BY o.model, o.item_id"""
_READ_UNLABELLED = _READ.replace("CAST(o.label AS BIGINT)", "CAST(NULL AS BIGINT)")


def load_option_probs(con, benchmark: str, *, variant: str | None = None,
                      models: list[str] | None = None) -> tuple[pl.DataFrame, str | None]:
    """Option probabilities of one benchmark and variant, one row per (model, item).

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
        The store.
    benchmark : str
        The benchmark.
    variant : str, optional
        The prompt variant; None: the only one stored, else the base variant ``""``, else the first.
    models : list of str, optional
        Keep only these models (None: every model).

    Returns
    -------
    tuple of polars.DataFrame and str or None
        The rows (:data:`PROBS_SCHEMA`) and the variant read (None when the benchmark has no
        probabilities).  A store without the table gives an empty frame.
    """
    empty = pl.DataFrame(schema=PROBS_SCHEMA)
    if not schema.has_tables(con, "option_probs"):
        return empty, variant
    if variant is None:
        found = [r[0] for r in con.execute("SELECT DISTINCT variant FROM option_probs WHERE benchmark = ? "
                                           "ORDER BY variant", [benchmark]).fetchall()]
        variant = found[0] if len(found) == 1 else ("" if "" in found else (found[0] if found else None))
    if variant is None:
        return empty, None
    frame = query_pl(con, _READ if schema.has_column(con, "option_probs", "label") else _READ_UNLABELLED,
                     [benchmark, variant])
    frame = frame.cast({k: v for k, v in PROBS_SCHEMA.items()})
    if models is not None:
        frame = frame.filter(pl.col("model").is_in(models))
    return frame, variant
