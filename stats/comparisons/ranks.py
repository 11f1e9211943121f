"""Simultaneous rank intervals and groups of statistically tied models, from pairwise tests."""

from __future__ import annotations

import numpy as np

from ..validation import check_alpha
from .multiplicity import adjust_pvalues
from .results import RankConfidence


def _rank_confidence_iv(estimate, pair_a, pair_b, gap, p_values, alpha, method, order="gaps"):
    alpha = check_alpha(alpha)
    if order not in ("gaps", "estimate"):
        raise ValueError(f"order must be 'gaps' or 'estimate'; got {order!r}")
    if method not in ("holm", "bonferroni"):
        raise ValueError(f"method must be 'holm' or 'bonferroni'; got {method!r}")
    est = np.asarray(estimate, dtype=float)
    if est.ndim != 1 or est.size < 2 or not np.all(np.isfinite(est)):
        raise ValueError(f"estimate must be a finite 1-D array of at least 2 model scores; got shape {est.shape}")
    k = est.size
    pa, pb = np.asarray(pair_a), np.asarray(pair_b)
    g = np.asarray(gap, dtype=float)
    p = np.asarray(p_values, dtype=float)
    if not (pa.shape == pb.shape == g.shape == p.shape) or pa.ndim != 1 or pa.size == 0:
        raise ValueError(f"pair_a, pair_b, gap and p_values must be 1-D of one length; got shapes "
                         f"{pa.shape}, {pb.shape}, {g.shape}, {p.shape}")
    if not (np.issubdtype(pa.dtype, np.integer) and np.issubdtype(pb.dtype, np.integer)) \
            or pa.min() < 0 or pb.min() < 0 or pa.max() >= k or pb.max() >= k or np.any(pa == pb):
        raise ValueError(f"pair_a and pair_b must be integer indices of two different models in [0, {k})")
    if not np.all(np.isfinite(g)) or not np.all((p >= 0) & (p <= 1)):
        raise ValueError("gap must be finite and p_values in [0, 1]")
    return est, pa, pb, g, p, alpha, method


def shared_gap_scores(k, pair_a, pair_b, gap) -> np.ndarray:
    """Each model's mean gap against the models it was compared with, on the items each pair
    shares: sum over its pairs of (its score - the other's) / number of its pairs; 0 for a model
    in no pair. With complete data this is K/(K - 1) (p_i - mean p), so it orders models like
    their pooled scores; with missing items it orders them on what the tests compare."""
    pa, pb, g = np.asarray(pair_a), np.asarray(pair_b), np.asarray(gap, dtype=float)
    tot = np.bincount(pb, weights=g, minlength=k) - np.bincount(pa, weights=g, minlength=k)
    cnt = np.bincount(pb, minlength=k) + np.bincount(pa, minlength=k)
    return np.where(cnt > 0, tot / np.maximum(cnt, 1), 0.0)


def point_ranks(score, *, tol: float = 0.0) -> np.ndarray:
    """``1 + #{j: score_j > score_i + tol}`` for each i (1 = best; ties share the better rank), by a
    sorted search instead of the K x K comparison (2.5 GB at 50,000 models). NaN scores are above
    no score (a comparison with NaN is false) and rank 1 themselves, as in the comparison."""
    s = np.asarray(score, dtype=float)
    above = np.sort(s[~np.isnan(s)])
    return (1 + above.size - np.searchsorted(above, s + tol, side="right")).astype(np.int64)


