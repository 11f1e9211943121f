"""Two-sample tests beside the perturbation audit: the energy-distance permutation test on
fractional scores (Szekely & Rizzo 2004; composite-null paper, section 6), which `benchcert perturb`
and the audit use as the classical contrast when scores are not binary."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest

from benchcert.stats.two_sample import energy_test


def test_energy_test_level_on_fractional_scores_with_ties():
    """Discrete scores on {0, 0.25, ..., 1} (many ties) and few replicates, as in eval logs: under
    F_x = F_y the permutation test rejects at most alpha (95% Clopper-Pearson upper bound <= alpha +
    0.01, 1,500 tests), for equal and unequal sample sizes."""
    rng = np.random.default_rng(50)
    grid = np.linspace(0, 1, 5)
    for nx, ny in [(4, 4), (12, 7), (30, 30)]:
        rej = 0
        n = 1500
        for i in range(n):
            w = rng.dirichlet(np.ones(5))
            x, y = rng.choice(grid, nx, p=w), rng.choice(grid, ny, p=w)
            rej += energy_test(x, y, n_permutations=199, alpha=0.05, rng=np.random.default_rng(i)).reject
        assert binomtest(rej, n).proportion_ci(0.95).high <= 0.06, (nx, ny, rej)
    # power against a shift of the score distribution
    pw = np.mean([energy_test(rng.choice(grid, 30, p=[0.4, 0.3, 0.2, 0.1, 0.0]),
                              rng.choice(grid, 30, p=[0.0, 0.1, 0.2, 0.3, 0.4]), n_permutations=199, alpha=0.05,
                              rng=np.random.default_rng(i)).reject for i in range(100)])
    assert pw > 0.9


def test_fisher_min_p_is_the_smallest_p_over_every_table():
    """Oracle: scipy's fisher_exact over every table with these replicate counts. The smallest p is 1
    at 1 + 1, 1/3 at 2 + 2, 1/10 at 3 + 3, 1/11 at 1 + 10: Fisher cannot reject at 0.05 there."""
    from scipy.stats import fisher_exact

    from benchcert.stats.two_sample import fisher_min_p

    for na in range(1, 9):
        for nb in (1, 2, 3, 5, 10, 13):
            brute = min(fisher_exact([[a, na - a], [b, nb - b]]).pvalue for a in range(na + 1) for b in range(nb + 1))
            assert fisher_min_p(na, nb) == pytest.approx(brute, rel=1e-9), (na, nb)
    assert fisher_min_p(2, 2) == pytest.approx(1 / 3) and fisher_min_p(1, 10) == pytest.approx(1 / 11)
    assert fisher_min_p(300, 300) < 1e-100


def test_energy_test_enumerates_all_splits_of_small_samples():
    """C(N, n) <= n_permutations: the p-value is the exact share of the C(N, n) splits whose statistic
    is at least the observed one (checked by brute force), and min_attainable_p is its smallest value."""
    import itertools

    from benchcert.stats.two_sample import energy_min_p

    rng = np.random.default_rng(3)
    for nx, ny in [(2, 2), (2, 3), (3, 4), (4, 4)]:
        x, y = rng.choice([0, 0.25, 0.5, 1], nx), rng.choice([0, 0.5, 0.75, 1], ny)
        res = energy_test(x, y, n_permutations=999, alpha=0.05, rng=np.random.default_rng(0))
        z = np.r_[x, y]

        def t(idx):
            a, b = z[list(idx)], np.delete(z, list(idx))
            e = 2 * np.abs(a[:, None] - b).mean() - np.abs(a[:, None] - a).mean() - np.abs(b[:, None] - b).mean()
            return nx * ny / (nx + ny) * e

        stats_ = [t(c) for c in itertools.combinations(range(nx + ny), nx)]
        brute = np.mean(np.array(stats_) >= t(range(nx)) - 1e-12)
        assert res.exact and res.p_value == pytest.approx(brute) and res.n_permutations == len(stats_)
        assert res.min_attainable_p == energy_min_p(nx, ny) == pytest.approx((2 if nx == ny else 1) / len(stats_))
    big = energy_test(rng.random(10), rng.random(10), n_permutations=99, rng=np.random.default_rng(1))
    assert not big.exact and big.min_attainable_p == pytest.approx(1 / 100)
