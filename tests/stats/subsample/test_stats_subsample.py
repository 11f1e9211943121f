"""Tests for benchcert.stats.subsample (exchangeable-bounds paper sec. 5, 7.5).

Reference values:
* Theorem 5.2 column and empirical columns of Table 4 of the exchangeable-bounds paper
  (section 7.5, Table 4: N = 14,042, alpha = 0.05), with the pooled accuracies of its Table 1;
* h*(250, 14042, 0.05) ~ 6.2 pp (paper sec. 7.5);
* closed forms re-derived by hand in each test from the formulas cited there.

Claims of validity are checked by seeded Monte Carlo; a simulated rate gets a 99%
Clopper-Pearson interval (scipy binomtest), which must contain the exact value computed
without simulation (oracle) and be compatible with the nominal level. Simulated rates are
recorded in comments.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy import stats
from scipy.special import comb

from simcheck import rate_ci
from benchcert.stats.degenerate import DegenerateDataWarning
from benchcert.stats.subsample import (
    SubsampleBound,
    barber_halfwidth,
    corollary_5_6_halfwidth,
    paired_error_distribution,
    posthoc_interval,
    proportional_allocation,
    serfling_halfwidth,
    stratified_error_sd,
    stratified_halfwidth,
    subsample_error_distribution,
    theorem_5_2_halfwidth,
    worst_case_halfwidth,
)

MMLU_CSV = Path(__file__).resolve().parents[3] / "data" / "mmlu_pro" / "mmlu_pro_item_correctness_long.csv.gz"
N_PAPER = 14042
PAPER_N = [250, 500, 1000, 2000, 5000, 10000]
# Paper Table 1 pooled accuracies (%) of the six models behind Table 4.
PAPER_POOLED = np.array([45.09, 53.23, 58.23, 58.25, 71.42, 74.36])


@pytest.fixture(scope="module")
def paper_worst():
    """h* at the paper's six n (computed once; ~1-2 s)."""
    return worst_case_halfwidth(PAPER_N, N_PAPER, alpha=0.05)


@pytest.fixture(scope="module")
def mmlu():
    """Real MMLU-Pro 0/1 matrix (items x models) of the models that answered every item, with subjects."""
    df = pl.read_csv(MMLU_CSV, columns=["model", "question_id", "src", "correct"],
                     schema_overrides={"question_id": pl.String})
    wide = df.pivot(on="model", index=["question_id", "src"], values="correct").sort("question_id")
    models = [c for c in wide.columns[2:] if wide[c].null_count() == 0]
    X = wide.select(models).to_numpy().astype(np.int8)
    subj = wide["src"].cast(pl.Categorical).to_physical().to_numpy().astype(np.int64)
    return X, subj, models


# ---------------------------------------------------------------------------------------
# B1/B2 closed forms


def test_theorem_5_2_reproduces_paper_table4(no_warnings):
    # Table 4, "Theorem half-width" column (N = 14,042, alpha = 0.05), percentage points.
    r = theorem_5_2_halfwidth(PAPER_N, N_PAPER, alpha=0.05)
    np.testing.assert_allclose(100 * r.half_width, [8.51, 5.96, 4.14, 2.81, 1.54, 0.73], atol=0.005)
    assert isinstance(r, SubsampleBound) and r.method == "theorem_5_2" and r.R == 1.0
    # Hand: sqrt((14042 - 250)/(2 * 250 * 14042) * log(40)) = sqrt(0.0019644 * 3.6889) = 0.085126
    assert theorem_5_2_halfwidth(250, N_PAPER).half_width == pytest.approx(0.0851258, abs=1e-6)
    # Remark 5.3: n = N gives 0 exactly, and says so; Remark 7.2: R = 2 doubles it.
    full = theorem_5_2_halfwidth(N_PAPER, N_PAPER)
    assert full.half_width == 0.0 and any("Remark 5.3" in a for a in full.assumptions)
    assert theorem_5_2_halfwidth(250, N_PAPER, R=2.0).half_width == pytest.approx(2 * 0.0851258, abs=2e-6)


