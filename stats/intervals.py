"""Comparator intervals that eval users already know (the exchangeable-bounds paper's Table 3 comparators).

These are reported beside benchcert's exchangeable bounds so that users can see
what each familiar interval assumes and where it goes wrong:

* ``iid_clt`` - the textbook p +/- z sqrt(p(1-p)/n) (paper Table 3 "iid item half-width"), with
  the sample variance of the item scores in place of p(1-p) for fractional scores;
* ``wilson`` - the Wilson score interval (valid at small n, never zero width);
* ``clustered_subject`` - the cluster-robust SE by subject (Miller 2024, inspect_ai);
* ``lm_eval_group`` - lm-evaluation-harness' pooled group stderr, which ignores
  between-subject spread and is therefore too narrow on heterogeneous benchmarks.

Each for one model here; all four for every model of a score matrix at once in
:mod:`benchcert.stats.comparator_intervals`.

Pure numpy/scipy; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import ndtri
from benchcert.stats._dist import t as _st_t  # scipy.stats.t without its import cost

from ._common import cr2_mean
from .degenerate import Ref, warn_degenerate
from .validation import as_float_array, check_alpha, check_codes, check_scores

__all__ = [
    "IntervalResult",
    "iid_interval",
    "wilson_interval",
    "clustered_interval",
    "lm_eval_group_interval",
]


@dataclass(frozen=True)
class IntervalResult:
    """A two-sided 1 - alpha confidence interval for a mean score.

    Attributes
    ----------
    estimate : float or ndarray
        The point estimate (pooled or macro mean).
    lower, upper : float or ndarray
        Interval end points, always inside [0, 1].
    half_width : float or ndarray
        For the normal-approximation methods ``z_{1-alpha/2} * se`` before
        clipping to [0, 1] (the number papers tabulate); for ``wilson`` half the
        length of the (asymmetric) interval.
    alpha : float
        Miscoverage level.
    n : int or ndarray
        Items used.
    method : str
        ``"iid_clt"``, ``"wilson"``, ``"clustered_subject"`` or ``"lm_eval_group"``.
    assumptions : tuple of str
        What must hold for the interval to cover at 1 - alpha.
    n_clusters : int or ndarray, optional
        Clusters (subjects) used, for ``clustered_subject`` and ``lm_eval_group``.
    se : float or ndarray, optional
        The standard error behind a normal-approximation interval (None for wilson).
    weighting : str, optional
        ``"pooled"`` or ``"macro"``: which estimate the interval is about.
    """

    estimate: np.ndarray | float
    lower: np.ndarray | float
    upper: np.ndarray | float
    half_width: np.ndarray | float
    alpha: float
    n: np.ndarray | int
    method: str
    assumptions: tuple[str, ...]
    n_clusters: np.ndarray | int | None = None
    se: np.ndarray | float | None = None
    weighting: str | None = None


_WEIGHTINGS = ("pooled", "macro")

# The largest standard deviation any [0, 1]-valued variable (hence any mean of
# such variables, however dependent) can have; used where no SE is estimable.
_WORST_CASE_SE = 0.5
_SE_ZERO = 1e-12

_IID_BASE = (
    "items are independent draws from a single item population (no subject clustering)",
    "normal (CLT) approximation to the sampling distribution of the mean; unreliable for "
    "small n or an estimate near 0 or 1 (use wilson there)",
)
_IID_BINARY = ("item variance p(1-p): the variance of binary (0/1) scores with mean p (the paper's "
               "Table 3 convention)")
_IID_SAMPLE = ("item variance: the sample variance of the item scores (ddof = 1), for fractional scores; "
               "p(1-p) is only an upper bound there (1.6-2.3x too wide on judge scores)")
_IID_ASSUMPTIONS = _IID_BASE + (_IID_BINARY,)

_IID_FRACTIONAL_NOTE = (
    "in comparator_intervals, models with binary scores use p(1-p) and models with non-binary "
    "scores the sample variance of their item scores (ddof = 1), as iid_interval(item_var=) does"
)
_WILSON_BINARY_NOTE = "in comparator_intervals, reported only for models whose scores are all 0/1 (NaN otherwise)"

_WILSON_ASSUMPTIONS = (
    "items are independent Bernoulli draws; a non-binary mean score is plugged in as if it "
    "were a proportion of binary scores, which overstates the item variance (errs wide)",
    "inverts the score test, so it stays valid at small n and is never zero width",
    "ignores subject clustering, exactly like iid_clt",
)

_CLUSTERED_ASSUMPTIONS = (
    "subjects are independent draws from a population of subjects; items inside a subject "
    "may be arbitrarily dependent",
    "target is the population mean E[score] over fresh subjects and items, not the mean of "
    "the realised subjects",
    "approximation across clusters: with fewer than about 30 subjects the SE is noisy and the "
    "interval wide",
    "departure from Miller (2024) and inspect_ai stderr(cluster=) (CR1, normal critical value, "
    "about half a point under nominal): pooled weights use the CR2 small-sample correction with "
    "Bell-McCaffrey degrees of freedom, macro weights CR1 (= CR2 there) with C - 1 df, and a Student "
    "t critical value - the same reference as the clustered comparisons",
)

_CLUSTERED_WEIGHTING = {
    "pooled": "pooled weights w_i = 1/n: every item counts equally",
    "macro": "macro weights w_i = 1/(C m_c): every subject counts equally; the SE reduces "
    "to SD(subject means)/sqrt(C)",
}

_LM_EVAL_ASSUMPTIONS = (
    "reproduces lm-evaluation-harness pooled_sample_stderr for a size-weighted group mean",
    "uses only the pooled within-subject variance: between-subject spread is ignored, so "
    "the interval is too narrow whenever subjects differ in difficulty",
    "items independent given their subject; subjects treated as fixed",
    "normal (CLT) approximation",
)

_CLUSTERED_ZERO = "every subject's weighted residual sum is 0 (e.g. all scores equal)"
_LM_EVAL_ZERO = "every subject's scores are constant (no within-subject variance)"

_MACRO_N_NOTE = (
    "for the macro estimate n counts items, as in the paper's Table 3; this ignores that "
    "subjects, not items, are weighted equally"
)


# --------------------------------------------------------------------------------------
# shared helpers


def _z(alpha: float) -> float:
    return float(ndtri(1.0 - alpha / 2.0))


def _t_crit(alpha: float, df):
    """Student t critical value: the clustered intervals' small-sample reference, the same as
    the clustered comparisons' (stats/comparisons.py)."""
    return _st_t.ppf(1.0 - alpha / 2.0, df)


