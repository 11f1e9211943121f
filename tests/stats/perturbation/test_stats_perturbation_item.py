"""The assumption-light per-item composite test (widened null range with Hoeffding margins,
stats/perturbation/item_test.py; ``method="widened"``).

Composite-null paper = Acharyya, Priebe & Helm, "Testing for LLM response differences: the case of
a composite null consisting of semantically irrelevant query perturbations"; its Assumption 2
(null probabilities i.i.d. Unif[a, b]) is the simulated null.  Sizes are judged with the 95%
Clopper-Pearson upper bound against alpha + 0.01 (issue #13's acceptance); the settings are the
issue's grid m in {2, 3, 5, 8} x r in {10, 50, 100, 200, 400, 2000}, null ranges [0.4, 0.6] and
[0.45, 0.55], tested rate at the range's edge (the worst case of the level proof), and its
clustered-rewordings examples.
"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
from perturbation_sim import simulate_item_tests
from scipy.stats import binomtest

import benchcert.stats.perturbation as P
from benchcert.stats.degenerate import DegenerateDataWarning
from benchcert.stats.perturbation.item_test import reject_many

ALPHA = 0.05
MS = (2, 3, 5, 8)
RS = (10, 50, 100, 200, 400, 2000)
RANGES = ((0.4, 0.6), (0.45, 0.55))


def upper95(k, n):
    return binomtest(int(k), int(n)).proportion_ci(0.95).high


def ci99(k, n):
    c = binomtest(int(k), int(n)).proportion_ci(0.99)
    return c.low, c.high


# --------------------------------------------------------------------------------------
# statuses


def test_no_alternative_when_the_null_range_is_everything():
    """Issue #13: the plug-in test rejected this item (p = 0.0035) although its tested rate 0.5
    lies inside the null variants' range [0, 1]."""
    res = P.composite_test([0] * 4 + [14] * 5, 14, 1, 2)
    assert res.status == "no_alternative" and not res.reject and math.isnan(res.p_value)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        assert P.composite_test([0] * 4 + [14] * 5, 14, 1, 2, method="plugin_exact").reject  # the old answer
    wide = P.composite_test([150, 60, 100, 190], 200, 0, 200)    # widened range covers [0, 1]
    assert wide.status == "no_alternative" and wide.range_low <= 0 and wide.range_high >= 1


def test_one_replicate_has_no_power_and_says_so():
    res = P.composite_test([1, 1, 1, 1], 1, 0, 1)
    assert res.status == "no_power" and not res.reject
    assert res.notes == ("with r = 1 replicate per variant no test can reject at alpha = 0.05: this says nothing "
                         "about whether the prompt matters",)
    assert P.no_power_sentence(3, 7, 0.1) == ("with r = 3 to 7 replicates per variant no test can reject at "
                                              "alpha = 0.1: this says nothing about whether the prompt matters")
    assert not P.possible_rejection([1] * 30, 1)
    assert P.possible_rejection([2000] * 8, 2000)


def test_possible_rejection_agrees_with_enumerating_every_outcome():
    """Oracle: the linear programme's answer vs trying every count configuration (small r)."""
    for m, r, rt in [(3, 4, 4), (3, 8, 8), (3, 12, 12), (4, 10, 6), (3, 20, 20), (2, 30, 30)]:
        any_reject = False
        for k in itertools.combinations_with_replacement(range(r + 1), m):
            kk = np.array(k)[None, :]
            if reject_many(np.repeat(kk, rt + 1, axis=0), r, np.arange(rt + 1), rt).any():
                any_reject = True
                break
        assert P.possible_rejection([r] * m, rt) == any_reject, (m, r, rt)


# --------------------------------------------------------------------------------------
# level


def test_single_item_and_vectorised_decisions_agree():
    """The simulations use reject_many; it must decide exactly as the per-item function."""
    rng = np.random.default_rng(1)
    for _ in range(300):
        m = int(rng.integers(2, 9))
        r = int(rng.choice([5, 30, 200, 2000]))
        k = rng.binomial(r, rng.uniform(0, 1) * rng.uniform(0.5, 1, m))
        kt = int(rng.binomial(r, rng.uniform()))
        res = P.composite_test(k, r, kt, r, method="widened")
        assert res.reject == bool(reject_many(k[None, :], r, [kt], r)[0])
        if res.status == "ok":
            assert res.reject == (res.p_value <= ALPHA)
            assert res.reject == (res.test_rate < res.range_low or res.test_rate > res.range_high)
            if res.reject:   # the p-value is the smallest level that rejects
                assert P.composite_test(k, r, kt, r, alpha=min(0.999, res.p_value * 1.001), method="widened").reject