def test_comparator_closed_forms_by_hand(no_warnings):
    n, N, L = 250, N_PAPER, math.log(40)
    # Barber non-negative (paper Theorem 5.5 with w_i = 1/n): sqrt(L/(2n)) = 0.0858939
    assert barber_halfwidth(n, N).half_width == pytest.approx(math.sqrt(L / (2 * n)), rel=1e-12)
    assert barber_halfwidth(n, N).half_width == pytest.approx(0.0858939, abs=1e-6)
    # Barber signed: Theorem 5.2 * sqrt(1 + eps_N), eps_N = (H_N - 1)/(N - H_N), H_N by explicit sum.
    H = math.fsum(1.0 / k for k in range(1, N + 1))
    eps_N = (H - 1) / (N - H)
    assert barber_halfwidth(n, N, signed=True).half_width == pytest.approx(
        theorem_5_2_halfwidth(n, N).half_width * math.sqrt(1 + eps_N), rel=1e-12)
    # Serfling (paper eq. 1, two-sided): sqrt((1 - (n-1)/N) L/(2n))
    assert serfling_halfwidth(n, N).half_width == pytest.approx(math.sqrt((1 - (n - 1) / N) * L / (2 * n)), rel=1e-12)
    # Ordering the paper describes (section 5.2): Theorem 5.2 < Barber signed < Barber non-negative.
    ns = np.array(PAPER_N)
    t = theorem_5_2_halfwidth(ns, N).half_width
    assert np.all(t < barber_halfwidth(ns, N, signed=True).half_width)
    assert np.all(barber_halfwidth(ns, N, signed=True).half_width < barber_halfwidth(ns, N).half_width)


def test_corollary_5_6(no_warnings):
    # w_i = 1/n: denominator 1/n - 1/N, i.e. Theorem 5.2 (paper, after Corollary 5.6).
    assert corollary_5_6_halfwidth(np.full(250, 1 / 250), N_PAPER).half_width == pytest.approx(
        theorem_5_2_halfwidth(250, N_PAPER).half_width, rel=1e-12)
    # Hand: w = (0.5, 0.25, 0.25) on n = 3 of N = 10: sum w^2 - W^2/N = 0.375 - 0.1 = 0.275;
    # h = sqrt(0.275/2 * log(40)) = 0.712208
    assert corollary_5_6_halfwidth([0.5, 0.25, 0.25], 10).half_width == pytest.approx(
        math.sqrt(0.275 / 2 * math.log(40)), rel=1e-12)


def test_corollary_zero_denominator_warns():
    # n = N, w = 1/N: T_w = mean_N - mean_N = 0 a.s. (the corollary's last sentence).
    with pytest.warns(DegenerateDataWarning, match="0 almost surely"):
        r = corollary_5_6_halfwidth(np.full(4, 0.25), 4)
    assert r.half_width == 0.0


# ---------------------------------------------------------------------------------------
# B3 exact per-model distribution


def _brute(K, n, N, alpha, hs=()):
    """Oracle: the full hypergeometric pmf from scipy, sorted by |j/n - K/N|."""
    j = np.arange(0, n + 1)
    p = stats.hypergeom.pmf(j, N, K, n)
    D = np.abs(j * N - K * n)
    viol = [p[D > math.floor(h * n * N + 1e-6)].sum() for h in hs]
    for d in np.unique(D):
        if p[D > d].sum() <= alpha - 1e-12:
            return d / (n * N), viol
    raise AssertionError


def test_exact_reproduces_paper_table4_empirical_columns(no_warnings):
    # Paper Table 4: K = round(pooled x 14,042) for the six Table 1 models; columns
    # "mean empirical 95% error", "worst empirical 95% error" (pp) and "max violation rate" (%),
    # the latter = P(|H/n - K/N| > Theorem 5.2 half-width).
    table4 = {250: (5.85, 6.17, 0.65), 500: (4.10, 4.29, 0.70), 1000: (2.86, 2.99, 0.63),
              2000: (1.94, 2.03, 0.67), 5000: (1.06, 1.11, 0.65), 10000: (0.50, 0.52, 0.64)}
    K = np.round(PAPER_POOLED / 100 * N_PAPER).astype(int)
    for n, (mean_e, worst_e, viol) in table4.items():
        th = theorem_5_2_halfwidth(n, N_PAPER).half_width
        d = subsample_error_distribution(K, n, N_PAPER, alpha=0.05, half_widths=[th])
        assert 100 * d.error_quantile.mean() == pytest.approx(mean_e, abs=0.005 + 1e-9)
        assert 100 * d.error_quantile.max() == pytest.approx(worst_e, abs=0.005 + 1e-9)
        assert 100 * d.violation.max() == pytest.approx(viol, abs=0.005 + 1e-9)


