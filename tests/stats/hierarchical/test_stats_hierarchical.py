"""Tests for benchcert.stats.hierarchical (exchangeable-bounds paper sec. 4, 6, 7.4).

Coverage claims are checked by seeded Monte Carlo: every simulated rate gets a 99%
Clopper-Pearson interval (scipy binomtest) and the claim must be compatible with it. The
measured numbers are recorded next to each test (seeded, so they reproduce exactly).
Counts are drawn as binomials (the sum of n conditionally i.i.d. Bernoulli draws), never
as n Bernoulli draws.
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np
import pytest
from scipy import optimize, special, stats

from benchcert.stats.degenerate import DegenerateDataWarning
from benchcert.stats.hierarchical import (
    NU_MAX,
    BetaFit,
    ExchangeableBound,
    exchangeable_bound,
    fit_beta_binomial,
    fit_beta_means,
    fit_domains,
    hierarchical_bound,
    hierarchical_interval,
    marchal_arbel_proxy,
)
from benchcert.stats.hierarchical.special import _trigamma

from conftest import MMLU_ITEMS

Z95 = stats.norm.ppf(0.975)

# MMLU test-split subject sizes (Hendrycks et al. 2021, the 57 subjects in alphabetical order,
# as in the cais/mmlu "test" split); they sum to the paper's N = 14,042 (section 7.1).
MMLU_SIZES = np.array([
    100, 135, 152, 100, 265, 144, 100, 100, 100, 173, 102, 100, 235, 114, 145, 378, 126, 100, 310,
    203, 100, 165, 198, 193, 390, 270, 238, 151, 545, 216, 204, 237, 223, 131, 121, 108, 163, 112,
    103, 234, 100, 783, 346, 895, 306, 311, 324, 282, 1534, 272, 612, 110, 245, 201, 100, 166, 171])
# lm-evaluation-harness' MMLU groups: STEM 19, humanities 13, social sciences 12, other 13.
MMLU_K_D = (19, 13, 12, 13)


def rate_ci(hits, reps=None, level=0.99):
    hits = np.asarray(hits)
    k, n = (int(hits.sum()), hits.size) if reps is None else (int(hits), int(reps))
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=level, method="exact")
    return k / n, ci.low, ci.high


# ---------------------------------------------------------------------------------------
# Theorem 4.2


def test_theorem42_formula_tail_and_result_type(no_warnings):
    c = np.full(100, 0.01)
    r = exchangeable_bound(0.6, c, sigma2_mix=0.001, alpha=0.05)
    s_eff = 100 * 0.01**2 / 4 + 0.001
    h = math.sqrt(2 * s_eff * math.log(40))
    assert isinstance(r, ExchangeableBound) and r.method == "theorem_4_2" and r.n == 100
    assert r.sigma2_item == pytest.approx(0.0025) and r.sigma2_eff == pytest.approx(s_eff)
    assert (r.lower, r.upper, r.half_width) == pytest.approx((0.6 - h, 0.6 + h, h))
    # the tail bound at the half-width is exactly alpha; it is capped at 1
    assert r.tail(h) == pytest.approx(0.05) and r.tail(0.0) == 1.0 and r.tail(1e-9) == 1.0
    assert r.assumptions and isinstance(r.assumptions, tuple)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.lower = 0  # type: ignore[misc]
    # vectorised over estimates and mixture proxies
    rv = exchangeable_bound(np.array([0.1, 0.2]), c, sigma2_mix=np.array([0.0, 0.01]))
    assert rv.half_width.shape == (2,) and rv.half_width[1] > rv.half_width[0]


def test_theorem42_zero_proxy_warns():
    with pytest.warns(DegenerateDataWarning, match="zero-width"):
        r = exchangeable_bound(0.5, np.zeros(3), sigma2_mix=0.0)
    assert r.half_width == 0.0


@pytest.mark.parametrize("kwargs, match", [
    (dict(estimate=0.5, c=[], sigma2_mix=0.0), "c must be a non-empty"),
    (dict(estimate=0.5, c=[-1.0], sigma2_mix=0.0), "c must be finite and >= 0"),
    (dict(estimate=0.5, c=[0.1], sigma2_mix=-1.0), "sigma2_mix must be finite"),
    (dict(estimate=np.nan, c=[0.1], sigma2_mix=0.0), "estimate must be finite"),
    (dict(estimate=0.5, c=[0.1], sigma2_mix=0.0, alpha=1.5), "alpha must be in"),
    (dict(estimate=[0.5, 0.6], c=[0.1], sigma2_mix=[0.1, 0.2, 0.3]), "sigma2_mix .* must broadcast"),
])
def test_theorem42_validation(kwargs, match):
    est, c = kwargs.pop("estimate"), kwargs.pop("c")
    with pytest.raises(ValueError, match=match):
        exchangeable_bound(est, c, **kwargs)


@pytest.mark.montecarlo
def test_figure1_naive_bound_undercovers_theorem42_covers():
    # Paper Figure 1: Theta ~ Beta(50, 50), X_i | Theta ~ Bernoulli(Theta),
    # n = 2000, f = sample mean, E f = 1/2. 20,000 replications (sum drawn as Binomial(n, Theta)).
    # The naive independence bound (McDiarmid, sigma2_mix = 0) covers 0.4492
    # (99% CI 0.440-0.458); Theorem 4.2 with the Marchal-Arbel proxy 1/(4 * 101) covers
    # 0.9949 (0.9935-0.9961) >= 0.95. The naive coverage matches its normal prediction
    # P(|N(0, V)| <= h) = 0.4487 from the exact variance V (below): the simulation is right.
    rng = np.random.default_rng(401)
    n, reps = 2000, 20_000
    theta = rng.beta(50, 50, size=reps)
    xbar = rng.binomial(n, theta) / n
    c = np.full(n, 1.0 / n)
    naive = exchangeable_bound(xbar, c, sigma2_mix=0.0)
    thm = exchangeable_bound(xbar, c, sigma2_mix=marchal_arbel_proxy(50, 50))
    cov_naive = np.abs(xbar - 0.5) <= naive.half_width
    cov_thm = np.abs(xbar - 0.5) <= thm.half_width
    r, lo, hi = rate_ci(cov_naive)
    assert hi < 0.5, (r, lo, hi)
    # exact variance of the mean: Var(Theta) (1 - 1/n) + E[Theta (1 - Theta)] / n
    v_theta = 0.25 / 101
    var = v_theta * (1 - 1 / n) + (0.25 - v_theta) / n
    pred = 2 * stats.norm.cdf(naive.half_width[0] / math.sqrt(var)) - 1
    assert lo - 0.005 <= pred <= hi + 0.005, (pred, lo, hi)
    r, lo, hi = rate_ci(cov_thm)
    assert lo >= 0.95, (r, lo, hi)
    # The whole Figure 1 curve: the theorem's tail bound lies above the simulated tail at
    # every t (at the upper end of the simulated rate's CI), the naive curve below it.
    dev = np.abs(xbar - 0.5)
    ts = np.linspace(0.02, 0.14, 7)
    emp = [rate_ci(dev >= t) for t in ts]
    assert all(thm.tail(t) >= e[2] for t, e in zip(ts, emp))
    assert any(naive.tail(t) < e[1] for t, e in zip(ts, emp))


@pytest.mark.montecarlo
def test_example43_gaussian_scale_is_right_and_dropping_the_mixture_undercovers():
    # Paper Example 4.3: P_n = 1/2 + (1/4n) sum R_j (R_j Rademacher),
    # X_i | P_n ~ Bernoulli(P_n), f = mean. Theorem 4.2 uses sigma2_eff = 1/(4n) + 1/(16n)
    # = 5/(16n), and sqrt(n)(Xbar - 1/2) => N(0, 5/16). n = 2000, 400,000 replications
    # (sum R = 2 Binomial(n, 1/2) - n; the X sum = Binomial(n, P_n)).
    # Measured: Var(Xbar) / (5/(16n)) = 1.0040 (exact 1 - 1/(5n) = 0.9999; SE 0.0022);
    # coverage of Xbar +/- 1.96 sigma_eff = 0.9497 (99% CI 0.9488-0.9506) - the right
    # Gaussian scale; with the item proxy alone (sigma2_mix dropped) 0.9202 (0.9191-0.9213),
    # its normal prediction 2 Phi(1.96 sqrt(4/5)) - 1 = 0.9204; Theorem 4.2's own half-width
    # covers 0.9934; the simulated tail at a sigma_eff, 0.3188 (a = 1) and 0.0459 (a = 2),
    # matches 2(1 - Phi(a)) = 0.3173 and 0.0455, under the bound 2 exp(-a^2/2).
    rng = np.random.default_rng(403)
    n, reps = 2000, 400_000
    s_r = 2 * rng.binomial(n, 0.5, size=reps) - n
    p_n = 0.5 + s_r / (4 * n)
    # Half a lattice step of uniform jitter (continuity correction): Xbar lives on k/n, and a
    # boundary atom would otherwise move a coverage rate by ~0.3 points.
    xbar = rng.binomial(n, p_n) / n + rng.uniform(-0.5 / n, 0.5 / n, size=reps)
    s_eff = 5 / (16 * n)
    thm = exchangeable_bound(xbar, np.full(n, 1 / n), sigma2_mix=n * (1 / (4 * n)) ** 2)
    assert thm.sigma2_eff == pytest.approx(s_eff)

    dev = xbar - 0.5
    ratio = dev.var() / s_eff
    se_ratio = math.sqrt(2 / (reps - 1))  # chi-square SE of a variance ratio
    assert abs(ratio - 1) < 3 * se_ratio + 1e-3, ratio

    _, lo, hi = rate_ci(np.abs(dev) <= Z95 * math.sqrt(s_eff))
    assert lo - 0.002 <= 0.95 <= hi + 0.002, (lo, hi)
    _, lo, hi = rate_ci(np.abs(dev) <= Z95 * math.sqrt(1 / (4 * n)))
    assert hi < 0.93 and lo - 0.002 <= 2 * stats.norm.cdf(Z95 * math.sqrt(0.8)) - 1 <= hi + 0.002
    _, lo, _ = rate_ci(np.abs(dev) <= thm.half_width[0])
    assert lo >= 0.95
    for a in (1.0, 2.0):
        _, lo, hi = rate_ci(np.abs(dev) >= a * math.sqrt(s_eff))
        assert lo - 0.003 <= 2 * stats.norm.sf(a) <= hi + 0.003, (a, lo, hi)
        assert 2 * math.exp(-a * a / 2) >= hi  # the theorem's bound holds


# ---------------------------------------------------------------------------------------
# Marchal-Arbel proxy


def test_marchal_arbel_proxy_formula_and_mgf_bound(no_warnings):
    a = np.array([0.5, 2.0, 6.0, 50.0, 3.0])
    b = np.array([0.5, 5.0, 4.0, 50.0, 30.0])
    s2 = marchal_arbel_proxy(a, b)
    np.testing.assert_allclose(s2, 1 / (4 * (a + b + 1)))
    var = a * b / ((a + b) ** 2 * (a + b + 1))
    assert np.all(s2 >= var - 1e-15)
    np.testing.assert_allclose(s2[a == b], var[a == b])  # strictly sub-Gaussian iff symmetric
    # Marchal and Arbel (2017) Thm 2.1: log E exp(lam (P - EP)) <= lam^2 s2 / 2 for all lam,
    # checked on a grid with the Beta MGF 1F1(a; a + b; lam).
    lam = np.linspace(-60, 60, 241)
    for ai, bi, si in zip(a, b, s2):
        log_mgf = np.log(special.hyp1f1(ai, ai + bi, lam)) - lam * ai / (ai + bi)
        assert np.all(log_mgf <= lam**2 * si / 2 + 1e-12)
    assert isinstance(marchal_arbel_proxy(6, 4), float)
    with pytest.raises(ValueError, match="a must be finite and > 0"):
        marchal_arbel_proxy(0.0, 1.0)
    with pytest.raises(ValueError, match="b must be finite and > 0"):
        marchal_arbel_proxy(1.0, np.inf)


def test_fast_trigamma_matches_scipy():
    x = np.concatenate([np.geomspace(1e-6, 1e8, 5000), np.linspace(0.5, 40, 500)])
    np.testing.assert_allclose(_trigamma(x), special.polygamma(1, x), rtol=1e-12)


# ---------------------------------------------------------------------------------------
# beta-binomial maximum likelihood


def _oracle_fit(y, m):
    """Independent MLE: scipy Nelder-Mead on log(a), log(b) from two starts, likelihood from
    scipy.stats.betabinom."""
    def nll(th):
        a, b = np.exp(th)
        return -np.sum(stats.betabinom.logpmf(y, m, a, b))
    best = min((optimize.minimize(nll, x0, method="Nelder-Mead",
                                  options=dict(xatol=1e-10, fatol=1e-12, maxiter=4000))
                for x0 in ((0.0, 0.0), (2.0, 1.5))), key=lambda r: r.fun)
    return np.exp(best.x), -best.fun


def test_beta_binomial_mle_matches_independent_optimiser(no_warnings):
    # Five random over-dispersed domains (K = 5..20 subjects, m = 10..400 items): our batched
    # Newton fit and scipy's Nelder-Mead agree on a + b to 1e-4 and on the maximised
    # log-likelihood (which scipy.stats.betabinom evaluates independently) to 1e-7.
    rng = np.random.default_rng(7)
    ks = [5, 8, 12, 20, 9]
    kmax = max(ks)
    y = np.zeros((len(ks), kmax))
    m = np.zeros((len(ks), kmax))
    for i, k in enumerate(ks):
        mm = rng.integers(10, 400, size=k)
        p = rng.beta(rng.uniform(1, 8), rng.uniform(1, 8), size=k)
        y[i, :k], m[i, :k] = rng.binomial(mm, p), mm
    fit = fit_beta_binomial(y, m)
    assert isinstance(fit, BetaFit) and fit.method == "beta_binomial_mle"
    assert np.all(fit.status == "ok") and fit.converged.all()
    for i, k in enumerate(ks):
        (a, b), ll = _oracle_fit(y[i, :k], m[i, :k])
        assert fit.nu[i] == pytest.approx(a + b, rel=1e-4)
        assert fit.mean[i] == pytest.approx(a / (a + b), rel=1e-5)
        assert fit.loglik[i] == pytest.approx(ll, abs=1e-7)
        assert fit.loglik[i] >= ll - 1e-9
    np.testing.assert_allclose(fit.s2, 1 / (4 * (fit.nu + 1)))
    np.testing.assert_allclose(fit.icc, 4 * fit.s2)
    one = fit_beta_binomial(y[0, :5], m[0, :5])  # 1-D input: one fit, scalar fields
    assert isinstance(one.nu, float) and one.nu == pytest.approx(fit.nu[0])


def test_beta_binomial_mle_recovers_known_parameters():
    # 600 domains of K = 40 subjects, m ~ 100-300, p_k ~ Beta(6, 4) (a + b = 10): the median
    # fitted a + b is 10.30 and the mean fitted proxy 0.02226 vs the true 1/44 = 0.02273
    # (-2.0%: at K = 40 the MLE of a + b errs high, so the plug-in proxy errs slightly low -
    # the plug-in error the three-level test below quantifies on coverage).
    rng = np.random.default_rng(11)
    reps, k = 600, 40
    m = rng.integers(100, 300, size=(reps, k))
    y = rng.binomial(m, rng.beta(6, 4, size=(reps, k)))
    fit = fit_beta_binomial(y, m)
    assert np.all(fit.status == "ok")
    assert 9.0 < np.median(fit.nu) < 11.0
    se = fit.s2.std() / math.sqrt(reps)
    assert abs(fit.s2.mean() - 1 / 44) < 4 * se + 0.001
    assert np.median(fit.mean) == pytest.approx(0.6, abs=0.01)


def test_beta_binomial_degenerate_cases_are_explicit():
    m = np.array([[100, 100, 100, 100], [50, 0, 0, 0], [3, 5, 1, 0], [1, 1, 1, 1], [10, 10, 10, 10],
                  [0, 0, 0, 0]])
    y = np.array([[50, 50, 50, 50], [20, 0, 0, 0], [0, 0, 0, 0], [1, 0, 1, 0], [0, 10, 0, 10], [0, 0, 0, 0]])
    with pytest.warns(DegenerateDataWarning) as rec:
        fit = fit_beta_binomial(y, m)
    assert list(fit.status) == ["underdispersed", "one_subject", "boundary_mean", "single_items",
                                "lower_bound", "no_subjects"]
    assert fit.degenerate.all()
    text = " ".join(str(w.message) for w in rec)
    for word in ("under-dispersed", "one subject", "all 0 or all 1", "two or more", "lower bound"):
        assert word in text
    for field in ("a", "b", "nu", "mean", "s2", "icc", "loglik"):
        assert np.all(np.isfinite(getattr(fit, field))), field
    assert fit.s2[0] == pytest.approx(0.25 / (NU_MAX + 1)) and fit.nu[0] == pytest.approx(NU_MAX)
    assert fit.mean[0] == pytest.approx(0.5)
    np.testing.assert_array_equal(fit.s2[1:4], 0.25)  # worst case where a + b is not identifiable
    assert fit.s2[4] == pytest.approx(0.25, rel=1e-3)
    assert all(isinstance(r, str) and r for r in fit.reason)


@pytest.mark.parametrize("y, m, match", [
    ([[1, 2]], [[3]], "same shape"),
    ([1.5, 2], [3, 3], "successes must be non-negative integers"),
    ([4, 2], [3, 3], "must not exceed trials"),
    ([1, 2], [3, -3], "trials must be non-negative integers"),
    ([], [], "at least one subject"),
])
def test_beta_binomial_validation(y, m, match):
    with pytest.raises(ValueError, match=match):
        fit_beta_binomial(y, m)


def test_beta_on_means_is_conservative_and_handles_edges():
    # Non-binary scores: Beta fitted to subject means. Subject means carry item noise on top
    # of the subject spread, so the fitted proxy exceeds the beta-binomial one on the same
    # (binary) data: 0.0250 vs 0.0232 here (K = 30, m = 60, p ~ Beta(6, 4)).
    rng = np.random.default_rng(13)
    m = np.full(30, 60)
    y = rng.binomial(m, rng.beta(6, 4, size=30))
    bb = fit_beta_binomial(y, m)
    bm = fit_beta_means(y / m)
    assert bm.method == "beta_mle_on_subject_means" and bm.status == "ok"
    assert bm.s2 > bb.s2
    with pytest.warns(DegenerateDataWarning, match="worst-case"):
        edge = fit_beta_means(np.array([[0.0, 0.0, np.nan], [0.3, np.nan, np.nan]]))
    assert list(edge.status) == ["boundary_mean", "one_subject"]
    with pytest.warns(DegenerateDataWarning, match="under-dispersed"):
        flat = fit_beta_means(np.array([0.4, 0.4, 0.4]))
    assert flat.status == "underdispersed" and flat.s2 < 1e-6
    ok = fit_beta_means(np.array([0.0, 1.0, 0.5, 0.7]))  # exact 0 and 1 are squeezed, not fatal
    assert ok.status == "ok" and np.isfinite(ok.loglik)


# ---------------------------------------------------------------------------------------
# Corollary 6.1


def _toy(rng, k=12, models=3):
    sizes = rng.integers(5, 60, size=k)
    subjects = np.repeat(np.arange(k), sizes)
    p = rng.beta(1.5, 1.2, size=(k, models))
    scores = (rng.random((sizes.sum(), models)) < p[subjects]).astype(float)
    domains = np.arange(k) % 3
    return scores, subjects, domains


@pytest.mark.filterwarnings("ignore::benchcert.stats.degenerate.DegenerateDataWarning")  # small toy domains
def test_corollary61_components_weights_and_theorem42_identity():
    rng = np.random.default_rng(17)
    scores, subjects, domains = _toy(rng)
    fits = fit_domains(scores, subjects, domains)
    means, n = fits.subject_means, fits.n
    for weights in ("macro", "pooled", rng.uniform(0, 1, size=12)):
        b = hierarchical_bound(means, n, domains, fits.s2, weights=weights, alpha=0.05, sigma2_dom=1e-4)
        np.testing.assert_allclose(b.sigma2_item + b.sigma2_subj + b.sigma2_dom, b.sigma2_eff, rtol=1e-14)
        np.testing.assert_allclose(b.weights.sum(axis=0), 1.0)
        np.testing.assert_allclose(b.half_width, np.sqrt(2 * b.sigma2_eff * math.log(40)))
        for j in range(scores.shape[1]):
            a = b.weights[:, j]
            # Corollary 6.1 = Theorem 4.2 with item constants a_k / m_k and
            # sigma2_mix = subject + domain proxies (paper, proof of Corollary 6.1).
            c = np.repeat(a / n[:, j], n[:, j])
            t = exchangeable_bound(b.estimate[j], c, sigma2_mix=b.sigma2_subj[j] + b.sigma2_dom[j])
            assert t.half_width == pytest.approx(b.half_width[j], rel=1e-12)
            sd = np.zeros(3)
            np.add.at(sd, domains, a * a)
            assert b.sigma2_subj[j] == pytest.approx(np.sum(fits.s2[:, j] * sd))
    macro = hierarchical_bound(means, n, domains, fits.s2, weights="macro")
    pooled = hierarchical_bound(means, n, domains, fits.s2, weights="pooled")
    np.testing.assert_allclose(macro.estimate, means.mean(axis=0))
    np.testing.assert_allclose(pooled.estimate, scores.mean(axis=0))
    np.testing.assert_allclose(macro.sigma2_item, 0.25 * np.sum(1 / n, axis=0) / 144)
    assert macro.method == "hierarchical" and macro.weighting == "macro" and pooled.weighting == "pooled"
    user = hierarchical_bound(means, n, domains, fits.s2, weights=np.r_[np.ones(6), np.zeros(6)])
    np.testing.assert_allclose(user.estimate, means[:6].mean(axis=0))
    assert user.weighting == "user" and np.all(user.n_subjects == 6)
    item_only = hierarchical_bound(means, n, domains, None)
    assert np.all(item_only.sigma2_subj == 0) and "independent" in item_only.assumptions[0]


def test_paper_table3_anchor_implies_precision_of_about_34():
    # Sanity anchor (paper section 7.4): the paper's Qwen3 0.6B row (Table 3: macro 46.53%, K = 57,
    # N = 14,042, exchangeable half-width 3.29%) with the MMLU subject sizes and one common
    # proxy s^2 implies a + b = 35.4 - "roughly 34"; the other five rows imply 11.6-21.9,
    # all positive, i.e. every exchangeable half-width exceeds the item-only one (1.39%).
    doms = np.repeat(np.arange(4), MMLU_K_D)
    n = MMLU_SIZES[:, None]
    means = np.full((57, 1), 0.4653)

    def hw(s2):
        return hierarchical_bound(means, n, doms, np.full(4, s2), weights="macro").half_width[0]

    item_only = hierarchical_bound(means, n, doms, None).half_width[0]
    assert item_only == pytest.approx(0.0139, abs=5e-5)
    implied = []
    for h in (3.29, 4.79, 5.20, 4.01, 5.26, 4.70):  # Table 3, six models
        s2 = optimize.brentq(lambda s: hw(s) - h / 100, 0.0, 0.25)
        implied.append(1 / (4 * s2) - 1)
    assert 30 < implied[0] < 38, implied
    assert all(5 < v < 40 for v in implied), implied


def _three_level(rng, k_d, ab, reps, alphas=(0.05,)):
    """Simulate the fixed-domain hierarchy with known Beta(a_d, b_d); per alpha, the plug-in and
    oracle (true proxy) hierarchical intervals' coverage of E[Z | domain factors]."""
    k_d = np.asarray(k_d)
    d, k = k_d.size, int(k_d.sum())
    doms = np.repeat(np.arange(d), k_d)
    m = np.resize(MMLU_SIZES, k)
    a, b = np.array(ab, dtype=float).T
    p = rng.beta(a[doms], b[doms], size=(reps, k))
    y = rng.binomial(m, p)
    kmax = int(k_d.max())
    pos = np.concatenate([np.arange(x) for x in k_d])
    yy, mm = np.zeros((reps, d, kmax)), np.zeros((reps, d, kmax))
    yy[:, doms, pos], mm[:, doms, pos] = y, m
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        fit = fit_beta_binomial(yy.reshape(-1, kmax), mm.reshape(-1, kmax))
    s2_hat = fit.s2.reshape(reps, d)
    s2_true = np.broadcast_to(marchal_arbel_proxy(a, b)[:, None], (d, reps))
    n = np.broadcast_to(m[:, None], (k, reps))
    mu = a / (a + b)
    target = np.sum(k_d * mu) / k  # E[Z | domain factors], macro weights
    rho = 1 / (a + b + 1)
    var_z = np.sum((mu * (1 - mu))[doms] * (1 + (m - 1) * rho[doms]) / m) / k**2  # beta-binomial variance
    out = {"degenerate": fit.degenerate.mean(), "sd": math.sqrt(var_z)}
    for alpha in alphas:
        plug = hierarchical_bound((y / m).T, n, doms, s2_hat.T, weights="macro", alpha=alpha)
        oracle = hierarchical_bound((y / m).T, n, doms, s2_true, weights="macro", alpha=alpha)
        out[alpha] = dict(plug=np.abs(plug.estimate - target) <= plug.half_width,
                          oracle=np.abs(oracle.estimate - target) <= oracle.half_width,
                          ratio=plug.half_width / oracle.half_width, h_oracle=oracle.half_width[0])
    return out


