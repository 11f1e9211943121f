"""Tests for benchcert.stats.gof (black-box classifier goodness-of-fit paper, sections 2-4).

Reference values and oracles:
* the rank-sum statistic without ties equals scikit-learn's roc_auc_score (the paper's
  equation (5): T estimates the distinguisher's AUC); with the uniforms fixed it equals a
  brute-force double loop over equation (7), and its projections those of equation (12);
* the logistic setting of the paper's section 4.1 (theta* ~ N(0, 0.25^2 I), X ~ N(0, I),
  Y ~ Bern(sigmoid(x'theta*)); null theta = theta*, alternative theta = -theta*) with the
  paper's Table 1 (type-I error ~0.05 at alpha = 0.05; reproduced for sample-splitting and
  for cross-fitting with the default variance 2 x (14), not with the paper's (14) - see
  stats/gof.py's docstring) and Figure 1 (power near 1 at small tolerance ratios, cross-fit
  above sample-split).  The default suite runs a reduced version
  (20 features instead of 200, fewer replications); the full grid is marked slow.
Simulated rates are judged with 99% Clopper-Pearson intervals (tests/simcheck.py).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.metrics import roc_auc_score

from simcheck import rate_ci
from benchcert.stats import gof as gof_mod
from benchcert.stats.gof import (
    MIN_ITEMS,
    GofSampleSizeError,
    check_probabilities,
    gof_test,
    rank_sum,
    second_sample,
)


def logistic_setting(n, d, *, alternative, rng, theta_seed=2024):
    """The paper's section 4.1 design; theta* is drawn once (fixed seed) for every replication."""
    theta = np.random.default_rng(theta_seed).normal(0.0, 0.25, d)
    x = rng.normal(size=(n, d))
    eta = 1.0 / (1.0 + np.exp(-x @ theta))
    y = (rng.random(n) < eta).astype(np.int64)
    eta_hat = 1.0 / (1.0 + np.exp(-x @ (-theta if alternative else theta)))
    return x, y, np.c_[1.0 - eta_hat, eta_hat]


# --------------------------------------------------------------------------------------
# building blocks


def test_rank_sum_without_ties_is_the_auc():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=300), rng.normal(0.4, 1.0, size=300)
    t, phi, psi = rank_sum(a, b, rng=1)
    assert t == pytest.approx(roc_auc_score(np.r_[np.zeros(300), np.ones(300)], np.r_[a, b]), abs=1e-12)
    assert phi.mean() == pytest.approx(t) and psi.mean() == pytest.approx(t)


def test_rank_sum_with_ties_matches_a_brute_force_loop_over_equation_7():
    rng = np.random.default_rng(1)
    a, b = rng.integers(0, 4, 40).astype(float), rng.integers(0, 4, 50).astype(float)
    ua, ub = rng.random(40), rng.random(50)
    r = (a[:, None] < b[None, :]) | ((a[:, None] == b[None, :]) & (ua[:, None] < ub[None, :]))
    t, phi, psi = rank_sum(a, b, tie_u=(ua, ub))
    assert t == pytest.approx(r.mean(), abs=1e-12)
    np.testing.assert_allclose(phi, r.mean(axis=1), atol=1e-12)
    np.testing.assert_allclose(psi, r.mean(axis=0), atol=1e-12)
    # averaged over the tie-breaking, T is the AUC with ties counted 1/2
    mean_t = np.mean([rank_sum(a, b, rng=s)[0] for s in range(400)])
    assert mean_t == pytest.approx(roc_auc_score(np.r_[np.zeros(40), np.ones(50)], np.r_[a, b]), abs=0.01)


def test_second_sample_follows_the_probabilities():
    rng = np.random.default_rng(2)
    p = np.tile([0.1, 0.2, 0.7], (20000, 1))
    y2 = second_sample(p, rng=rng)
    freq = np.bincount(y2, minlength=3) / len(y2)
    np.testing.assert_allclose(freq, [0.1, 0.2, 0.7], atol=0.012)  # 4 SE at n = 20,000
    # a row with all its mass on one label always draws that label
    assert (second_sample(np.tile([0.0, 1.0, 0.0], (50, 1)), rng=rng) == 1).all()