def _where(mask: np.ndarray, kind: str) -> tuple[str, tuple[Ref, ...]]:
    """Say which entries a warning is about: a template fragment and its refs; nothing for a
    scalar result."""
    if mask.ndim == 0:
        return "", ()
    return " ({})", (Ref(kind, np.flatnonzero(mask)),)


def _out(x):
    """Unwrap 0-d arrays so scalar inputs give plain Python floats."""
    x = np.asarray(x)
    return float(x) if x.ndim == 0 else x


def _out_int(x):
    x = np.asarray(x)
    if x.ndim == 0:
        v = float(x)
        return int(v) if v.is_integer() else v
    return x


def _clt(est, se, ok, z, *, label: str, method: str, reason: str, zero_reason: str,
         stacklevel: int = 4):
    """Normal-approximation interval est +/- z se, clipped to [0, 1].

    Where ``ok`` is False the SE is not estimable; the interval is then the
    trivial [0, 1], the only statement valid for every [0, 1]-valued mean, with
    se = 1/2 (the largest SD such a mean can have) and half_width =
    max(est, 1 - est) so that est +/- half_width spans exactly [0, 1].
    """
    # Copy so that results built from one estimate array never alias each other.
    est = np.array(est, dtype=float)
    ok = np.asarray(ok, dtype=bool)
    se = np.where(ok, np.asarray(se, dtype=float), _WORST_CASE_SE)
    # Where the exact variance is 0, rounding in theta leaves an SE of ~1e-17; snap it so
    # the zero-width case is reported. No real SE of a [0, 1] mean is this small.
    se = np.where(se < _SE_ZERO, 0.0, se)
    hw = np.where(ok, z * se, np.maximum(est, 1.0 - est))
    lower = np.clip(est - hw, 0.0, 1.0)
    upper = np.clip(est + hw, 0.0, 1.0)
    if not ok.all():
        where, refs = _where(~ok, label)
        warn_degenerate(
            f"{method}: {reason}" + where + "; returning the worst-case interval [0, 1] (se = 0.5)",
            *refs,
            stacklevel=stacklevel,
        )
    zero = ok & (hw == 0.0)
    if zero.any():
        where, refs = _where(zero, label)
        warn_degenerate(
            f"{method}: zero-width interval" + where + f" because {zero_reason}; "
            "the data show no uncertainty, which is not the same as none - prefer "
            "wilson_interval or an exchangeable bound",
            *refs,
            stacklevel=stacklevel,
        )
    return est, lower, upper, hw, se


