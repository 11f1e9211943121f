"""The 'store unchanged' oracle shared by the ingest and hardening tests."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from polars.testing import assert_frame_equal

from benchcert.tasks.store.connection import open_store, query_pl

TABLES = ("responses", "response_codes", "models", "variants", "items", "sources", "rejects", "runs", "run_results")


def snapshot(db: Path) -> dict[str, pl.DataFrame]:
    """Every row of every table, in a canonical order: the 'store unchanged' oracle."""
    with open_store(db, write=False) as con:
        return {t: query_pl(con, f"SELECT * FROM {t}").sort(pl.all()) for t in TABLES}


def assert_unchanged(before: dict, db: Path) -> None:
    after = snapshot(db)
    for t in TABLES:
        assert_frame_equal(before[t], after[t], check_row_order=True)
