"""The subjects question's fixed-sample test and the verdict's directional claim (stats/subject_means.py).

Since issue #24 the verdict's first-look claim is the betting bound on the subject means
(stats/betting.py, valid by theorem); the skewness-corrected t below is the look's fixed-sample
interval shown for information. The two settings the skewness allowance did not cover (near-ceiling
models, rare small subjects) are checked on the claim the verdict now makes (last test).

The checkpoint verdict claims a false ``improved`` has probability <= alpha/2 (union bound: the
first-look test's one-sided share alpha * first_look_share / 2 plus the betting test's). The
plain t-test on subject means broke the first share when subject sizes are unequal and the gap
moves with size (small noisy subjects on one side, big precise ones on the other): the subject
means are skewed and the studentized mean has one heavy tail. These seeded simulations draw the
subject means that setting produces - sizes 5..200 items, subject gap
mu_s = beta * z(size) + tau * u_s with subject-weighted gap exactly 0 - and judge the one-sided
false-claim rate with a Clopper-Pearson interval (simcheck.rate_ci): its lower bound must not
exceed the nominal one-sided level (the rate is not significantly above it) and its upper bound
must stay within a quarter of it above.

Measured with the plain t (old code; 20,000 reps, one-sided nominal 1.25%): 2.7-2.9% at 30-40
subjects with no between-subject spread, 2.0-2.4% with tau = 0.07, 2.0-2.5% at 60-90 subjects;
the skewness-corrected test, worst cell of the slow grid below (13 gap/spread settings x 30-90
subjects x binary/fractional scores, 20,000 reps each): 0.45% [0.33, 0.58] at a one-sided 0.5%,
1.13% [0.94, 1.33] at 1.25%, 2.30% [2.03, 2.58] at 2.5% (95% Clopper-Pearson).
"""

from __future__ import annotations

import warnings
import zlib

import numpy as np
import pytest
from scipy import optimize, stats

from simcheck import rate_ci
from benchcert.stats.degenerate import DegenerateDataWarning
from benchcert.stats.betting import betting_mean_bounds
from benchcert.stats.sequential import betting_test, nightly_verdicts
from benchcert.stats.subject_means import SKEW_ALLOWANCE, subject_weighted_gap

SIZES = np.array([5, 10, 20, 50, 100, 200])  # equally likely; log-spaced (as tests/stats/test_verdicts_estimand.py)
_Z = np.log(SIZES) - np.log(SIZES).mean()
_Z = _Z / np.abs(_Z).max()  # in [-1, 1], mean 0 over the size distribution


def draw(reps, k, beta, tau, seed, *, scores="binary", delta=0.0):
    """Subject means, shape (reps, k): subject-weighted gap exactly ``delta``.

    binary: P(D = +1) = 0.15 + mu/2, P(D = -1) = 0.15 - mu/2 per item; fractional: each model's
    item score is the mean of 3 replicates (scores in {0, 1/3, 2/3, 1}), baseline 0.6, candidate
    0.6 + mu."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, SIZES.size, size=(reps, k))
    n = SIZES[idx]
    mu = delta + beta * _Z[idx] + tau * rng.uniform(-np.sqrt(3), np.sqrt(3), size=(reps, k))
    assert np.all(np.abs(mu) <= 0.3)
    if scores == "binary":
        pp, pn = 0.15 + mu / 2, 0.15 - mu / 2
        nb = rng.binomial(n, pp)
        na = rng.binomial(n - nb, pn / (1 - pp))
        return (nb - na) / n
    b = rng.binomial(3 * n, 0.6 + mu)
    a = rng.binomial(3 * n, np.full(mu.shape, 0.6))
    return (b - a) / (3 * n)


def one_sided(means, a1):
    """(false 'improved', false 'regressed') indicators of the test at two-sided level a1."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        r = subject_weighted_gap(means, alpha=a1)
    return r.verdict == "improved", r.verdict == "regressed"


def judge(hits, nominal, level=0.95):
    rate, lo, hi = rate_ci(hits, hits.size, level=level)
    return rate, lo, hi, lo <= nominal and hi <= 1.25 * nominal


