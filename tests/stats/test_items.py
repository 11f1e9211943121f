"""Item statistics, the rank-sum permutation test and reliability (stats/items.py): oracles against
direct computations, scipy and enumeration."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from benchcert.stats.items import (
    EXACT_MAX_MODELS,
    broken_key_test,
    feldt_interval,
    item_statistics,
    rank_sum_cdf,
    reliability,
    rest_scores,
)


def test_rank_sum_cdf_equals_enumeration():
    n = 8
    cdf = rank_sum_cdf(n)
    for k in range(n + 1):
        sums = [sum(c) for c in itertools.combinations(range(1, n + 1), k)]
        for w in range(cdf.shape[1]):
            assert cdf[k, w] == pytest.approx(np.mean(np.array(sums) <= w), abs=1e-12)


def test_rank_sum_cdf_equals_scipy_exact_mann_whitney():
    # P(W <= w) with W the rank sum of k of n = P(U <= w - k(k+1)/2), U Mann-Whitney's (scipy exact)
    n, k = 29, 7
    cdf = rank_sum_cdf(n)
    x = np.arange(1, k + 1, dtype=float)  # the k lowest ranks: U = 0, the extreme
    y = np.arange(k + 1, n + 1, dtype=float)
    p = stats.mannwhitneyu(x, y, alternative="less", method="exact").pvalue
    assert cdf[k, k * (k + 1) // 2] == pytest.approx(p, rel=1e-9)
    assert cdf[k, k * (k + 1) // 2] == pytest.approx(1 / math.comb(n, k), rel=1e-9)
    x2 = np.array([1, 2, 5, 9, 14, 20, 28], dtype=float)
    y2 = np.setdiff1d(np.arange(1, n + 1), x2).astype(float)
    p2 = stats.mannwhitneyu(x2, y2, alternative="less", method="exact").pvalue
    assert cdf[k, int(x2.sum())] == pytest.approx(p2, rel=1e-9)


def test_rank_sum_cdf_refuses_out_of_range():
    with pytest.raises(ValueError, match="n must be"):
        rank_sum_cdf(EXACT_MAX_MODELS + 1)


def test_item_statistics_against_direct_computation():
    rng = np.random.default_rng(3)
    s = (rng.random((40, 12)) < rng.random(12)[None, :]).astype(float)
    s[0] = 1.0                       # inert, all right
    s[1] = 0.0                       # inert, all wrong
    s[5, 3] = np.nan                 # a missing response
    st = item_statistics(s)
    assert st.inert[:2].all() and not st.inert[2:].any()
    assert np.isnan(st.discrimination[:2]).all()
    rest = rest_scores(s)
    for i in range(2, 40):
        ok = ~np.isnan(s[i])
        assert st.difficulty[i] == pytest.approx(np.nanmean(s[i]))
        assert st.n_models[i] == ok.sum()
        other = np.delete(s, i, axis=0)
        r = np.nanmean(other, axis=0)
        assert np.allclose(rest[i][ok], r[ok])
        if np.std(s[i][ok]) > 0:
            assert st.discrimination[i] == pytest.approx(np.corrcoef(s[i][ok], r[ok])[0, 1], abs=1e-9)


def test_broken_key_test_p_values_are_the_exact_permutation_ones():
    # the p-value equals the share of all k-subsets of models whose rank sum is at most the observed one
    rng = np.random.default_rng(4)
    s = (rng.random((30, 9)) < np.linspace(0.2, 0.8, 9)[None, :]).astype(float)
    bk = broken_key_test(s, level=0.1, rng=np.random.default_rng(0))
    rest = rest_scores(s)
    for i in np.flatnonzero(~np.isnan(bk.p_value)):
        if np.unique(rest[i]).size < 9:
            continue  # ties are broken at random: the oracle below assumes none
        ranks = stats.rankdata(rest[i])
        w = ranks[s[i] == 1].sum()
        k = int(s[i].sum())
        sums = np.array([sum(c) for c in itertools.combinations(range(1, 10), k)])
        assert bk.p_value[i] == pytest.approx(np.mean(sums <= w), abs=1e-12)
        assert bk.min_p[i] == pytest.approx(1 / math.comb(9, k))


def test_broken_key_test_finds_a_reversed_item_and_skips_fractional_and_inert():
    rng = np.random.default_rng(5)
    theta = rng.normal(size=60)
    p = 1 / (1 + np.exp(-(1.2 * (theta[None, :] - rng.normal(size=(400, 1))))))
    s = (rng.random(p.shape) < p).astype(float)
    s[0] = (theta < 0).astype(float)   # right answers exactly on the weaker half
    s[1] = 1.0
    s[2, :] = 0.5
    bk = broken_key_test(s, level=0.1, rng=np.random.default_rng(1))
    assert bk.flagged[0] and bk.q_value[0] <= 0.1
    assert np.isnan(bk.p_value[1]) and np.isnan(bk.p_value[2])
    assert bk.n_tested == 398 and bk.exact[0]
    assert bk.flagged.sum() <= 3


def test_broken_key_test_normal_approximation_beyond_the_exact_limit():
    rng = np.random.default_rng(6)
    n = EXACT_MAX_MODELS + 10
    s = (rng.random((50, n)) < 0.5).astype(float)
    bk = broken_key_test(s, level=0.1, rng=rng)
    assert not bk.exact.any()
    assert np.nanmin(bk.p_value) > 0 and np.nanmax(bk.p_value) <= 1


def test_reliability_is_kr20_with_feldt_interval():
    rng = np.random.default_rng(7)
    theta = rng.normal(size=25)
    s = (rng.random((300, 25)) < 1 / (1 + np.exp(-(theta[None, :] - rng.normal(size=(300, 1)))))).astype(float)
    rel = reliability(s, alpha=0.05)
    p = s.mean(axis=1)
    k = s.shape[0]
    # KR-20 with population variances (Kuder & Richardson 1940): the same value as Cronbach's alpha
    kr20 = k / (k - 1) * (1 - (p * (1 - p)).sum() / s.sum(axis=0).var(ddof=0))
    assert rel.estimate == pytest.approx(kr20, rel=1e-9)
    lo, hi = feldt_interval(rel.estimate, 25, 300, alpha=0.05)
    assert (rel.lower, rel.upper) == (lo, hi) and lo < rel.estimate < hi
    # Feldt (1965): the F ratio's quantiles, here checked against scipy directly
    assert lo == pytest.approx(1 - (1 - rel.estimate) * stats.f.ppf(0.975, 24, 24 * 299))


def test_validators_name_the_parameter():
    with pytest.raises(ValueError, match="level"):
        broken_key_test(np.zeros((3, 3)), level=1.5, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="rng"):
        broken_key_test(np.zeros((3, 3)), level=0.1, rng=0)
    with pytest.raises(ValueError, match="scores"):
        item_statistics(np.full((2, 2), 2.0))
