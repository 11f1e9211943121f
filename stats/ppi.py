"""Human-scale scores from a model judge and a few human labels: prediction-powered inference.

A judge scores every item cheaply but with a bias; humans label only a random subset.
Prediction-powered inference (PPI; Angelopoulos, Bates, Fannjiang, Jordan and Zrnic 2023) uses the
labelled subset to measure the judge's error and corrects the judge's mean over all items with it;
PPI++ (Angelopoulos, Duchi and Zrnic 2023, "PPI++: Efficient prediction-powered inference",
arXiv:2311.01453, section 2 and Example 6.1) tunes how much of the judge to use (lambda), so the
interval is never wider, to first order, than the human-only one on the same labels.

Notation: ``n`` items carry a human score ``Y`` and the judge's score ``Yhat``; ``N`` further items
carry only the judge's score ``Yhat_u``.  For lambda in [0, 1] the estimate of the human-scale mean
theta = E[Y] is (PPI++ eq. 2 for the mean)

    theta_lambda = lambda * mean(Yhat_u) + mean(Y - lambda * Yhat)

with standard error  se^2 = lambda^2 Var(Yhat_u) / N + Var(Y - lambda Yhat) / n  (population
variances, ddof 0).  The tuned lambda (PPI++ eq. 8, the variance-minimising value, clipped to
[0, 1]) is

    lambda* = Cov(Y, Yhat) / ((1 + n / N) Var(Yhat)),

with Cov from the labelled pairs and Var(Yhat) from all judge scores (ddof 1).  lambda = 0 is the
human-only estimate, lambda = 1 plain PPI.  These agree with the reference implementation
``ppi_py.ppi_mean_pointestimate`` / ``ppi_mean_ci`` (ppi-python 0.2.3) to rounding; the tests
compare them.

Deliberate departure: the interval's quantile is Student's t with n - 1 degrees of freedom, not
the normal one (``quantile="normal"`` gives the reference's).  The interval is a CLT interval whose
error is driven by the n labelled items; with n = 100 binary labels the t quantile holds 95%
coverage where the normal one sits at its edge (tests/stats/test_ppi.py measures both).

Second departure, also only for ``quantile="t"``: the two labelled-sample variances (the
rectifier's Var(Y - lambda Yhat) and the human-only Var(Y)) are computed on the n labelled pairs
augmented with ``PSEUDO_PER_END`` = 2 pseudo-pairs at each end of the score range,
(Y = lo, Yhat = mean(Yhat)) and (Y = hi, Yhat = mean(Yhat)), where [lo, hi] is [0, 1] for a mean
and [-1, 1] for a gap: Agresti and Coull's z^2/2 ~= 2 pseudo-observations per end, with the
judge's score held at its labelled mean so the pseudo-pairs carry no judge-human covariance, and
the variance taken with ddof 1 over the n + 4 points (then divided by n).  The estimate and lambda
are unchanged (only the width is), so the interval can no longer have zero width when all labels
agree.  Without it, at a boundary rate (human rate 0.97, judge P(1|1) = 0.99, P(1|0) = 0.3) and
the minimum of 30 labels, 40% of label sets are all 1 with se 0 and the 95% interval covered 57%
of the time (77% at n = 50, 87% at n = 100); with it 100%, 100% and 96.6%, and at human rate 0.6
94.5% and 95.4% at n = 30 and 50 (93.1% and 95.0% before; seeded simulations, 2000 items, 2000
repetitions; tests/stats/test_ppi.py).
Away from the boundary it adds O(1/n) relative width.

Third departure, for ``quantile="t"`` too (issue #36): the interval reported is the hull of that
one and its score form, and is clipped to the score range ([0, 1] for a mean, [-1, 1] for a gap), and
so is the estimate (lambda mean(Yhat_u) + mean(Y - lambda Yhat) falls below 0 when the labels sit near 0
and the labelled items' judge mean exceeds the rest's; clipped, it stays inside its interval).
The score form replaces the labels' variance Var(Y) in se^2 by kappa (theta - lo)(hi - theta), a
function of the estimand theta itself (kappa = Var(Y) / ((mean(Y) - lo)(hi - mean(Y))), 1 for 0/1
labels) and solves (est - theta)^2 <= q^2 se^2(theta) for theta: at lambda = 0 (an uninformative
judge) this is Wilson's score interval on the labels, whose centre moves towards the middle of
the range where the labels sit near one end. The plug-in interval alone is a Wald interval there:
92.82% [92.30, 93.32] coverage at 100 labels, human rate 0.9 and an uninformative judge, and an
upper end of 1.036 on the command line.

Assumption (printed with every result): the human-labelled items are a uniform random sample of
the judged items (missing completely at random).  :func:`labelled_subset_check` tests one
consequence of it: the labelled items' judge scores look like the rest's.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from .bisection import smallest_passing
from .degenerate import DegenerateDataWarning
from .validation import as_float_array, check_alpha, check_unit_interval

__all__ = [
    "MIN_HUMAN_LABELS",
    "HumanLabelPlan",
    "JudgeAgreement",
    "LabelledSubsetCheck",
    "PPIMeanResult",
    "judge_agreement",
    "labelled_subset_check",
    "plan_human_labels",
    "ppi_gap",
    "ppi_mean",
]

#: Below this many human labels a model gets no human-scale interval: the CLT interval's level is
#: not to be trusted (and the tuned lambda is noise).  The audit says how many more are needed.
MIN_HUMAN_LABELS = 30

#: Pseudo-observations added at each end of the score range to the variance terms of the default
#: (t) interval: Agresti and Coull's z^2/2 ~= 2 per end (module notes).
PSEUDO_PER_END = 2

MCAR = ("the human-labelled items are a uniform random sample of the judged items (missing completely at "
        "random); labels chosen by the judge's score, by difficulty or by convenience void the interval")


@dataclass(frozen=True)
class PPIMeanResult:
    """A human-scale mean (or gap) from judge scores and a random human-labelled subset.

    ``human_only_lower``/``human_only_upper`` is the interval from the human labels alone (lambda
    = 0, same quantile) for comparison; ``judge_only_estimate`` the judge's plain mean over all
    judged items (what one would report without humans).
    """

    estimate: float
    lower: float
    upper: float
    se: float
    lam: float
    alpha: float
    n_human: int
    n_judge: int
    human_only_lower: float
    human_only_upper: float
    judge_only_estimate: float
    method: str
    assumptions: tuple[str, ...]

    @property
    def half_width(self) -> float:
        return (self.upper - self.lower) / 2


def _vector(x, name: str, lo: float, hi: float) -> np.ndarray:
    a = as_float_array(x, name)
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-D; got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be finite (no NaN: pass only scored items)")
    if a.size and (a.min() < lo or a.max() > hi):
        raise ValueError(f"{name} must lie in [{lo:g}, {hi:g}]; got values in [{a.min():g}, {a.max():g}]")
    return a


def _ppi_iv(human, judge_labelled, judge_unlabelled, alpha, lam, quantile, lo, hi):
    y = _vector(human, "human", lo, hi)
    yh = _vector(judge_labelled, "judge_labelled", lo, hi)
    yu = _vector(judge_unlabelled, "judge_unlabelled", lo, hi)
    if yh.size != y.size:
        raise ValueError(f"judge_labelled must have one judge score per human score ({y.size}); got {yh.size}")
    if y.size < 2:
        raise ValueError(f"human must hold at least 2 labelled items; got {y.size}")
    if yu.size < 1:
        raise ValueError("judge_unlabelled must hold at least 1 judged item without a human label")
    alpha = check_alpha(alpha)
    if lam is not None:
        check_unit_interval("lam", lam, closed=True)
    if quantile not in ("t", "normal"):
        raise ValueError(f"quantile must be 't' or 'normal'; got {quantile!r}")
    return y, yh, yu, alpha


def _tuned_lambda(y, yh, yu):
    """PPI++'s variance-minimising lambda for a mean, clipped to [0, 1] (ppi_py ``_calc_lam_glm``);
    over the last axis, so a batch of label sets (planning) gets one lambda each."""
    n, big_n = y.shape[-1], yu.shape[-1]
    start = yu.mean(-1, keepdims=True) + (y - yh).mean(-1, keepdims=True)  # the lambda = 1 estimate
    g, gh = y - start, yh - start
    cov = np.sum((g - g.mean(-1, keepdims=True)) * (gh - gh.mean(-1, keepdims=True)), -1) / n
    var = np.var(np.concatenate([gh, yu - start], -1), ddof=1, axis=-1)
    return np.where(var > 0, np.clip(cov / ((1 + n / big_n) * np.where(var > 0, var, 1.0)), 0.0, 1.0), 0.0)


def _quantile(alpha: float, n: int, quantile: str) -> float:
    from scipy import stats

    return float(stats.t.ppf(1 - alpha / 2, n - 1) if quantile == "t" else stats.norm.ppf(1 - alpha / 2))


def _augmented(y, yh, lo, hi):
    """The labelled pairs plus PSEUDO_PER_END pseudo-pairs (lo, mean(yh)) and as many (hi, mean(yh)) (module notes);
    over the last axis."""
    k = PSEUDO_PER_END
    ends = np.broadcast_to(np.array([lo] * k + [hi] * k, float), y.shape[:-1] + (2 * k,))
    judge_mean = np.repeat(yh.mean(-1, keepdims=True), 2 * k, axis=-1)
    return np.concatenate([y, ends], -1), np.concatenate([yh, judge_mean], -1)


def _ppi(y, yh, yu, alpha, lam, quantile, method, assumptions, lo=0.0, hi=1.0) -> PPIMeanResult:
    n, big_n = y.size, yu.size
    lam = float(_tuned_lambda(y, yh, yu) if lam is None else lam)
    q = _quantile(alpha, n, quantile)
    est, se, lower, upper = _interval(y, yh, yu, lam, q, quantile, lo, hi)
    _, _, lower_h, upper_h = _interval(y, yh, yu, 0.0, q, quantile, lo, hi)  # the human labels alone
    if se == 0.0:
        warnings.warn(DegenerateDataWarning(
            "human and judge scores do not vary: the prediction-powered interval has zero width"), stacklevel=3)
    judge_all = float(np.concatenate([yh, yu]).mean())
    return PPIMeanResult(estimate=float(est), lower=float(lower), upper=float(upper), se=float(se), lam=lam,
                         alpha=alpha, n_human=n, n_judge=big_n, human_only_lower=float(lower_h),
                         human_only_upper=float(upper_h), judge_only_estimate=judge_all,
                         method=method, assumptions=assumptions)


def _interval(y, yh, yu, lam, q, quantile, lo, hi):
    """(estimate, se, lower, upper) of the PPI interval at this lambda (0: the human labels alone), over the
    last axis (lam then one per label set): the plug-in interval est +- q se and, for ``quantile="t"``,
    its hull with the score form, clipped to [lo, hi] (module notes)."""
    lam = np.asarray(lam, float)
    est = lam * yu.mean(-1) + (y - lam[..., None] * yh).mean(-1)
    ya, yha = _augmented(y, yh, lo, hi) if quantile == "t" else (y, yh)
    dd = 1 if quantile == "t" else 0
    se = np.sqrt(lam * lam * np.var(yu, -1) / yu.shape[-1] + np.var(ya - lam[..., None] * yha, -1, ddof=dd) / y.shape[-1])
    lower, upper = est - q * se, est + q * se
    if quantile == "t":  # the hull with the score form, clipped to the score range (module notes)
        s_lo, s_hi = _score_interval(y, yh, yu, lam, est, q, lo, hi)
        lower, upper = np.maximum(lo, np.minimum(lower, s_lo)), np.minimum(hi, np.maximum(upper, s_hi))
        est = np.clip(est, lo, hi)  # inside [lower, upper] still: lower <= max(lo, est), upper >= min(hi, est)
    return est, se, lower, upper


def _score_interval(y, yh, yu, lam, est, q, lo, hi):
    r"""The score form of the PPI interval: the theta with
    (est - theta)^2 <= q^2 [lam^2 Var(Yhat_u) / N + (kappa (theta - lo)(hi - theta) - 2 lam c + lam^2 v_j) / n],
    the human labels' variance taken as a function of theta (module notes); (lo, hi) when the
    inequality holds everywhere, the plain ends (est, est) when nowhere. Over the last axis."""
    n, big_n = y.shape[-1], yu.shape[-1]
    m = y.mean(-1)
    room = (m - lo) * (hi - m)
    # kappa: the labels' variance against the largest a score in [lo, hi] with that mean can have
    # (1 for 0/1 labels up to n / (n - 1)); 1 when every label is at one end (no information on it)
    wide = room > 1e-12
    kappa = np.maximum(np.where(wide, np.var(y, -1, ddof=1) / np.where(wide, room, 1.0), 1.0), 1.0 / n)
    cov = np.sum((y - m[..., None]) * (yh - yh.mean(-1, keepdims=True)), -1) / (n - 1)
    v_j = np.var(yh, -1, ddof=1)
    b_term = lam * lam * np.var(yu, -1) / big_n + (lam * lam * v_j - 2 * lam * cov) / n
    g = q * q * kappa / n
    # (1 + g) theta^2 - (2 est + g (lo + hi)) theta + (est^2 + g lo hi - q^2 b) <= 0
    a2, a1, a0 = 1.0 + g, -(2.0 * est + g * (lo + hi)), est * est + g * lo * hi - q * q * b_term
    disc = a1 * a1 - 4.0 * a2 * a0
    root = np.sqrt(np.maximum(disc, 0.0))
    return (np.where(disc < 0, est, (-a1 - root) / (2.0 * a2)), np.where(disc < 0, est, (-a1 + root) / (2.0 * a2)))


def ppi_mean(human, judge_labelled, judge_unlabelled, *, alpha: float = 0.05, lam: float | None = None,
             quantile: str = "t") -> PPIMeanResult:
    """The human-scale mean score with a prediction-powered (PPI++) interval.

    Parameters
    ----------
    human : array_like, shape (n,)
        Human scores in [0, 1] of the labelled items.
    judge_labelled : array_like, shape (n,)
        The judge's scores of the same items, in the same order.
    judge_unlabelled : array_like, shape (N,)
        The judge's scores of the judged items that carry no human label.
    alpha : float
        1 - coverage of the two-sided interval.
    lam : float or None
        None tunes lambda (PPI++ eq. 8); 1 is plain PPI, 0 the human-only interval.
    quantile : {"t", "normal"}
        Student's t with n - 1 degrees of freedom and the pseudo-observation variances (default;
        see the module notes), or the normal quantile and plain variances of the reference
        implementation.

    Returns
    -------
    PPIMeanResult
        Estimate, interval, standard error, lambda, the human-only interval beside it, the judge's
        plain mean, the method and the assumption.

    Notes
    -----
    Valid (asymptotically, as n and N grow) for the mean human score of the population the items
    are drawn from when the labelled items are a uniform random sample of the judged ones; for the
    benchmark's own items (a finite population) the interval is conservative.  See the module
    docstring for the formulas.
    """
    y, yh, yu, alpha = _ppi_iv(human, judge_labelled, judge_unlabelled, alpha, lam, quantile, 0.0, 1.0)
    method = "ppi++" if lam is None else f"ppi (lambda={float(lam):g})"
    return _ppi(y, yh, yu, alpha, lam, quantile, method, (MCAR,))


def ppi_gap(human_a, human_b, judge_a_labelled, judge_b_labelled, judge_a_unlabelled, judge_b_unlabelled, *,
            alpha: float = 0.05, lam: float | None = None, quantile: str = "t") -> PPIMeanResult:
    """The human-scale gap (model A - model B) on the same items, with a PPI++ interval.

    Paired: every labelled item carries a human score for both models and every unlabelled item
    the judge's score for both, in the same item order.  The estimand is the mean over items of
    human_A - human_B, in [-1, 1]; the estimator is :func:`ppi_mean`'s applied to the per-item
    differences (PPI++ applies to any bounded mean), so one lambda tunes the gap itself.
    """
    ya = _vector(human_a, "human_a", 0.0, 1.0)
    yb = _vector(human_b, "human_b", 0.0, 1.0)
    ja = _vector(judge_a_labelled, "judge_a_labelled", 0.0, 1.0)
    jb = _vector(judge_b_labelled, "judge_b_labelled", 0.0, 1.0)
    ua = _vector(judge_a_unlabelled, "judge_a_unlabelled", 0.0, 1.0)
    ub = _vector(judge_b_unlabelled, "judge_b_unlabelled", 0.0, 1.0)
    for name, a, b in (("human_b", ya, yb), ("judge_a_labelled", ya, ja), ("judge_b_labelled", ya, jb),
                       ("judge_b_unlabelled", ua, ub)):
        if a.size != b.size:
            raise ValueError(f"{name} must be paired item by item with model A's scores ({a.size}); got {b.size}")
    y, yh, yu, alpha = _ppi_iv(ya - yb, ja - jb, ua - ub, alpha, lam, quantile, -1.0, 1.0)
    method = "ppi++ paired gap" if lam is None else f"ppi paired gap (lambda={float(lam):g})"
    return _ppi(y, yh, yu, alpha, lam, quantile, method, (MCAR, "the same items are labelled for both models"),
                lo=-1.0, hi=1.0)


@dataclass(frozen=True)
class JudgeAgreement:
    """How far the judge is from people, on the items scored by both.

    ``bias`` is mean(judge - human) with its t interval; ``kappa`` is Cohen's kappa for binary or
    categorical scores (``kappa_weights`` "quadratic" when the scores are ordinal with more than
    two levels, None for two levels), NaN for continuous scores; ``spearman`` the rank
    correlation (always given, NaN when either side is constant); ``confusion`` the judge x human
    table over ``levels`` when scores are discrete (rows human, columns judge), else None.
    """

    n: int
    bias: float
    bias_lower: float
    bias_upper: float
    exact_agreement: float
    kappa: float
    kappa_weights: str | None
    spearman: float
    levels: tuple[float, ...] | None
    confusion: tuple[tuple[int, ...], ...] | None
    alpha: float
    method: str


#: Scores with at most this many distinct values are treated as categories (kappa, confusion table).
MAX_LEVELS = 11


def judge_agreement(judge, human, *, alpha: float = 0.05) -> JudgeAgreement:
    """Agreement between the judge's and the human scores of the same items.

    Bias: mean(judge - human) with a Student t interval at 1 - alpha.  Discrete scores (at most
    :data:`MAX_LEVELS` distinct values over both raters): Cohen's kappa (1960) for two levels,
    quadratic-weighted kappa (Cohen 1968) for more (ordered levels), both by scikit-learn's
    ``cohen_kappa_score``, and the confusion table.  Spearman's rank correlation always.
    """
    j = _vector(judge, "judge", 0.0, 1.0)
    h = _vector(human, "human", 0.0, 1.0)
    if j.size != h.size:
        raise ValueError(f"judge must hold one score per human score ({h.size}); got {j.size}")
    if h.size < 2:
        raise ValueError(f"human must hold at least 2 doubly-scored items; got {h.size}")
    alpha = check_alpha(alpha)
    from scipy import stats

    d = j - h
    n = d.size
    sd = d.std(ddof=1)
    q = stats.t.ppf(1 - alpha / 2, n - 1)
    bias = float(d.mean())
    levels = np.unique(np.concatenate([j, h]))
    kappa, weights, confusion, lv = float("nan"), None, None, None
    if levels.size <= MAX_LEVELS:
        from sklearn.metrics import cohen_kappa_score, confusion_matrix

        codes = {v: i for i, v in enumerate(levels)}
        jc = np.array([codes[v] for v in j])
        hc = np.array([codes[v] for v in h])
        weights = None if levels.size <= 2 else "quadratic"
        with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            kappa = float(cohen_kappa_score(hc, jc, weights=weights, labels=np.arange(levels.size)))
        confusion = tuple(tuple(int(c) for c in row)
                          for row in confusion_matrix(hc, jc, labels=np.arange(levels.size)))
        lv = tuple(float(v) for v in levels)
    if np.ptp(j) > 0 and np.ptp(h) > 0:
        rho = float(stats.spearmanr(j, h).statistic)
    else:
        rho = float("nan")
        warnings.warn(DegenerateDataWarning("judge or human scores are constant: no rank correlation"),
                      stacklevel=2)
    return JudgeAgreement(n=n, bias=bias, bias_lower=float(bias - q * sd / math.sqrt(n)),
                          bias_upper=float(bias + q * sd / math.sqrt(n)), exact_agreement=float(np.mean(j == h)),
                          kappa=kappa, kappa_weights=weights, spearman=rho, levels=lv, confusion=confusion,
                          alpha=alpha, method="bias t-interval; Cohen's kappa (scikit-learn); Spearman")


@dataclass(frozen=True)
class LabelledSubsetCheck:
    """Do the labelled items' judge scores look like the unlabelled items'?  (a check of MCAR)

    ``p_value`` is Welch's two-sample t test of equal mean judge score; ``suspicious`` is
    ``p_value < alpha``: the labelled items were then probably not drawn at random and the
    human-scale interval's assumption fails.  A large p-value does not prove randomness.
    """

    mean_labelled: float
    mean_unlabelled: float
    p_value: float
    suspicious: bool
    alpha: float
    method: str


def labelled_subset_check(judge_labelled, judge_unlabelled, *, alpha: float = 0.05) -> LabelledSubsetCheck:
    """Welch's t test of the judge's mean score, labelled items against the rest."""
    a = _vector(judge_labelled, "judge_labelled", 0.0, 1.0)
    b = _vector(judge_unlabelled, "judge_unlabelled", 0.0, 1.0)
    if a.size < 2 or b.size < 2:
        raise ValueError(f"need at least 2 labelled and 2 unlabelled items; got {a.size} and {b.size}")
    alpha = check_alpha(alpha)
    from scipy import stats

    if np.ptp(a) == 0 and np.ptp(b) == 0:
        p = 1.0 if a[0] == b[0] else 0.0
    else:
        with warnings.catch_warnings():  # one side constant (all labelled items judged 1) is a valid input
            warnings.simplefilter("ignore", RuntimeWarning)
            p = float(stats.ttest_ind(a, b, equal_var=False).pvalue)
    return LabelledSubsetCheck(mean_labelled=float(a.mean()), mean_unlabelled=float(b.mean()), p_value=p,
                               suspicious=bool(p < alpha), alpha=alpha, method="Welch two-sample t test")


@dataclass(frozen=True)
class HumanLabelPlan:
    """How many human labels give a +-epsilon human-scale interval, with the judge and without.

    ``n_ppi`` uses the pilot's judge-human covariance and variances (PPI++ with tuned lambda, the
    t quantile and pseudo-observation variance of :func:`ppi_mean`'s default interval);
    ``n_human_only`` labels alone, by the same rule.  Both are at least :data:`MIN_HUMAN_LABELS`;
    either is None when even labelling all but one of ``n_items`` judged items does not reach
    epsilon.  ``assurance``: None plans the typical outcome (half of the label sets of that size or fewer
    reach epsilon: 29-57% measured); a share in (0, 1) plans so that that share of (pilot, label set) pairs
    does (0.8 delivered 84.0% [80.5, 87.1] to 87.4% [84.2, 90.2] over 500 fresh pilots in each of three
    settings: docs/analyses.md).
    """

    epsilon: float
    alpha: float
    n_items: int
    n_ppi: int | None
    n_human_only: int | None
    pilot_n: int
    method: str
    assumptions: tuple[str, ...]
    assurance: float | None = None


def _augmented_var(n, mean, var, lo, hi, mid):
    """The variance (ddof 1) of n points with this mean and (ddof 0) variance plus
    :data:`PSEUDO_PER_END` points at each of lo - mid and hi - mid (arrays over n), as
    :func:`ppi_mean`'s default interval computes it on the labelled data."""
    k = PSEUDO_PER_END
    a, b = lo - mid, hi - mid
    mu = (n * mean + k * (a + b)) / (n + 2 * k)
    return (n * var + n * (mean - mu) ** 2 + k * (a - mu) ** 2 + k * (b - mu) ** 2) / (n + 2 * k - 1)


