"""One file's rows while ingest checks them: the temporary tables of an ingest, inside its transaction.

A file's rows (or a run of small files', each with its source id) are kept either in
``response_codes`` itself (``direct``: the benchmark has nothing stored, so nothing stored can
contradict them) or in the temporary ``_stage``; :class:`FileRows` names them either way, as one
SQL relation and its parameters, so every check below, and the store's one write
(:mod:`benchcert.tasks.store.ingest_write`), reads the same rows wherever they are.  The
temporary tables (``_stage``, ``_dup_lines``, ``_dups``, ``_stage_probs``) and the registered
frames (``_stage_items``) live for one file (or run) and are dropped by :func:`drop_staging`.
Every value is a bound parameter; table and column names come from the fixed names of this module.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import polars as pl

from benchcert.tasks.store import schema
from benchcert.tasks.store.connection import query_pl

_KEY = "model_id, item_key, variant_id, replicate"
_TEMP_TABLES = ("_stage", "_dup_lines", "_dups", "_stage_probs")


@dataclass(frozen=True)
class FileRows:
    """Where one file's rows are kept while they are checked, inside the transaction.

    ``direct``: rows go straight into ``response_codes`` (the benchmark has nothing stored);
    otherwise into the temporary ``_stage``. ``sql``/``params`` name them either way.
    """

    source_id: int
    direct: bool
    sql: str
    params: list

    @property
    def table(self) -> str:
        return "response_codes" if self.direct else "_stage"


def file_rows(con, source_id: int, *, direct: bool, sources: int = 1) -> FileRows:
    """The file's rows: this source's rows of ``response_codes``, or a new empty ``_stage``.

    ``sources``: the rows of that many files, of the consecutive source ids from ``source_id`` (a
    run of small files stored together).
    """
    if direct and sources > 1:
        return FileRows(source_id, True, "(SELECT * FROM response_codes WHERE source_id BETWEEN ? AND ?)",
                        [source_id, source_id + sources - 1])
    if direct:
        return FileRows(source_id, True, "(SELECT * FROM response_codes WHERE source_id = ?)", [source_id])
    con.execute("CREATE OR REPLACE TEMP TABLE _stage (model_id INTEGER, item_key INTEGER, variant_id INTEGER, "
                "replicate BIGINT, score DOUBLE, source_id BIGINT, line BIGINT, human_score DOUBLE, parsed BOOLEAN)")
    return FileRows(source_id, False, "_stage", [])


def append_rows(con, rows: FileRows, batch: pl.DataFrame) -> None:
    """Append a batch of coded rows (response_codes' columns, in order) to the file's rows.

    Through a relation on the Arrow batch, not a registered view and an INSERT statement: DuckDB
    then keeps some 35 MB less of a million rows until the file's transaction ends (measured by
    benchmarks/json_memory.py's short records; the rows stored are the same).
    """
    # The table is one of FileRows' two fixed names.
    con.from_arrow(batch.to_arrow()).insert_into(rows.table)


def drop_staging(con, *, strict: bool) -> None:
    """Drop the file's temporary tables and frames; ``strict=False`` (a shared transaction that
    failed): errors are left to the caller's rollback, which drops them."""
    try:
        for t in _TEMP_TABLES:
            con.execute(f"DROP TABLE IF EXISTS {t}")  # fixed names, not values
        con.unregister("_stage_items")
    except duckdb.Error:
        if strict:
            raise


def key_rows(con, rows: FileRows) -> pl.DataFrame:
    """Every row's key and line (read back only when some key hash repeats)."""
    return query_pl(con, f"SELECT {_KEY}, line FROM {rows.sql}", rows.params)


def mark_repeated_keys(con, rows: FileRows, lines: pl.DataFrame) -> int:
    """Keep aside (``_dups``) the keys that the rows at ``lines`` give more than once; returns how many."""
    con.register("_dup_lines_view", lines.to_arrow())
    con.execute("CREATE OR REPLACE TEMP TABLE _dup_lines AS SELECT line FROM _dup_lines_view")
    con.unregister("_dup_lines_view")
    con.execute(f"""CREATE OR REPLACE TEMP TABLE _dups AS
        SELECT model_id, item_key, variant_id, replicate, count(*) AS n,
               min(score) <> max(score) AS conflicting,
               count(DISTINCT human_score) > 1 AS human_conflicting,
               count(DISTINCT parsed) > 1 AS parsed_conflicting
        FROM {rows.sql}
        WHERE line IN (SELECT line FROM _dup_lines)
        GROUP BY model_id, item_key, variant_id, replicate HAVING count(*) > 1""", rows.params)
    return con.execute("SELECT count(*) FROM _dups").fetchall()[0][0]


def repeated_key_conflicts(con, rows: FileRows) -> pl.DataFrame:
    """Rows whose key the file gives again with another score (``field`` score), human score or parse flag."""
    return query_pl(con, f"""
        SELECT s.line, s.model_id, s.item_key, s.variant_id, s.replicate,
               CASE WHEN d.conflicting THEN 'score' WHEN d.human_conflicting THEN 'human_score' ELSE 'parsed' END
                   AS field
        FROM {rows.sql} s JOIN (SELECT * FROM _dups WHERE conflicting OR human_conflicting OR parsed_conflicting) d
        USING (model_id, item_key, variant_id, replicate) ORDER BY s.line""", rows.params)


