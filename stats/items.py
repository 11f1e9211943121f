r"""Item analysis of one benchmark across models: difficulty, discrimination, inert items and the
permutation test for a broken answer key.

The models are the "respondents" and the items the "questions" of classical test theory
(Lord & Novick 1968, ch. 15; Crocker & Algina 1986, ch. 14):

* :func:`item_statistics` - per item: the share of models correct (difficulty), the models that
  answered, whether every model got the same score (*inert*: the item cannot move a ranking on
  these models), and the corrected item-rest correlation (discrimination);
* :func:`broken_key_test` - per 0/1 item, the one-sided permutation test that its scores are
  *negatively* associated with the models' ability (what a swapped answer key does to a
  discriminating item), exact through the rank-sum distribution, with the Benjamini-Hochberg
  false discovery rate over the benchmark's items.

Pure numpy/scipy; no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as _st

from .comparisons.multiplicity import adjust_pvalues
from .validation import check_scores, check_unit_interval

__all__ = ["EXACT_MAX_MODELS", "BrokenKeyTest", "ItemStatistics", "broken_key_test", "item_statistics",
           "rank_sum_cdf", "rest_scores"]

#: Up to this many models answering an item the rank-sum null distribution is computed exactly
#: (O(n^4) once per distinct n); above it, its normal approximation with a continuity correction.
EXACT_MAX_MODELS = 150


@dataclass(frozen=True)
class ItemStatistics:
    """Per-item classical statistics across models (arrays of shape (n_items,)).

    Attributes
    ----------
    difficulty : share of the answering models' scores (mean score; share correct for 0/1).
    n_models : models that answered the item.
    inert : every answering model got the same score (and at least one answered).
    discrimination : corrected item-rest correlation (NaN for inert items or < 3 models).
    binary : the item's scores are all 0 or 1.
    method, assumptions : what was computed.
    """

    difficulty: np.ndarray
    n_models: np.ndarray
    inert: np.ndarray
    discrimination: np.ndarray
    binary: np.ndarray
    method: str
    assumptions: tuple[str, ...]


@dataclass(frozen=True)
class BrokenKeyTest:
    """The broken-key test of every item (arrays of shape (n_items,)).

    Attributes
    ----------
    p_value : one-sided permutation p-value of "no negative association with ability"
        (NaN: not tested - inert, fewer than 3 models, or fractional scores).
    q_value : Benjamini-Hochberg adjusted p-value over the tested items (NaN where not tested).
    flagged : q_value <= level.
    exact : the p-value is exact (rank-sum distribution), else its normal approximation.
    min_p : the smallest p-value the item's test can give (all right answers on the weakest models):
        :math:`1/\binom{n_i}{k_i}` when exact; an item whose min_p exceeds the BH threshold of a
        single discovery, level / n_tested, cannot be flagged whatever its scores (no power).
    level : the false discovery rate level.
    n_tested : items tested (the family BH adjusts over).
    method, assumptions : what was computed.
    """

    p_value: np.ndarray
    q_value: np.ndarray
    flagged: np.ndarray
    exact: np.ndarray
    min_p: np.ndarray
    level: float
    n_tested: int
    method: str
    assumptions: tuple[str, ...]


def _masked(scores: np.ndarray):
    answered = ~np.isnan(scores)
    x = np.where(answered, scores, 0.0)
    return answered, x


def rest_scores(scores) -> np.ndarray:
    r"""Each model's mean score on its other answered items, per item: the ability proxy of item i.

    Parameters
    ----------
    scores : array_like, shape (n_items, n_models)
        Scores in [0, 1]; NaN = not answered.

    Returns
    -------
    ndarray, shape (n_items, n_models)
        :math:`R_{ij} = (T_j - x_{ij}) / (n_j - 1)` where model j answered item i (:math:`T_j`,
        :math:`n_j` its total and answered items), NaN elsewhere or when it answered only item i.

    Notes
    -----
    The mean rather than the sum, so that models answering different numbers of items are on one
    scale. Leaving item i out ("corrected") keeps the item's own score out of its ability proxy,
    which otherwise inflates its correlation by about :math:`\sqrt{1/n}` (Crocker & Algina 1986,
    sec. 14.4) and, for the broken-key test, would tie the proxy to the tested scores.
    """
    s = check_scores(scores, "scores", ndim=2, allow_nan=True)
    return _rest(s, *_masked(s))


def _rest(s, answered, x):
    total = x.sum(axis=0)
    n = answered.sum(axis=0).astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        rest = (total[None, :] - x) / (n[None, :] - 1.0)
    rest[~answered | (n[None, :] < 2)] = np.nan
    return rest


def _item_statistics_iv(scores):
    return check_scores(scores, "scores", ndim=2, allow_nan=True)


def item_statistics(scores) -> ItemStatistics:
    r"""Difficulty, inert flag and corrected item-rest correlation of every item.

    Parameters
    ----------
    scores : array_like, shape (n_items, n_models)
        Scores in [0, 1]; NaN = not answered.

    Returns
    -------
    ItemStatistics

    Notes
    -----
    Difficulty :math:`p_i = \bar x_{i\cdot}` over the models that answered (the classical
    "p-value" of an item; Lord & Novick 1968, sec. 15.2). Discrimination is the Pearson
    correlation across the answering models of :math:`x_{ij}` with the rest score
    :math:`R_{ij}` (:func:`rest_scores`), the corrected item-total (item-rest) correlation
    (Crocker & Algina 1986, sec. 14.4); for 0/1 items it is the point-biserial correlation.
    It is undefined (NaN) for an inert item (no variance) or with fewer than 3 models.
    """
    s = _item_statistics_iv(scores)
    answered, x = _masked(s)
    rest = _rest(s, answered, x)
    ok = answered & ~np.isnan(rest)
    r0 = np.where(ok, rest, 0.0)
    xo = np.where(ok, x, 0.0)
    n_models = answered.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        difficulty = x.sum(axis=1) / n_models
        lo = np.fmin.reduce(s, axis=1)
        hi = np.fmax.reduce(s, axis=1)
        inert = (n_models > 0) & (lo == hi)
        m = ok.sum(axis=1).astype(float)
        mx = xo.sum(axis=1) / m
        mr = r0.sum(axis=1) / m
        cov = (xo * r0).sum(axis=1) / m - mx * mr
        vx = (xo * xo).sum(axis=1) / m - mx * mx
        vr = (r0 * r0).sum(axis=1) / m - mr * mr
        disc = cov / np.sqrt(vx * vr)
    disc = np.where((m >= 3) & (vx > 1e-15) & (vr > 1e-15) & ~inert, np.clip(disc, -1.0, 1.0), np.nan)
    binary = ((s == 0) | (s == 1) | ~answered).all(axis=1)
    return ItemStatistics(difficulty, n_models, inert, disc, binary, "classical_item_analysis",
                          ("models are the respondents: statistics describe these models, not a population of "
                           "future models", "rest score = the model's mean on its other answered items"))


def rank_sum_cdf(n: int) -> np.ndarray:
    r"""Exact null distribution of the rank sum of k of n distinct ranks, every k at once.

    Parameters
    ----------
    n : int
        Number of ranks (models), 1 <= n <= :data:`EXACT_MAX_MODELS`.

    Returns
    -------
    ndarray, shape (n + 1, n (n + 1) / 2 + 1)
        ``cdf[k, w]`` = :math:`P(W_k \le w)`, :math:`W_k` the sum of a uniformly random k-subset
        of :math:`\{1, \dots, n\}` (the Wilcoxon rank-sum statistic under the null).

    Notes
    -----
    The counts are the coefficients of :math:`\prod_{r=1}^{n} (1 + t z^r)` (Mann & Whitney
    1947), built one rank at a time in floating point (relative precision, no overflow for
    n <= 150), then divided by :math:`\binom{n}{k}`.
    """
    n = int(n)
    if not 1 <= n <= EXACT_MAX_MODELS:
        raise ValueError(f"n must be in [1, {EXACT_MAX_MODELS}]; got {n}")
    top = n * (n + 1) // 2
    f = np.zeros((n + 1, top + 1))
    f[0, 0] = 1.0
    for r in range(1, n + 1):
        f[1:, r:] = f[1:, r:] + f[:-1, :top + 1 - r]
    cdf = np.cumsum(f, axis=1)
    return cdf / cdf[:, -1:]


def _broken_key_test_iv(scores, level, rng):
    s = check_scores(scores, "scores", ndim=2, allow_nan=True)
    level = check_unit_interval("level", level)
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy Generator; got {type(rng).__name__}")
    return s, level, rng


def broken_key_test(scores, *, level=0.10, rng) -> BrokenKeyTest:
    r"""Which items are negatively associated with the models' ability: a permutation test per item
    and the Benjamini-Hochberg false discovery rate over the items.

    Parameters
    ----------
    scores : array_like, shape (n_items, n_models)
        Scores in [0, 1]; NaN = not answered. Only 0/1 items are tested.
    level : float, keyword-only
        The false discovery rate level q of the flags.
    rng : numpy.random.Generator, keyword-only
        Breaks ties between models with equal rest scores (at random, once per item).

    Returns
    -------
    BrokenKeyTest

    Notes
    -----
    For item i, let :math:`R_{ij}` be model j's rest score (:func:`rest_scores`, which does not
    involve item i) and :math:`\rho_j` its rank among the :math:`n_i` answering models (ties
    broken at random). The statistic is :math:`W_i = \sum_{j: x_{ij} = 1} \rho_j`, the
    Wilcoxon rank-sum of the models that got the item right. Under the null that the item's
    scores are exchangeable across models given their rest scores (the item carries no
    information about ability), every :math:`k_i`-subset of ranks is equally likely, so

    .. math:: p_i = P(W_{k_i} \le W_i^{obs})

    is an exact permutation p-value (lower tail: the right answers fall on the weaker models),
    from :func:`rank_sum_cdf`; above :data:`EXACT_MAX_MODELS` models, the normal approximation
    :math:`W \sim N(k(n+1)/2, k(n-k)(n+1)/12)` with a continuity correction. An item whose
    true discrimination is positive (a correct key under any monotone item response model)
    rejects no more often than the level, so the null is one-sided "discrimination >= 0".

    The flags are Benjamini-Hochberg's (1995) step-up at ``level`` over the tested items,
    through :func:`benchcert.stats.comparisons.adjust_pvalues` (method ``"bh"``). BH controls
    the FDR under independence or positive regression dependence (Benjamini & Yekutieli 2001);
    the items' tests share the models' rest scores, a dependence that simulations of a 2PL
    benchmark (tests/stats/test_items_montecarlo.py) show leaves the realised FDR below the level.
    """
    s, level, rng = _broken_key_test_iv(scores, level, rng)
    stats_ = item_statistics(s)
    answered, x = _masked(s)
    rest = _rest(s, answered, x)
    n_i = answered.sum(axis=1)
    k_i = x.sum(axis=1)
    tested = stats_.binary & ~stats_.inert & (n_i >= 3) & ~np.isnan(rest).any(axis=1, where=answered)
    p = np.full(s.shape[0], np.nan)
    exact = np.zeros(s.shape[0], dtype=bool)
    min_p = np.full(s.shape[0], np.nan)
    rows = np.flatnonzero(tested)
    if rows.size:
        # ranks among the answering models, ties broken by a random key; the unanswered sort last
        key = np.where(answered[rows], rest[rows], np.inf)
        order = np.lexsort((rng.random(key.shape), key), axis=1)
        ranks = np.empty_like(order)
        np.put_along_axis(ranks, order, np.arange(1, s.shape[1] + 1)[None, :].repeat(rows.size, 0), axis=1)
        w = (x[rows] * ranks).sum(axis=1)
        n_r, k_r = n_i[rows], np.rint(k_i[rows]).astype(np.int64)
        for n in np.unique(n_r):
            sel = n_r == n
            if n <= EXACT_MAX_MODELS:
                cdf = rank_sum_cdf(int(n))
                p[rows[sel]] = cdf[k_r[sel], np.rint(w[sel]).astype(np.int64)]
                min_p[rows[sel]] = cdf[k_r[sel], k_r[sel] * (k_r[sel] + 1) // 2]
                exact[rows[sel]] = True
            else:
                k = k_r[sel].astype(float)
                mean = k * (n + 1) / 2.0
                sd = np.sqrt(k * (n - k) * (n + 1) / 12.0)
                p[rows[sel]] = _st.norm.cdf((w[sel] + 0.5 - mean) / sd)
                min_p[rows[sel]] = _st.norm.cdf((k * (k + 1) / 2.0 + 0.5 - mean) / sd)
    q = np.full(s.shape[0], np.nan)
    if rows.size:
        q[rows] = adjust_pvalues(np.minimum(p[rows], 1.0), alpha=level, method="bh").p_adjusted
    flagged = np.nan_to_num(q, nan=2.0) <= level
    method = "rank_sum_permutation_bh"
    return BrokenKeyTest(p, q, flagged, exact, min_p, level, int(rows.size), method,
                         ("0/1 items; one-sided: right answers concentrated on the weaker models",
                          "exact permutation p-value across models (rank-sum distribution) up to "
                          f"{EXACT_MAX_MODELS} models, normal approximation above",
                          "Benjamini-Hochberg over the tested items: FDR under independence or positive "
                          "dependence of the items' tests"))


def feldt_interval(alpha_hat: float, n_models: int, n_items: int, *, alpha: float = 0.05) -> tuple[float, float]:
    r"""Feldt's (1965) confidence interval for Cronbach's alpha / KR-20.

    :math:`(1-\hat\alpha)/(1-\alpha) \sim F_{(m-1), (m-1)(I-1)}` for m respondents (models) and I
    items, so the interval is :math:`1 - (1-\hat\alpha) F_{1-\gamma/2}` to
    :math:`1 - (1-\hat\alpha) F_{\gamma/2}` (Feldt, Woodruff & Salih 1987, eq. 1).
    """
    d1, d2 = n_models - 1, (n_models - 1) * (n_items - 1)
    lo = 1.0 - (1.0 - alpha_hat) * _st.f.ppf(1.0 - alpha / 2.0, d1, d2)
    hi = 1.0 - (1.0 - alpha_hat) * _st.f.ppf(alpha / 2.0, d1, d2)
    return float(lo), float(hi)


@dataclass(frozen=True)
class Reliability:
    """Cronbach's alpha (KR-20 for 0/1 items) across models, with Feldt's interval."""

    estimate: float
    lower: float
    upper: float
    alpha: float
    n_models: int
    n_items: int
    sem: float
    method: str
    assumptions: tuple[str, ...]


def reliability(scores, *, alpha=0.05) -> Reliability:
    r"""Cronbach's alpha (KR-20 on 0/1 items) of the benchmark, the models as respondents.

    Parameters
    ----------
    scores : array_like, shape (n_items, n_models)
        Scores in [0, 1]; only the items every model answered enter (NaN elsewhere).
    alpha : float, keyword-only
        1 - confidence level of Feldt's interval.

    Returns
    -------
    Reliability
        ``sem`` is the standard error of measurement of a model's mean score,
        :math:`\sigma_{\bar X}\sqrt{1-\hat\alpha}` (reported for comparison with peers; it is
        not the resolution of a paired comparison).

    Notes
    -----
    :math:`\hat\alpha = \frac{I}{I-1}\left(1 - \frac{\sum_i s_i^2}{s_T^2}\right)` with
    :math:`s_i^2` the item variances and :math:`s_T^2` the variance of the models' totals, both
    over models with ddof = 1 (Cronbach 1951; Kuder & Richardson 1940, formula 20). Feldt's
    interval (:func:`feldt_interval`) assumes normally distributed, essentially tau-equivalent
    parts; with few models it is the usual reference, and with a heterogeneous set of models
    it is approximate.
    """
    s = check_scores(scores, "scores", ndim=2, allow_nan=True)
    alpha = check_unit_interval("alpha", alpha)
    full = s[~np.isnan(s).any(axis=1)]
    n_items, n_models = full.shape
    if n_items < 2 or n_models < 3:
        nan = float("nan")
        return Reliability(nan, nan, nan, alpha, n_models, n_items, nan, "cronbach_alpha_feldt",
                           ("needs >= 2 items every model answered and >= 3 models",))
    item_var = full.var(axis=1, ddof=1).sum()
    total = full.sum(axis=0)
    total_var = float(total.var(ddof=1))
    est = (n_items / (n_items - 1.0)) * (1.0 - item_var / total_var) if total_var > 0 else float("nan")
    lo, hi = feldt_interval(est, n_models, n_items, alpha=alpha) if math.isfinite(est) else (est, est)
    sem = math.sqrt(total_var * max(0.0, 1.0 - est)) / n_items if math.isfinite(est) else float("nan")
    return Reliability(float(est), lo, hi, alpha, n_models, n_items, sem, "cronbach_alpha_feldt",
                       ("models as respondents; items every model answered",
                        "Feldt's F interval: normal, essentially tau-equivalent parts"))