def _planned_var(n, m, s_j, mu_h, mu_j, s_h, c, *, human_only):
    """V(n), the squared se :func:`ppi_mean`'s default interval is expected to report with n of m judged items
    labelled, at these moments of the (human, judge) pairs (means, Var(Y), Cov(Y, Yhat); s_j = Var(Yhat) over
    all judged items): :func:`plan_human_labels`' formula; lambda = 0 when ``human_only``. Broadcasts (n over
    sizes, the moments over the assurance plan's worlds)."""
    rest = m - n
    if human_only:
        return _augmented_var(n, mu_h, s_h, 0.0, 1.0, 0.0) / n
    lam = np.clip(c / ((1 + n / rest) * s_j), 0.0, 1.0) if s_j > 0 else np.zeros_like(c * n)
    v_d = np.maximum(s_h - 2 * lam * c + lam ** 2 * s_j, 0.0)
    return _augmented_var(n, mu_h - lam * mu_j, v_d, 0.0, 1.0, lam * mu_j) / n + lam ** 2 * s_j / rest


def plan_human_labels(human, judge_labelled, judge_all, *, epsilon: float, alpha: float = 0.05,
                      assurance: float | None = None, rng=None) -> HumanLabelPlan:
    """Labels needed for a +-``epsilon`` interval, from a pilot of doubly-scored items.

    With pilot moments s_h^2 = Var(Y), s_j^2 = Var(Yhat) (all judged items), c = Cov(Y, Yhat),
    the means mu_h, mu_j and M judged items, labelling n of them leaves N = M - n judge-only items;
    the tuned lambda(n) = c / ((1 + n/N) s_j^2) (clipped to [0, 1]) gives the rectifier variance
    v(n) = s_h^2 - 2 lambda c + lambda^2 s_j^2 with mean mu_h - lambda mu_j, which is augmented
    with the pseudo-pairs of :func:`ppi_mean`'s default interval (2 rectifier values 0 - lambda mu_j
    and 2 of 1 - lambda mu_j; variance with ddof 1 over the n + 4 points) to v~(n), and
    V(n) = v~(n) / n + lambda^2 s_j^2 / N; n_ppi is the least n >= :data:`MIN_HUMAN_LABELS` with
    t_{1-alpha/2, n-1} sqrt(V(n)) <= epsilon, the interval :func:`ppi_mean` reports by default.
    Human-only: the same with lambda = 0.  A plan, not a guarantee: it trusts the pilot's moments.

    That n is the typical outcome: the half-width :func:`ppi_mean` reports is itself random (it is
    estimated from the labels), and at that n half of the label sets or fewer reach epsilon
    (40-57% in issue #36's checks; 29.0% [25.1, 33.2] to 45.8% [41.4, 50.3] in its slow studies). With
    ``assurance`` (e.g. 0.8) the plan is instead the least n (not below the typical plan) at which that
    share of (pilot, label set) pairs reach it: the sample-size "assurance" of O'Hagan, Stevens and
    Campbell (2005, *Pharm. Stat.* 4), here for a width and in its frequentist sense (over pilots as well
    as label sets), as Harris, Horvitz and Mood (1948, *JASA* 43) plan a width from a pilot variance with
    the pivot S_n^2 / s_pilot^2 ~ F(n - 1, m - 1) of normal data. Scores here are not normal, so the
    pivot is bootstrapped (module functions ``_world``, ``_studentized_scale``):

    * a world: Dirichlet weights w on the m pilot pairs (Rubin's 1981 Bayesian bootstrap), n labelled pairs
      drawn from it and the N = M - n unlabelled judge scores resampled from ``judge_all``; on each label
      set :func:`ppi_mean`'s half-width (or the human-only one) is computed as reported;
    * the pilot's error, by the bootstrap-t (Efron 1981; Hall 1988, *Ann. Statist.* 16, second-order
      correct for one-sided bounds): with g = log V(n) (V the typical plan's formula above at plug-in
      moments) and se(g) its infinitesimal-jackknife standard error (Jaeckel 1972; Efron 1982, ch. 6;
      the gradient in the four moments times their influence values), the world's g* and se(g*) give
      t* = (g* - g^) / se(g*), and the truth's planned variance is drawn as exp(g^ - se(g^) t*); the label
      set's half-width is scaled by exp((g^ - se(g^) t* - g*) / 2) to that world.

    Deliberate departure from the plain Bayesian bootstrap (the planner before): taking the world's own
    g* for the truth's is the percentile method, which reverses the pivot's skew and whose spread does not
    follow the pilot's (with few labels or a rate near 0 or 1 a pilot that understates the variance also
    understates its spread); over pilots it put the truth below the worlds' 80th percentile in 71.5-73.0%
    and delivered 78.8% [75.0, 82.3] of 80%; the bootstrap-t worlds, 78.2-83.3%, and the plan 84.0-87.4%
    (above the share it asks, held but not spent; tests/stats/test_ppi.py, docs/analyses.md). The
    scaling treats the reported half-width as proportional to sqrt(V(n)): an approximation (the score
    form's hull and the clipping to [0, 1] break it most near 0 or 1). :data:`ASSURANCE_DRAWS` = 400
    worlds per n, the same worlds and nested label sets at every n; margin for the Monte-Carlo error of
    the share: n is the least size at which its one-sided 90% Clopper-Pearson lower bound is at least
    ``assurance`` (331 of 400 label sets for 0.8; the first n where the plain share reaches 0.8 lands, on average, on the share's 320th of
    400 order statistic, about 79.8%, and below 80% half the time). ``rng`` (a numpy Generator; default
    seeded) draws them.

    A pilot whose human labels are all equal (all ones from a human rate of 0.97 in 16% of pilots of 60) has no
    variance to bootstrap: every world would be the pilot (se 0, scale 1) and the plan the typical one, which
    then delivered 13% at epsilon 0.03. The assurance plan warns (:class:`DegenerateDataWarning`) and plans at
    the one-sided 90% Clopper-Pearson bound on the human rate toward 1/2 instead (0.1 ** (1/60) = 0.9624 for 60
    ones): fixed worlds of 0/1 labels at that rate (the largest variance a [0, 1] score has at it) beside judge
    scores drawn from the pilot's apart from them (the pilot cannot show their covariance).
    """
    y = _vector(human, "human", 0.0, 1.0)
    yh = _vector(judge_labelled, "judge_labelled", 0.0, 1.0)
    ja = _vector(judge_all, "judge_all", 0.0, 1.0)
    if yh.size != y.size:
        raise ValueError(f"judge_labelled must have one judge score per human score ({y.size}); got {yh.size}")
    if y.size < 2:
        raise ValueError(f"human must hold at least 2 pilot labels; got {y.size}")
    if ja.size < y.size + 1:
        raise ValueError(f"judge_all must hold every judged item (more than the {y.size} labelled); got {ja.size}")
    check_unit_interval("epsilon", epsilon)
    alpha = check_alpha(alpha)
    from scipy import stats

    m = ja.size
    moments = (float(y.mean()), float(yh.mean()), float(np.var(y, ddof=1)), float(np.cov(y, yh, ddof=1)[0, 1]))
    n = np.arange(MIN_HUMAN_LABELS, m, dtype=float)
    q = stats.t.ppf(1 - alpha / 2, n - 1)
    s_j = float(np.var(ja, ddof=1))
    ok = np.flatnonzero(q * np.sqrt(_planned_var(n, m, s_j, *moments, human_only=False)) <= epsilon)
    n_ppi = int(n[ok[0]]) if ok.size else None
    ok_h = np.flatnonzero(q * np.sqrt(_planned_var(n, m, s_j, *moments, human_only=True)) <= epsilon)
    n_h = int(n[ok_h[0]]) if ok_h.size else None
    method = (f"PPI++ variance with pilot moments (t quantile, pseudo-observations; at least {MIN_HUMAN_LABELS} "
              "labels)")
    if assurance is not None:
        assurance = check_unit_interval("assurance", assurance)
        if assurance > MAX_ASSURANCE:  # even all ASSURANCE_DRAWS label sets reaching epsilon could not show it
            raise ValueError(f"assurance={assurance!r}: at most {MAX_ASSURANCE:.4f} can be planned with "
                             f"{ASSURANCE_DRAWS} draws per n (the share's {100 * ASSURANCE_CONFIDENCE:g}% lower bound "
                             "when every draw reaches the half-width)")
        rng = np.random.default_rng(20261128) if rng is None else rng
        seed = int(rng.integers(2**62))
        rate = _constant_pilot_rate(y)
        n_ppi = _assured_n(y, yh, ja, epsilon, alpha, assurance, seed, n_ppi, human_only=False, rate=rate)
        n_h = _assured_n(y, yh, ja, epsilon, alpha, assurance, seed, n_h, human_only=True, rate=rate)
        method = (f"least n, not below the typical plan, at which {100 * assurance:g}% of label sets drawn from "
                  "worlds the pilot makes plausible (Bayesian bootstrap; the pilot's error by a bootstrap-t of the "
                  "planned variance) reach the half-width "
                  f"({ASSURANCE_DRAWS} draws per n, the share's {100 * ASSURANCE_CONFIDENCE:g}% lower bound; the "
                  f"interval ppi_mean reports; at least {MIN_HUMAN_LABELS} labels)")
        if rate is not None:
            method += (f"; the pilot's human labels all equal: 0/1 labels at the rate {rate:.4f}, its one-sided "
                       f"{100 * ASSURANCE_CONFIDENCE:g}% Clopper-Pearson bound toward 1/2, judge scores unrelated")
    return HumanLabelPlan(epsilon=float(epsilon), alpha=alpha, n_items=m, n_ppi=n_ppi, n_human_only=n_h,
                          pilot_n=y.size, method=method,
                          assumptions=(MCAR, "the pilot's judge-human covariance holds for the items still to label"),
                          assurance=assurance)


