"""Repeated samples per item (stats/replicates.py): the within-item component's interval covers in
a seeded two-level simulation, the components recover simulated values, pass@k equals its
combinatorial definition, and plan_samples picks the K an exhaustive search finds best."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from benchcert.stats.replicates import pass_at_k, plan_samples, plan_variance, variance_components
from simcheck import rate_ci


def _two_level(rng, n_items, k, n_subjects=1, sd_subject=0.0, varying_k=False):
    """0/1 samples: item i's success probability logistic(u_s + v_i), v_i ~ N(0, 1.2^2)."""
    subjects = np.arange(n_items) % n_subjects
    u = rng.normal(0, sd_subject, n_subjects)
    p = 1 / (1 + np.exp(-(u[subjects] + rng.normal(0, 1.2, n_items))))
    n = rng.integers(2, 2 * k, n_items) if varying_k else np.full(n_items, k)
    c = rng.binomial(n, p)
    within_true = float(np.mean(p * (1 - p)))  # E over these items of the Bernoulli variance
    return n, c, subjects, p, within_true


@pytest.mark.montecarlo
@pytest.mark.parametrize("k,varying", [(5, False), (2, False), (4, True)], ids=["k5", "k2", "k-varying"])
def test_within_item_component_interval_covers(k, varying):
    rng = np.random.default_rng(38 + k)
    runs, hits = 1000, 0
    # the estimand: the within-item variance averaged over the item population (the mean of
    # p(1-p) over many items), approximated once with a large draw of the same model
    big = 1 / (1 + np.exp(-rng.normal(0, 1.2, 2_000_000)))
    truth = float(np.mean(big * (1 - big)))
    for _ in range(runs):
        n, c, subjects, _, _ = _two_level(rng, 200, k, varying_k=varying)
        vc = variance_components(n, c, c, subjects, alpha=0.05, n_boot=0, rng=rng)
        hits += int(vc.within_lower <= truth <= vc.within_upper)
    rate, low, high = rate_ci(hits, runs)
    # the claim is coverage >= 93% (nominal 95%; the t interval of a skewed mean runs a point under):
    # the coverage's 99% interval must reach 0.93 and stay above 0.905; 2,000 runs measured 0.943, 0.950
    # and 0.945 at K = 5 and 200 items, K = 2 and 200, K = 5 and 1,000 (benchmarks/items_study.py samples)
    assert high >= 0.93 and low >= 0.905, (rate, low, high)


def test_components_recover_simulated_values():
    rng = np.random.default_rng(5)
    n_items, n_sub = 6000, 60
    subjects = np.arange(n_items) % n_sub
    mu = 0.5 + rng.normal(0, 0.05, n_sub)[subjects] + rng.normal(0, 0.08, n_items)
    K = 6
    y = mu[:, None] + rng.normal(0, 0.1, (n_items, K))
    y = np.clip(y, 0, 1)  # scores in [0, 1] (clipped in about 1 of 3,000 at these values)
    n = np.full(n_items, K)
    vc = variance_components(n, y.sum(1), (y * y).sum(1), subjects, alpha=0.05, n_boot=100,
                             rng=np.random.default_rng(0))
    assert vc.within == pytest.approx(0.01, rel=0.05)
    assert vc.between_items == pytest.approx(0.0064, rel=0.1)
    assert vc.between_subjects == pytest.approx(0.0025, rel=0.5)
    assert vc.between_items_lower <= vc.between_items <= vc.between_items_upper
    assert vc.between_subjects_lower <= vc.between_subjects <= vc.between_subjects_upper


def test_pass_at_k_is_the_combinatorial_definition():
    # 5 samples of which 2 right: pass@2 = share of 2-subsets with a right one = 1 - C(3,2)/C(5,2) = 0.7
    r = pass_at_k(np.array([5, 5, 3]), np.array([2, 0, 3]), k=2)
    per = []
    for n, c in ((5, 2), (5, 0), (3, 3)):
        draws = list(itertools.combinations([1] * c + [0] * (n - c), 2))
        per.append(np.mean([max(d) for d in draws]))
    assert r.pass_at_k == pytest.approx(np.mean(per))
    assert r.mean_at_k == pytest.approx(np.mean([2 / 5, 0, 1]))
    assert pass_at_k(np.array([4, 4]), np.array([1, 3]), k=1).pass_at_k == pytest.approx(0.5)
    assert pass_at_k(np.array([1, 4]), np.array([1, 3]), k=2).n_items == 1


def _exhaustive(between, within, budget, N, c1, c2, these):
    best = (math.inf, None)
    for k in range(1, int((budget - c1) // c2) + 1):
        n = min(N, int(budget // (c1 + k * c2)))
        if n < 1:
            continue
        f = (N - n) / (N - 1) if these and N > 1 else 1.0
        v = between * f / n + within / (n * k)
        if v < best[0] - 1e-15:
            best = (v, k)
    return best


@pytest.mark.parametrize("seed", range(40))
def test_plan_samples_picks_the_exhaustive_best(seed):
    rng = np.random.default_rng(seed)
    between, within = float(rng.uniform(0, 0.1)), float(rng.uniform(0.001, 0.25))
    N = int(rng.integers(20, 3000))
    c1, c2 = float(rng.choice([0.0, rng.uniform(0, 20)])), float(rng.uniform(0.5, 3))
    budget = float(rng.uniform(c1 + c2, 20 * N * (c1 + c2)))
    these = bool(seed % 2)
    plan = plan_samples(between, within, budget=budget, n_items=N, cost_item=c1, cost_sample=c2, these_items=these)
    v_best, _ = _exhaustive(between, within, budget, N, c1, c2, these)
    assert plan.variance == pytest.approx(v_best, rel=1e-12, abs=1e-18)
    assert plan.cost <= budget + 1e-9
    assert float(plan_variance(plan.k, plan.n, between, within, N if these else None)) == pytest.approx(plan.variance)


def test_plan_samples_uses_every_item_before_repeating_without_item_cost():
    p = plan_samples(0.03, 0.2, budget=500, n_items=1000)
    assert (p.k, p.n) == (1, 500)
    p = plan_samples(0.03, 0.2, budget=5000, n_items=1000)
    assert (p.k, p.n) == (5, 1000)


def test_validation_names_the_parameter():
    with pytest.raises(ValueError, match="within"):
        plan_samples(0.1, -1.0, budget=10, n_items=5)
    with pytest.raises(ValueError, match="buys no sample"):
        plan_samples(0.1, 0.1, budget=1, n_items=5, cost_item=2)
    with pytest.raises(ValueError, match="s2"):
        variance_components([2], [1], [2], rng=np.random.default_rng(0))