# --------------------------------------------------------------------------------------
# validation and refusals


def test_fewer_than_the_minimum_items_is_refused_not_answered():
    x, y, p = logistic_setting(MIN_ITEMS - 1, 3, alternative=False, rng=np.random.default_rng(3))
    with pytest.raises(GofSampleSizeError, match=f"at least {MIN_ITEMS} items; got {MIN_ITEMS - 1}"):
        gof_test(x, y, p, method="crossfit", rng=0)
    with pytest.raises(GofSampleSizeError, match=f"at least {MIN_ITEMS} items"):
        gof_test(x, y, p, method="split", rng=0)
    x, y, p = logistic_setting(MIN_ITEMS, 3, alternative=False, rng=np.random.default_rng(3))
    with pytest.raises(GofSampleSizeError, match="items per fold"):
        gof_test(x, y, p, method="crossfit", folds=10, rng=0)
    assert gof_test(x, y, p, method="crossfit", folds=5, rng=0).n == MIN_ITEMS
    with pytest.raises(GofSampleSizeError, match="leaves 60 of 200 items"):
        gof_test(x, y, p, method="split", split_fraction=0.7, rng=0)


@pytest.mark.parametrize("mutate, fragment", [
    (lambda x, y, p: (x, y, np.where(np.arange(len(p))[:, None] == 7, [[0.3, 0.3]], p)), "probs row 7 sums to 0.6"),
    (lambda x, y, p: (x, y, np.where(np.arange(len(p))[:, None] == 2, [[-0.5, 1.5]], p)), "row 2 has a negative"),
    (lambda x, y, p: (x, y, np.where(np.arange(len(p))[:, None] == 4, [[np.nan, 1.0]], p)), "row 4 is not finite"),
    (lambda x, y, p: (x, np.where(np.arange(len(y)) == 5, 2, y), p), "labels must lie in 0..1"),
    (lambda x, y, p: (x[:-1], y, p), "features must have one row per item"),
    (lambda x, y, p: (np.where(np.arange(len(x))[:, None] == 9, np.inf, x), y, p), "features row 9 is not finite"),
])
def test_malformed_input_is_refused_naming_parameter_and_row(mutate, fragment):
    x, y, p = logistic_setting(300, 3, alternative=False, rng=np.random.default_rng(4))
    with pytest.raises(ValueError, match=fragment):
        gof_test(*mutate(x, y, p), rng=0)


@pytest.mark.parametrize("kw, fragment", [
    ({"method": "bootstrap"}, "method must be"), ({"delta": 0.5}, "delta must be"), ({"delta": -0.1}, "delta must be"),
    ({"alpha": 0.0}, "alpha"), ({"folds": 1}, "folds must be"), ({"distinguisher": "svm"}, "distinguisher must be"),
])
def test_bad_settings_are_refused(kw, fragment):
    x, y, p = logistic_setting(300, 3, alternative=False, rng=np.random.default_rng(5))
    with pytest.raises(ValueError, match=fragment):
        gof_test(x, y, p, rng=0, **kw)


def test_probability_rows_within_tolerance_are_renormalised():
    p = check_probabilities([[0.5, 0.50005], [0.2, 0.8]])
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-15)


# --------------------------------------------------------------------------------------
# the result hangs together


