"""Two-sample tests beside the perturbation audit: the energy-distance permutation test on
fractional scores (Szekely & Rizzo 2004; composite-null paper, section 6), which `benchcert perturb`
and the audit use as the classical contrast when scores are not binary."""

from __future__ import annotations

import numpy as np
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
