"""Tests for benchcert.stats.comparisons (Hardt ch. 3; paired power analysis).

Every validity claim is checked by a seeded simulation whose rate gets a 99% Clopper-Pearson
interval (scipy.stats.binomtest(...).proportion_ci); FDR (a mean, not a rate) gets a 99%
normal interval from the per-replicate false discovery proportions. Simulated rates from the
runs that fixed these seeds are in the comments. Simulations draw binomial/multinomial counts
(the sufficient statistics of binary paired data) wherever the method allows; oracle tests show
the count path equals the item-level path.
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np
import pytest
from scipy import stats

from simcheck import rate_ci
from benchcert.stats.degenerate import DegenerateDataWarning
from benchcert.stats.comparisons import (
    AdjustedPValues,
    PairedComparison,
    adjust_pvalues,
    cr2_mean,
    family_intervals,
    hellinger_min_items,
    minimum_detectable_effect,
    paired_comparison,
    paired_comparison_counts,
    paired_sample_size,
    pairwise_comparisons,
    rank_confidence,
    simultaneous_intervals,
    unpaired_z_test,
)

from conftest import mmlu_pro_subject_sizes
from benchcert.stats.comparisons.score_mde import score_test_mde

ALPHA = 0.05
NAN = np.nan


@pytest.fixture
def no_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield




def mean_ci(x, level=0.99):
    x = np.asarray(x, dtype=float)
    half = stats.norm.ppf(0.5 + level / 2) * x.std(ddof=1) / math.sqrt(x.size)
    return x.mean(), x.mean() - half, x.mean() + half


# ---------------------------------------------------------------------------------------
# hand-checked numbers

# 10 items, 3 subjects. A = baseline, B = candidate; item 8 only A answered, item 9 only B.
#   item subj  A  B   D
#   0    0     1  1   0
#   1    0     0  1  +1
#   2    0     1  0  -1
#   3    1     0  1  +1
#   4    1     0  1  +1
#   5    1     1  1   0
#   6    2     0  0   0
#   7    2     0  1  +1
#   8    2     1  -    (excluded, counted in n_only_a)
#   9    2     -  0    (excluded, counted in n_only_b)
HAND_A = np.array([1, 0, 1, 0, 0, 1, 0, 0, 1, NAN])
HAND_B = np.array([1, 1, 0, 1, 1, 1, 0, 1, NAN, 0])
HAND_SUBJ = np.array([0, 0, 0, 1, 1, 1, 2, 2, 2, 2])


def _cr2_oracle(sizes, resid_sums):
    """CR2 SE and Bell-McCaffrey df with explicit matrices (Pustejovsky & Tipton 2018, Eq. 6 and
    sec. 3.2; working model I): A_c = (I - H_cc)^(-1/2) by eigendecomposition, G = (I - H)[a_c],
    df = (sum lambda)^2 / sum lambda^2 over the eigenvalues of G'G. The residuals inside a
    cluster only enter through their sum here (A_c maps 1 to a multiple of 1)."""
    sizes = np.asarray(sizes)
    n, c = int(sizes.sum()), sizes.size
    x = np.ones((n, 1))
    h = x @ x.T / n
    lab = np.repeat(np.arange(c), sizes)
    g = np.zeros((n, c))
    meat = 0.0
    for k in range(c):
        idx = np.flatnonzero(lab == k)
        w, v = np.linalg.eigh(np.eye(idx.size) - h[np.ix_(idx, idx)])
        a_c = v @ np.diag(w ** -0.5) @ v.T
        e_c = np.full(idx.size, resid_sums[k] / idx.size)
        meat += float((x[idx].T @ a_c @ e_c)[0]) ** 2
        col = np.zeros(n)
        col[idx] = (a_c @ x[idx])[:, 0] / n
        g[:, k] = (np.eye(n) - h) @ col
    lam = np.linalg.eigvalsh(g.T @ g)
    return math.sqrt(meat) / n, lam.sum() ** 2 / (lam ** 2).sum()


def test_cr2_closed_form_matches_explicit_matrices():
    rng = np.random.default_rng(5)
    for sizes in ([5, 5, 5, 5], [1003, 56, 42, 17], [2, 9, 30, 4, 4, 60]):
        n_c = np.asarray(sizes, float)[:, None]
        r = rng.normal(size=len(sizes))
        var, df = cr2_mean(n_c, r[:, None])
        se_o, df_o = _cr2_oracle(sizes, r)
        assert math.sqrt(var[0]) == pytest.approx(se_o) and df[0] == pytest.approx(min(df_o, len(sizes) - 1))
    # equal sizes: C - 1 df
    assert cr2_mean(np.full((7, 1), 20.0), np.ones((7, 1)))[1][0] == pytest.approx(6)


def test_hand_example(no_warnings):
    # 3 subjects: the default question is the fixed-strata items one; the clustered test is beside it
    assert paired_comparison(HAND_A, HAND_B, HAND_SUBJ).method == "stratified_items"
    r = paired_comparison(HAND_A, HAND_B, HAND_SUBJ, primary="clustered_subject")
    assert isinstance(r, PairedComparison) and r.method == "clustered_subject" and r.question.startswith("subjects")
    # D on the 8 shared items: 0, 1, -1, 1, 1, 0, 0, 1 -> sum 3, sum of squares 5
    assert (r.n, r.n_only_a, r.n_only_b, r.n_excluded) == (8, 1, 1, 2)
    assert r.estimate == pytest.approx(3 / 8)
    assert (r.n_b_wins, r.n_a_wins) == (4, 1) and r.binary is True
    assert (r.mean_a, r.mean_b) == (pytest.approx(3 / 8), pytest.approx(6 / 8))
    # paired SE: var = (5 - 8 * (3/8)^2) / 7 = (5 - 9/8) / 7 = 31/56
    se = math.sqrt(31 / 56 / 8)
    clt = r.tests["paired_clt"]
    assert clt.se == pytest.approx(se)
    # on 0/1 scores the p-value is Tango's (1998) score test: at delta_0 = 0 his constrained fit of
    # P(only A right) is (b + a) / 2n, so Z(0) is McNemar's (b - a) / sqrt(b + a), here times sqrt((n - 1) / n)
    # (Miettinen and Nurminen's n / (n - 1) on the variance): 3 / sqrt(5 * 8 / 7)
    assert clt.statistic == pytest.approx(3 / math.sqrt(5 * 8 / 7))
    assert clt.p_value == pytest.approx(2 * stats.norm.sf(3 / math.sqrt(5 * 8 / 7)))
    # the standard error stays the paired one: scipy's paired t statistic is mean(D) / (sd(D)/sqrt(n))
    sh = ~np.isnan(HAND_A) & ~np.isnan(HAND_B)
    assert clt.estimate / clt.se == pytest.approx(stats.ttest_rel(HAND_B[sh], HAND_A[sh]).statistic)
    # clustered (CR2): subject sums of D - 3/8: (0 - 3*3/8), (2 - 3*3/8), (1 - 2*3/8) = -9/8, 7/8, 1/4,
    # subject sizes 3, 3, 2 of N = 8: V = sum r_c^2 / (1 - n_c/N) / N^2
    se_cl = math.sqrt(((9 / 8) ** 2 / (5 / 8) + (7 / 8) ** 2 / (5 / 8) + (1 / 4) ** 2 / (6 / 8))) / 8
    cl = r.tests["clustered_subject"]
    assert cl.se == pytest.approx(se_cl) and r.se == pytest.approx(se_cl)
    se_o, df_o = _cr2_oracle([3, 3, 2], np.r_[-9 / 8, 7 / 8, 1 / 4])
    assert se_o == pytest.approx(se_cl) and cl.df == pytest.approx(df_o) and df_o < 2
    # The interval is the sign-flip test inverted (fewer than 30 subjects; issue #36): with 3 subjects
    # the smallest p-value is 2/8 > alpha, no shift is rejected and the interval is all of [-1, 1]
    assert (r.lower, r.upper) == (-1.0, 1.0) and r.verdict == "inconclusive"
    # The p-value is the sign-flip test's (fewer than 30 subjects; issue 24 finding 3), no longer
    # 2 t.sf(t, df) = 0.247: the subject sums 0, 2, 1 give |t| at least the data's under 4 of the 8
    # sign vectors (the first subject's flip changes nothing, the all-flip gives -t).
    assert r.tests["clustered_subject"].statistic == pytest.approx(3 / 8 / se_cl)
    assert r.p_value == pytest.approx(4 / 8)
    # McNemar exact: 4 of 5 discordant items favour B -> scipy binomtest p = 0.375
    assert r.tests["mcnemar_exact"].p_value == pytest.approx(stats.binomtest(4, 5).pvalue) == pytest.approx(0.375)
    # Hoeffding: h = sqrt(2 log(40) / 8), p = 2 exp(-8 (3/8)^2 / 2)
    h = r.tests["hoeffding"]
    assert h.estimate - h.lower == pytest.approx(math.sqrt(2 * math.log(40) / 8)) and h.upper == 1.0
    assert h.p_value == pytest.approx(min(1, 2 * math.exp(-8 * 9 / 64 / 2)))
    assert r.verdict == "inconclusive"
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.estimate = 0  # type: ignore[misc]


def test_verdicts_follow_the_primary_interval(no_warnings):
    rng = np.random.default_rng(0)
    a = (rng.random(4000) < 0.5).astype(float)
    b = np.where(rng.random(4000) < 0.2, 1.0, a)  # B fixes 20% of items: a clear improvement
    up = paired_comparison(a, b)
    down = paired_comparison(b, a)
    assert up.method == "paired_clt" and up.verdict == "improved" and up.lower > 0
    assert down.verdict == "regressed" and down.upper < 0
    assert up.estimate == pytest.approx(-down.estimate)


def test_mcnemar_matches_scipy_binomtest(no_warnings):
    # Oracle: for p = 1/2 doubling the smaller tail equals scipy's two-sided binomtest.
    for nb, na in [(0, 3), (7, 2), (15, 15), (40, 61), (120, 90), (1, 0)]:
        r = paired_comparison_counts(nb, na, nb + na + 10)
        assert r.tests["mcnemar_exact"].p_value == pytest.approx(stats.binomtest(nb, nb + na).pvalue, rel=1e-9)


def test_unpaired_z_matches_welch_statistic(no_warnings):
    rng = np.random.default_rng(1)
    a = rng.random(300)
    b = rng.random(250) * 0.9
    r = unpaired_z_test(a, b)
    welch = stats.ttest_ind(b, a, equal_var=False)
    assert r.statistic == pytest.approx(welch.statistic)
    assert r.method == "unpaired_z" and r.estimate == pytest.approx(b.mean() - a.mean())


# ---------------------------------------------------------------------------------------
# oracles: three paths to the same numbers


def _random_matrix(rng, n=1500, k=6, n_subj=25, missing=0.04, fractional_col=None):
    subj = rng.integers(0, n_subj, n)
    p = rng.beta(2, 2, n)[:, None] + rng.normal(0, 0.05, k)[None, :]
    x = (rng.random((n, k)) < np.clip(p, 0, 1)).astype(float)
    x[rng.random((n, k)) < missing] = NAN
    if fractional_col is not None:
        x[:, fractional_col] = np.where(np.isnan(x[:, fractional_col]), NAN, rng.random(n).round(2))
    return x, subj


@pytest.mark.parametrize("fractional", [None, 2])
def test_pairwise_gram_path_equals_item_level_path(fractional):
    rng = np.random.default_rng(2)
    x, subj = _random_matrix(rng, fractional_col=fractional)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        allp = pairwise_comparisons(x, subj)
        base = pairwise_comparisons(x, subj, baseline=3)
    assert allp.pair_a.size == 15 and base.pair_a.size == 5 and set(base.pair_a) == {3}
    for res in (allp, base):
        for j, (ia, ib) in enumerate(zip(res.pair_a, res.pair_b)):
            one = paired_comparison(x[:, ia], x[:, ib], subj)
            for f in ("estimate", "lower", "upper", "se", "p_value", "mde", "mean_a", "mean_b"):
                assert getattr(res, f)[j] == pytest.approx(getattr(one, f), abs=1e-12), f
            for f in ("n", "n_only_a", "n_only_b", "n_b_wins", "n_a_wins", "n_clusters"):
                assert getattr(res, f)[j] == getattr(one, f), f
            assert res.verdict[j] == one.verdict
            # A family with a non-binary pair reports the sign test, which on binary pairs is McNemar's.
            for m in one.tests:
                key = "sign_test" if m == "mcnemar_exact" and "sign_test" in res.tests else m
                assert res.tests[key].p_value[j] == pytest.approx(one.tests[m].p_value, abs=1e-12), m
    if fractional is not None:
        assert "sign_test" in allp.tests and "mcnemar_exact" not in allp.tests
    # columns as pairs in one call give the same as one call per pair
    cols = paired_comparison(x[:, allp.pair_a], x[:, allp.pair_b], subj)
    np.testing.assert_allclose(cols.p_value, allp.p_value, atol=1e-12)


def test_count_path_equals_item_path(no_warnings):
    rng = np.random.default_rng(3)
    x, subj = _random_matrix(rng, n=900, k=2, n_subj=12, missing=0.0)
    item = paired_comparison(x[:, 0], x[:, 1], subj)
    d = x[:, 1] - x[:, 0]
    nb = np.bincount(subj, weights=d > 0, minlength=12).astype(int)
    na = np.bincount(subj, weights=d < 0, minlength=12).astype(int)
    m = np.bincount(subj, minlength=12)
    cnt = paired_comparison_counts(nb, na, m, by_subject=True)
    for f in ("estimate", "lower", "upper", "se", "p_value", "mde"):
        assert getattr(cnt, f) == pytest.approx(getattr(item, f), abs=1e-12), f
    assert set(item.tests) - set(cnt.tests) == {"unpaired_z"}  # counts carry no per-model accuracy
    for meth in cnt.tests:
        assert cnt.tests[meth].p_value == pytest.approx(item.tests[meth].p_value, abs=1e-12)
    flat = paired_comparison_counts(nb.sum(), na.sum(), m.sum())
    assert flat.se == pytest.approx(paired_comparison(x[:, 0], x[:, 1]).se)


# ---------------------------------------------------------------------------------------
# size under the null: equal per-item success probabilities, correlated errors


def _null_counts(rng, reps, n_subj, m, rho):
    """Per-subject discordant counts for two models with identical item success probabilities.

    Items of subject c have success probability p ~ Beta(a_c, b_c) (subjects differ in
    difficulty); both models share p, and with probability rho copy one common response
    (correlated errors), otherwise answer independently. A discordant item then favours either
    model with probability 1/2, and with items drawn iid within a subject the discordant count
    is Binomial(m, (1 - rho) 2 E[p (1 - p)]) - drawn directly instead of m Bernoulli pairs.
    """
    a = rng.uniform(1, 6, (reps, n_subj))
    b = rng.uniform(1, 6, (reps, n_subj))
    e_pq = a * b / ((a + b) * (a + b + 1))
    n_disc = rng.binomial(m, (1 - rho) * 2 * e_pq)
    nb = rng.binomial(n_disc, 0.5)
    return nb, n_disc - nb


@pytest.mark.montecarlo
def test_paired_tests_hold_their_size_with_correlated_errors():
    # 6000 replications, 60 subjects x 40 items, rho = 0.6. Simulated rejection rates (re-measured
    # 2026-11-28 with paired_clt's p-value Tango's score test, issue #36; the former Wald test rejected
    # the same runs): paired_clt 0.0467, clustered_subject 0.0465, mcnemar_exact 0.0422, hoeffding 0.0
    # (99% CIs about +/- 0.007). Each must be compatible with <= 0.05; the asymptotic ones must
    # also not be grossly conservative (>= 0.04), the exact ones <= 0.05 by construction.
    rng = np.random.default_rng(20240601)
    reps = 6000
    nb, na = _null_counts(rng, reps, 60, 40, rho=0.6)
    r = paired_comparison_counts(nb, na, np.full(nb.shape, 40), by_subject=True, alpha=ALPHA)
    for method in ("paired_clt", "clustered_subject", "mcnemar_exact", "hoeffding"):
        rate, lo, hi = rate_ci(r.tests[method].p_value <= ALPHA, reps)
        assert lo <= ALPHA, (method, rate, lo, hi)
        if method in ("paired_clt", "clustered_subject"):
            assert hi >= 0.04, (method, rate, lo, hi)


@pytest.mark.montecarlo
def test_clustered_se_holds_size_when_subjects_carry_gaps_and_iid_does_not():
    # B is better on some subjects and worse on others (subject gap ~ N(0, 0.04^2)); the
    # population mean gap over subjects is 0. 91 subjects x 130 items (the MMLU-Pro shape),
    # 4000 replications. Simulated: clustered_subject 0.0503 (t with C - 1 df), paired_clt 0.139
    # (Tango's score test, re-measured 2026-11-28; the Wald test also 0.139): the iid paired test
    # ignores the subject-level spread and over-rejects.
    rng = np.random.default_rng(7)
    reps, c, m, disc = 4000, 91, 130, 0.3
    g = rng.normal(0, 0.04, (reps, c))
    p_pos, p_neg = (disc + g) / 2, (disc - g) / 2
    nb = rng.binomial(m, p_pos)
    na = rng.binomial(m - nb, p_neg / (1 - p_pos))
    r = paired_comparison_counts(nb, na, np.full(nb.shape, m), by_subject=True)
    rate, lo, hi = rate_ci(r.tests["clustered_subject"].p_value <= ALPHA, reps)
    assert lo <= ALPHA <= hi + 0.005, (rate, lo, hi)
    rate_iid, lo_iid, _ = rate_ci(r.tests["paired_clt"].p_value <= ALPHA, reps)
    assert lo_iid > 0.09, rate_iid


@pytest.mark.montecarlo
def test_item_level_null_with_heterogeneous_items_holds_size():
    # Item-level check (no count shortcut): 400 items with their own p_i ~ Beta(0.7, 0.7) held
    # fixed, two models sharing p_i with correlated errors (rho = 0.5), 3000 replications,
    # every column one replication through paired_comparison. Simulated: paired_clt 0.0557
    # (99% CI 0.045 - 0.067; Tango's score test, re-measured 2026-11-28: the same runs as the
    # Wald test it replaced), mcnemar_exact 0.0403.
    rng = np.random.default_rng(11)
    n, reps, rho = 400, 3000, 0.5
    p = rng.beta(0.7, 0.7, n)[:, None]
    common = rng.random((n, reps)) < p
    copy = rng.random((n, reps)) < rho
    a = np.where(copy, common, rng.random((n, reps)) < p).astype(float)
    b = np.where(copy, common, rng.random((n, reps)) < p).astype(float)
    r = paired_comparison(a, b, alpha=ALPHA)
    for method in ("paired_clt", "mcnemar_exact"):
        rate, lo, hi = rate_ci(r.tests[method].p_value <= ALPHA, reps)
        assert lo <= ALPHA, (method, rate, lo, hi)


# ---------------------------------------------------------------------------------------
# power: paired beats the unpaired z-test on positively correlated models


def _correlated_pairs(rng, reps, n, pa, pb, corr):
    """Item arrays (n, reps) for two binary models with accuracies pa, pb and correlation corr,
    built from multinomial cell counts (only the counts matter to either test)."""
    cov = corr * math.sqrt(pa * (1 - pa) * pb * (1 - pb))
    p11 = pa * pb + cov
    cells = np.array([p11, pa - p11, pb - p11, 1 - pa - pb + p11])  # 11, A only, B only, 00
    cnt = rng.multinomial(n, cells, size=reps)
    edges = np.cumsum(cnt, axis=1)
    i = np.arange(n)[:, None]
    a = (i < edges[:, 1]).astype(float)
    b = ((i < edges[:, 0]) | ((i >= edges[:, 1]) & (i < edges[:, 2]))).astype(float)
    return a, b


@pytest.mark.montecarlo
def test_paired_test_is_more_powerful_than_unpaired_z():
    # A at 60%, B at 64%, correlation 0.5, 1000 shared items, 4000 replications.
    # Theory: paired SE 0.0153 -> power 0.74; unpaired SE 0.0217 -> power 0.45.
    # Simulated (re-measured 2026-11-28, paired_clt's p-value Tango's score test since issue #36):
    # paired_clt 0.736 (the Wald test 0.738), mcnemar_exact 0.719, unpaired_z 0.440.
    rng = np.random.default_rng(5)
    reps = 4000
    a, b = _correlated_pairs(rng, reps, 1000, 0.60, 0.64, 0.5)
    paired = paired_comparison(a, b)
    unpaired = unpaired_z_test(a, b)
    r_p, lo_p, _ = rate_ci(paired.p_value <= ALPHA, reps)
    r_u, _, hi_u = rate_ci(unpaired.p_value <= ALPHA, reps)
    assert lo_p > hi_u + 0.2, (r_p, r_u)
    assert abs(r_p - 0.74) < 0.03 and abs(r_u - 0.45) < 0.03
    r_m, lo_m, _ = rate_ci(paired.tests["mcnemar_exact"].p_value <= ALPHA, reps)
    assert lo_m > hi_u
    # and the gap estimates agree: pairing changes the SE, not the estimate
    np.testing.assert_allclose(paired.estimate, unpaired.estimate)


# ---------------------------------------------------------------------------------------
# many models: Holm (FWER), BH (FDR), Bonferroni intervals, rank intervals


TRUE_ACC = np.array([0.60, 0.60, 0.60, 0.60, 0.60, 0.63, 0.66, 0.70])  # 5 tied models + 3


def _many_models(rng, reps, n, acc, rho):
    """Binary responses (reps, n, K): each item, with prob rho, is answered from one common
    uniform U (models correct iff U < acc_k), else each model draws its own. Models with equal
    accuracy are exchangeable, so their pairs are true nulls; the shared U makes errors
    positively correlated, as for real LLMs."""
    k = acc.size
    u_common = rng.random((reps, n, 1))
    u_own = rng.random((reps, n, k))
    use_common = rng.random((reps, n, 1)) < rho
    return (np.where(use_common, u_common, u_own) < acc).astype(np.float32)


def _pairwise_from_sims(x):
    """Discordant counts of all pairs for every replicate via batched Gram matrices."""
    k = x.shape[2]
    ia, ib = np.triu_indices(k, 1)
    both = np.einsum("rik,ril->rkl", x, x)
    tot = x.sum(axis=1)
    nb = tot[:, ib] - both[:, ia, ib]  # B right, A wrong
    na = tot[:, ia] - both[:, ia, ib]
    return ia, ib, np.rint(nb).astype(np.int64), np.rint(na).astype(np.int64)


@pytest.fixture(scope="module")
def family_sim():
    rng = np.random.default_rng(99)
    reps, n = 2000, 1000
    x = _many_models(rng, reps, n, TRUE_ACC, rho=0.5)
    ia, ib, nb, na = _pairwise_from_sims(x)
    r = paired_comparison_counts(nb, na, n)
    true_gap = TRUE_ACC[ib] - TRUE_ACC[ia]
    return dict(reps=reps, ia=ia, ib=ib, r=r, true_gap=true_gap, null=true_gap == 0,
                est=x.mean(axis=1))


@pytest.mark.montecarlo
def test_holm_controls_fwer_and_raw_tests_do_not(family_sim):
    # 28 pairwise comparisons, 10 true nulls (pairs among the 5 tied models), 2000 replications.
    # Simulated FWER: holm 0.0215, bonferroni 0.0140, unadjusted 0.284 (BH, which does not
    # promise FWER control, 0.174).
    s = family_sim
    null = s["null"]
    assert s["ia"].size >= 20 and null.sum() == 10
    p = s["r"].p_value
    for method in ("holm", "bonferroni"):
        rej = adjust_pvalues(p, alpha=ALPHA, method=method).rejected
        rate, lo, hi = rate_ci((rej & null).any(axis=1), s["reps"])
        assert lo <= ALPHA, (method, rate, lo, hi)
    rate, lo, _ = rate_ci(((p <= ALPHA) & null).any(axis=1), s["reps"])
    assert lo > 0.12, rate


def test_bh_controls_fdr(family_sim):
    # FDR = E[false rejections / max(rejections, 1)]. Simulated: bh 0.0175 (99% CI 0.0150 -
    # 0.0200; the bound is alpha m0/m = 0.0179), by 0.0041; unadjusted 0.0299. BH finds 13.5 of
    # the 18 true differences on average, Holm 11.0.
    s = family_sim
    null = s["null"]
    p = s["r"].p_value
    for method in ("bh", "by"):
        rej = adjust_pvalues(p, alpha=ALPHA, method=method).rejected
        fdp = (rej & null).sum(axis=1) / np.maximum(rej.sum(axis=1), 1)
        mean, lo, hi = mean_ci(fdp)
        assert lo <= ALPHA * null.sum() / null.size, (method, mean, lo, hi)
    raw = p <= ALPHA
    mean, lo, _ = mean_ci((raw & null).sum(axis=1) / np.maximum(raw.sum(axis=1), 1))
    assert lo > ALPHA * null.sum() / null.size, mean
    # BH finds more true differences than Holm (it controls a weaker error rate)
    holm = adjust_pvalues(p, method="holm").rejected
    bh = adjust_pvalues(p, method="bh").rejected
    assert (bh & ~null).sum() > (holm & ~null).sum()


@pytest.mark.montecarlo
def test_bonferroni_intervals_cover_all_gaps_at_once(family_sim):
    # Simulated simultaneous coverage over 28 gaps: bonferroni 0.954; marginal 95% intervals
    # cover all 28 at once only 0.479 of the time (the log k price is real).
    s = family_sim
    r = s["r"]
    hits = []
    for j in range(s["reps"]):
        si = simultaneous_intervals(r.estimate[j], r.se[j], alpha=ALPHA)
        hits.append(np.all((si.lower <= s["true_gap"]) & (s["true_gap"] <= si.upper)))
    rate, lo, hi = rate_ci(hits, s["reps"])
    assert hi >= 1 - ALPHA, (rate, lo, hi)
    marginal = np.all((r.lower <= s["true_gap"]) & (s["true_gap"] <= r.upper), axis=1)
    rate_m, _, hi_m = rate_ci(marginal, s["reps"])
    assert hi_m < 0.6, rate_m


@pytest.mark.montecarlo
def test_rank_intervals_cover_every_true_rank_range(family_sim):
    # True rank range of model i: [1 + #truly better, K - #truly worse]; the five tied models
    # share the range [4, 8]. Simulated simultaneous coverage (all 8 models): 0.9785.
    s = family_sim
    k = TRUE_ACC.size
    true_lo = 1 + (TRUE_ACC[None, :] > TRUE_ACC[:, None]).sum(axis=1)
    true_hi = k - (TRUE_ACC[None, :] < TRUE_ACC[:, None]).sum(axis=1)
    r = s["r"]
    hits = []
    for j in range(s["reps"]):
        rc = rank_confidence(s["est"][j], s["ia"], s["ib"], r.estimate[j], r.p_value[j], alpha=ALPHA)
        hits.append(np.all((rc.lower <= true_lo) & (true_hi <= rc.upper)))
    rate, lo, hi = rate_ci(hits, s["reps"])
    assert hi >= 1 - ALPHA, (rate, lo, hi)


def test_adjusted_pvalues_by_hand(no_warnings):
    p = [0.01, 0.04, 0.03, 0.005]
    # Holm: sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 -> 0.02, 0.03, 0.06, 0.04 -> running max
    holm = adjust_pvalues(p, method="holm")
    assert isinstance(holm, AdjustedPValues) and holm.n == 4
    np.testing.assert_allclose(holm.p_adjusted, [0.03, 0.06, 0.06, 0.02])
    # BH: times 4/1, 4/2, 4/3, 4/4 -> 0.02, 0.02, 0.04, 0.04 -> running min from the top
    np.testing.assert_allclose(adjust_pvalues(p, method="bh").p_adjusted, [0.02, 0.04, 0.04, 0.02])
    np.testing.assert_allclose(adjust_pvalues(p, method="bonferroni").p_adjusted, [0.04, 0.16, 0.12, 0.02])
    by = adjust_pvalues(p, method="by").p_adjusted
    np.testing.assert_allclose(by, np.minimum(1, np.array([0.02, 0.04, 0.04, 0.02]) * (1 + 1 / 2 + 1 / 3 + 1 / 4)))
    np.testing.assert_array_equal(holm.rejected, [True, False, False, True])
    # vectorised over leading axes: rows are independent families
    two = adjust_pvalues(np.array([p, p[::-1]]), method="holm")
    np.testing.assert_allclose(two.p_adjusted[1], holm.p_adjusted[::-1])


def test_tied_groups_by_hand(no_warnings):
    # Scores 0.9 > 0.8 > 0.7 > 0.2; significant pairs: (0.9 vs 0.7), and 0.2 vs everyone.
    est = np.array([0.8, 0.2, 0.9, 0.7])
    pa = np.array([0, 0, 0, 1, 1, 2])
    pb = np.array([1, 2, 3, 2, 3, 3])
    gap = est[pb] - est[pa]
    p = np.array([1e-6, 0.5, 0.5, 1e-6, 1e-6, 1e-4])
    rc = rank_confidence(est, pa, pb, gap, p, alpha=ALPHA)
    # order best first: 2 (0.9), 0 (0.8), 3 (0.7), 1 (0.2); groups {2, 0} and {0, 3}; {1} alone
    assert rc.groups == ((2, 0), (0, 3), (1,))
    np.testing.assert_array_equal(rc.rank, [2, 4, 1, 3])
    np.testing.assert_array_equal(rc.lower, [1, 4, 1, 2])
    np.testing.assert_array_equal(rc.upper, [3, 4, 2, 3])
    assert rc.better[2, 3] and rc.better[0, 1] and not rc.better[2, 0]


# ---------------------------------------------------------------------------------------
# minimum detectable effect and sample sizes (B8)


@pytest.mark.montecarlo
def test_power_at_the_mde_is_the_nominal_power():
    # Discordance 30%, n = 2000: SE = sqrt(0.3 / 2000), MDE = (1.96 + 0.8416) SE = 3.43 pp.
    # At a true gap of exactly the MDE the paired test should reject 80% of the time; simulated
    # 0.805 (6000 replications, 99% CI 0.792 - 0.818). A claim off by 3 points (0.77 or 0.83) fails.
    n, disc = 2000, 0.30
    mde = minimum_detectable_effect(math.sqrt(disc / n), n, alpha=ALPHA, power=0.8)
    assert mde.estimate == pytest.approx((stats.norm.ppf(0.975) + stats.norm.ppf(0.8)) * math.sqrt(disc / n))
    rng = np.random.default_rng(13)
    reps = 6000
    cnt = rng.multinomial(n, [(disc + mde.estimate) / 2, (disc - mde.estimate) / 2, 1 - disc], size=reps)
    r = paired_comparison_counts(cnt[:, 0], cnt[:, 1], n)
    rate, lo, hi = rate_ci(r.p_value <= ALPHA, reps)
    assert lo <= 0.8 <= hi, (rate, lo, hi)
    # the reported MDE of each replicate is the same number up to sampling noise in the SE
    assert np.median(r.mde) == pytest.approx(mde.estimate, rel=0.02)


def test_sample_size_is_the_inverse_of_the_mde(no_warnings):
    for delta, var in [(0.02, 0.3), (0.05, 0.1), (0.01, 0.25)]:
        n = paired_sample_size(delta, var).estimate
        assert minimum_detectable_effect(math.sqrt(var / n), n).estimate <= delta + 1e-12
        assert minimum_detectable_effect(math.sqrt(var / (n - 1)), n - 1).estimate > delta
    # (1.96 + 0.84)^2 * 0.25 / 0.01^2 = 19,623 items to detect 1 pp at 50% discordance
    assert paired_sample_size(0.01, 0.25).estimate == 19623


def test_sample_sizes_agree_with_the_planner():
    # Oracle: one implementation vs another. stats/planning.py (the B8 planner, written
    # separately) answers the same two questions for two models.
    planning = pytest.importorskip("benchcert.stats.planning")
    if not hasattr(planning, "plan_two_models"):
        pytest.skip("planner without plan_two_models")
    # (gaps where 1/(8 delta^2) is not an integer: at delta = 0.05 it is exactly 50, which the
    # planner's floor(...) + 1 turns into 50 by float rounding - 1/(8 * 0.05^2) = 49.999...)
    for delta, var in [(0.02, 0.3), (0.045, 0.1), (0.013, 0.22)]:
        answers = {a.method: a.n for a in planning.plan_two_models(delta, var_d=var).answers}
        assert answers["paired_power"] == paired_sample_size(delta, var).estimate
        # the planner states the necessary n (> 1/(8 delta^2)); this module the largest n that is not enough
        assert answers["hellinger_lower_bound"] == hellinger_min_items(delta).estimate + 1


def test_zero_variance_mde_uses_the_one_sided_floor():
    with pytest.warns(DegenerateDataWarning, match="zero SE"):
        r = minimum_detectable_effect(0.0, 1000)
    k = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)
    assert r.estimate == pytest.approx(k * k / (1000 + k * k))
    assert r.estimate > 0


# ---------------------------------------------------------------------------------------
# Hardt, "Detecting differences" (ch. 3): reproduced numbers


def test_hardt_hoeffding_numbers(no_warnings):
    # Sec. 3.5: P(|R_S - R| >= t / sqrt(n)) <= 2 exp(-2 t^2); "Setting t = 2, 2 exp(-2t^2) ~ 0.00067".
    alpha = 2 * math.exp(-8)
    assert round(alpha, 5) == 0.00067
    # Our Hoeffding interval is on D in [-1, 1] (range 2): at that alpha it is +/- 2 * 2 / sqrt(n).
    n = 2500
    r = paired_comparison_counts(300, 300, n, alpha=alpha)
    assert r.tests["hoeffding"].upper - r.estimate == pytest.approx(4 / math.sqrt(n))
    # Sec. 3.3: the mean-threshold test errs with probability <= 2 exp(-eps^2 n / 8) for +/-1
    # coins; our Hoeffding p-value for the observed mean eps/2 is exactly exp(-eps^2 n / 8) * 2.
    eps, n = 0.1, 2000
    r = paired_comparison_counts(int(n * (1 + eps / 2) / 2), int(n * (1 - eps / 2) / 2), n)
    assert r.tests["hoeffding"].p_value == pytest.approx(2 * math.exp(-eps**2 * n / 8))


def test_hardt_log_k_price(no_warnings):
    # Sec. 3.5: errors among k estimates grow like sqrt(log k / n). The Bonferroni critical value
    # z_{1 - alpha/(2k)} stays below sqrt(2 log(2k/alpha)) and their ratio tends to 1.
    crit = []
    for k in (1, 10, 100, 406, 10_000):
        c = simultaneous_intervals(np.zeros(k), np.ones(k), alpha=ALPHA).critical_value
        assert c <= math.sqrt(2 * math.log(2 * k / ALPHA))
        crit.append(c)
    assert crit == sorted(crit)
    assert crit[0] == pytest.approx(stats.norm.ppf(0.975))
    # 406 = all pairs of MMLU-Pro's 29 models: intervals 1.96x as wide as one marginal interval
    assert crit[3] / crit[0] == pytest.approx(1.96, abs=0.005)
    # Erratum: "choose t a factor sqrt(log k) larger" is asymptotic only. The union bound needs
    # t' = sqrt(t^2 + log(k)/2); with k = 2 the factor sqrt(log 2) = 0.83 shrinks t and the
    # bound 2k exp(-2 t'^2) exceeds the single-model 2 exp(-2 t^2) = 0.00067 (t = 2).
    t, k = 2.0, 2
    t_factor, t_exact = t * math.sqrt(math.log(k)), math.sqrt(t**2 + math.log(k) / 2)
    assert 2 * k * math.exp(-2 * t_exact**2) == pytest.approx(2 * math.exp(-2 * t**2))
    assert 2 * k * math.exp(-2 * t_factor**2) > 10 * 2 * math.exp(-2 * t**2)


def test_hardt_hellinger_bound_and_unit_erratum(no_warnings):
    # Sec. 3.4: n <= 1/(2 eps^2) +/-1 coin tosses of bias (1 + eps)/2 cannot be told from fair
    # ones (TV <= 1/2). In accuracy units delta = eps/2 that is n <= 1/(8 delta^2).
    for delta in (0.005, 0.01, 0.02, 0.05, 0.1, 0.25):
        n = hellinger_min_items(delta).estimate
        assert n == math.floor(1 / (8 * delta**2) + 1e-9)
        k = np.arange(n + 1)
        tv = 0.5 * np.abs(stats.binom.pmf(k, n, 0.5) - stats.binom.pmf(k, n, 0.5 + delta)).sum()
        assert tv <= 0.5, (delta, n, tv)
    assert hellinger_min_items(0.01).estimate == 1250
    # Erratum: read in accuracy units, "1/(2 eps^2)" = 5000 items at delta = 0.01 already has TV > 1/2.
    k = np.arange(5001)
    tv = 0.5 * np.abs(stats.binom.pmf(k, 5000, 0.5) - stats.binom.pmf(k, 5000, 0.51)).sum()
    assert 0.51 < tv < 0.53
    # Erratum: Claim 1, H^2 <= eps^2 / 4, fails at eps = 1 (H^2 = 1 - 1/sqrt(2) = 0.293).
    h2 = 1 - 0.5 * (math.sqrt(2) + 0)
    assert h2 == pytest.approx(0.2929, abs=1e-4) and h2 > 1 / 4
    with pytest.raises(ValueError, match="delta"):
        hellinger_min_items(0.3)


# ---------------------------------------------------------------------------------------
# degenerate data and input validation


def test_identical_models_warn_and_stay_defined():
    a = np.array([1.0, 0, 1, 1, 0, 1])
    with pytest.warns(DegenerateDataWarning) as rec:
        r = paired_comparison(a, a.copy())
    msgs = " ".join(str(w.message) for w in rec)
    assert "no discordant item" in msgs
    # the interval on 0/1 scores is Tango's score interval, which is not of zero width without discordant
    # items (the null's variance is put beside the gap): no zero-SE warning is due
    assert "zero standard error" not in msgs and r.lower < 0 < r.upper
    assert r.estimate == 0 and r.p_value == 1.0 and r.verdict == "inconclusive"
    assert r.tests["mcnemar_exact"].p_value == 1.0
    assert r.mde > 0  # the floor, not a silent 0


def test_one_shared_item_and_one_subject_use_worst_cases():
    with pytest.warns(DegenerateDataWarning) as rec:
        r = paired_comparison(np.array([1.0, NAN]), np.array([0.0, 1.0]))
    assert any("only one shared item" in str(w.message) for w in rec)
    assert any("single answered item" in str(w.message) for w in rec)  # the unpaired contrast, model A
    assert r.n == 1 and r.n_only_b == 1 and r.se == pytest.approx(1.0)
    with pytest.warns(DegenerateDataWarning, match="fewer than 2 subjects"):
        r = paired_comparison(np.array([1.0, 0, 0, 1]), np.array([1.0, 1, 1, 0]), np.zeros(4, int),
                              primary="clustered_subject")
    assert r.se == 1.0 and (r.lower, r.upper) == (-1.0, 1.0)


@pytest.mark.parametrize("call, match", [
    (lambda: paired_comparison([0, 1], [0, 1, 1]), "same shape"),
    (lambda: paired_comparison([0, 2], [0, 1]), "a must lie in"),
    (lambda: paired_comparison([NAN, 1], [0, NAN]), "share no answered"),
    (lambda: paired_comparison([0, 1], [0, 1], alpha=1.5), "alpha"),
    (lambda: paired_comparison([0, 1], [0, 1], power=1), "power"),
    (lambda: paired_comparison([0, 1], [0, 1], primary="clustered_subject"), "needs subjects"),
    (lambda: paired_comparison([0, 1], [0, 1], primary="bogus"), "primary"),
    (lambda: paired_comparison_counts(5, 6, 10), "must not exceed n"),
    (lambda: paired_comparison_counts(-1, 0, 10), "n_b_wins"),
    (lambda: pairwise_comparisons(np.zeros((3, 1))), "at least 2 model columns"),
    (lambda: pairwise_comparisons(np.zeros((3, 3)), baseline=3), "baseline"),
    (lambda: pairwise_comparisons(np.zeros((3, 3)), pairs=[[0, 0]]), "pairs"),
    (lambda: adjust_pvalues([0.1, 1.2]), "p_values must lie"),
    (lambda: adjust_pvalues([0.1], method="fdr"), "method"),
    (lambda: simultaneous_intervals([0.1, 0.2], [0.1, -1]), "se"),
    (lambda: simultaneous_intervals([0.1, 0.2], [0.1, 0.1], family_size=1), "family_size"),
    (lambda: rank_confidence([0.1, 0.2], [0], [0], [0.1], [0.5]), "pair_a"),
    (lambda: paired_sample_size(0, 0.2), "delta"),
    (lambda: paired_sample_size(0.1, 0), "var_d"),
    (lambda: minimum_detectable_effect(-1, 10), "se"),
    (lambda: minimum_detectable_effect(0.1, 0), "n must"),
])
def test_input_validation_names_the_parameter(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# ---------------------------------------------------------------------------------------
# issue 18: clustered test size with unbalanced subjects; one reference per family


def _clustered_size(m, tau, reps, seed, alpha=0.05):
    """Binary pair with a subject effect u ~ N(0, tau^2) on the discordance balance and no gap on
    average; share of two-sided rejections of the clustered test."""
    rng = np.random.default_rng(seed)
    u = rng.normal(0, tau, size=(reps, m.size))
    pp, pn = np.clip(0.15 + u / 2, 0, 0.3), np.clip(0.15 - u / 2, 0, 0.3)
    nb = rng.binomial(m, pp)
    na = rng.binomial(m - nb, pn / (1 - pp))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = paired_comparison_counts(nb, na, np.broadcast_to(m, nb.shape), by_subject=True, alpha=alpha)
    return r.p_value <= alpha


@pytest.mark.montecarlo
def test_clustered_size_with_mmlu_pro_subject_sizes():
    # MMLU-Pro's 91 subjects of 17-1,003 items. CR1 with C - 1 df rejected 6.34% [6.01, 6.69]
    # (20,000 reps, tau = 0.1); CR2 with Bell-McCaffrey df: 5.66% (20,000 reps, seed below),
    # 4.9-5.6% over tau in {0, 0.07, 0.1, 0.13}; equal sizes 4.9%.
    m = mmlu_pro_subject_sizes()
    assert m.size == 91 and m.min() == 17 and m.max() == 1003
    hits = _clustered_size(m, 0.1, 12000, seed=18)
    rate, lo, hi = rate_ci(hits, hits.size)
    assert 0.04 <= rate <= 0.06 and lo >= 0.035 and hi <= 0.066, (rate, lo, hi)


@pytest.mark.slow
def test_study_clustered_size_grid():
    m = mmlu_pro_subject_sizes()
    for i, tau in enumerate((0.0, 0.07, 0.10, 0.13)):
        rate, lo, hi = rate_ci(_clustered_size(m, tau, 60000, seed=180 + i), 60000, level=0.95)
        assert 0.04 <= lo and hi <= 0.06, (tau, rate, lo, hi)


def test_simultaneous_intervals_agree_with_adjusted_p_values_over_random_families():
    # 400 random families (3-12 models, 4-40 subjects, random gaps and subject effects): a
    # Bonferroni simultaneous interval on the p-values' own reference (the stratified score test
    # inverted at alpha / P on these 0/1 scores, issue #36) excludes 0 exactly when
    # the Bonferroni-adjusted p-value is below alpha, and then Holm rejects too. Zero
    # contradictions (before: normal critical values against t p-values, 160 contradictions in
    # 12.5% of 12-subject families, so 400 families would show dozens).
    rng = np.random.default_rng(1818)
    contradictions = checked = excluded = 0
    for _ in range(400):
        k, c = int(rng.integers(3, 13)), int(rng.integers(4, 41))
        sizes = rng.integers(2, 60, size=c)
        subj = np.repeat(np.arange(c), sizes)
        skill = rng.normal(0, 0.05, size=k) * rng.integers(0, 2)
        p = np.clip(0.6 + skill[None, :] + rng.normal(0, 0.1, size=(c, k))[subj], 0.01, 0.99)
        scores = (rng.random(p.shape) < p).astype(float)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = pairwise_comparisons(scores, subj)
        sim = family_intervals(r)  # the t reference's, or (0/1 scores) the score test inverted at alpha / P
        bonf = adjust_pvalues(r.p_value, method="bonferroni")
        holm = adjust_pvalues(r.p_value, method="holm")
        excl = (sim.lower > 0) | (sim.upper < 0)
        # exact equivalence with Bonferroni (ties at the boundary aside) and implication for Holm
        decisive = np.abs(bonf.p_adjusted - ALPHA) > 1e-9
        contradictions += int(np.sum((excl != bonf.rejected) & decisive)) + int(np.sum(excl & ~holm.rejected))
        checked += excl.size
        excluded += int(excl.sum())
    assert contradictions == 0 and excluded > 500, (contradictions, excluded, checked)


def test_stratified_items_test_hand_example_and_few_subject_default():
    # Hand data: D = 0, 1, -1 | 1, 1, 0 | 0, 1 (subjects of 3, 3, 2; N = 8, C = 3).
    # Subject means 0, 2/3, 1/2; SSW = (0+1+1) + (1/9+1/9+4/9) + (1/4+1/4) = 2 + 2/3 + 1/2 = 19/6.
    r = paired_comparison(HAND_A, HAND_B, HAND_SUBJ)
    st = r.tests["stratified_items"]
    se = math.sqrt(19 / 6 / (8 - 3) / 8)
    assert st.se == pytest.approx(se) and st.df == 5 and r.se == pytest.approx(se)
    # on these 0/1 scores the p-value and interval are the pooled score test's (issue #36, test_score.py):
    # 4 items B won and 1 A won of 8, Tango's Z(0) = (4 - 1) / sqrt((4 + 1) 8 / 7) = 1.1224
    assert r.p_value == pytest.approx(2 * stats.norm.sf(3 / math.sqrt(5 * 8 / 7)))
    assert r.question.startswith("items") and "clustered_subject" in r.tests
    # the MDE is the deciding score test's (test_score_mde.py); the t approximation's, on the same t
    # reference, (t_{0.975, 5} + t_{0.8, 5}) SE, is minimum_detectable_effect's
    assert r.mde == pytest.approx(score_test_mde([4], [1], [8], alpha=0.05, power=0.8)[0])
    assert minimum_detectable_effect(se, 8, df=5).estimate == pytest.approx(
        (stats.t.ppf(0.975, 5) + stats.t.ppf(0.8, 5)) * se)


def test_five_subjects_two_models_fifty_points_apart_is_significant():
    # Acceptance (issue 18): 5 subjects, 805 items, models 50 pp apart. The clustered test has at
    # most 4 df and was inconclusive at this size after Holm (p_holm 0.32 on a real benchmark); the
    # default fixed-strata items question finds it.
    rng = np.random.default_rng(1805)
    subj = np.repeat(np.arange(5), [300, 250, 150, 60, 45])
    base = rng.uniform(0.2, 0.5, 5)[subj]
    a = (rng.random(805) < base).astype(float)
    b = (rng.random(805) < base + 0.5).astype(float)
    r = pairwise_comparisons(np.column_stack([a, b]), subj)
    holm = adjust_pvalues(r.p_value, method="holm")
    assert r.method == "stratified_items" and holm.rejected.all() and r.estimate[0] > 0.4
    assert r.tests["clustered_subject"].df[0] <= 4


def test_rank_order_uses_shared_items_not_own_items():
    # Model 1 skipped the 200 hardest items: on its own items it scores 0.90 against model 0's
    # 0.75, but on the 600 items both answered it is behind (0.85 vs 0.90). The rank and the
    # tied groups follow the shared items, as the tests do.
    easy = np.r_[np.ones(540), np.zeros(60)]  # model 0 on the easy items: 0.90
    hard = np.r_[np.ones(60), np.zeros(140)]  # model 0 on the hard items
    m0 = np.r_[easy, hard]
    m1 = np.r_[np.r_[np.ones(510), np.zeros(90)], np.full(200, np.nan)]  # 0.85 on the easy items
    m2 = np.r_[np.ones(300), np.zeros(500)]
    scores = np.column_stack([m0, m1, m2])
    own = np.nanmean(scores, axis=0)
    assert own[1] > own[0]
    r = pairwise_comparisons(scores)
    rc = rank_confidence(own, r.pair_a, r.pair_b, r.estimate, r.p_value)
    assert rc.rank[0] < rc.rank[1] and rc.order_score[0] > rc.order_score[1]
    assert rc.groups[0][0] == 0
    old = rank_confidence(own, r.pair_a, r.pair_b, r.estimate, r.p_value, order="estimate")
    assert old.rank[1] < old.rank[0]
    # complete data: the shared-gap order is the score order
    full = np.column_stack([m0, np.r_[m1[:600], np.zeros(200)], m2])
    rf = pairwise_comparisons(full)
    a = rank_confidence(full.mean(axis=0), rf.pair_a, rf.pair_b, rf.estimate, rf.p_value)
    b = rank_confidence(full.mean(axis=0), rf.pair_a, rf.pair_b, rf.estimate, rf.p_value, order="estimate")
    assert a.rank.tolist() == b.rank.tolist() and a.groups == b.groups


def test_mde_on_the_t_reference_detects_with_the_stated_power():
    # A gap equal to the MDE, tested with the t test the interval uses (df = 9): simulated power
    # ~0.80 with t quantiles; with normal quantiles the MDE is too small and power falls short.
    rng = np.random.default_rng(99)
    df, se = 9, 0.02
    t_mde = minimum_detectable_effect(se, 100, df=df).estimate
    z_mde = minimum_detectable_effect(se, 100).estimate
    assert t_mde > z_mde and minimum_detectable_effect(se, 100, df=df).method == "t_power"
    reps = 20000
    for gap, lo, hi in ((t_mde, 0.78, 0.83), (z_mde, 0.70, 0.77)):
        # the estimate is normal around the gap; the SE estimate is se * sqrt(chi2_df / df)
        est = rng.normal(gap, se, reps)
        se_hat = se * np.sqrt(rng.chisquare(df, reps) / df)
        power = np.mean(np.abs(est / se_hat) > stats.t.ppf(0.975, df))
        assert lo <= power <= hi, (gap, power)


def test_several_columns_of_paired_comparison_are_one_family_for_family_intervals():
    # paired_comparison(a, b) with P columns, then family_intervals: the Bonferroni ends must come from the
    # test whose p-values sit beside them (the score test on 0/1 scores). Before, the columns were a family
    # of 1 to the engine, the score test left no alpha / P ends and the Wald ends were used: 17 of 1,500
    # pairs near the ceiling disagreed with Bonferroni on the p-values (300 families of 5 columns).
    rng = np.random.default_rng(4040)
    contradictions = excluded = 0
    for _ in range(150):
        n = int(rng.integers(40, 400))
        p_a = rng.uniform(0.85, 0.99, size=5)
        p_b = np.clip(p_a + rng.normal(0, 0.04, size=5), 0.5, 0.999)
        a = (rng.random((n, 5)) < p_a).astype(float)
        b = (rng.random((n, 5)) < p_b).astype(float)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = paired_comparison(a, b)
            sim = family_intervals(r)
        bonf = adjust_pvalues(r.p_value, method="bonferroni")
        excl = (sim.lower > 0) | (sim.upper < 0)
        decisive = np.abs(bonf.p_adjusted - ALPHA) > 1e-9
        contradictions += int(np.sum((excl != bonf.rejected) & decisive))
        excluded += int(excl.sum())
    assert contradictions == 0 and excluded > 20, (contradictions, excluded)
