"""Tests for benchcert.stats.planning (docs/methods.md, section 5).

Every expected n is derived by hand in the test from the formula it cites (Hardt,
"Detecting differences", chapter 3; the
exchangeable-bounds paper's Theorem 5.2 and Table 4). The sufficiency claims get seeded
Monte-Carlo checks judged with 99% Clopper-Pearson intervals, and the Hellinger erratum an
exact total-variation computation.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from simcheck import rate_ci
from benchcert.stats.planning import (
    Plan,
    PlanAnswer,
    plan_budget,
    plan_k_models,
    plan_one_model,
    plan_two_models,
    plan_zero_failure,
)
from benchcert.stats.subsample import theorem_5_2_halfwidth, worst_case_halfwidth


def test_one_model_hand_values(no_warnings):
    p = plan_one_model(0.02, alpha=0.05, N=14042, exact=False)
    assert isinstance(p, Plan) and all(isinstance(a, PlanAnswer) for a in p.answers)
    # Hoeffding (Hardt Thm 2): n >= log(2/0.05)/(2 * 0.02^2) = 3.688879/0.0008 = 4611.1 -> 4612.
    h = p.answer("hoeffding")
    assert h.n == 4612 and h.kind == "sufficient" and h.half_width <= 0.02
    assert h.cost_fraction == pytest.approx(4612 / 14042)
    # Theorem 5.2: n >= N L/(2 eps^2 N + L) = 14042 * 3.688879/(11.2336 + 3.688879) = 3471.3 -> 3472.
    t = p.answer("theorem_5_2")
    assert t.n == 3472 and t.half_width <= 0.02 < theorem_5_2_halfwidth(3471, 14042).half_width
    # Serfling: (N - n + 1)/(n N) <= 2 eps^2/L  <=>  n >= (N + 1)/(c N + 1), c = 0.0008/3.688879:
    # 14043/(3.045321 + 1) = 3471.5 -> 3472.
    assert p.answer("serfling").n == 3472
    # Without N only the distribution-free answer is possible.
    assert [a.method for a in plan_one_model(0.02).answers] == ["hoeffding"]


def test_one_model_exact_answer(no_warnings):
    # Smallest n (by bisection) with h*(n, N, alpha) <= eps; h* < Theorem 5.2 (docs/methods.md section 4)
    # so it costs fewer items: N = 3000, eps = 0.05.
    p = plan_one_model(0.05, N=3000)
    e = p.answer("exact_worst_case")
    assert worst_case_halfwidth(e.n, 3000).half_width <= 0.05 < worst_case_halfwidth(e.n - 1, 3000).half_width
    assert e.n < p.answer("theorem_5_2").n
    assert e.half_width == pytest.approx(float(worst_case_halfwidth(e.n, 3000).half_width))


def test_k_models_hand_values(no_warnings):
    # Union bound (Hardt, "Multiple model evaluations"): n >= log(2k/alpha)/(2 eps^2);
    # k = 10: log(400)/0.0008 = 5.991465/0.0008 = 7489.3 -> 7490.
    p = plan_k_models(0.02, 10, N=14042, exact=False)
    assert p.answer("hoeffding_bonferroni").n == 7490
    # Theorem 5.2 at alpha/k: 14042 * 5.991465/(11.2336 + 5.991465) = 4884.4 -> 4885.
    assert p.answer("theorem_5_2_bonferroni").n == 4885
    assert plan_k_models(0.02, 1, exact=False).answer("hoeffding").n == 4612   # k = 1 is one model


def test_two_models_hand_values(no_warnings):
    p = plan_two_models(0.02, alpha=0.05, power=0.8, var_d=0.3, N=14042)
    # Hellinger (Hardt 3.4, in accuracy units, see the erratum test): n > 1/(8 * 0.0004) = 312.5 -> 313.
    nec = p.answer("hellinger_lower_bound")
    assert nec.n == 313 and nec.kind == "necessary"
    # Paired Hoeffding, range 2: exp(-n eps^2/2) <= 0.05  <=>  n >= 2 ln(20)/0.0004 = 14978.7 -> 14979.
    suf = p.answer("hoeffding_paired")
    assert suf.n == 14979 and not suf.feasible   # more items than the benchmark has
    # One-sided Theorem 5.2 with R = 2: n >= 2 L N/(eps^2 N + 2 L), L = ln 20:
    # 2 * 2.995732 * 14042/(5.6168 + 5.991465) = 7247.2 -> 7248.
    assert p.answer("theorem_5_2_paired").n == 7248
    # Paired power analysis (docs/methods.md section 5): (1.959964 + 0.841621)^2 * 0.3/0.0004 = 7.848879 * 750 = 5886.7 -> 5887.
    assert p.answer("paired_power").n == 5887 and p.answer("paired_power").kind == "approximate"
    # Default Var(D): worst case 1 - eps^2 -> 7.848879 * 0.9996/0.0004 = 19614.4 -> 19615.
    assert plan_two_models(0.02).answer("paired_power").n == 19615
    assert any("1/(8 eps^2)" in note for note in p.notes)


def test_hellinger_erratum_exact_total_variation(no_warnings):
    # Hardt 3.4-3.5 claims no test separates accuracies 1/2 and 1/2 + eps with fewer than
    # 1/(2 eps^2) items (TV <= 1/2). Exactly, TV(Bin(n, 1/2), Bin(n, 1/2 + eps)) already exceeds
    # 1/2 at n = 1/(2 eps^2); at the corrected 1/(8 eps^2) it is below 1/2, as the argument gives.
    for eps in (0.05, 0.02):
        def tv(n):
            k = np.arange(n + 1)
            return 0.5 * np.abs(stats.binom.pmf(k, n, 0.5) - stats.binom.pmf(k, n, 0.5 + eps)).sum()
        assert tv(math.floor(1 / (2 * eps ** 2))) > 0.5          # 0.521 at eps = 0.05 (n = 200)
        assert tv(math.floor(1 / (8 * eps ** 2))) <= 0.5         # 0.275 at eps = 0.05 (n = 50)


@pytest.mark.montecarlo
def test_two_models_sufficiency_by_simulation(no_warnings):
    # Worst case for the sign test: every item discordant, D = +1 w.p. (1 + eps)/2. At the
    # planned n the worse model must score higher with probability <= alpha. The exact value
    # is a binomial tail; simulate binomial counts and compare. Measured: 0.0071 (exact 0.0071).
    eps, alpha = 0.05, 0.05
    n = plan_two_models(eps, alpha=alpha).answer("hoeffding_paired").n   # 2 ln 20/0.0025 = 2396.6 -> 2397
    assert n == 2397
    exact = stats.binom.cdf(n // 2, n, (1 + eps) / 2)   # D-bar <= 0  <=>  #(+1) <= n/2
    rng = np.random.default_rng(8)
    hits = rng.binomial(n, (1 + eps) / 2, size=200_000) <= n / 2
    r, lo, hi = rate_ci(hits, 200_000)
    assert lo <= exact <= hi and hi <= alpha
    # Power analysis is approximate: at its n the simulated power of the two-sided z-test is
    # near the target 0.8 (measured 0.805 at n = 3132).
    n_pow = plan_two_models(eps, alpha=alpha, power=0.8).answer("paired_power").n
    plus = rng.binomial(n_pow, (1 + eps) / 2, size=100_000)
    dbar = (2 * plus - n_pow) / n_pow
    se = np.sqrt((1 - dbar ** 2) / n_pow)
    r, lo, hi = rate_ci(dbar / se > stats.norm.ppf(1 - alpha / 2), 100_000)
    assert lo - 0.02 <= 0.8 <= hi + 0.02


@pytest.mark.montecarlo
def test_zero_failure_hand_values_and_simulation(no_warnings):
    p = plan_zero_failure(0.01, alpha=0.05, N=12032)
    # ln(1/0.05)/0.01 = 299.57 -> 300 (Hardt 3.5: 1/eps, not 1/eps^2).
    assert p.answer("zero_failure_exponential").n == 300
    # Exact binomial: ln(0.05)/ln(0.99) = 298.07 -> 299.
    nb = p.answer("zero_failure_binomial").n
    assert nb == 299 and 0.99 ** 299 <= 0.05 < 0.99 ** 298
    # Hypergeometric: F = ceil(0.01 * 12032) = 121 failures; P(no failure in n) = hypergeom.pmf(0).
    nh = p.answer("zero_failure_hypergeometric").n
    assert stats.hypergeom.pmf(0, 12032, 121, nh) <= 0.05 < stats.hypergeom.pmf(0, 12032, 121, nh - 1)
    assert nh <= nb
    # Simulation: a benchmark with exactly F failing items, random nh-subsets: zero failures
    # (a false certificate) at rate <= alpha. Measured 0.0503 (exact 0.0499, n = 293).
    rng = np.random.default_rng(4)
    fails = rng.hypergeometric(121, 12032 - 121, nh, size=100_000)
    r, lo, hi = rate_ci(fails == 0, 100_000)
    exact = stats.hypergeom.pmf(0, 12032, 121, nh)
    assert lo <= exact <= hi and lo <= 0.05


def test_budget_reproduces_table4(no_warnings):
    # Paper Table 4 (n = 250, N = 14,042): Theorem 5.2 8.51 pp; exact h* ~6.2 pp (docs/methods.md section 4).
    p = plan_budget(250, 14042, alpha=0.05)
    assert 100 * p.answer("theorem_5_2").half_width == pytest.approx(8.51, abs=0.005)
    assert 100 * p.answer("exact_worst_case").half_width == pytest.approx(6.20, abs=0.005)
    # Barber non-negative: sqrt(log(40)/500) = 8.59 pp; Serfling 8.51 pp; paired (R = 2) 17.03 pp.
    assert 100 * p.answer("barber_nonnegative").half_width == pytest.approx(8.59, abs=0.005)
    assert 100 * p.answer("serfling").half_width == pytest.approx(8.51, abs=0.005)
    assert 100 * p.answer("theorem_5_2_paired").half_width == pytest.approx(17.03, abs=0.005)
    assert all(a.cost_fraction == pytest.approx(250 / 14042) for a in p.answers)
    d = p.to_dict()
    assert d["question"] == "budget" and len(d["answers"]) == 6
    with pytest.raises(KeyError, match="methods"):
        p.answer("nope")


@pytest.mark.parametrize("call, match", [
    (lambda: plan_budget(101, 100), r"n must be <= N = 100.*101"),
    (lambda: plan_budget(0, 100), r"n must be >= 1.*0"),
    (lambda: plan_budget(10, 100, alpha=1.5), r"alpha must be in \(0, 1\); got 1.5"),
    (lambda: plan_budget(10, None), r"N must be a positive integer"),
    (lambda: plan_one_model(0.0), r"eps must be in \(0, 1\); got 0.0"),
    (lambda: plan_one_model(0.02, N=0), r"N must be a positive integer.*0"),
    (lambda: plan_one_model(0.02, alpha=0), r"alpha must be in \(0, 1\)"),
    (lambda: plan_k_models(0.02, 0), r"k must be a positive integer.*0"),
    (lambda: plan_two_models(0.02, power=1.0), r"power must be in \(0, 1\)"),
    (lambda: plan_two_models(0.02, var_d=2.0), r"var_d must be.*2.0"),
    (lambda: plan_zero_failure(1.0), r"eps must be in \(0, 1\)"),
])
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_hellinger_bound_is_exact_at_round_gaps():
    # n > 1/(8 eps^2) (stats/planning.py): at eps = 0.05 that is n > 50 exactly, so 51 items; float
    # arithmetic alone gives 1/(8 * 0.05**2) = 49.999... and would answer 50.
    from benchcert.stats.planning import plan_two_models

    answers = {a.method: a.n for a in plan_two_models(0.05).answers}
    assert answers["hellinger_lower_bound"] == 51
    answers = {a.method: a.n for a in plan_two_models(0.1).answers}
    assert answers["hellinger_lower_bound"] == 13  # 1/(8 * 0.01) = 12.5
