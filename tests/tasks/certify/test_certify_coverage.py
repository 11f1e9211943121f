"""Seeded coverage of the three certification protocols on MMLU-Pro's 14 domains.

The population is real: one model's per-item correctness on the bundled MMLU-Pro items
(data/mmlu_pro, 12,032 items), a different model in every run, so the truth of every
environment (its mean over the benchmark's items) is known. A run covers when *every*
environment's bound holds at once; the claim is that this happens with probability >= 1 - delta,
judged by the 95% Clopper-Pearson lower bound of the simulated rate (certifying-capabilities
paper, Theorem 3.4 and Remark 3.2; the stratified design of stats/certify.py). The environments
are the shipped data/mmlu_pro/environments.toml (5 environments and a 3-domain simplex family),
and a simplex over all 14 domains.
"""

from __future__ import annotations

import zlib

import numpy as np
import polars as pl
import pytest

from benchcert.stats.certify import (draw_from_atoms, draw_stratified, importance_mom, per_environment_budget,
                                     per_environment_means, stratified_budget, stratified_means, theorem_3_4_budget)
from benchcert.stats.environments import chi2_radius
from benchcert.tasks.certify.service import parse_environments, read_environments, resolve

from conftest import DATA
from simcheck import rate_ci

ENVS = DATA / "mmlu_pro" / "environments.toml"


def _mmlu_pro_by(column: str):
    """(names of ``column``'s groups, each item's group code, correctness items x models) of
    MMLU-Pro, items by question id, the models that answered every item."""
    long = pl.read_csv(DATA / "mmlu_pro" / "mmlu_pro_item_correctness_long.csv.gz",
                       columns=["model", "question_id", column, "correct"])
    wide = long.pivot(on="model", index=["question_id", column], values="correct").sort("question_id")
    names = sorted(wide[column].unique().to_list())
    codes = np.array([names.index(c) for c in wide[column].to_list()], dtype=np.int64)
    X = wide.drop("question_id", column).to_numpy().astype(float)
    return names, codes, X[:, ~np.isnan(X).any(axis=0)]


@pytest.fixture(scope="module")
def population():
    """(domains, item domain codes, correctness matrix items x models) of MMLU-Pro."""
    return _mmlu_pro_by("category")


def _truth(P, codes, x):
    means = np.array([x[codes == a].mean() for a in range(P.shape[1])])
    return P @ means


def _mixes(P, is_vertex, rng, k=20):
    """Random mixes of the family's vertices, to check that vertex bounds carry to every mix."""
    V = np.flatnonzero(is_vertex)
    return rng.dirichlet(np.full(V.size, 0.5), size=k), V


def _run_coverage(protocol, P, is_vertex, codes, X, *, epsilon, delta, reps, seed, weighted=True):
    rng = np.random.default_rng(seed)
    m, K = P.shape
    sizes = np.bincount(codes, minlength=K)
    r = chi2_radius(P)
    hits = []
    for rep in range(reps):
        x = X[:, rep % X.shape[1]]
        truth = _truth(P, codes, x)
        if protocol == "theorem_3_4":
            b = theorem_3_4_budget(r.value, m, epsilon, delta=delta)
            idx = draw_from_atoms(codes, r.proposal, b.n, rng=rng)
            if weighted:
                res = importance_mom(x[idx], codes[idx], P, r.proposal, blocks=b.allocation["blocks"], delta=delta)
            else:  # negative control: the draws' plain median of means, no importance weights
                res = importance_mom(x[idx], codes[idx], np.tile(r.proposal, (m, 1)), r.proposal,
                                     blocks=b.allocation["blocks"], delta=delta)
        elif protocol == "per_environment":
            b = per_environment_budget(m, epsilon, delta=delta)
            n_i = b.allocation["per_environment"]
            res = per_environment_means([x[draw_from_atoms(codes, row, n_i, rng=rng)] for row in P], delta=delta)
        else:
            used = P.max(axis=0) > 0
            b = stratified_budget(sizes[used], epsilon, delta=delta)
            alloc = np.zeros(K, dtype=np.int64)
            alloc[used] = b.allocation["per_atom"]
            idx = draw_stratified(codes, alloc, rng=rng)
            res = stratified_means([x[idx][codes[idx] == a] for a in range(K)], sizes, P, delta=delta)
        ok = np.all((res.lower <= truth + 1e-12) & (truth <= res.upper + 1e-12))
        if is_vertex.any():
            th, V = _mixes(P, is_vertex, rng)
            t_mix = th @ truth[V]
            ok &= np.all((th @ res.lower[V] <= t_mix + 1e-12) & (t_mix <= th @ res.upper[V] + 1e-12))
        hits.append(bool(ok))
    return np.array(hits)


@pytest.mark.montecarlo
@pytest.mark.parametrize("protocol,epsilon", [("theorem_3_4", 0.25), ("per_environment", 0.1), ("stratified", 0.1)])
def test_every_environment_is_covered_at_once_five_environments_and_a_simplex(population, protocol, epsilon):
    domains, codes, X = population
    assert len(domains) == 14
    spec = read_environments(ENVS)
    names, P, is_vertex = resolve(spec, domains)
    assert len(spec.environments) == 5 and is_vertex.sum() == 3
    delta = 0.1
    hits = _run_coverage(protocol, P, is_vertex, codes, X, epsilon=epsilon, delta=delta, reps=200, seed=16)
    rate, lo, _ = rate_ci(hits, hits.size, level=0.95)
    assert lo >= 1 - delta, (protocol, rate)