# The cells where the plain t failed worst (review: 2.65% / 2.58% / 2.90% for the whole verdict at
# alpha/2 = 2.5%; here the first look's own share, 1.25%). Old code, these seeds: 2.8% [2.6, 3.0]
# (30, tau 0), 2.7% [2.5, 2.9] (40, tau 0), 2.2% [2.0, 2.4] (30, tau 0.07), 2.7% [2.5, 2.9] (fractional).
@pytest.mark.montecarlo
@pytest.mark.parametrize("k, beta, tau, scores", [(30, 0.1, 0.0, "binary"), (40, 0.1, 0.0, "binary"),
                                                  (30, 0.1, 0.07, "binary"), (30, 0.1, 0.0, "fractional"),
                                                  (40, -0.1, 0.0, "fractional")])
def test_first_look_directional_error_within_its_share(k, beta, tau, scores):
    a1 = 0.025  # alpha = 5% with first_look_share = 0.5: the verdict's first-look test
    means = draw(20_000, k, beta, tau, zlib.crc32(repr((k, beta, tau, scores)).encode()), scores=scores)
    up, down = one_sided(means, a1)
    wrong = up if beta > 0 else down  # the direction the skew pushes towards
    rate, lo, hi, ok = judge(wrong, a1 / 2)
    assert ok, (rate, lo, hi)
    # and the other direction is not bought by a wildly conservative test on symmetric data
    sym = draw(20_000, k, 0.0, 0.07, 7 + k, scores=scores)
    up0, down0 = one_sided(sym, a1)
    rate0, lo0, hi0, ok0 = judge(up0 | down0, a1)
    assert ok0 and hi0 > a1 / 10, (rate0, lo0, hi0)


