"""Coverage of the superpopulation band of `certify` (no plan) and `audit --environments` when the
items of a domain cluster by subject.

Model (seeded): domain a has J_a subjects (2 to 8, unequal sizes 3 to 300 items); subject j has rate
p_j = expit(mu_a + sigma u_j), u_j ~ N(0, 1) (a subject random effect on the logit scale, sigma = 1:
items of a subject share its difficulty), and its items are independent Bernoulli(p_j) given p_j.
Two questions, two truths:

* same subjects: target sum_j (n_j / n_a) p_j, the subjects of this benchmark held fixed;
* new subjects: target E[expit(mu_a + sigma Z)] (Gauss-Hermite quadrature), a new subject's rate.

A run covers when every environment's band (the atoms themselves and two mixes) holds at once; the
claim is that this happens with probability >= 1 - delta, judged by the 95% Clopper-Pearson lower
bound of the simulated rate (400 runs: a true coverage of 0.87 at delta = 0.1 fails the check with
probability > 0.9). Boundary rates: mu = logit(0.003), logit(0.997), and domains at exactly 0 and 1.
The negative control shows that the band for independent items (the previous default) under-covers
the new-subjects target, so the checks above can fail.
"""

from __future__ import annotations

import zlib

import numpy as np
import polars as pl
import pytest
from scipy import stats
from scipy.special import expit, logit

from benchcert.stats.certify import stratified_means
from benchcert.stats.failure_rates import clopper_pearson
from benchcert.tasks.certify.service import certify_scores, parse_environments

from simcheck import rate_ci

SIZES = [np.array([8, 60]), np.array([5, 20, 150]), np.array([3, 10, 10, 40, 90]),
         np.array([4, 6, 12, 25, 30, 60, 120, 300])]
P = np.vstack([np.eye(4), [0.5, 0.5, 0.0, 0.0], [0.1, 0.2, 0.3, 0.4]])
MU = {"mid_rates": np.array([-1.0, 0.0, 0.5, 1.5]),
      "boundary_rates": np.array([logit(0.003), logit(0.997), -np.inf, np.inf])}
SIGMA = 1.0
DELTA = 0.1


def _new_subject_rate(mu):
    z, w = np.polynomial.hermite_e.hermegauss(80)
    return np.array([np.sum(w * expit(m + SIGMA * z)) / np.sqrt(2 * np.pi) for m in mu])


def _draw(rng, mu, fractional=False):
    """(samples, subject labels, same-subjects truth) of one benchmark."""
    samples, labels, truth = [], [], []
    for a, sizes in enumerate(SIZES):
        p = expit(mu[a] + SIGMA * rng.standard_normal(sizes.size))
        lab = np.repeat(np.arange(sizes.size), sizes)
        pi = p[lab]
        if fractional:   # scores in {0, 0.5, 1} with mean p_j
            x = 0.5 * (rng.random(lab.size) < pi) + 0.5 * (rng.random(lab.size) < pi)
        else:
            x = (rng.random(lab.size) < pi).astype(float)
        samples.append(x)
        labels.append(lab)
        truth.append(np.sum(sizes * p) / sizes.sum())
    return samples, labels, P @ np.array(truth)


def _coverage(setting, question, *, reps=400, seed=0, fractional=False, clusters=True):
    rng = np.random.default_rng(seed)
    mu = MU[setting]
    sizes = np.array([s.sum() for s in SIZES])
    new_truth = P @ _new_subject_rate(mu)
    hits = []
    for _ in range(reps):
        samples, labels, same_truth = _draw(rng, mu, fractional)
        b = stratified_means(samples, sizes, P, delta=DELTA, finite_population=False,
                             clusters=labels if clusters else None, new_clusters=clusters and question == "new")
        truth = new_truth if question == "new" else same_truth
        hits.append(bool(np.all((b.lower <= truth + 1e-12) & (truth <= b.upper + 1e-12))))
    return np.array(hits)


@pytest.mark.montecarlo
@pytest.mark.parametrize("setting", sorted(MU))
@pytest.mark.parametrize("question", ["same", "new"])
def test_clustered_band_covers_every_environment_at_once(setting, question):
    hits = _coverage(setting, question, seed=zlib.crc32(f"{setting}/{question}".encode()))
    rate, lo, _ = rate_ci(hits, hits.size, level=0.95)
    assert lo >= 1 - DELTA, (setting, question, rate)


