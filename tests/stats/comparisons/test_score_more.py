"""'More items needed' from the power of the score test that decides (issue #36, lane l36more).

The items question's verdict on 0/1 scores is the pooled score test's (Tango 1998), on fractional scores the
bounded score test's; the number of items an inconclusive verdict asks for is the smallest N at which that
test's MDE (stats/comparisons/score_mde.py), the design held, is at most the gap
(stats/comparisons/score_more.py). Checked: (1) it is that MDE inverted (at N the MDE is at most the gap, at
N - 1 above it; on fractional scores the MDE of the present items gives back their number); (2) Monte Carlo
(as a user meets it): a pilot at gap 0 asks how many items would resolve a gap g smaller than its MDE; data
of that many items at +g / -g, spread as the pilot's constrained fit at g, are compared by the score test;
the share detected must reach 80% - 3 points (99% Clopper-Pearson lower bound at least 0.77) near the
ceiling (accuracy 0.99) and in the middle (accuracy 0.7), while the normal rule's number
(additional_sample_size, the t approximation's MDE solved for n) fails that check near the ceiling; at
alpha / 20 the share's 99% CP interval holds 80%. (3) The items asked are for the observed gap's own direction
(review of issue #36): pilots with more wins one way (0/1: 12 only-candidate, 5 only-baseline of 1,000 items;
fractional: 6 at +1, 10 at +0.5, 4 at -0.5, 2 at -1 of 1,000), at alpha 0.05 and 0.05 / 20, data of the number
asked drawn at the pilot's fit at its gap: the exact power (0/1) is 79-86% and the simulated share's 99% CP
interval holds 80%, not above 90% (the larger direction's number, asked before: exact power 88.9% and 91.5%,
fractional 92.0% [88.7, 94.6] and 94.8% [92.0, 96.9]: wasteful).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.special import ndtri

from simcheck import rate_ci
from benchcert.stats.comparisons import additional_sample_size, paired_comparison_counts
from benchcert.stats.comparisons.score_mde import bounded_score_test_mde, score_test_mde
from benchcert.stats.comparisons.score_more import bounded_score_test_items_needed, score_test_items_needed
from score_power_support import draw, exact_power, fit_at, tilt_at


def test_the_items_needed_invert_the_score_tests_mde():
    b, a, n = np.array([6.0, 5, 100, 3, 18]), np.array([4.0, 5, 80, 0, 2]), np.array([500.0, 1000, 1000, 300, 1000])
    gap = np.array([0.02, 0.01, 0.05, 0.03, 0.012])
    need = score_test_items_needed(b, a, n, gap, alpha=0.05, power=0.8, both_directions=True)
    at = score_test_mde(b * need / n, a * need / n, need, alpha=0.05, power=0.8)
    below = score_test_mde(b * (need - 1) / n, a * (need - 1) / n, need - 1, alpha=0.05, power=0.8)
    assert (at <= gap + 1e-7).all() and (below > gap - 1e-7).all(), (need, at, below)
    # the MDE of the present items gives back their number (within the bisection's item)
    mde = score_test_mde(b, a, n, alpha=0.05, power=0.8)
    np.testing.assert_allclose(score_test_items_needed(b, a, n, mde, alpha=0.05, power=0.8, both_directions=True),
                               n, atol=1.0)
    # the gap's own direction needs at most that; the larger direction is the gap against the side with more wins
    up = score_test_items_needed(b, a, n, gap, alpha=0.05, power=0.8)
    down = score_test_items_needed(b, a, n, -gap, alpha=0.05, power=0.8)
    np.testing.assert_array_equal(np.maximum(up, down), need)
    assert (up[b > a] < down[b > a]).all() and up[b == a] == pytest.approx(down[b == a], abs=1.0)
    # a gap of 0 (or no items) is never resolved; a stricter level needs more
    assert np.isinf(score_test_items_needed([5], [5], [500], [0.0], alpha=0.05, power=0.8)).all()
    assert (score_test_items_needed(b, a, n, gap, alpha=0.05 / 20, power=0.8) > up).all()


def test_the_bounded_items_needed_invert_its_mde():
    rng = np.random.default_rng(3)
    d = [np.r_[np.full(5, 0.5), np.full(3, -0.5), np.ones(4), -np.ones(2), np.zeros(486)],
         rng.choice([-1.0, -0.5, 0.0, 0.5, 1.0], p=[0.05, 0.1, 0.6, 0.15, 0.1], size=800)]
    for dd in d:
        mde = bounded_score_test_mde([dd], alpha=0.05, power=0.8)
        assert abs(bounded_score_test_items_needed([dd], mde, alpha=0.05, power=0.8, both_directions=True)[0]
                   - dd.size) <= 1.0
        # the design held: three copies' MDE asks for three times the items of one copy
        mde3 = bounded_score_test_mde([np.tile(dd, 3)], alpha=0.05, power=0.8)
        assert abs(bounded_score_test_items_needed([dd], mde3, alpha=0.05, power=0.8, both_directions=True)[0]
                   - 3 * dd.size) <= 1.0
    # on {-1, 0, 1} it is the 0/1 rule's number
    k = 5
    d01 = np.r_[np.ones(k), -np.ones(k + 1), np.zeros(500 - 2 * k - 1)]
    assert bounded_score_test_items_needed([d01], [0.015], alpha=0.05, power=0.8)[0] == pytest.approx(
        score_test_items_needed([k], [k + 1], [500], [0.015], alpha=0.05, power=0.8)[0], abs=1.0)


def _detected_with(seed, runs, n0, disc, gap, rule, alpha=0.05):
    """Pilots of n0 items at gap 0 (discordance disc, half each way) ask how many items would resolve ``gap``
    (``rule``: "score" or "normal"); data of that many items at +gap (even runs) / -gap (odd), spread as each
    pilot's constrained fit at that gap, are compared. Returns (hits, the median number asked)."""
    rng = np.random.default_rng(seed)
    half = np.full((1, runs), disc / 2.0)  # one subject (fit_at's leading axis)
    n_c = np.full((1, runs), n0)
    b, a = draw(rng, half, half, n_c)
    if rule == "score":
        need = score_test_items_needed(b[0], a[0], n_c[0], np.full(runs, gap), alpha=alpha, power=0.8)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            se = paired_comparison_counts(b[0], a[0], n_c[0]).se
        need = np.array([additional_sample_size(s, n0, gap, alpha=0.05, power=0.8).n_total for s in se], dtype=float)
    need = need.astype(np.int64)
    sign = np.where(np.arange(runs) % 2 == 0, 1.0, -1.0)
    x, y = fit_at(b, a, n_c, sign * gap)
    b1, a1 = draw(rng, x[0], y[0], need)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = paired_comparison_counts(b1, a1, need, alpha=alpha)
    hits = np.where(sign > 0, res.verdict == "improved", res.verdict == "regressed")
    return int(hits.sum()), float(np.median(need))