@pytest.mark.montecarlo
def test_three_level_hierarchy_plugin_interval_covers_and_plugin_error_is_quantified():
    # Paper section 7 (known-truth check). MMLU-like hierarchy: 4 domains of 19/13/12/13 subjects with MMLU subject
    # sizes, p ~ Beta(6,4), Beta(8,8), Beta(10,6), Beta(5,5); 1,200 replications, macro score,
    # target E[Z | domain factors]. Measured (alpha = 0.05):
    #   plug-in coverage 0.9833 (99% CI 0.971-0.991), oracle (true proxies) 0.9933
    #   (0.985-0.998); the oracle's normal prediction from the exact beta-binomial variance
    #   is 0.9942. Plug-in error: plug-in / oracle half-width median 0.957, 5-95% range
    #   0.82-1.10 (the MLE of a + b errs high at K_d = 12-19, shrinking the proxy), costing
    #   1.0 point of coverage; 0.04% of the fits were degenerate.
    # At alpha = 0.5 (a sharper check; same seed): plug-in 0.880, oracle 0.899, normal
    # prediction 0.909 - both far above the nominal 0.5 (the Chernoff half-width is wide).
    rng = np.random.default_rng(23)
    ab = [(6, 4), (8, 8), (10, 6), (5, 5)]
    sim = _three_level(rng, MMLU_K_D, ab, 1200, alphas=(0.05, 0.5))
    for alpha, floor in ((0.05, 0.95), (0.5, 0.5)):
        res = sim[alpha]
        _, lo, hi = rate_ci(res["plug"])
        assert lo >= floor, (alpha, lo, hi)
        _, olo, ohi = rate_ci(res["oracle"])
        assert olo >= floor
        pred = 2 * stats.norm.cdf(res["h_oracle"] / sim["sd"]) - 1
        assert olo - 0.005 <= pred <= ohi + 0.005, (alpha, pred, olo, ohi)
        assert res["plug"].mean() <= res["oracle"].mean() + 0.005
    q05, med, q95 = np.quantile(sim[0.05]["ratio"], [0.05, 0.5, 0.95])
    assert 0.9 < med < 1.02 and q05 > 0.75 and q95 < 1.2, (q05, med, q95)

    # Few subjects per domain: 4 domains of 3-4 subjects (as MMLU-Pro's law and psychology).
    # The plug-in error is then large: half-width ratio median 0.83, 5% quantile 0.54; 10% of
    # the fits are degenerate (mostly under-dispersed, proxy ~0); coverage 0.9617 (99% CI
    # 0.945-0.975) vs the oracle's 0.9925 - compatible with 0.95 at alpha = 0.05, but 3 points
    # lower. Recorded, and asserted, so that a change in the plug-in's behaviour is noticed.
    rng = np.random.default_rng(29)
    small = _three_level(rng, (4, 3, 3, 4), ab, 1200)
    res = small[0.05]
    _, lo, hi = rate_ci(res["plug"])
    assert lo >= 0.94 and hi >= 0.95, (lo, hi)
    assert res["oracle"].mean() - res["plug"].mean() > 0.01
    assert np.median(res["ratio"]) < 0.9 and small["degenerate"] > 0.03