@pytest.mark.montecarlo
@pytest.mark.parametrize("question", ["same", "new"])
def test_clustered_band_covers_with_fractional_scores(question):
    hits = _coverage("mid_rates", question, seed=7, fractional=True)
    rate, lo, _ = rate_ci(hits, hits.size, level=0.95)
    assert lo >= 1 - DELTA, (question, rate)


@pytest.mark.montecarlo
def test_independent_items_band_misses_new_subjects():
    # Negative control: the band that treats items as independent (the previous default, which
    # claimed the domain's task distribution) covers the new-subjects target far less often than
    # 1 - delta: clustering matters, and the harness above can fail.
    hits = _coverage("mid_rates", "new", reps=200, seed=3, clusters=False)
    rate, _, hi = rate_ci(hits, hits.size, level=0.95)
    assert hi < 1 - DELTA - 0.2, rate


def test_new_subjects_band_uses_the_effective_number_of_subjects():
    # One subject: little is known about new subjects (nearly [0, 1]); equal subjects of one item
    # each: Hoeffding's relative-entropy bound on 4 variables, inside the additive one.
    x = np.array([1.0, 1.0, 0.0, 1.0])
    b = stratified_means([x], [4], np.eye(1), delta=0.1, finite_population=False, clusters=[np.zeros(4)],
                         new_clusters=True)
    assert b.lower[0] < 0.01 and b.upper[0] > 0.99 and b.details["atom_methods"] == ["cluster_kl_hoeffding"]
    assert b.details["atom_effective_subjects"] == [1.0] and b.details["question"] == "new_subjects"
    b = stratified_means([x], [4], np.eye(1), delta=0.1, finite_population=False, clusters=[np.arange(4)],
                         new_clusters=True)
    assert b.half_width[0] < np.sqrt(np.log(2 / 0.1) / 8)
    for end in (b.lower[0], b.upper[0]):   # each end solves J kl(0.75 || end) = log(2 / delta)
        assert 4 * stats.entropy([0.75, 0.25], [end, 1 - end]) == pytest.approx(np.log(2 / 0.1))
    # Every subject weighs the same whatever its size: subjects of 3 and 1 items with means 2/3
    # and 0 give 1/3 (item-weighted: 1/2), J = 2; the atom's mean is that estimate.
    b = stratified_means([np.array([1.0, 1.0, 0.0, 0.0])], [4], np.array([[1.0]]), delta=0.5,
                         finite_population=False, clusters=[np.array([0, 0, 0, 1])], new_clusters=True)
    assert b.estimate[0] == pytest.approx(1 / 3) and b.details["atom_mean"] == [pytest.approx(1 / 3)]
    assert b.details["atom_effective_subjects"] == [2.0]
    assert b.half_width[0] < np.sqrt(np.log(2 / 0.5) / 4)
    with pytest.raises(ValueError, match="new_clusters=True needs clusters"):
        stratified_means([x], [4], np.eye(1), delta=0.1, finite_population=False, new_clusters=True)
    with pytest.raises(ValueError, match="clusters\\[0\\] must label"):
        stratified_means([x], [4], np.eye(1), delta=0.1, finite_population=False, clusters=[np.zeros(3)])


def _poisson_binomial(p):
    d = np.array([1.0])
    for q in p:
        d = np.convolve(d, [1 - q, q])
    return d


def _exact_miss(p, alpha, unequal_rates):
    """Exact probabilities that the bounds miss the mean rate below and above (Poisson-binomial law)."""
    n, pbar, d = len(p), float(np.mean(p)), _poisson_binomial(p)
    below = above = 0.0
    for k in range(n + 1):
        lo, hi = clopper_pearson(k, n, alpha=alpha, unequal_rates=unequal_rates)
        below += d[k] * (pbar < lo)
        above += d[k] * (pbar > hi)
    return below, above