def test_ideal_event_has_exactly_the_budgeted_probability():
    """Step 1 of the level proof, checked sharply: with the p_j observed, p' = a and
    c = alpha_I^(-1/(m-1)) - 1, P(p' < p_(1) - c R) = alpha_I for every scale (Dirichlet spacings)."""
    rng = np.random.default_rng(2)
    for m, (a, b) in itertools.product((2, 3, 8), ((0.4, 0.6), (0.1, 0.95))):
        c = 0.04 ** (-1 / (m - 1)) - 1
        p = rng.uniform(a, b, (100_000, m))
        hit = int(np.sum(a < p.min(1) - c * (p.max(1) - p.min(1))))
        lo, hi = ci99(hit, 100_000)
        assert lo <= 0.04 <= hi, (m, a, b, hit)


@pytest.mark.montecarlo
def test_size_on_the_issue_grid():
    """Acceptance grid of issue #13, every cell at 2,000 replications (vectorised: about a second).
    A test rejecting 8% would give an upper bound near 0.09 and fail."""
    worst = []
    for (a, b), m, r in itertools.product(RANGES, MS, RS):
        n = 2000
        k = simulate_item_tests(m=m, r=r, a=a, b=b, p_prime=a, n_sim=n, rng=np.random.default_rng(m * 7919 + r))
        worst.append((upper95(k, n), a, m, r, k))
        k = simulate_item_tests(m=m, r=r, a=a, b=b, p_prime=b, n_sim=n, rng=np.random.default_rng(m * 31 + r))
        worst.append((upper95(k, n), b, m, r, k))
    assert max(worst)[0] <= ALPHA + 0.01, max(worst)


@pytest.mark.montecarlo
def test_size_when_the_level_is_nearly_spent():
    """Where the bound is nearly attained (many replicates, alpha_I large) the simulated size must
    sit below alpha but not far below alpha_I - a check that can fail in both directions of a
    mistaken c."""
    n = 20_000
    k = simulate_item_tests(m=3, r=200_000, a=0.4, b=0.6, p_prime=0.4, n_sim=n, rng=np.random.default_rng(3))
    lo, hi = ci99(k, n)
    assert hi <= ALPHA and lo >= 0.02    # measured 0.0276 (alpha_I = 0.04 is the r -> infinity limit)


@pytest.mark.montecarlo
@pytest.mark.parametrize("null_probs,r,r_test,p_prime", [
    ([0.99] * 7 + [0.9], 50, 50, 0.9),                  # issue #13: 12.3% for the plug-in test
    ([0.02] * 4 + [0.98] * 4, 20, 2, 0.5),              # issue #13: 49% for the plug-in test
    ([0.02] * 4 + [0.98] * 4, 200, 200, 0.5),
    ([0.5] * 8, 30, 30, 0.5),                           # all rewordings identical
])
def test_clustered_rewordings_keep_the_level(null_probs, r, r_test, p_prime):
    """Assumption 2 violated (rewordings clustered): with the tested probability inside the null
    variants' range the level proof's step 2 holds conditionally, so the size stays below 2 gamma."""
    n = 4000
    m = len(null_probs)
    k = simulate_item_tests(m=m, r=r, a=0, b=1, p_prime=p_prime, n_sim=n, rng=np.random.default_rng(r),
                            r_test=r_test, null_probs=null_probs)
    assert upper95(k, n) <= ALPHA + 0.01


@pytest.mark.montecarlo
def test_power_where_the_change_is_large():
    """Not a powerless test: 16 null variants and 2,000 replicates detect a tested rate 0.15 below
    the range [0.4, 0.6] nearly always, and 8 variants a rate of 0.1 half of the time or more."""
    n = 2000
    k = simulate_item_tests(m=16, r=2000, a=0.4, b=0.6, p_prime=0.25, n_sim=n, rng=np.random.default_rng(4))
    assert k / n > 0.9
    k = simulate_item_tests(m=8, r=2000, a=0.4, b=0.6, p_prime=0.1, n_sim=n, rng=np.random.default_rng(5))
    assert k / n > 0.5