#: Label sets drawn per candidate n by the assurance plan.
ASSURANCE_DRAWS = 400

#: The assurance plan's margin for its own Monte-Carlo error: a plan is the least n at which the
#: one-sided Clopper-Pearson lower bound, at this confidence, of the share of the ASSURANCE_DRAWS
#: label sets that reach epsilon is at least the asked assurance (for 0.8: 331 of 400, not 320).
ASSURANCE_CONFIDENCE = 0.9

#: The highest assurance that can be planned: the lower bound above when all draws reach epsilon, 0.1 ** (1 / 400).
MAX_ASSURANCE = (1 - ASSURANCE_CONFIDENCE) ** (1 / ASSURANCE_DRAWS)


def _hits_needed(assurance: float) -> int:
    """The least count k of ASSURANCE_DRAWS with Beta^{-1}(1 - ASSURANCE_CONFIDENCE; k, D - k + 1) >= assurance
    (the one-sided Clopper-Pearson lower bound); all D when no count reaches it (above MAX_ASSURANCE, refused)."""
    from scipy import stats

    d = ASSURANCE_DRAWS
    k = np.arange(1, d + 1)
    ok = np.flatnonzero(stats.beta.ppf(1 - ASSURANCE_CONFIDENCE, k, d - k + 1) >= assurance)
    return int(k[ok[0]]) if ok.size else d


