"""Integer codes for the text keys of responses, assigned while a file is ingested.

The store keeps responses as (model_id, item_key, variant_id, replicate, score) and the
text in three dictionaries (``models``, ``items``, ``variants``; see tasks/store.py).  A
:class:`CodeBook` lives for one file's ingest: it loads the stored codes of each benchmark
the file names, gives new text a new code, and remembers the new entries so the ingest can
store the ones that end up used, inside the same transaction.

Matching text to codes row by row is the costly part at 10 million rows, so rows are matched
by a 64-bit hash of the text (within one benchmark) rather than by the text: hashing is a
cheap pass over the column, and the lookups then run on integers.  Hashes never reach the
store (they are recomputed from the stored text when a dictionary is loaded), so a change of
hash function between library versions cannot corrupt codes.  Two texts with the same hash
would merge, so each row also carries a second, independently seeded hash that must equal
the second hash of the entry it matched: texts merge only if both hashes collide (odds
about n^2 / 2^129 for n distinct texts); a first-hash collision raises
:class:`CodeCollisionError` instead of giving a wrong code.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl



class CodeCollisionError(RuntimeError):
    """Two different texts share a 64-bit hash (never expected; refuse rather than merge them)."""


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

_DICT_SCHEMA = {"h": pl.UInt64, "check": pl.UInt64, "benchmark": pl.String, "text": pl.String, "code": pl.Int32,
                "new": pl.Boolean}
#: Seeds of the matching hash and of the independent check hash.
_SEED, _CHECK_SEED = 0x6A09E667, 0x510E527F


class CodeBook:
    """The codes of models, items and variants for the benchmarks one ingest touches."""

    def __init__(self, con, *, new_benchmarks: tuple[str, ...] = ()) -> None:
        """``new_benchmarks``: benchmarks the caller knows have nothing stored (no lookup needed)."""
        self._con = con
        # One dictionary frame per (kind, benchmark): row position is what rows are matched to.
        self._dicts: dict[tuple[str, str], pl.DataFrame] = {
            (k.name, b): pl.DataFrame(schema=_DICT_SCHEMA) for k in KINDS for b in new_benchmarks}
        # Table and column names come from the fixed Kind constants, never from a log.
        firsts = con.execute("SELECT " + ", ".join(f"(SELECT coalesce(max({k.code}), 0) + 1 FROM {k.table})"
                                                   for k in KINDS)).fetchall()[0]
        self._next = {k.name: first for k, first in zip(KINDS, firsts)}

    def load(self, benchmark: str) -> None:
        """Read the benchmark's stored codes now (coding a batch afterwards does not use the store)."""
        for kind in KINDS:
            self._known(kind, benchmark)

    def _known(self, kind: Kind, benchmark: str) -> pl.DataFrame:
        key = (kind.name, benchmark)
        if key not in self._dicts:
            stored = pl.from_arrow(self._con.sql(
                f"SELECT {kind.text} AS text, {kind.code}::INTEGER AS code FROM {kind.table} WHERE benchmark = ?",
                params=[benchmark]).to_arrow_table())
            assert isinstance(stored, pl.DataFrame)
            self._dicts[key] = stored.select(
                stored["text"].hash(_SEED).alias("h"), stored["text"].hash(_CHECK_SEED).alias("check"),
                pl.lit(benchmark).alias("benchmark"), "text", "code", pl.lit(False).alias("new"))
        return self._dicts[key]

    def _add(self, kind: Kind, benchmark: str, new: pl.DataFrame) -> pl.DataFrame:
        start = self._next[kind.name]
        self._next[kind.name] = start + new.height
        new = new.sort("text").select(
            "h", "check", pl.lit(benchmark).alias("benchmark"), "text",
            pl.int_range(start, start + new.height, dtype=pl.Int32).alias("code"), pl.lit(True).alias("new"))
        known = self._dicts[(kind.name, benchmark)] = pl.concat([self._known(kind, benchmark), new])
        return known

    def constant(self, kind: Kind, benchmark: str, text: str, n: int) -> pl.Series:
        """The code of one text, repeated for ``n`` rows (a field the file does not carry)."""
        known = self._known(kind, benchmark)
        hit = known.filter(pl.col("text") == text)["code"]
        code = hit[0] if hit.len() else self.codes(kind, benchmark, pl.Series([text], dtype=pl.String))[0]
        return pl.repeat(code, n, dtype=pl.Int32, eager=True).alias(kind.code)

    @staticmethod
    def _positions(known: pl.DataFrame, h: pl.Series, *, strict: bool) -> pl.Series:
        """Row position in ``known`` of each hash (null where unknown, unless ``strict``)."""
        rows = pl.int_range(known.height, dtype=pl.UInt32, eager=True)
        if strict:
            return h.replace_strict(known["h"], rows, return_dtype=pl.UInt32)
        return h.replace_strict(known["h"], rows, default=None, return_dtype=pl.UInt32)

    def codes(self, kind: Kind, benchmark: str, text: pl.Series) -> pl.Series:
        """Code of each row's text (of one benchmark), new codes given as needed.

        Logs are usually sorted by model (or item), so the lookup is done once per run of
        equal texts rather than once per row.  Every row's second hash is then compared with
        the second hash of the entry it was matched to, so two texts merge only if both
        64-bit hashes collide (odds about n^2 / 2^129); a first-hash collision is an error.
        """
        if text.len() > 1 and text.null_count() == 0 and (text == text[0]).all():
            return self.constant(kind, benchmark, text[0], text.len())
        h, check = text.hash(_SEED), text.hash(_CHECK_SEED)
        starts = (h != h.shift(1)).fill_null(True)
        run = None
        if 2 * int(starts.sum()) < text.len():  # long runs: look up one row per run
            run = starts.cast(pl.UInt32).cum_sum() - 1
            h_run, check_run, text_run = h.filter(starts), check.filter(starts), text.filter(starts)
        else:
            h_run, check_run, text_run = h, check, text
        known = self._known(kind, benchmark)
        if known.height == 0:  # nothing known yet (a new benchmark): every text is new
            fresh = pl.DataFrame({"h": h_run, "check": check_run, "text": text_run})
            known = self._add(kind, benchmark, fresh.filter(fresh["h"].is_first_distinct()))
            position = self._positions(known, h_run, strict=True)
        else:
            position = self._positions(known, h_run, strict=False)
            unknown = position.is_null()
            if unknown.any():
                fresh = pl.DataFrame({"h": h_run.filter(unknown), "check": check_run.filter(unknown),
                                      "text": text_run.filter(unknown)})
                known = self._add(kind, benchmark, fresh.filter(fresh["h"].is_first_distinct()))
                position = self._positions(known, h_run, strict=True)
        if run is not None:
            position = position.gather(run)
        same = known["check"].gather(position) == check
        if not same.all():
            i = int(same.arg_min())
            raise CodeCollisionError(
                f"{kind.name} {text[i]!r} shares a 64-bit hash with {known['text'][int(position[i])]!r}; "
                "refusing to merge them (report this, with the file)")
        return known["code"].gather(position).alias(kind.code)

    # --- what the ingest stores ------------------------------------------------------------

    def _all(self, kind: Kind) -> pl.DataFrame:
        frames = [d for (name, _), d in self._dicts.items() if name == kind.name]
        return pl.concat(frames) if frames else pl.DataFrame(schema=_DICT_SCHEMA)

    def new_entries(self, kind: Kind) -> pl.DataFrame:
        """code, benchmark, text of the entries this ingest created (stored only if used)."""
        return self._all(kind).filter(pl.col("new")).select("code", "benchmark", "text")

    def text_of(self, kind: Kind) -> pl.DataFrame:
        """code, benchmark, text of every entry known to this ingest (for messages)."""
        return self._all(kind).select("code", "benchmark", "text")