def test_mirror_images_decide_identically():
    rng = np.random.default_rng(6)
    for _ in range(200):
        m, r = int(rng.integers(2, 9)), int(rng.choice([10, 100, 1000]))
        k = rng.binomial(r, rng.uniform(0.05, 0.95, m))
        kt = int(rng.binomial(r, rng.uniform()))
        a, b = (P.composite_test(k, r, kt, r, method="widened"),
                P.composite_test(r - k, r, r - kt, r, method="widened"))
        assert (a.status, a.reject) == (b.status, b.reject)
        if a.status == "ok":
            assert a.p_value == pytest.approx(b.p_value, rel=1e-9)


@pytest.mark.slow
def test_size_and_power_full_grid():
    """make study: the acceptance grid at 20,000 replications per cell (size at the edge, power at
    a - 0.75 (b - a) and a - 1.5 (b - a)), the plug-in exact test beside it on [0.4, 0.6] (150
    replications per cell: it costs up to 0.4 s per item), and the clustered settings at 20,000.
    Prints docs/analyses.md's table."""
    from perturbation_sim import power_table

    rows = power_table()
    for row in rows:
        k = round(row["widened_size"] * 20_000)
        assert upper95(k, 20_000) <= ALPHA + 0.01, row
        print("grid", row)
    for probs, r, rt, pp in ([[0.99] * 7 + [0.9], 50, 50, 0.9], [[0.02] * 4 + [0.98] * 4, 20, 2, 0.5]):
        k = simulate_item_tests(m=len(probs), r=r, a=0, b=1, p_prime=pp, n_sim=20_000,
                                rng=np.random.default_rng(r), r_test=rt, null_probs=probs)
        assert upper95(k, 20_000) <= ALPHA + 0.01


def test_fractional_scores_keep_the_level():
    """The widened-range test on mean scores in [0, 1] (widened_range_test_scores): Hoeffding holds
    for bounded scores, so the level proof carries over.  Scores Beta(p kappa, (1 - p) kappa) with
    p_j ~ Unif[0.4, 0.6] and the tested mean at the edge; the per-item function and the vectorised
    decision agree on every simulated item."""
    rng = np.random.default_rng(40)
    n = 2000
    for m, r, kappa in [(3, 50, 2.0), (8, 400, 0.5), (8, 50, 20.0), (5, 800, 1.0)]:
        p = rng.uniform(0.4, 0.6, (n, m))
        sums = np.stack([rng.beta(p * kappa, (1 - p) * kappa, (r, n, m)).sum(0)])[0]
        st = rng.beta(0.4 * kappa, 0.6 * kappa, (r, n)).sum(0)
        rej = reject_many(sums, r, st, r)
        assert upper95(int(rej.sum()), n) <= ALPHA + 0.01, (m, r, kappa, rej.mean())
        for i in range(0, n, 200):
            res = P.widened_range_test_scores(sums[i], r, st[i], r)
            assert res.reject == bool(rej[i]) and res.method == "widened_mean_score"
    with pytest.raises(ValueError, match="null_sums"):
        P.widened_range_test_scores([5.5, 11.0], 10, 3.0, 10)


