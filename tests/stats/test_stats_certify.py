"""Budgets, estimators and the failure-rate bound of stats/certify.py and stats/failure_rates.py
(certifying-capabilities paper, Theorem 3.4, Remark 3.2, Theorem 3.10)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from benchcert.stats.certify import (MOM_C, importance_mom, mom_block_failure, mom_blocks, per_environment_budget,
                                     per_environment_means, stratified_budget, stratified_means, theorem_3_4_budget)
from benchcert.stats.failure_rates import BLACK_BOX_SENTENCE, failure_rate_upper
from benchcert.stats.subsample import serfling_halfwidth

from simcheck import rate_ci


@pytest.mark.parametrize("m", [1, 2, 5, 14, 100])
@pytest.mark.parametrize("delta", [0.2, 0.05, 0.01, 1e-4])
def test_mom_blocks_make_the_median_fail_with_probability_at_most_delta_over_m(m, delta):
    # The docstring's derivation: P(Bin(B, 1/8) >= B/2) <= exp(-B kl(1/2 || 1/8)) <= delta / m.
    B = mom_blocks(m, delta)
    assert B == math.ceil(MOM_C * math.log(2 * m / delta) - 1e-12)
    assert MOM_C == pytest.approx(1 / (0.5 * math.log(0.5 / 0.125) + 0.5 * math.log(0.5 / 0.875)))
    tail = stats.binom.sf(math.ceil(B / 2) - 1, B, 1 / 8)
    assert tail <= math.exp(-B / MOM_C) + 1e-15 <= delta / m + 1e-15
    pi = mom_block_failure(B, m, delta)
    assert pi >= 1 / 8                               # post-hoc never wider than planned
    assert stats.binom.sf(math.ceil(B / 2) - 1, B, pi) <= delta / m * (1 + 1e-9)
    if pi < 0.5:                                     # and it is the largest such rate
        assert stats.binom.sf(math.ceil(B / 2) - 1, B, pi + 1e-6) > delta / m


def test_budgets_follow_their_formulas():
    b = theorem_3_4_budget(2.0, 5, 0.05, delta=0.05)
    assert b.allocation["blocks"] == 13 and b.allocation["block_size"] == 9600 and b.n == 13 * 9600
    p = per_environment_budget(5, 0.05, delta=0.05)
    assert p.allocation["per_environment"] == math.ceil(math.log(200) / (2 * 0.05 ** 2)) and p.n == 5 * 1060
    sizes = [818, 717, 40, 5]
    s = stratified_budget(sizes, 0.05, delta=0.05)
    for N, n in zip(sizes, s.allocation["per_atom"]):
        assert 1 <= n <= N
        if n < N:   # the smallest n that reaches eps at delta/K
            assert serfling_halfwidth(n, N, alpha=0.05 / 4).half_width <= 0.05
            assert n == 1 or serfling_halfwidth(n - 1, N, alpha=0.05 / 4).half_width > 0.05
    assert s.allocation["per_atom"][3] == 5     # a 5-item atom is evaluated whole
    with pytest.raises(ValueError, match="epsilon"):
        theorem_3_4_budget(1.0, 2, 1.5, delta=0.05)
    with pytest.raises(ValueError, match="V must"):
        theorem_3_4_budget(float("inf"), 2, 0.1, delta=0.05)


@pytest.mark.parametrize("n", [1, 7, 50, 400])
def test_failure_rate_upper_equals_scipy_binomtest_one_sided_exact(n):
    for k in sorted({0, 1, n // 3, n - 1, n}):
        if k < 0:
            continue
        for alpha in (0.05, 0.01, 0.2):
            ours = failure_rate_upper(k, n, alpha=alpha)
            ref = stats.binomtest(k, n, alternative="less").proportion_ci(confidence_level=1 - alpha,
                                                                          method="exact").high
            assert ours.upper == pytest.approx(ref, rel=1e-9, abs=1e-12)
    # No failure: 1 - alpha^(1/n), about 3/n at 95%.
    assert failure_rate_upper(0, n).upper == pytest.approx(1 - 0.05 ** (1 / n), rel=1e-9)
    assert "cannot be certified by black-box testing" in failure_rate_upper(0, n).statement == BLACK_BOX_SENTENCE


@pytest.mark.montecarlo
def test_failure_rate_upper_covers_exactly_and_by_simulation():
    # Exact coverage: sum over k of Bin(n, p) mass where the bound covers p, >= 1 - alpha for all p.
    for n in (20, 137):
        uppers = np.array([failure_rate_upper(k, n).upper for k in range(n + 1)])
        for p in np.linspace(0.001, 0.999, 181):
            cover = stats.binom.pmf(np.arange(n + 1), n, p)[uppers >= p].sum()
            assert cover >= 0.95 - 1e-12
    # Simulation (seeded), rare failures and a middle rate.
    rng = np.random.default_rng(5)
    for p, n in ((0.002, 300), (0.2, 60)):
        k = rng.binomial(n, p, size=4000)
        hits = np.array([failure_rate_upper(int(x), n).upper >= p for x in k])
        _, lo, _ = rate_ci(hits, hits.size, level=0.95)
        assert lo >= 0.95 - 0.01 and hits.mean() >= 0.94


def test_importance_mom_recovers_means_and_refuses_uncovered_environments():
    rng = np.random.default_rng(3)
    K = 4
    atom_means = np.array([0.2, 0.5, 0.9, 0.6])
    P = np.array([[0.5, 0.5, 0, 0], [0, 0, 1.0, 0], [0.25, 0.25, 0.25, 0.25]])
    q = np.full(K, 0.25)
    n = 13 * 4000
    atoms = rng.integers(0, K, size=n)
    x = (rng.random(n) < atom_means[atoms]).astype(float)
    r = importance_mom(x, atoms, P, q, blocks=13, delta=0.05)
    truth = P @ atom_means
    assert np.all(np.abs(r.estimate - truth) <= r.half_width)
    assert r.details["block_size"] == 4000
    # chi2 of the second environment is 1/0.25 - 1 = 3; its half-width is sqrt(4 / (s pi)).
    assert r.half_width[1] == pytest.approx(math.sqrt(4 / (4000 * r.details["block_failure"])))
    with pytest.raises(ValueError, match="proposal probability 0"):
        importance_mom(x, atoms, P, np.array([0.5, 0.5, 0.0, 0.0]), blocks=13, delta=0.05)


def test_stratified_means_cover_every_mix_and_are_exact_on_whole_atoms():
    sizes = np.array([10, 20])
    pop = [np.array([1.0] * 4 + [0.0] * 6), np.linspace(0, 1, 20)]
    P = np.array([[1.0, 0.0], [0.3, 0.7]])
    r = stratified_means(pop, sizes, P, delta=0.05)   # whole atoms evaluated: exact
    assert np.all(r.half_width == 0) and r.estimate[1] == pytest.approx(0.3 * 0.4 + 0.7 * 0.5)
    with pytest.raises(ValueError, match="no sampled scores"):
        stratified_means([pop[0], np.array([])], sizes, P, delta=0.05)
    b = per_environment_means([np.ones(10), np.zeros(40)], delta=0.1)
    assert b.half_width[0] == pytest.approx(math.sqrt(math.log(40) / 20))


def test_superpopulation_atom_intervals_are_scipy_exact_clopper_pearson():
    x = np.array([1.0] * 7 + [0.0] * 13)
    P = np.array([[1.0, 0.0], [0.0, 1.0]])
    r = stratified_means([x, np.ones(5)], [20, 5], P, delta=0.1, finite_population=False)
    ci = stats.binomtest(7, 20).proportion_ci(confidence_level=1 - 0.05, method="exact")   # delta / K, K = 2
    assert r.lower[0] == pytest.approx(ci.low, rel=1e-9) and r.upper[0] == pytest.approx(ci.high, rel=1e-9)
    assert r.upper[1] == 1.0
    assert r.lower[1] == pytest.approx(stats.binomtest(5, 5).proportion_ci(0.95).low, rel=1e-9)
