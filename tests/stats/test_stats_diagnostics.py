"""Tests for the diagnostics of stats/split_half.py and stats/subject_correlation.py (exchangeable-bounds paper 7.3).

Oracles: the inverse-CDF hypergeometric sampler against scipy.stats.hypergeom; the
hypergeometric split-half against explicit item shuffling; the split-half mean against its
closed-form expectation; the beta-binomial ICC against the ANOVA moment estimator and the
truth; the subject correlation against numpy.corrcoef and a per-pair loop. Seeded; measured
numbers are recorded beside each test.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats

from benchcert.stats.degenerate import DegenerateDataWarning
from benchcert.stats.split_half import NoSplittableSubjectWarning, _HypergeomTable, split_half
from benchcert.stats.subject_correlation import beta_binomial_icc, subject_correlation


def _binary_matrix(rng, sizes, p):
    """Items x models 0/1 matrix: subject k has sizes[k] items, model j accuracy p[k, j]."""
    subjects = np.repeat(np.arange(len(sizes)), sizes)
    scores = (rng.random((subjects.size, p.shape[1])) < p[subjects]).astype(float)
    return scores, subjects


# ---------------------------------------------------------------------------------------
# hypergeometric half counts


def test_hypergeometric_table_is_exact_and_draws_follow_the_pmf():
    # The tabulated CDF equals scipy.stats.hypergeom.cdf to 1e-12 on every support point; the
    # draws of one cell (200,000) pass a chi-square goodness-of-fit test against the pmf
    # (p = 0.64) and match numpy's own hypergeometric sampler in mean and variance.
    good = np.array([5, 50, 300, 0, 10, 400, 37])
    bad = np.array([7, 50, 200, 10, 0, 600, 4])
    n = np.array([6, 50, 250, 5, 5, 500, 20])
    table = _HypergeomTable(good, bad, n)
    for c in range(good.size):
        x = np.arange(table.lo[c], table.lo[c] + table.end[c] - table.start[c])
        ref = stats.hypergeom.cdf(x, good[c] + bad[c], good[c], n[c])
        np.testing.assert_allclose(table.cdf[table.start[c]:table.end[c]], ref, atol=1e-12)
    rng = np.random.default_rng(5)
    draws = table.draw(200_000, rng)
    assert draws.shape == (7, 200_000)
    assert np.all(draws[3] == 0) and np.all(draws[4] == 5)  # one-point supports
    x = draws[1]
    support = np.arange(x.min(), x.max() + 1)
    obs = np.bincount(x - support[0], minlength=support.size)
    exp = stats.hypergeom.pmf(support, 100, 50, 50) * x.size
    keep = exp > 5
    chi2 = np.sum((obs[keep] - exp[keep]) ** 2 / exp[keep]) + (obs[~keep].sum() - exp[~keep].sum()) ** 2 / max(
        exp[~keep].sum(), 1e-12)
    p = stats.chi2.sf(chi2, keep.sum())
    assert p > 0.001, p
    ref = rng.hypergeometric(400, 600, 500, size=200_000)
    assert abs(draws[5].mean() - ref.mean()) < 4 * math.sqrt(2 * ref.var() / 200_000)
    assert draws[5].var() == pytest.approx(ref.var(), rel=0.02)


class _PerCellTable:
    """The former sampler, verbatim: a CDF table per cell, one searchsorted per cell (oracle)."""

    def __init__(self, ngood, nbad, nsample):
        g, b, n = (np.asarray(v, dtype=np.int64) for v in (ngood, nbad, nsample))
        lo = np.maximum(0, n - b)
        hi = np.minimum(n, g)
        length = hi - lo + 1
        self.lo = lo
        self.start = np.r_[0, np.cumsum(length)[:-1]].astype(np.int64)
        self.end = self.start + length
        cell = np.repeat(np.arange(g.size), length)
        x = lo[cell] + (np.arange(length.sum()) - self.start[cell])
        gc, bc, nc = g[cell], b[cell], n[cell]
        with np.errstate(divide="ignore", invalid="ignore"):
            step = np.log((gc - x) * (nc - x)) - np.log((x + 1.0) * (bc - nc + x + 1.0))
        step = np.r_[0.0, step[:-1]]
        step[self.start] = 0.0
        logw = np.cumsum(step)
        logw -= np.repeat(logw[self.start], length)
        logw -= np.repeat(np.maximum.reduceat(logw, self.start), length)
        pmf = np.exp(logw)
        csum = np.cumsum(pmf)
        base = np.r_[0.0, csum[:-1]][self.start]
        cdf = (csum - base[cell]) / (csum[self.end - 1] - base)[cell]
        cdf[self.end - 1] = 1.0
        self.cdf = cdf
        self.n_cells = g.size

    def draw(self, size, rng):
        u = rng.random((self.n_cells, size))
        out = np.empty((self.n_cells, size), dtype=np.int64)
        for c in range(self.n_cells):
            out[c] = np.searchsorted(self.cdf[self.start[c]:self.end[c]], u[c], side="right")
        return out + self.lo[:, None]


def test_shared_table_draws_are_identical_to_the_former_per_cell_sampler():
    # Oracle: the former implementation (a table per cell, one searchsorted per cell).
    # Same seed, same uniforms -> the same integers, on random cells (one-point, empty-half
    # and long supports, many cells sharing parameters as in a real benchmark), and the
    # new search equals a per-cell search of its own table on uniforms placed exactly on,
    # just below and just above tabulated CDF values, where the shifted search rounds.
    rng = np.random.default_rng(20)
    for trial in range(25):
        nc = int(rng.integers(1, 2500))
        tot = rng.choice(rng.integers(1, 150, 12), nc)  # few subject sizes, as in a benchmark
        g = rng.integers(0, tot + 1)
        n = tot // 2 if trial % 2 else rng.integers(0, tot + 1)
        size = int(rng.integers(1, 40))
        new = _HypergeomTable(g, tot - g, n)
        np.testing.assert_array_equal(new.draw(size, np.random.default_rng(trial)),
                                      _PerCellTable(g, tot - g, n).draw(size, np.random.default_rng(trial)))
        np.testing.assert_array_equal(new.draw(size, np.random.default_rng(trial)),
                                      new._draw_per_cell(size, np.random.default_rng(trial)))
    g = np.arange(0, 61)
    table = _HypergeomTable(g, 60 - g, np.full(g.size, 30))
    on = np.stack([table.cdf[table.start[c] + np.arange(min(6, table.end[c] - table.start[c]))].tolist()
                   + [1.0] * (6 - min(6, table.end[c] - table.start[c])) for c in range(g.size)])
    u = np.concatenate([on, np.nextafter(on, 0), np.nextafter(on, 2), np.zeros((g.size, 1))], axis=1)
    u = np.minimum(u, np.nextafter(1.0, 0))
    ref = np.stack([np.searchsorted(table.cdf[table.start[c]:table.end[c]], u[c], side="right")
                    for c in range(g.size)]) + table.lo[:, None]
    np.testing.assert_array_equal(table._invert(u), ref)
    assert table.n_dists == g.size and _HypergeomTable(np.full(1000, 5), np.full(1000, 5), np.full(1000, 5)).n_dists == 1


def test_split_half_without_a_splittable_subject_is_skipped_with_a_named_warning():
    scores = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, np.nan]])
    with pytest.warns(NoSplittableSubjectWarning, match="no subject has 2 or more"):
        res = split_half(scores, [0, 1, 2, 3], [0, 0, 1, 1], n_splits=10, rng=np.random.default_rng(0))
    assert res.method == "skipped" and not res.defined.any() and np.isnan(res.corr).all()
    assert res.status.tolist() == [["too_few_subjects"] * 2] * 2
    assert res.n.tolist() == [4, 3] and res.n_valid.sum() == 0
    assert issubclass(NoSplittableSubjectWarning, DegenerateDataWarning)


def test_split_half_hypergeometric_equals_item_shuffling():
    # Same data, 4,000 splits each way: the two methods' mean correlations agree within
    # Monte Carlo error for every (domain, model) (largest gap 1.4 standard errors).
    rng = np.random.default_rng(8)
    sizes = rng.integers(8, 40, size=12)
    p = rng.beta(2, 2, size=(12, 3))
    scores, subjects = _binary_matrix(rng, sizes, p)
    domains = np.arange(12) % 2
    hyp = split_half(scores, subjects, domains, n_splits=4000, rng=np.random.default_rng(1),
                     method="hypergeometric")
    shf = split_half(scores, subjects, domains, n_splits=4000, rng=np.random.default_rng(2), method="shuffle")
    assert hyp.method == "hypergeometric" and shf.method == "shuffle"
    se = np.sqrt(hyp.sd**2 / hyp.n_valid + shf.sd**2 / shf.n_valid)
    assert np.all(np.abs(hyp.corr - shf.corr) < 4 * se), (hyp.corr, shf.corr, se)


def test_split_half_matches_its_closed_form_expectation(no_warnings):
    # One domain of 300 subjects with 40 items each, p ~ Beta(4, 4); 500 splits. With
    # complementary halves of m/2 items, half means are xbar_k +/- e_k where
    # Var(e_k) = xbar_k (1 - xbar_k) / (m - 1) (sampling without replacement), so across
    # subjects corr ~ (V - E) / (V + E) with V the variance of the xbar_k and E the mean
    # Var(e_k) (paper section 7.3's finite-population caveat). Measured 0.7193 vs predicted
    # 0.7182 (ratio-of-means bias is O(1/K)).
    rng = np.random.default_rng(9)
    k, m = 300, 40
    p = rng.beta(4, 4, size=(k, 1))
    scores, subjects = _binary_matrix(rng, np.full(k, m), p)
    res = split_half(scores, subjects, n_splits=500, rng=np.random.default_rng(3))
    xbar = scores[:, 0].reshape(k, m).mean(axis=1)
    v = xbar.var()
    e = np.mean(xbar * (1 - xbar) / (m - 1))
    pred = (v - e) / (v + e)
    assert res.corr[0, 0] == pytest.approx(pred, abs=0.01), (res.corr[0, 0], pred)
    assert res.defined.all() and not res.negative.any() and res.n_valid[0, 0] == 500
    assert res.n_subjects[0, 0] == 300 and res.method == "hypergeometric"


def test_negative_within_domain_dependence_is_flagged():
    # Domain 0: every subject answers exactly half its items right, so the only variation
    # is the complementary split itself: the halves are perfectly anti-correlated (r = -1),
    # the strongest possible evidence against exchangeable subjects. Domain 1: real spread.
    rng = np.random.default_rng(10)
    half_right = np.tile(np.r_[np.ones(10), np.zeros(10)], 5)
    spread = (rng.random(100) < np.repeat(rng.beta(2, 2, size=5), 20)).astype(float)
    scores = np.r_[half_right, spread][:, None]
    subjects = np.repeat(np.arange(10), 20)
    domains = np.r_[np.zeros(5, int), np.ones(5, int)]
    with pytest.warns(DegenerateDataWarning, match="negative mean split-half"):
        res = split_half(scores, subjects, domains, n_splits=300, rng=np.random.default_rng(4))
    assert res.negative[:, 0].tolist() == [True, False]
    assert res.corr[0, 0] == pytest.approx(-1.0)


def test_split_half_undefined_cases_are_explicit():
    rng = np.random.default_rng(11)
    # domain 0: two subjects only; domain 1: four subjects all correct (halves never vary);
    # domain 2: three subjects, one of them with a single item (cannot be split).
    sizes = np.array([20, 20, 10, 10, 10, 10, 15, 15, 1, 12])
    subjects = np.repeat(np.arange(10), sizes)
    domains = np.array([0, 0, 1, 1, 1, 1, 2, 2, 2, 2])
    p = np.array([0.5, 0.7, 1, 1, 1, 1, 0.3, 0.6, 0.5, 0.8])[:, None]
    scores = (rng.random((subjects.size, 1)) < p[subjects]).astype(float)
    with pytest.warns(DegenerateDataWarning) as rec:
        res = split_half(scores, subjects, domains, n_splits=200, rng=np.random.default_rng(0))
    assert res.status[:, 0].tolist() == ["too_few_subjects", "no_valid_split", "ok"]
    assert res.defined[:, 0].tolist() == [False, False, True]
    assert np.isnan(res.corr[:2, 0]).all() and np.isfinite(res.corr[2, 0])
    assert res.n_subjects[:, 0].tolist() == [2, 4, 3]
    assert any("fewer than 3" in str(w.message) for w in rec)
    assert any("no split" in str(w.message) for w in rec)


def test_split_half_missing_items_and_non_binary_scores():
    rng = np.random.default_rng(12)
    sizes = rng.integers(10, 30, size=8)
    scores, subjects = _binary_matrix(rng, sizes, rng.beta(2, 2, size=(8, 3)))
    scores[:5, 1] = np.nan  # model 1 skipped items
    scores[:, 2] *= rng.uniform(0.5, 1.0, size=scores.shape[0])  # model 2 non-binary
    res = split_half(scores, subjects, n_splits=200, rng=np.random.default_rng(1))
    assert res.method == "hypergeometric+shuffle" and res.defined.all()
    assert res.n.tolist() == [sizes.sum(), sizes.sum() - 5, sizes.sum()]
    with pytest.raises(ValueError, match="needs 0/1 scores"):
        split_half(scores, subjects, n_splits=10, rng=np.random.default_rng(1), method="hypergeometric")


@pytest.mark.parametrize("kwargs, match", [
    (dict(rng=np.random.RandomState(0)), "rng must be a numpy.random.Generator"),
    (dict(rng=np.random.default_rng(0), n_splits=0), "n_splits must be a positive integer"),
    (dict(rng=np.random.default_rng(0), method="bootstrap"), "method must be"),
])
def test_split_half_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        split_half(np.ones((4, 1)), [0, 0, 1, 1], **kwargs)


# ---------------------------------------------------------------------------------------
# ICC


def test_beta_binomial_icc_recovers_the_truth_and_agrees_with_anova():
    # 400 independent replications (one per column) of a domain with K = 60 subjects of
    # m = 100 items, p_k ~ Beta(6, 4): true ICC 1/(a + b + 1) = 1/11 = 0.0909. Mean fitted
    # ICC 0.0889 (MC SE 0.0008: the MLE of a + b errs high by O(1/K), the ICC 2% low; at
    # K = 30 it is 7% low); the ANOVA moment estimator (MSB - MSW)/(MSB + (m-1) MSW) on the
    # same data averages 0.0907; the two agree per replication to 0.0025 (median |diff|).
    rng = np.random.default_rng(14)
    k, m, reps = 60, 100, 400
    p = rng.beta(6, 4, size=(k, reps))
    subjects = np.repeat(np.arange(k), m)
    scores = (rng.random((k * m, reps)) < p[subjects]).astype(float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)  # a few replications are under-dispersed
        res = beta_binomial_icc(scores, subjects)
    icc = res.icc[0]
    assert res.method == "beta_binomial_icc" and icc.shape == (reps,) and np.all(np.isfinite(icc))
    se = icc.std() / math.sqrt(reps)
    assert abs(icc.mean() - 1 / 11) < 4 * se + 0.001, (icc.mean(), se)
    ph = scores.reshape(k, m, reps).mean(axis=1)
    msb = m * ph.var(axis=0, ddof=1)
    msw = np.sum(m * ph * (1 - ph), axis=0) / (k * (m - 1))
    anova = (msb - msw) / (msb + (m - 1) * msw)
    assert abs(anova.mean() - 1 / 11) < 4 * anova.std() / math.sqrt(reps) + 0.002
    assert np.median(np.abs(icc - anova)) < 0.01
    np.testing.assert_allclose(res.icc, 4 * res.fits.s2)
    again = beta_binomial_icc(fits=res.fits)
    np.testing.assert_array_equal(again.icc, res.icc)


# ---------------------------------------------------------------------------------------
# model-centred subject correlation


def test_subject_correlation_matches_corrcoef_and_pairwise_loop(no_warnings):
    rng = np.random.default_rng(15)
    x = rng.uniform(0.2, 0.9, size=(9, 12))
    res = subject_correlation(x)
    centred = x - x.mean(axis=0)
    np.testing.assert_allclose(res.corr, np.corrcoef(centred), atol=1e-12)
    assert res.method == "model_centred_pearson" and res.n == 12 and res.defined.all()
    # with missing subject accuracies: pairwise over the models answering both subjects,
    # each model centred by its own macro over the subjects it answered
    y = x.copy()
    y[rng.random(y.shape) < 0.15] = np.nan
    res2 = subject_correlation(y)
    c = y - np.nanmean(y, axis=0)
    for i in range(9):
        for j in range(9):
            both = ~np.isnan(c[i]) & ~np.isnan(c[j])
            if both.sum() >= 3:
                assert res2.corr[i, j] == pytest.approx(np.corrcoef(c[i, both], c[j, both])[0, 1], abs=1e-10)
                assert res2.n_models[i, j] == both.sum()


def test_subject_correlation_sees_domain_blocks_and_flags_trade_offs(no_warnings):
    # 40 models, 3 domains of 6 subjects. Domains 0 and 1: subjects share a model x domain
    # factor (positive blocks). Domain 2: half its subjects load +f, half -f (a trade-off),
    # so its within-domain mean correlation is negative - flagged. Measured within-domain
    # means 0.80, 0.73, -0.03; between-domain -0.29.
    rng = np.random.default_rng(16)
    mdl = 40
    f = rng.normal(0, 0.08, size=(3, mdl))
    load = np.r_[np.ones(12), np.tile([1.0, -1.0], 3)]
    doms = np.repeat(np.arange(3), 6)
    x = 0.6 + rng.normal(0, 0.05, size=mdl) + load[:, None] * f[doms] + rng.normal(0, 0.04, size=(18, mdl))
    res = subject_correlation(np.clip(x, 0, 1), doms)
    w = res.within_domain_mean
    assert w[0] > 0.3 and w[1] > 0.3 and w[2] < 0
    assert res.negative_within.tolist() == [False, False, True]
    assert w[0] > res.between_domain_mean and w[1] > res.between_domain_mean


def test_subject_correlation_degenerate_and_invalid():
    x = np.array([[0.5, 0.6, 0.9, 0.8], [0.1, 0.4, 0.3, 0.2], [0.0, 0.0, 0.0, 0.0]])
    x[2] = (x[0] + x[1]) / 2  # equal to each model's macro: centred profile 0 for every model
    with pytest.warns(DegenerateDataWarning, match="constant centred profile"):
        res = subject_correlation(x)
    assert not res.defined[2].any() and np.isnan(res.corr[2]).all() and res.defined[0, 1]
    with pytest.raises(ValueError, match="at least 3 models"):
        subject_correlation(x[:, :2])
    with pytest.raises(ValueError, match=r"must lie in \[0, 1\]"):
        subject_correlation(x + 1)
    with pytest.raises(ValueError, match="no answered subject"):
        subject_correlation(np.c_[x, np.full(3, np.nan)])
