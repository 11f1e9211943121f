"""The checks of one file's rows as they are stored: batches coded and staged, repeats, contradictions.

Rows are turned into integer codes as they arrive (:class:`~benchcert.tasks.store.codes.CodeBook`)
and appended to the file's rows (:class:`~benchcert.tasks.store.staging.FileRows`); only a 64-bit
hash of each key is kept aside, in memory, for the within-file duplicate check, and each distinct
(item, subject, domain) once (:class:`StagedItems`), so every item check runs on a small table.
The SQL is the store's (tasks/store/staging.py); the checks against the store and the inserts are the
store's one write (tasks/store/ingest_write.py).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import polars as pl

from benchcert.tasks.ingest.errors import ConflictError
from benchcert.tasks.store import staging
from benchcert.tasks.store.codes import ITEM, MODEL, VARIANT, CodeBook
from benchcert.tasks.store.ingest_write import Contradiction
from benchcert.tasks.store.staging import FileRows


class StagedItems:
    """The distinct (item, subject, domain) triples of a file, with their first lines.

    They stay in memory (one row per item, usually) and the item checks read them as
    ``_stage_items``; a triple that an earlier batch staged is not staged again, so an item
    staged twice was given two different (subject, domain) pairs.
    """

    SCHEMA = {"benchmark": pl.String, "item_id": pl.String, "item_key": pl.Int32, "subject": pl.String,
              "domain": pl.String, "line": pl.Int64}

    def __init__(self) -> None:
        # Each batch's new triples as its own frame, and the item codes staged so far: appending a
        # batch copies nothing staged before (a growing frame copied per batch held some 20 MB
        # more of a million rows at the ingest's peak; benchmarks/json_memory.py).
        self._parts: list[pl.DataFrame] = []
        self._keys = pl.Series("item_key", [], dtype=pl.Int32)

    def add(self, items: pl.DataFrame) -> None:
        """Stage the batch's triples that no earlier batch staged."""
        items = items.cast(self.SCHEMA)  # text out of the batch's Categoricals (few rows)
        if self._parts:
            # Only an item staged before can repeat a triple: its text is compared, the others'
            # integer codes only (a join on the text of every staged item held some 30 MB more
            # of a file of 120,000 items; benchmarks/json_memory.py).
            seen = items["item_key"].is_in(self._keys.implode())
            if seen.any():
                again = items.filter(seen)["item_key"].implode()
                before = pl.concat([p.filter(pl.col("item_key").is_in(again)) for p in self._parts])
                items = items.filter(~seen).vstack(items.filter(seen).join(
                    before, on=["item_key", "subject", "domain"], how="anti").select(items.columns)).sort("line")
        if items.height:
            self._parts.append(items)
            self._keys = self._keys.append(items["item_key"])

    def frame(self) -> pl.DataFrame:
        """benchmark, item_id, item_key, subject, domain, line of every staged triple."""
        # The batches' frames side by side, not copied into one (benchmarks/json_memory.py).
        return pl.concat(self._parts, rechunk=False) if self._parts else pl.DataFrame(schema=self.SCHEMA)

    def split_items(self) -> bool:
        """Whether some item was staged with two different (subject, domain) pairs."""
        return bool(self._keys.is_duplicated().any())


