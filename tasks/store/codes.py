"""Integer codes for the text keys of responses, assigned while a file is ingested.

The store keeps responses as (model_id, item_key, variant_id, replicate, score) and the
text in three dictionaries (``models``, ``items``, ``variants``; see tasks/store/connection.py).  A
:class:`CodeBook` lives for one file's ingest: it loads the stored codes of each benchmark
the file names, gives new text a new code, and remembers the new entries so the ingest can
store the ones that end up used, inside the same transaction.

Matching text to codes row by row is the costly part of an ingest, so rows are matched
through Polars Categoricals: a cast compares the text itself, so two texts never share a
code (there is no hash that could collide), and gives each row a small dense physical id.
The validator already hands over model, item_id, subject and domain as Categoricals (each
column cast once, see tasks/ingest/validate.py), and integer ids as integers; the book then codes
only the distinct texts a batch uses (thousands, against up to a million rows), in a
mapping private to the book (one per kind and benchmark, freed with it), and each row's
code is one gather through a table of physical id -> code.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl


@dataclass(frozen=True)
class Kind:
    name: str      # what the text is (for messages)
    table: str     # dictionary table in the store
    text: str      # its text column
    code: str      # its code column


MODEL = Kind("model", "models", "model", "model_id")
ITEM = Kind("item", "items", "item_id", "item_key")
VARIANT = Kind("variant", "variants", "variant", "variant_id")
KINDS = (MODEL, ITEM, VARIANT)

_ENTRY_SCHEMA = {"code": pl.Int32, "benchmark": pl.String, "text": pl.String}


class _Column:
    """One (kind, benchmark): its private text -> physical id mapping and physical id -> code."""

    def __init__(self, stored: pl.DataFrame) -> None:
        self.stored = stored  # text, code: what the store held when the ingest began
        self.categories = pl.Categories.random()
        # The mapping lives only while a Series uses it; this empty one keeps it for the book's life.
        self.keepalive = pl.Series([], dtype=pl.Categorical(self.categories))
        self.lut = np.empty(0, dtype=np.int32)  # code of each physical id (-1: not a text of ours)
        self.new = pl.DataFrame(schema={"code": pl.Int32, "text": pl.String})


def next_codes(con) -> dict[str, int]:
    """The next free code of each kind (by ``Kind.name``): one past the largest stored, codes are
    never reused. The one rule for the one-file ingest (:class:`CodeBook`) and the many-files one."""
    # Table and column names come from the fixed Kind constants, never from a log.
    firsts = con.execute("SELECT " + ", ".join(f"(SELECT coalesce(max({k.code}), 0) + 1 FROM {k.table})"
                                               for k in KINDS)).fetchall()[0]
    return {k.name: first for k, first in zip(KINDS, firsts)}


class CodeBook:
    """The codes of models, items and variants for the benchmarks one ingest touches."""

    def __init__(self, con, *, new_benchmarks: tuple[str, ...] = ()) -> None:
        """``new_benchmarks``: benchmarks the caller knows have nothing stored (no lookup needed)."""
        self._con = con
        empty = pl.DataFrame(schema={"text": pl.String, "code": pl.Int32})
        self._columns: dict[tuple[str, str], _Column] = {
            (k.name, b): _Column(empty) for k in KINDS for b in new_benchmarks}
        self._next = next_codes(con)

    def load(self, benchmark: str) -> None:
        """Read the benchmark's stored codes now (coding a batch afterwards does not use the store)."""
        for kind in KINDS:
            self._column(kind, benchmark)

    def _column(self, kind: Kind, benchmark: str) -> _Column:
        key = (kind.name, benchmark)
        if key not in self._columns:
            stored = pl.from_arrow(self._con.sql(
                f"SELECT {kind.text} AS text, {kind.code}::INTEGER AS code FROM {kind.table} WHERE benchmark = ?",
                params=[benchmark]).to_arrow_table())
            assert isinstance(stored, pl.DataFrame)
            self._columns[key] = _Column(stored)
        return self._columns[key]

    def codes(self, kind: Kind, benchmark: str, text: pl.Series, *, files: pl.Series | None = None) -> pl.Series:
        """Code of each row's text (of one benchmark), new codes given as needed.

        A text keeps the code the store gave it; texts the store does not hold get the next
        free codes, in sorted text order within each call (so a file is coded the same way
        on every run, whatever the threads do).  A Categorical ``text`` (as the validator
        gives) is coded through its categories: the texts its rows use are coded once each,
        and each row's code is a gather by physical id.  Integer ids are coded as their
        decimal text.

        ``files``: each row's file, for a String ``text`` of several files coded at once (a run of
        small files): new texts get their codes by the first file naming them, then in sorted
        text order, the codes the files would get coded one call each, in file order.
        """
        if files is not None:
            return self._codes_by_file(kind, benchmark, text, files)
        if text.null_count():
            raise ValueError(f"codes: {kind.name} text has {text.null_count()} null value(s); validate rows first")
        if text.len() == 0:
            return pl.Series(kind.code, [], dtype=pl.Int32)
        if isinstance(text.dtype, pl.Categorical):  # code the distinct texts its rows use, then gather
            distinct = text.unique()
            ids = distinct.to_physical().to_numpy()
            table = np.full(int(ids.max()) + 1, -1, dtype=np.int32)
            table[ids] = self.codes(kind, benchmark, distinct.cast(pl.String)).to_numpy()
            return pl.Series(kind.code, table[text.to_physical().to_numpy()], dtype=pl.Int32)
        if text.dtype.is_integer():  # integer ids: their text is their decimal form
            return self._integer_codes(kind, benchmark, text)
        if text.len() > 1 and (text == text[0]).all():  # a constant column: code one row
            return pl.repeat(self.codes(kind, benchmark, text.head(1))[0], text.len(), dtype=pl.Int32,
                             eager=True).alias(kind.code)
        col = self._column(kind, benchmark)
        coded = text.cast(pl.Categorical(col.categories))
        distinct = coded.unique()
        ids = distinct.to_physical().to_numpy()
        # A text first met now has an id past the table (or, if the mapping reserved it earlier, no code yet).
        new = ids >= col.lut.size
        new[~new] = col.lut[ids[~new]] < 0
        if new.any():
            self._extend(kind, col, ids[new], distinct.filter(pl.Series(new)).cast(pl.String))
        return pl.Series(kind.code, col.lut[coded.to_physical().to_numpy()], dtype=pl.Int32)

    def _codes_by_file(self, kind: Kind, benchmark: str, text: pl.Series, files: pl.Series) -> pl.Series:
        """:meth:`codes` of several files' rows at once: a text met first gets its code by (first file, text)."""
        if text.dtype != pl.String or text.null_count() or files.len() != text.len():
            raise ValueError(f"codes: files are given with a String text of as many rows ({text.dtype}, "
                             f"{text.null_count()} null(s), {files.len()} files for {text.len()} rows)")
        col = self._column(kind, benchmark)
        coded = text.cast(pl.Categorical(col.categories)).to_physical()
        first = pl.DataFrame({"id": coded, "text": text, "file": files}).group_by("id").agg(
            pl.col("text").first(), pl.col("file").min())
        ids = first["id"].to_numpy()
        new = ids >= col.lut.size
        new[~new] = col.lut[ids[~new]] < 0
        if new.any():
            keep = pl.Series(new)
            self._extend(kind, col, ids[new], first["text"].filter(keep), files=first["file"].filter(keep))
        return pl.Series(kind.code, col.lut[coded.to_numpy()], dtype=pl.Int32)

    def _integer_codes(self, kind: Kind, benchmark: str, ids: pl.Series) -> pl.Series:
        """Codes of integer ids: the distinct values are formatted and coded, rows gathered.

        Ids in a range a few times the row count (the usual question numbers) are looked up by
        offset into a table; others through their sorted distinct values.
        """
        values = ids.to_numpy()
        low, high = int(values.min()), int(values.max())
        if values.dtype != np.uint64 and high - low < 4 * values.size + 1024:
            offset = values.astype(np.int64) - low
            used = np.bincount(offset, minlength=high - low + 1) > 0
            table = np.full(used.size, -1, dtype=np.int32)
            distinct = pl.Series(np.flatnonzero(used) + low).cast(ids.dtype)
            table[used] = self.codes(kind, benchmark, distinct.cast(pl.String)).to_numpy()
            return pl.Series(kind.code, table[offset], dtype=pl.Int32)
        distinct, inverse = np.unique(values, return_inverse=True)
        codes = self.codes(kind, benchmark, pl.Series(distinct).cast(ids.dtype).cast(pl.String)).to_numpy()
        return pl.Series(kind.code, codes[inverse], dtype=pl.Int32)

    def _extend(self, kind: Kind, col: _Column, ids: np.ndarray, texts: pl.Series,
                files: pl.Series | None = None) -> None:
        """Give texts met for the first time (``ids`` in the mapping) their stored or new codes
        (``files``: the first file naming each, which orders the new codes before the text does)."""
        top = int(ids.max()) + 1
        if top > col.lut.size:
            col.lut = np.concatenate([col.lut, np.full(top - col.lut.size, -1, dtype=np.int32)])
        if col.stored.height:
            stored = texts.replace_strict(col.stored["text"], col.stored["code"], default=None,
                                          return_dtype=pl.Int32)
            known = stored.is_not_null().to_numpy()
            col.lut[ids[known]] = stored.to_numpy()[known]
            ids, texts = ids[~known], texts.filter(pl.Series(~known))
            files = None if files is None else files.filter(pl.Series(~known))
        order = (texts.arg_sort() if files is None else
                 pl.DataFrame({"file": files, "text": texts}).select(pl.arg_sort_by("file", "text")).to_series()
                 ).to_numpy()
        first = self._next[kind.name]
        self._next[kind.name] = first + order.size
        codes = np.empty(order.size, dtype=np.int32)
        codes[order] = np.arange(first, first + order.size, dtype=np.int32)  # in sorted text order
        col.lut[ids] = codes
        col.new = pl.concat([col.new, pl.DataFrame({"code": codes, "text": texts})])

    # --- what the ingest stores ------------------------------------------------------------

    def _entries(self, kind: Kind, *, stored: bool) -> pl.DataFrame:
        frames = []
        for (name, benchmark), col in self._columns.items():
            if name != kind.name:
                continue
            parts = [col.stored.select("code", "text"), col.new] if stored else [col.new]
            frames += [p.select("code", pl.lit(benchmark).alias("benchmark"), "text") for p in parts]
        return pl.concat(frames) if frames else pl.DataFrame(schema=_ENTRY_SCHEMA)

    def new_entries(self, kind: Kind) -> pl.DataFrame:
        """code, benchmark, text of the entries this ingest created (stored only if used)."""
        return self._entries(kind, stored=False)

    def text_of(self, kind: Kind) -> pl.DataFrame:
        """code, benchmark, text of every entry known to this ingest (for messages)."""
        return self._entries(kind, stored=True)
