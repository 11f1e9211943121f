"""Coverage of the failure-rate upper bounds (`certify`'s failure_rate_upper, the audit's table
failure_rate_bounds) when the items cluster by subject.

Model (seeded): 4 domains with 2 to 4 subjects each of unequal sizes (2 to 200 items, 522 in all);
subject j fails each of its items with probability q_j = expit(mu_a + sigma u_j), u_j ~ N(0, 1)
(a subject random effect on the logit scale, sigma = 1), independently given q_j. Failure rates
near 0 (the usual regime of a failure bound): median subject rates 0.2% to 3%, and a boundary
setting with a domain that never fails and rates down to 0.05%; plus middle rates. Two questions,
two truths:

* same subjects: target sum_j (n_j / n) q_j, the benchmark's subjects held fixed;
* new subjects: a new subject's expected failure rate, each subject weighing the same:
  sum_a (J_a / J) E[expit(mu_a + sigma Z)] (Gauss-Hermite quadrature; J_a subjects in domain a).
  (Sizes unrelated to rates here; tests/stats/test_certify_new_subjects.py has sizes that track rates.)

A bound covers when it is >= its target; the claim is coverage >= 1 - alpha, judged by the 95%
Clopper-Pearson lower bound of the simulated rate over 2000 runs (a true coverage of 0.87 at
alpha = 0.1 fails the check with probability > 0.99; the measured coverages are in docs/analyses.md).
Measured (95% CI of the simulated rate in brackets): the same-subjects bound covers in 93.2% [91.9,
94.2] (rare), 94.7% [93.6, 95.6] (boundary), 93.5% [92.3, 94.5] (mid); the new-subjects bound in
100% [99.8, 100] everywhere (Hoeffding is conservative with 12 subjects; the same with its
additive form and with the earlier item-weighted bound and target). The bound for independent items covers the same-subjects target in 92-95% but
the (subject-weighted) new-subjects target in only 79.6% [77.8, 81.3], 80.2% [78.4, 81.9] and
53.0% [50.8, 55.3] (61-70% against the earlier item-weighted target); hence the second bound.

The same-subjects bound for independent items can also miss with probability above alpha when
rates are unequal; random effects do not reach that case, so it is shown by exact
(Poisson-binomial) computation below.
"""

from __future__ import annotations

import zlib

import numpy as np
import polars as pl
import pytest
from scipy import optimize, stats
from scipy.special import expit, logit

from benchcert.stats.certify import stratified_means
from benchcert.stats.failure_rates import failure_rate_upper, failure_rate_upper_new_subjects
from benchcert.tasks.certify.service import certify_scores, parse_environments

from simcheck import rate_ci

SIZES = [np.array([6, 40]), np.array([3, 12, 120]), np.array([5, 9, 30, 200]), np.array([2, 15, 80])]
MU = {"rare": logit(np.array([0.002, 0.01, 0.03, 0.005])),
      "boundary": np.array([logit(0.001), -np.inf, logit(0.02), logit(0.0005)]),
      "mid": logit(np.array([0.05, 0.2, 0.1, 0.4]))}
SIGMA = 1.0
ALPHA = 0.1
REPS = 2000
N_A = np.array([s.sum() for s in SIZES])
J_A = np.array([s.size for s in SIZES])
N = int(N_A.sum())
LABELS = np.concatenate([np.repeat(np.arange(s.size) + 10 * a, s) for a, s in enumerate(SIZES)])


def _new_subject_rate(mu):
    z, w = np.polynomial.hermite_e.hermegauss(80)
    return np.array([np.sum(w * expit(m + SIGMA * z)) / np.sqrt(2 * np.pi) for m in mu])


def _draw(rng, mu):
    """(item failure indicators, per-item subject failure rate) of one benchmark."""
    q = np.concatenate([np.repeat(expit(mu[a] + SIGMA * rng.standard_normal(s.size)), s) for a, s in enumerate(SIZES)])
    return rng.random(N) < q, q