def test_exact_distribution_matches_scipy_oracle(no_warnings):
    rng = np.random.default_rng(11)
    for N in (13, 50, 301, 2000):
        for n in sorted({1, 2, N // 3, N // 2, N - 1, N} | set(rng.integers(1, N + 1, 3).tolist())):
            K = np.unique(np.r_[0, 1, N // 2, N - 1, rng.integers(0, N + 1, 5)])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DegenerateDataWarning)
                hs = [0.01, theorem_5_2_halfwidth(n, N).half_width]
                d = subsample_error_distribution(K, n, N, alpha=0.1, half_widths=hs)
            for i, k in enumerate(K):
                q, v = _brute(int(k), n, N, 0.1, hs)
                assert d.error_quantile[i] == pytest.approx(q, abs=1e-15), (N, n, k)
                np.testing.assert_allclose(d.violation[i], v, atol=1e-11)
    # Exact SD: sqrt(p(1-p)/n (N-n)/(N-1)) equals scipy's hypergeometric SD / n.
    d = subsample_error_distribution([3000], 400, 10000)
    assert d.sd == pytest.approx(stats.hypergeom.std(10000, 3000, 400) / 400, rel=1e-12)


def test_constant_vector_has_zero_error_and_warns():
    with pytest.warns(DegenerateDataWarning, match="K = 0 or K = N"):
        d = subsample_error_distribution([0, 100], 10, 100, half_widths=[0.0])
    assert np.all(d.error_quantile == 0) and np.all(d.violation == 0)


# ---------------------------------------------------------------------------------------
# B4 exact worst case


def _brute_worst(n, N, alpha):
    return max(_brute(K, n, N, alpha)[0] for K in range(N + 1))


def test_worst_case_matches_bruteforce_scan_over_every_K(no_warnings):
    # Oracle: for each K the full scipy pmf, quantile by sorting; max over all K in 0..N
    # (no symmetry shortcut, no window truncation).
    for N, alpha in ((9, 0.05), (40, 0.1), (120, 0.05)):
        ns = range(1, N + 1) if N < 50 else (1, 7, 30, 60, 119, 120)
        w = worst_case_halfwidth(list(ns), N, alpha=alpha)
        for i, n in enumerate(ns):
            assert w.half_width[i] == pytest.approx(_brute_worst(n, N, alpha), abs=1e-15), (N, n)


def test_worst_case_reproduces_stats_b4_and_beats_theorem_5_2(paper_worst, no_warnings):
    w = paper_worst
    thm = theorem_5_2_halfwidth(PAPER_N, N_PAPER).half_width
    # Paper sec. 7.5: "about 6.2 pp instead of 8.51 pp at n = 250", ~27% narrower. Measured:
    # 6.20, 4.40, 3.00, 2.05, 1.12, 0.53 pp; the worst K at n = 250 is 5,701, not N/2 = 7,021.
    np.testing.assert_allclose(100 * w.half_width, [6.20, 4.40, 3.00, 2.05, 1.12, 0.53], atol=0.005)
    assert w.worst_K[0] == 5701
    assert 0.25 < 1 - w.half_width[0] / thm[0] < 0.29
    assert np.all(w.half_width < thm) and np.all(w.worst_K_violation <= 0.05)


def test_worst_case_below_theorem_5_2_at_every_n(no_warnings):
    # Every n < N for every N up to 24 and N = 31, 40; random n for N = 1000 and 5000.
    for N in [*range(2, 25), 31, 40]:
        w = worst_case_halfwidth(np.arange(1, N), N, alpha=0.05).half_width
        assert np.all(w < theorem_5_2_halfwidth(np.arange(1, N), N).half_width), N
    rng = np.random.default_rng(5)
    for N in (1000, 5000):
        ns = np.unique(rng.integers(1, N, 5))
        for alpha in (0.05, 0.01):
            assert np.all(worst_case_halfwidth(ns, N, alpha=alpha).half_width
                          < theorem_5_2_halfwidth(ns, N, alpha=alpha).half_width)


@pytest.mark.montecarlo
def test_worst_case_never_exceeded_and_tight(paper_worst):
    n, N, alpha = 250, N_PAPER, 0.05
    w = worst_case_halfwidth(n, N, alpha=alpha)
    assert w.half_width == paper_worst.half_width[0]
    # Exactly: max over *every* K of P(|H/n - K/N| > h*) <= alpha ...
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)   # K = 0 and K = N: error 0
        allK = subsample_error_distribution(np.arange(N + 1), n, N, alpha=alpha, half_widths=[w.half_width])
    assert allK.violation.max() <= alpha
    # ... and h* is the smallest such value: one lattice step below it the worst K violates.
    below = subsample_error_distribution([w.worst_K], n, N, half_widths=[w.half_width - 0.5 / (n * N)])
    assert below.violation[0, 0] > alpha
    # Simulation at many K (hypergeometric draws are exact subset draws): the simulated
    # violation rate's 99% CI contains the exact rate, and never lies above alpha.
    # Measured: K = 5701 -> 0.0441 (exact 0.0443), K = 7021 -> 0.0484 (exact 0.0477), and
    # 0.028-0.040 at the random central counts.
    rng = np.random.default_rng(20260501)
    Ks = np.r_[w.worst_K, N // 2, rng.integers(N // 10, N - N // 10, 6)]
    reps = 100_000
    for K in Ks:
        H = rng.hypergeometric(int(K), N - int(K), n, size=reps)
        hits = np.abs(H * N - K * n) > math.floor(w.half_width * n * N + 1e-6)
        r, lo, hi = rate_ci(hits, reps)
        exact = subsample_error_distribution([int(K)], n, N, half_widths=[w.half_width]).violation[0, 0]
        assert lo <= exact <= hi, (K, r, exact)
        assert lo <= alpha, (K, r)


@pytest.mark.montecarlo
def test_exact_agrees_with_monte_carlo_on_real_mmlu_pro_subsets(mmlu, no_warnings):
    # Random subsets of the real response vectors (numpy's choice without replacement =
    # uniform n-subsets), all models at once; per model the simulated P(error > its exact 95%
    # error) and P(error > Theorem 5.2) must agree with the exact values. 52 comparisons share
    # one seed, so each CI is at level 1 - 0.01/52 (Bonferroni): a false alarm 1% of the time.
    X, _, models = mmlu
    N, n, reps = X.shape[0], 500, 8000
    level = 1 - 0.01 / (2 * X.shape[1])
    rng = np.random.default_rng(7)
    idx = np.stack([rng.choice(N, n, replace=False) for _ in range(reps)])
    sums = np.empty((reps, X.shape[1]))
    for start in range(0, reps, 1000):
        sums[start:start + 1000] = X[idx[start:start + 1000]].sum(axis=1, dtype=np.int32)
    K = X.sum(axis=0)
    th = theorem_5_2_halfwidth(n, N).half_width
    d = subsample_error_distribution(K, n, N, alpha=0.05, half_widths=[th])
    D = np.abs(sums * N - K * n)
    for j in range(len(models)):
        for h, exact in ((d.error_quantile[j], None), (th, d.violation[j, 0])):
            if exact is None:
                exact = subsample_error_distribution([int(K[j])], n, N, half_widths=[h]).violation[0, 0]
            hits = D[:, j] > math.floor(h * n * N + 1e-6)
            r, lo, hi = rate_ci(hits, reps, level=level)
            assert lo <= exact <= hi, (models[j], h, r, exact)
        # Exact SD vs simulated SD of the subset score (chi-square 99.9% band on the variance).
        v = np.var(sums[:, j] / n, ddof=1)
        q = stats.chi2.ppf([(1 - level) / 2, (1 + level) / 2], reps - 1) / (reps - 1)
        assert q[0] <= v / d.sd[j] ** 2 <= q[1]
    # Paired gaps (Remark 7.2) of neighbouring models, same subsets: exact vs simulated.
    order = np.argsort(K)
    th2 = theorem_5_2_halfwidth(n, N, R=2.0).half_width
    for i, j in zip(order[:-1:5], order[1::5]):
        a = int(((X[:, j] == 1) & (X[:, i] == 0)).sum())
        b = int(((X[:, i] == 1) & (X[:, j] == 0)).sum())
        pe = paired_error_distribution(a, b, n, N, half_widths=[th2])
        gapD = np.abs((sums[:, j] - sums[:, i]) * N - (K[j] - K[i]) * n)
        hits = gapD > math.floor(pe.error_quantile * n * N + 1e-6)
        exact = paired_error_distribution(a, b, n, N, half_widths=[pe.error_quantile]).violation[0]
        r, lo, hi = rate_ci(hits, reps, level=level)
        assert lo <= exact <= hi and r <= 0.05 + 0.02, (models[i], models[j], r, exact)
        # The paired bound (Theorem 5.2, R = 2) is never exceeded in simulation.
        assert not (gapD > math.floor(th2 * n * N)).any()


# ---------------------------------------------------------------------------------------
# Theorem 5.2 under its own assumption (infinite exchangeability)


@pytest.mark.montecarlo
def test_theorem_5_2_covers_in_the_paper_figure2_setting(no_warnings):
    # Paper Figure 2: Beta-Bernoulli de Finetti model, n = 150, N = 200. Given Theta the two
    # parts are independent binomials. Exact violation: the total T is beta-binomial and, by
    # exchangeability, H | T ~ Hypergeometric(N, T, n).
    n, N, alpha, a, b = 150, 200, 0.05, 2.0, 3.0
    th = theorem_5_2_halfwidth(n, N, alpha=alpha).half_width
    T = np.arange(N + 1)
    pT = stats.betabinom.pmf(T, N, a, b)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        vT = subsample_error_distribution(T, n, N, half_widths=[th, th / 2]).violation
    exact = pT @ vT   # [at Theorem 5.2, at half of it]
    rng = np.random.default_rng(3)
    reps = 200_000
    theta = rng.beta(a, b, reps)
    h1 = rng.binomial(n, theta)
    err = np.abs(h1 * N - (h1 + rng.binomial(N - n, theta)) * n)
    for k, h in enumerate((th, th / 2)):
        r, lo, hi = rate_ci(err > math.floor(h * n * N + 1e-6), reps)
        assert lo <= exact[k] <= hi
    # Measured: 0.0032 at Theorem 5.2 (exact 0.0032 <= alpha: it covers); at half the
    # half-width 0.130 (exact 0.131) > alpha, so the test can see an undercovering bound.
    assert exact[0] <= alpha < exact[1]


@pytest.mark.montecarlo
def test_paired_bound_covers_under_exchangeable_pairs(no_warnings):
    # Remark 7.2: D in {-1, 0, 1}, a de Finetti mixture over the category probabilities.
    n, N, reps = 100, 400, 100_000
    rng = np.random.default_rng(17)
    probs = rng.dirichlet([2.0, 1.0, 1.0], reps)           # P(D = +1), P(D = -1), P(D = 0)
    sub = rng.multinomial(n, probs)
    rest = rng.multinomial(N - n, probs)
    err = np.abs((sub[:, 0] - sub[:, 1]) * N - (sub[:, 0] + rest[:, 0] - sub[:, 1] - rest[:, 1]) * n) / (n * N)
    th2 = theorem_5_2_halfwidth(n, N, R=2.0).half_width
    r, lo, hi = rate_ci(err > th2, reps)
    # Measured rate 0.0011: the R = 2 bound covers (far below alpha).
    assert hi < 0.05
    r_half, lo_h, _ = rate_ci(err > th2 / 4, reps)
    assert lo_h > 0.05   # a quarter of the bound undercovers (measured 0.337): the check has power


# ---------------------------------------------------------------------------------------
# B5 post-hoc interval


def test_posthoc_matches_bruteforce_inversion(no_warnings):
    # Oracle: scan every K with scipy and keep those not rejected by either one-sided test.
    for N, n in ((20, 7), (60, 60), (200, 37)):
        allK = np.arange(N + 1)
        for k in range(n + 1):
            keep = (stats.hypergeom.sf(k - 1, N, allK, n) > 0.025) & (stats.hypergeom.cdf(k, N, allK, n) > 0.025)
            ok = allK[keep]
            r = posthoc_interval(k, n, N, alpha=0.05)
            assert (r.K_lower, r.K_upper) == (min(ok), max(ok)), (N, n, k)
            assert k <= r.K_lower <= r.K_upper <= N - (n - k)
    full = posthoc_interval([0, 5, 9], 9, 9)
    np.testing.assert_array_equal(full.K_lower, full.K_upper)   # n = N: the count is known


@pytest.mark.montecarlo
def test_posthoc_coverage_exact_and_simulated(mmlu, no_warnings):
    X, _, _ = mmlu
    N, n, alpha = X.shape[0], 250, 0.05
    ks = np.arange(n + 1)
    r = posthoc_interval(ks, n, N, alpha=alpha)
    rng = np.random.default_rng(99)
    Ks = np.r_[X.sum(axis=0)[:4], N // 2, 37, N - 5]
    for K in Ks:
        # Exact coverage: sum over k of P(k | K) 1{K in CI(k)}.
        pk = stats.hypergeom.pmf(ks, N, int(K), n)
        cov = float(pk[(r.K_lower <= K) & (K <= r.K_upper)].sum())
        assert cov >= 1 - alpha
        k_sim = rng.hypergeometric(int(K), N - int(K), n, size=40_000)
        hits = (r.K_lower[k_sim] <= K) & (K <= r.K_upper[k_sim])
        rate, lo, hi = rate_ci(hits, 40_000)
        assert lo <= cov <= hi and hi >= 1 - alpha, (K, rate, cov)
    # Measured: exact coverage 0.953-0.996 (conservative, as Clopper-Pearson is; simulated
    # 0.952-0.996); the interval is narrower than Theorem 5.2's at p = 1/2: 6.30 pp vs 8.50 pp.
    assert r.half_width[n // 2] < theorem_5_2_halfwidth(n, N).half_width


# ---------------------------------------------------------------------------------------
# B6 paired exact


def test_paired_exact_matches_multivariate_bruteforce(no_warnings):
    # Oracle: enumerate (A_s, B_s) with the multivariate hypergeometric pmf C(a,x)C(b,y)C(c,n-x-y)/C(N,n).
    for a, b, n, N in ((5, 3, 6, 15), (0, 4, 5, 12), (20, 20, 30, 60), (7, 0, 7, 9)):
        c = N - a - b
        vals, probs = [], []
        for x in range(a + 1):
            for y in range(b + 1):
                if 0 <= n - x - y <= c:
                    vals.append((x - y) * N - (a - b) * n)
                    probs.append(comb(a, x, exact=True) * comb(b, y, exact=True) * comb(c, n - x - y, exact=True)
                                 / comb(N, n, exact=True))
        signed, probs = np.array(vals), np.array(probs)
        vals = np.abs(signed)
        q = next(d for d in np.unique(vals) if probs[vals > d].sum() <= 0.05 - 1e-12) / (n * N)
        hs = [0.1, 0.3]
        r = paired_error_distribution(a, b, n, N, alpha=0.05, half_widths=hs)
        assert r.error_quantile == pytest.approx(q, abs=1e-15)
        np.testing.assert_allclose(r.violation, [probs[vals > math.floor(h * n * N + 1e-6)].sum() for h in hs],
                                   atol=1e-12)
        # Exact SD of the subset gap: the enumeration's second moment of the (mean-zero) error.
        assert r.sd == pytest.approx(math.sqrt((probs * (signed / (n * N)) ** 2).sum()), rel=1e-9, abs=1e-15)
    with pytest.warns(DegenerateDataWarning, match="agree on every item"):
        assert paired_error_distribution(0, 0, 5, 10).error_quantile == 0.0


# ---------------------------------------------------------------------------------------
# B7 stratified


def test_proportional_allocation_by_hand(no_warnings):
    # q = 20 * (5, 10, 85)/100 = (1, 2, 17): exact.
    np.testing.assert_array_equal(proportional_allocation([5, 10, 85], 20), [1, 2, 17])
    # q = 10 * (1, 1, 98)/100 = (0.1, 0.1, 9.8): raised to 1 each, the excess taken from the largest.
    np.testing.assert_array_equal(proportional_allocation([1, 1, 98], 10), [1, 1, 8])
    # Largest remainder: q = 7 * (3, 3, 4)/10 = (2.1, 2.1, 2.8) -> (2, 2, 3).
    np.testing.assert_array_equal(proportional_allocation([3, 3, 4], 7), [2, 2, 3])
    rng = np.random.default_rng(1)
    for _ in range(200):
        m = rng.integers(1, 40, rng.integers(1, 20))
        n = int(rng.integers(m.size, m.sum() + 1))
        a = proportional_allocation(m, n)
        assert a.sum() == n and np.all((a >= 1) & (a <= m))
    with pytest.raises(ValueError, match="number of strata"):
        proportional_allocation([5, 5, 5], 2)


def test_stratified_proxy_with_finite_population_factor(no_warnings):
    # Hand: proxy sum (m_k/N)^2 (m_k - n_k)/(m_k - 1) / (4 n_k); with n_k/m_k = n/N it is within a
    # factor m_k/(m_k - 1) of Theorem 5.2's (N - n)/(4 n N).
    m, nk = np.array([50, 150, 300]), np.array([10, 30, 60])
    want = sum((mk / 500) ** 2 * (mk - n) / (mk - 1) / (4 * n) for mk, n in zip(m, nk))
    r = stratified_halfwidth(m, nk)
    assert r.variance_proxy == pytest.approx(want, rel=1e-12)
    assert 1 < r.half_width / theorem_5_2_halfwidth(100, 500).half_width < math.sqrt(50 / 49)
    # a stratum drawn whole contributes nothing
    assert stratified_halfwidth([1, 4], [1, 2]).variance_proxy == pytest.approx((4 / 5) ** 2 * 2 / 3 / 8)


def test_stratified_exact_violation_with_tiny_strata(no_warnings):
    # Acceptance (issue 18): 50 strata of 2 items, one drawn from each. The worst response vectors
    # make j strata discordant (0, 1); the error is then (1/100) times a sum of j Rademacher signs,
    # so P(|error| > h) = P(|2 Bin(j, 1/2) - j| > 100 h), maximised over j exactly. With the factor
    # 1 - n_k/m_k it was 6.49% > 5%; with (m_k - n_k)/(m_k - 1) it is 0.66%.
    h = stratified_halfwidth(np.full(50, 2), np.ones(50, int), alpha=0.05).half_width
    worst = 0.0
    for j in range(1, 51):
        b = np.arange(j + 1)
        worst = max(worst, float(stats.binom.pmf(b, j, 0.5)[np.abs(2 * b - j) > 100 * h + 1e-12].sum()))
    assert worst <= 0.05 and worst == pytest.approx(0.0066, abs=5e-4), worst
    old = math.sqrt(2 * 50 * (1 / 50) ** 2 * 0.5 / 4 * math.log(40))  # the 1 - n/m factor
    b = np.arange(51)
    assert stats.binom.pmf(b, 50, 0.5)[np.abs(2 * b - 50) > 100 * old].sum() == pytest.approx(0.0649, abs=5e-4)


@pytest.mark.montecarlo
def test_stratified_sd_and_coverage_on_real_subjects(mmlu, no_warnings):
    X, subj, models = mmlu
    N, n, reps = X.shape[0], 1000, 10_000
    sizes = np.bincount(subj)
    alloc = proportional_allocation(sizes, n)
    counts = np.stack([np.bincount(subj, weights=X[:, j], minlength=sizes.size) for j in range(X.shape[1])],
                      axis=1).astype(np.int64)
    sd = stratified_error_sd(counts, sizes, alloc)
    hw = stratified_halfwidth(sizes, alloc).half_width
    rng = np.random.default_rng(2024)
    w = sizes / N
    for j in (0, X.shape[1] // 2, X.shape[1] - 1):
        H = rng.hypergeometric(counts[:, j], sizes - counts[:, j], alloc, size=(reps, sizes.size))
        err = (H / alloc) @ w - counts[:, j].sum() / N
        v = np.var(err, ddof=1)
        q = stats.chi2.ppf([0.0005, 0.9995], reps - 1) / (reps - 1)
        assert q[0] <= v / sd.stratified_sd[j] ** 2 <= q[1], models[j]
        r, lo, hi = rate_ci(np.abs(err) > hw, reps)
        assert lo <= 0.05, (models[j], r)   # measured 0.0006-0.0048: the proxy covers
    # Stratification removes between-subject spread: smaller exact SD for every model.
    assert np.all(sd.stratified_sd < sd.uniform_sd)


# ---------------------------------------------------------------------------------------
# bad input


@pytest.mark.parametrize("call, match", [
    (lambda: theorem_5_2_halfwidth(101, 100), r"n must be <= N = 100.*101"),
    (lambda: theorem_5_2_halfwidth(0, 100), r"n must be >= 1.*0"),
    (lambda: theorem_5_2_halfwidth(10, 0), r"N must be an integer >= 1; got 0"),
    (lambda: theorem_5_2_halfwidth(10, 100, alpha=1.0), r"alpha must be in \(0, 1\); got 1.0"),
    (lambda: theorem_5_2_halfwidth(10, 100, alpha=0), r"alpha must be in \(0, 1\)"),
    (lambda: theorem_5_2_halfwidth(10.5, 100), r"n must be integer"),
    (lambda: barber_halfwidth(10, 100, signed="yes"), r"signed must be True or False"),
    (lambda: serfling_halfwidth(10, 100, R=-1), r"R must be a positive"),
    (lambda: worst_case_halfwidth(200, 100), r"n must be <= N = 100"),
    (lambda: worst_case_halfwidth(5, 100, alpha=-0.1), r"alpha must be in \(0, 1\)"),
    (lambda: subsample_error_distribution([101], 5, 100), r"K must be correct-answer counts in \[0, N = 100\]; got 1"),
    (lambda: subsample_error_distribution([], 5, 100), r"K must hold at least one"),
    (lambda: subsample_error_distribution([5], 500, 100), r"n must be <= N = 100"),
    (lambda: posthoc_interval(11, 10, 100), r"k must be correct counts in \[0, n = 10\]; got 11"),
    (lambda: posthoc_interval(1, 0, 100), r"n must be an integer >= 1; got 0"),
    (lambda: paired_error_distribution(60, 50, 5, 100), r"a \+ b <= N = 100; got a = 60, b = 50"),
    (lambda: corollary_5_6_halfwidth([], 10), r"weights must be a non-empty"),
    (lambda: stratified_halfwidth([5, 5], [6, 1]), r"1 <= n_k <= m_k"),
])
def test_bad_input_names_parameter_and_value(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# ---------------------------------------------------------------------------------------
# full-scale studies (make study)


@pytest.mark.slow
def test_study_worst_case_below_theorem_on_a_dense_grid():
    # N = 14,042 (paper Table 4): every 97th n from 1 to N - 1, alpha = 0.05 and 0.01.
    N = N_PAPER
    ns = np.arange(1, N, 97)
    for alpha in (0.05, 0.01):
        w = worst_case_halfwidth(ns, N, alpha=alpha).half_width
        assert np.all(w < theorem_5_2_halfwidth(ns, N, alpha=alpha).half_width)


@pytest.mark.slow
def test_study_posthoc_exact_coverage_at_every_K():
    # Exact coverage (no simulation) of the post-hoc interval for every full count K.
    for N, n, alpha in ((2000, 200, 0.05), (500, 37, 0.1)):
        ks = np.arange(n + 1)
        r = posthoc_interval(ks, n, N, alpha=alpha)
        K = np.arange(N + 1)[:, None]
        pk = stats.hypergeom.pmf(ks[None, :], N, K, n)
        cover = ((r.K_lower[None, :] <= K) & (K <= r.K_upper[None, :]))
        assert (pk * cover).sum(axis=1).min() >= 1 - alpha - 1e-12
