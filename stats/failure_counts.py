"""Failure-rate upper bounds of many models at once, from per-subject counts (the audit's
``failure_rate_bounds`` table at leaderboard scale).

The same two bounds as :func:`benchcert.stats.failure_rates.failure_rate_upper` (``unequal_rates=True``:
new items from the same subjects) and
:func:`benchcert.stats.failure_rates.failure_rate_upper_new_subjects` (a new subject's expected failure
rate), for every model column of a matrix, computed from the (subject, model) counts of
answered and failed items instead of one call per model on that model's column: the bounds
depend on the items only through those counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from benchcert.stats import _dist as stats  # scipy.stats, imported only when beta is used
from benchcert.stats.validation import check_alpha
from benchcert.stats.failure_rates import _kl_upper

__all__ = ["FailureRateBounds", "failure_rate_bounds"]


@dataclass(frozen=True)
class FailureRateBounds:
    """Per model (arrays of shape (M,), NaN / 0 for a model with no answered item, ``answered``
    False): the two one-sided upper bounds on its failure rate.

    ``failures``, ``n``: failed and answered items; ``estimate``, ``upper``: the item-weighted
    failure rate and its bound for new items from the same subjects (``method``, ``question``);
    ``estimate_new_subjects``, ``upper_new_subjects``: the subject-weighted rate and its bound
    for a new subject (``method_new_subjects``, ``question_new_subjects``), over
    ``effective_subjects`` subjects (those the model answered).
    """

    failures: np.ndarray
    n: np.ndarray
    answered: np.ndarray
    estimate: np.ndarray
    upper: np.ndarray
    estimate_new_subjects: np.ndarray
    upper_new_subjects: np.ndarray
    effective_subjects: np.ndarray
    alpha: float
    method: str = "clopper_pearson_one_sided_unequal_rates"
    question: str = "same_subjects"
    method_new_subjects: str = "cluster_kl_hoeffding_one_sided"
    question_new_subjects: str = "new_subjects"
    assumptions: tuple[str, ...] = ("a failure is an item scored below 1",
                                    "same subjects: items independent given their subject, subjects may differ "
                                    "in difficulty; new subjects: subjects independent draws, each weighing the same")


def failure_rate_bounds(n_km, failed_km, *, alpha: float = 0.05) -> FailureRateBounds:
    r"""Both failure-rate bounds of every model from its answered and failed items per subject.

    Parameters
    ----------
    n_km : array_like of int, shape (K, M)
        Answered items per subject and model.
    failed_km : array_like of int, shape (K, M)
        Failed items (scored below 1) per subject and model, 0 <= failed_km <= n_km.
    alpha : float, keyword-only
        Each bound holds with probability >= 1 - alpha.

    Returns
    -------
    FailureRateBounds

    Notes
    -----
    Model m with :math:`k = \sum_j f_{jm}` failures in :math:`n = \sum_j n_{jm}` answered items:
    ``upper`` is :math:`\max\{\mathrm{Beta}^{-1}(1-\alpha;\,k+1,\,n-k),\ (k+1)/n\}` (1 for
    k = n), the bound of :func:`~benchcert.stats.failure_rates.failure_rate_upper` with
    ``unequal_rates=True`` (Hoeffding 1956, Theorem 4, for unequal rates); ``upper_new_subjects``
    is the relative-entropy Hoeffding bound of
    :func:`~benchcert.stats.failure_rates.failure_rate_upper_new_subjects` around the mean of the
    failure shares :math:`f_{jm}/n_{jm}` of the J subjects the model answered (Hoeffding 1963,
    Theorem 1). Both equal the per-model functions on the model's column to the last bit: the
    quantile is elementwise, the shares are the same integer ratios averaged in the same order,
    and the bisection stops per model (``_kl_upper(..., each=True)``), as a call per model does.
    """
    alpha = check_alpha(alpha)
    n_km = np.asarray(n_km)
    f_km = np.asarray(failed_km)
    if (n_km.ndim != 2 or f_km.shape != n_km.shape or not np.issubdtype(n_km.dtype, np.integer)
            or not np.issubdtype(f_km.dtype, np.integer)):
        raise ValueError(f"n_km and failed_km must be integer arrays of one shape (K, M); got {n_km.dtype} "
                         f"{n_km.shape} and {f_km.dtype} {f_km.shape}")
    if np.any(n_km < 0) or np.any((f_km < 0) | (f_km > n_km)):
        raise ValueError("failed_km must lie in [0, n_km] (and n_km >= 0)")
    n = n_km.sum(axis=0)
    k = f_km.sum(axis=0)
    answered = n > 0
    nn = np.maximum(n, 1)
    estimate = np.where(answered, k / nn, np.nan)
    inner = answered & (k < n)
    upper = np.ones(n.shape)
    upper[inner] = stats.beta.ppf(1.0 - alpha, k[inner] + 1, n[inner] - k[inner])
    upper = np.where(answered, np.maximum(upper, np.minimum(1.0, (k + 1) / nn)), np.nan)
    # Failure share of each answered subject, averaged over those subjects (1-D means, as per model)
    present = n_km > 0
    shares = (f_km / np.where(present, n_km, 1)).T
    J = present.sum(axis=0)
    est_new = np.full(n.shape, np.nan)
    every = J == n_km.shape[0]
    if every.any():
        est_new[every] = np.ascontiguousarray(shares[every]).mean(axis=1)
    for m in np.flatnonzero(answered & ~every):
        est_new[m] = shares[m, present[:, m]].mean()
    upper_new = np.full(n.shape, np.nan)
    if answered.any():
        upper_new[answered] = _kl_upper(est_new[answered], J[answered], math.log(1.0 / alpha), each=True)
    return FailureRateBounds(failures=k.astype(np.int64), n=n.astype(np.int64), answered=answered, estimate=estimate,
                             upper=upper, estimate_new_subjects=est_new, upper_new_subjects=upper_new,
                             effective_subjects=np.where(answered, J, 0).astype(float), alpha=alpha)