def _coverage(setting, bound, question):
    rng = np.random.default_rng(zlib.crc32(f"{setting}/{bound}/{question}".encode()))
    mu = MU[setting]
    new_truth = float(np.sum(J_A * _new_subject_rate(mu)) / J_A.sum())
    table = np.array([failure_rate_upper(k, N, alpha=ALPHA, unequal_rates=bound == "same_subjects").upper
                      for k in range(N + 1)])   # n is fixed: one bound per failure count
    hits = []
    for _ in range(REPS):
        failed, q = _draw(rng, mu)
        if bound == "new_subjects":
            u = failure_rate_upper_new_subjects(failed, LABELS, alpha=ALPHA).upper
        else:
            u = table[int(failed.sum())]
        truth = new_truth if question == "new" else float(q.mean())
        hits.append(u >= truth - 1e-12)
    return np.array(hits)


@pytest.mark.montecarlo
@pytest.mark.parametrize("setting", sorted(MU))
@pytest.mark.parametrize("bound, question", [("same_subjects", "same"), ("new_subjects", "new")])
def test_failure_bound_covers_its_question_with_clustered_items(setting, bound, question):
    hits = _coverage(setting, bound, question)
    rate, lo, _ = rate_ci(hits, hits.size, level=0.95)
    assert lo >= 1 - ALPHA, (setting, bound, question, rate)


@pytest.mark.montecarlo
@pytest.mark.parametrize("setting", ["rare", "boundary"])
def test_independent_items_bound_misses_new_subjects(setting):
    # Negative control: the bound for independent items (the previous one, which claimed the task
    # distribution) covers a new subject's failure rate far less often than 1 - alpha; clustering
    # matters, and the check above can fail.
    hits = _coverage(setting, "independent_items", "new")
    rate, _, hi = rate_ci(hits, hits.size, level=0.95)
    assert hi < 1 - ALPHA - 0.05, (setting, rate)


def _poisson_binomial(p):
    d = np.array([1.0])
    for q in p:
        d = np.convolve(d, [1 - q, q])
    return d


def _exact_miss(dist, pbar, alpha, unequal_rates):
    """Exact probability that the bound is below the mean rate pbar, the count having law ``dist``."""
    n = dist.size - 1
    u = np.array([failure_rate_upper(k, n, alpha=alpha, unequal_rates=unequal_rates).upper for k in range(n + 1)])
    return float(dist[u < pbar].sum())


def test_unequal_rates_bound_is_exact_for_every_rate_vector():
    """Items failing with different probabilities: the count is Poisson-binomial. u* = max(u, (k+1)/n)
    misses with probability <= alpha (Hoeffding 1956, Theorem 4), computed exactly; the binomial
    bound u can exceed alpha (failure probabilities (1, ..., 1, 1 - x), alpha < x < n(1 - (1 - alpha)^(1/n)))."""
    rng = np.random.default_rng(1956)
    cases = [np.r_[np.ones(n - 1), 1 - x] for n in (2, 10, 40) for x in (0.0501, 0.1, 0.6)]
    cases += [rng.beta(a, b, size=n) for n in (3, 12, 60) for a, b in ((0.3, 0.3), (5, 1), (1, 8), (0.2, 20))]
    cases += [np.where(rng.random(n) < 0.7, 1.0, rng.random(n)) for n in (5, 25)]
    for alpha in (0.01, 0.05, 0.2):
        for p in cases + [1 - c for c in cases]:
            miss = _exact_miss(_poisson_binomial(p), float(np.mean(p)), alpha, True)
            assert miss <= alpha + 1e-12, (alpha, p)
    p = np.r_[np.ones(9), 1 - 0.0501]
    assert _exact_miss(_poisson_binomial(p), p.mean(), 0.05, False) == pytest.approx(0.0501)   # why u* is needed
    # u* differs from u only at k = n - 1 here (and k = n, where both are 1): zero failures still give 3/n.
    for n in (6, 100, 1000):
        u = np.array([failure_rate_upper(k, n).upper for k in range(n + 1)])
        us = np.array([failure_rate_upper(k, n, unequal_rates=True).upper for k in range(n + 1)])
        assert np.flatnonzero(us != u).tolist() == [n - 1] and us[n - 1] == 1.0