@pytest.mark.slow
def test_study_plugin_coverage_by_subjects_per_domain_and_precision():
    # Full-scale study (make study, ~30 s): 4 domains of K_d = 3, 6, 12 or 19 subjects, means
    # 0.6/0.5/0.7/0.45 with a + b = nu in {5, 20, 60}, 4,000 replications each, alpha = 0.05.
    # Measured plug-in coverage (oracle in brackets):
    #   K_d =  3: 0.957 (0.996), 0.952 (0.995), 0.974 (0.995) - plug-in/oracle half-width ~0.8,
    #             6-40% degenerate fits; nu = 20 has a 99% CI of 0.943-0.961 (can dip below 0.95)
    #   K_d =  6: 0.982, 0.984, 0.984          K_d = 12: 0.987, 0.990, 0.989
    #   K_d = 19: 0.990, 0.994, 0.992          (oracle 0.993-0.996 throughout)
    rows = []
    for kd in (3, 6, 12, 19):
        for nu in (5, 20, 60):
            ab = [(0.6 * nu, 0.4 * nu), (0.5 * nu, 0.5 * nu), (0.7 * nu, 0.3 * nu), (0.45 * nu, 0.55 * nu)]
            res = _three_level(np.random.default_rng(1000 + kd * 100 + nu), (kd,) * 4, ab, 4000)
            plug, oracle = rate_ci(res[0.05]["plug"]), rate_ci(res[0.05]["oracle"])
            rows.append((kd, nu, plug, oracle))
            assert oracle[1] >= 0.95, (kd, nu, oracle)
            if kd >= 6:
                assert plug[1] >= 0.95, (kd, nu, plug)
            else:
                assert plug[2] >= 0.95 and plug[1] >= 0.94, (kd, nu, plug)
    assert len(rows) == 12


