"""Paired comparisons of many model pairs of one score matrix (every pair, given pairs, or
each model against a baseline), dense or in memory-budgeted blocks of models.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from .._blas import loop_blas_threads
from ..validation import check_alpha, check_codes, check_power, check_scores
from . import gram as _gram  # PAIR_DIRECT_RATIO read at call time: one knob for both uses
from .blocks import _BLOCK_RUNNER, _pairwise_blocked
from .engine import ComparisonSettings, check_mde_alpha, column_sums
from .gram import _pairwise_core
from .results import PairedComparison, _check_primary


#: Pairwise comparisons hold per-subject statistics of every pair (3 arrays of C x P float64).
#: Up to this many bytes they are computed densely, all pairs at once; beyond, in blocks of
#: model pairs of at most BLOCK_PAIR_BYTES each (:func:`pairwise_comparisons`).
DENSE_PAIR_BYTES = 512 * 2**20
BLOCK_PAIR_BYTES = 128 * 2**20


def _pairwise_comparisons_iv(scores, subjects, pairs, baseline, alpha, power, primary, mde_alpha):
    alpha, mde_alpha = check_alpha(alpha), check_mde_alpha(mde_alpha)
    power = check_power(power)
    s = check_scores(scores, "scores", ndim=2, allow_nan=True)
    k = s.shape[1]
    if k < 2:
        raise ValueError(f"scores must have at least 2 model columns to compare; got {k}")
    codes = None if subjects is None else check_codes(subjects, "subjects", length=s.shape[0])
    primary = _check_primary(primary, codes is not None, None if codes is None else int(np.unique(codes).size))
    pa, pb = _check_pairs(pairs, baseline, k)
    return s, codes, pa, pb, alpha, power, primary, mde_alpha


def _check_pairs(pairs, baseline, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The (A, B) columns of the pairs asked for (``pairs``, every column against ``baseline``, or every
    pair i < j) among ``k`` columns; ValueError naming the parameter otherwise."""
    if pairs is not None and baseline is not None:
        raise ValueError(f"give pairs or baseline, not both; got pairs and baseline={baseline!r}")
    if baseline is not None:
        if isinstance(baseline, (bool, np.bool_)) or not isinstance(baseline, numbers.Integral) \
                or not 0 <= baseline < k:
            raise ValueError(f"baseline must be a model column index in [0, {k}); got {baseline!r}")
        others = np.array([j for j in range(k) if j != baseline])
        pa, pb = np.full(others.shape, int(baseline)), others
    elif pairs is not None:
        p = np.asarray(pairs)
        if p.ndim != 2 or p.shape[1] != 2 or not np.issubdtype(p.dtype, np.integer) or p.shape[0] == 0:
            raise ValueError(f"pairs must be a non-empty (P, 2) integer array of column indices; got shape "
                             f"{p.shape} and dtype {p.dtype}")
        if p.min() < 0 or p.max() >= k or np.any(p[:, 0] == p[:, 1]):
            bad = p[(p.min(axis=1) < 0) | (p.max(axis=1) >= k) | (p[:, 0] == p[:, 1])][0]
            raise ValueError(f"pairs must index two different columns in [0, {k}); got {bad.tolist()}")
        pa, pb = p[:, 0], p[:, 1]
    else:
        pa, pb = np.triu_indices(k, 1)
    return pa.astype(np.intp), pb.astype(np.intp)