@pytest.mark.montecarlo
@pytest.mark.parametrize("n0,disc,gap,alpha", [(500, 0.02, 0.015, 0.05), (1000, 0.42, 0.04, 0.05),
                                               (500, 0.02, 0.015, 0.05 / 20)],
                         ids=["accuracy-0.99", "accuracy-0.7", "accuracy-0.99-alpha/20"])
def test_the_items_asked_for_resolve_the_gap_with_80_percent_power(n0, disc, gap, alpha):
    runs = 1000
    hits, asked = _detected_with(20261128, runs, n0, disc, gap, "score", alpha)
    rate, low, high = rate_ci(hits, runs)
    if alpha == 0.05:
        assert low >= 0.77 and rate <= 0.90, (rate, low, high, asked)
    else:  # at alpha / 20 about 80% (Nam's power ignores the far tail): the 99% CP interval holds it
        assert low <= 0.80 <= high, (rate, low, high, asked)
    if disc <= 0.02 and alpha == 0.05:  # the normal rule's number fails the same check near the ceiling (so the check can fail)
        hits_t, asked_t = _detected_with(20261128, runs, n0, disc, gap, "normal")
        rate_t, low_t, high_t = rate_ci(hits_t, runs)
        assert low_t < 0.77 and asked_t < asked, (rate_t, low_t, high_t, asked_t, asked)


