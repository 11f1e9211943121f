"""The default per-item composite test: the widened range with its noise margin calibrated exactly
(stats/perturbation/calibrated.py).

Composite-null paper = Acharyya, Priebe & Helm, "Testing for LLM response differences: the case of
a composite null consisting of semantically irrelevant query perturbations"; the simulated null is
its Assumptions 1-2 (null probabilities i.i.d. Unif[a, b], the tested probability p' in [a, b]).
Sizes are judged with the 99% Clopper-Pearson upper bound (tests/simcheck.py ``rate_ci``) against
alpha + 0.005, at the edges of the range (p' = a and p' = b: the rejection probability on each
side is monotone in p') and at its middle, over (a, b) off the calibration grid and at boundary
rates.
"""

from __future__ import annotations

import numpy as np
import pytest
from simcheck import rate_ci

import benchcert.stats.perturbation as P
from benchcert.stats.perturbation.calibrated import CALIBRATION_GRID, calibration, reject_many
from benchcert.stats.perturbation.item_test import reject_many as reject_many_widened

ALPHA = 0.05
# off the calibration grid (widths and positions), boundary rates and point nulls included
RANGES = ((0.0, 0.0), (0.0, 0.0015), (0.0, 0.03), (0.5, 0.5), (0.2, 0.2007), (0.46, 0.475), (0.3, 0.36),
          (0.4, 0.6), (0.9, 0.99), (0.85, 1.0), (0.0, 0.55), (0.07, 0.93), (0.0, 1.0))


def _size(m, r, a, b, p_prime, n, rng, r_test=None):
    rt = r if r_test is None else r_test
    k = rng.binomial(r, rng.uniform(a, b, (n, m)))
    kt = rng.binomial(rt, p_prime, n)
    return int(reject_many(k, r, kt, rt, alpha=ALPHA).sum())


def _check_size(ms, rs, n, seed):
    rng = np.random.default_rng(seed)
    worst = (0.0, None)
    for m in ms:
        for r in rs:
            for a, b in RANGES:
                for p_prime in sorted({a, b, 0.5 * (a + b)}):
                    hits = _size(m, r, a, b, p_prime, n, rng)
                    rate, _, high = rate_ci(hits, n)
                    assert high <= ALPHA + 0.005, (m, r, a, b, p_prime, rate, high)
                    worst = max(worst, (rate, (m, r, a, b, p_prime)), key=lambda x: x[0])
    return worst


@pytest.mark.montecarlo
def test_size_holds_over_the_composite_null():
    """m in {2, 3, 5, 8} x r in {10, 50, 200} at 13 null ranges off the calibration grid, p' at both
    edges and the middle, 20,000 replications each: the 99% upper bound stays <= alpha + 0.005."""
    _check_size((2, 3, 5, 8), (10, 50, 200), 20_000, 1)


@pytest.mark.slow
def test_size_full_grid():
    """make study: r in {10, 50, 200, 400, 2000} as well, 40,000 replications per cell."""
    print("worst", _check_size((2, 3, 5, 8), (10, 50, 200, 400, 2000), 40_000, 2))


@pytest.mark.montecarlo
def test_power_at_m8_r400_meets_the_issue_target():
    """Null rates Unif[0.4, 0.6], tested rate 0.6 + d, m = 8, r = 400: at least 50 / 95 / 99% for
    d = 0.1 / 0.2 / 0.3 (99% lower bound over 5,000 replications), where the assumption-light
    widened test reaches 0.4 / 17 / 86% (it fails the first two); the simulation agrees with the
    exact power."""
    rng = np.random.default_rng(3)
    n = 5_000
    for d, target in ((0.1, 0.50), (0.2, 0.95), (0.3, 0.99)):
        k = rng.binomial(400, rng.uniform(0.4, 0.6, (n, 8)))
        kt = rng.binomial(400, 0.6 + d, n)
        rate, low, high = rate_ci(reject_many(k, 400, kt, 400, alpha=ALPHA).sum(), n)
        assert low >= target, (d, rate, low)
        exact = P.calibrated_power(0.6 + d, m=8, r=400, a=0.4, b=0.6, alpha=ALPHA)
        assert low <= exact <= high, (d, rate, exact)
        widened = reject_many_widened(k, 400, kt, 400, alpha=ALPHA).mean()
        assert widened < rate


def test_single_item_and_vectorised_decisions_agree():
    rng = np.random.default_rng(4)
    for _ in range(300):
        m = int(rng.integers(2, 9))
        r = int(rng.choice([5, 30]))
        k = rng.binomial(r, rng.uniform(0, 1) * rng.uniform(0.5, 1, m))
        kt = int(rng.binomial(r, rng.uniform()))
        res = P.composite_test(k, r, kt, r)
        assert res.method == "calibrated"
        assert res.reject == bool(reject_many(k[None, :], r, [kt], r, alpha=ALPHA)[0])
        if res.status == "ok":
            assert res.reject == (res.p_value <= ALPHA)
            assert res.reject == (res.test_rate < res.range_low or res.test_rate > res.range_high)
        mirror = P.composite_test(r - k, r, r - kt, r)
        assert (mirror.status, mirror.reject) == (res.status, res.reject)


def test_calibration_is_the_smallest_margin_that_keeps_the_level():
    """z is on the 0.02 lattice; at z the grid size is <= alpha and at z - 0.02 it is not."""
    from benchcert.stats.perturbation.calibrated import calibrated_size

    for m, r in ((2, 50), (8, 10), (5, 200)):
        z, _ = calibration(m, r, r, ALPHA)
        assert z == pytest.approx(round(z / 0.02) * 0.02)
        assert calibrated_size(m, r, r, alpha=ALPHA, z=z) <= ALPHA
        if z > 0:
            assert calibrated_size(m, r, r, alpha=ALPHA, z=z - 0.02) > ALPHA
    assert 0.0 in CALIBRATION_GRID and 1.0 in CALIBRATION_GRID


def test_statuses():
    one = P.composite_test([1, 1, 1, 1], 1, 0, 1)
    assert one.status == "no_power" and not one.reject and "r = 1 replicate" in one.notes[0]
    everything = P.composite_test([0, 14, 7], 14, 1, 14)
    assert everything.status == "no_alternative" and not everything.reject
    uneq = P.composite_test([3, 8, 5], [10, 14, 12], 2, 15)
    assert uneq.method == "widened" and any("unequal replicate counts" in n for n in uneq.notes)
    single = P.composite_test([5], 10, 5, 10)
    assert single.status == "one_null_variant"
    with pytest.raises(ValueError, match="null_replicates"):
        P.calibrated_range_test([3, 8], [10, 14], 2, 15)
