"""Suites (table ``suites``) and recorded suite verdicts (table ``suite_verdicts``): the SQL of
tasks/compare/suite_store.py and ``benchcert suite``.

Both tables are made on first use (:func:`~benchcert.tasks.store.schema.ensure_tables`); a store
that never defined a suite has neither, and reads find nothing.
"""

from __future__ import annotations

import polars as pl

from benchcert.tasks.store import schema
from benchcert.tasks.store.connection import query_pl, transaction

__all__ = ["define_suite", "read_suite", "list_suites", "delete_suite", "shared_benchmarks",
           "record_suite_verdict", "read_suite_verdicts", "model_names"]


def define_suite(con, name: str, benchmarks: list[str], weights: list[float]) -> None:
    """Store suite ``name`` (replacing a suite of that name), its benchmarks in order with their weights."""
    with transaction(con):
        schema.ensure_tables(con, "suites")
        con.execute("DELETE FROM suites WHERE suite = ?", [name])
        con.executemany("INSERT INTO suites VALUES (?, ?, ?, ?, current_timestamp)",
                        [[name, i, b, float(w)] for i, (b, w) in enumerate(zip(benchmarks, weights))])


def read_suite(con, name: str) -> pl.DataFrame:
    """The suite's benchmarks (position, benchmark, weight, defined_at) in order; empty when unknown."""
    if not schema.has_tables(con, "suites"):
        return pl.DataFrame(schema={"position": pl.Int32, "benchmark": pl.String, "weight": pl.Float64,
                                    "defined_at": pl.Datetime})
    return query_pl(con, "SELECT position, benchmark, weight, defined_at FROM suites WHERE suite = ? "
                         "ORDER BY position", [name])


def list_suites(con) -> pl.DataFrame:
    """Every stored suite: name, number of benchmarks, when it was defined."""
    if not schema.has_tables(con, "suites"):
        return pl.DataFrame(schema={"suite": pl.String, "n_benchmarks": pl.Int64, "defined_at": pl.Datetime})
    return query_pl(con, "SELECT suite, count(*) AS n_benchmarks, max(defined_at) AS defined_at FROM suites "
                         "GROUP BY suite ORDER BY suite")


def delete_suite(con, name: str) -> int:
    """Remove suite ``name``; the number of its benchmarks removed (0 when there was none)."""
    if not schema.has_tables(con, "suites"):
        return 0
    with transaction(con):
        n = con.execute("SELECT count(*) FROM suites WHERE suite = ?", [name]).fetchall()[0][0]
        con.execute("DELETE FROM suites WHERE suite = ?", [name])
    return int(n)


def shared_benchmarks(con, models: list[str]) -> list[str]:
    """The benchmarks on which every one of ``models`` has responses, sorted (``--suite all``)."""
    rows = con.execute("""
        SELECT m.benchmark FROM models m
        WHERE m.model IN (SELECT unnest(?::VARCHAR[]))
          AND EXISTS (SELECT 1 FROM response_codes r WHERE r.model_id = m.model_id)
        GROUP BY m.benchmark HAVING count(DISTINCT m.model) = ?
        ORDER BY 1""", [list(models), len(set(models))]).fetchall()
    return [r[0] for r in rows]


def record_suite_verdict(con, row: dict, document) -> int:
    """Record the next look of a suite verdict (``row``: the ``suite_verdicts`` columns but ``look``,
    ``recorded_at`` and ``document``; ``document(look)``: the look's JSON text); the look number recorded."""
    with transaction(con):
        schema.ensure_tables(con, "suite_verdicts")
        look = con.execute("SELECT coalesce(max(look), 0) + 1 FROM suite_verdicts WHERE suite = ? AND baseline = ? "
                           "AND candidate = ?", [row["suite"], row["baseline"], row["candidate"]]).fetchall()[0][0]
        con.execute("INSERT INTO suite_verdicts VALUES (?, ?, ?, ?, current_timestamp, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [row["suite"], row["baseline"], row["candidate"], look, row["alpha"], row["question"],
                     row["regressed_somewhere"], row["n_improved"], row["n_regressed"], row["score_gap"],
                     row["score_lower"], row["score_upper"], row["score_verdict"], document(int(look))])
    return int(look)


def read_suite_verdicts(con, suite: str, baseline: str | None = None) -> pl.DataFrame:
    """The recorded looks of ``suite`` (against ``baseline`` when given), by candidate and look."""
    if not schema.has_tables(con, "suite_verdicts"):
        return pl.DataFrame()
    return query_pl(con, "SELECT * FROM suite_verdicts WHERE suite = ? AND (? IS NULL OR baseline = ?) "
                         "ORDER BY candidate, look", [suite, baseline, baseline])


def model_names(con) -> list[str]:
    """Every model the store holds responses of (any benchmark), sorted (``compare --series``)."""
    rows = con.execute("SELECT DISTINCT m.model FROM models m WHERE EXISTS "
                       "(SELECT 1 FROM response_codes r WHERE r.model_id = m.model_id) ORDER BY 1").fetchall()
    return [r[0] for r in rows]