# ---------------------------------------------------------------------------------------
# degenerate inputs through the whole pipeline


def _no_nan(res):
    b, f = res.bound, res.fits
    for arr in (b.estimate, b.lower, b.upper, b.half_width, b.sigma2_item, b.sigma2_subj, b.sigma2_eff,
                f.a, f.b, f.nu, f.mean, f.s2, f.icc):
        assert np.all(np.isfinite(arr))
    assert np.all(b.half_width > 0)


@pytest.mark.filterwarnings("ignore:.*under-dispersed:benchcert.stats.degenerate.DegenerateDataWarning")
def test_one_subject_in_a_domain_uses_worst_case_and_warns():
    rng = np.random.default_rng(31)
    scores, subjects, _ = _toy(rng, k=5)
    domains = np.array([0, 0, 0, 0, 1])  # domain 1 has a single subject
    with pytest.warns(DegenerateDataWarning, match="one subject"):
        res = hierarchical_interval(scores, subjects, domains)
    _no_nan(res)
    assert np.all(res.fits.status[1] == "one_subject") and np.all(res.fits.s2[1] == 0.25)
    # that subject's weight^2 times 1/4 is in the subject term
    assert np.all(res.bound.sigma2_subj >= 0.25 / 25)


def test_all_subjects_with_equal_accuracy_is_underdispersed_and_warned():
    subjects = np.repeat(np.arange(4), 20)
    scores = np.tile(np.r_[np.ones(10), np.zeros(10)], 4)[:, None].repeat(2, axis=1)
    with pytest.warns(DegenerateDataWarning, match="under-dispersed"):
        res = hierarchical_interval(scores, subjects)
    _no_nan(res)
    assert np.all(res.fits.status == "underdispersed")
    np.testing.assert_allclose(res.estimate, 0.5)
    # plug-in: the item-level term remains (never a silent zero), the subject term is ~0
    with pytest.warns(DegenerateDataWarning, match="under-dispersed"):
        plug = hierarchical_interval(scores, subjects, proxy="plugin")
    np.testing.assert_allclose(plug.half_width, np.sqrt(2 * 0.25 * 4 * (1 / 20) / 16 * math.log(40)), rtol=1e-5)
    # default: the subject proxy is the upper bound at the lower confidence bound of a + b,
    # finite for an under-dispersed fit (independent oracle: scipy profile + brentq)
    s2u = res.fits.s2_upper[0, 0]
    assert 0 < s2u < 0.25 and res.fits.nu_lower[0, 0] == pytest.approx(_oracle_nu_lower([10] * 4, [20] * 4, 0.025),
                                                                       rel=2e-3)
    # With one domain the joint bound is that domain's bound, up to the grid (conservative):
    # between s2u * 4/16 and the proxy one grid step (0.2 in log(a + b)) lower.
    a2 = 4 / 16
    subj = res.bound.sigma2_subj
    nu_l = res.fits.nu_lower[0, 0]
    assert np.all(subj >= s2u * a2 * (1 - 1e-9)) and np.all(subj <= 0.25 / (nu_l * math.exp(-0.21) + 1) * a2)
    expect = np.sqrt(2 * (0.25 * 4 * (1 / 20) / 16 + subj) * math.log(2 / 0.025))
    np.testing.assert_allclose(res.half_width, expect, rtol=1e-9)
    assert res.bound.proxy_alpha == 0.025 and "upper confidence bound" in res.assumptions[2]


