"""Ingest's reads and writes of the stored responses: sources, response codes, items, code tables, rejects.

The queries the ingest pipeline (tasks/ingest/) runs against the store's tables, each with bound
parameters; the rows being checked are kept in the temporary relations of
:mod:`benchcert.tasks.store.staging` (one file's, or a run of small files' stored together), and
:mod:`benchcert.tasks.store.ingest_write` is the one write that calls the inserts below.  Table and column names written into SQL come from the fixed
:class:`~benchcert.tasks.store.codes.Kind` constants and this module's own names, never from a log.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import polars as pl

from benchcert.tasks.store import schema
from benchcert.tasks.store.codes import Kind
from benchcert.tasks.store.connection import query_pl
from benchcert.tasks.store.staging import FileRows

# --- transactions that a policy (one file, a run, --atomic) opens and closes itself ---------------

def begin(con) -> None:
    """Open a transaction that the caller commits or rolls back by its own rule."""
    con.execute("BEGIN TRANSACTION")


def commit(con) -> None:
    con.execute("COMMIT")


def rollback(con) -> None:
    con.execute("ROLLBACK")


@contextlib.contextmanager
def registered(con, name: str, frame: pl.DataFrame) -> Iterator[None]:
    """``frame`` readable as ``name`` (one of this module's fixed names) for the block."""
    con.register(name, frame.to_arrow())
    try:
        yield
    finally:
        con.unregister(name)


# --- sources and their ids ------------------------------------------------------------------

def stored_source(con, sha256: str, config: str) -> int | None:
    """The source id under which this content was ingested with these settings, if any."""
    found = con.execute("SELECT source_id FROM sources WHERE sha256 = ? AND config = ? LIMIT 1",
                        [sha256, config]).fetchall()
    return found[0][0] if found else None


def stored_sources(con, keys: pl.DataFrame) -> dict[int, int]:
    """Position -> source id of the ``keys`` (pos, sha256, config) whose content and settings are stored."""
    with registered(con, "_run_files", keys):
        found = con.execute("""SELECT f.pos, any_value(s.source_id) FROM _run_files f
                               JOIN sources s ON s.sha256 = f.sha256 AND s.config = f.config GROUP BY f.pos""").fetchall()
    return {int(pos): int(sid) for pos, sid in found}


def other_model_names(con, sha256: str, benchmark: str, model: str) -> list[tuple]:
    """(model, source id, path) of the content ``sha256`` stored under a model name other than ``model``."""
    return con.execute("""
        SELECT DISTINCT m.model, src.source_id, src.path
        FROM sources src JOIN response_codes r ON r.source_id = src.source_id
        JOIN models m ON m.model_id = r.model_id
        WHERE src.sha256 = ? AND src.benchmark = ? AND m.model <> ?
        ORDER BY src.source_id LIMIT 3""", [sha256, benchmark, model]).fetchall()


def take_source_ids(con, n: int) -> list[int]:
    """``n`` new source ids, in increasing order."""
    if n == 1:
        return [con.execute("SELECT nextval('source_ids')").fetchall()[0][0]]
    return sorted(r[0] for r in con.execute("SELECT nextval('source_ids') FROM range(?)", [n]).fetchall())


def next_source_id(con) -> int:
    """The source id the next ``nextval('source_ids')`` gives."""
    return con.execute("SELECT coalesce(last_value + 1, start_value) FROM duckdb_sequences() "
                       "WHERE sequence_name = 'source_ids'").fetchall()[0][0]


def give_back_source_ids(con, following: int) -> None:
    """After a rolled-back transaction that took source ids: the next one is ``following`` again.

    A file refused in a store opened for it alone left no trace, not even the id it took (the
    sequence is written only with a commit), so the next file got that id; on a connection shared
    by a command the sequence would have moved on.
    """
    if next_source_id(con) != following:
        schema.restart_source_ids(con, following)


def record_sources(con, frame: pl.DataFrame) -> None:
    """Several ``sources`` rows (a frame of its columns in order)."""
    with registered(con, "_run_sources", frame):
        con.execute("INSERT INTO sources SELECT * FROM _run_sources")


def record_rejects(con, source_id: int, path: str, rejects: pl.DataFrame) -> None:
    """A file's quarantined rows (``line``, ``field``, ``reason``, ``raw``)."""
    with registered(con, "_rejects", rejects):
        con.execute("INSERT INTO rejects SELECT ?, ?, line, field, reason, raw FROM _rejects", [source_id, path])


# --- what is stored of a benchmark ------------------------------------------------------------

def has_models(con, benchmarks: list[str]) -> bool:
    """Whether any of ``benchmarks`` has a stored model (else it has no responses, items or variants)."""
    if len(benchmarks) == 1:
        return bool(con.execute("SELECT count(*) FROM (SELECT 1 FROM models WHERE benchmark = ? LIMIT 1)",
                                [benchmarks[0]]).fetchall()[0][0])
    return bool(con.execute("SELECT count(*) FROM (SELECT 1 FROM models WHERE benchmark IN (SELECT unnest(?)) "
                            "LIMIT 1)", [benchmarks]).fetchall()[0][0])


def insert_codes(con, kind: Kind, new: pl.DataFrame, source_id: int | None,
                 used_by: FileRows | None = None) -> None:
    """New ``kind`` codes (code, benchmark, text).

    ``used_by``: only the codes that these rows use.  ``source_id``: every entry's source; None
    (several files' rows, ``used_by`` given): each code's source is the first whose rows use it,
    the file that named it first.
    """
    with registered(con, "_new_codes", new):
        if source_id is None:
            if used_by is None:
                raise ValueError("used_by: the rows that name the codes, when source_id is None")
            con.execute(f"""INSERT INTO {kind.table} ({kind.code}, benchmark, {kind.text}, source_id)
                SELECT n.code, n.benchmark, n.text, u.source_id FROM _new_codes n
                JOIN (SELECT {kind.code} AS code, min(source_id) AS source_id FROM {used_by.sql} GROUP BY 1) u
                USING (code) ORDER BY n.code""", used_by.params)
            return
        used = f" WHERE code IN (SELECT DISTINCT {kind.code} FROM {used_by.sql})" if used_by else ""
        con.execute(f"""INSERT INTO {kind.table} ({kind.code}, benchmark, {kind.text}, source_id)
            SELECT code, benchmark, text, ? FROM _new_codes{used}""", [source_id] + (used_by.params if used_by else []))


# --- checks of a file's staged rows against the store ---------------------------------------

def stored_model_staged(con) -> bool:
    """Whether some model of ``_stage`` is stored (only then can a staged response be stored already)."""
    return con.execute(
        "SELECT count(*) FROM (SELECT 1 FROM models WHERE model_id IN (SELECT DISTINCT model_id FROM _stage) "
        "LIMIT 1)").fetchall()[0][0] > 0


#: The columns of ``_stage`` and ``response_codes`` a stored-value check may compare, in the order
#: ingest checks them (tasks/store/ingest_write.py).
VALUE_COLUMNS = ("score", "human_score", "parsed")


def contradictions(con, column: str) -> tuple[int, list[tuple]]:
    """Staged rows whose ``column`` (score, human_score or parsed) differs from the stored response's.

    Returns how many, and the first five: model, item, variant, replicate, staged value, line,
    stored value, stored source's path and line.  NULL on either side is no contradiction.
    """
    if column not in VALUE_COLUMNS:
        raise ValueError(f"column: one of {sorted(VALUE_COLUMNS)}, not {column!r}")
    differ = f"r.{column} <> s.{column}"
    first = con.execute(f"""
        SELECT m.model, i.item_id, v.variant, s.replicate, s.{column}, s.line, r.{column}, src.path, r.line
        FROM _stage s JOIN response_codes r USING (model_id, item_key, variant_id, replicate)
        JOIN models m ON m.model_id = s.model_id
        JOIN items i ON i.item_key = s.item_key
        JOIN variants v ON v.variant_id = s.variant_id
        JOIN sources src ON src.source_id = r.source_id
        WHERE {differ} ORDER BY s.line LIMIT 5""").fetchall()
    if not first:
        return 0, []
    n = con.execute(f"""SELECT count(*) FROM _stage s JOIN response_codes r
                        USING (model_id, item_key, variant_id, replicate) WHERE {differ}""").fetchall()[0][0]
    return n, first


def item_contradictions(con) -> list[tuple]:
    """The first five staged items (``_stage_items``) whose subject/domain differ from the stored item's:
    item, subject, domain, line, stored subject, stored domain, stored source's path and line."""
    return con.execute("""
        SELECT n.item_id, n.subject, n.domain, n.line, i.subject, i.domain, src.path, i.line
        FROM (SELECT item_key, arg_min(item_id, line) AS item_id, arg_min(subject, line) AS subject,
                     arg_min(domain, line) AS domain, min(line) AS line
              FROM _stage_items GROUP BY item_key) n
        JOIN items i USING (item_key)
        JOIN sources src ON src.source_id = i.source_id
        WHERE i.subject <> n.subject OR i.domain <> n.domain ORDER BY n.line LIMIT 5""").fetchall()


def first_contradicting_source(con, *, rows_too: bool) -> int | None:
    """The smallest ``source_id`` of the staged rows (``_stage``; ``rows_too``: some staged model is
    stored) or items (``_stage_items`` with a ``source_id`` column, one row per item) contradicting a
    stored score, human score, parse flag or item; None if none does."""
    differ = " OR ".join(f"r.{c} <> s.{c}" for c in sorted(VALUE_COLUMNS))
    rows = f"""SELECT s.source_id FROM _stage s JOIN response_codes r USING (model_id, item_key, variant_id, replicate)
               WHERE {differ} UNION ALL """ if rows_too else ""
    found = con.execute(f"""SELECT min(source_id) FROM ({rows}
        SELECT n.source_id FROM _stage_items n JOIN items i USING (item_key)
        WHERE i.subject <> n.subject OR i.domain <> n.domain)""").fetchall()[0][0]
    return None if found is None else int(found)


def stored_per_source(con) -> dict[int, int]:
    """Source id -> how many of its staged rows (``_stage``) the store holds already."""
    return dict(con.execute("""SELECT source_id, count(*) FROM _stage
        SEMI JOIN response_codes USING (model_id, item_key, variant_id, replicate) GROUP BY source_id""").fetchall())


# --- writes ---------------------------------------------------------------------------------

def merge_responses(con) -> int:
    """Add the responses of ``_stage`` (response_codes' columns) that the store
    does not hold; returns how many were added. A stored response without a human score gains
    the one staged for it (human labels ingested after the judge's scores, issue #28). A staged
    human score contradicting a stored one never gets here: the file was refused as a conflict
    (issue #39). A stored response whose parse flag is not known (NULL, stored before the flag
    existed) gains the staged one likewise."""
    con.execute(f"""UPDATE response_codes r SET human_score = s.human_score FROM _stage s
                    WHERE r.model_id = s.model_id AND r.item_key = s.item_key AND r.variant_id = s.variant_id
                      AND r.replicate = s.replicate AND r.human_score IS NULL AND s.human_score IS NOT NULL""")
    con.execute(f"""UPDATE response_codes r SET parsed = s.parsed FROM _stage s
                    WHERE r.model_id = s.model_id AND r.item_key = s.item_key AND r.variant_id = s.variant_id
                      AND r.replicate = s.replicate AND r.parsed IS NULL AND s.parsed IS NOT NULL""")
    return con.execute(f"""
        INSERT INTO response_codes
        SELECT * FROM _stage s ANTI JOIN response_codes r USING (model_id, item_key, variant_id, replicate)
        """).fetchall()[0][0]


def replace_human_labels(con, source_id: int, replaced_at) -> int:
    """``ingest --replace-human-labels``: every stored human score that ``_stage`` contradicts takes the
    staged one, the old value kept in ``human_label_changes`` (created on first use) with the stored
    response's source and line and the replacing source and line; returns how many were replaced."""
    schema.ensure_tables(con, "human_label_changes")
    n = con.execute("""
        INSERT INTO human_label_changes
        SELECT m.benchmark, m.model, i.item_id, v.variant, s.replicate, r.human_score, r.source_id, r.line,
               s.human_score, ?, s.line, ?
        FROM _stage s JOIN response_codes r USING (model_id, item_key, variant_id, replicate)
        JOIN models m ON m.model_id = s.model_id
        JOIN items i ON i.item_key = s.item_key
        JOIN variants v ON v.variant_id = s.variant_id
        WHERE r.human_score <> s.human_score""", [source_id, replaced_at]).fetchall()[0][0]
    if n:
        con.execute("""UPDATE response_codes r SET human_score = s.human_score FROM _stage s
                       WHERE r.model_id = s.model_id AND r.item_key = s.item_key AND r.variant_id = s.variant_id
                         AND r.replicate = s.replicate AND r.human_score <> s.human_score""")
    return n


def human_label_changes(con) -> list[tuple]:
    """Every replaced human label (``human_label_changes``' columns), oldest first; [] when none was."""
    if not schema.has_tables(con, "human_label_changes"):
        return []
    return con.execute("SELECT * FROM human_label_changes ORDER BY replaced_at, new_source_id, new_line").fetchall()


def insert_staged(con) -> int:
    """Every row of ``_stage`` into ``response_codes`` (none can be stored already); returns how many."""
    return con.execute("INSERT INTO response_codes SELECT * FROM _stage").fetchall()[0][0]


def insert_staged_items(con, source_id: int | None, *, new_only: bool) -> None:
    """The staged items (``_stage_items``); ``new_only``: those not stored, an item given two
    pairs keeping its first line's (else every row is a new item, one row per item).

    ``source_id``: every item's source; None: the ``source_id`` column of ``_stage_items`` (several
    files' items, one row per item).
    """
    src = "?" if source_id is not None else "s.source_id"
    params = [source_id] if source_id is not None else []
    if not new_only:
        con.execute(f"INSERT INTO items SELECT benchmark, item_id, subject, domain, {src}, line, item_key "
                    "FROM _stage_items s", params)
        return
    con.execute(f"""
        INSERT INTO items
        SELECT s.benchmark, s.item_id, arg_min(s.subject, s.line), arg_min(s.domain, s.line),
               {"?" if source_id is not None else "arg_min(s.source_id, s.line)"}, min(s.line), s.item_key
        FROM _stage_items s ANTI JOIN items i USING (item_key)
        GROUP BY s.benchmark, s.item_id, s.item_key""", params)
