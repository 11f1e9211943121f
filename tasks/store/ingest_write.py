"""The one write of an ingest: coded rows of one file or of several into the store, in the caller's transaction.

Every file's rows reach the stored tables through :func:`write_sources`, and only through it:
the streaming one-file path (tasks/ingest/one_file.py: one source, its rows coded by a
:class:`~benchcert.tasks.store.codes.CodeBook` and staged batch by batch) and a run of small
files stored together (tasks/ingest/many.py: several sources, coded by the same kind of book
file after file and staged at once).  The rows are in a
:class:`~benchcert.tasks.store.staging.FileRows` relation (``response_codes`` itself for a
benchmark with nothing stored, else the temporary ``_stage``), the items in ``_stage_items``.
Inside the caller's transaction the write

1. finds the first source whose rows or items contradict the store (a score, a human score, a
   parse flag, an item's subject/domain) and takes that source and every later one out of the
   staged rows, giving back their source ids; which sources share the transaction and what
   happens to a refused one are the caller's policies (the one-file path refuses its file naming
   both sources, a run hands that file to the one-file path);
2. adds the responses the store does not hold (a stored response without a human score or
   parse flag gains the staged one, ``--replace-human-labels`` replaces contradicting labels);
3. stores the model and variant codes and the items the kept rows name first, each under the
   source that named it first;
4. stores the option probabilities, the quarantined rows and one ``sources`` row per file;

and returns the rows each source added.  Every value is a bound parameter (the SQL is in
tasks/store/responses.py and tasks/store/staging.py).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import polars as pl

from benchcert.tasks.store import responses, staging
from benchcert.tasks.store.codes import MODEL, VARIANT, CodeBook
from benchcert.tasks.store.staging import FileRows

_SOURCES = {"source_id": pl.Int64, "benchmark": pl.String, "path": pl.String, "sha256": pl.String,
            "format": pl.String, "config": pl.String, "rows_read": pl.Int64, "rows_accepted": pl.Int64,
            "rows_added": pl.Int64, "rows_rejected": pl.Int64, "status": pl.String, "ingested_at": pl.Datetime("us")}


@dataclass(frozen=True)
class NewSource:
    """One file whose rows are staged: what its ``sources`` row records, and its rows' counts."""

    source_id: int
    benchmark: str | None
    path: str
    sha256: str
    format: str
    config: str
    rows_read: int
    rows_accepted: int  # rows staged (a key the file repeats counted each time)
    rows_distinct: int  # rows staged once repeats are dropped: what a benchmark with nothing stored adds
    rows_rejected: int = 0
    rejects: pl.DataFrame | None = None  # quarantined rows (line, field, reason, raw)


@dataclass(frozen=True)
class Contradiction:
    """The first source whose staged rows or items contradict the store, and (one source) what they contradict.

    ``column``: score, human_score, parsed or ``subject/domain``; ``count``: how many rows (items:
    the rows shown); ``first``: the first five, as :func:`~benchcert.tasks.store.responses.contradictions`
    and :func:`~benchcert.tasks.store.responses.item_contradictions` give them.  A run of several
    sources names only the source (its file is checked again by itself).
    """

    source_id: int
    column: str | None = None
    count: int = 0
    first: tuple = ()


@dataclass(frozen=True)
class Written:
    """What :func:`write_sources` stored: rows added per stored source, human labels replaced, and
    the contradiction that kept a source (and every later one) out, if any."""

    added: dict[int, int]
    replaced: int = 0
    contradiction: Contradiction | None = None