def _oracle_nu_lower(y, m, level):
    """Profile-likelihood lower bound on a + b, written independently with scipy's optimisers."""
    y, m = np.asarray(y, float), np.asarray(m, float)

    def ll(mu, nu):
        a, b = mu * nu, (1 - mu) * nu
        return float(np.sum(special.betaln(y + a, m - y + b) - special.betaln(a, b)))

    def prof(lognu):
        r = optimize.minimize_scalar(lambda t: -ll(special.expit(t), math.exp(lognu)), bounds=(-15, 15),
                                     method="bounded", options={"xatol": 1e-10})
        return -r.fun

    top = max(prof(w) for w in np.linspace(math.log(1e-4), math.log(1e6), 400))
    crit = stats.norm.isf(level) ** 2
    hi = math.log(1e6)
    # scan down from the top of the range to the first crossing
    grid = np.linspace(math.log(1e-4), hi, 400)
    dev = np.array([2 * (top - prof(w)) for w in grid])
    j = int(np.argmax(dev <= crit))
    return math.exp(optimize.brentq(lambda w: 2 * (top - prof(w)) - crit, grid[j - 1], grid[j]))


@pytest.mark.filterwarnings("ignore:.*under-dispersed:benchcert.stats.degenerate.DegenerateDataWarning")
def test_subject_with_one_item_and_missing_items_are_defined_and_warned():
    rng = np.random.default_rng(37)
    scores, subjects, domains = _toy(rng, k=9, models=3)
    scores = np.vstack([scores, [[1.0, 0.0, 1.0]]])  # subject 9: one item
    subjects = np.r_[subjects, 9]
    domains = np.r_[domains, 0]
    scores[:7, 1] = np.nan  # model 1 skipped items (part of subject 0)
    with pytest.warns(DegenerateDataWarning, match="single answered item"):
        res = hierarchical_interval(scores, subjects, domains)
    _no_nan(res)
    assert res.bound.n[1] == scores.shape[0] - 7
    assert res.fits.n[9].tolist() == [1, 1, 1]
    with pytest.warns(DegenerateDataWarning, match="single answered item"):
        full = hierarchical_interval(np.nan_to_num(scores, nan=0.0), subjects, domains)
    assert res.bound.n[0] == full.bound.n[0]
    # a model missing a whole subject is scored on the others; its macro weights skip it
    scores2 = scores.copy()
    scores2[subjects == 3, 2] = np.nan
    with pytest.warns(DegenerateDataWarning, match="single answered item"):
        res2 = hierarchical_interval(scores2, subjects, domains)
    assert res2.bound.weights[3, 2] == 0 and res2.bound.n_subjects[2] == 9
    _no_nan(res2)