def _clt_result(est, se, ok, crit, *, alpha, n, n_clusters, method: str, assumptions, weighting: str,
                reason: str, zero_reason: str, label: str = "", stacklevel: int = 5) -> IntervalResult:
    """:func:`_clt`'s interval as an :class:`IntervalResult` (0-d values as plain floats).

    ``stacklevel`` counts this frame too, so the warnings name the same caller as :func:`_clt`'s.
    """
    est, lower, upper, hw, se = _clt(est, se, ok, crit, label=label, method=method, reason=reason,
                                     zero_reason=zero_reason, stacklevel=stacklevel)
    return _result(est, lower, upper, hw, se, alpha=alpha, n=n, method=method, assumptions=assumptions,
                   n_clusters=n_clusters, weighting=weighting)


def _result(est, lower, upper, hw, se=None, **fields) -> IntervalResult:
    """An :class:`IntervalResult` of these values, 0-d ones as plain floats; ``fields`` its other fields."""
    return IntervalResult(estimate=_out(est), lower=_out(lower), upper=_out(upper), half_width=_out(hw),
                          se=None if se is None else _out(se), **fields)


def _check_estimate_n(estimate, n):
    p = as_float_array(estimate, "estimate", "numeric", shown="repr")
    if not np.all(np.isfinite(p)):
        raise ValueError(f"estimate must be finite; got {float(p[~np.isfinite(p)].flat[0])!r}")
    bad = (p < 0.0) | (p > 1.0)
    if bad.any():
        raise ValueError(f"estimate must lie in [0, 1]; got {float(p[bad].flat[0])!r}")
    if isinstance(n, (bool, np.bool_)):
        raise ValueError(f"n must be a positive number of items; got {n!r}")
    nn = as_float_array(n, "n", "a positive number of items", shown="repr")
    badn = ~np.isfinite(nn) | (nn <= 0.0)
    if badn.any():
        raise ValueError(f"n must be a positive number of items; got {float(nn[badn].flat[0])!r}")
    try:
        p, nn = np.broadcast_arrays(p, nn)
    except ValueError as exc:
        raise ValueError(
            f"estimate and n must broadcast together; got shapes {p.shape} and {nn.shape}"
        ) from exc
    return p, nn


def _check_weighting(value, name: str) -> str:
    if not isinstance(value, str) or value not in _WEIGHTINGS:
        raise ValueError(f"{name} must be 'pooled' or 'macro'; got {value!r}")
    return value


def _compact(codes: np.ndarray):
    """Map arbitrary non-negative codes to 0..C-1 so empty codes never count as clusters."""
    uniq, inv = np.unique(codes, return_inverse=True)
    return inv.reshape(-1), uniq.size


# --------------------------------------------------------------------------------------
# iid CLT


def _iid_interval_iv(estimate, n, alpha, item_var):
    alpha = check_alpha(alpha)
    p, nn = _check_estimate_n(estimate, n)
    if item_var is None:
        return p, nn, alpha, None
    if isinstance(item_var, (bool, np.bool_)):
        raise ValueError(f"item_var must be a variance of [0, 1] scores; got {item_var!r}")
    v = as_float_array(item_var, "item_var", "numeric", shown="repr")
    try:
        p, nn, v = np.broadcast_arrays(p, nn, v)
    except ValueError as exc:
        raise ValueError(f"item_var must broadcast against estimate and n; got shape {v.shape}") from exc
    # the largest ddof = 1 variance n values in [0, 1] can have: n / (4 (n - 1)) (half 0s, half 1s)
    with np.errstate(divide="ignore"):
        most = np.where(nn > 1, nn / (4.0 * (nn - 1.0)), np.inf)
    bad = ~np.isnan(v) & ~((v >= 0) & (v <= most * (1 + 1e-12)))
    if bad.any():
        raise ValueError(f"item_var must be a sample variance of [0, 1] scores, in [0, n/(4(n-1))], or NaN "
                         f"(not estimable); got {float(v[bad].flat[0])!r}")
    return p, nn, alpha, v