def _world(pilot_n: int, n: int, seed: int, draw: int) -> tuple[np.ndarray, np.ndarray]:
    """Draw ``draw``'s world and its n label indices into the pilot: Dirichlet weights on the pilot pairs
    (the Bayesian bootstrap of Rubin 1981), then n labels from them. The same world at every n and nested
    label sets (the first n of one sequence): common random numbers across n, so the share grows with n as
    the half-width shrinks instead of jittering by its Monte-Carlo error, whose low side the search would
    otherwise pick (issue #36: 72.5% for 80%). Returns (weights, label indices)."""
    world = np.random.default_rng([seed, draw])
    weights = world.dirichlet(np.ones(pilot_n))
    return weights, world.choice(pilot_n, n, p=weights)


def _log_planned_var(y, yh, weights, n, m, s_j, human_only) -> tuple[np.ndarray, np.ndarray]:
    """(log V(n), its standard error) at the pilot pairs weighted by ``weights`` (rows: worlds; each sums to
    1), V(n) being :func:`_planned_var` at the weighted plug-in moments; the standard error by the
    infinitesimal jackknife (Jaeckel 1972; Efron 1982, ch. 6): the gradient of log V(n) in the four moments
    (central differences) times their empirical influence values, sum_i w_i IF_i^2 / (pilot size)."""
    mu_h, mu_j = weights @ y, weights @ yh
    dh, dj = y - mu_h[:, None], yh - mu_j[:, None]
    s_h, c = np.sum(weights * dh ** 2, -1), np.sum(weights * dh * dj, -1)
    mom = np.stack([mu_h, mu_j, s_h, c])
    influence = np.stack([dh, dj, dh ** 2 - s_h[:, None], dh * dj - c[:, None]])  # per moment, world, pair
    log_v = lambda x: np.log(_planned_var(n, m, s_j, *x, human_only=human_only))  # noqa: E731
    step = 1e-6
    grad = np.stack([(log_v(mom + step * e[:, None]) - log_v(mom - step * e[:, None])) / (2 * step)
                     for e in np.eye(4)])
    effect = np.einsum("kd,kdi->di", grad, influence)
    return log_v(mom), np.sqrt(np.sum(weights * effect ** 2, -1) / y.size)