@pytest.mark.filterwarnings("ignore:.*under-dispersed:benchcert.stats.degenerate.DegenerateDataWarning")
def test_non_binary_scores_fit_beta_on_means():
    rng = np.random.default_rng(41)
    scores, subjects, domains = _toy(rng, k=12, models=2)
    scores[:, 1] = rng.uniform(0, 1, size=scores.shape[0]) * scores[:, 1]
    res = hierarchical_interval(scores, subjects, domains)
    _no_nan(res)
    assert res.fits.fit_method.tolist() == ["beta_binomial_mle", "beta_mle_on_subject_means"]
    assert res.fits.binary.tolist() == [True, False]


@pytest.mark.parametrize("kwargs, match", [
    (dict(weights="median"), "weights must be 'macro', 'pooled'"),
    (dict(weights=np.ones(3)), "one entry per subject"),
    (dict(weights=np.zeros(12)), "not all 0"),
    (dict(sigma2_dom=-1.0), "sigma2_dom must be"),
    (dict(alpha=0.0), "alpha must be in"),
])
def test_hierarchical_bound_validation(kwargs, match):
    rng = np.random.default_rng(43)
    scores, subjects, domains = _toy(rng)
    fits = fit_domains(scores, subjects, domains)
    with pytest.raises(ValueError, match=match):
        hierarchical_bound(fits.subject_means, fits.n, domains, fits.s2, **kwargs)


