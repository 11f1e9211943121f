"""The items a benchmark has in the store (table ``items``): what a subset or a plan is drawn from."""

from __future__ import annotations

import polars as pl

from benchcert.tasks.store.connection import query_pl

__all__ = ["benchmark_items", "benchmarks_with_items", "item_count"]


def benchmark_items(con, benchmark: str) -> pl.DataFrame:
    """Every item of the benchmark in the store (item_id, subject, domain), sorted by item_id."""
    return query_pl(con, "SELECT DISTINCT item_id, subject, domain FROM items WHERE benchmark = ? ORDER BY item_id",
                    [benchmark])


def benchmarks_with_items(con) -> list[str]:
    """The benchmarks with items in the store, sorted."""
    return [r[0] for r in con.execute("SELECT DISTINCT benchmark FROM items ORDER BY 1").fetchall()]


def item_count(con, benchmark: str) -> int:
    """How many distinct items the benchmark has in the store (0 if empty or unknown)."""
    return int(con.execute("SELECT count(DISTINCT item_id) FROM items WHERE benchmark = ?",
                           [benchmark]).fetchall()[0][0])