def write_sources(con, rows: FileRows, sources: list[NewSource], book: CodeBook, *, pruned: bool = False,
                  split_items: bool = False, option_probs: bool = False, replace_human: bool = False) -> Written:
    """Store the staged rows of ``sources`` (in source id order) inside the caller's transaction.

    ``rows``: their coded rows; ``_stage_items``: their items (with a ``source_id`` column when
    there are several sources); ``book``: the codes given while they were staged.  ``pruned``:
    rows were taken out after coding (bad rows, repeated keys), so a new code may be unused;
    ``split_items``: an item was staged with two subject/domain pairs (it keeps its first line's);
    ``option_probs``: ``_stage_probs`` holds the file's option probabilities; ``replace_human``:
    ``--replace-human-labels`` (one source).  Stores the sources before the first that
    contradicts the store (:attr:`Written.contradiction`), every source when none does.
    """
    if replace_human and len(sources) > 1:
        raise ValueError(f"replace_human: one source at a time, not {len(sources)}")
    kept, overlap, found = _check_against_store(con, rows, sources, replace_human=replace_human)
    if not kept:
        return Written(added={}, contradiction=found)
    now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    added, replaced = _add_responses(con, rows, kept, overlap, replace_human=replace_human, now=now)
    several = len(sources) > 1
    for kind in (MODEL, VARIANT):  # every new code is used unless rows were taken out after coding
        new = book.new_entries(kind)
        if new.height:
            responses.insert_codes(con, kind, new, None if several else rows.source_id,
                                   used_by=rows if several or pruned else None)
    # A new benchmark's items are all new (one row per item unless one was given two pairs).
    responses.insert_staged_items(con, None if several else rows.source_id,
                                  new_only=not rows.direct or split_items)
    if option_probs:
        staging.insert_option_probs(con, rows)
    _record_sources(con, kept, added, now)
    return Written(added=added, replaced=replaced, contradiction=found)


def _check_against_store(con, rows: FileRows, sources: list[NewSource], *,
                         replace_human: bool) -> tuple[list[NewSource], bool, Contradiction | None]:
    """The sources before the first contradicting the store (the others taken out of the staged rows),
    whether some staged model is stored (only then can a staged response be), and the contradiction."""
    if rows.direct:  # a benchmark with nothing stored has no stored scores or items to contradict
        return sources, False, None
    overlap = responses.stored_model_staged(con)
    found = (_first_contradiction(con, sources[0].source_id, overlap, replace_human=replace_human)
             if len(sources) == 1 else _first_contradicting_source(con, overlap))
    if found is None:
        return sources, overlap, None
    kept = [s for s in sources if s.source_id < found.source_id]
    if len(sources) > 1:  # the run goes on without them: their ids are the next files' (one source: the caller's rollback)
        if kept:
            staging.keep_sources_before(con, rows, found.source_id)
        responses.give_back_source_ids(con, found.source_id)
    return kept, overlap, found


def _first_contradiction(con, source_id: int, overlap: bool, *, replace_human: bool) -> Contradiction | None:
    """One source's first contradiction: scores, then human scores (unless replaced), parse flags, items."""
    for column in responses.VALUE_COLUMNS if overlap else ():
        if replace_human and column == "human_score":
            continue
        n, first = responses.contradictions(con, column)
        if first:
            return Contradiction(source_id, column, n, tuple(first))
    items = responses.item_contradictions(con)
    if items:
        return Contradiction(source_id, "subject/domain", len(items), tuple(items))
    return None


def _first_contradicting_source(con, overlap: bool) -> Contradiction | None:
    """Several sources: the first whose rows or items contradict the store (its file is checked again alone)."""
    found = responses.first_contradicting_source(con, rows_too=overlap)
    return None if found is None else Contradiction(found)


def _add_responses(con, rows: FileRows, kept: list[NewSource], overlap: bool, *, replace_human: bool,
                   now) -> tuple[dict[int, int], int]:
    """Add the staged responses the store does not hold; rows added per source, human labels replaced."""
    distinct = {s.source_id: s.rows_distinct for s in kept}
    if rows.direct:  # already in response_codes
        return distinct, 0
    if not overlap:  # no staged model is stored: every staged row is new
        responses.insert_staged(con)
        return distinct, 0
    replaced = responses.replace_human_labels(con, rows.source_id, now) if replace_human else 0
    if len(kept) == 1:
        return {rows.source_id: responses.merge_responses(con)}, replaced
    stored = responses.stored_per_source(con)
    responses.merge_responses(con)
    return {sid: n - stored.get(sid, 0) for sid, n in distinct.items()}, replaced


def _record_sources(con, kept: list[NewSource], added: dict[int, int], now) -> None:
    """Each stored file's quarantined rows and its ``sources`` row."""
    for s in kept:
        if s.rejects is not None and s.rejects.height:
            responses.record_rejects(con, s.source_id, s.path, s.rejects)
    records = [(s.source_id, s.benchmark, s.path, s.sha256, s.format, s.config, s.rows_read, s.rows_accepted,
                added[s.source_id], s.rows_rejected,
                "ingested-with-rejects" if s.rejects is not None and s.rejects.height else "ingested", now)
               for s in kept]
    responses.record_sources(con, pl.DataFrame(records, orient="row", schema=_SOURCES))
