"""A file's staged items across batches (tasks/ingest/file_checks.py, StagedItems) and the store's
write setting that keeps a file's uncommitted rows out of memory (issue #39: a million short
records peaked at 387 MB; benchmarks/json_memory.py).

StagedItems compares the text of an item only when the item was staged by an earlier batch;
these tests pin what it keeps: each distinct (item, subject, domain) once, with its first line,
in line order, and an item given a second pair staged again (so the ingest reports it).
"""

from __future__ import annotations

import polars as pl

from benchcert.tasks.ingest.file_checks import StagedItems
from benchcert.tasks.store import staging
from benchcert.tasks.store.connection import ALLOCATOR_BACKGROUND_THREADS, WRITE_BUFFER_ROW_GROUPS, open_store


def _batch(rows: list[tuple[str, int, str, str, int]]) -> pl.DataFrame:
    """(item_id, item_key, subject, domain, line) rows of benchmark ``b``."""
    return pl.DataFrame([("b", i, k, s, d, line) for i, k, s, d, line in rows], orient="row",
                        schema=StagedItems.SCHEMA)


def test_an_item_staged_before_with_the_same_pair_is_not_staged_again():
    items = StagedItems()
    items.add(_batch([("q1", 1, "s1", "d1", 1), ("q2", 2, "s2", "d1", 2)]))
    items.add(_batch([("q3", 3, "s1", "d1", 3), ("q1", 1, "s1", "d1", 4), ("q4", 4, "s2", "d1", 5)]))
    frame = items.frame()
    assert frame["item_id"].to_list() == ["q1", "q2", "q3", "q4"]
    assert frame["line"].to_list() == [1, 2, 3, 5]  # q1 keeps its first line
    assert not items.split_items()


def test_an_item_given_a_second_pair_in_a_later_batch_is_staged_again_in_line_order():
    items = StagedItems()
    items.add(_batch([("q1", 1, "s1", "d1", 1)]))
    items.add(_batch([("q1", 1, "s9", "d1", 2), ("q2", 2, "s2", "d1", 3), ("q1", 1, "s1", "d1", 4)]))
    items.add(_batch([("q2", 2, "s2", "d2", 5), ("q3", 3, "s3", "d3", 6)]))
    frame = items.frame()
    assert frame.select("item_id", "subject", "domain", "line").rows() == [
        ("q1", "s1", "d1", 1), ("q1", "s9", "d1", 2), ("q2", "s2", "d1", 3), ("q2", "s2", "d2", 5),
        ("q3", "s3", "d3", 6)]
    assert items.split_items()


def test_a_write_connection_flushes_each_row_group_of_an_uncommitted_append(tmp_path):
    assert WRITE_BUFFER_ROW_GROUPS == 1
    with open_store(tmp_path / "s.duckdb", write=True) as con:
        value = con.execute("SELECT current_setting('write_buffer_row_group_count')").fetchall()[0][0]
    assert int(value) == WRITE_BUFFER_ROW_GROUPS


def test_each_batch_is_kept_as_it_came_and_handed_to_duckdb_side_by_side(tmp_path):
    # A batch's new triples are appended as their own frame, never copied into a growing one, and
    # DuckDB reads the parts (as Arrow string views) without a concatenated copy (issue #39).
    items = StagedItems()
    items.add(_batch([("q1", 1, "s1", "d1", 1), ("q2", 2, "s2", "d1", 2)]))
    items.add(_batch([("q1", 1, "s1", "d1", 3)]))  # nothing new: no part
    items.add(_batch([("q3", 3, "s1", "d2", 4), ("q1", 1, "s9", "d1", 5)]))
    frame = items.frame()
    assert frame.n_chunks() == 2
    with open_store(tmp_path / "s.duckdb", write=True) as con:
        staging.stage_items(con, frame)
        staged = con.execute("SELECT item_id, item_key, subject, domain, line FROM _stage_items ORDER BY line").fetchall()
        staging.drop_staging(con, strict=True)
    assert staged == [("q1", 1, "s1", "d1", 1), ("q2", 2, "s2", "d1", 2), ("q3", 3, "s1", "d2", 4),
                      ("q1", 1, "s9", "d1", 5)]
    assert items.split_items()


def test_a_write_connection_has_duckdbs_allocator_purge_in_the_background(tmp_path):
    assert ALLOCATOR_BACKGROUND_THREADS is True
    with open_store(tmp_path / "s.duckdb", write=True) as con:
        value = con.execute("SELECT current_setting('allocator_background_threads')").fetchall()[0][0]
    assert value is True or str(value).lower() == "true"