def _choose_block_models(block_models, runner, all_binary: bool, n_pairs: int, k: int, c: int) -> int:
    """The model block size the pairs are computed in (:func:`pairwise_comparisons`' rule)."""
    if block_models is None:
        if runner is not None and all_binary and n_pairs * _gram.PAIR_DIRECT_RATIO >= k ** 2:
            # Many pairs (the Gram path, O(n_items K^2)): by blocks. Exact integer sums: any blocking gives
            # the same numbers. A few pairs among many models (leaderboard, baseline) cost O(n_items P) and
            # would touch most pairs of blocks: one group.
            return runner.block_models
        if c * n_pairs * 24 <= DENSE_PAIR_BYTES:
            return k
        # a block pair's statistics (C x at most B^2 pairs x 3 arrays) within the budget
        return max(2, int(math.isqrt(BLOCK_PAIR_BYTES // (24 * c))))
    if isinstance(block_models, (bool, np.bool_)) or not isinstance(block_models, numbers.Integral) \
            or block_models < 1:
        raise ValueError(f"block_models must be a positive integer; got {block_models!r}")
    return int(block_models)


def pairwise_comparisons(scores, subjects=None, *, pairs=None, baseline=None, alpha=0.05, power=0.8,
                         primary=None, block_models=None, mde_alpha=None) -> PairedComparison:
    r"""Paired comparisons of many model pairs of one score matrix at once.

    Parameters
    ----------
    scores : array_like, shape (n_items, K)
        Scores in [0, 1]; NaN = not answered.
    subjects : array_like of int, shape (n_items,), optional
        Subject codes (clustered and fixed-strata tests; see :func:`paired_comparison`).
    pairs : array_like of int, shape (P, 2), optional, keyword-only
        Column pairs (A, B) to compare (gap = B - A). Default: every pair i < j.
    baseline : int, optional, keyword-only
        Compare every other column (B) against this column (A) instead.
    alpha, power, primary
        As in :func:`paired_comparison` (marginal level; adjust the family with
        :func:`adjust_pvalues`).
    mde_alpha : float, optional, keyword-only
        The two-sided level the MDE (``mde``) is stated at; default ``alpha``. A caller that reads the
        family's verdicts off its Bonferroni intervals (:func:`family_intervals`) passes ``alpha / P``, so
        the MDE beside each verdict is what that verdict can detect (recorded as ``mde_alpha``).
    block_models : int, optional, keyword-only
        Compute the pairs in blocks: pairs are grouped by the blocks of ``block_models``
        model columns their two models fall in, and each group is computed from those
        columns alone. Default: dense (all pairs at once) while the per-subject statistics
        fit in :data:`DENSE_PAIR_BYTES`, else blocks sized to :data:`BLOCK_PAIR_BYTES`. The
        result is the same either way (tested to equality).

    Returns
    -------
    PairedComparison
        Arrays of shape (P,); ``pair_a``/``pair_b`` give the columns.

    Notes
    -----
    Each pair's result equals :func:`paired_comparison` on its two columns (tested); it is
    computed from per-subject Gram matrices instead of P item-length difference vectors.
    With :math:`O` the observed mask and :math:`X` the zero-filled scores of a subject,
    :math:`O^\top O` counts shared items, :math:`O^\top X` sums one model's scores over the
    items shared with another, :math:`X^\top X` sums products and :math:`O^\top X^2` squares;
    for pair (a, b): :math:`\sum D = (O^\top X)_{ab} - (O^\top X)_{ba}`,
    :math:`\sum D^2 = (O^\top X^2)_{ab} + (O^\top X^2)_{ba} - 2(X^\top X)_{ab}` and, for
    binary scores, :math:`n_B = (O^\top X)_{ab} - (X^\top X)_{ab}`. The cost is
    O(n_items K^2) in BLAS with O(C K^2) memory, instead of O(n_items P) for P difference vectors;
    the statistics kept per subject and pair are O(C P) dense, O(C B^2) in blocks of B models.
    The Gram products run with one BLAS thread (stats/_blas.py).
    """
    s, codes, pa, pb, alpha, power, primary, mde_alpha = _pairwise_comparisons_iv(
        scores, subjects, pairs, baseline, alpha, power, primary, mde_alpha)
    n_col, total_col, binary_col = column_sums(s)  # one pass: answered, sums (column_stats' first), 0/1
    all_binary = bool(binary_col[pa].all() and binary_col[pb].all())
    c = 1 if codes is None else int(np.unique(codes).size)
    runner = _BLOCK_RUNNER.get()
    block_models = _choose_block_models(block_models, runner, all_binary, pa.size, s.shape[1], c)
    settings = ComparisonSettings(alpha=alpha, power=power, primary=primary, all_binary=all_binary,
                                  family_size=int(pa.size), mde_alpha=mde_alpha)
    with loop_blas_threads():  # one small Gram product per subject: threads only add overhead
        if block_models >= s.shape[1] and runner is None:
            return _pairwise_core(s, codes, pa, pb, settings, binary_col=binary_col, colsums=(n_col, total_col))
        return _pairwise_blocked(s, codes, pa, pb, settings, min(int(block_models), s.shape[1]), runner=runner)