def test_unequal_rates_bound_holds_for_a_stratified_sample_without_replacement():
    # A stratified plan's failure count is a sum of independent hypergeometric counts; each is
    # Poisson-binomial (Vatutin & Mikhailov 1982), so u* holds for the allocation-weighted failure
    # rate of the atoms. Exact check over the laws of small designs.
    alpha = 0.05
    for atoms in ([(40, 3, 10), (15, 15, 5)], [(200, 1, 30), (60, 20, 12), (8, 0, 8)], [(30, 29, 10), (12, 12, 3)]):
        dist, pbar, n = np.array([1.0]), 0.0, 0
        for size, failing, drawn in atoms:
            dist = np.convolve(dist, stats.hypergeom.pmf(np.arange(drawn + 1), size, failing, drawn))
            pbar += drawn * failing / size
            n += drawn
        assert _exact_miss(dist, pbar / n, alpha, True) <= alpha + 1e-12, atoms


def _kl_upper_oracle(est, J, alpha):
    """The root m > est of J kl(est || m) = log(1 / alpha), by scipy's brentq on scipy's entropy."""
    return optimize.brentq(lambda m: J * stats.entropy([est, 1 - est], [m, 1 - m]) - np.log(1 / alpha), est,
                           1 - 1e-15, xtol=1e-14)


def test_new_subjects_bound_uses_the_effective_number_of_subjects():
    failed = np.array([0, 0, 1, 0])
    b = failure_rate_upper_new_subjects(failed, np.zeros(4), alpha=0.05)   # one subject: little known
    assert b.upper == pytest.approx(_kl_upper_oracle(0.25, 1, 0.05), abs=1e-12) and b.upper > 0.99
    assert b.effective_subjects == 1.0 and b.question == "new_subjects"
    b = failure_rate_upper_new_subjects(failed, np.arange(4), alpha=0.05)  # one item per subject
    assert b.upper == pytest.approx(_kl_upper_oracle(0.25, 4, 0.05), abs=1e-12) and b.effective_subjects == 4.0
    assert b.upper < 0.25 + np.sqrt(np.log(1 / 0.05) / 8)                  # inside the additive form (Pinsker)
    # Every subject weighs the same whatever its size: 10 one-item subjects that fail and 10 of
    # 19 items with one failure each: subject-weighted rate (10 + 10/19)/20 = 0.526 (item-weighted
    # 20/200 = 0.1), J = 20, upper: the root of 20 kl(0.526 || m) = log(20).
    sizes = np.r_[np.ones(10, dtype=int), np.full(10, 19)]
    subjects = np.repeat(np.arange(20), sizes)
    failed = np.r_[np.ones(10), np.tile(np.r_[1, np.zeros(18)], 10)]
    b = failure_rate_upper_new_subjects(failed, subjects, alpha=0.05)
    assert b.estimate == pytest.approx((10 + 10 / 19) / 20) and b.effective_subjects == 20.0
    assert b.upper == pytest.approx(_kl_upper_oracle((10 + 10 / 19) / 20, 20, 0.05), abs=1e-12)
    assert b.method == "cluster_kl_hoeffding_one_sided"
    # no failure: the closed form 1 - alpha^(1/J)
    assert failure_rate_upper_new_subjects(np.zeros(200), subjects, alpha=0.05).upper == pytest.approx(1 - 0.05 ** (1 / 20))
    assert (b.failures, b.n) == (20, 200)
    with pytest.raises(ValueError, match="subjects must label"):
        failure_rate_upper_new_subjects(failed, np.zeros(3))
    with pytest.raises(ValueError, match="failed must be"):
        failure_rate_upper_new_subjects(np.array([0.5, 1.0]), np.zeros(2))
    with pytest.raises(ValueError, match="unequal_rates must be"):
        failure_rate_upper(1, 4, unequal_rates="yes")