def _studentized_scale(y, yh, weights, n, m, s_j, human_only) -> np.ndarray:
    """Per world (rows of ``weights``), the factor on its reported half-width that turns the world's planned
    variance g* = V(n) into the bootstrap-t draw of the truth's: log g = log g^ - se(g^) t*, with
    t* = (log g* - log g^) / se(g*) (:func:`plan_human_labels`; g^ and se at the pilot's equal weights)."""
    pilot, se = _log_planned_var(y, yh, np.full((1, y.size), 1.0 / y.size), n, m, s_j, human_only)
    world, se_world = _log_planned_var(y, yh, weights, n, m, s_j, human_only)
    t = np.divide(world - pilot, se_world, out=np.zeros_like(world), where=se_world > 0)
    return np.exp((pilot - se * t - world) / 2)


def _constant_pilot_rate(y) -> float | None:
    """None when the pilot's human labels vary; when they are all equal, warn and return the rate the assurance
    plan assumes instead: the one-sided :data:`ASSURANCE_CONFIDENCE` Clopper-Pearson bound on the human rate
    toward 1/2 (x = sum of the m labels: Beta^{-1}(0.1; x, m - x + 1) above 1/2, Beta^{-1}(0.9; x + 1, m - x)
    below; 0.1 ** (1 / m) for m ones), not past 1/2.

    Why: such a pilot has no human-label variance, so every bootstrap world is the pilot itself (se 0, scale 1)
    and the assurance plan was silently the typical one (issue #36's review: human rate 0.97, a pilot of 60
    all ones - 16% of such pilots - delivered 13% at epsilon 0.03). Labels of 0 and 1 at the bound carry the
    largest variance a score in [0, 1] can have at that rate; as a 90% confidence bound, over pilots it falls on
    1/2's side of the truth (a larger label variance) at least 90% of the time. A constant fractional label uses the same formula at its sum (no exact count): a
    conservative reading, not a Clopper-Pearson guarantee."""
    if np.ptp(y) > 0:
        return None
    from scipy import stats

    m, x = y.size, float(y.sum())
    if 2 * x > m:
        rate = max(0.5, float(stats.beta.ppf(1 - ASSURANCE_CONFIDENCE, x, m - x + 1)))
    elif 2 * x < m:
        rate = min(0.5, float(stats.beta.ppf(ASSURANCE_CONFIDENCE, x + 1, m - x)))
    else:
        rate = 0.5
    warnings.warn(DegenerateDataWarning(
        f"all {m} pilot human labels are {y[0]:g}: the pilot shows no human-label variance, so the assurance plan "
        f"cannot bootstrap its error; it plans at the human rate {rate:.4f} (the one-sided "
        f"{100 * ASSURANCE_CONFIDENCE:g}% Clopper-Pearson bound toward 1/2), 0/1 labels and judge scores unrelated "
        "to them; a pilot with both labels would answer"), stacklevel=3)
    return rate