def store_batch(con, book: CodeBook, good: pl.DataFrame, rows: FileRows, staged: StagedItems, *,
                one_benchmark: bool = False) -> pl.Series:
    """Append a validated batch: coded rows to the file's rows; items not staged before to ``staged``.

    Returns the rows' key hashes, sorted, for the within-file duplicate check.
    ``one_benchmark``: the benchmark is a constant (no column), so the batch need not be split.
    """
    bench = good["benchmark"]
    if not one_benchmark and not (bench == bench[0]).all():  # a benchmark column naming several
        return pl.concat([store_batch(con, book, part, rows, staged)
                          for part in good.partition_by("benchmark", maintain_order=True)]).sort()
    benchmark = bench[0]
    book.load(benchmark)  # the only step that reads the store before the insert below
    # Polars, numpy and DuckDB release the GIL, so the two threads keep both cores busy:
    # items are coded beside models, and the batch is inserted while its items are staged.
    with ThreadPoolExecutor(max_workers=2) as pool:
        coding = pool.submit(book.codes, ITEM, benchmark, good["item_id"])
        model_id = book.codes(MODEL, benchmark, good["model"])
        variant_id = book.codes(VARIANT, benchmark, good["variant"])
        item_key = coding.result()
        coded = pl.DataFrame([
            model_id, item_key, variant_id, good["replicate"], good["score"],
            pl.repeat(rows.source_id, good.height, dtype=pl.Int64, eager=True).alias("source_id"),
            good["line"], good["human_score"], good["parsed"]])
        # While this runs, nothing else touches the connection.
        inserting = pool.submit(staging.append_rows, con, rows, coded)
        try:
            frame = good.select("benchmark", "item_id", "subject", "domain", "line").with_columns(item_key)
            staged.add(_batch_items(frame))
            # Sorted here, while the insert runs, for the duplicate check after the last batch.
            keys = _key_hashes(coded).sort()
        finally:
            inserting.result()
    return keys


def _key_hashes(rows: pl.DataFrame) -> pl.Series:
    """A 64-bit hash of each row's key (model_id, item_key, variant_id, replicate)."""
    return rows.select(pl.col("model_id", "item_key", "variant_id").cast(pl.Int32),
                       pl.col("replicate").cast(pl.Int64)).hash_rows(0x3C6EF372).alias("key_hash")


def repeated_key_lines(con, key_hashes: list[pl.Series], rows: FileRows) -> pl.DataFrame:
    """Lines of the file's rows whose key hash occurs more than once (candidates for an exact check).

    ``key_hashes`` holds each batch's hashes (emptied here).  Sorting 64-bit hashes finds repeats in a
    fraction of the time of a hash table over 10 million keys, and only the hashes are kept
    (8 bytes a row); when some hash repeats (rarely), the file's rows are read back
    to find their lines, and the caller compares the keys themselves.
    """
    empty = pl.DataFrame(schema={"line": pl.Int64})
    if not key_hashes:
        return empty
    # One array sorted in place, each part freed once copied: a million rows' hashes held once, not
    # three times (the parts, their concatenation, its sorted copy), at the ingest's peak (issue #39).
    ordered = np.empty(sum(len(h) for h in key_hashes), dtype=np.uint64)
    at = 0
    while key_hashes:
        part = key_hashes.pop(0).to_numpy()
        ordered[at:at + part.size] = part
        at += part.size
    # The batches' hashes come sorted: numpy's stable sort (timsort for 64-bit keys) merges those runs,
    # 0.014 CPU s a million hashes against 0.072 for its default sort, which sorts them afresh (issue #40).
    ordered.sort(kind="stable")
    repeated = pl.Series(np.unique(ordered[1:][ordered[1:] == ordered[:-1]]), dtype=pl.UInt64)
    if not repeated.len():
        return empty
    keys = staging.key_rows(con, rows)
    return keys.filter(_key_hashes(keys).is_in(repeated.implode())).select(pl.col("line").cast(pl.Int64))


def _batch_items(frame: pl.DataFrame) -> pl.DataFrame:
    """Each distinct (item, subject, domain) of a batch with its first line.

    Item codes are small dense integers, so the first row of each item is found by array
    indexing rather than by grouping on text; when every row's subject and domain equal those
    of its item's first row (the usual case; compared exactly) those first rows are the
    answer.  Otherwise (an item given two subjects, which the ingest reports) the batch is
    grouped by item, subject and domain.
    """
    columns = list(StagedItems.SCHEMA)
    key = frame["item_key"].to_numpy()
    if key.size == 0:
        return frame.select(columns)
    base = int(key.min())
    slot = key - base
    rows = np.arange(key.size, dtype=np.int64)
    first = np.full(int(slot.max()) + 1, -1, dtype=np.int64)
    first[slot[::-1]] = rows[::-1]  # the last write wins, so each slot keeps its first row
    rep = first[slot]  # each row's item's first row
    if all(_same_as(frame[c], rep) for c in ("subject", "domain")):
        return frame.select(columns).gather(np.sort(first[first >= 0]))
    return (frame.group_by("item_key", "subject", "domain", maintain_order=True)
            .agg(pl.col("benchmark").first(), pl.col("item_id").first(), pl.col("line").min())
            .select(columns))