@pytest.mark.parametrize("method", ["crossfit", "split"])
def test_bound_decision_and_p_value_agree(method):
    x, y, p = logistic_setting(400, 5, alternative=True, rng=np.random.default_rng(6))
    r = gof_test(x, y, p, method=method, rng=7, delta=0.1)
    z = 1.6448536269514722
    assert r.delta_min == pytest.approx(r.statistic - 0.5 - r.sigma * z / math.sqrt(r.n_eval))
    assert r.n_eval == (400 if method == "crossfit" else 200)
    assert r.reject == (r.delta < r.delta_min) == (r.p_value < r.alpha)
    assert r.lower == max(r.delta_min, 0.0) and r.upper == 0.5
    assert r.statistic == pytest.approx(np.average(r.fold_statistics, weights=[80] * 5) if method == "crossfit"
                                        else r.fold_statistics[0])
    # same seed, same answer; the tolerance does not change the statistic
    again = gof_test(x, y, p, method=method, rng=7, delta=0.3)
    assert again.statistic == r.statistic and again.delta_min == r.delta_min
    assert again.reject == (0.3 < r.delta_min)


@pytest.mark.parametrize("name", ["logistic", "gbm", "rf"])
def test_every_distinguisher_detects_a_reversed_model(name):
    # multi-class: a classifier whose probabilities are a permutation of the truth is far off
    rng = np.random.default_rng(8)
    n, d, m = 600, 4, 3
    x = rng.normal(size=(n, d))
    w = rng.normal(0, 1.5, (d, m))
    logits = x @ w
    eta = np.exp(logits - logits.max(1, keepdims=True))
    eta /= eta.sum(1, keepdims=True)
    y = (rng.random(n)[:, None] > np.cumsum(eta, 1)).sum(1)
    wrong = eta[:, ::-1]
    r = gof_test(np.c_[x, wrong], y, wrong, distinguisher=name, method="split", rng=9)
    assert r.reject and r.delta_min > 0.1, r
    assert r.n_labels == 3 and r.distinguisher == name


# --------------------------------------------------------------------------------------
# level and power in the paper's logistic setting (section 4.1), reduced for the default suite


def _null_rate(method, n, d, reps, seed):
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(reps):
        x, y, p = logistic_setting(n, d, alternative=False, rng=rng)
        hits += gof_test(x, y, p, method=method, rng=rng).reject
    return hits


@pytest.mark.montecarlo
def test_split_holds_its_level_at_the_minimum_number_of_items():
    # n = MIN_ITEMS = 200 (evaluation half of 100), d = 5, 300 replications.  Observed 0.033 (seed 16).
    reps = 300
    rate, lo, hi = rate_ci(_null_rate("split", MIN_ITEMS, 5, reps, 16), reps)
    assert lo <= 0.05 <= hi, (rate, lo, hi)


@pytest.mark.montecarlo
def test_split_holds_its_level_in_the_logistic_setting_reduced():
    # 400 replications, n = 400, d = 20 (paper: 500 replications, n >= 1000, d = 200; see the slow test).
    # Observed 0.0575 (seed 11); a true rate of 0.09 or more would put 0.05 below the interval.
    reps = 400
    rate, lo, hi = rate_ci(_null_rate("split", 400, 20, reps, 11), reps)
    assert lo <= 0.05 <= hi, (rate, lo, hi)


class MeanShift(ClassifierMixin, BaseEstimator):
    """A fast learned distinguisher (projection on the difference of class means), so that the Monte Carlo
    check can afford many replications; like logistic regression it learns a direction from the data."""

    def fit(self, x, c):
        self.classes_ = np.array([0.0, 1.0])
        self.w_ = x[c == 1].mean(axis=0) - x[c == 0].mean(axis=0)
        return self

    def predict_proba(self, x):
        s = 1.0 / (1.0 + np.exp(-(x @ self.w_)))
        return np.c_[1.0 - s, s]


def _crossfit_z(n, d, reps, seed, *, folds=5, distinguisher="logistic"):
    """sqrt(n) (T - 1/2) / sigma_(14) and the fold statistics of Algorithm 2 at the exact null."""
    rng = np.random.default_rng(seed)
    z, fold_t = [], []
    for _ in range(reps):
        r = gof_test(*logistic_setting(n, d, alternative=False, rng=rng), method="crossfit", folds=folds,
                     distinguisher=distinguisher, rng=rng, crossfit_variance="paper")
        z.append(math.sqrt(r.n_eval) * (r.statistic - 0.5) / r.sigma)
        fold_t.append(r.fold_statistics)
    return np.array(z), np.array(fold_t)