def stage_items(con, items: pl.DataFrame) -> None:
    """The file's distinct (item, subject, domain) triples, as ``_stage_items`` for the item checks."""
    # Text as Arrow string views: Polars hands its buffers over as they are, where the default
    # (large strings) copies every item's text once more (benchmarks/json_memory.py).
    con.register("_stage_items", items.to_arrow(compat_level=pl.CompatLevel.newest()))


def split_item_rejects(con, rows: FileRows) -> list[tuple]:
    """(line, field, reason) of every row of an item given several subject/domain pairs in the file."""
    return con.execute(f"""
        SELECT s.line, 'subject/domain' AS field,
               'item ' || c.item_id || ' is given ' || c.n || ' different subject/domain pairs in this file' AS reason
        FROM {rows.sql} s JOIN (
            SELECT item_key, any_value(item_id) AS item_id, count(DISTINCT (subject, domain)) AS n
            FROM _stage_items GROUP BY item_key HAVING count(DISTINCT (subject, domain)) > 1) c
        USING (item_key)""", rows.params).fetchall()


def drop_lines(con, rows: FileRows, lines: pl.DataFrame) -> None:
    """Take the rows at ``lines`` (a frame with a ``line`` column) out of the file's rows."""
    con.register("_bad_lines", lines.to_arrow())
    try:
        con.execute(f"DELETE FROM {rows.table} WHERE source_id = ? AND line IN (SELECT line FROM _bad_lines)",
                    [rows.source_id])
    finally:
        con.unregister("_bad_lines")


def keep_sources_before(con, rows: FileRows, source_id: int) -> None:
    """Take the staged rows and items (``_stage_items`` with a ``source_id`` column) of ``source_id``
    and later sources out (a run of files stored together, cut at a file the store contradicts)."""
    if rows.direct:
        raise ValueError("rows: staged in _stage (a benchmark with nothing stored is never cut)")
    con.execute("DELETE FROM _stage WHERE source_id >= ?", [source_id])
    items = query_pl(con, "SELECT * FROM _stage_items WHERE source_id < ?", [source_id])
    con.unregister("_stage_items")
    stage_items(con, items)


def item_keys(con, rows: FileRows) -> pl.Series:
    """The distinct item codes the file's rows use."""
    return query_pl(con, f"SELECT DISTINCT item_key FROM {rows.sql}", rows.params)["item_key"]


def count_rows(con, rows: FileRows) -> int:
    """How many rows the file has staged."""
    return con.execute(f"SELECT count(*) FROM {rows.sql}", rows.params).fetchall()[0][0]


def drop_repeats(con, rows: FileRows) -> None:
    """Of each key in ``_dups``, keep the row at the first line only."""
    con.execute(f"""DELETE FROM {rows.table} WHERE source_id = ? AND line IN (
        SELECT line FROM {rows.sql} s SEMI JOIN _dups USING (model_id, item_key, variant_id, replicate)
        QUALIFY row_number() OVER (PARTITION BY model_id, item_key, variant_id, replicate ORDER BY line) > 1)""",
                [rows.source_id] + rows.params)


def stage_option_probs(con, frame: pl.DataFrame, first: bool) -> None:
    """Keep a batch's option probabilities (``line``, ``probs``, ``label``) aside until the file is accepted."""
    if first:
        con.execute("CREATE OR REPLACE TEMP TABLE _stage_probs (line BIGINT, probs DOUBLE[], label INTEGER)")
    con.register("_probs_batch", frame.to_arrow())
    try:
        con.execute("INSERT INTO _stage_probs SELECT line, probs, label FROM _probs_batch")
    finally:
        con.unregister("_probs_batch")


def insert_option_probs(con, rows: FileRows) -> int:
    """Inside the ingest transaction, after the responses: probabilities of the rows this source gave.

    ``rows`` are the file's accepted rows as codes, so a response that was already stored from
    another file still gets the probabilities this file gives it.  The table is created here,
    on first use (tasks/store/schema.py; older stores gain its ``label`` column), so stores
    without probabilities never have it.  Rows whose key is already in the table keep their
    first probabilities, like responses.
    """
    schema.ensure_tables(con, "option_probs")
    return con.execute(f"""
        INSERT INTO option_probs (benchmark, model, item_id, variant, replicate, probs, source_id, line, label)
        SELECT k.benchmark, k.model, k.item_id, k.variant, k.replicate, k.probs, ?, k.line, k.label
        FROM (SELECT m.benchmark, m.model, i.item_id, v.variant, s.replicate, p.probs, s.line, p.label
              FROM {rows.sql} s JOIN _stage_probs p USING (line)
              JOIN models m ON m.model_id = s.model_id
              JOIN items i ON i.item_key = s.item_key
              JOIN variants v ON v.variant_id = s.variant_id) k
        ANTI JOIN option_probs o USING (benchmark, model, item_id, variant, replicate)""",
                       [rows.source_id, *rows.params]).fetchall()[0][0]
