"""rank_confidence without K x K matrices (issue #40) against the former dense computation.

At 50,000 models (the leaderboard family of a billion-response audit) the dense version held a
K x K ``better`` matrix, its transpose-or, a reordered copy and its lower triangle: 10 GB. The
pair-list version must give the same ranks, bounds, groups and ``better`` matrix to the last
element, including duplicated pairs, pairs listed both ways round, zero gaps and tied scores.
"""

from __future__ import annotations

import numpy as np
import pytest

from benchcert.stats.comparisons import adjust_pvalues, point_ranks, rank_confidence, shared_gap_scores


def _dense_oracle(est, pa, pb, g, p, alpha, method, order):
    """The former body of rank_confidence (K x K matrices), verbatim but for the names."""
    k = est.size
    score = shared_gap_scores(k, pa, pb, g) if order == "gaps" else est
    rej = adjust_pvalues(p, alpha=alpha, method=method).rejected
    better = np.zeros((k, k), dtype=bool)
    sig_b, sig_a = rej & (g > 0), rej & (g < 0)
    better[pb[sig_b], pa[sig_b]] = True
    better[pa[sig_a], pb[sig_a]] = True
    tol = 1e-12 * max(1.0, float(np.max(np.abs(score))))
    rank = 1 + (score[None, :] > score[:, None] + tol).sum(axis=1)
    distinct = better | better.T
    by_score = np.lexsort((np.arange(k), -np.round(score / tol)))
    d = np.tril(distinct[np.ix_(by_score, by_score)], -1)
    has = d.any(axis=1)
    last = np.where(has, k - 1 - np.argmax(d[:, ::-1], axis=1), -1)
    groups, prev_end, end = [], -1, -1
    for start in range(k):
        end = max(end, start)
        while end + 1 < k and last[end + 1] < start:
            end += 1
        if end > prev_end:
            groups.append(tuple(int(i) for i in by_score[start:end + 1]))
            prev_end = end
    return rank, 1 + better.sum(axis=0), k - better.sum(axis=1), better, tuple(groups)


@pytest.mark.parametrize("seed", range(8))
def test_rank_confidence_equals_the_dense_computation(seed):
    rng = np.random.default_rng(seed)
    for _ in range(25):
        k = int(rng.integers(2, 30))
        # tied scores (a coarse grid) and a few distinct ones
        est = np.round(rng.random(k), int(rng.choice([1, 3])))
        n = int(rng.integers(1, 3 * k))
        pa, pb = rng.integers(0, k, n), rng.integers(0, k, n)
        same = pa == pb
        pb[same] = (pa[same] + 1) % k
        g = np.where(rng.random(n) < 0.15, 0.0, est[pb] - est[pa] + rng.normal(0, 0.05, n))
        p = np.where(rng.random(n) < 0.5, rng.random(n) * 1e-4, rng.random(n))
        for method in ("holm", "bonferroni"):
            for order in ("gaps", "estimate"):
                rc = rank_confidence(est, pa, pb, g, p, alpha=0.05, method=method, order=order)
                rank, lower, upper, better, groups = _dense_oracle(est, pa, pb, g, p, 0.05, method, order)
                np.testing.assert_array_equal(rc.rank, rank)
                np.testing.assert_array_equal(rc.lower, lower)
                np.testing.assert_array_equal(rc.upper, upper)
                np.testing.assert_array_equal(rc.better, better)
                np.testing.assert_array_equal(rc.n_better, better.sum(axis=0))
                np.testing.assert_array_equal(rc.n_worse, better.sum(axis=1))
                assert rc.groups == groups


def test_point_ranks_equal_the_pairwise_count_with_nan():
    """The no-pair fallback of the audit's ranks: NaN (a model with no answered item) is above none."""
    s = np.array([0.5, np.nan, 0.7, 0.5, 0.1, np.nan, 0.7])
    np.testing.assert_array_equal(point_ranks(s), 1 + (s[None, :] > s[:, None]).sum(axis=1))
    np.testing.assert_array_equal(point_ranks(s, tol=0.15), 1 + (s[None, :] > s[:, None] + 0.15).sum(axis=1))