def test_unequal_rates_clopper_pearson_is_exact_for_unequal_rates():
    """Items of one domain with different rates (its subjects'): the count is Poisson-binomial. The
    bounds [min(L, (k-1)/n), max(U, (k+1)/n)] (Hoeffding 1956, Theorem 4; proof in clopper_pearson's
    Notes) miss each side with probability <= alpha/2, computed exactly here over rate vectors with
    boundary rates (0 and 1), the adversarial (1, ..., 1, 1 - x) and its mirror, and random ones; the
    plain exact bounds can exceed alpha/2 (p = (1, ..., 1, 1 - x), x just above alpha/2)."""
    rng = np.random.default_rng(56)
    worst = 0.0
    for alpha in (0.01, 0.05, 0.2):
        cases = [np.r_[np.ones(n - 1), 1 - x] for n in (2, 10, 40) for x in (alpha / 2 + 1e-4, 0.1, 0.6)]
        cases += [rng.beta(a, b, size=n) for n in (1, 3, 12, 60) for a, b in ((0.3, 0.3), (5, 1), (1, 8), (0.1, 5))]
        cases += [np.where(rng.random(n) < 0.7, 1.0, rng.random(n)) for n in (5, 25)]
        cases += [np.r_[np.zeros(n - 3), 1.0, 1.0, 0.5] for n in (4, 30)] + [np.full(20, 0.3)]
        for p in cases + [1 - c for c in cases]:
            below, above = _exact_miss(p, alpha, True)
            assert below <= alpha / 2 + 1e-12 and above <= alpha / 2 + 1e-12, (alpha, p)
            worst = max(worst, below / (alpha / 2), above / (alpha / 2))
    assert worst > 0.5       # the check is not vacuous: some case comes within a factor 2 of alpha / 2
    below, above = _exact_miss(np.r_[np.ones(9), 1 - 0.02501], 0.05, False)
    assert above > 0.05 / 2                                          # why the plain bounds need widening


def test_unequal_rates_bounds_are_the_exact_ones_except_one_count_from_each_end():
    # The max/min form replaces the one-count shift (L(k - 1), U(k + 1)) the band used before: never
    # wider than it, and equal to the exact bounds except at k = 1 (lower 0) and k = n - 1 (upper 1)
    # for tails <= 0.2, so it does not cost a count everywhere.
    for n in (1, 2, 7, 50, 400):
        for alpha in (0.01, 0.05, 0.2):
            for k in range(n + 1):
                lo, hi = clopper_pearson(k, n, alpha=alpha, unequal_rates=True)
                plain = clopper_pearson(k, n, alpha=alpha)
                shifted = (clopper_pearson(max(k - 1, 0), n, alpha=alpha)[0] if k > 0 else 0.0,
                           clopper_pearson(min(k + 1, n), n, alpha=alpha)[1])
                assert shifted[0] <= lo <= plain[0] and plain[1] <= hi <= shifted[1], (n, alpha, k)
                assert lo == (0.0 if k == 1 else plain[0]) and hi == (1.0 if k == n - 1 else plain[1]), (n, alpha, k)
    with pytest.raises(ValueError, match="unequal_rates must be"):
        clopper_pearson(1, 4, alpha=0.05, unequal_rates=1)


@pytest.mark.montecarlo
def test_certify_without_a_plan_names_its_question_and_reports_new_subjects():
    # certify_scores (no plan) at domain level on a simulated clustered benchmark: the rows name the
    # question, carry the new-subjects band, and that band covers the new-subject truth.
    rng = np.random.default_rng(11)
    mu = MU["mid_rates"]
    domains = ["d0", "d1", "d2", "d3"]
    item_rows = [(f"q{a}_{i}", f"s{a}_{j}", domains[a]) for a, sizes in enumerate(SIZES)
                 for j, n in enumerate(sizes) for i in range(int(n))]
    items = pl.DataFrame(item_rows, schema=["item_id", "subject", "domain"], orient="row")
    items = items.with_columns(pl.Series("item_id", [f"i{r}" for r in range(items.height)]))
    spec = parse_environments({"environments": {f"e{i}": {"weights": dict(zip(domains, row.tolist()))}
                                                for i, row in enumerate(P)}}, "e.toml")
    new_truth = P @ _new_subject_rate(mu)
    hits = []
    reps = 150
    for _ in range(reps):
        samples, _, same = _draw(rng, mu)
        scores = np.concatenate(samples)[:, None]
        rows, failure, notes = certify_scores(spec, items, ["m"], scores, delta=DELTA)
        lo = np.array([r["lower_new_subjects"] for r in rows])
        hi = np.array([r["upper_new_subjects"] for r in rows])
        hits.append(bool(np.all((lo <= new_truth + 1e-12) & (new_truth <= hi + 1e-12))))
    assert {r["question"] for r in rows} == {"same_subjects"} and not notes
    assert all("new items from the same subjects" in r["note"] for r in rows)
    assert all(r["lower_new_subjects"] <= r["score_new_subjects"] <= r["upper_new_subjects"] for r in rows)
    rate, lo, _ = rate_ci(np.array(hits), reps, level=0.95)
    assert lo >= 1 - DELTA, rate