def _mean_fold_correlation(fold_t):
    c = np.corrcoef(fold_t.T)
    return c[~np.eye(len(c), dtype=bool)].mean()


Z95 = 1.6448536269514722


@pytest.mark.parametrize("folds, corr_range", [(5, (0.15, 0.35)), (2, (0.8, 1.0))])
def test_crossfit_fold_statistics_are_correlated_as_derived(folds, corr_range):
    # The module docstring's derivation: at the exact null each pair of items in different folds enters two
    # fold statistics, so for a linear distinguisher the fold statistics correlate 1/(K - 1) and T's variance
    # is about 2 x (14).  With the mean-difference distinguisher (the direction a strongly penalised
    # logistic regression learns), 400 replications, n = 400, d = 20: observed correlation 0.24 (K = 5) and
    # 0.92 (K = 2), variance ratio 1.9-2.1.  Under (14)'s assumption (no covariance) both would be ~0 and ~1.
    z, fold_t = _crossfit_z(400, 20, 250, 21 + folds, folds=folds, distinguisher=MeanShift())
    corr = _mean_fold_correlation(fold_t)
    assert corr_range[0] < corr < corr_range[1], corr
    # chi-square interval for the variance of 400 normal draws (99%): about [0.78, 1.25] x the true value
    assert 1.5 < z.var() < 2.6, z.var()


@pytest.mark.montecarlo
def test_crossfit_paper_variance_over_rejects_and_adjusted_holds_its_level_reduced():
    # The same replications judged two ways: variance (14) as in the paper (labelled as not holding its
    # level) and the default 2 x (14) (z / sqrt 2).  Mean-difference distinguisher, 1,200 replications, n =
    # 400, d = 20, alpha = 0.05.  Observed: (14) 0.11, 2 x (14) 0.050 (seed 31); the derivation predicts
    # 1 - Phi(z_0.95 / sqrt 2) = 0.12 and 0.05.
    z, _ = _crossfit_z(400, 20, 800, 31, distinguisher=MeanShift())
    rate, lo, hi = rate_ci(z > Z95, len(z))
    assert lo > 0.05, (rate, lo, hi)
    rate, lo, hi = rate_ci(z / math.sqrt(2.0) > Z95, len(z))
    assert lo <= 0.05 <= hi and hi < 0.075, (rate, lo, hi)


@pytest.mark.montecarlo
def test_crossfit_levels_with_the_logistic_distinguisher_reduced():
    # The default distinguisher (per-label logistic regression, section 4.1), 200 replications, n = 400,
    # d = 20.  Observed: (14) 0.13, 2 x (14) 0.045 (seed 12); paper setting (d = 200, n = 1,000-3,000, 500
    # replications): see the slow test and docs/analyses.md.
    z, fold_t = _crossfit_z(400, 20, 150, 12)
    rate, lo, hi = rate_ci(z > Z95, len(z))
    assert lo > 0.05, (rate, lo, hi)
    rate, lo, hi = rate_ci(z / math.sqrt(2.0) > Z95, len(z))
    assert lo <= 0.05 <= hi, (rate, lo, hi)
    assert _mean_fold_correlation(fold_t) > 0.05


