r"""The suite score: a weighted mean of per-benchmark gaps, benchmarks as fixed strata.

A suite's score is :math:`S = \sum_b w_b\,\theta_b` with :math:`\theta_b` benchmark b's
item-weighted gap (candidate - baseline; each benchmark's subjects its own fixed strata) and
fixed weights :math:`w_b \ge 0`, :math:`\sum_b w_b = 1` (equal unless the suite names them). The
benchmarks are the suite's strata, not a sample of benchmarks: the question is "is the candidate
better on this suite", not "on benchmarks like these".

Pure numpy/scipy; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr, ndtri

from .comparisons.power import additional_sample_size, minimum_detectable_effect
from .validation import check_alpha, check_power

__all__ = ["SuiteScore", "suite_score"]


@dataclass(frozen=True)
class SuiteScore:
    r"""The suite's weighted gap with its normal interval and verdict.

    Attributes
    ----------
    estimate, se, lower, upper, p_value : float
        :math:`\hat S`, its standard error, the two-sided 1 - alpha interval and p-value.
    verdict : str
        ``improved`` (lower > 0), ``regressed`` (upper < 0) or ``inconclusive``.
    weights : ndarray
        The normalised weights, one per benchmark.
    mde : float
        The smallest suite gap the test detects with ``power`` at the present items.
    more_items : int or None
        Items to add over the suite (spread like the present ones) for ``power`` at the observed
        gap, when the verdict is inconclusive (:func:`benchcert.stats.comparisons.additional_sample_size`).
    n : int
        Benchmarks.
    n_items : int
        Shared items over the suite.
    alpha, power : float
    method : str
    assumptions : tuple of str
    """

    estimate: float
    se: float
    lower: float
    upper: float
    p_value: float
    verdict: str
    weights: np.ndarray
    mde: float
    more_items: int | None
    n: int
    n_items: int
    alpha: float
    power: float
    method: str
    assumptions: tuple[str, ...]


def _iv(gaps, se, n_items, weights, alpha, power):
    alpha, power = check_alpha(alpha), check_power(power)
    try:
        g = np.asarray(gaps, dtype=float)
        s = np.asarray(se, dtype=float)
        n = np.asarray(n_items, dtype=np.int64)
    except (TypeError, ValueError) as exc:
        raise ValueError("gaps, se and n_items must be numeric") from exc
    if g.ndim != 1 or g.size == 0:
        raise ValueError(f"gaps must be a non-empty 1-D array (one per benchmark); got shape {g.shape}")
    if s.shape != g.shape or n.shape != g.shape:
        raise ValueError(f"se and n_items must have the shape of gaps {g.shape}; got {s.shape}, {n.shape}")
    if not np.all(np.isfinite(g)) or not np.all(np.isfinite(s)) or np.any(s < 0) or np.any(np.abs(g) > 1):
        raise ValueError("gaps must be finite gaps in [-1, 1] and se finite and >= 0")
    if np.any(n < 1):
        raise ValueError(f"n_items must be >= 1 per benchmark; got {n.min()}")
    if weights is None:
        w = np.full(g.size, 1.0 / g.size)
    else:
        w = np.asarray(weights, dtype=float)
        if w.shape != g.shape or not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
            raise ValueError(f"weights must be {g.size} finite values >= 0, not all 0; got {weights!r}")
        w = w / w.sum()
    return g, s, n, w, alpha, power


def suite_score(gaps, se, n_items, *, weights=None, alpha=0.05, power=0.8) -> SuiteScore:
    r"""The suite's weighted gap, its 1 - alpha interval and verdict.

    Parameters
    ----------
    gaps, se : array_like, shape (m,)
        Each benchmark's item-weighted gap and its standard error (subjects as fixed strata:
        ``stratified_items``; the paired CLT without subjects).
    n_items : array_like of int, shape (m,)
        Shared items behind each gap.
    weights : array_like, shape (m,), optional, keyword-only
        Fixed weights (normalised to sum 1); default equal.
    alpha, power : float, keyword-only

    Returns
    -------
    SuiteScore

    Notes
    -----
    :math:`\hat S = \sum_b w_b \hat\theta_b`, :math:`SE(\hat S)^2 = \sum_b w_b^2 SE_b^2`: the
    benchmarks are independent samples of items (different items, so their estimates are
    independent given the models), and the interval is :math:`\hat S \pm z_{1-\alpha/2} SE`. Each
    :math:`\hat\theta_b` is a stratified mean of many items, so the normal reference is that of the
    per-benchmark intervals summed over m independent strata (it only gets better with m). The
    verdict is read off the interval, like every benchmark's. The MDE and "more items" use the one
    power rule (:func:`benchcert.stats.comparisons.power_sample_size`) with the suite's SE and its
    total of items: items added to every benchmark in the present proportions.
    """
    g, s, n, w, alpha, power = _iv(gaps, se, n_items, weights, alpha, power)
    est = float(w @ g)
    se_s = float(np.sqrt(np.sum(w * w * s * s)))
    z = float(ndtri(1.0 - alpha / 2.0))
    lo, hi = max(-1.0, est - z * se_s), min(1.0, est + z * se_s)
    p = float(2.0 * ndtr(-abs(est) / se_s)) if se_s > 0 else float(est == 0)
    verdict = "improved" if lo > 0 else "regressed" if hi < 0 else "inconclusive"
    total = int(n.sum())
    mde = float(minimum_detectable_effect(se_s, total, alpha=alpha, power=power).estimate)
    more = None
    if verdict == "inconclusive":
        more = additional_sample_size(se_s, total, est, alpha=alpha, power=power).more
    return SuiteScore(estimate=est, se=se_s, lower=lo, upper=hi, p_value=p, verdict=verdict, weights=w, mde=mde,
                      more_items=more, n=int(g.size), n_items=total, alpha=alpha, power=power,
                      method="stratified_benchmarks_normal",
                      assumptions=("benchmarks are fixed strata with fixed weights; the suite score is the weighted "
                                   "mean of their item-weighted gaps",
                                   "each benchmark's gap estimate independent of the others' (different items) and "
                                   "approximately normal with the standard error its comparison reports"))
