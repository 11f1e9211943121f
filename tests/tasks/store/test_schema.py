"""The store's schema (tasks/store/schema.py): one module defines every table; a new store has the
core tables only, feature tables appear on first use, and older tables gain the columns added since."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest

from benchcert.tasks.store import schema
from benchcert.tasks.store.connection import StoreError, open_store

ROOT = Path(__file__).resolve().parents[3]
CORE = {"meta", "sources", "models", "variants", "response_codes", "items", "rejects", "runs", "run_results"}


def _tables(con) -> set[str]:
    return {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main'").fetchall()}


def _columns(con, table: str) -> list[str]:
    return [r[0] for r in con.execute("SELECT column_name FROM duckdb_columns() WHERE table_name = ? "
                                      "ORDER BY column_index", [table]).fetchall()]


def test_every_table_definition_and_migration_is_in_the_schema_module():
    ddl = re.compile(r"CREATE\s+TABLE|ALTER\s+TABLE|CREATE\s+(OR\s+REPLACE\s+)?VIEW|CREATE\s+SEQUENCE", re.I)
    found = [f"{p.relative_to(ROOT)}:{no}" for folder in ("flows", "tasks") for p in sorted((ROOT / folder).rglob("*.py"))
             for no, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if ddl.search(line) and p != ROOT / "tasks" / "store" / "schema.py"]
    assert not found, f"table definitions outside tasks/store/schema.py: {found}"


def test_a_new_store_has_the_core_tables_and_a_feature_table_appears_on_first_use(tmp_path):
    db = tmp_path / "s.duckdb"
    with open_store(db, write=True) as con:
        assert _tables(con) == CORE and set(schema.TABLES) > CORE
        assert schema.stored_version(con) == schema.STORE_VERSION
        assert schema.has_tables(con, "meta", "runs") and not schema.has_tables(con, "runs", "verdicts")
        schema.ensure_tables(con, "subsets", "subset_items")
        assert _tables(con) == CORE | {"subsets", "subset_items"}
        schema.ensure_tables(con, "subsets")  # again: nothing changes
        assert _tables(con) == CORE | {"subsets", "subset_items"}


def test_a_feature_table_written_before_its_newer_columns_gains_them(tmp_path):
    db = tmp_path / "s.duckdb"
    with open_store(db, write=True) as con:
        schema.ensure_tables(con, "verdicts", "option_probs")
        new = {t: _columns(con, t) for t in ("verdicts", "option_probs")}
        # every column added after the table first shipped, dropped as a store written before had none
        for table, statements in schema.COLUMN_MIGRATIONS.items():
            for stmt in statements:
                con.execute(f"ALTER TABLE {table} DROP COLUMN {stmt.split('IF NOT EXISTS ')[1].split()[0]}")
        schema.ensure_tables(con, "verdicts", "option_probs")
        assert {t: _columns(con, t) for t in ("verdicts", "option_probs")} == new
    assert set(schema.COLUMN_MIGRATIONS) <= set(schema.TABLES)


def test_has_column_sees_a_column_added_since_and_no_column_of_a_missing_table(tmp_path):
    with open_store(tmp_path / "s.duckdb", write=True) as con:
        assert not schema.has_column(con, "option_probs", "label")  # no table yet
        schema.ensure_tables(con, "option_probs")
        assert schema.has_column(con, "option_probs", "label")
        con.execute("ALTER TABLE option_probs DROP COLUMN label")  # as a store written before the column
        assert not schema.has_column(con, "option_probs", "label")
        assert schema.has_column(con, "option_probs", "probs")


def test_a_version_1_store_that_would_lose_responses_is_left_as_it_was(tmp_path):
    db = tmp_path / "v1.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
    con.execute("INSERT INTO meta VALUES ('store_version', '1')")
    con.execute("CREATE TABLE responses (benchmark VARCHAR, model VARCHAR, item_id VARCHAR, variant VARCHAR, "
                "replicate BIGINT, score DOUBLE, source_id BIGINT, line BIGINT)")
    con.execute("CREATE TABLE items (benchmark VARCHAR, item_id VARCHAR, subject VARCHAR, domain VARCHAR, "
                "source_id BIGINT, line BIGINT)")
    con.execute("INSERT INTO responses VALUES ('b', 'm', 'q1', '', 0, 1.0, 1, 2)")  # no item row
    con.close()
    with pytest.raises(StoreError, match="1 response"):
        with open_store(db, write=True):
            pass
    con = duckdb.connect(str(db))
    assert _tables(con) == {"meta", "responses", "items"}
    assert con.execute("SELECT value FROM meta").fetchall() == [("1",)]
    con.close()


def test_the_export_builds_an_empty_table_from_the_schema():
    from benchcert.tasks.store.export import EXPORT_QUERIES, ExportError, _empty_table

    con = duckdb.connect()
    for table in EXPORT_QUERIES:
        _empty_table(con, table)
    assert _tables(con) == set(EXPORT_QUERIES)
    with pytest.raises(ExportError, match="unknown export table"):
        _empty_table(con, "nope")