def _uneven_power(b0, a0, n0, alpha, runs, seed):
    """A pilot with more wins one way (b0 only B right, a0 only A right of n0) asks how many items resolve its
    observed gap; returns (the items asked, the exact power of the score test there at the pilot's fit, hits of
    ``runs`` data sets of that many items drawn from it)."""
    gap = (b0 - a0) / n0
    need = score_test_items_needed([b0], [a0], [n0], [gap], alpha=alpha, power=0.8)[0]
    x, y = (float(v[0]) for v in fit_at(np.array([b0]), np.array([a0]), np.array([n0]), gap))
    exact = exact_power(x, y, int(need), float(ndtri(1.0 - alpha / 2.0)))
    full = np.full(runs, int(need))
    b1, a1 = draw(np.random.default_rng(seed), np.full(runs, x), np.full(runs, y), full)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = paired_comparison_counts(b1, a1, full, alpha=alpha)
    return int(need), exact, int(np.sum(res.verdict == ("improved" if gap > 0 else "regressed")))


@pytest.mark.montecarlo
@pytest.mark.parametrize("alpha", [0.05, 0.05 / 20])
@pytest.mark.parametrize("b0,a0", [(12, 5), (5, 12)])
def test_an_uneven_pilot_asks_for_the_items_its_own_direction_needs(b0, a0, alpha):
    # near the ceiling the direction matters: 12 only-candidate / 5 only-baseline wins of 1,000 items; the gap
    # observed is +0.7 points and the other direction (-0.7) needs far more items. The number asked is the
    # observed direction's, so the power there is about 80%, not more (the larger direction's number gave
    # more than 90%: wasteful); checked exactly (the test's power summed over the counts) and by Monte Carlo
    need, exact, hits = _uneven_power(b0, a0, 1000, alpha, 4000, 36)
    other = score_test_items_needed([b0], [a0], [1000], [(a0 - b0) / 1000], alpha=alpha, power=0.8)[0]
    both = score_test_items_needed([b0], [a0], [1000], [(b0 - a0) / 1000], alpha=alpha, power=0.8,
                                   both_directions=True)[0]
    assert other > need and both == max(need, other), (need, other, both)
    rate, low, high = rate_ci(hits, 4000)
    assert 0.79 <= exact <= 0.86 and low <= 0.80 <= high and rate <= 0.90, (need, exact, rate, low, high)


def _fractional_uneven(d, alpha, runs, seed):
    """Fractional differences ``d`` (one pilot) ask how many items resolve their mean; ``runs`` data sets of that
    many items drawn from the bounded score test's constrained fit at the mean are decided by that test at
    ``alpha``; returns (the items asked, hits)."""
    from benchcert.stats.comparisons.score import bounded_mean_score_test

    gap = float(d.mean())
    need = int(bounded_score_test_items_needed([d], [gap], alpha=alpha, power=0.8)[0])
    vals, probs = tilt_at(d, gap)
    sample = np.random.default_rng(seed).choice(vals, (runs, need), p=probs)
    _, _, [(low, high)] = bounded_mean_score_test(list(sample), (alpha,))
    return need, int((low > 0).sum() if gap > 0 else (high < 0).sum())


@pytest.mark.montecarlo
@pytest.mark.parametrize("alpha", [0.05, 0.05 / 20])
def test_a_fractional_uneven_pilot_asks_for_its_own_directions_items(alpha):
    # graded 0 / 0.5 / 1 near the ceiling, more differences one way: 6 at +1, 10 at +0.5, 4 at -0.5, 2 at -1
    d = np.r_[np.ones(6), np.full(10, 0.5), np.full(4, -0.5), -np.ones(2), np.zeros(978)]
    runs = 600
    need, hits = _fractional_uneven(d, alpha, runs, 37)
    other = bounded_score_test_items_needed([d], [-d.mean()], alpha=alpha, power=0.8)[0]
    rate, low, high = rate_ci(hits, runs)
    assert other > need and low <= 0.80 <= high and rate <= 0.90, (need, other, rate, low, high)