def _entry_units(means, looks):
    """Subjects entering in random order (not by their gaps): 30 at look 1, the rest spread over
    the later looks. Returns first-look means (R, k1), the units (U, R) and cumulative looks."""
    reps, k = means.shape
    if looks == 1:
        return means, means.T.copy(), np.array([k])
    k1 = 30
    per = np.zeros(looks, dtype=np.int64)
    per[0] = k1
    np.add.at(per, 1 + np.arange(k - k1) * (looks - 1) // max(k - k1, 1), 1)
    return means[:, :k1], means.T.copy(), np.cumsum(per)


@pytest.mark.montecarlo
@pytest.mark.parametrize("k, looks, tau, scores", [(30, 1, 0.0, "binary"), (40, 30, 0.0, "binary"),
                                                   (40, 30, 0.07, "fractional"), (40, 1, 0.07, "fractional")])
def test_verdict_false_improved_within_half_alpha(k, looks, tau, scores):
    # The checkpoint construction end to end (the first-look test at alpha * share, the betting test
    # on subject entry means at the rest, nightly_verdicts): a false 'improved' <= alpha / 2 over
    # every look. Old code: 2.8-3.1% (upper CI 3.3%) in these cells at alpha / 2 = 2.5%.
    alpha, share = 0.05, 0.5
    means = draw(20_000, k, 0.1, tau, zlib.crc32(repr(("v", k, looks, tau, scores)).encode()), scores=scores)
    first_means, d, cum = _entry_units(means, looks)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        first = betting_mean_bounds(first_means, alpha=alpha * share)  # the verdict's first-look claim (#24)
        seq = betting_test(d, cum, alpha=alpha * (1 - share), interval=False)
        p1 = np.where(first.direction * first.estimate > 0, first.p_value, 1.0)
        nv = nightly_verdicts(p1, first.estimate, seq, alpha=alpha, first_look_share=share)
    up = nv.verdict[:, -1] == "improved"
    rate, lo, hi, _ = judge(up, alpha / 2)
    assert lo <= alpha / 2 and hi <= alpha / 2 + 0.0025, (rate, lo, hi)


@pytest.mark.montecarlo
def test_power_is_kept_and_the_mde_is_honest():
    # At the MDE the test detects the gap with about the stated power (symmetric and skewed
    # subject means), so the MDE reports the correction's cost rather than the plain t's.
    for beta, seed in ((0.0, 1), (0.1, 2), (-0.1, 3)):
        probe = draw(2_000, 30, beta, 0.05, seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DegenerateDataWarning)
            mde = float(np.median(subject_weighted_gap(probe, alpha=0.05, power=0.8).mde))
        means = draw(10_000, 30, beta, 0.05, seed + 10, delta=mde)
        up, _ = one_sided(means, 0.05)
        rate, lo, hi = rate_ci(up, up.size, level=0.99)
        assert 0.7 <= rate <= 0.95, (beta, mde, rate, lo, hi)


def _oracle_bounds(x, alpha):
    """The interval from the defining one-sided statistics, inverted numerically (brentq)."""
    k = x.size
    s = x.std(ddof=1)
    gam = stats.skew(x, bias=True)  # m3 / m2^1.5
    a = SKEW_ALLOWANCE
    c = stats.t.ppf(1 - alpha / 2, k - 1)

    def hall(z, g):
        return z + g * z ** 2 / 3 + g ** 2 * z ** 3 / 27 + g / (6 * k)

    def t_up(theta):
        z = (x.mean() - theta) / s
        return np.sqrt(k) * min(hall(z, min(gam, -a)), hall(z, -a))

    def t_dn(theta):
        z = (x.mean() - theta) / s
        return np.sqrt(k) * max(hall(z, max(gam, a)), hall(z, a))

    lo = optimize.brentq(lambda th: t_up(th) - c, -5, 5, xtol=1e-13)
    hi = optimize.brentq(lambda th: t_dn(th) + c, -5, 5, xtol=1e-13)
    p = min(1.0, 2 * min(stats.t.sf(t_up(0.0), k - 1), stats.t.cdf(t_dn(0.0), k - 1)))
    return lo, hi, p, gam


def test_closed_form_against_numerical_inversion_and_the_plain_t():
    rng = np.random.default_rng(4)
    m = np.concatenate([rng.uniform(-0.3, 0.5, size=(3, 12)), draw(3, 12, 0.2, 0.0, 5)])
    m[1, [2, 7]] = np.nan  # absent subjects are not counted
    r = subject_weighted_gap(m, alpha=0.1, power=0.9)
    for j in range(m.shape[0]):
        x = m[j][~np.isnan(m[j])]
        lo, hi, p, gam = _oracle_bounds(x, 0.1)
        assert (r.lower[j], r.upper[j]) == (pytest.approx(lo, abs=1e-10), pytest.approx(hi, abs=1e-10))
        assert r.p_value[j] == pytest.approx(p) and r.skewness[j] == pytest.approx(gam)
        ref = stats.ttest_1samp(x, 0.0)  # the plain t: same estimate and SE, a narrower interval
        ci = ref.confidence_interval(0.9)
        assert r.estimate[j] == pytest.approx(x.mean()) and r.se[j] == pytest.approx(x.std(ddof=1) / np.sqrt(x.size))
        assert r.lower[j] < ci.low and r.upper[j] > ci.high and r.p_value[j] > ref.pvalue
        t = stats.t(x.size - 1)
        assert r.mde[j] > (t.ppf(0.95) + t.ppf(0.9)) * r.se[j]
        assert r.mde[j] == pytest.approx(max(x.mean() - lo, hi - x.mean()) + t.ppf(0.9) * r.se[j])
        assert r.n_subjects[j] == x.size and r.skew_allowance == SKEW_ALLOWANCE


def test_p_value_interval_and_direction_agree():
    # p <= alpha exactly when the interval excludes 0, on the estimate's side, at every alpha -
    # so nightly_verdicts (p and the sign of the estimate) and the interval never disagree.
    means = np.concatenate([draw(3_000, 30, 0.15, 0.0, 8, delta=0.05), draw(3_000, 30, -0.1, 0.05, 9, delta=-0.04),
                            draw(3_000, 30, 0.0, 0.07, 10, delta=0.06)])
    for alpha in (0.005, 0.025, 0.05, 0.2):
        r = subject_weighted_gap(means, alpha=alpha)
        excl = (r.lower > 0) | (r.upper < 0)
        assert np.array_equal(r.p_value <= alpha, excl)
        assert np.all(r.estimate[r.lower > 0] > 0) and np.all(r.estimate[r.upper < 0] < 0)
        assert np.all((r.lower <= r.estimate) & (r.estimate <= r.upper))
        assert excl.any() and not excl.all()  # both outcomes occur


def test_edges_and_validation():
    with pytest.warns(DegenerateDataWarning, match="fewer than 2 subjects"):
        one = subject_weighted_gap([0.4])
    assert (one.lower, one.upper, one.p_value, one.verdict) == (-1.0, 1.0, 1.0, "inconclusive")
    assert one.mde == 2.0  # no gap in [-1, 1] is detectable from one subject
    with pytest.warns(DegenerateDataWarning, match="same mean difference"):
        flat = subject_weighted_gap([0.2, 0.2, 0.2])
    assert flat.lower == flat.upper == pytest.approx(0.2) and flat.verdict == "improved" and flat.p_value == 0
    two = subject_weighted_gap([0.1, 0.3])  # two points: sample skewness 0, the allowance still applies
    assert two.skewness == pytest.approx(0, abs=1e-12) and two.lower < 0.2 < two.upper
    for bad, match in (([1.5, 0.0], "means must lie"), ([np.nan, np.nan], "no subject"), ([], "at least one")):
        with pytest.raises(ValueError, match=match):
            subject_weighted_gap(bad)
    with pytest.raises(ValueError, match="alpha"):
        subject_weighted_gap([0.1, 0.2], alpha=0)
    with pytest.raises(ValueError, match="power"):
        subject_weighted_gap([0.1, 0.2], power=1)


@pytest.mark.slow
@pytest.mark.parametrize("scores", ["binary", "fractional"])
@pytest.mark.parametrize("k", [30, 40, 60, 90])
@pytest.mark.parametrize("a1", [0.01, 0.025, 0.05])
def test_directional_error_grid(scores, k, a1):
    # Every (beta, tau) cell: the one-sided rate in each direction within a1 / 2 (99% CI: many cells).
    worst = []
    for beta, tau in ((0.03, 0.0), (0.05, 0.0), (0.1, 0.0), (0.15, 0.0), (0.2, 0.0), (-0.1, 0.0), (0.05, 0.07),
                      (0.1, 0.07), (0.15, 0.07), (-0.15, 0.07), (0.0, 0.07), (0.0, 0.0), (0.0, 0.12)):
        means = draw(20_000, k, beta, tau, zlib.crc32(repr((scores, k, a1, beta, tau)).encode()), scores=scores)
        up, down = one_sided(means, a1)
        for hits in (up, down):
            rate, lo, hi = rate_ci(hits, hits.size, level=0.99)
            worst.append((rate, lo, hi, beta, tau))
            assert lo <= a1 / 2 and hi <= 1.3 * a1 / 2, (beta, tau, rate, lo, hi)
    print(f"\n{scores} K={k} one-sided {a1 / 2:.2%}: worst cell {max(worst)}")


def _draw_sizes(reps, k, sizes, probs, beta, base, seed):
    """Subject means with a subject-weighted gap of exactly 0: the gap moves with log size
    (``beta``), ``base`` is the disagreement rate each way."""
    rng = np.random.default_rng(seed)
    sizes, probs = np.asarray(sizes), np.asarray(probs, float) / np.sum(probs)
    z = np.log(sizes) - (probs * np.log(sizes)).sum()
    z = z / np.abs(z).max()
    idx = rng.choice(sizes.size, size=(reps, k), p=probs)
    n, mu = sizes[idx], beta * z[idx]
    nb = rng.binomial(n, base + mu / 2)
    na = rng.binomial(n - nb, (base - mu / 2) / (1 - base - mu / 2))
    return (nb - na) / n


@pytest.mark.montecarlo
@pytest.mark.parametrize("sizes, probs, beta, base", [
    (SIZES, np.ones(6), 0.04, 0.02),        # near-ceiling models: 96% of items tie, the gap swings 4 points
    ([5, 200], [1, 9], 0.2, 0.15),          # rare small subjects with a large gap of the other sign
])
def test_directional_level_outside_the_calibrated_settings(sizes, probs, beta, base):
    # One-sided 1.25% (the first look's share of alpha = 5%), 30 subjects, 20,000 seeded reps.
    # The skewness-corrected t (the verdict's claim until #24): 3.2% [3.0, 3.5] and 6.2% - it was
    # marked xfail(strict) here. The claim the verdict makes now, the betting bound on the subject
    # means (valid by theorem for bounded i.i.d. units), holds in both.
    means = _draw_sizes(20_000, 30, sizes, probs, beta, base, seed=77)
    old_up, _ = one_sided(means, 0.025)
    assert rate_ci(old_up, old_up.size, level=0.95)[1] > 0.0125  # the t still fails here (for information)
    up = betting_mean_bounds(means, alpha=0.025).verdict == "improved"
    rate, lo, hi, ok = judge(up, 0.0125)
    assert ok, (rate, lo, hi)