def test_min_detectable_gap_is_the_rejection_boundary_when_the_null_rates_agree():
    """g* = max t_ij: with every null variant at the same rate p0, the test rejects iff the tested rate
    is more than g* away (fractional scores make the rates continuous); a spread of the null rates
    only widens the range, so no outcome with these counts rejects a smaller change."""
    rng = np.random.default_rng(21)
    for m, r, rt in [(8, 400, 400), (5, 2000, 2000), (3, 2000, 500), (4, [300, 500, 800, 1000], 600)]:
        reps = np.broadcast_to(np.asarray(r), (m,)).astype(np.int64)
        g = P.min_detectable_gap(reps, rt, alpha=ALPHA)
        p0 = 0.5 + g if 0.5 + 2 * g <= 1 else 0.98
        assert 0 < p0 - g
        null = p0 * reps
        equal = np.unique(reps).size == 1
        # equal counts: all null rates equal is the optimum, the boundary is exact; unequal counts: the
        # equal-rates boundary is an upper bound and a spread of the rates can do a little better
        g_eq = P.widened_range_test_scores(null, reps, 0.0, rt, alpha=ALPHA)
        g_eq = p0 - g_eq.range_low
        assert g == pytest.approx(g_eq, rel=1e-9) if equal else g <= g_eq + 1e-12
        for sign in (-1, 1):   # just beyond / just inside the boundary, below p0 and (mirror) above 1 - p0
            x = P.widened_range_test_scores(null, reps, (p0 - g_eq - sign * 1e-9) * rt, rt, alpha=ALPHA)
            y = P.widened_range_test_scores((1 - p0) * reps, reps, (1 - p0 + g_eq + sign * 1e-9) * rt, rt,
                                            alpha=ALPHA)
            assert x.reject == y.reject == (sign == 1), (m, r, sign)
            assert x.min_detectable_gap == pytest.approx(g)
        # no spread of the null rates lets a smaller change (from the nearest null rate) reject
        for _ in range(200):
            rates = p0 + rng.uniform(0, 0.3, m) * rng.integers(0, 2, m)
            rates[rng.integers(m)] = p0
            assert not P.widened_range_test_scores(np.minimum(rates, 1) * reps, reps, (p0 - g + 1e-7) * rt, rt,
                                                   alpha=ALPHA).reject
    gaps = [[P.min_detectable_gap([r] * m, r) for r in RS] for m in MS]
    assert all(np.all(np.diff(row) < 0) for row in gaps) and np.all(np.diff(np.array(gaps), axis=0) < 0)
    assert P.min_detectable_gap([400] * 3, 400) == pytest.approx(0.527, abs=1e-3)
    assert P.min_detectable_gap([400] * 8, 400) == pytest.approx(0.160, abs=1e-3)


def test_low_power_label_matches_simulated_power():
    """The label's meaning by simulation (null rates ~ Unif[0.5, 0.52], close enough for the widened
    range to leave alternatives, the tested rate 0.2, a change of 0.3, 2,000 items, r = 1,000 runs per
    variant): m = 3 null variants (g* = 0.33 > 0.25, labelled low power) detect it in at most 1% of
    items (99% Clopper-Pearson upper bound), m = 8 (g* = 0.10, not labelled) in at least 99%; the
    audit labels exactly the first."""
    import polars as pl

    from benchcert.tasks.perturbation.service import make_design, run_design

    rng = np.random.default_rng(13)
    n, r = 2000, 1000
    assert P.min_detectable_gap([r] * 3, r) == pytest.approx(0.333, abs=1e-3)
    assert P.min_detectable_gap([r] * 8, r) == pytest.approx(0.101, abs=1e-3)
    power = {}
    for m in (3, 8):
        rej = reject_many(rng.binomial(r, rng.uniform(0.5, 0.52, (n, m))), r, rng.binomial(r, 0.2, n), r,
                          alpha=ALPHA)
        power[m] = int(rej.sum())
    assert ci99(power[3], n)[1] <= 0.01 and ci99(power[8], n)[0] >= 0.99, power
    for m, labelled in ((3, True), (8, False)):
        variants = [f"n{j}" for j in range(m)] + ["t"]
        k = np.c_[rng.binomial(r, rng.uniform(0.5, 0.52, (20, m))), rng.binomial(r, 0.2, 20)]
        counts = pl.DataFrame({"model": "x", "item_id": np.repeat(np.arange(20), m + 1).astype(str),
                               "variant": variants * 20, "k": k.ravel(), "r": r, "binary": True})
        design = make_design(variants, base="n0", null=variants[:-1], test=["t"])
        audit = run_design(counts, design, alpha=ALPHA, method="widened")
        ok = audit.items.filter(pl.col("status") == "ok")
        assert ok.height >= 15 and ok["low_power"].to_list() == [labelled] * ok.height
        assert audit.items.filter(pl.col("status") != "ok")["low_power"].is_null().all()
        (v,) = audit.variants.iter_rows(named=True)
        assert v["n_low_power"] == (ok.height if labelled else 0) and (v["low_power"] is not None) == labelled
        if labelled:
            assert v["low_power"].startswith("low power: with m = 3 null variants") and "0.33" in v["low_power"]
            assert v["composite_rejections"] == 0 and any("low power" in note for note in audit.notes)
        else:
            assert v["composite_rejections"] == ok.height