def test_crossfit_results_name_their_variance_and_whether_the_level_holds():
    x, y, p = logistic_setting(400, 20, alternative=False, rng=np.random.default_rng(1))
    adj = gof_test(x, y, p, method="crossfit", rng=0)
    paper = gof_test(x, y, p, method="crossfit", rng=0, crossfit_variance="paper")
    assert adj.variance == "2 x (14)" and paper.variance == "(14)"
    assert adj.statistic == paper.statistic and adj.sigma == pytest.approx(math.sqrt(2.0) * paper.sigma)
    assert adj.fold_sigmas == paper.fold_sigmas
    assert any("does NOT hold its level" in a for a in paper.assumptions)
    assert not any("does NOT hold its level" in a for a in adj.assumptions)
    assert any("2 x (14)" in a for a in adj.assumptions)
    assert gof_test(x, y, p, method="split", rng=0).variance == "(13)"
    with pytest.raises(ValueError, match="crossfit_variance must be one of adjusted, paper"):
        gof_test(x, y, p, method="crossfit", rng=0, crossfit_variance="14")


@pytest.mark.montecarlo
def test_monte_carlo_cut_off_restores_crossfit_level_reduced():
    # null_draws=B: a Monte Carlo test, exact at alpha for delta = 0 when (B + 1) alpha is whole.  Here
    # alpha = 0.2 with B = 4 (reject when the observed statistic beats all 4 redrawn ones: probability
    # exactly 1/5), 300 replications at n = 200, d = 3.  Observed 0.177 (seed 14); the normal cut-off with
    # the paper's variance (14) rejects 0.307 of the same data sets at alpha = 0.2, which this test also
    # checks.  (The Monte Carlo decision does not depend on the variance estimator: it scales every
    # standardised statistic alike.)
    rng = np.random.default_rng(14)
    reps, hits, plain = 300, 0, 0
    z = 0.8416212335729143  # z_{0.8}
    for _ in range(reps):
        x, y, p = logistic_setting(200, 3, alternative=False, rng=rng)
        r = gof_test(x, y, p, method="crossfit", rng=rng, null_draws=4, alpha=0.2, distinguisher=MeanShift(),
                     crossfit_variance="paper")
        hits += r.reject
        plain += r.statistic - 0.5 - r.sigma * z / math.sqrt(r.n_eval) > 0
        assert r.reject == (r.p_value <= 0.2) == (r.delta_min > 0) and r.null_draws == 4
    assert any("Monte Carlo" in a for a in r.assumptions)
    rate, lo, hi = rate_ci(hits, reps)
    assert lo <= 0.2 <= hi, (rate, lo, hi)
    rate, lo, hi = rate_ci(plain, reps)
    assert lo > 0.2, (rate, lo, hi)


def test_monte_carlo_cut_off_needs_enough_draws():
    x, y, p = logistic_setting(200, 3, alternative=False, rng=np.random.default_rng(1))
    with pytest.raises(ValueError, match="null_draws must be at least 19 for alpha = 0.05"):
        gof_test(x, y, p, null_draws=10, rng=0)
    with pytest.raises(ValueError, match="null_draws must be a non-negative integer"):
        gof_test(x, y, p, null_draws=-1, rng=0)


def test_power_against_the_reversed_model_reduced():
    # theta = -theta*: the paper's alternative.  At tolerance 0 both versions always reject (Figure 1's
    # ordering is checked at the paper's d = 200 below).
    rng = np.random.default_rng(13)
    cross, split = [], []
    for _ in range(20):
        x, y, p = logistic_setting(400, 20, alternative=True, rng=rng)
        cross.append(gof_test(x, y, p, method="crossfit", rng=rng))
        split.append(gof_test(x, y, p, method="split", rng=rng))
    assert all(r.reject for r in cross + split)
    # delta_min is a lower bound on the true separation rho = AUC(likelihood ratio) - 1/2, computed
    # here by Monte Carlo on 200,000 draws of each distribution (0.27 for d = 20; 0.436 for the paper's
    # d = 200, paper ~0.45): never above it
    rho = separation(20)
    assert 0.2 < rho < 0.35
    assert max(r.delta_min for r in cross + split) < rho, rho