def _iid_core(p, nn, alpha, label, var=None, stacklevel=5):
    """p +/- z sqrt(var / n); var = p(1-p) (binary scores) when None, NaN where not estimable."""
    z = _z(alpha)
    if var is None:
        return _clt(p, np.sqrt(p * (1.0 - p) / nn), np.ones(p.shape, bool), z, label=label, method="iid_clt",
                    reason="", zero_reason="the estimate is 0 or 1, so p(1-p) = 0", stacklevel=stacklevel)
    ok = ~np.isnan(var)
    return _clt(p, np.sqrt(np.where(ok, var, 0.0) / nn), ok, z, label=label, method="iid_clt",
                reason="a single answered item, so the item variance cannot be estimated",
                zero_reason="every answered item has the same score (for binary scores: the estimate is 0 or 1)",
                stacklevel=stacklevel)


def iid_interval(estimate, n, *, alpha=0.05, item_var=None) -> IntervalResult:
    r"""Textbook normal-approximation (Wald) interval for a mean score.

    Parameters
    ----------
    estimate : float or array_like
        Score(s) p in [0, 1] (pooled or macro).
    n : int or array_like
        Number of items behind each estimate (broadcast against ``estimate``).
    alpha : float, keyword-only
        Miscoverage level in (0, 1).
    item_var : float or array_like, optional, keyword-only
        Sample variance of the item scores (ddof = 1), for fractional scores; NaN where it
        cannot be estimated (a single item: the worst-case interval [0, 1] is returned, with a
        warning). Default None: binary scores, item variance p(1-p).

    Returns
    -------
    IntervalResult
        ``method="iid_clt"``; scalars for scalar input, arrays otherwise.

    Notes
    -----
    .. math:: p \pm z_{1-\alpha/2}\sqrt{v/n}, \qquad v = p(1-p) \text{ (binary) or } s^2 \text{ (fractional)},

    clipped to [0, 1]; ``half_width`` is the unclipped :math:`z\,SE`. This is
    the "iid item half-width" baseline of Table 3 in the exchangeable
    bounded-difference benchmarks paper, N = 14,042. Note on that table: it
    prints each model's macro score beside the half-width, but its six
    half-widths are reproduced (to the printed 0.01 pp) only with p = the
    model's *pooled* accuracy from Table 1 (e.g. 45.09% -> 0.82%, 74.36% ->
    0.72%; the macro 76.44% would give 0.70%). Pass whichever estimate you mean.

    For binary scores p(1-p) is the item variance (up to the factor n/(n - 1) of
    ddof = 1), and the paper's Table 3 uses it. For fractional scores (a judge's 0-1 grade,
    a share of unit tests passed) p(1-p) is only an upper bound - Var(X) <= E[X](1 - E[X])
    for X in [0, 1] - and 1.6-2.3x the sample SD on such scores, so the variance must come
    from the scores: pass ``item_var`` (:func:`comparator_intervals` does, per model).

    It assumes independent, identically distributed items and a CLT; it has
    zero width when p is 0 or 1 (warned: use :func:`wilson_interval`).
    """
    p, nn, alpha, v = _iid_interval_iv(estimate, n, alpha, item_var)
    est, lower, upper, hw, se = _iid_core(p, nn, alpha, "entries", var=v)
    return _result(est, lower, upper, hw, se, alpha=alpha, n=_out_int(nn), method="iid_clt",
                   assumptions=_IID_ASSUMPTIONS if v is None else _IID_BASE + (_IID_SAMPLE,))


# --------------------------------------------------------------------------------------
# Wilson


def _wilson_interval_iv(estimate, n, alpha):
    alpha = check_alpha(alpha)
    p, nn = _check_estimate_n(estimate, n)
    return p, nn, alpha


def _wilson_core(p, nn, alpha):
    z = _z(alpha)
    z2n = z * z / nn
    denom = 1.0 + z2n
    center = (p + z2n / 2.0) / denom
    hw = z / denom * np.sqrt(p * (1.0 - p) / nn + z2n / (4.0 * nn))
    # center - hw >= 0 and center + hw <= 1 hold exactly (with equality at p = 0 and
    # p = 1); clip and pin those end points so rounding never leaves 1 - 1e-16.
    lower = np.where(p == 0.0, 0.0, np.clip(center - hw, 0.0, 1.0))
    upper = np.where(p == 1.0, 1.0, np.clip(center + hw, 0.0, 1.0))
    return np.array(p, dtype=float), lower, upper, (upper - lower) / 2.0