def test_input_validation_of_matrix_functions():
    with pytest.raises(ValueError, match="scores must lie in"):
        fit_domains(np.array([[1.5]]), [0])
    with pytest.raises(ValueError, match="subjects must have one code per item"):
        hierarchical_interval(np.ones((3, 1)), [0, 1])
    with pytest.raises(ValueError, match="no observed"):
        fit_domains(np.array([[np.nan], [np.nan]]), [0, 1])
    with pytest.raises(ValueError, match="subject_domains must have one code per subject"):
        fit_domains(np.ones((3, 1)), [0, 1, 2], [0, 0])
    with pytest.raises(ValueError, match="fits must be a DomainFits"):
        hierarchical_interval(np.ones((3, 1)), [0, 1, 2], fits=object())


# ---------------------------------------------------------------------------------------
# Coverage with few subjects per domain and unequal subject sizes (issue 18, finding 1)

#: (subject sizes, a + b) of one domain: the settings where the plug-in proxy under-covered
#: (plug-in coverage at alpha = 0.05, macro / pooled: 0.88 / 0.85; 0.86-0.90 / 0.71-0.76;
#: 0.98 / 0.68; >= 0.95 / 0.83; 0.74 / 0.74 - measured with the seeds below).
FEW_SUBJECT_SETTINGS = (
    ((214, 187, 47), 10.0),
    ((1003, 56, 42), 10.0),
    ((1003, 56, 42), 20.0),
    ((10, 10, 10, 10, 400), 20.0),
    ((10,) * 9 + (400,), 20.0),
    ((100, 100), 3.0),
    ((50, 300), 3.0),
)


def _one_domain_coverage(sizes, nu, mu, reps, seed, alpha=0.05):
    """Simulate one domain (p_k ~ Beta(mu nu, (1 - mu) nu), Y_k ~ Bin(m_k, p_k)); coverage of
    E[Z] = mu by the default interval (upper proxy) and by the plug-in, for macro, pooled and
    random user weights."""
    rng = np.random.default_rng(seed)
    m = np.asarray(sizes)
    k = m.size
    p = rng.beta(mu * nu, (1 - mu) * nu, size=(reps, k))
    y = rng.binomial(m, p)
    mm = np.broadcast_to(m, (reps, k))
    user = rng.dirichlet(np.ones(k))
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        fit = fit_beta_binomial(y, mm, upper_alpha=alpha / 2)
        prof = fit.profile[None, :, :]
        for name, w in (("macro", "macro"), ("pooled", "pooled"), ("user", user)):
            for proxy, s2, pa, pr in (("upper", fit.s2_upper, alpha / 2, prof), ("plugin", fit.s2, 0.0, None)):
                b = hierarchical_bound((y / m).T, mm.T, np.zeros(k, dtype=int), s2[None, :], weights=w,
                                       alpha=alpha, proxy_alpha=pa, profile=pr)
                out[name, proxy] = np.abs(b.estimate - mu) <= b.half_width
    return out


@pytest.mark.montecarlo
@pytest.mark.parametrize("i", range(len(FEW_SUBJECT_SETTINGS)))
def test_upper_proxy_covers_with_few_subjects_and_unequal_sizes(i):
    # Acceptance (issue 18): 95% Clopper-Pearson lower bound of the coverage >= 0.94 at
    # alpha = 0.05 for macro, pooled and user weights in every setting of the table.
    # Measured at 2,000 reps (mu = 0.6, seeds below): default coverage 0.968-1.000 everywhere
    # (lowest: K = 2, sizes [50, 300], a + b = 3, macro); plug-in 0.69-0.99 (0.69 pooled at
    # sizes [10, 10, 10, 10, 400]).
    sizes, nu = FEW_SUBJECT_SETTINGS[i]
    reps = 1500 if len(sizes) == 2 else 500
    res = _one_domain_coverage(sizes, nu, 0.6, reps, seed=1800 + i)
    for w in ("macro", "pooled", "user"):
        _, lo, hi = rate_ci(res[w, "upper"], level=0.95)
        assert lo >= 0.94, (sizes, nu, w, lo, hi)
    # the plug-in's failure in this setting is real (so the test can tell the two apart)
    if i in (0, 1, 3, 5):
        worst = min(res[w, "plugin"].mean() for w in ("macro", "pooled"))
        assert worst < 0.93, (sizes, nu, worst)


@pytest.mark.slow
def test_study_upper_proxy_coverage_grid():
    # Full grid (make study): every setting x mu in {0.3, 0.5, 0.6, 0.85, 0.95}, 4,000 reps.
    for i, (sizes, nu) in enumerate(FEW_SUBJECT_SETTINGS):
        for j, mu in enumerate((0.3, 0.5, 0.6, 0.85, 0.95)):
            res = _one_domain_coverage(sizes, nu, mu, 4000, seed=9000 + 10 * i + j)
            for w in ("macro", "pooled", "user"):
                _, lo, hi = rate_ci(res[w, "upper"], level=0.95)
                assert lo >= 0.94, (sizes, nu, mu, w, lo, hi)


def _mmlu_pro_structure():
    import polars as pl

    items = pl.read_csv(MMLU_ITEMS)
    g = items.group_by("category", "src").len().sort("category", "src")
    doms = g["category"].rank("dense").cast(int).to_numpy() - 1
    return g["len"].to_numpy(), doms