@pytest.mark.montecarlo
@pytest.mark.parametrize("protocol,epsilon", [("theorem_3_4", 0.3), ("per_environment", 0.15), ("stratified", 0.1)])
def test_simplex_over_all_fourteen_domains(population, protocol, epsilon):
    domains, codes, X = population
    spec = parse_environments({"family": {"name": "any_mix", "simplex": domains}}, "<all 14>")
    names, P, is_vertex = resolve(spec, domains)
    assert chi2_radius(P).value == pytest.approx(13, rel=1e-6)   # 14 disjoint vertices: V = m - 1
    delta = 0.1
    hits = _run_coverage(protocol, P, is_vertex, codes, X, epsilon=epsilon, delta=delta, reps=120, seed=1416)
    _, lo, _ = rate_ci(hits, hits.size, level=0.95)
    assert lo >= 1 - delta


def test_the_harness_catches_a_biased_estimator(population):
    # Negative control: dropping the importance weights estimates every environment by q's mean;
    # coverage collapses, so the tests above could fail.
    domains, codes, X = population
    names, P, is_vertex = resolve(read_environments(ENVS), domains)
    hits = _run_coverage("theorem_3_4", P, is_vertex, codes, X, epsilon=0.25, delta=0.1, reps=30, seed=3,
                         weighted=False)
    assert hits.mean() < 0.5


@pytest.mark.slow
@pytest.mark.parametrize("protocol,epsilon", [("theorem_3_4", 0.1), ("per_environment", 0.05), ("stratified", 0.05)])
def test_coverage_study_full_scale(population, protocol, epsilon):
    domains, codes, X = population
    names, P, is_vertex = resolve(read_environments(ENVS), domains)
    for delta in (0.05, 0.2):
        hits = _run_coverage(protocol, P, is_vertex, codes, X, epsilon=epsilon, delta=delta, reps=1000, seed=99)
        _, lo, _ = rate_ci(hits, hits.size, level=0.95)
        assert lo >= 1 - delta


@pytest.mark.montecarlo
@pytest.mark.parametrize("setting", ["mmlu_sizes", "few_items", "boundary_rates", "fractional"])
def test_superpopulation_band_of_the_full_benchmark_covers(population, setting):
    # The band `certify` (no plan) and `audit --environments` report: each domain's items are an
    # i.i.d. sample of the domain's task distribution with true rate p_a; every environment's
    # band must cover sum_a w_a p_a, all at once, w.p. >= 1 - delta.
    domains, codes, X = population
    names, P, is_vertex = resolve(read_environments(ENVS), domains)
    K = len(domains)
    rng = np.random.default_rng(zlib.crc32(setting.encode()))   # str hash() is salted per process
    sizes = np.bincount(codes, minlength=K)
    p = np.array([X[codes == a, 0].mean() for a in range(K)])
    if setting == "few_items":
        sizes = rng.integers(3, 12, size=K)
    elif setting == "boundary_rates":
        p = rng.choice([0.0, 0.01, 0.99, 1.0], size=K)
        sizes = rng.integers(20, 80, size=K)
    delta, reps = 0.1, 300
    truth = P @ p
    hits = []
    for _ in range(reps):
        if setting == "fractional":  # scores in {0, .5, 1} with mean p_a
            samples = [(rng.random(n) < p[a]) * 0.5 + (rng.random(n) < p[a]) * 0.5 for a, n in enumerate(sizes)]
        else:
            samples = [(rng.random(n) < p[a]).astype(float) for a, n in enumerate(sizes)]
        b = stratified_means(samples, sizes, P, delta=delta, finite_population=False)
        hits.append(bool(np.all((b.lower <= truth + 1e-12) & (truth <= b.upper + 1e-12))))
    _, lo, _ = rate_ci(np.array(hits), reps, level=0.95)
    assert lo >= 1 - delta


@pytest.fixture(scope="module")
def subject_population():
    """MMLU-Pro at the subject level (91 subjects of 1 to 1,000+ items) with fractional scores
    (the mean of two models' correctness, in {0, 0.5, 1})."""
    subjects, codes, X = _mmlu_pro_by("src")
    return subjects, codes, 0.5 * (X[:, :-1] + X[:, 1:])


@pytest.mark.montecarlo
@pytest.mark.parametrize("protocol,epsilon", [("theorem_3_4", 0.3), ("per_environment", 0.1), ("stratified", 0.1)])
def test_subject_level_unequal_sizes_fractional_scores(subject_population, protocol, epsilon):
    subjects, codes, X = subject_population
    sizes = np.bincount(codes, minlength=len(subjects))
    rng = np.random.default_rng(91)
    small = np.flatnonzero(sizes < 60)           # include the smallest subjects (whole-subject evaluation)
    P = np.zeros((5, len(subjects)))
    for i in range(5):
        pick = np.concatenate([rng.choice(small, 1), rng.choice(len(subjects), 3, replace=False)])
        P[i, pick] += rng.dirichlet(np.ones(4))
    P /= P.sum(axis=1, keepdims=True)
    delta = 0.1
    hits = _run_coverage(protocol, P, np.zeros(5, dtype=bool), codes, X, epsilon=epsilon, delta=delta, reps=150,
                         seed=7)
    _, lo, _ = rate_ci(hits, hits.size, level=0.95)
    assert lo >= 1 - delta