def wilson_interval(estimate, n, *, alpha=0.05) -> IntervalResult:
    r"""Wilson score interval for a mean score.

    Parameters
    ----------
    estimate : float or array_like
        Score(s) p in [0, 1].
    n : int or array_like
        Number of items behind each estimate (broadcast against ``estimate``).
    alpha : float, keyword-only
        Miscoverage level in (0, 1).

    Returns
    -------
    IntervalResult
        ``method="wilson"``; ``half_width`` is half the interval length (the
        interval is centred at the shrunken centre below, not at p); ``se`` is None.

    Notes
    -----
    Inverting the score test :math:`|p - \pi| \le z\sqrt{\pi(1-\pi)/n}` gives

    .. math::

        \frac{p + z^2/(2n)}{1 + z^2/n} \;\pm\;
        \frac{z}{1 + z^2/n}\sqrt{\frac{p(1-p)}{n} + \frac{z^2}{4n^2}},
        \qquad z = z_{1-\alpha/2}

    (Wilson 1927; Brown, Cai & DasGupta 2001). Its length is positive even at
    p = 0 or 1, and it covers near nominal on average at small n.

    Departure: for non-binary scores in [0, 1] it is applied to the mean as if
    the scores were binary. Since Var(X) <= E[X](1 - E[X]) for X in [0, 1], this
    overstates the item variance, so the interval errs wide under independence.
    """
    p, nn, alpha = _wilson_interval_iv(estimate, n, alpha)
    return _result(*_wilson_core(p, nn, alpha), alpha=alpha, n=_out_int(nn), method="wilson",
                   assumptions=_WILSON_ASSUMPTIONS)


# --------------------------------------------------------------------------------------
# clustered by subject


def _clustered_interval_iv(scores, clusters, weights, alpha):
    alpha = check_alpha(alpha)
    weights = _check_weighting(weights, "weights")
    s = check_scores(scores, "scores", ndim=1, allow_nan=False)
    codes = check_codes(clusters, "clusters", length=s.shape[0])
    return s, codes, weights, alpha


def clustered_interval(scores, clusters, *, weights="pooled", alpha=0.05) -> IntervalResult:
    r"""Cluster-robust (by subject) normal interval for one model's mean score.

    Parameters
    ----------
    scores : array_like, shape (n,)
        One model's item scores in [0, 1], no missing values.
    clusters : array_like of int, shape (n,)
        Cluster (subject) code of each item; any non-negative integers.
    weights : {"pooled", "macro"}, keyword-only
        Estimate the item-weighted (pooled) or subject-weighted (macro) mean.
    alpha : float, keyword-only
        Miscoverage level in (0, 1).

    Returns
    -------
    IntervalResult
        ``method="clustered_subject"``, with ``n_clusters`` = C and ``se``.

    Notes
    -----
    With item weights :math:`w_i` summing to 1 - :math:`w_i = 1/n` (pooled) or
    :math:`w_i = 1/(C m_c)` for an item of cluster c with :math:`m_c` items
    (macro) - the estimate is :math:`\hat\theta = \sum_i w_i s_i` and

    .. math::

        \widehat{V} = \frac{C}{C-1}\sum_{c=1}^{C}
            \Big(\sum_{i\in c} w_i (s_i - \hat\theta)\Big)^2,\qquad
        \hat\theta \pm z_{1-\alpha/2}\sqrt{\widehat V},

    clipped to [0, 1]. For pooled weights the CR1 form is Miller's
    :math:`SE_{cl} = \sqrt{C/(C-1)\sum_c(\sum_{i\in c}(s_i-\bar s))^2}/n`
    (Miller 2024, "Adding error bars to evals", Eq. for clustered SE;
    inspect_ai ``stderr(cluster=)``). For macro weights it reduces to
    :math:`\mathrm{SD}_{ddof=1}(\bar s_c)/\sqrt{C}`. It is the CR1 sandwich
    estimator of a weighted mean; valid as C grows, for the population mean
    over subjects.

    Degenerate cases: C < 2 leaves the between-cluster variance inestimable;
    the result is the trivial interval [0, 1] (se = 1/2, the largest SD of any
    [0, 1]-valued mean; half_width = max(theta, 1 - theta)) with a
    :class:`DegenerateDataWarning`. A zero variance estimate gives a zero-width
    interval, also warned.
    """
    s, codes, weights, alpha = _clustered_interval_iv(scores, clusters, weights, alpha)
    inv, c = _compact(codes)
    n = s.shape[0]
    m = np.bincount(inv, minlength=c)
    # The weighted sums are written out per weighting (rather than as a dot with w) so
    # that theta is computed by pairwise summation and constant data give exactly 0 and 1.
    if weights == "pooled":
        theta = float(s.mean())
        resid = np.bincount(inv, weights=s - theta, minlength=c) / n
    else:
        means = np.bincount(inv, weights=s, minlength=c) / m
        theta = float(means.mean())
        resid = (means - theta) / c
    if weights == "pooled" and c >= 2:
        var, df = cr2_mean(m[:, None].astype(float), (resid * n)[:, None])
        se, crit = float(np.sqrt(var[0])), float(_t_crit(alpha, df[0]))
    else:
        se = np.sqrt(c / (c - 1) * np.dot(resid, resid)) if c >= 2 else np.nan
        crit = float(_t_crit(alpha, c - 1.0)) if c >= 2 else _z(alpha)
    return _clt_result(
        theta, se, c >= 2, crit, alpha=alpha, n=int(n), n_clusters=int(c), method="clustered_subject",
        assumptions=_CLUSTERED_ASSUMPTIONS + (_CLUSTERED_WEIGHTING[weights],), weighting=weights,
        reason="fewer than 2 clusters, so the between-cluster variance cannot be estimated",
        zero_reason=_CLUSTERED_ZERO,
    )