def _same_as(column: pl.Series, rows: np.ndarray) -> bool:
    """Whether every value equals the value at ``rows`` (exactly: text, or a Categorical's ids)."""
    if isinstance(column.dtype, pl.Categorical):
        ids = column.to_physical().to_numpy()
        return bool(np.array_equal(ids[rows], ids))
    return bool((column.gather(pl.Series(rows)) == column).all())


def dup_conflicts(con, book: CodeBook, rows: FileRows) -> list[tuple]:
    """(line, field, reason) of every row whose key the file gives again with another score or
    another human score (keeping the first line would drop the other label silently)."""
    found = staging.repeated_key_conflicts(con, rows)
    if not found.height:
        return []
    for kind in (MODEL, ITEM, VARIANT):
        names = book.text_of(kind).select(pl.col("code").alias(kind.code), pl.col("text").alias(kind.text))
        found = found.join(names, on=kind.code, how="left")
    found = found.sort("line")
    words = {"score": "score", "human_score": "human score", "parsed": "parse flag"}
    return [(line, f, f"key (model={m}, item_id={i}, variant={v}, replicate={r}) is given again with a "
                      f"different {words[f]}")
            for line, m, i, v, r, f in found.select("line", "model", "item_id", "variant", "replicate",
                                                    "field").iter_rows()]


#: Each stored-value check's words: the values and one value.
_WORDS = {"score": ("scores", "score"), "human_score": ("human scores", "human score"),
          "parsed": ("parse flags", "parsed")}


def _shown(value) -> str:
    """A stored or staged value as the conflict message shows it (a flag as true/false)."""
    return str(value).lower() if isinstance(value, bool) else f"{value:g}"


def conflict_error(path: Path, found: Contradiction, human_column: str | None = None) -> ConflictError:
    """The refusal of a file that contradicts a stored score, human score, parse flag or item
    (:func:`~benchcert.tasks.store.ingest_write.write_sources` found it), naming both sources.

    A human label is a measurement like the judge's score: one of the two files is wrong, and
    keeping the stored one silently would hide that (issue #39). A stored response without a
    human score is no contradiction: it gains the staged one (``responses.merge_responses``).
    ``--replace-human-labels`` (asked explicitly): a contradicting human score is no refusal; the
    write replaces the stored one and keeps it (``responses.replace_human_labels``).
    """
    if found.column == "subject/domain":
        item, subj, dom, line, old_subj, old_dom, old_path, old_line = found.first[0]
        return ConflictError(
            f"{path}: item {item!r} has subject/domain {subj!r}/{dom!r} at {path}:{line} but "
            f"{old_subj!r}/{old_dom!r} at {old_path}:{old_line}; nothing ingested")
    plural, word = _WORDS[found.column]
    m, item, var, rep, value, line, old, old_path, old_line = found.first[0]
    named = found.column == "human_score" and human_column not in (None, found.column)
    label = f"{word} (column {human_column!r})" if named else word
    return ConflictError(
        f"{path}: {found.count} row(s) contradict stored {plural}; nothing ingested. First: model {m!r}, "
        f"item {item!r}, variant {var!r}, replicate {rep}: {label} {_shown(value)} at {path}:{line} but "
        f"{_shown(old)} at {old_path}:{old_line}"
        + ("; pass --replace-human-labels to replace the stored human labels (the old ones are kept in the "
           "store's human_label_changes)" if found.column == "human_score" else ""))