def _bound_world(ja_pilot, n, seed, draw, rate) -> tuple[np.ndarray, np.ndarray]:
    """A label set of n at a constant pilot's bound (:func:`_constant_pilot_rate`): 0/1 human labels at ``rate``
    and judge scores drawn from the pilot's apart from them (its covariance is unknown, so the judge is taken
    to say nothing: lambda near 0, the human labels alone). Nested across n, as :func:`_world`'s."""
    labels = np.random.default_rng([seed, draw, 2]).random(n) < rate
    judge = (np.random.default_rng([seed, draw, 3]).random(n) * ja_pilot.size).astype(int)
    return labels.astype(float), ja_pilot[judge]


def _assured_hits(y, yh, ja, n, epsilon, alpha, seed, human_only, rate=None) -> int:
    """How many of ASSURANCE_DRAWS label sets of size n (pairs drawn by :func:`_world`, or by
    :func:`_bound_world` when ``rate`` is given, the unlabelled judge scores resampled from ``ja``) give a
    reported half-width (:func:`ppi_mean`'s default interval, or the human-only one beside it) of at most
    epsilon; the draws in batches of about 4 million scores."""
    q = _quantile(alpha, n, "t")
    big_n = ja.size - n
    s_j = float(np.var(ja, ddof=1))
    block = max(1, 4_000_000 // big_n)
    hits = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for first in range(0, ASSURANCE_DRAWS, block):
            draws = range(first, min(first + block, ASSURANCE_DRAWS))
            rest = ja[np.stack([np.random.default_rng([seed, d, 1]).integers(0, ja.size, big_n) for d in draws])]
            if rate is None:
                weights, pick = (np.stack(a) for a in zip(*(_world(y.size, n, seed, d) for d in draws)))
                lab, lab_j = y[pick], yh[pick]
                scale = _studentized_scale(y, yh, weights, n, ja.size, s_j, human_only)
            else:  # a fixed world at the bound: nothing of the pilot's error left to scale for
                lab, lab_j = (np.stack(a) for a in zip(*(_bound_world(yh, n, seed, d, rate) for d in draws)))
                scale = 1.0
            lam = np.zeros(len(draws)) if human_only else _tuned_lambda(lab, lab_j, rest)
            _, _, lower, upper = _interval(lab, lab_j, rest, lam, q, "t", 0.0, 1.0)
            hits += int(np.sum((upper - lower) / 2 * scale <= epsilon))
    return hits


def _assured_n(y, yh, ja, epsilon, alpha, assurance, seed, start, *, human_only, rate=None) -> int | None:
    """The least n >= ``start`` (the typical plan) at which the label sets reaching epsilon number at least
    :func:`_hits_needed` of ASSURANCE_DRAWS: steps of an eighth (the plan is typically 5-10% above the typical
    one), then bisection; None when not even all but one item. ``rate``: a constant pilot's bound
    (:func:`_constant_pilot_rate`), the label sets drawn at it."""
    top = ja.size - 1
    if start is None or start > top:
        return None
    need = _hits_needed(assurance)
    ok = lambda k: _assured_hits(y, yh, ja, k, epsilon, alpha, seed, human_only, rate) >= need  # noqa: E731
    lo, hi = start - 1, start
    while not ok(hi):
        if hi >= top:
            return None
        lo, hi = hi, min(top, hi + max(1, hi // 8))
    return max(smallest_passing(ok, lo, hi), MIN_HUMAN_LABELS)