def _mmlu_pro_coverage(reps, seed, alpha=0.05, nu_range=(5, 200), bonferroni=False):
    # Domain means and precisions spanning what the real fits show on MMLU-Pro (plug-in
    # a + b of 5-200; domain means 0.3-0.8).
    rng = np.random.default_rng(seed)
    m, doms = _mmlu_pro_structure()
    d, k = int(doms.max()) + 1, m.size
    mu = np.linspace(0.3, 0.8, d)
    nu = np.geomspace(*nu_range, d)[rng.permutation(d)]
    p = rng.beta((mu * nu)[doms], ((1 - mu) * nu)[doms], size=(reps, k))
    y = rng.binomial(m, p).astype(float)
    # items as a score matrix would cost too much; fit the counts directly per (rep, domain)
    kmax = int(np.bincount(doms).max())
    pos = np.concatenate([np.arange(c) for c in np.bincount(doms)])
    yy, mm = np.zeros((reps, d, kmax)), np.zeros((reps, d, kmax))
    yy[:, doms, pos], mm[:, doms, pos] = y, m
    fitted_domains = d
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        fit = fit_beta_binomial(yy.reshape(-1, kmax), mm.reshape(-1, kmax), upper_alpha=alpha / 2 / fitted_domains)
    s2u = fit.s2_upper.reshape(reps, d).T
    prof = fit.profile.reshape(reps, d, -1).transpose(1, 0, 2)
    n = np.broadcast_to(m[:, None], (k, reps))
    out = {}
    user = rng.dirichlet(np.ones(k))
    for name, w in (("macro", "macro"), ("pooled", "pooled"), ("user", user)):
        b = hierarchical_bound((y / m).T, n, doms, s2u, weights=w, alpha=alpha, proxy_alpha=alpha / 2,
                               profile=None if bonferroni else prof)
        wts = b.weights[:, 0]
        target = np.sum(wts * mu[doms])
        out[name] = np.abs(b.estimate - target) <= b.half_width
    return out


@pytest.mark.montecarlo
def test_upper_proxy_covers_on_mmlu_pro_structure():
    # MMLU-Pro's real structure: 14 domains of 3-11 subjects, 17-1,003 items per subject
    # (data/mmlu_pro/items_category_src.csv), the joint bound on the subject term. Measured at
    # 500 reps: coverage 0.998-1.000 for macro, pooled and user weights with a + b spread over
    # 2-5, 3-30, 5-200, 20 and 100-1,000 (the Chernoff half-width has room to spare once the
    # proxy is not underestimated); here 100 reps of the hardest (a + b of 2-5); the slow study
    # runs the grid at 1,000 reps.
    res = _mmlu_pro_coverage(100, seed=1814, nu_range=(2, 5))
    for w, hits in res.items():
        _, lo, hi = rate_ci(hits, level=0.95)
        assert lo >= 0.94, (w, lo, hi)


def test_fit_domains_upper_bound_matches_one_domain_fit_and_bonferroni_share():
    rng = np.random.default_rng(41)
    scores, subjects, domains = _toy(rng, k=12, models=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        fits = fit_domains(scores, subjects, domains, proxy_alpha=0.025)
        d = int(domains.max()) + 1
        np.testing.assert_allclose(fits.upper_alpha, 0.025 / d)
        for j in range(2):
            for dd in range(d):
                ks = np.flatnonzero(domains == dd)
                one = fit_beta_binomial(fits.total[ks, j], fits.n[ks, j], upper_alpha=0.025 / d)
                assert one.nu_lower == pytest.approx(fits.nu_lower[dd, j], rel=1e-6)
    assert np.all(fits.s2_upper >= fits.s2) and np.all(fits.nu_lower <= fits.nu)
    with pytest.raises(ValueError, match="upper_alpha"):
        fit_beta_binomial([3, 4], [10, 10], upper_alpha=1.5)
    with pytest.raises(ValueError, match="proxy_alpha"):
        hierarchical_bound(np.full((2, 1), 0.5), np.full((2, 1), 10), [0, 0], [0.01], alpha=0.05, proxy_alpha=0.05)
    with pytest.raises(ValueError, match="fits must come"):
        hierarchical_interval(scores, subjects, domains, fits=fit_domains(scores, subjects, domains))


@pytest.mark.slow
def test_study_upper_proxy_coverage_on_mmlu_pro_structure():
    for i, nu_range in enumerate(((2, 5), (3, 30), (5, 200), (20, 20), (100, 1000))):
        res = _mmlu_pro_coverage(1000, seed=18140 + i, nu_range=nu_range)
        for w, hits in res.items():
            _, lo, hi = rate_ci(hits, level=0.95)
            assert lo >= 0.94, (nu_range, w, lo, hi)


def test_joint_subject_bound_matches_brute_force_knapsack():
    # Oracle: enumerate every choice of one grid interval per domain (3 domains, a coarse slice
    # of the grid so that enumeration is small) and take the best value within the deviance
    # budget. The knapsack rounds costs down to 1/400 of the budget, so it lies between the
    # exact optimum and the exact optimum with the budget raised by D bins.
    from scipy.stats import norm

    from benchcert.stats.hierarchical import joint_subject_bound
    from benchcert.stats.hierarchical.profile import _BUDGET_BINS, _W_GRID

    rng = np.random.default_rng(77)
    d, m = 3, 4
    gi = _W_GRID.size - 1
    prof = np.full((d, m, gi), np.inf)
    keep = np.arange(40, 100, 4)  # 15 intervals per domain are finite
    for dd in range(d):
        for j in range(m):
            hat = rng.integers(10, keep.size)
            dev = np.abs(np.arange(keep.size) - hat) ** 1.5 * rng.uniform(0.3, 2.0)
            dev[hat] = 0.0
            prof[dd, j, keep] = dev
    a2 = rng.uniform(0.01, 0.3, size=(d, m))
    alpha = 0.025
    got = joint_subject_bound(prof, a2, alpha=alpha)
    crit = norm.isf(alpha) ** 2
    s2j = 0.25 / (np.exp(_W_GRID[:-1]) + 1.0)
    for j in range(m):
        grids = np.meshgrid(*[keep] * d, indexing="ij")
        cost = sum(prof[dd, j][g] for dd, g in enumerate(grids))
        val = sum(a2[dd, j] * s2j[g] for dd, g in enumerate(grids))
        exact = val[cost <= crit].max()
        loose = val[cost <= crit * (1 + d / _BUDGET_BINS)].max()
        assert exact - 1e-12 <= got[j] <= loose + 1e-12, (j, exact, got[j], loose)
    # a worst-case domain (all inf) adds A / 4; an unanswered one (A = 0) adds nothing
    prof2 = np.concatenate([prof, np.full((1, m, gi), np.inf)])
    got2 = joint_subject_bound(prof2, np.concatenate([a2, np.full((1, m), 0.2)]), alpha=alpha)
    np.testing.assert_allclose(got2, got + 0.05)
    # one domain: the fast path equals the knapsack with a second, empty domain
    one = joint_subject_bound(prof[:1], a2[:1], alpha=alpha)
    two = joint_subject_bound(np.concatenate([prof[:1], prof[1:2]]), np.r_[a2[:1], np.zeros((1, m))], alpha=alpha)
    np.testing.assert_allclose(one, two)