def _clustered_items():
    """The simulated benchmark's items: subject s{a}_{j} of domain d{a} with SIZES[a][j] items."""
    domains = ["d0", "d1", "d2", "d3"]
    rows = [(f"s{a}_{j}", domains[a]) for a, sizes in enumerate(SIZES) for j, n in enumerate(sizes)
            for _ in range(int(n))]
    items = pl.DataFrame(rows, schema=["subject", "domain"], orient="row").with_columns(
        pl.Series("item_id", [f"i{r}" for r in range(N)]))
    return domains, items


def test_certify_failure_bounds_name_their_questions_like_the_band():
    # certify_scores (no plan) on a simulated clustered benchmark: the failure bound answers the
    # same two questions as the band, names them, and for binary scores neither contradicts the
    # band of the environment that is the benchmark itself: weights = the domains' item shares for
    # the item-weighted same-subjects question, their subject shares for the subject-weighted
    # new-subjects one. Each failure bound is >= that environment's estimated risk, which lies in
    # the band's risk interval.
    rng = np.random.default_rng(12)
    domains, items = _clustered_items()
    shares = N_A / N
    subject_shares = J_A / J_A.sum()
    spec = parse_environments({"environments": {"benchmark": {"weights": dict(zip(domains, shares.tolist()))},
                                                "subjects": {"weights": dict(zip(domains, subject_shares.tolist()))},
                                                "d0_only": {"weights": {"d0": 1.0}}}}, "e.toml")
    failed, _ = _draw(rng, MU["mid"])
    scores = np.c_[1.0 - failed, np.ones(N)]
    rows, failure, notes = certify_scores(spec, items, ["m", "perfect"], scores, delta=ALPHA)
    for model in ("m", "perfect"):
        f = failure[model]
        assert f["question"] == "same_subjects" and f["question_new_subjects"] == "new_subjects"
        assert f["upper"] == failure_rate_upper(f["failures"], N, alpha=ALPHA, unequal_rates=True).upper
        k = int(np.sum(scores[:, ["m", "perfect"].index(model)] < 1))
        nb = failure_rate_upper_new_subjects(scores[:, ["m", "perfect"].index(model)] < 1,
                                             items["subject"].to_numpy(), alpha=ALPHA)
        assert f["failures"] == k and f["upper_new_subjects"] == nb.upper
        assert f["effective_subjects"] == pytest.approx(nb.effective_subjects)
        env = next(r for r in rows if r["model"] == model and r["environment"] == "benchmark")
        assert env["question"] == f["question"]
        risk = 1.0 - env["score"]
        assert risk == pytest.approx(f["estimate"])
        assert 1 - env["upper"] <= risk <= f["upper"]
        env_s = next(r for r in rows if r["model"] == model and r["environment"] == "subjects")
        risk_s = 1.0 - env_s["score_new_subjects"]
        assert risk_s == pytest.approx(f["estimate_new_subjects"]) == pytest.approx(nb.estimate)
        assert 1 - env_s["upper_new_subjects"] <= risk_s <= f["upper_new_subjects"]
        assert env_s["lower_new_subjects"] <= env_s["score_new_subjects"] <= env_s["upper_new_subjects"]
    # and the band is the one the stats layer gives for this question
    b = stratified_means([scores[(items["domain"] == d).to_numpy(), 0] for d in domains], N_A,
                         np.vstack([shares, [1.0, 0, 0, 0]]), delta=ALPHA, finite_population=False,
                         clusters=[items.filter(pl.col("domain") == d)["subject"].to_numpy() for d in domains])
    assert b.details["question"] == "same_subjects"


def test_at_subject_level_the_band_and_the_failure_bound_name_the_same_question():
    # Subjects as atoms: the per-subject exact intervals answer "new items from the same subjects",
    # the question the failure bound beside them names (the band said 'independent_items' before).
    rng = np.random.default_rng(13)
    _, items = _clustered_items()
    spec = parse_environments({"level": "subject", "environments": {"two": {"weights": {"s0_0": 0.5, "s1_0": 0.5}}}},
                              "e.toml")
    failed, _ = _draw(rng, MU["mid"])
    band, failure, _ = certify_scores(spec, items, ["m"], np.c_[1.0 - failed], delta=ALPHA)
    assert {r["question"] for r in band} == {failure["m"]["question"]} == {"same_subjects"}
