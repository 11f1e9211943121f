"""Pairwise comparisons of a 0/1 score matrix read a block of models at a time, never whole.

:func:`pack_binary_scores` reads the matrix once, block of model columns by block (any
iterable of ``(lo, hi, block)``: an out-of-core store hands its blocks over one by one), and
keeps only each model's answered and correct bits (2 bits a cell: 20 MB at 80 million cells)
and its column statistics; :func:`pairwise_comparisons_packed` then computes any family of
pairs from those bits. On 0/1 scores every per-subject statistic of a pair is an exact integer
(a popcount), so the results equal :func:`~benchcert.stats.comparisons.pairwise_comparisons`'
on the matrix to the last bit (tested).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from ..validation import check_alpha, check_codes, check_power
from .blocks import _BLOCK_RUNNER, _blocked_groups
from .engine import ComparisonSettings, check_mde_alpha, _stat_rows
from .gram import _bit_pair_sums, _first_words, _from_sums, _packed_bits, _shared_or_raise, _subject_order, _Sums
from .pairwise import _check_pairs, _choose_block_models
from .results import PairedComparison, _check_primary

__all__ = ["PackedScores", "pack_binary_scores", "pack_block_models", "pairwise_comparisons_packed"]

#: A block of model columns read by :func:`pack_binary_scores` is about this many bytes (float64).
PACK_BLOCK_BYTES = 32 * 2**20
#: ... and at least this many models wide (see :func:`_column_variances`).
MIN_PACK_MODELS = 64


def pack_block_models(n_items: int) -> int:
    """Models per block for :func:`pack_binary_scores`: blocks of about :data:`PACK_BLOCK_BYTES`,
    at least :data:`MIN_PACK_MODELS` wide."""
    return max(MIN_PACK_MODELS, PACK_BLOCK_BYTES // (8 * max(int(n_items), 1)))


@dataclass(frozen=True)
class PackedScores:
    """A 0/1 score matrix as each model's bit-packed answered (O) and correct (X) items.

    Attributes
    ----------
    o_bits, x_bits : ndarray of uint64, shape (K, W)
        Row j holds model j's bits, items in subject order, each subject padded to whole words.
    first : ndarray of intp, shape (C,)
        Each subject's first word (``[0]`` without subjects).
    codes : ndarray of int or None
        The subject code of each item (None: no subjects).
    n_items : int
    colstats : tuple of ndarray, shape (K,) each
        Answered items, mean and sample variance (ddof=1) of each column:
        :func:`~benchcert.stats.comparisons.column_stats` of the whole matrix, to the last bit.
    """

    o_bits: np.ndarray
    x_bits: np.ndarray
    first: np.ndarray
    codes: np.ndarray | None
    n_items: int
    colstats: tuple

    @property
    def n_models(self) -> int:
        return self.o_bits.shape[0]

    def shared_counts(self, a, b) -> np.ndarray:
        """Items answered by both models of each pair (a[p], b[p]): popcounts of O_a & O_b."""
        a, b = np.asarray(a, dtype=np.intp), np.asarray(b, dtype=np.intp)
        out = np.empty(a.size, dtype=np.int64)
        step = max(1, (1 << 22) // max(8 * self.o_bits.shape[1], 1))
        for lo in range(0, a.size, step):
            both = self.o_bits[a[lo:lo + step]] & self.o_bits[b[lo:lo + step]]
            out[lo:lo + step] = np.bitwise_count(both).sum(axis=1, dtype=np.int64)
        return out


def _column_variances(block: np.ndarray, mean: np.ndarray, rows: int, whole: bool) -> np.ndarray:
    """Sums of squared deviations of a block's columns, summed as :func:`column_stats` sums them on the
    whole matrix (blocks of ``rows`` rows, each summed down its rows in order). numpy sums a narrow
    array's columns in another order than a wide one's, so a block narrower than the matrix is summed
    by a running sum (``cumsum``: strictly in row order), which is what numpy does down the columns
    of a matrix wider than :data:`MIN_PACK_MODELS` (tested); a block of every column (``whole``) is
    summed exactly as the matrix is."""
    ss = np.zeros(block.shape[1])
    for lo in range(0, block.shape[0], rows):
        b = block[lo:lo + rows]
        dev = np.where(np.isnan(b), 0.0, b - mean)
        dev *= dev
        ss += dev.sum(axis=0) if whole else np.cumsum(dev, axis=0)[-1]
    return ss


#: Cells of a block from which :func:`pack_binary_scores` packs it by the compiled kernel (when numba runs).
PACK_KERNEL_MIN_CELLS = 1 << 16


#: Why the packing kernel cannot compile in this process ("unavailable"), once it failed: a failure
#: is not retried block after block (numba not loaded yet is not remembered: it may start later).
_kernel_state: dict = {"unavailable": None}


def _pack_kernel():
    """:func:`.pack_kernels.pack_block` when numba already runs in this process (starting it costs about
    0.5 CPU s; the out-of-core read that packs a billion responses has started it), else None."""
    if "numba" not in sys.modules or _kernel_state["unavailable"] is not None:
        return None
    try:
        from .pack_kernels import pack_block

        pack_block(np.zeros((1, 1)), np.zeros(1, np.intp), np.array([0, 1], np.intp), np.zeros(1, np.intp), 1, 1)
    except Exception as exc:  # noqa: BLE001 - numba cannot compile or cache here: numpy's form, the same bits
        _kernel_state["unavailable"] = f"{type(exc).__name__}: {exc}"
        return None
    return pack_block


def _checked(column_blocks, n_items: int, n_models: int):
    """The blocks, each checked to continue the previous one with the right shape, and to end at n_models."""
    at = 0
    for lo, hi, block in column_blocks:
        if lo != at or not lo < hi <= n_models or np.shape(block) != (n_items, hi - lo):
            raise ValueError(f"column_blocks must give consecutive blocks (n_items={n_items}, hi - lo) from 0 to "
                             f"n_models={n_models}; got columns {lo}..{hi} shaped {np.shape(block)} after {at}")
        at = hi
        yield lo, hi, block
    if at != n_models:
        raise ValueError(f"column_blocks must cover the n_models={n_models} columns; they ended at {at}")


def _whole(column_blocks, n_items: int, n_models: int):
    """The blocks of a matrix of at most MIN_PACK_MODELS columns as one block (numpy sums a narrow
    matrix's columns in an order a running sum does not reproduce)."""
    parts = list(column_blocks)
    if len(parts) == 1:
        yield parts[0]
        return
    whole = np.full((n_items, n_models), np.nan)
    for lo, hi, block in parts:
        whole[:, lo:hi] = block
    yield 0, n_models, whole


def pack_binary_scores(column_blocks, n_items: int, n_models: int, subjects=None) -> PackedScores:
    """Read a 0/1 score matrix block of models by block into :class:`PackedScores`.

    Parameters
    ----------
    column_blocks : iterable of (lo, hi, ndarray of shape (n_items, hi - lo))
        The matrix's columns lo..hi-1 (scores 0 or 1, NaN = not answered), consecutive from 0 to
        ``n_models`` (``BenchmarkMatrices.column_blocks(pack_block_models(n_items))``). Each block
        is read once and not kept.
    n_items, n_models : int
    subjects : array_like of int, shape (n_items,), optional
        Subject codes (the clustered and fixed-strata tests).

    Returns
    -------
    PackedScores

    Notes
    -----
    Memory: the bits (2 bits a cell, plus each subject's padding to a 64-bit word), one block and
    temporaries of a few MB; no matrix-sized array. A score other than 0, 1 or NaN is a
    ValueError (the answered items' count must be the zeros' plus the ones').
    """
    codes = None if subjects is None else check_codes(subjects, "subjects", length=int(n_items))
    order, starts = _subject_order(codes)
    rows = _stat_rows(n_models)
    o_bits = x_bits = first = None
    n = np.zeros(n_models, dtype=np.int64)
    ones = np.zeros(n_models, dtype=np.int64)
    zeros = np.zeros(n_models, dtype=np.int64)
    ss = np.zeros(n_models)
    column_blocks = _checked(column_blocks, int(n_items), int(n_models))
    if n_models <= MIN_PACK_MODELS:  # narrow: one block of every column (at most MIN_PACK_MODELS wide)
        column_blocks = _whole(column_blocks, n_items, n_models)
    for lo, hi, block in column_blocks:
        # (asked per block: an out-of-core read starts numba when it reads its first block)
        kernel = _pack_kernel() if hi - lo < n_models and block.size >= PACK_KERNEL_MIN_CELLS else None
        if kernel is not None:
            # one block in two compiled passes (stats/comparisons/pack_kernels.py): the same bits
            first, n_words = _first_words(starts, block.shape[0])
            ob, xb, n[lo:hi], ones[lo:hi], zeros[lo:hi], ss[lo:hi] = kernel(
                block, np.arange(block.shape[0]) if order is None else order, np.r_[starts, block.shape[0]],
                first, n_words, rows)
        else:
            ob, xb, first = _packed_bits(block, order, starts, np.arange(hi - lo))
            n[lo:hi] = np.bitwise_count(ob).sum(axis=1, dtype=np.int64)
            ones[lo:hi] = np.bitwise_count(xb).sum(axis=1, dtype=np.int64)
            zeros[lo:hi] = np.count_nonzero(block == 0.0, axis=0)
            # the mean as column_stats computes it (the sum of 0/1 scores is the exact integer `ones`)
            ss[lo:hi] = _column_variances(block, ones[lo:hi] / np.maximum(n[lo:hi], 1), rows, hi - lo == n_models)
        if o_bits is None:
            o_bits = np.empty((n_models, ob.shape[1]), np.uint64)
            x_bits = np.empty_like(o_bits)
        o_bits[lo:hi], x_bits[lo:hi] = ob, xb
    if np.any(zeros + ones != n):
        bad = np.flatnonzero(zeros + ones != n)
        raise ValueError(f"column_blocks: the scores of model column(s) {bad[:5].tolist()} are not all 0 or 1 "
                         "(pairwise_comparisons takes them)")
    colstats = (n, ones / np.maximum(n, 1), ss / np.maximum(n - 1, 1))
    return PackedScores(o_bits=o_bits, x_bits=x_bits, first=first, codes=codes, n_items=int(n_items),
                        colstats=colstats)


def _packed_core(packed: PackedScores, pa, pb, settings: ComparisonSettings) -> PairedComparison:
    """The pairs (pa[p], pb[p]) from the packed bits: the Gram path's statistics as popcounts."""
    sums = _Sums.empty(packed.first.size, pa.size)
    _bit_pair_sums(packed.o_bits, packed.x_bits, packed.first, pa, pb, sums)
    _shared_or_raise(sums, pa, pb, None)
    return _from_sums(sums, pa, pb, settings, np.ones(pa.size, dtype=bool), packed.colstats[0], packed.colstats,
                      clustered=packed.codes is not None)


def pairwise_comparisons_packed(packed: PackedScores, *, pairs=None, baseline=None, alpha=0.05, power=0.8,
                                primary=None, block_models=None, mde_alpha=None) -> PairedComparison:
    """:func:`~benchcert.stats.comparisons.pairwise_comparisons` of a 0/1 matrix from its
    :class:`PackedScores`: the same parameters (the subjects are the packed ones) and the same
    result, to the last bit.

    The pairs are grouped as the matrix computation groups them (the same block sizes, the same
    :func:`~benchcert.stats.comparisons.pair_block_runner`), since a group's tests sum its pairs'
    statistics over subjects together. A single group over every model is computed here, from
    the bits, also under a runner (which would compute it on the flow's matrix); blocked groups
    go to the runner, which reads their columns itself.
    """
    if not isinstance(packed, PackedScores):
        raise ValueError(f"packed must be a PackedScores (pack_binary_scores); got {type(packed).__name__}")
    alpha = check_alpha(alpha)
    power = check_power(power)
    k = packed.n_models
    if k < 2:
        raise ValueError(f"scores must have at least 2 model columns to compare; got {k}")
    codes = packed.codes
    primary = _check_primary(primary, codes is not None, None if codes is None else int(np.unique(codes).size))
    pa, pb = _check_pairs(pairs, baseline, k)
    settings = ComparisonSettings(alpha=alpha, power=power, primary=primary, all_binary=True, family_size=int(pa.size),
                                  mde_alpha=check_mde_alpha(mde_alpha))
    runner = _BLOCK_RUNNER.get()
    bm = _choose_block_models(block_models, runner, True, pa.size, k, packed.first.size)
    if bm >= k:
        return _packed_core(packed, pa, pb, settings)
    return _blocked_groups(k, codes, pa, pb, settings, bm, packed.colstats,
                           lambda g: _packed_core(packed, g.cols[g.pa], g.cols[g.pb], settings), runner)