def test_crossfit_bound_above_split_in_the_paper_setting_reduced():
    # Figure 1's ordering with the default cross-fit variance 2 x (14): paired on the same data sets, the
    # paper's d = 200, n = 1,000, 10 replications (7 s).  Observed mean difference 0.025 (se 0.006, seed
    # 13); the study's 50 replications: mean delta_min 0.362 against 0.333 (docs/analyses.md).  At d = 20 the gain
    # from fitting on 4/5 of the items instead of half is too small to show in a few replications.
    rng = np.random.default_rng(13)
    diff = []
    for _ in range(10):
        x, y, p = logistic_setting(1000, 200, alternative=True, rng=rng)
        diff.append(gof_test(x, y, p, method="crossfit", rng=rng).delta_min
                    - gof_test(x, y, p, method="split", rng=rng).delta_min)
    diff = np.array(diff)
    assert diff.mean() > 2 * diff.std(ddof=1) / np.sqrt(len(diff)), diff


def separation(d, n=200_000, seed=7):
    """rho between the section 4.1 truth and the reversed model: the likelihood ratio's AUC minus 1/2."""
    rng = np.random.default_rng(seed)
    theta = np.random.default_rng(2024).normal(0.0, 0.25, d)

    def log_lr(x, y):  # log eta_hat(y|x) - log eta(y|x) with eta = sigmoid(s), eta_hat = sigmoid(-s)
        s = x @ theta
        return np.where(y == 1, -2 * s, 2 * s)

    x0 = rng.normal(size=(n, d))
    y0 = (rng.random(n) < 1 / (1 + np.exp(-x0 @ theta))).astype(int)
    x1 = rng.normal(size=(n, d))
    y1 = (rng.random(n) < 1 / (1 + np.exp(x1 @ theta))).astype(int)
    return roc_auc_score(np.r_[np.zeros(n), np.ones(n)], np.r_[log_lr(x0, y0), log_lr(x1, y1)]) - 0.5


# --------------------------------------------------------------------------------------
# full scale (make study)


@pytest.mark.slow
def test_monte_carlo_cut_off_crossfit_level_full():
    # alpha = 0.05, B = 19 (exact: reject with probability 1/20 under the null), 400 replications at
    # n = 400, d = 20, where the normal cut-off rejects ~0.16.
    rng = np.random.default_rng(15)
    reps = 400
    hits = sum(gof_test(*logistic_setting(400, 20, alternative=False, rng=rng), method="crossfit", rng=rng,
                        null_draws=19).reject for _ in range(reps))
    rate, lo, hi = rate_ci(hits, reps)
    assert lo <= 0.05 <= hi, (rate, lo, hi)


@pytest.mark.slow
@pytest.mark.parametrize("n", [1000, 2000, 3000])
@pytest.mark.parametrize("method", ["split", "crossfit"])
def test_level_in_the_paper_logistic_setting_full(method, n):
    # Paper Table 1: 500 replications, d = 200, alpha = 0.05; sample split 0.054/0.054/0.044,
    # cross-fit 0.048/0.052/0.036.  benchmarks/gof_study.py (other seeds) measured split
    # 0.042/0.040/0.070, cross-fit with the paper's (14) 0.130/0.088/0.126 and with the default
    # 2 x (14) 0.052/0.036/0.050 (docs/analyses.md).  Split and adjusted cross-fit must hold their level; for
    # the paper's (14) this keeps the documented inflation (CROSSFIT_LEVEL_NOTE) true.
    reps = 500
    if method == "split":
        rate, lo, hi = rate_ci(_null_rate(method, n, 200, reps, 100 + n), reps)
        assert lo <= 0.05 <= hi, (rate, lo, hi)
        return
    z, _ = _crossfit_z(n, 200, reps, 100 + n)
    rate, lo, hi = rate_ci(z / math.sqrt(2.0) > Z95, reps)
    assert lo <= 0.05 <= hi, (rate, lo, hi)
    rate, lo, hi = rate_ci(z > Z95, reps)
    assert rate > 0.05 and hi < 0.25, (rate, lo, hi)