# --------------------------------------------------------------------------------------
# lm-evaluation-harness group stderr


def _lm_eval_group_interval_iv(scores, clusters, alpha):
    alpha = check_alpha(alpha)
    s = check_scores(scores, "scores", ndim=1, allow_nan=False)
    codes = check_codes(clusters, "clusters", length=s.shape[0])
    return s, codes, alpha


def lm_eval_group_interval(scores, clusters, *, alpha=0.05) -> IntervalResult:
    r"""lm-evaluation-harness' group interval (pooled within-subject variance).

    Parameters
    ----------
    scores : array_like, shape (n,)
        One model's item scores in [0, 1], no missing values.
    clusters : array_like of int, shape (n,)
        Subject (lm-eval subtask) code of each item.
    alpha : float, keyword-only
        Miscoverage level in (0, 1).

    Returns
    -------
    IntervalResult
        ``method="lm_eval_group"``, estimate = pooled mean, ``n_clusters`` = K.

    Notes
    -----
    lm-evaluation-harness (``lm_eval.api.metrics.pooled_sample_stderr``)
    aggregates subtask stderrs :math:`s_k/\sqrt{m_k}` (``s_k`` the ddof=1 SD
    inside subject k) into

    .. math::

        s_p^2 = \frac{\sum_k (m_k - 1) s_k^2}{N - K},\qquad
        SE = \sqrt{s_p^2 / N},

    the pooled *within*-subject variance. Between-subject spread never enters,
    so on a benchmark whose subjects differ in difficulty the interval is too
    narrow (even narrower than iid_clt, whose p(1-p) includes that spread). It
    is reported only to show this.

    Here :math:`(m_k-1)s_k^2` is computed as the within-subject sum of squares,
    so a one-item subject contributes 0 (lm-eval itself would fail on it).
    When N = K (every subject has one item) the pooled variance is 0/0: the
    trivial interval [0, 1] is returned with a :class:`DegenerateDataWarning`.
    """
    s, codes, alpha = _lm_eval_group_interval_iv(scores, clusters, alpha)
    inv, k = _compact(codes)
    n = s.shape[0]
    m = np.bincount(inv, minlength=k)
    means = np.bincount(inv, weights=s, minlength=k) / m
    ss_within = float(np.sum((s - means[inv]) ** 2))
    dof = n - k
    se = np.sqrt(ss_within / dof / n) if dof > 0 else np.nan
    return _clt_result(
        float(s.mean()), se, dof > 0, _z(alpha), alpha=alpha, n=int(n), n_clusters=int(k), method="lm_eval_group",
        assumptions=_LM_EVAL_ASSUMPTIONS, weighting="pooled",
        reason="every subject has a single item (N = K), so the pooled within-subject variance is 0/0",
        zero_reason=_LM_EVAL_ZERO,
    )
