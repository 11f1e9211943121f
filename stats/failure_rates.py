r"""What can be certified about failures (certifying-capabilities paper, Theorem 3.10), and the exact
binomial bounds behind it.

Under random sampling a failure *rate* can be bounded: the exact one-sided binomial bound
(:func:`failure_rate_upper`), made valid for subjects of different difficulty with
``unequal_rates=True``, and for a new subject's expected failure rate
:func:`failure_rate_upper_new_subjects`. "Correct on every instance" cannot be certified by
black-box testing (:data:`BLACK_BOX_SENTENCE`). The exact bounds (:func:`clopper_pearson`, and
the KL bound over subjects) also give :mod:`benchcert.stats.certify` its per-atom intervals and
:mod:`benchcert.stats.failure_counts` the same bounds for every model at once.

Pure numpy/scipy.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np
import scipy.special as _sc
from benchcert.stats import _dist as stats  # scipy.stats, imported only when beta is used

from benchcert.stats.validation import check_alpha, check_positive_int
from benchcert.stats.subject_means import means_by_code

__all__ = [
    "BLACK_BOX_SENTENCE",
    "FailureRateBound",
    "failure_rate_upper",
    "failure_rate_upper_new_subjects",
    "clopper_pearson",
]

BLACK_BOX_SENTENCE = ("A claim that the model is correct on every instance cannot be certified by black-box "
                      "testing (certifying-capabilities paper, Theorem 3.10): a finite set of queries cannot rule "
                      "out failures on inputs it never asked about; only a failure rate under random sampling can "
                      "be bounded.")


# --------------------------------------------------------------------------------------
# exact binomial bounds


def clopper_pearson(k, n, *, alpha: float, sided: str = "two-sided",
                    unequal_rates: bool = False) -> tuple[float, float]:
    r"""Exact (Clopper-Pearson) confidence bounds for a binomial rate from k successes in n trials.

    Parameters
    ----------
    k, n : int
        Successes and trials, 0 <= k <= n, n >= 1.
    alpha : float, keyword-only
        Error probability: split alpha/2 per side for ``"two-sided"``, all of it on the upper
        bound for ``"upper"`` (lower bound 0).
    sided : {"two-sided", "upper"}, keyword-only
    unequal_rates : bool, keyword-only
        True: bounds valid for a sum of independent Bernoulli trials with *unequal*
        probabilities, target their mean (see Notes):
        :math:`L^* = \min\{L,\ (k-1)/n\}`, :math:`U^* = \max\{U,\ (k+1)/n\}` (clipped to [0, 1]).

    Returns
    -------
    (lower, upper) : tuple of float

    Notes
    -----
    :math:`L = \mathrm{Beta}^{-1}(\alpha/2;\,k,\,n-k+1)` (0 for k = 0) and
    :math:`U = \mathrm{Beta}^{-1}(1-\alpha/2;\,k+1,\,n-k)` (1 for k = n); one-sided upper:
    :math:`\mathrm{Beta}^{-1}(1-\alpha;\,k+1,\,n-k)`. Equal to scipy's
    ``binomtest(k, n).proportion_ci(method="exact")``. :math:`U(k)` is the rate p at which
    :math:`F_{n,p}(k) = \alpha/2` (F the binomial CDF, decreasing in p), so
    :math:`U(k) < p \iff F_{n,p}(k) < \alpha/2`; likewise :math:`L(k) > p \iff
    1 - F_{n,p}(k-1) < \alpha/2`.

    *Unequal probabilities* (``unequal_rates=True``). Let S be a sum of n independent
    Bernoulli(:math:`p_i`) trials, :math:`\bar p` their mean, :math:`F = F_{n,\bar p}`.
    Hoeffding (1956, Ann. Math. Statist. 27, Theorem 4): :math:`P(S \le c) \le F(c)` for
    integers :math:`0 \le c \le n\bar p - 1`, and (applied to the n - S failures, rates
    :math:`1 - p_i`) :math:`P(S \ge c) \le 1 - F(c - 1)` for :math:`n\bar p + 1 \le c \le n`.
    *Upper side*: :math:`U^*(S) < \bar p` iff :math:`F(S) < \alpha/2` **and**
    :math:`(S+1)/n < \bar p`. Both conditions hold for every count below one that satisfies them
    (F increases in S), so the miss event is :math:`\{S \le c\}` with c the largest count
    satisfying both (none: no miss), and :math:`c < n\bar p - 1`; Hoeffding's bound then gives
    :math:`P(\mathrm{miss}) = P(S \le c) \le F(c) < \alpha/2`. *Lower side*, mirrored:
    :math:`L^*(S) > \bar p` iff :math:`1 - F(S-1) < \alpha/2` and :math:`S > n\bar p + 1`, an
    event :math:`\{S \ge c\}` with :math:`c > n\bar p + 1`, of probability
    :math:`\le 1 - F(c-1) < \alpha/2`. So :math:`[L^*, U^*]` covers :math:`\bar p` with
    probability >= 1 - alpha for every :math:`(p_1, \dots, p_n)`, boundary rates included
    (one-sided: :math:`U^*` at alpha). The plain bounds need the max/min: with
    :math:`p = (1, \dots, 1, 1 - x)`, :math:`\alpha/2 < x` small, U misses exactly when the
    last trial fails, probability x. :math:`U^* \ne U` only where :math:`U(k) < (k+1)/n`, which
    for a tail :math:`\le 0.2` happens only at k = n - 1 (and :math:`L^* \ne L` only at
    k = 1), so the bounds are the exact ones except one count from either end. Tests:
    tests/tasks/certify/test_certify_clustered.py (exact Poisson-binomial miss probabilities over rate
    vectors, boundary and adversarial ones included, and seeded simulation with subject effects).
    The previous form, both bounds taken one count further out (L(k - 1), U(k + 1)), also
    holds but is wider at every count.
    """
    n = check_positive_int(n, "n")
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, numbers.Integral) or not 0 <= k <= n:
        raise ValueError(f"k must be an integer in [0, n = {n}]; got {k!r}")
    alpha = check_alpha(alpha)
    if sided not in ("two-sided", "upper"):
        raise ValueError(f"sided must be 'two-sided' or 'upper'; got {sided!r}")
    if not isinstance(unequal_rates, (bool, np.bool_)):
        raise ValueError(f"unequal_rates must be True or False; got {unequal_rates!r}")
    k = int(k)
    tail = alpha / 2 if sided == "two-sided" else alpha
    upper = 1.0 if k >= n else float(stats.beta.ppf(1.0 - tail, k + 1, n - k))
    if unequal_rates:
        upper = max(upper, min(1.0, (k + 1) / n))
    if sided == "upper":
        return 0.0, upper
    lower = 0.0 if k <= 0 else float(stats.beta.ppf(tail, k, n - k + 1))
    if unequal_rates:
        lower = min(lower, max(0.0, (k - 1) / n))
    return lower, upper


def _kl_upper(est, J, level, *, each: bool = False):
    r"""Largest :math:`m \ge \hat\mu` with :math:`J\,\mathrm{kl}(\hat\mu\,\|\,m) \le` ``level``, elementwise.

    ``est`` the means (in [0, 1]), ``J`` the numbers of variables, ``level`` the log of one over
    the side's error probability; arrays broadcast. kl is the Bernoulli relative entropy
    :math:`\mathrm{kl}(p\|q) = p\log(p/q) + (1-p)\log((1-p)/(1-q))`, which for :math:`q \ge p`
    increases from 0 to :math:`\infty` as q goes to 1, so the set is an interval
    :math:`[\hat\mu, u]`. Closed forms at the ends: :math:`u = 1 - e^{-\text{level}/J}`
    (:math:`= 1-\alpha^{1/J}` for level = log(1/alpha)) at :math:`\hat\mu = 0`, and 1 at
    :math:`\hat\mu = 1`. Otherwise bisection on the bracket :math:`[\hat\mu,\
    \min\{1, \hat\mu + \sqrt{\text{level}/(2J)}\}]`, whose right end has kl >= level/J by
    Pinsker (:math:`\mathrm{kl}(p\|q) \ge 2(p-q)^2`); every step keeps the right end where
    kl >= level/J, and the right end is returned, so the result is never below the root (the
    conservative side) and never above Hoeffding's additive bound (if rounding ever makes the
    Pinsker end look inside the set, the left end climbs to it and that additive bound is returned).
    All entries are bisected together, to a bracket of a few units in the last place (``each``:
    every entry stops at its own bracket, so each gets the bits of a call of its own).
    (``scipy.optimize.elementwise.find_root`` would do the same but imports scipy.optimize,
    about 0.4 s per command; every audit computes this bound.)
    """
    est = np.clip(np.asarray(est, dtype=float), 0.0, 1.0)
    est, J, level = np.broadcast_arrays(est, np.asarray(J, dtype=float), np.asarray(level, dtype=float))
    c = level / J
    lo = est.copy()
    hi = np.minimum(1.0, est + np.sqrt(c / 2.0))
    inner = (est > 0.0) & (est < 1.0)
    e, cc = est[inner], c[inner]
    a, b = lo[inner], hi[inner]
    for _ in range(200):            # the bracket halves each step: 2^-60 < 1e-16 long before 200
        wide = b - a > 4.0 * np.finfo(float).eps * b
        if not np.any(wide):
            break
        mid = 0.5 * (a + b)
        out = _sc.rel_entr(e, mid) + _sc.rel_entr(1.0 - e, 1.0 - mid) >= cc   # kl(e || mid) >= level / J
        move = wide if each else True
        b = np.where(out & move, mid, b)
        a = np.where(~out & move, mid, a)
    u = np.where(est >= 1.0, 1.0, -np.expm1(-c))       # the closed forms at est = 1 and est = 0
    u[inner] = b
    return u


def _kl_bounds(est, J, level):
    """(lower, upper): the upper bound of :func:`_kl_upper` and its mirror image, 1 - u(1 - est)."""
    est = np.clip(np.asarray(est, dtype=float), 0.0, 1.0)
    return 1.0 - _kl_upper(1.0 - est, J, level), _kl_upper(est, J, level)


def _subject_means(x: np.ndarray, labels: np.ndarray) -> tuple[float, int]:
    """(subject-weighted mean, number of subjects J): every subject weighs 1/J, whatever its size."""
    _, inv = np.unique(labels, return_inverse=True)
    _, subject_means, _ = means_by_code(x, inv.ravel())
    return float(subject_means.mean()), int(subject_means.size)


# --------------------------------------------------------------------------------------
# Theorem 3.10: what can be certified about failures


@dataclass(frozen=True)
class FailureRateBound:
    """One-sided upper confidence bound on a failure rate, for the question named in ``question``.

    ``question``: ``"independent_items"`` (i.i.d. items, the exact binomial bound),
    ``"same_subjects"`` (new items from the same subjects, items independent given their
    subject; valid for unequal rates; ``estimate`` the item-weighted failure rate) or
    ``"new_subjects"`` (subjects as the sampling unit, each weighing the same: ``estimate`` is
    the subject-weighted failure rate, ``effective_subjects`` the number of subjects).
    ``failures`` and ``n`` count items.
    """

    failures: int
    n: int
    estimate: float
    upper: float
    alpha: float
    method: str = "clopper_pearson_one_sided"
    statement: str = BLACK_BOX_SENTENCE
    assumptions: tuple[str, ...] = ("the n items are an i.i.d. random sample of the task distribution",
                                    "a failure is an item scored below 1")
    question: str = "independent_items"
    effective_subjects: float | None = None


def failure_rate_upper(failures: int, n: int, *, alpha: float = 0.05, unequal_rates: bool = False) -> FailureRateBound:
    r"""Exact one-sided upper bound on the failure rate from ``failures`` in ``n`` random items.

    Parameters
    ----------
    failures, n : int
        Failures (items scored below 1) among n >= 1 items.
    alpha : float, keyword-only
        The bound holds with probability >= 1 - alpha.
    unequal_rates : bool, keyword-only
        False (default): the items are i.i.d. draws, one common failure rate p (question
        ``"independent_items"``). True: the items are independent but may fail with different
        probabilities :math:`p_i` - the items of one subject share its difficulty - and the
        target is their mean :math:`\bar p` (question ``"same_subjects"``: new items from the
        same subjects, weighted by their items). See Notes.

    Returns
    -------
    FailureRateBound

    Notes
    -----
    *Common rate.* :math:`u(k) = \mathrm{Beta}^{-1}(1-\alpha;\,k+1,\,n-k)` for k < n and 1 for
    k = n: the largest rate p with :math:`P(\mathrm{Bin}(n, p) \le k) \ge \alpha`
    (:func:`clopper_pearson`, ``sided="upper"``). With no failure it is
    :math:`1-\alpha^{1/n} \approx \log(1/\alpha)/n` (about 3/n at 95%). Equals the upper end of
    ``scipy.stats.binomtest(k, n, alternative='less').proportion_ci(1 - alpha)``.

    *Unequal rates* (``unequal_rates=True``). The failure count S is then Poisson-binomial
    with mean :math:`n\bar p`, not binomial, and :math:`u(S)` can miss :math:`\bar p` with
    probability above alpha: with failure probabilities (1, ..., 1, 1 - x), alpha < x <
    :math:`n(1-(1-\alpha)^{1/n})`, it misses exactly when the last item passes, probability
    x (a model that fails almost everything). The bound used instead is

    .. math:: u^*(k) = \max\{u(k),\ (k+1)/n\},

    which holds for every :math:`(p_1, \dots, p_n)`: it misses :math:`\bar p` iff
    :math:`F_{n,\bar p}(S) < \alpha` and :math:`S < n\bar p - 1` (F the binomial CDF), a set
    :math:`\{S \le c\}` with :math:`c \le n\bar p - 1`, and for such c Hoeffding (1956,
    Ann. Math. Statist. 27, Theorem 4) gives :math:`P(S \le c) \le F_{n,\bar p}(c) < \alpha`.
    The max changes u only when u(k) < (k+1)/n, which at alpha <= 0.2 happens only at
    k = n - 1 (one item passed), so the usual bound near zero failures (3/n) is unchanged. It
    is :func:`clopper_pearson` with ``sided="upper", unequal_rates=True`` (whose Notes give the
    proof for both sides), the form the same-subjects band of :func:`stratified_means` uses.
    The count of a sample drawn without replacement from a finite set
    (hypergeometric), and a sum of independent such counts, is also Poisson-binomial
    (Vatutin & Mikhailov 1982), so u* also holds for a stratified sample of the benchmark's
    items, target the allocation-weighted failure rate of the atoms.

    Departure from the certifying-capabilities paper: its section 3.1 samples items i.i.d. from
    the task distribution (one rate); the unequal-rate bound and its question are this
    project's. For new subjects see :func:`failure_rate_upper_new_subjects`.
    """
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise ValueError(f"n must be a positive integer; got {n!r}")
    if isinstance(failures, bool) or not isinstance(failures, numbers.Integral) or not 0 <= failures <= n:
        raise ValueError(f"failures must be an integer in [0, n = {n}]; got {failures!r}")
    alpha = check_alpha(alpha)
    if not isinstance(unequal_rates, (bool, np.bool_)):
        raise ValueError(f"unequal_rates must be True or False; got {unequal_rates!r}")
    k, n = int(failures), int(n)
    upper = clopper_pearson(k, n, alpha=alpha, sided="upper", unequal_rates=bool(unequal_rates))[1]
    if not unequal_rates:
        return FailureRateBound(failures=k, n=n, estimate=k / n, upper=upper, alpha=alpha)
    return FailureRateBound(
        failures=k, n=n, estimate=k / n, upper=upper, alpha=alpha,
        method="clopper_pearson_one_sided_unequal_rates", question="same_subjects",
        assumptions=("question: new items from the same subjects (subjects fixed); items independent given their "
                     "subject, subjects may differ in difficulty; target: the mean failure rate of the subjects, "
                     "weighted by their items", "a failure is an item scored below 1"))


def failure_rate_upper_new_subjects(failed, subjects, *, alpha: float = 0.05) -> FailureRateBound:
    r"""One-sided upper bound on a new subject's expected failure rate, subjects as the sampling unit.

    Parameters
    ----------
    failed : array of bool or {0, 1}, shape (n,)
        Whether each item failed (scored below 1).
    subjects : array, shape (n,)
        Subject label of each item (any hashable dtype numpy can sort).
    alpha : float, keyword-only
        The bound holds with probability >= 1 - alpha.

    Returns
    -------
    FailureRateBound
        ``question="new_subjects"``, ``method="cluster_kl_hoeffding_one_sided"``;
        ``estimate`` is the *subject-weighted* failure rate (the mean of the subjects' failure
        shares), ``effective_subjects`` the number of subjects J (each weighs 1/J, so the
        effective number is J itself); ``failures`` and ``n`` count items.

    Notes
    -----
    Question: how often would the model fail on items of a *new subject*? The benchmark's J
    subjects are independent draws of (size, subject) - a subject's size may depend on its
    difficulty in any way, e.g. big easy subjects and small hard ones - and the items within a
    subject may depend on each other in any way. Target :math:`\mu = E[f_J]`, the expected
    failure rate of a new subject J, every subject counted once whatever its size (the
    *subject-weighted* rate; when domains are fixed strata, the mean over the benchmark's
    subjects of their domains' rates, i.e. domains weighted by their numbers of subjects). With
    :math:`\bar f_j` the failure share of subject j, the estimate

    .. math:: \hat f = \frac1J\sum_j \bar f_j

    is the plain mean of J independent variables in [0, 1] with
    :math:`E\bar f_j = E[E(\bar f_j \mid n_j, f_j)] = \mu`. Hoeffding's inequality in its
    relative-entropy (Chernoff) form (1963, Theorem 1, applied to :math:`1 - \bar f_j`) gives,
    for :math:`0 < t \le \mu`,

    .. math:: P(\hat f \le \mu - t) \le e^{-J\,\mathrm{kl}(\mu - t\,\|\,\mu)},\qquad
              \mathrm{kl}(p\|q) = p\log\frac pq + (1-p)\log\frac{1-p}{1-q},

    and the bound is

    .. math:: u = \max\{m \ge \hat f : J\,\mathrm{kl}(\hat f\,\|\,m) \le \log(1/\alpha)\}

    (``method="cluster_kl_hoeffding_one_sided"``): :math:`u = 1 - \alpha^{1/J}` when no subject
    fails (about :math:`\log(1/\alpha)/J`), 1 when every item fails, and otherwise the root of
    :math:`J\,\mathrm{kl}(\hat f\|m) = \log(1/\alpha)` found by bisection, rounded outwards.
    *Why it holds.* kl(p || m) increases in m >= p and decreases in p <= m, so
    :math:`u < \mu` iff :math:`\hat f < \mu` and :math:`J\,\mathrm{kl}(\hat f\|\mu) > \log(1/\alpha)`,
    i.e. iff :math:`\hat f < \mu - t^*` with :math:`J\,\mathrm{kl}(\mu - t^*\|\mu) = \log(1/\alpha)`
    (no such :math:`t^*`, no miss), which has probability at most
    :math:`e^{-J\,\mathrm{kl}(\mu-t^*\|\mu)} = \alpha`. Theorem 1 is about the *unweighted*
    mean of independent [0, 1] variables, which is what weighting every subject 1/J gives; with
    weights that depend on the sizes it would not apply. By Pinsker's inequality,
    :math:`\mathrm{kl}(p\|q) \ge 2(p-q)^2`, u is never above the additive form of the same
    inequality (Theorem 2), :math:`\min\{1, \hat f + \sqrt{\log(1/\alpha)/(2J)}\}` (this
    function before), and near rate 0 it is far below it: with no failure among 40 subjects
    0.072 instead of 0.194 at alpha = 0.05 (10 subjects: 0.259 instead of 0.387).

    Weighting subjects by their items instead (:math:`w_j = n_j/n`, Hoeffding on Kish's
    :math:`1/\sum_j w_j^2`, this function before) assumed sizes unrelated to failure rates:
    when big subjects are easy the pooled rate sits far below :math:`\mu`, and in the seeded
    simulation of tests/stats/test_certify_new_subjects.py that bound covered a new subject's
    failure rate in 0-2% of runs with 40 subjects (39% with 10) at a nominal 90%. The
    item-weighted rate of new subjects has no bound here: it is a ratio
    :math:`E[n_J f_J]/E[n_J]` that a few big subjects can dominate.

    This is the one-sided form of the new-subjects band of :func:`stratified_means`
    (``new_clusters=True``), the same estimate and the same upper end at 2 alpha. It is wide
    with few subjects (one subject gives at least :math:`1 - \alpha`) - the honest answer, since a
    failure rate on new subjects cannot be pinned down from a handful of subjects. Coverage
    with subject random effects, unequal sizes, sizes that track difficulty and boundary rates
    is checked by seeded simulation (tests/tasks/certify/test_failure_clustered.py,
    tests/stats/test_certify_new_subjects.py). Departure from the certifying-capabilities paper: its
    section 3.1 draws items i.i.d. and has no subjects.
    """
    f = np.asarray(failed)
    if f.ndim != 1 or f.size == 0 or not np.all((f == 0) | (f == 1)):
        raise ValueError(f"failed must be a non-empty 1-D array of 0/1 (or bool); got shape {f.shape}")
    labels = np.asarray(subjects)
    if labels.shape != f.shape:
        raise ValueError(f"subjects must label each of the {f.size} items; got shape {labels.shape}")
    alpha = check_alpha(alpha)
    f = f.astype(float)
    est, J = _subject_means(f, labels)
    upper = float(_kl_upper(est, J, math.log(1.0 / alpha)))
    return FailureRateBound(
        failures=int(f.sum()), n=int(f.size), estimate=est, upper=upper, alpha=alpha,
        method="cluster_kl_hoeffding_one_sided", question="new_subjects", effective_subjects=float(J),
        assumptions=("question: new subjects - the subjects are independent draws of (size, subject), a subject's "
                     "size may depend on its difficulty, items within a subject may depend on each other; every "
                     "subject weighs the same; target: a new subject's expected failure rate (subject-weighted; "
                     "estimate: the mean of the subjects' failure shares)", "a failure is an item scored below 1"))
