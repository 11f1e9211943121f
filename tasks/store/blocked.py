"""An out-of-core benchmark: the matrices an audit needs without the dense score matrix in memory.

``benchcert audit --out-of-core`` (``AuditRequest.out_of_core``) reads the benchmark as a
:class:`BlockedMatrices`: the items, models and per-subject counts
(:attr:`BenchmarkMatrices.subject_counts`, subjects x models) are held; the scores are read
from the store by blocks of models when an analysis asks for them
(:meth:`BlockedMatrices.column_blocks`, :meth:`BlockedMatrices.columns`), each block at most
``block_models`` models (default :data:`BLOCK_MODELS`), and never all at once. Memory is then
the counts, the per-model tables and one block, not models x items (docs/scale.md: 320M and
the 1B extrapolation).

Every analysis of the default audit reads only the counts and blocks on 0/1 scores, so the out-of-
core matrices hold exactly what the in-memory ones would compute: the counts are each block's
(a column's sums do not depend on the other columns; 0/1 sums are exact integers) and a block is
the matrix's columns to the last bit (tests/tasks/store/test_blocked.py compares whole audits).
Other scores (fractional, replicates, human scores) are refused: their analyses read the matrix.
"""

from __future__ import annotations

import dataclasses
from functools import cached_property

import numpy as np
import polars as pl

from benchcert.tasks.store.dense_read import ReadPlan, check_unchanged, fill, plan_read, store_stamp
from benchcert.tasks.store.matrices import BenchmarkMatrices, MatrixError

#: Models per block read from the store: 500 x 20,000 items is 80 MB.
BLOCK_MODELS = 500


class OutOfCoreError(MatrixError):
    """The benchmark cannot be audited out of core (it needs the whole matrix)."""


