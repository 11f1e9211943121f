"""The comparisons' MDE (stated resolution) on 0/1 scores is the deciding score test's (issue #36).

A true gap equal to the stated MDE must be detected with about the stated power (80%) by the test
that decides the verdict: the pooled score test (Tango 1998) on the items question. The alternative a
stated MDE speaks of is the score test's constrained fit of the data at that gap (the nearest
multinomial with that gap: stats/comparisons/score_mde.py). Oracle: the exact power of the test
there, summed over the binomial count of discordant items and, given it, the binomial count of B's
wins (the test's rejection region is a threshold on B's wins). Monte Carlo (two-stage, as a user
meets it): a pilot at gap 0 states its MDE; new data at that gap, spread as the pilot's constrained
fit, are compared; the share detected must have a Clopper-Pearson interval reaching 80% (and not far
above it), near the ceiling (accuracy 0.97 and 0.99, 500-2,000 items, with and without 14 unequal
subjects) and in the middle (accuracy 0.6). Measured 2026-11-28 with test_study_power_at_the_stated_mde's
setup (seed 7, 4,000 runs a setting, 95% CP) at accuracy 0.99: the t approximation's MDE was detected in
64.2% [62.7, 65.7], 71.7% [70.3, 73.1] and 74.7% [73.3, 76.0] of runs at 500, 1,000 and 2,000 items, the score
test's in 83.8% [82.6, 84.9], 83.8% [82.6, 84.9] and 81.6% [80.4, 82.8] (docs/analyses.md; exact power below).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.special import ndtri

from simcheck import rate_ci
from benchcert.stats.comparisons import (minimum_detectable_effect, paired_comparison, paired_comparison_counts,
                                        pairwise_comparisons)
from benchcert.stats.comparisons.score_mde import bounded_score_test_mde, score_test_mde
from score_power_support import Z, draw, exact_power, fit_at, tilt_at

SIZES14 = np.array([20, 25, 30, 40, 50, 60, 70, 80, 100, 120, 150, 200, 300, 400])  # 1,645 items


def t_mde(b, a, n):
    gap = (b - a) / n
    return (Z + ndtri(0.8)) * np.sqrt((b + a - n * gap * gap) / (n - 1.0) / n)


@pytest.mark.parametrize("n,disc", [(500, 0.02), (1000, 0.02), (2000, 0.02), (500, 0.06), (2000, 0.06),
                                    (1000, 0.30), (2000, 0.12), (12000, 0.3)])
def test_the_stated_mde_has_80_percent_exact_power_at_its_alternative(n, disc):
    b = a = round(n * disc / 2)
    mde = float(score_test_mde([b], [a], [n], alpha=0.05, power=0.8)[0])
    for gap in (mde, -mde):
        x, y = fit_at(b, a, n, gap)
        assert abs(x - y - gap) < 1e-9
        assert 0.795 <= exact_power(x, y, n) <= 0.815, (gap, exact_power(x, y, n))
        if disc <= 0.06:  # docs/analyses.md: about 70% near the ceiling if the other side's wins are held fixed
            held = exact_power(b / n + max(gap, 0.0), a / n + max(-gap, 0.0), n)  # every added win a shared miss
            assert 0.68 <= held <= 0.74, (gap, held)
    # the t approximation's MDE, at its own constrained fit: below 76% near the ceiling, about 80% in the middle
    x, y = fit_at(b, a, n, t_mde(b, a, n))
    if disc <= 0.02:
        assert exact_power(x, y, n) < 0.76
    if disc >= 0.12:
        assert abs(mde / t_mde(b, a, n) - 1.0) < 0.015  # middle settings: the printed MDE moves by about 1%
        assert 0.78 <= exact_power(x, y, n) <= 0.81


def test_observed_gaps_zero_discordance_and_the_engine_agree():
    # an observed gap near the ceiling: both directions computed, the larger reported
    b, a, n = 18, 2, 1000
    mde = float(score_test_mde([b], [a], [n], alpha=0.05, power=0.8)[0])
    powers = [exact_power(*fit_at(b, a, n, g), n) for g in (mde, -mde)]
    assert min(powers) >= 0.79 and min(abs(p - 0.8) for p in powers) < 0.03, powers
    # no discordant item: the fit at a gap puts all of it on one side (psi = |gap|), still a finite MDE
    m0 = float(score_test_mde([0], [0], [800], alpha=0.05, power=0.8)[0])
    assert 0.005 < m0 < 0.03 and 0.79 <= exact_power(m0, 0.0, 800) <= 0.9  # 6 discordant items: discrete
    # the engine reports it for the items question on 0/1 scores, with and without subjects
    r = paired_comparison_counts(b, a, n)
    assert r.mde == pytest.approx(mde, rel=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rs = paired_comparison_counts(np.array([10, 8]), np.array([1, 1]), np.array([600, 400]), by_subject=True)
    assert rs.method == "stratified_items"
    assert rs.mde == pytest.approx(float(score_test_mde([18], [2], [1000], alpha=0.05, power=0.8)[0]), rel=1e-12)
    # the clustered question keeps the t approximation's MDE at its own SE and df
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rc = paired_comparison_counts(np.array([10, 8, 3]), np.array([1, 1, 2]), np.array([600, 400, 200]),
                                      by_subject=True, primary="clustered_subject")
    t = rc.tests["clustered_subject"]
    assert rc.mde == pytest.approx(minimum_detectable_effect(t.se, rc.n, df=t.df).estimate, rel=1e-12)


def _power_at_stated(seed, runs, n_c, disc_c):
    """Two-stage: pilots at gap 0 (per subject: discordance disc_c, half each way) state their MDE (one
    vectorised family of ``runs`` pairs); data at +MDE (even runs) or -MDE (odd), spread as each pilot's
    constrained fit, are compared; returns (hits, the stated MDEs)."""
    rng = np.random.default_rng(seed)
    n_c = np.asarray(n_c)[:, None] * np.ones((1, runs), dtype=np.int64)
    half = np.asarray(disc_c, dtype=float)[:, None] / 2.0 * np.ones((1, runs))
    b, a = draw(rng, half, half, n_c)
    sub = n_c.shape[0] > 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pilot = paired_comparison_counts(b.T if sub else b[0], a.T if sub else a[0], n_c.T if sub else n_c[0],
                                         by_subject=sub)
        sign = np.where(np.arange(runs) % 2 == 0, 1.0, -1.0)
        x, y = fit_at(b, a, n_c, sign * pilot.mde)
        b1, a1 = draw(rng, x, y, n_c)
        res = paired_comparison_counts(b1.T if sub else b1[0], a1.T if sub else a1[0], n_c.T if sub else n_c[0],
                                       by_subject=sub)
    assert res.method == ("stratified_items" if sub else "paired_clt")
    hits = np.where(sign > 0, res.verdict == "improved", res.verdict == "regressed")
    return int(hits.sum()), pilot.mde


@pytest.mark.montecarlo
@pytest.mark.parametrize("n_c,disc_c", [
    ([500], [0.02]),                                   # accuracy 0.99, 500 items, about 10 discordant
    ([2000], [0.05]),                                  # accuracy 0.97, 2,000 items
    (SIZES14, np.linspace(0.005, 0.04, 14)),           # 14 unequal subjects near the ceiling (stratified)
    ([1000], [0.40]),                                  # the middle: accuracy 0.6
], ids=["0.99-500", "0.97-2000", "ceiling-14-subjects", "middle-0.6"])
def test_a_gap_equal_to_the_stated_mde_is_detected_in_80_percent_of_runs(n_c, disc_c):
    # reaches 80% (a power of 70-75% would fail: its 99% interval ends below 0.8) and is not far above it
    _assert_power_reaches_80(20261128, 800, n_c, disc_c, low_at_most=0.86)


def _assert_power_reaches_80(seed, runs, n_c, disc_c, *, low_at_most):
    hits, stated = _power_at_stated(seed, runs, n_c, disc_c)
    rate, low, high = rate_ci(hits, runs)
    assert high >= 0.80 and low <= low_at_most, (rate, low, high, float(np.median(stated)))


def test_the_family_mde_is_the_pair_mde_at_the_familys_bonferroni_level():
    # a family of 20 pairs whose verdicts are read at alpha / 20 (the audit's simultaneous intervals, compare's
    # several candidates) states its MDE there: each pair's MDE alone at alpha / 20, larger than at alpha
    rng = np.random.default_rng(5)
    a = (rng.random((700, 20)) < 0.98).astype(float)
    b = np.where(rng.random((700, 20)) < 0.015, 1.0 - a, a)
    scores, pairs = np.column_stack([a, b]), np.column_stack([np.arange(20), 20 + np.arange(20)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        family = pairwise_comparisons(scores, pairs=pairs, mde_alpha=0.05 / 20)
        marginal = pairwise_comparisons(scores, pairs=pairs)
        alone = [paired_comparison(a[:, j], b[:, j]) for j in range(20)]
    assert family.mde_alpha == 0.05 / 20 and marginal.mde_alpha == 0.05 and alone[0].mde_alpha == 0.05
    d = b - a
    at_20 = score_test_mde((d > 0).sum(axis=0), (d < 0).sum(axis=0), np.full(20, 700), alpha=0.05 / 20, power=0.8)
    np.testing.assert_allclose(family.mde, at_20, rtol=1e-12)
    np.testing.assert_allclose(marginal.mde, [r.mde for r in alone], rtol=1e-12)  # unchanged without mde_alpha
    assert (family.mde > marginal.mde).all() and (family.mde_method == "score").all()
    with pytest.raises(ValueError, match="mde_alpha"):
        pairwise_comparisons(scores, pairs=pairs, mde_alpha=1.5)


@pytest.mark.slow
@pytest.mark.parametrize("n_c,disc_c", [
    ([500], [0.02]), ([1000], [0.02]), ([2000], [0.02]), ([500], [0.05]), ([2000], [0.05]),
    (SIZES14, np.linspace(0.005, 0.04, 14)), ([1000], [0.40]), (SIZES14, np.linspace(0.3, 0.5, 14)),
])
def test_study_power_at_the_stated_mde(n_c, disc_c):
    """make study: 4,000 runs a setting (accuracy 0.99 / 0.97 / 0.6; 500-2,000 items; 14 unequal subjects)."""
    _assert_power_reaches_80(7, 4000, n_c, disc_c, low_at_most=0.85)


def test_the_bounded_mde_on_0_1_differences_is_the_score_tests():
    for n, disc in [(500, 0.02), (2000, 0.05), (1000, 0.3)]:
        k = round(n * disc / 2)
        d = np.r_[np.ones(k), -np.ones(k + 1), np.zeros(n - 2 * k - 1)]
        assert bounded_score_test_mde([d], alpha=0.05, power=0.8)[0] == pytest.approx(
            score_test_mde([k], [k + 1], [n], alpha=0.05, power=0.8)[0], rel=1e-6)


VALUES = np.array([-1.0, -0.5, 0.0, 0.5, 1.0])


def _fractional_power(seed, blocks, n, nonzero):
    """Two-stage, fractional scores (graded 0 / 0.5 / 1): pilots at gap 0 with a share ``nonzero`` of items
    differing (1:2:2:1 over -1, -0.5, 0.5, 1), 20 a family (the bounded score test's families); data at
    +-MDE drawn from each pilot's constrained fit, for the stated MDE and then (the reference, same pilots) the
    t approximation's; returns ({"stated": hits, "t": hits}, runs)."""
    rng = np.random.default_rng(seed)
    a = np.where(rng.random(n) < 0.95, 1.0, rng.choice([0.0, 0.5], n))
    null = np.array([nonzero / 6, nonzero / 3, 1 - nonzero, nonzero / 3, nonzero / 6])
    sign = np.where(np.arange(20) % 2 == 0, 1.0, -1.0)
    hits = {"stated": 0, "t": 0}
    for _ in range(blocks):
        b = np.clip(a[:, None] + rng.choice(VALUES, (n, 20), p=null), 0.0, 1.0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pilot = paired_comparison(np.repeat(a[:, None], 20, axis=1), b)
            t = pilot.tests[pilot.method]
            arms = {"stated": pilot.mde, "t": minimum_detectable_effect(t.se, pilot.n, df=t.df).estimate}
            for arm, mde in arms.items():
                d1 = np.empty((n, 20))
                for j in range(20):
                    vals, probs = tilt_at(b[:, j] - a, sign[j] * mde[j])
                    d1[:, j] = rng.choice(vals, n, p=probs)
                res = paired_comparison((1.0 - d1) / 2.0, (1.0 + d1) / 2.0)  # differences d1 exactly, fractional
                assert not np.any(res.binary)
                hits[arm] += int(np.sum(np.where(sign > 0, res.verdict == "improved", res.verdict == "regressed")))
        assert not np.any(pilot.binary)
    return hits, 20 * blocks


def _one_pilot_power(d, draws, seed):
    """One pilot's differences ``d``: its stated MDE (once), ``draws`` samples of len(d) items at +MDE (even) and
    -MDE (odd) from its constrained fit there (tilt_at), decided by one vectorised bounded score test at alpha
    0.05 (the interval a single pair's verdict is read from); returns (hits, the MDE)."""
    from benchcert.stats.comparisons.score import bounded_mean_score_test

    rng = np.random.default_rng(seed)
    mde = float(bounded_score_test_mde([d], alpha=0.05, power=0.8)[0])
    half = draws // 2
    sample = []
    for sign in (1.0, -1.0):
        vals, probs = tilt_at(d, sign * mde)
        sample.append(rng.choice(vals, (half, d.size), p=probs))
    _, _, [(low, high)] = bounded_mean_score_test(list(np.concatenate(sample)), (0.05,))
    return int((low[:half] > 0).sum() + (high[half:] < 0).sum()), mde


@pytest.mark.montecarlo
@pytest.mark.parametrize("setting", ["graded-0.99", "continuous-0.97"])
def test_a_gap_equal_to_one_pilots_fractional_mde_is_detected_with_about_80_percent(setting):
    # graded: 0 / 0.5 / 1, 8 of 600 items differing (drawn at 2%, 1:2:2:1 over -1, -0.5, 0.5, 1); continuous:
    # A ~ Beta(97, 3) near the ceiling, B = A + N(0, 0.02^2) clipped, 200 items, every difference distinct.
    # Measured 2026-11-28 (95% CP): 84.0% [80.0, 87.5] at an MDE of 1.52 points, 80.5% [76.3, 84.3] at 3.06
    # points (0.6 and 2.5 CPU s at load 6.4); at half the MDE 41.8% and 33.0%, at twice it 100.0%: an MDE off
    # by a factor of 2 either way fails
    rng = np.random.default_rng(36)
    if setting == "graded-0.99":
        d = rng.choice(VALUES, 600, p=[0.02 / 6, 0.02 / 3, 0.98, 0.02 / 3, 0.02 / 6])
    else:
        a = rng.beta(97.0, 3.0, 200)
        d = np.clip(a + rng.normal(0.0, 0.02, 200), 0.0, 1.0) - a
    hits, mde = _one_pilot_power(d, 400, 5)
    rate, low, high = rate_ci(hits, 400)
    assert low <= 0.80 <= high, (rate, low, high, mde)  # 99% CP interval


def test_paired_comparison_on_fractional_scores_reports_the_bounded_score_tests_mde():
    rng = np.random.default_rng(8)
    a = np.where(rng.random(500) < 0.95, 1.0, rng.choice([0.0, 0.5], 500))
    b = np.clip(a + rng.choice(VALUES, 500, p=[0.005, 0.01, 0.97, 0.01, 0.005]), 0.0, 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = paired_comparison(a, b)
    assert not r.binary and r.mde == pytest.approx(float(bounded_score_test_mde([b - a], alpha=0.05,
                                                                                power=0.8)[0]), rel=1e-12)
    t = r.tests[r.method]
    assert r.mde != pytest.approx(minimum_detectable_effect(t.se, r.n, df=t.df).estimate, rel=1e-3)


#: make study, 400 runs a setting (20 pilots a family, seed 3). Measured 2026-11-28 (95% CP; about 50 CPU s a
#: setting, both arms): the stated MDE 87.2% [83.6, 90.4] and 90.8% [87.5, 93.4] with 1% of 500 and 1,000 items
#: differing (median MDE 1.49 and 0.86 points), the t approximation's 35.8% [31.0, 40.7] and 47.2% [42.3, 52.3]
#: (0.63 and 0.42 points); with a fifth of 1,000 items differing 90.0% [86.6, 92.8] (2.53 points), the t's 69.5%
#: [64.7, 74.0] (1.90 points): conservative on graded scores (docs/methods.md), never short of 80%.
@pytest.mark.slow
@pytest.mark.parametrize("n,nonzero", [(500, 0.01), (1000, 0.01), (2000, 0.03), (1000, 0.2)])
def test_study_power_at_the_fractional_mde(n, nonzero):
    hits, runs = _fractional_power(3, 20, n, nonzero)
    rate, low, high = rate_ci(hits["stated"], runs)
    print(f"{n} items, {nonzero:.0%} differing: stated MDE {rate:.1%} [{low:.1%}, {high:.1%}]; "
          f"t approximation's {hits['t'] / runs:.1%}")
    assert high >= 0.80 and low <= 0.95, (rate, low, high)  # an MDE twice too large is detected in about 100%
