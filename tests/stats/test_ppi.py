"""Prediction-powered human-scale scores (stats/ppi.py): the reference implementation as oracle,
seeded coverage simulations (issue #28's acceptance at modest size), agreement and planning."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from benchcert.stats.degenerate import DegenerateDataWarning
from benchcert.stats.ppi import (
    MIN_HUMAN_LABELS,
    judge_agreement,
    labelled_subset_check,
    plan_human_labels,
    ppi_gap,
    ppi_mean,
)
from simcheck import rate_ci


def biased_judge(rng, human, p_one_given_one, p_one_given_zero):
    """Binary judge scores: P(judge = 1 | human = 1) and P(judge = 1 | human = 0)."""
    u = rng.random(human.size)
    return np.where(human == 1, u < p_one_given_one, u < p_one_given_zero).astype(float)


# Issue #28's setting: human rate 0.6; the judge says 1 w.p. 5/6 when the human says 1 and 1/2 when
# the human says 0: judge mean 0.6 * 5/6 + 0.4 / 2 = 0.70 (+10 points), agreement 0.5 + 0.2 = 0.70.
P_HUMAN, P11, P10 = 0.6, 5 / 6, 0.5


def draw_benchmark(rng, n_items=2000):
    human = (rng.random(n_items) < P_HUMAN).astype(float)
    return human, biased_judge(rng, human, P11, P10)


# --------------------------------------------------------------------------- oracle (ppi-python)

def test_equals_the_reference_implementation():
    ppi_py = pytest.importorskip("ppi_py")
    rng = np.random.default_rng(11)
    for n, big_n, frac in ((40, 900, False), (150, 2000, False), (300, 500, True)):
        y = rng.random(n) if frac else (rng.random(n) < 0.55).astype(float)
        yh = np.clip(y + rng.normal(0.1, 0.25, n), 0, 1)
        yu = np.clip(rng.random(big_n) * 0.9 + 0.1, 0, 1)
        for lam in (None, 0.0, 0.4, 1.0):
            ours = ppi_mean(y, yh, yu, alpha=0.1, lam=lam, quantile="normal")
            est = ppi_py.ppi_mean_pointestimate(y, yh, yu, lam=lam)
            lo, hi = ppi_py.ppi_mean_ci(y, yh, yu, alpha=0.1, lam=lam)
            assert ours.estimate == pytest.approx(float(np.ravel(est)[0]), abs=1e-8)
            assert (ours.lower, ours.upper) == pytest.approx((float(lo[0]), float(hi[0])), abs=1e-8)


def test_lambda_zero_is_the_human_only_interval_and_t_is_wider_than_normal():
    rng = np.random.default_rng(3)
    human, judge = draw_benchmark(rng, 600)
    r0 = ppi_mean(human[:80], judge[:80], judge[80:], lam=0.0)
    assert r0.estimate == pytest.approx(human[:80].mean())
    assert (r0.lower, r0.upper) == pytest.approx((r0.human_only_lower, r0.human_only_upper))
    rt = ppi_mean(human[:80], judge[:80], judge[80:])
    rz = ppi_mean(human[:80], judge[:80], judge[80:], quantile="normal")
    assert rt.estimate == rz.estimate and rt.half_width > rz.half_width
    assert rt.method == "ppi++" and "uniform random sample" in rt.assumptions[0]


# --------------------------------------------------------------------------- coverage (seeded)

@pytest.mark.montecarlo
@pytest.mark.parametrize("n_human", [100, 300])
def test_human_scale_interval_covers_and_beats_human_only(n_human):
    """Coverage of the benchmark's human-scale mean >= 95% (judged by the Clopper-Pearson interval of
    the simulated rate), narrower than the human-only interval on the same labels, while the judge's
    own interval almost never covers (issue #28 acceptance)."""
    rng = np.random.default_rng(2028 + n_human)
    reps = 1500
    hits, naive, narrower = np.zeros(reps, bool), np.zeros(reps, bool), np.zeros(reps, bool)
    for r in range(reps):
        human, judge = draw_benchmark(rng)
        truth = human.mean()
        lab = rng.choice(judge.size, n_human, replace=False)
        rest = np.setdiff1d(np.arange(judge.size), lab)
        res = ppi_mean(human[lab], judge[lab], judge[rest])
        hits[r] = res.lower <= truth <= res.upper
        narrower[r] = res.half_width < (res.human_only_upper - res.human_only_lower) / 2
        se = judge.std(ddof=1) / np.sqrt(judge.size)
        naive[r] = abs(judge.mean() - truth) <= 1.96 * se
    rate, low, high = rate_ci(hits, reps, level=0.95)
    assert high >= 0.95 and low >= 0.94, (rate, low, high)
    assert narrower.mean() >= 0.9
    assert rate_ci(naive, reps, level=0.95)[2] < 0.10


@pytest.mark.montecarlo
@pytest.mark.parametrize(("n_human", "p_human", "p11", "p10"), [
    (30, P_HUMAN, P11, P10), (50, P_HUMAN, P11, P10), (30, 0.97, 0.99, 0.3), (50, 0.97, 0.99, 0.3)])
def test_interval_holds_its_level_at_few_labels_and_boundary_rates(n_human, p_human, p11, p10):
    """At the audit's minimum of MIN_HUMAN_LABELS labels and at a boundary rate (0.97: 40% of 30-label
    sets are all 1) both the PPI++ interval and the human-only one beside it cover >= 95% (the plain
    t interval covered 57% at n = 30 and 77% at n = 50 here: zero width when all labels agree)."""
    assert n_human >= MIN_HUMAN_LABELS
    rng = np.random.default_rng(4000 + n_human + int(1000 * p_human))
    reps, n_items = 2000, 2000
    hits, hits_h = np.zeros(reps, bool), np.zeros(reps, bool)
    for r in range(reps):
        human = (rng.random(n_items) < p_human).astype(float)
        judge = biased_judge(rng, human, p11, p10)
        truth = human.mean()
        lab = rng.choice(n_items, n_human, replace=False)
        rest = np.setdiff1d(np.arange(n_items), lab)
        res = ppi_mean(human[lab], judge[lab], judge[rest])
        hits[r] = res.lower <= truth <= res.upper
        hits_h[r] = res.human_only_lower <= truth <= res.human_only_upper
    for h in (hits, hits_h):
        rate, low, high = rate_ci(h, reps, level=0.95)
        assert high >= 0.95 and low >= 0.93, (rate, low, high)


def test_all_labels_agreeing_still_give_an_interval_of_positive_width():
    judge_rest = np.r_[np.ones(900), np.zeros(100)]
    res = ppi_mean(np.ones(30), np.ones(30), judge_rest)
    assert res.estimate == 1.0 and res.lower < 0.95 and res.human_only_lower < 0.95
    with pytest.warns(DegenerateDataWarning, match="zero width"):
        normal = ppi_mean(np.ones(30), np.ones(30), judge_rest, quantile="normal", lam=0.0)
    assert normal.lower == normal.upper == 1.0  # the reference's interval, kept as it is


@pytest.mark.montecarlo
@pytest.mark.parametrize(("n_human", "p_human"), [(100, 0.9), (30, 0.9), (100, 0.6)])
def test_uninformative_judge_interval_covers_the_population_mean(n_human, p_human):
    """Issue #36 finding 6: with an uninformative judge lambda is about 0 and the plug-in interval is a
    Wald interval on the labels: 92.82% [92.30, 93.32] coverage of the population mean at 100 labels
    and human rate 0.9. With the score form (Wilson's at lambda = 0) in the hull: 96.5% [95.7, 97.1]
    there, 99.7% at 30 labels, 94.5% [93.7, 95.3] at rate 0.6 (3,000 reps, seed 3636 in one run; here
    1,500 reps per setting)."""
    rng = np.random.default_rng(3636 + n_human + int(100 * p_human))
    reps = 1500
    hits = np.zeros(reps, bool)
    for r in range(reps):
        human = (rng.random(2000) < p_human).astype(float)
        judge = (rng.random(2000) < 0.5).astype(float)  # says nothing about the human label
        lab = rng.choice(2000, n_human, replace=False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = ppi_mean(human[lab], judge[lab], np.delete(judge, lab))
        hits[r] = res.lower <= p_human <= res.upper
        assert 0.0 <= res.lower <= res.upper <= 1.0
    rate, low, high = rate_ci(hits, reps, level=0.95)
    assert high >= 0.95, (rate, low, high)


# The human-scale interval's coverage grid (issue #36): labels x human rate (near 0, middle, near 1)
# x judge (uninformative: lambda about 0; issue #28's biased judge; a good judge), 1,000 runs each,
# coverage of the benchmark's own human-scale mean (2,000 items), seeds [36, n, 100 rate, judge].
GRID_JUDGES = {"uninformative": (0.5, 0.5), "biased": (P11, P10), "good": (0.95, 0.05)}
GRID = [(n, p, j) for n in (30, 100, 300) for p in (0.03, 0.6, 0.9, 0.97) for j in GRID_JUDGES]
#: The grid's lowest settings by Clopper-Pearson upper bound (docs/analyses.md gives the figures): the
#: default suite re-runs them with the grid's own seeds.
GRID_HARDEST = [(100, 0.6, "uninformative"), (30, 0.6, "uninformative"), (30, 0.6, "biased")]


def grid_coverage(n_human, p_human, judge, reps=1000):
    """(rate, low, high) of the PPI++ interval covering the benchmark's human-scale mean, 95% CP."""
    rng = np.random.default_rng([36, n_human, int(round(100 * p_human)), list(GRID_JUDGES).index(judge)])
    p11, p10 = GRID_JUDGES[judge]
    hits = np.zeros(reps, bool)
    for r in range(reps):
        human = (rng.random(2000) < p_human).astype(float)
        judge_scores = biased_judge(rng, human, p11, p10)
        lab = rng.choice(2000, n_human, replace=False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # all-agreeing label sets warn; they are part of the grid
            res = ppi_mean(human[lab], judge_scores[lab], np.delete(judge_scores, lab))
        assert 0.0 <= res.lower <= res.estimate <= res.upper <= 1.0
        hits[r] = res.lower <= human.mean() <= res.upper
    return rate_ci(hits, reps, level=0.95)


@pytest.mark.montecarlo
@pytest.mark.parametrize(("n_human", "p_human", "judge"), GRID_HARDEST)
def test_interval_covers_in_the_hardest_settings_of_the_grid(n_human, p_human, judge):
    rate, low, high = grid_coverage(n_human, p_human, judge)
    assert high >= 0.95, (rate, low, high)  # the Wald interval of issue #36 (92.8%) fails it: upper about 94.3%


@pytest.mark.slow
def test_study_interval_covers_over_the_grid():
    """Every one of the 36 settings: coverage's 95% Clopper-Pearson upper bound at least 95%."""
    low_ones = []
    for setting in GRID:
        rate, low, high = grid_coverage(*setting)
        print(setting, f"{100 * rate:.2f}% [{100 * low:.2f}, {100 * high:.2f}]", flush=True)
        if high < 0.95:
            low_ones.append((setting, rate, low, high))
    assert not low_ones, low_ones


def test_interval_is_clipped_to_the_score_range_and_the_hull_of_the_score_form():
    # labels nearly all 1 with a judge that agrees: the plug-in interval reached past 1 (one CLI result
    # [0.883, 1.036]); now clipped, and never narrower than the plug-in one inside [0, 1]
    rng = np.random.default_rng(5)
    y = np.r_[np.ones(38), np.zeros(2)]
    yh = np.r_[np.ones(37), np.zeros(3)]
    yu = (rng.random(500) < 0.93).astype(float)
    r = ppi_mean(y, yh, yu)
    plain = ppi_mean(y, yh, yu, quantile="normal")
    assert 0.0 <= r.lower and r.upper <= 1.0 and r.lower <= plain.lower
    g = ppi_gap(np.ones(40), np.r_[np.zeros(39), 1.0], np.ones(40), np.zeros(40), np.ones(300), np.zeros(300))
    assert -1.0 <= g.lower <= g.upper <= 1.0
    # labels near 0, the labelled items' judge mean (0.37) above the rest's (0.05): the plug-in estimate
    # mean(Y) + lambda (mean(Yhat_u) - mean(Yhat)) is below 0; clipped to 0, inside its interval
    y, yh = np.r_[1.0, np.zeros(29)], np.r_[1.0, np.ones(10), np.zeros(19)]
    yu = np.r_[np.ones(50), np.zeros(950)]
    lam = ppi_mean(y, yh, yu).lam
    assert y.mean() + lam * (yu.mean() - yh.mean()) < 0
    r = ppi_mean(y, yh, yu)
    assert r.lower == r.estimate == 0.0 < r.upper


@pytest.mark.montecarlo
def test_paired_gap_covers_and_the_judge_gap_does_not():
    """Model A's judge is biased +10 points, model B's not: the judge's gap is off by 10 points;
    the paired PPI++ gap covers the human gap."""
    rng = np.random.default_rng(77)
    reps, n_items, n_human = 1200, 2000, 300
    hits, naive = np.zeros(reps, bool), np.zeros(reps, bool)
    for r in range(reps):
        ha, ja = draw_benchmark(rng, n_items)
        hb = (rng.random(n_items) < 0.5).astype(float)
        jb = biased_judge(rng, hb, 0.7, 0.3)  # mean 0.5, agreement 0.7
        truth = ha.mean() - hb.mean()
        lab = rng.choice(n_items, n_human, replace=False)
        rest = np.setdiff1d(np.arange(n_items), lab)
        res = ppi_gap(ha[lab], hb[lab], ja[lab], jb[lab], ja[rest], jb[rest])
        hits[r] = res.lower <= truth <= res.upper
        d = ja - jb
        naive[r] = abs(d.mean() - truth) <= 1.96 * d.std(ddof=1) / np.sqrt(n_items)
    rate, low, high = rate_ci(hits, reps, level=0.95)
    assert high >= 0.95 and low >= 0.94, (rate, low, high)
    assert rate_ci(naive, reps, level=0.95)[2] < 0.10


def test_a_labelled_subset_chosen_by_the_judge_is_flagged():
    rng = np.random.default_rng(5)
    human, judge = draw_benchmark(rng)
    ones = np.flatnonzero(judge == 1)
    lab = rng.choice(ones, 200, replace=False)  # labels only where the judge said 1
    rest = np.setdiff1d(np.arange(judge.size), lab)
    check = labelled_subset_check(judge[lab], judge[rest])
    assert check.suspicious and check.p_value < 1e-6
    fair = rng.choice(judge.size, 200, replace=False)
    others = np.setdiff1d(np.arange(judge.size), fair)
    assert labelled_subset_check(judge[fair], judge[others]).mean_labelled == pytest.approx(judge[fair].mean())


@pytest.mark.montecarlo
def test_random_subsets_are_flagged_at_about_alpha():
    rng = np.random.default_rng(9)
    reps = 800
    flagged = np.zeros(reps, bool)
    for r in range(reps):
        _, judge = draw_benchmark(rng, 1000)
        lab = rng.choice(1000, 100, replace=False)
        flagged[r] = labelled_subset_check(judge[lab], np.delete(judge, lab), alpha=0.05).suspicious
    rate, low, high = rate_ci(flagged, reps, level=0.99)
    assert low <= 0.05 <= high + 0.01, (rate, low, high)


# --------------------------------------------------------------------------- agreement

def test_agreement_binary_matches_hand_computation():
    judge = np.array([1, 1, 0, 0, 1, 0, 1, 1, 0, 1], float)
    human = np.array([1, 0, 0, 0, 1, 1, 1, 0, 0, 1], float)
    a = judge_agreement(judge, human)
    # po = 7/10; judge 1-rate 0.6, human 1-rate 0.5: pe = 0.6*0.5 + 0.4*0.5 = 0.5; kappa = 0.2/0.5
    assert a.kappa == pytest.approx(0.4) and a.exact_agreement == pytest.approx(0.7)
    assert a.bias == pytest.approx(0.1) and a.kappa_weights is None
    assert a.confusion == ((3, 2), (1, 4)) and a.levels == (0.0, 1.0)  # rows human 0/1, columns judge 0/1
    assert a.bias_lower < 0.1 < a.bias_upper


def test_agreement_ordinal_uses_weighted_kappa_and_continuous_spearman_only():
    rng = np.random.default_rng(2)
    human = rng.integers(0, 5, 300) / 4
    judge = np.clip(human + rng.choice([-0.25, 0, 0.25], 300), 0, 1)
    a = judge_agreement(judge, human)
    assert a.kappa_weights == "quadratic" and 0.5 < a.kappa < 1 and len(a.confusion) == 5
    cont = judge_agreement(rng.random(50), rng.random(50))
    assert np.isnan(cont.kappa) and cont.confusion is None and -1 <= cont.spearman <= 1
    with pytest.warns(DegenerateDataWarning, match="constant"):
        assert np.isnan(judge_agreement(np.ones(5), rng.random(5)).spearman)


# --------------------------------------------------------------------------- planning

def test_plan_reaches_its_epsilon_and_needs_fewer_labels_than_humans_alone():
    rng = np.random.default_rng(21)
    human, judge = draw_benchmark(rng, 20000)
    pilot = rng.choice(20000, 200, replace=False)
    plan = plan_human_labels(human[pilot], judge[pilot], judge[:4000], epsilon=0.03)
    assert plan.n_ppi is not None and plan.n_human_only is not None and plan.n_ppi < plan.n_human_only
    widths, widths_h = [], []
    for _ in range(200):  # fresh draws with the planned number of labels: the half-width is about epsilon
        h, j = draw_benchmark(rng, 4000)
        lab = rng.choice(4000, plan.n_ppi, replace=False)
        widths.append(ppi_mean(h[lab], j[lab], np.delete(j, lab)).half_width)  # the audit's (t) interval
        lab = rng.choice(4000, plan.n_human_only, replace=False)
        r = ppi_mean(h[lab], j[lab], np.delete(j, lab))
        widths_h.append((r.human_only_upper - r.human_only_lower) / 2)
    assert np.mean(widths) == pytest.approx(0.03, rel=0.08)
    assert np.mean(widths_h) == pytest.approx(0.03, rel=0.08)
    never = plan_human_labels(human[pilot], judge[pilot], judge[:300], epsilon=0.005)
    assert never.n_ppi is None and never.n_human_only is None


def test_plan_never_proposes_fewer_than_the_minimum_labels():
    rng = np.random.default_rng(22)
    human, judge = draw_benchmark(rng, 4000)
    wide = plan_human_labels(human[:50], judge[:50], judge, epsilon=0.4)
    assert wide.n_ppi == wide.n_human_only == MIN_HUMAN_LABELS
    agree = plan_human_labels(np.ones(20), np.ones(20), np.r_[np.ones(900), np.zeros(100)], epsilon=0.05)
    assert agree.n_ppi is not None and agree.n_ppi > MIN_HUMAN_LABELS  # all-agreeing pilot: not 2 labels
    assert agree.n_human_only is not None and agree.n_human_only >= agree.n_ppi


def test_validation_names_the_parameter():
    with pytest.raises(ValueError, match="judge_labelled must have one judge score"):
        ppi_mean([1, 0, 1], [1, 0], [1, 1])
    with pytest.raises(ValueError, match="human must lie in"):
        ppi_mean([1, 2], [1, 0], [1])
    with pytest.raises(ValueError, match="lam must be"):
        ppi_mean([1, 0], [1, 0], [1], lam=1.5)
    with pytest.raises(ValueError, match="epsilon"):
        plan_human_labels([1, 0], [1, 0], [1, 0, 1], epsilon=0)
    assert MIN_HUMAN_LABELS >= 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ppi_mean([1, 0, 1], [1, 0, 0], [0, 1, 1])


def test_assurance_plan_asks_for_more_labels_than_the_typical_one():
    # the typical plan is about the median label set; --assurance 0.8 plans for the 80th percentile of
    # the reported half-width, the pilot's own error counted: never fewer labels (here more with the judge)
    rng = np.random.default_rng(23)
    human, judge = draw_benchmark(rng, 4000)
    pilot = rng.choice(4000, 150, replace=False)
    typ = plan_human_labels(human[pilot], judge[pilot], judge, epsilon=0.06)
    sure = plan_human_labels(human[pilot], judge[pilot], judge, epsilon=0.06, assurance=0.8,
                             rng=np.random.default_rng(1))
    again = plan_human_labels(human[pilot], judge[pilot], judge, epsilon=0.06, assurance=0.8,
                              rng=np.random.default_rng(1))
    assert sure.assurance == 0.8 and typ.assurance is None
    assert sure.n_ppi > typ.n_ppi and sure.n_human_only >= typ.n_human_only
    assert (sure.n_ppi, sure.n_human_only) == (again.n_ppi, again.n_human_only)
    with pytest.raises(ValueError, match="assurance"):
        plan_human_labels(human[pilot], judge[pilot], judge, epsilon=0.06, assurance=1.2)
    # 400 draws can show at most 0.1 ** (1 / 400) = 0.99426 at 90%: a higher assurance is refused, not
    # quietly planned at the all-draws size (before, 0.995 and 0.9999 returned the same plan as each other)
    with pytest.raises(ValueError, match=r"assurance=0\.999: at most 0\.9943"):
        plan_human_labels(human[pilot], judge[pilot], judge, epsilon=0.06, assurance=0.999)


@pytest.mark.montecarlo
def test_assurance_plan_delivers_its_share_in_an_independent_simulation():
    """The --assurance 0.8 plan (with the judge and by hand), checked by a simulation that shares none of
    the planner's batched code but its bootstrap-t factor (worlds drawn here by Rubin's Bayesian bootstrap,
    n labels from each, every label set scored by ppi_mean itself, the half-width scaled by
    _studentized_scale): at the planned n the share of label sets reaching epsilon is at least 0.8 (99%
    Clopper-Pearson upper bound over 400 runs) and contains the planner's own estimate, which is at least
    331 of its 400 draws (the Monte-Carlo margin). A planner whose estimate were off by 10 points either way
    fails. That the worlds are calibrated over pilots is the test below; the plan's frequentist assurance,
    the slow study."""
    from benchcert.stats.ppi import ASSURANCE_DRAWS, _assured_hits, _studentized_scale

    rng = np.random.default_rng(3680)
    reps, eps, pilot_n = 400, 0.05, 300
    human, judge = draw_benchmark(rng, 4000)
    pilot = rng.choice(4000, pilot_n, replace=False)
    y, yh, ja = human[pilot], judge[pilot], judge
    plan = plan_human_labels(y, yh, ja, epsilon=eps, assurance=0.8, rng=np.random.default_rng(7))
    seed = int(np.random.default_rng(7).integers(2**62))  # the planner's own draws, as plan_human_labels takes it
    for n, by_hand in ((plan.n_ppi, False), (plan.n_human_only, True)):
        own = _assured_hits(y, yh, ja, n, eps, 0.05, seed, by_hand) / ASSURANCE_DRAWS
        hits = np.zeros(reps, bool)
        for r in range(reps):
            weights = rng.dirichlet(np.ones(pilot_n))
            pick = rng.choice(pilot_n, n, p=weights)
            res = ppi_mean(y[pick], yh[pick], ja[rng.integers(0, ja.size, ja.size - n)])
            scale = _studentized_scale(y, yh, weights[None], n, ja.size, float(np.var(ja, ddof=1)), by_hand)[0]
            width = res.human_only_upper - res.human_only_lower if by_hand else res.upper - res.lower
            hits[r] = width / 2 * scale <= eps
        rate, low, high = rate_ci(hits, reps)
        print(f"by hand {by_hand}: plan {n} labels, planner's share {own:.3f}, independent {rate:.3f} "
              f"[{low:.3f}, {high:.3f}]")
        assert own >= 331 / 400 and high >= 0.8 and low <= own <= high, (by_hand, n, own, rate, low, high)


@pytest.mark.montecarlo
def test_assurance_plan_on_a_pilot_of_all_ones_warns_and_plans_at_the_rates_bound():
    """A pilot whose 60 human labels are all 1 (16% of pilots at a human rate of 0.97) has no variance to
    bootstrap: the assurance plan was the typical one, which delivered 13% at epsilon 0.03 (issue #36's
    review). It warns and plans at the one-sided 90% Clopper-Pearson bound 0.1 ** (1/60) = 0.9624; over 400
    fresh benchmarks whose human rate is that bound (2,000 judged items, a judge agreeing 95% / 50%), the
    label sets of the plan's size reach epsilon 0.03 in at least 80% of runs, with the judge and by hand,
    those of the typical plan's size in under half. Measured: 271 labels (typical 92); 94.8% [92.1, 96.7]
    with the judge, 86.3% [82.5, 89.5] by hand, 6.8% [4.5, 9.7] at the typical size (95% Clopper-Pearson)."""
    rng = np.random.default_rng(3690)
    m, pilot_n, eps, reps = 2000, 60, 0.03, 400
    bound = 0.1 ** (1 / pilot_n)
    y = np.ones(pilot_n)
    judge = biased_judge(rng, (rng.random(m) < 0.97).astype(float), 0.95, 0.5)
    typ = plan_human_labels(y, judge[:pilot_n], judge, epsilon=eps)
    with pytest.warns(DegenerateDataWarning, match=r"all 60 pilot human labels are 1.*rate 0\.9624"):
        plan = plan_human_labels(y, judge[:pilot_n], judge, epsilon=eps, assurance=0.8, rng=np.random.default_rng(5))
    assert "Clopper-Pearson bound" in plan.method
    hits = np.zeros((reps, 3), bool)
    for r in range(reps):
        human = (rng.random(m) < bound).astype(float)
        j = biased_judge(rng, human, 0.95, 0.5)
        for k, (n, by_hand) in enumerate(((plan.n_ppi, False), (plan.n_human_only, True), (typ.n_ppi, False))):
            lab = rng.choice(m, n, replace=False)
            res = ppi_mean(human[lab], j[lab], np.delete(j, lab))
            width = res.human_only_upper - res.human_only_lower if by_hand else res.upper - res.lower
            hits[r, k] = width / 2 <= eps
    shares = [rate_ci(h, reps, level=0.95) for h in hits.T]
    print(f"plan {plan.n_ppi} / {plan.n_human_only} (typical {typ.n_ppi}): {shares}")
    assert shares[0][0] >= 0.8 and shares[1][0] >= 0.8, shares
    assert shares[2][2] < 0.5, shares


@pytest.mark.montecarlo
@pytest.mark.parametrize("p_human, p11, p10, pilot_n, n", ((P_HUMAN, P11, P10, 200, 350), (0.9, 0.9, 0.9, 80, 200)),
                         ids=("issue28_pilot200", "rate09_uninformative_pilot80"))
def test_assurance_worlds_are_calibrated_for_the_truths_planned_variance_over_pilots(p_human, p11, p10, pilot_n, n):
    """What the assurance planner gets from the pilot is a law for the truth's planned variance V(n) (the
    worlds' g, bootstrap-t). Over 400 fresh pilots its 50th, 80th and 90th percentiles lie above the truth's
    V(n) in that share of pilots (99% Clopper-Pearson intervals containing 0.5, 0.8, 0.9): issue #28's
    setting with a pilot of 200 (at n = 350, about its plan) and a human rate of 0.9, an uninformative judge,
    a pilot of 80. The Bayesian bootstrap's worlds used as they are (the planner before: g = g*) fail it, at the
    same seeds: 38.3% [32.0, 44.7], 71.5% [65.3, 77.2], 85.8% and 40.5% [34.2, 47.0], 73.0% [66.9, 78.5], 84.8%."""
    from benchcert.stats.ppi import _log_planned_var, _planned_var, _studentized_scale

    rng = np.random.default_rng(3682)
    pilots, draws, m = 400, 400, 4000
    mu_j = p_human * p11 + (1 - p_human) * p10
    s_j = mu_j * (1 - mu_j)  # the judge's scores over all items are known: their population variance here
    truth = np.log(_planned_var(n, m, s_j, p_human, mu_j, p_human * (1 - p_human), p_human * (p11 - mu_j),
                                human_only=False))
    below = np.zeros((pilots, 3), bool)
    for r in range(pilots):
        y = (rng.random(pilot_n) < p_human).astype(float)
        yh = biased_judge(rng, y, p11, p10)
        weights = rng.dirichlet(np.ones(pilot_n), draws)
        world, _ = _log_planned_var(y, yh, weights, n, m, s_j, False)
        drawn = world + 2 * np.log(_studentized_scale(y, yh, weights, n, m, s_j, False))
        below[r] = truth <= np.quantile(drawn, [0.5, 0.8, 0.9])
    for share, level in zip(below.T, (0.5, 0.8, 0.9)):
        rate, low, high = rate_ci(share, pilots)
        print(f"{level}: {rate:.3f} [{low:.3f}, {high:.3f}]")
        assert low <= level <= high, (level, rate, low, high)


# The frequentist assurance studies: (name, human rate, P(judge 1 | human 1), P(judge 1 | human 0), pilot size)
# at epsilon 0.05 over 4,000 judged items: issue #28's setting with a pilot of 200 and of 60, and a small pilot
# of 80 at a human rate of 0.9 with an uninformative judge (lambda near 0: the human labels alone).
ASSURANCE_STUDIES = (("issue #28, pilot 200", P_HUMAN, P11, P10, 200),
                     ("rate 0.9, uninformative judge, pilot 80", 0.9, 0.9, 0.9, 80),
                     ("issue #28, pilot 60", P_HUMAN, P11, P10, 60))


@pytest.mark.slow
@pytest.mark.parametrize("name, p_human, p11, p10, pilot_n", ASSURANCE_STUDIES,
                         ids=("issue28", "rate09_pilot80", "issue28_pilot60"))
def test_study_assurance_plan_reaches_epsilon_in_its_share_of_label_sets(name, p_human, p11, p10, pilot_n):
    """Over 500 fresh (pilot, label set) pairs, epsilon 0.05: the label sets of the typical plan's size reach
    epsilon in about half the runs or fewer, those of the --assurance 0.8 plan (the bootstrap-t planner) in
    80% or more: the point at least 0.8, the 95% Clopper-Pearson interval above 0.75 and its upper bound at
    most 0.92 (the plan not every label). Measured: 86.8%
    [83.5, 89.6] (typical plan 45.6%) with a pilot of 200, 84.0% [80.5, 87.1] (29.0%) at rate 0.9 with a
    pilot of 80 and 87.4% [84.2, 90.2] (45.8%) with a pilot of 60, 288, 345 and 276 CPU s at load 5-12; docs/analyses.md, "Planning" (the Bayesian bootstrap planner
    before it: 78.8% [75.0, 82.3] in issue #28's setting)."""
    from benchcert.stats.ppi import _assured_n

    def draw(rng, n_items):
        human = (rng.random(n_items) < p_human).astype(float)
        return human, biased_judge(rng, human, p11, p10)

    rng = np.random.default_rng(3636)
    reps = 500
    hit_t, hit_a = np.zeros(reps, bool), np.zeros(reps, bool)
    extra = np.zeros(reps)
    for r in range(reps):
        human, judge = draw(rng, 4000)
        pilot = rng.choice(4000, pilot_n, replace=False)
        y, yh = human[pilot], judge[pilot]
        typ = plan_human_labels(y, yh, judge, epsilon=0.05)
        if r == 0:  # the study's n below is plan_human_labels' n_ppi (the human-only search, half the cost, skipped)
            state = rng.bit_generator.state
            n_public = plan_human_labels(y, yh, judge, epsilon=0.05, assurance=0.8, rng=rng).n_ppi
            rng.bit_generator.state = state
        n_sure = _assured_n(y, yh, judge, 0.05, 0.05, 0.8, int(rng.integers(2**62)), typ.n_ppi, human_only=False)
        if r == 0:
            assert n_sure == n_public, (n_sure, n_public)
        extra[r] = n_sure / typ.n_ppi - 1
        h, j = draw(rng, 4000)
        for n, hits in ((typ.n_ppi, hit_t), (n_sure, hit_a)):
            lab = rng.choice(4000, n, replace=False)
            hits[r] = ppi_mean(h[lab], j[lab], np.delete(j, lab)).half_width <= 0.05
        if (r + 1) % 50 == 0:
            print(r + 1, rate_ci(hit_a[:r + 1], r + 1, level=0.95), rate_ci(hit_t[:r + 1], r + 1, level=0.95),
                  f"{100 * extra[:r + 1].mean():.1f}% more labels", flush=True)
    sure, typical = rate_ci(hit_a, reps, level=0.95), rate_ci(hit_t, reps, level=0.95)
    print(f"{name}: assurance plan: {sure}; typical plan: {typical}; {100 * extra.mean():.1f}% more labels")
    assert sure[0] >= 0.8 and sure[1] >= 0.75, sure
    # and not by asking for every label: the measured 84.0-87.4% (upper bounds 87.1-90.2%) sit below 92%,
    # where a planner that asked every item (100%) would not
    assert sure[2] <= 0.92, sure
    assert typical[1] <= 0.6, typical