def rank_confidence(estimate, pair_a, pair_b, gap, p_values, *, alpha=0.05, method="holm",
                    order="gaps") -> RankConfidence:
    r"""Simultaneous rank intervals and tied groups from pairwise tests.

    Parameters
    ----------
    estimate : array_like, shape (K,)
        Model scores (higher is better), used for the point rank and the order of groups.
    pair_a, pair_b, gap, p_values : array_like, shape (P,)
        Pairwise results (gap = model pair_b - model pair_a, two-sided raw p-values), e.g.
        from :func:`pairwise_comparisons`. Pairs not listed count as not distinguished.
    alpha : float, keyword-only
    method : {"holm", "bonferroni"}, keyword-only
        FWER control over the P pairwise tests.
    order : {"gaps", "estimate"}, keyword-only
        What the point rank and the tied groups' order are by: ``"gaps"`` (default) each
        model's mean gap on shared items (:func:`shared_gap_scores`), the same items the tests
        use; ``"estimate"`` the scores given. With missing items the two differ: a model that
        skipped hard items can have the higher own-items score and still lose on the items
        both answered.

    Returns
    -------
    RankConfidence

    Notes
    -----
    A pair is *distinguished* when its adjusted p-value is <= alpha; the direction is the
    sign of its gap. With :math:`B_i` the models significantly better than i and
    :math:`W_i` those significantly worse, the rank interval is
    :math:`[1 + |B_i|,\; K - |W_i|]`. On the event that no directional claim is false -
    probability >= 1 - alpha for Bonferroni through simultaneous intervals, and for Holm
    by its step-down FWER control together with the sign of two-sided z-tests (Shaffer
    1980 for independent statistics; checked by simulation here for pairwise comparisons
    that share models) - :math:`B_i` holds only models truly better than i and :math:`W_i`
    only models truly worse, so every model's whole range of true ranks
    :math:`[1 + \#\{j: \mu_j > \mu_i\},\; K - \#\{j: \mu_j < \mu_i\}]` lies inside its
    interval, for all models simultaneously (the construction of Al Mohamad, Goeman &
    van Zwet 2022, Biometrics, with pairwise tests).

    Tied groups are the "homogeneous subsets" of multiple-comparison displays: in the
    order of ``estimate`` (best first), maximal runs of consecutive models in which no pair
    is distinguished. A model can sit in several groups; a model distinguished from every
    other forms a group of one. Being in a group means *not shown different* at this
    level - the data are compatible with a tie, not proof of one.
    """
    est, pa, pb, g, p, alpha, method = _rank_confidence_iv(estimate, pair_a, pair_b, gap, p_values, alpha, method,
                                                           order)
    k = est.size
    score = shared_gap_scores(k, pa, pb, g) if order == "gaps" else est
    rej = adjust_pvalues(p, alpha=alpha, method=method).rejected
    better = _better_pairs(k, pa, pb, g, rej)
    n_better = np.bincount(better[:, 1], minlength=k)  # models better than i
    n_worse = np.bincount(better[:, 0], minlength=k)
    # Scores within float noise of each other are ties (the mean gaps are sums of differences).
    tol = 1e-12 * max(1.0, float(np.max(np.abs(score))))
    rank = point_ranks(score, tol=tol)
    lower = 1 + n_better
    upper = k - n_worse
    by_score = np.lexsort((np.arange(k), -np.round(score / tol)))
    groups = _tied_runs(better[:, 0], better[:, 1], by_score)
    return RankConfidence(est, rank.astype(np.int64), lower.astype(np.int64), upper.astype(np.int64), better,
                          tuple(groups), alpha, k, method,
                          (f"pairwise two-sided tests adjusted by {method} (FWER <= alpha); a pair counts as "
                           "different in the direction of its gap",
                           "rank intervals [1 + #significantly better, K - #significantly worse] hold for all "
                           "models simultaneously when no directional claim is false",
                           "tied groups: maximal runs, in score order, with no pair shown different; "
                           "'tied' means not distinguished at this level, not shown equal",
                           "point rank and order by " + ("each model's mean gap on the items each pair shares"
                                                         if order == "gaps" else "the scores given")),
                          order_score=score)


def _better_pairs(k: int, pa, pb, g, rej) -> np.ndarray:
    """The distinguished pairs as (better, worse) model rows, each once, sorted: the nonzero
    entries of the K x K matrix the rank intervals were once counted from, without the matrix."""
    sig_b, sig_a = rej & (g > 0), rej & (g < 0)
    hi = np.r_[pb[sig_b], pa[sig_a]].astype(np.int64)
    lo = np.r_[pa[sig_b], pb[sig_a]].astype(np.int64)
    key = np.unique(hi * k + lo)
    return np.column_stack([key // k, key % k])


def _tied_runs(a: np.ndarray, b: np.ndarray, by_score: np.ndarray) -> list[tuple[int, ...]]:
    """Maximal runs of ``by_score`` (score order) with no distinct pair inside, in order; the
    distinct pairs are (a[m], b[m]), either way round.

    A run [s, e] has no distinct pair iff every position p in (s, e] has its last distinct
    predecessor (the largest q < p, in score order, distinct from p) before s; the largest such
    e never decreases with s, so one pass finds every maximal run. The predecessor table comes
    from the pairs themselves, O(K + P): no K x K matrix (three of them, 7.5 GB, at 50,000
    models), nor the O(K^3) check of each run against each extension (38 s at 3,000 models).
    """
    k = by_score.size
    pos = np.empty(k, dtype=np.int64)
    pos[by_score] = np.arange(k)
    pa, pb = pos[np.asarray(a, dtype=np.int64)], pos[np.asarray(b, dtype=np.int64)]
    later, earlier = np.maximum(pa, pb), np.minimum(pa, pb)
    keep = later > earlier
    last = np.full(k, -1, dtype=np.int64)
    np.maximum.at(last, later[keep], earlier[keep])
    groups: list[tuple[int, ...]] = []
    prev_end = end = -1
    for start in range(k):
        end = max(end, start)
        while end + 1 < k and last[end + 1] < start:
            end += 1
        if end > prev_end:  # not contained in the previous maximal run
            groups.append(tuple(int(i) for i in by_score[start:end + 1]))
            prev_end = end
    return groups
