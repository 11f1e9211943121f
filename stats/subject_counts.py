"""Per-subject counts of a score matrix, in one blocked pass: what most analyses derive everything from.

Scores, the comparator intervals, the failure-rate bounds, the subsample tables and the
comparisons' per-model figures all start from the same (subject, model) counts: answered
items, their score sum, items scored 1, and whether a model's scores are all 0 or 1. Each
used to compute them with full-size temporaries of the matrix (a sorted copy, a zero-filled
copy, NaN masks: 0.64 GB per float64 copy and 80 MB per mask at 4,000 models x 20,000 items);
here they are computed once, block of rows by block of rows, in a few MB.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .segments import Grouping, sums_by_reduceat
from .validation import check_codes

__all__ = ["SubjectCounts", "subject_counts"]

#: Rows of a block are chosen so that a float64 block of the matrix is about this many bytes.
BLOCK_BYTES = 1 << 20


@dataclass(frozen=True)
class SubjectCounts:
    """A score matrix's (subject, model) counts.

    Attributes
    ----------
    n : ndarray of int64, shape (K, M)
        Answered (non-NaN) items per subject and model.
    total : ndarray of float64, shape (K, M)
        Sum of the answered scores per subject and model: ``np.sum`` over the subject's rows in
        row order with missing scores as 0, the sums :func:`benchcert.stats.segments.segment_sums`
        gives (the same bits for fractional scores; exact integers for 0/1 scores).
    passed : ndarray of int64, shape (K, M)
        Answered items scored 1 or more (for scores in [0, 1]: exactly 1) per subject and model.
    fractional : ndarray of int64, shape (M,)
        Answered items per model scored neither 0 nor 1 or more (for scores in [0, 1]: strictly
        between 0 and 1).
    low, high : ndarray of float64, shape (M,)
        Smallest and largest answered score per model (NaN for a model with none).
    """

    n: np.ndarray
    total: np.ndarray
    passed: np.ndarray
    fractional: np.ndarray
    low: np.ndarray
    high: np.ndarray

    @property
    def in_unit_interval(self) -> bool:
        """Every answered score lies in [0, 1] (what :func:`benchcert.stats.validation.check_scores`
        checks; it gives the error message when not)."""
        return not (np.fmin.reduce(self.low, initial=np.inf) < 0.0 or np.fmax.reduce(self.high, initial=-np.inf) > 1.0)

    @property
    def binary(self) -> np.ndarray:
        """(M,) bool: the model's answered scores are all 0 or 1 (``fractional`` counts scores
        neither 0 nor >= 1, so a score above 1 or below 0 is checked here too)."""
        return (self.fractional == 0) & ~(self.high > 1.0) & ~(self.low < 0.0)

    @property
    def n_items(self) -> np.ndarray:
        """(M,) int64: answered items per model."""
        return self.n.sum(axis=0)


def _chunks(starts: np.ndarray, n_rows: int, block_rows: int, split: bool):
    """(row_lo, row_hi, segment starts within the chunk, continues) of consecutive whole segments of
    at most ``block_rows`` rows; a longer segment is its own chunk, or (``split``) several chunks
    of at most ``block_rows`` rows, all but the first with ``continues`` True."""
    bounds = np.r_[starts, n_rows]
    i = 0
    while i < starts.size:
        lo = int(bounds[i])
        j = i + 1
        while j < starts.size and bounds[j + 1] - lo <= block_rows:
            j += 1
        hi = int(bounds[j])
        if j == i + 1 and hi - lo > block_rows and split:
            for r in range(lo, hi, block_rows):
                yield r, min(hi, r + block_rows), np.zeros(1, np.intp), r > lo
        else:
            yield lo, hi, (bounds[i:j] - lo).astype(np.intp), False
        i = j


def subject_counts(scores, subjects, n_subjects: int | None = None, *,
                   block_bytes: int = BLOCK_BYTES) -> SubjectCounts:
    r"""Answered items, score sums and items scored 1 per (subject, model), and each model's
    fractional scores, in one pass over blocks of rows.

    Parameters
    ----------
    scores : ndarray, shape (n_items, M)
        Scores (NaN = not answered). Not validated here (every analysis validates the scores it
        reads; the counts are a cache of the matrix).
    subjects : array_like of int, shape (n_items,)
        Subject code of each row, in ``0 .. K-1``.
    n_subjects : int, optional
        K (default ``max(subjects) + 1``); a code without rows gives zero rows.
    block_bytes : int, keyword-only
        Size of the float64 block of rows the pass works on (its temporaries are a few of these).

    Returns
    -------
    SubjectCounts

    Notes
    -----
    ``total`` equals :func:`benchcert.stats.segments.segment_sums` of the zero-filled matrix
    with rows in subject order, to the last bit: a subject's rows are summed in row order by
    ``np.sum`` (sequential along axis 0), a subject longer than a block continuing from the
    previous block's sum (prepended as a row, so the additions stay in the same order), or, with
    as many subjects as ``segment_sums`` sums through ``np.add.reduceat``, by ``reduceat`` over
    whole subjects. The integer counts are exact in any order.
    """
    s = np.asarray(scores)
    if s.ndim != 2:
        raise ValueError(f"scores must be 2-D (n_items, n_models); got shape {s.shape}")
    codes = check_codes(subjects, "subjects", length=s.shape[0])
    n_rows, n_models = s.shape
    k = (int(codes.max()) + 1 if codes.size else 0) if n_subjects is None else int(n_subjects)
    if codes.size and int(codes.max()) >= k:
        raise ValueError(f"n_subjects must exceed every subject code (max code {int(codes.max())}); got {k}")
    n = np.zeros((k, n_models), np.int64)
    total = np.zeros((k, n_models))
    passed = np.zeros((k, n_models), np.int64)
    fractional = np.zeros(n_models, np.int64)
    low = np.full(n_models, np.nan)
    high = np.full(n_models, np.nan)
    if n_rows == 0 or n_models == 0:
        return SubjectCounts(n=n, total=total, passed=passed, fractional=fractional, low=low, high=high)
    grouping = Grouping(codes, k)
    in_order = bool(np.all(grouping.order == np.arange(n_rows)))
    # segment_sums' own choice between a sum per block and np.add.reduceat (their float sums differ)
    reduceat = sums_by_reduceat(grouping.starts.size, n_rows)
    block_rows = max(1, block_bytes // (8 * n_models))
    buf = np.empty((block_rows + 1, n_models))
    seg_code = grouping.codes
    seg = 0
    # One column: numpy sums a lone column's rows pairwise, not in order, so a subject split
    # across blocks would not give segment_sums' bits; one model's subject fits in memory whole.
    for lo, hi, local, continues in _chunks(grouping.starts, n_rows, block_rows, split=not reduceat and n_models > 1):
        blk = s[lo:hi] if in_order else np.take(s, grouping.order[lo:hi], axis=0)
        rows = hi - lo
        if rows > block_rows:  # one subject longer than a block (reduceat path): its own buffer
            filled = np.fmax(blk, 0.0)
        else:
            filled = np.fmax(blk, 0.0, out=buf[1:rows + 1])
        obs = ~np.isnan(blk)
        one = blk >= 1.0
        zero = blk == 0.0
        np.fmin(low, np.fmin.reduce(blk, axis=0), out=low)
        np.fmax(high, np.fmax.reduce(blk, axis=0), out=high)
        if continues:  # the rest of the previous chunk's subject: add on in row order
            code = seg_code[seg - 1]
            n[code] += np.count_nonzero(obs, axis=0)
            passed[code] += np.count_nonzero(one, axis=0)
            fractional -= np.count_nonzero(zero, axis=0)
            buf[0] = total[code]
            total[code] = buf[:rows + 1].sum(axis=0)
            continue
        ends = np.r_[local[1:], rows]
        codes_here = seg_code[seg:seg + local.size]
        if reduceat:
            total[codes_here] = np.add.reduceat(filled, local, axis=0)
        for c, a, b in zip(codes_here, local, ends):
            n[c] = np.count_nonzero(obs[a:b], axis=0)
            passed[c] = np.count_nonzero(one[a:b], axis=0)
            fractional -= np.count_nonzero(zero[a:b], axis=0)
            if not reduceat:
                total[c] = filled[a:b].sum(axis=0)
        seg += local.size
    fractional += n.sum(axis=0) - passed.sum(axis=0)
    return SubjectCounts(n=n, total=total, passed=passed, fractional=fractional, low=low, high=high)