class BlockedMatrices(BenchmarkMatrices):
    """A benchmark's matrices whose scores stay in the store: read by blocks of models on demand.

    ``opener`` is a zero-argument callable returning a context manager that yields an open
    (read-only) store connection: each read opens the store for its duration, and first checks
    that the store still holds what ``plan`` was made from (``reopens=False``: the opener yields
    the connection the plan was made on, which nothing writes to, so the check is skipped).
    """

    def __init__(self, benchmark: str, variant: str, plan: ReadPlan, opener, *, block_models: int = BLOCK_MODELS,
                 reopens: bool = True):
        # BenchmarkMatrices.__init__ wants the scores: set what it would, without them.
        self.benchmark = benchmark
        self.variant = variant
        self.items = plan.rows
        self.models = list(plan.models)
        self._scores = None
        self._n_replicates = None
        self._human = None
        self._plan = plan
        self._opener = opener
        self._reopens = reopens
        self._stamp = None  # the store's stamp when its responses were last found unchanged
        self._packed = None  # the bits packed by the pass of subject_counts (packed_bits)
        self.block_models = max(1, int(block_models))

    @property
    def scores(self) -> np.ndarray:
        raise OutOfCoreError(f"{self.benchmark!r} is audited out of core: its {self.n_items} x {len(self.models)} "
                             "score matrix is not held; this step needs it (run the audit without --out-of-core)")

    @property
    def n_replicates(self) -> np.ndarray:
        return self.scores  # raises: only the perturbation analysis asks, on several variants

    @cached_property
    def long(self) -> pl.DataFrame:
        return self.scores  # raises

    def items_by_models(self) -> pl.DataFrame:
        return self.scores  # raises

    def _read(self, cols: np.ndarray) -> np.ndarray:
        """Scores of the model columns ``cols`` (in that order, repeats allowed), read from the store."""
        uniq, where = np.unique(cols, return_inverse=True)
        if uniq.size < cols.size:
            # fill writes each model's scores once, into one column: the subsample's pairs name a
            # model in several pairs (a repeat's column was left unwritten before).
            return self._read(uniq)[:, where]
        plan = self._plan
        out = plan.empty(plan.n_rows, cols.size)
        col_of_code = np.full(plan.codes.n_models, -1, np.int64)
        wanted = plan.col_codes[cols]
        col_of_code[wanted] = np.arange(cols.size)
        with self._opener() as con:
            if self._reopens:
                # The stamp first (a millisecond); this benchmark's census only after an ingest.
                stamp = store_stamp(con)
                if stamp != self._stamp:
                    check_unchanged(con, plan)
                    self._stamp = stamp
            fill(con, plan, out, col_of_code, ranges=_runs(np.sort(wanted)))
        return out

    def columns(self, cols) -> np.ndarray:
        cols = np.asarray(cols, dtype=np.intp)
        if cols.size <= self.block_models:
            return self._read(cols)
        return np.concatenate([self._read(cols[a:a + self.block_models])
                               for a in range(0, cols.size, self.block_models)], axis=1)

    def column_blocks(self, block_models: int):
        step = max(1, min(int(block_models), self.block_models))
        for lo in range(0, len(self.models), step):
            hi = min(len(self.models), lo + step)
            yield lo, hi, self._read(np.arange(lo, hi))

    def packed_bits(self, subjects):
        """The bits packed in the pass of :attr:`subject_counts`, when ``subjects`` are the ones they were
        packed with (the items' subjects: the comparisons' clusters by default), or None for a single
        subject (whose layout is that of no subjects), else None."""
        packed = self._packed
        if packed is not None and subjects is None and packed.codes is not None and packed.first.size == 1:
            # One subject packs the layout of no subjects (the same words, first word and column
            # sums): the comparisons of a single-subject benchmark, paired CLT, take these bits too.
            return dataclasses.replace(packed, codes=None)
        if packed is None or (subjects is None) != (packed.codes is None):
            return None
        if subjects is not None and not np.array_equal(np.asarray(subjects), packed.codes):
            return None
        return packed

    @cached_property
    def subject_counts(self):
        """The per-subject counts, block by block (each model's counts are its own column's). The same
        pass packs each model's answered and correct bits with the items' subjects
        (:meth:`packed_bits`): the comparisons read them instead of every block again (at a billion
        responses a second read of the store and its fill, about a tenth of the audit; issue #40)."""
        from benchcert.stats.comparisons import pack_binary_scores
        from benchcert.stats.subject_counts import SubjectCounts, subject_counts

        parts: list = []
        read_all = []

        def counted():
            for lo, hi, block in self.column_blocks(self.block_models):
                parts.append(subject_counts(block, self.item_subject, self.subjects.height))
                yield lo, hi, block
            read_all.append(True)

        if self.models:
            try:
                self._packed = pack_binary_scores(counted(), self.n_items, len(self.models), self.item_subject)
            except ValueError:
                if not read_all:
                    raise
                self._packed = None  # scores other than 0/1: refused below, from the counts
        if not parts:
            raise OutOfCoreError(f"{self.benchmark!r} has no model to audit")
        counts = SubjectCounts(**{f: np.concatenate([getattr(p, f) for p in parts], axis=-1)
                                  for f in ("n", "total", "passed", "fractional", "low", "high")})
        if not counts.in_unit_interval or not counts.binary.all():
            bad = [self.models[j] for j in np.flatnonzero(~counts.binary)[:5]]
            raise OutOfCoreError(f"{self.benchmark!r}: an out-of-core audit needs 0/1 scores; model(s) {bad} have "
                                 "others (run the audit without --out-of-core)")
        return counts


def _runs(codes: np.ndarray, gap: int = 64) -> list[tuple[int, int]]:
    """Sorted codes as (first, count) ranges, a range running on across gaps of at most ``gap``
    codes (one query reads a range; a few unwanted codes in it cost less than another query)."""
    if codes.size == 0:
        return []
    breaks = np.flatnonzero(np.diff(codes) > gap)
    starts = np.r_[codes[0], codes[breaks + 1]]
    ends = np.r_[codes[breaks], codes[-1]]
    return [(int(a), int(b - a + 1)) for a, b in zip(starts, ends)]


def load_blocked(con, benchmark: str, variant: str | None, opener, *,
                 block_models: int = BLOCK_MODELS) -> BlockedMatrices:
    """The benchmark as :class:`BlockedMatrices` (the variant chosen as for every audit)."""
    from benchcert.tasks.store.matrices import choose_variant

    chosen = choose_variant(con, benchmark, variant)
    plan = plan_read(con, benchmark, chosen)
    if plan is None:
        raise OutOfCoreError(f"{benchmark!r} (variant {chosen!r}) cannot be audited out of core: it has replicates or "
                             "human scores (run the audit without --out-of-core)")
    return BlockedMatrices(benchmark, chosen, plan, opener, block_models=block_models)


def store_opener(db, lock_timeout: float):
    """An opener of the store ``db`` for reading (:class:`BlockedMatrices`)."""
    from benchcert.tasks.store.connection import open_store

    def opener():
        return open_store(db, write=False, lock_timeout=lock_timeout)

    return opener
