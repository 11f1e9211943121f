"""The frozen results of the subsample guarantees."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["PairedErrorDistribution", "PosthocInterval", "StratifiedErrorSD", "SubsampleBound", "SubsampleErrorDistribution", "WorstCaseBound"]


@dataclass(frozen=True)
class SubsampleBound:
    """A planning half-width for |subset score - full score| at level 1 - alpha.

    Attributes
    ----------
    half_width : float or ndarray
        h such that P(|mean of the subset - full mean| >= h) <= alpha under the assumptions.
    n : int or ndarray
        Subset size(s).
    N : int
        Full benchmark size.
    alpha : float
        Miscoverage level.
    R : float
        Range of one item's score (1 for scores in [0, 1]; 2 for paired differences).
    method : str
        ``"theorem_5_2"``, ``"corollary_5_6"``, ``"barber_nonnegative"``,
        ``"barber_signed"``, ``"serfling"`` or ``"stratified_hoeffding_serfling"``.
    assumptions : tuple of str
        What must hold for the bound.
    variance_proxy : float or ndarray
        The sub-Gaussian variance proxy s^2 with h = sqrt(2 s^2 log(2/alpha)).
    """

    half_width: np.ndarray | float
    n: np.ndarray | int
    N: int
    alpha: float
    R: float
    method: str
    assumptions: tuple[str, ...]
    variance_proxy: np.ndarray | float


@dataclass(frozen=True)
class SubsampleErrorDistribution:
    """Exact distribution of |H/n - K/N| for binary response vectors (one per K).

    Attributes
    ----------
    full_score : float or ndarray
        K/N, the full-benchmark score of each response vector.
    error_quantile : float or ndarray
        The exact (1 - alpha) quantile of |H/n - K/N|: the smallest h with
        P(|H/n - K/N| > h) <= alpha (the paper's "empirical 95% error" at alpha = 0.05).
    violation : ndarray
        P(|H/n - K/N| > h) for each requested half-width (shape ``K.shape + (len(h),)``).
    half_widths : ndarray
        The half-widths the violation rates refer to.
    sd : float or ndarray
        Exact standard deviation of H/n: sqrt(p(1-p)/n * (N-n)/(N-1)).
    K, n, N, alpha, method, assumptions
        Inputs, ``method="exact_hypergeometric"``, and what is assumed.
    """

    full_score: np.ndarray | float
    error_quantile: np.ndarray | float
    violation: np.ndarray
    half_widths: np.ndarray
    sd: np.ndarray | float
    K: np.ndarray | int
    n: int
    N: int
    alpha: float
    method: str
    assumptions: tuple[str, ...]


@dataclass(frozen=True)
class WorstCaseBound:
    """h*(n, N, alpha): the smallest h with max over K of P(|H/n - K/N| > h) <= alpha.

    Attributes
    ----------
    half_width : float or ndarray
        h* for each n (a lattice value |j/n - K/N|).
    worst_K : int or ndarray
        A count K (<= N/2; N - K is equally bad) whose (1 - alpha) error quantile is h*.
    worst_K_violation : float or ndarray
        P(|H/n - K/N| > h*) at K = worst_K (<= alpha by construction; every other K is
        <= alpha at h* too).
    n, N, alpha, method, assumptions
        Inputs, ``method="exact_worst_case"``, and what is assumed.
    """

    half_width: np.ndarray | float
    worst_K: np.ndarray | int
    worst_K_violation: np.ndarray | float
    n: np.ndarray | int
    N: int
    alpha: float
    method: str
    assumptions: tuple[str, ...]


@dataclass(frozen=True)
class PosthocInterval:
    """Exact 1 - alpha interval for the full-benchmark count K (and score K/N).

    Attributes
    ----------
    estimate : float or ndarray
        The subset score k/n.
    lower, upper : float or ndarray
        K_lower/N and K_upper/N.
    K_lower, K_upper : int or ndarray
        The interval for K.
    half_width : float or ndarray
        (upper - lower)/2.
    k, n, N, alpha, method, assumptions
        Observed correct count, subset size, full size, level,
        ``method="exact_hypergeometric"``, and what is assumed.
    """

    estimate: np.ndarray | float
    lower: np.ndarray | float
    upper: np.ndarray | float
    K_lower: np.ndarray | int
    K_upper: np.ndarray | int
    half_width: np.ndarray | float
    k: np.ndarray | int
    n: int
    N: int
    alpha: float
    method: str
    assumptions: tuple[str, ...]


@dataclass(frozen=True)
class PairedErrorDistribution:
    """Exact distribution of the paired-gap subsample error (Remark 7.2), per pair.

    With D_i = X_B,i - X_A,i in {-1, 0, 1}, a items with D = +1 (B right, A wrong), b items
    with D = -1 and N - a - b ties, the error is (A_s - B_s)/n - (a - b)/N.

    Attributes
    ----------
    full_gap : float or ndarray
        (a - b)/N, the full-benchmark paired gap (B minus A).
    error_quantile : float or ndarray
        Exact (1 - alpha) quantile of |error|.
    violation : ndarray
        P(|error| > h) for each requested half-width (shape ``a.shape + (len(h),)``).
    half_widths : ndarray
        The half-widths the violation rates refer to.
    sd : float or ndarray
        Exact SD of the subset gap: sqrt(var_D/n * (N-n)/(N-1)), var_D = (a+b)/N - gap^2.
    a, b, n, N, alpha, method, assumptions
        Inputs, ``method="exact_multivariate_hypergeometric"``, and what is assumed.
    """

    full_gap: np.ndarray | float
    error_quantile: np.ndarray | float
    violation: np.ndarray
    half_widths: np.ndarray
    sd: np.ndarray | float
    a: np.ndarray | int
    b: np.ndarray | int
    n: int
    N: int
    alpha: float
    method: str
    assumptions: tuple[str, ...]


@dataclass(frozen=True)
class StratifiedErrorSD:
    """Exact SDs of the stratified and of the uniform subset estimator, per response vector.

    Attributes
    ----------
    stratified_sd, uniform_sd : ndarray
        Exact standard deviations of sum_k (m_k/N) H_k/n_k and of H/n.
    full_score : ndarray
        The full-benchmark score of each vector.
    allocation : ndarray
        Items drawn per stratum (n_k).
    n, N, method, assumptions
        Subset size, full size, ``method="exact_stratified_variance"``, assumptions.
    """

    stratified_sd: np.ndarray
    uniform_sd: np.ndarray
    full_score: np.ndarray
    allocation: np.ndarray
    n: int
    N: int
    method: str
    assumptions: tuple[str, ...]
