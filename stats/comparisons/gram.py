"""Per-subject sufficient statistics of many model pairs of one score matrix.

Through per-subject Gram matrices of all K columns (O(n_items K^2)), or, for a few pairs
among many models, column by column (O(n_items P)); then every test via :func:`_engine`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._common import _short
from ..segments import Grouping
from .engine import (
    BOUNDED_SCORE_MAX_PAIRS,
    ComparisonSettings,
    PairSums,
    _engine,
    _unpaired_core,
    column_stats,
    column_sums,
)
from .results import PairedComparison


#: Cells of the matrix (rows x used columns) masked and bit-packed at a time by :func:`_packed_bits`.
BITS_BLOCK_CELLS = 1 << 21

#: Pairs are summed column by column (not through Gram matrices) when P * ratio < K^2.
PAIR_DIRECT_RATIO = 50


@dataclass(frozen=True)
class _Sums:
    """Per-subject statistics of P pairs, filled in place by :func:`_pair_sums_gram` or
    :func:`_pair_sums_direct` (the record is frozen, its arrays are buffers).

    ``n_c`` shared items, ``s_c`` sum D, ``q_c`` sum D^2 per subject, shape (C, P); ``n_pos`` /
    ``n_neg`` items with D > 0 / D < 0 (binary pairs; 0 elsewhere), ``sum_a`` / ``sum_b`` each
    model's scores on the shared items, shape (P,).
    """

    n_c: np.ndarray
    s_c: np.ndarray
    q_c: np.ndarray
    n_pos: np.ndarray
    n_neg: np.ndarray
    sum_a: np.ndarray
    sum_b: np.ndarray

    @classmethod
    def empty(cls, c: int, p: int) -> _Sums:
        return cls(n_c=np.empty((c, p)), s_c=np.empty((c, p)), q_c=np.empty((c, p)), n_pos=np.zeros(p),
                   n_neg=np.zeros(p), sum_a=np.zeros(p), sum_b=np.zeros(p))


def _pair_sums_direct(s, codes, pa, pb, both_binary, out: _Sums) -> None:
    """The Gram path's per-subject statistics of each pair, from the pair's two columns (into ``out``).

    The columns the pairs use are copied once model-major with the items in subject order, so
    a pair's two columns are two contiguous rows and its per-subject sums run along them
    (gathering the columns from the item-major matrix chunk by chunk took half of the time at
    4,000 models x 20,000 items). Sums of 0/1 products are exact integers either way, so on
    binary scores the numbers equal the Gram path's (tested); a chunk of pairs at a time keeps
    the (chunk x n_items) products small.
    """
    n_items = s.shape[0]
    if codes is None:
        order, starts = None, np.zeros(1, dtype=np.intp)
    else:
        g = Grouping(codes)
        order, starts = g.order, g.starts
    used, inv = np.unique(np.r_[pa, pb], return_inverse=True)
    ia, ib = inv[:pa.size], inv[pa.size:]
    every = used.size == s.shape[1]
    xt = np.empty((used.size, n_items))
    tile = 512  # transposed in tiles that fit in cache: 3-4x faster than one strided copy
    for r in range(0, n_items, tile):
        rows = s[r:r + tile] if order is None else s[order[r:r + tile]]
        if not every:
            rows = rows[:, used]
        for c in range(0, used.size, tile):
            xt[c:c + tile, r:r + tile] = rows[:, c:c + tile].T
    ot = ~np.isnan(xt)
    np.copyto(xt, 0.0, where=~ot)

    def seg(v):
        return np.add.reduceat(v, starts, axis=1).T  # (subjects, chunk)

    step = max(1, (1 << 22) // max(n_items, 1))
    for lo in range(0, pa.size, step):
        a, b = ia[lo:lo + step], ib[lo:lo + step]
        oa, ob, xa, xb = ot[a], ot[b], xt[a], xt[b]
        oxb, oxa = oa * xb, ob * xa
        ox_ab = seg(oxb)  # (O^T X)[a, b]: b's scores on the items a answered
        ox_ba = seg(oxa)
        xx = seg(xa * xb)
        out.n_c[:, lo:lo + step] = seg((oa & ob).astype(np.float64))
        out.s_c[:, lo:lo + step] = ox_ab - ox_ba
        out.q_c[:, lo:lo + step] = seg(oxb * xb) + seg(oxa * xa) - 2.0 * xx
        bb = both_binary[lo:lo + step]
        out.n_pos[lo:lo + step] = np.where(bb, (ox_ab - xx).sum(axis=0), 0.0)
        out.n_neg[lo:lo + step] = np.where(bb, (ox_ba - xx).sum(axis=0), 0.0)
        out.sum_b[lo:lo + step] = ox_ab.sum(axis=0)
        out.sum_a[lo:lo + step] = ox_ba.sum(axis=0)


def _first_words(starts, n_items: int):
    """(each subject's first word, the words in all) of :func:`_packed_bits`' layout: each subject's
    rows (from ``starts``) padded to whole 64-bit words."""
    words = -(-np.diff(np.r_[starts, n_items]) // 64)
    return np.r_[0, np.cumsum(words)[:-1]].astype(np.intp), int(words.sum())


def _packed_bits(s, order, starts, used):
    """Answered (O) and correct (X) bits of the ``used`` columns of a 0/1 matrix, model-major: row j of
    each (len(used), W) uint64 array holds column used[j]'s bits, every subject (rows in ``order``,
    subjects starting at ``starts``) padded to whole 64-bit words; and each subject's first word."""
    n_items = s.shape[0]
    bounds = np.r_[starts, n_items]
    first, n_words = _first_words(starts, n_items)
    every = used.size == s.shape[1]
    o_bits = np.zeros((used.size, n_words * 8), np.uint8)
    x_bits = np.zeros_like(o_bits)
    step = 64 * max(1, BITS_BLOCK_CELLS // (64 * max(used.size, 1)))  # rows per block: whole words
    for k in range(starts.size):
        for lo in range(int(bounds[k]), int(bounds[k + 1]), step):
            hi = min(int(bounds[k + 1]), lo + step)
            rows = s[lo:hi] if order is None else s[order[lo:hi]]
            if not every:
                rows = rows[:, used]
            at = (int(first[k]) * 64 + lo - int(bounds[k])) // 8
            # masks transposed to model-major first: packing along the contiguous axis is 2x faster
            ob = np.packbits(np.ascontiguousarray((~np.isnan(rows)).T), axis=1)
            o_bits[:, at:at + ob.shape[1]] = ob
            x_bits[:, at:at + ob.shape[1]] = np.packbits(np.ascontiguousarray((rows == 1.0).T), axis=1)
    return o_bits.view(np.uint64), x_bits.view(np.uint64), first


def _subject_order(codes):
    """The rows in subject order (None: already) and each subject's first row there, for :func:`_packed_bits`."""
    if codes is None:
        return None, np.zeros(1, dtype=np.intp)
    g = Grouping(codes)
    return (None if np.array_equal(g.order, np.arange(g.order.size)) else g.order), g.starts


def _pair_sums_bits(s, codes, pa, pb, out: _Sums) -> None:
    """:func:`_pair_sums_direct` for pairs of 0/1 columns, from bit-packed answered and correct masks:
    per subject and pair, the counts n_c = |O_a & O_b|, (O^T X)_ab = |O_a & X_b|, (O^T X)_ba and
    (X^T X)_ab = |X_a & X_b| are popcounts, and the statistics are exact integer combinations of
    them (X^2 = X): the same numbers as the float path, without a float copy of the columns."""
    order, starts = _subject_order(codes)
    used, inv = np.unique(np.r_[pa, pb], return_inverse=True)
    o_bits, x_bits, first = _packed_bits(s, order, starts, used)
    _bit_pair_sums(o_bits, x_bits, first, inv[:pa.size], inv[pa.size:], out)


def _bit_pair_sums(o_bits, x_bits, first, ia, ib, out: _Sums) -> None:
    """The per-subject statistics of the pairs (rows ``ia[p]``, ``ib[p]`` of the bit-packed masks of
    :func:`_packed_bits`; subjects starting at words ``first``) as popcounts (into ``out``)."""
    def seg(v):  # popcounts per subject: (subjects, chunk)
        return np.add.reduceat(np.bitwise_count(v), first, axis=1, dtype=np.int64).T.astype(np.float64)

    step = max(1, (1 << 22) // max(8 * o_bits.shape[1], 1))
    for lo in range(0, ia.size, step):
        a, b = ia[lo:lo + step], ib[lo:lo + step]
        oa, ob, xa, xb = o_bits[a], o_bits[b], x_bits[a], x_bits[b]
        ox_ab = seg(oa & xb)
        ox_ba = seg(ob & xa)
        xx = seg(xa & xb)
        out.n_c[:, lo:lo + step] = seg(oa & ob)
        out.s_c[:, lo:lo + step] = ox_ab - ox_ba
        out.q_c[:, lo:lo + step] = ox_ab + ox_ba - 2.0 * xx
        out.n_pos[lo:lo + step] = (ox_ab - xx).sum(axis=0)
        out.n_neg[lo:lo + step] = (ox_ba - xx).sum(axis=0)
        out.sum_b[lo:lo + step] = ox_ab.sum(axis=0)
        out.sum_a[lo:lo + step] = ox_ba.sum(axis=0)


def _pair_sums_gram(s, obs, blocks, pa, pb, both_binary, out: _Sums) -> None:
    """Per-subject statistics of each pair from per-subject Gram matrices of all K columns (into ``out``;
    ``blocks`` are the row indices of each subject)."""
    x = np.where(obs, s, 0.0)
    o = obs.astype(float)
    n_pos, n_neg, sum_a, sum_b = out.n_pos, out.n_neg, out.sum_a, out.sum_b
    for i, rows in enumerate(blocks):
        ob, xb = o[rows], x[rows]
        oo = ob.T @ ob
        ox = ob.T @ xb
        xx = xb.T @ xb
        ox2 = ob.T @ (xb * xb)
        out.n_c[i] = oo[pa, pb]
        out.s_c[i] = ox[pa, pb] - ox[pb, pa]
        out.q_c[i] = ox2[pa, pb] + ox2[pb, pa] - 2.0 * xx[pa, pb]
        n_pos += np.where(both_binary, ox[pa, pb] - xx[pa, pb], 0.0)
        n_neg += np.where(both_binary, ox[pb, pa] - xx[pa, pb], 0.0)
        sum_b += ox[pa, pb]
        sum_a += ox[pb, pa]


def _pairwise_core(s, codes, pa, pb, settings: ComparisonSettings, cols=None, colstats=None,
                   colstats_of_cols=False, binary_col=None, colsums=None) -> PairedComparison:
    """Every pair at once: per-subject statistics (Gram matrices of all K columns, or pair by pair for
    a few pairs among many models), then every test.

    ``cols`` are the whole matrix's column indices of the columns of ``s`` (blocked path: names
    pairs in errors, picks ``colstats``), ``colstats`` the whole matrix's :func:`column_stats`
    (of the columns of ``s`` when ``colstats_of_cols``); ``binary_col`` (0/1 flags) and
    ``colsums`` (answered counts and sums) of ``s`` from :func:`~.engine.column_sums` when the caller has them.
    """
    k = s.shape[1]
    P = pa.size
    if binary_col is None or colsums is None:
        # One blocked pass gives the answered counts, sums and 0/1 flags (engine.column_sums).
        n_col, total_col, binary_of_s = column_sums(s)
        binary_col = binary_of_s if binary_col is None else binary_col
        colsums = (n_col, total_col) if colsums is None else colsums
    if codes is not None:
        g = Grouping(codes)
        order, starts = g.order, np.r_[g.starts, s.shape[0]]
        blocks = [order[starts[i]:starts[i + 1]] for i in range(len(g.starts))]
    else:
        blocks = [slice(None)]
    sums = _Sums.empty(len(blocks), P)
    both_binary = binary_col[pa] & binary_col[pb]
    obs = None
    if P * PAIR_DIRECT_RATIO < k * k:
        # Few pairs for many models (the leaderboard or baseline family): sums over each pair's
        # two columns cost O(n_items P), where the Gram matrices cost O(n_items K^2); on 0/1
        # columns as popcounts of their bits (exact integers either way).
        if both_binary.all():
            _pair_sums_bits(s, codes, pa, pb, sums)
        else:
            _pair_sums_direct(s, codes, pa, pb, both_binary, sums)
    else:
        obs = ~np.isnan(s)
        _pair_sums_gram(s, obs, blocks, pa, pb, both_binary, sums)
    _shared_or_raise(sums, pa, pb, cols)
    d_items = None
    if not both_binary.all():
        # Sign counts are not bilinear in the scores; count them directly for non-binary pairs (and keep
        # their differences for the bounded score test in a small family).
        obs = ~np.isnan(s) if obs is None else obs
        if max(settings.family_size, P) <= BOUNDED_SCORE_MAX_PAIRS:
            d_items = [None] * P
        for j in np.flatnonzero(~both_binary):
            sh = obs[:, pa[j]] & obs[:, pb[j]]
            d = s[sh, pb[j]] - s[sh, pa[j]]
            sums.n_pos[j], sums.n_neg[j] = (d > 0).sum(), (d < 0).sum()
            if d_items is not None:
                d_items[j] = d
    n_ans = colsums[0]
    if colstats is None:
        colstats = column_stats(s, sums=colsums)
    else:  # of the whole matrix (blocked path): the same numbers as the dense path's
        colstats = tuple(c if cols is None or colstats_of_cols else c[cols] for c in colstats)
    return _from_sums(sums, pa, pb, settings, both_binary, n_ans, colstats, clustered=codes is not None,
                      d_items=None if d_items is None else tuple(d_items))


def _shared_or_raise(sums: _Sums, pa, pb, cols) -> None:
    """ValueError naming the pairs (whole-matrix columns: ``cols`` maps the local ones) that share no item."""
    n = np.rint(sums.n_c).sum(axis=0)
    if np.any(n == 0):
        bad = np.flatnonzero(n == 0)
        ga, gb = (pa, pb) if cols is None else (cols[pa], cols[pb])
        raise ValueError(f"scores: model columns {_short([(int(ga[j]), int(gb[j])) for j in bad])} share no "
                         "answered item; there is nothing to compare")


def _from_sums(sums: _Sums, pa, pb, settings: ComparisonSettings, both_binary, n_ans, colstats, *,
               clustered: bool, d_items: tuple | None = None) -> PairedComparison:
    """Every test of the pairs (pa[p], pb[p]) from their per-subject statistics ``sums``, each column's
    answered items ``n_ans`` and (count, mean, variance) ``colstats`` (indexed like pa and pb)."""
    # Gram sums of 0/1 values are exact integers; rounding guards the float path anyway.
    n_c = np.rint(sums.n_c)
    n = n_c.sum(axis=0)
    n_pos, n_neg = np.rint(sums.n_pos), np.rint(sums.n_neg)
    n_only_a = n_ans[pa] - n
    n_only_b = n_ans[pb] - n
    fields = _engine(PairSums(n_c, sums.s_c, sums.q_c, n_pos.astype(np.int64), n_neg.astype(np.int64), both_binary,
                              n_only_a.astype(np.int64), n_only_b.astype(np.int64), clustered=clustered,
                              d_items=d_items),
                     settings)
    fields["n"] = np.asarray(fields["n"]).astype(np.int64)
    cn, cm, cv = colstats
    fields["tests"]["unpaired_z"] = _unpaired_core(cm[pa], cv[pa], cn[pa], cm[pb], cv[pb], cn[pb], settings.alpha)
    return PairedComparison(mean_a=sums.sum_a / n, mean_b=sums.sum_b / n, pair_a=pa, pair_b=pb, **fields)
