"""Subsample guarantees: how far a random n-item subset's score can be from the full score
(exchangeable-bounds paper sections 5 and 7.5).

Closed-form half-widths (any scores in an interval of length R):

* :func:`theorem_5_2_halfwidth` - the paper's Theorem 5.2 (mixture term cancels);
* :func:`corollary_5_6_halfwidth` - the weighted-subset form, Corollary 5.6;
* :func:`barber_halfwidth` - Barber (2024) applied directly, non-negative or signed weights;
* :func:`serfling_halfwidth` - Serfling (1974) sampling without replacement;
* :func:`stratified_halfwidth` - stratified (by subject) subsets, proportional allocation.

Exact computations for binary scores (beyond the paper; no Monte Carlo):

* :func:`subsample_error_distribution` - a response vector with K correct answers: a
  uniformly random n-subset has H ~ Hypergeometric(N, K, n) correct, so |H/n - K/N| has an
  exactly computable quantile ("empirical 95% error") and violation rate;
* :func:`worst_case_halfwidth` - h*(n, N, alpha), the smallest half-width that holds for
  *every* binary response vector of length N (the max over all K);
* :func:`posthoc_interval` - once a random subset has been evaluated, the exact
  finite-population interval for the full count K;
* :func:`paired_error_distribution` - the paired gap between two models (Remark 7.2),
  exactly, through the three-category multivariate hypergeometric.

Pure numpy/scipy; no I/O.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np
from benchcert.stats import _dist as _st  # scipy.stats, imported only where hypergeom is used
from scipy.special import digamma

from ._common import Ref, check_alpha, unwrap_scalar, warn_degenerate

__all__ = [
    "SubsampleBound",
    "theorem_5_2_halfwidth",
    "corollary_5_6_halfwidth",
    "barber_halfwidth",
    "serfling_halfwidth",
    "SubsampleErrorDistribution",
    "subsample_error_distribution",
    "WorstCaseBound",
    "worst_case_halfwidth",
    "PosthocInterval",
    "posthoc_interval",
    "PairedErrorDistribution",
    "paired_error_distribution",
    "proportional_allocation",
    "stratified_halfwidth",
    "StratifiedErrorSD",
    "stratified_error_sd",
]

# Truncating each hypergeometric pmf to the window where Serfling's tail bound leaves at
# most _TAIL_EPS per side, and asking every computed tail to be <= alpha - _MARGIN, makes
# the "exact" answers conservative by construction: the neglected mass (<= 2 * _TAIL_EPS)
# and float summation error (~1e-14 over a few hundred terms) are both below _MARGIN.
_TAIL_EPS = 1e-14
_MARGIN = 1e-12
# Rows x window cells per vectorised block: ~2e6 float64 cells keeps each temporary ~16 MB.
_CELLS = 2_000_000
# A half-width h is compared with the integer lattice |j N - K n| through h * n * N; this
# absorbs the rounding of h * n * N (lattice steps are 1) without moving any real threshold.
_LATTICE_TOL = 1e-6


# --------------------------------------------------------------------------------------
# results


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


# --------------------------------------------------------------------------------------
# input checks shared by the validators


def _int_scalar(value, name: str, *, low: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer >= {low}; got {value!r}")
    v = int(value)
    if v < low:
        raise ValueError(f"{name} must be an integer >= {low}; got {value!r}")
    return v


def _int_array(value, name: str) -> np.ndarray:
    arr = np.asarray(value)
    if arr.dtype == np.bool_ or not (np.issubdtype(arr.dtype, np.integer) or arr.size == 0):
        raise ValueError(f"{name} must be integer(s); got {value!r}")
    return arr.astype(np.int64)


def _n_array(n, N: int, name: str = "n") -> np.ndarray:
    arr = _int_array(n, name)
    if arr.size == 0:
        raise ValueError(f"{name} must hold at least one subset size; got {n!r}")
    if (arr < 1).any():
        raise ValueError(f"{name} must be >= 1 (a subset needs at least one item); got {int(arr[arr < 1].flat[0])}")
    if (arr > N).any():
        raise ValueError(f"{name} must be <= N = {N} (a subset cannot exceed the benchmark); "
                         f"got {int(arr[arr > N].flat[0])}")
    return arr


def _range(R) -> float:
    if isinstance(R, (bool, np.bool_)) or not isinstance(R, numbers.Real) or not np.isfinite(R) or R <= 0:
        raise ValueError(f"R must be a positive finite score range; got {R!r}")
    return float(R)


_out = unwrap_scalar  # 0-d results as Python scalars (stats/_common.py)


def _log_term(alpha: float) -> float:
    return float(np.log(2.0 / alpha))


# --------------------------------------------------------------------------------------
# closed-form half-widths

_THM52_ASSUMPTIONS = (
    "scores X_1, X_2, ... are infinitely exchangeable (a de Finetti mixture of iid) with "
    "values in an interval of length R",
    "the subset is drawn uniformly at random, independently of the scores, before evaluation "
    "(Remark 5.4)",
    "the target is the full-benchmark mean of the realised N items (a zero-sum contrast, so "
    "the mixture term cancels; no variance proxy is estimated)",
)


def _theorem_5_2_halfwidth_iv(n, N, alpha, R):
    N = _int_scalar(N, "N", low=1)
    alpha = check_alpha(alpha)
    R = _range(R)
    return _n_array(n, N), N, alpha, R


def theorem_5_2_halfwidth(n, N, *, alpha=0.05, R=1.0) -> SubsampleBound:
    r"""Theorem 5.2 half-width for a uniformly random n-subset of N items.

    Parameters
    ----------
    n : int or array_like of int
        Subset size(s), 1 <= n <= N.
    N : int
        Full benchmark size.
    alpha : float, keyword-only
        Miscoverage level in (0, 1).
    R : float, keyword-only
        Score range b - a (1 for [0, 1] scores, 2 for paired differences in [-1, 1]).

    Returns
    -------
    SubsampleBound
        ``method="theorem_5_2"``.

    Notes
    -----
    Exchangeable-bounds paper, Theorem 5.2: writing the error as the zero-sum contrast
    :math:`T_{n,N} = \sum_j a_j X_j`, :math:`a_j = 1/n - 1/N` (in the subset) or
    :math:`-1/N`, with :math:`\sum_j a_j^2 = (N-n)/(nN)`, Theorem 4.2 with
    :math:`\sigma^2_{mix} = 0` (Proposition 5.1) gives

    .. math::

        P\{|\bar X_n - \bar X_N| \ge t\} \le 2\exp\Big(-\frac{2t^2 nN}{R^2(N-n)}\Big),
        \qquad h = R\sqrt{\frac{N-n}{2nN}\log\frac{2}{\alpha}}.

    At n = N the subset is the benchmark and h = 0 exactly (Remark 5.3). With R = 2 it is
    the paired-gap bound of Remark 7.2. The paper's Table 4 column (N = 14,042,
    alpha = 0.05): 8.51, 5.96, 4.14, 2.81, 1.54, 0.73 pp at n = 250 ... 10,000.
    """
    n, N, alpha, R = _theorem_5_2_halfwidth_iv(n, N, alpha, R)
    proxy = R * R * (N - n) / (4.0 * n * N)
    hw = np.sqrt(2.0 * proxy * _log_term(alpha))
    extra = ("n = N: the subset is the whole benchmark and the error is exactly 0 (Remark 5.3)",) \
        if (n == N).any() else ()
    return SubsampleBound(half_width=_out(hw), n=_out(n), N=N, alpha=alpha, R=R, method="theorem_5_2",
                          assumptions=_THM52_ASSUMPTIONS + extra, variance_proxy=_out(proxy))


def _corollary_5_6_halfwidth_iv(weights, N, alpha, R):
    N = _int_scalar(N, "N", low=1)
    alpha = check_alpha(alpha)
    R = _range(R)
    try:
        w = np.asarray(weights, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"weights must be a numeric 1-D array; got {type(weights).__name__}") from exc
    if w.ndim != 1 or w.size == 0:
        raise ValueError(f"weights must be a non-empty 1-D array; got shape {w.shape}")
    if not np.isfinite(w).all():
        raise ValueError(f"weights must be finite; got {float(w[~np.isfinite(w)][0])!r}")
    if w.size > N:
        raise ValueError(f"weights must have at most N = {N} entries (one per subset item); got {w.size}")
    return w, N, alpha, R


def corollary_5_6_halfwidth(weights, N, *, alpha=0.05, R=1.0) -> SubsampleBound:
    r"""Corollary 5.6: half-width for a weighted subset statistic sum_i w_i X_i - W mean_N.

    Parameters
    ----------
    weights : array_like, shape (n,)
        Weights w_1..w_n on the n subset items (any signs), W = sum w_i.
    N : int
        Full benchmark size.
    alpha, R : keyword-only
        Miscoverage level and score range.

    Returns
    -------
    SubsampleBound
        ``method="corollary_5_6"``; ``n`` is the number of weights.

    Notes
    -----
    The statistic :math:`T_{w,N} = \sum_{i\le n} w_i X_i - W\bar X_N` is a zero-sum
    contrast with squared coefficient norm :math:`\sum_i w_i^2 - W^2/N`, so

    .. math::

        P\{|T_{w,N}| \ge t\} \le 2\exp\Big[-\frac{2t^2}{R^2(\sum_i w_i^2 - W^2/N)}\Big],
        \qquad h = R\sqrt{\tfrac12\big(\textstyle\sum_i w_i^2 - W^2/N\big)\log\frac{2}{\alpha}}.

    With :math:`w_i = 1/n` it is Theorem 5.2. A zero denominator means
    :math:`T_{w,N} = 0` almost surely (the corollary's last sentence): h = 0, warned.
    """
    w, N, alpha, R = _corollary_5_6_halfwidth_iv(weights, N, alpha, R)
    W = float(w.sum())
    denom = max(float(np.dot(w, w)) - W * W / N, 0.0)
    if denom <= 1e-15 * max(float(np.dot(w, w)), 1e-300):
        warn_degenerate("corollary_5_6_halfwidth: sum w_i^2 - W^2/N = 0, so the statistic is 0 almost "
                        "surely; returning half-width 0")
        denom = 0.0
    proxy = R * R * denom / 4.0
    hw = float(np.sqrt(2.0 * proxy * _log_term(alpha)))
    return SubsampleBound(half_width=hw, n=int(w.size), N=N, alpha=alpha, R=R, method="corollary_5_6",
                          assumptions=_THM52_ASSUMPTIONS, variance_proxy=proxy)


def _barber_halfwidth_iv(n, N, alpha, R, signed):
    if not isinstance(signed, (bool, np.bool_)):
        raise ValueError(f"signed must be True or False; got {signed!r}")
    n, N, alpha, R = _theorem_5_2_halfwidth_iv(n, N, alpha, R)
    return n, N, alpha, R, bool(signed)


def _eps_N(N: int) -> float:
    """Barber's finite-exchangeability factor eps_N = (H_N - 1)/(N - H_N); 0 for N = 1."""
    if N == 1:
        return 0.0
    h = float(digamma(N + 1.0) + np.euler_gamma)
    return (h - 1.0) / (N - h)


def barber_halfwidth(n, N, *, alpha=0.05, R=1.0, signed=False) -> SubsampleBound:
    r"""Barber (2024) finite-exchangeable Hoeffding bound applied to the subset error.

    Parameters
    ----------
    n : int or array_like of int
        Subset size(s), 1 <= n <= N.
    N : int
        Full benchmark size.
    alpha, R : keyword-only
        Miscoverage level and score range.
    signed : bool, keyword-only
        False: the direct non-negative-weight form (weights 1/n on the subset);
        True: the signed-weight form applied to the zero-sum coefficients.

    Returns
    -------
    SubsampleBound
        ``method="barber_nonnegative"`` or ``"barber_signed"``.

    Notes
    -----
    Paper Theorem 5.5 (Barber 2024): for exchangeable :math:`X_1..X_N` in an interval of
    length R and deterministic w, :math:`P\{|\sum_i w_i(X_i - \bar X_N)| \ge t\} \le
    2\exp(-2t^2/(R^2\|w\|^2(1+\varepsilon_N)))`, :math:`\varepsilon_N = (H_N-1)/(N-H_N)`,
    with the factor :math:`1+\varepsilon_N` dropped when every :math:`w_i \ge 0`.

    * non-negative, :math:`w_i = 1/n` on the subset, :math:`\|w\|^2 = 1/n`:
      :math:`h = R\sqrt{\log(2/\alpha)/(2n)}` (no finite-population gain; paper Figure 4a);
    * signed, the zero-sum coefficients of Theorem 5.2, :math:`\|a\|^2 = (N-n)/(nN)`:
      :math:`h = R\sqrt{(1+\varepsilon_N)(N-n)\log(2/\alpha)/(2nN)}` - Theorem 5.2 times
      :math:`\sqrt{1+\varepsilon_N}` (the paper's section 5.2).

    Only finite exchangeability of the N scores is assumed (no infinite extension).
    """
    n, N, alpha, R, signed = _barber_halfwidth_iv(n, N, alpha, R, signed)
    if signed:
        proxy = R * R * (1.0 + _eps_N(N)) * (N - n) / (4.0 * n * N)
        method = "barber_signed"
        extra = (f"signed-weight form: zero-sum coefficients, factor 1 + eps_N = {1.0 + _eps_N(N):.6f}",)
    else:
        proxy = R * R / (4.0 * n)
        method = "barber_nonnegative"
        extra = ("non-negative-weight form (weights 1/n): no finite-population correction",)
    hw = np.sqrt(2.0 * proxy * _log_term(alpha))
    return SubsampleBound(
        half_width=_out(hw), n=_out(n), N=N, alpha=alpha, R=R, method=method,
        assumptions=("the N scores are (finitely) exchangeable with values in an interval of length R; for "
                     "a fixed benchmark this holds when the subset is uniformly random",
                     "Barber (2024), Electron. Commun. Probab. 29; paper Theorem 5.5") + extra,
        variance_proxy=_out(proxy))


def _serfling_halfwidth_iv(n, N, alpha, R):
    return _theorem_5_2_halfwidth_iv(n, N, alpha, R)


def serfling_halfwidth(n, N, *, alpha=0.05, R=1.0) -> SubsampleBound:
    r"""Serfling (1974) half-width for sampling n of N without replacement.

    Parameters
    ----------
    n : int or array_like of int
        Subset size(s), 1 <= n <= N.
    N : int
        Full benchmark size.
    alpha, R : keyword-only
        Miscoverage level and score range.

    Returns
    -------
    SubsampleBound
        ``method="serfling"``.

    Notes
    -----
    Paper eq. (1), two-sided by a union bound:
    :math:`P(|\bar X_n - \mu| \ge t) \le 2\exp(-2nt^2/(R^2(1-(n-1)/N)))`, so

    .. math:: h = R\sqrt{\big(1 - \tfrac{n-1}{N}\big)\frac{\log(2/\alpha)}{2n}}.

    Valid for any fixed population of N values in an interval of length R and a uniformly
    random subset; never zero (at n = N it is R sqrt(log(2/alpha)/(2N^2)) > 0).
    """
    n, N, alpha, R = _serfling_halfwidth_iv(n, N, alpha, R)
    proxy = R * R * (1.0 - (n - 1.0) / N) / (4.0 * n)
    hw = np.sqrt(2.0 * proxy * _log_term(alpha))
    return SubsampleBound(
        half_width=_out(hw), n=_out(n), N=N, alpha=alpha, R=R, method="serfling",
        assumptions=("any fixed population of N scores in an interval of length R",
                     "the subset is drawn uniformly at random without replacement",
                     "Serfling (1974), Ann. Statist. 2(1); paper eq. (1) with a two-sided union bound"),
        variance_proxy=_out(proxy))


# --------------------------------------------------------------------------------------
# exact hypergeometric engine (binary scores)


def _pmf_rows(N: int, K, n):
    """Hypergeometric(N, K, n) pmf rows on truncated windows of the count j.

    ``K`` and ``n`` are per row (either may be a scalar). Returns (lo, W, p): row r covers
    j = lo[r] .. lo[r] + W - 1 (cells past the support have mass 0). The window is
    n K / N +/- Serfling's (1974) count deviation at tail mass _TAIL_EPS, taken in the
    cheapest of the equivalent orientations (draws n, K, N - n or N - K: the count is an
    affine image of the count in each), so each row misses at most 2 * _TAIL_EPS of mass.
    """
    K = np.asarray(K, dtype=np.int64)
    n = np.asarray(n, dtype=np.int64)
    K, n = np.broadcast_arrays(np.atleast_1d(K), np.atleast_1d(n))
    m = np.minimum(np.minimum(n, K), np.minimum(N - n, N - K)).astype(float)
    fpc = np.maximum(1.0 - (m - 1.0) / N, 1.0 / N)
    w = np.ceil(np.sqrt(np.maximum(m, 1.0) * fpc / 2.0 * np.log(1.0 / _TAIL_EPS))).astype(np.int64) + 1
    center = (n * K) // N
    lo = np.maximum(np.maximum(0, n - (N - K)), center - w)
    hi = np.minimum(np.minimum(n, K), center + w + 1)
    W = int((hi - lo).max()) + 1
    j = lo[:, None] + np.arange(W)[None, :]
    inside = j <= hi[:, None]
    jj = j[:, :-1].astype(float)
    Kf = K[:, None].astype(float)
    nf = n[:, None].astype(float)
    # The ratio p(j+1)/p(j) = (K-j)(n-j) / ((j+1)(N-K-n+j+1)) walks the pmf along each row
    # with one log per cell; normalising afterwards removes the unknown constant.
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = ((Kf - jj) * (nf - jj)) / ((jj + 1.0) * (N - Kf - nf + jj + 1.0))
        step = np.log(np.where(inside[:, 1:], ratio, 0.0))
    logp = np.empty(j.shape)
    logp[:, 0] = 0.0
    np.cumsum(step, axis=1, out=logp[:, 1:])
    logp -= logp.max(axis=1, keepdims=True)
    p = np.exp(logp)
    p /= p.sum(axis=1, keepdims=True)
    return lo, W, p


def _windows(N: int, K: np.ndarray, n: int):
    """As :func:`_pmf_rows`, with each row's cumulative sums (lo, W, C) instead of the pmf."""
    lo, W, p = _pmf_rows(N, K, n)
    return lo, W, np.cumsum(p, axis=1)


def _tail(N: int, K: np.ndarray, n: int, lo, W, C, D) -> np.ndarray:
    """P(|j N - K n| > D) per row (D integer, scalar or per row)."""
    Kn = K * n
    jl = (Kn - D - 1) // N          # largest j with j N < K n - D
    jr = (Kn + D) // N + 1          # smallest j with j N > K n + D
    il = jl - lo
    ir = jr - lo
    rows = np.arange(K.shape[0])
    left = np.where(il < 0, 0.0, C[rows, np.clip(il, 0, W - 1)])
    # 1 - C loses nothing that matters: tails are compared with alpha, with a 1e-12 margin.
    right = np.where(ir >= W, 0.0, np.where(ir <= 0, 1.0, 1.0 - C[rows, np.clip(ir - 1, 0, W - 1)]))
    return left + right


def _quantile_D(N: int, K: np.ndarray, n: int, alpha: float, lo, W, C) -> np.ndarray:
    """Smallest integer D with P(|j N - K n| > D) <= alpha - margin, per row (bisection)."""
    a = np.full(K.shape[0], -1, dtype=np.int64)      # P(> -1) = 1: never small enough
    b = np.full(K.shape[0], n * N, dtype=np.int64)   # P(> nN) = 0: always small enough
    while True:
        active = b - a > 1
        if not active.any():
            return b
        mid = (a + b) // 2
        ok = _tail(N, K, n, lo, W, C, mid) + _MARGIN <= alpha
        b = np.where(active & ok, mid, b)
        a = np.where(active & ~ok, mid, a)


def _blocks(K: np.ndarray, n: int, N: int):
    fpc = max(1.0 - (n - 1.0) / N, 1.0 / N)
    width = 2 * (int(np.ceil(np.sqrt(n * fpc / 2.0 * np.log(1.0 / _TAIL_EPS)))) + 2)
    rows = max(1, _CELLS // width)
    for start in range(0, K.shape[0], rows):
        yield slice(start, start + rows)


def _D_of(h: np.ndarray, n: int, N: int) -> np.ndarray:
    return np.floor(np.asarray(h, dtype=float) * n * N + _LATTICE_TOL).astype(np.int64)


# --------------------------------------------------------------------------------------
# B3: exact per-model error distribution

_EXACT_ASSUMPTIONS = (
    "binary item scores (correct / incorrect)",
    "the subset is drawn uniformly at random (without replacement) from the N items, "
    "independently of the scores",
    "no exchangeability or model of the scores is needed: the response vector is fixed and "
    "the only randomness is the draw of the subset",
    "computed exactly from the hypergeometric pmf (tails below 1e-14 truncated, answers made "
    "conservative by a 1e-12 margin); no Monte Carlo",
)


def _subsample_error_distribution_iv(K, n, N, alpha, half_widths):
    N = _int_scalar(N, "N", low=1)
    n = _int_scalar(n, "n", low=1)
    if n > N:
        raise ValueError(f"n must be <= N = {N} (a subset cannot exceed the benchmark); got {n}")
    alpha = check_alpha(alpha)
    K = _int_array(K, "K")
    if K.size == 0:
        raise ValueError("K must hold at least one correct-answer count; got an empty array")
    bad = (K < 0) | (K > N)
    if bad.any():
        raise ValueError(f"K must be correct-answer counts in [0, N = {N}]; got {int(K[bad].flat[0])}")
    try:
        h = np.atleast_1d(np.asarray(half_widths, dtype=float))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"half_widths must be numeric; got {half_widths!r}") from exc
    if h.ndim != 1 or not np.isfinite(h).all() or (h < 0).any():
        raise ValueError(f"half_widths must be a 1-D array of finite values >= 0; got {half_widths!r}")
    return K, n, N, alpha, h


def subsample_error_distribution(K, n, N, *, alpha=0.05, half_widths=()) -> SubsampleErrorDistribution:
    r"""Exact error distribution of a random n-subset score, for binary response vectors.

    Parameters
    ----------
    K : int or array_like of int
        Correct answers of each response vector on the full benchmark (0 <= K <= N).
    n : int
        Subset size, 1 <= n <= N.
    N : int
        Full benchmark size.
    alpha : float, keyword-only
        1 - alpha is the quantile level of the reported error.
    half_widths : array_like, keyword-only
        Half-widths h at which to report the violation rate P(|H/n - K/N| > h).

    Returns
    -------
    SubsampleErrorDistribution
        ``method="exact_hypergeometric"``.

    Notes
    -----
    A uniformly random n-subset of a fixed binary vector with K ones contains
    :math:`H \sim \mathrm{Hypergeometric}(N, K, n)` ones, so with
    :math:`E = |H/n - K/N| = |HN - Kn|/(nN)`:

    .. math::

        P(E > h) = \sum_{j:\,|jN - Kn| > hnN} \binom{K}{j}\binom{N-K}{n-j}\Big/\binom{N}{n},
        \qquad q_{1-\alpha} = \min\{h : P(E > h) \le \alpha\}.

    Paper Table 4: with K = round(pooled accuracy x 14,042) for the six models of the paper's
    Table 1, the mean and worst q_0.95 and the largest violation rate at the Theorem 5.2
    half-width reproduce the empirical columns of Table 4 (e.g. n = 250: 5.85, 6.17 pp,
    0.65%). The pmf is built per K by the ratio recursion on a window that Serfling's
    bound shows holds all but 1e-14 of the mass; thresholds are integers |jN - Kn|, so
    ties are exact. K = 0 or N gives error 0 exactly (warned).
    """
    K, n, N, alpha, h = _subsample_error_distribution_iv(K, n, N, alpha, half_widths)
    flat = K.reshape(-1)
    qD = np.empty(flat.shape[0], dtype=np.int64)
    viol = np.empty((flat.shape[0], h.size))
    Dh = _D_of(h, n, N)
    for blk in _blocks(flat, n, N):
        Kb = flat[blk]
        lo, W, C = _windows(N, Kb, n)
        qD[blk] = _quantile_D(N, Kb, n, alpha, lo, W, C)
        for i, D in enumerate(Dh):
            viol[blk, i] = _tail(N, Kb, n, lo, W, C, D)
    const = (flat == 0) | (flat == N)
    if const.any():
        warn_degenerate("subsample_error_distribution: K = 0 or K = N for {}: every subset has the full score, "
                        "so the error is exactly 0", Ref("entry", np.flatnonzero(const)))
    p = flat / N
    sd = np.sqrt(p * (1.0 - p) / n * ((N - n) / (N - 1.0) if N > 1 else 0.0))
    shape = K.shape
    return SubsampleErrorDistribution(
        full_score=_out((K / N).astype(float)), error_quantile=_out((qD / (n * N)).reshape(shape)),
        violation=viol.reshape(shape + (h.size,)), half_widths=h, sd=_out(sd.reshape(shape)),
        K=_out(K), n=n, N=N, alpha=alpha, method="exact_hypergeometric", assumptions=_EXACT_ASSUMPTIONS)


# --------------------------------------------------------------------------------------
# B4: exact worst case over K


def _worst_case_halfwidth_iv(n, N, alpha):
    N = _int_scalar(N, "N", low=1)
    alpha = check_alpha(alpha)
    return _n_array(n, N), N, alpha


def _worst_case_one(n: int, N: int, alpha: float, k_from: int = 0) -> tuple[int, int, float]:
    """(D*, worst K, its violation) over K in [k_from, N/2]; k_from > 0 gives a lower bound on h*."""
    # H and n - H swap when K -> N - K, so K <= N/2 covers every count.
    Ks = np.arange(min(max(k_from, 0), N // 2), N // 2 + 1, dtype=np.int64)
    best_D, best_K = -1, 0
    for blk in _blocks(Ks, n, N):
        Kb = Ks[blk]
        lo, W, C = _windows(N, Kb, n)
        qD = _quantile_D(N, Kb, n, alpha, lo, W, C)
        i = int(np.argmax(qD))
        if qD[i] > best_D:
            best_D, best_K = int(qD[i]), int(Kb[i])
    Kw = np.array([best_K], dtype=np.int64)
    lo, W, C = _windows(N, Kw, n)
    return best_D, best_K, float(_tail(N, Kw, n, lo, W, C, best_D)[0])


#: What :func:`worst_case_halfwidth` assumes: the same for every (n, N, alpha).
WORST_CASE_ASSUMPTIONS = (
    "binary item scores",
    "the subset is drawn uniformly at random from the N items before evaluation, independently of the scores",
    "holds for every response vector (worst case over the count K of correct answers): no exchangeability needed",
    "exact hypergeometric computation (conservative by a 1e-12 margin); no Monte Carlo")


def worst_case_halfwidth(n, N, *, alpha=0.05) -> WorstCaseBound:
    r"""Exact worst-case planning half-width h*(n, N, alpha) for binary scores (paper section 7.5).

    Parameters
    ----------
    n : int or array_like of int
        Subset size(s), 1 <= n <= N.
    N : int
        Full benchmark size.
    alpha : float, keyword-only
        Miscoverage level in (0, 1).

    Returns
    -------
    WorstCaseBound
        ``method="exact_worst_case"``.

    Notes
    -----
    .. math::

        h^*(n, N, \alpha) = \min\Big\{h : \max_{K\in\{0..N\}} P_K\big(|H/n - K/N| > h\big)
        \le \alpha\Big\}, \qquad H \sim \mathrm{Hypergeometric}(N, K, n).

    Every binary response vector of length N has some K, so h* holds for any model with no
    exchangeability assumption: only the uniform random draw of the subset matters.
    Since each :math:`P_K(\cdot > h)` is a right-continuous non-increasing step function,
    :math:`h^* = \max_K q_K` with :math:`q_K` the exact :math:`1-\alpha` quantile of
    :math:`|H/n - K/N|`; each :math:`q_K` is found by bisection over the integer lattice
    :math:`|jN - Kn|`, vectorised over all K at once (K and N - K are mirror images, so
    K <= N/2 suffices). The maximum is taken over every K, not a scan near N/2: lattice
    effects move the worst K (N = 14,042, n = 250: K = 5,701, not 7,021).

    Beyond the paper. At N = 14,042 and alpha = 0.05, h* = 6.20 pp at n = 250 against
    Theorem 5.2's 8.51 pp (27% narrower), and h* < Theorem 5.2 at every n < N checked.
    """
    ns, N, alpha = _worst_case_halfwidth_iv(n, N, alpha)
    flat = ns.reshape(-1)
    hw = np.empty(flat.shape[0])
    wk = np.empty(flat.shape[0], dtype=np.int64)
    mv = np.empty(flat.shape[0])
    for i, ni in enumerate(flat):
        D, Kw, worst = _worst_case_one(int(ni), N, alpha)
        hw[i], wk[i], mv[i] = D / (int(ni) * N), Kw, worst
    return WorstCaseBound(
        half_width=_out(hw.reshape(ns.shape)), worst_K=_out(wk.reshape(ns.shape)),
        worst_K_violation=_out(mv.reshape(ns.shape)), n=_out(ns), N=N, alpha=alpha, method="exact_worst_case",
        assumptions=WORST_CASE_ASSUMPTIONS)


# --------------------------------------------------------------------------------------
# B5: post-hoc exact interval for K


def _posthoc_interval_iv(k, n, N, alpha):
    N = _int_scalar(N, "N", low=1)
    n = _int_scalar(n, "n", low=1)
    if n > N:
        raise ValueError(f"n must be <= N = {N} (a subset cannot exceed the benchmark); got {n}")
    alpha = check_alpha(alpha)
    k = _int_array(k, "k")
    if k.size == 0:
        raise ValueError("k must hold at least one correct count; got an empty array")
    bad = (k < 0) | (k > n)
    if bad.any():
        raise ValueError(f"k must be correct counts in [0, n = {n}]; got {int(k[bad].flat[0])}")
    return k, n, N, alpha


def _bisect_K(pred, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Smallest K in (lo, hi] with pred(K) True, given pred(lo) False and pred(hi) True (monotone)."""
    while True:
        active = hi - lo > 1
        if not active.any():
            return hi
        mid = (lo + hi) // 2
        ok = pred(mid)
        hi = np.where(active & ok, mid, hi)
        lo = np.where(active & ~ok, mid, lo)


def posthoc_interval(k, n, N, *, alpha=0.05) -> PosthocInterval:
    r"""Exact finite-population 1 - alpha interval for the full-benchmark score.

    Parameters
    ----------
    k : int or array_like of int
        Correct answers on the evaluated random subset (0 <= k <= n).
    n : int
        Subset size, 1 <= n <= N.
    N : int
        Full benchmark size.
    alpha : float, keyword-only
        Miscoverage level in (0, 1).

    Returns
    -------
    PosthocInterval
        ``method="exact_hypergeometric"``: K in [K_lower, K_upper], score K/N.

    Notes
    -----
    Inverts the two one-sided hypergeometric tests, Clopper-Pearson style:

    .. math::

        K_{lo} = \min\{K : P_K(H \ge k) > \alpha/2\},\qquad
        K_{hi} = \max\{K : P_K(H \le k) > \alpha/2\},

    :math:`H \sim \mathrm{Hypergeometric}(N, K, n)`. Both tails are monotone in K (adding a
    correct item can only raise H), so each end is a bisection over K in [0, N]. For every
    fixed binary vector, :math:`P(K \notin [K_{lo}, K_{hi}]) \le \alpha/2 + \alpha/2`.
    It automatically respects :math:`k \le K \le N - (n - k)` and is 0-width when n = N.
    """
    k, n, N, alpha = _posthoc_interval_iv(k, n, N, alpha)
    flat = k.reshape(-1)
    half = alpha / 2.0
    hg = _st.hypergeom
    # P_K(H >= k) = hg.sf(k - 1, N, K, n) increases with K: K_lo = first K where it exceeds alpha/2.
    ge = lambda K: hg.sf(flat - 1, N, K, n) > half  # noqa: E731
    # P_K(H <= k) decreases with K: K_hi = last K where it exceeds alpha/2 (first failure - 1).
    le_fail = lambda K: ~(hg.cdf(flat, N, K, n) > half)  # noqa: E731
    K_lo = np.where(flat == 0, 0, _bisect_K(ge, np.full(flat.shape, -1), np.full(flat.shape, N)))
    K_hi = np.where(flat == n, N,
                    _bisect_K(le_fail, np.full(flat.shape, -1), np.full(flat.shape, N + 1)) - 1)
    shape = k.shape
    lower, upper = K_lo / N, K_hi / N
    return PosthocInterval(
        estimate=_out((flat / n).reshape(shape)), lower=_out(lower.reshape(shape)),
        upper=_out(upper.reshape(shape)), K_lower=_out(K_lo.reshape(shape)), K_upper=_out(K_hi.reshape(shape)),
        half_width=_out(((upper - lower) / 2.0).reshape(shape)), k=_out(k), n=n, N=N, alpha=alpha,
        method="exact_hypergeometric",
        assumptions=("binary item scores", "the evaluated subset was drawn uniformly at random from the N items "
                     "before evaluation", "target: the full-benchmark count K of the realised response vector "
                     "(what a full run would have scored)", "equal-tailed (alpha/2 each side) exact inversion "
                     "of the hypergeometric; conservative, never below 1 - alpha"))


# --------------------------------------------------------------------------------------
# B6: paired gaps, exact three-category computation


def _paired_error_distribution_iv(a, b, n, N, alpha, half_widths):
    N = _int_scalar(N, "N", low=1)
    n = _int_scalar(n, "n", low=1)
    if n > N:
        raise ValueError(f"n must be <= N = {N} (a subset cannot exceed the benchmark); got {n}")
    alpha = check_alpha(alpha)
    a = _int_array(a, "a")
    b = _int_array(b, "b")
    try:
        a, b = np.broadcast_arrays(a, b)
    except ValueError as exc:
        raise ValueError(f"a and b must broadcast together; got shapes {a.shape} and {b.shape}") from exc
    if a.size == 0:
        raise ValueError("a and b must hold at least one pair of discordant counts; got empty arrays")
    bad = (a < 0) | (b < 0) | (a + b > N)
    if bad.any():
        i = int(np.flatnonzero(bad.reshape(-1))[0])
        raise ValueError(f"a and b must be discordant counts >= 0 with a + b <= N = {N}; got "
                         f"a = {int(a.reshape(-1)[i])}, b = {int(b.reshape(-1)[i])}")
    try:
        h = np.atleast_1d(np.asarray(half_widths, dtype=float))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"half_widths must be numeric; got {half_widths!r}") from exc
    if h.ndim != 1 or not np.isfinite(h).all() or (h < 0).any():
        raise ValueError(f"half_widths must be a 1-D array of finite values >= 0; got {half_widths!r}")
    return a, b, n, N, alpha, h


def _paired_pmf(a: int, b: int, n: int, N: int) -> tuple[np.ndarray, np.ndarray]:
    """pmf of t = A_s - B_s on its support (values, probabilities)."""
    d = a + b
    if d == 0:
        return np.zeros(1, dtype=np.int64), np.ones(1)
    # S = A_s + B_s ~ Hypergeometric(N, d, n); given S = s, A_s ~ Hypergeometric(d, a, s).
    lo_s, W_s, ps = _pmf_rows(N, d, n)
    ps = ps[0]
    s = lo_s[0] + np.arange(W_s)
    # Rows below 1e-17 carry at most W_s * 1e-17 < 1e-13 of mass in all (inside the margin);
    # the Serfling window is sized for the worst-case variance, so this drops many of them.
    keep = ps > 1e-17
    s, ps = s[keep], ps[keep]
    if a > 0:
        lo_a, W_a, pa = _pmf_rows(d, a, s.astype(np.int64))
    else:
        lo_a, W_a, pa = np.zeros(s.size, np.int64), 1, np.ones((s.size, 1))
    j = lo_a[:, None] + np.arange(W_a)[None, :]
    t = 2 * j - s[:, None]
    mass = ps[:, None] * pa
    offset = n
    binned = np.bincount((t + offset).reshape(-1), weights=mass.reshape(-1), minlength=2 * n + 1)
    support = np.flatnonzero(binned > 0)
    return support - offset, binned[support]


def _abs_quantile(E: np.ndarray, p: np.ndarray, alpha: float) -> int:
    """Smallest integer D >= 0 with P(|E| > D) <= alpha - margin, for integer E with pmf p."""
    A = np.abs(E)
    order = np.argsort(-A, kind="stable")
    A, p = A[order], p[order]
    tail = np.cumsum(p)                       # mass of the first i+1 (largest) values
    # The mass strictly above A[i] is the cumulative mass before A[i]'s group of ties.
    first = np.searchsorted(-A, -A, side="left")
    above = np.where(first > 0, tail[np.maximum(first - 1, 0)], 0.0)
    ok = above + _MARGIN <= alpha
    return int(A[ok].min()) if ok.any() else int(A.max())


def paired_error_distribution(a, b, n, N, *, alpha=0.05, half_widths=()) -> PairedErrorDistribution:
    r"""Exact distribution of a random subset's paired-gap error (paper Remark 7.2).

    Parameters
    ----------
    a : int or array_like of int
        Items with D = X_B - X_A = +1 (model B right, A wrong).
    b : int or array_like of int
        Items with D = -1 (A right, B wrong); broadcast against ``a``; a + b <= N.
    n : int
        Subset size, 1 <= n <= N.
    N : int
        Full benchmark size.
    alpha : float, keyword-only
        1 - alpha is the quantile level of the reported error.
    half_widths : array_like, keyword-only
        Half-widths h at which to report P(|error| > h) (e.g. Theorem 5.2 with R = 2).

    Returns
    -------
    PairedErrorDistribution
        ``method="exact_multivariate_hypergeometric"``.

    Notes
    -----
    The subset's counts :math:`(A_s, B_s, n - A_s - B_s)` of the three categories
    (+1, -1, 0) are multivariate hypergeometric; the error is

    .. math::

        e = \frac{A_s - B_s}{n} - \frac{a - b}{N}
          = \frac{(A_s - B_s)N - (a-b)n}{nN}.

    Computed as :math:`S = A_s + B_s \sim \mathrm{Hypergeometric}(N, a+b, n)` and
    :math:`A_s \mid S = s \sim \mathrm{Hypergeometric}(a+b, a, s)`, on truncated windows
    (as in :func:`subsample_error_distribution`), then binned by :math:`A_s - B_s`.
    The distribution-free alternative is Theorem 5.2 with R = 2
    (:func:`theorem_5_2_halfwidth`), which ignores how many items are ties.
    """
    a, b, n, N, alpha, h = _paired_error_distribution_iv(a, b, n, N, alpha, half_widths)
    fa, fb = a.reshape(-1), b.reshape(-1)
    q = np.empty(fa.shape[0])
    viol = np.empty((fa.shape[0], h.size))
    Dh = _D_of(h, n, N)
    for i, (ai, bi) in enumerate(zip(fa.tolist(), fb.tolist())):
        t, p = _paired_pmf(ai, bi, n, N)
        E = t * N - (ai - bi) * n
        q[i] = _abs_quantile(E, p, alpha) / (n * N)
        absE = np.abs(E)
        viol[i] = [float(p[absE > D].sum()) for D in Dh]
    gap = (fa - fb) / N
    var_d = (fa + fb) / N - gap ** 2
    sd = np.sqrt(np.maximum(var_d, 0.0) / n * ((N - n) / (N - 1.0) if N > 1 else 0.0))
    same = (fa + fb) == 0
    if same.any():
        warn_degenerate("paired_error_distribution: a = b = 0 (the two models agree on every item) for {}: "
                        "the gap is 0 on every subset, so the error is exactly 0", Ref("entry", np.flatnonzero(same)))
    shape = a.shape
    return PairedErrorDistribution(
        full_gap=_out(gap.reshape(shape)), error_quantile=_out(q.reshape(shape)),
        violation=viol.reshape(shape + (h.size,)), half_widths=h, sd=_out(sd.reshape(shape)), a=_out(a),
        b=_out(b), n=n, N=N, alpha=alpha, method="exact_multivariate_hypergeometric",
        assumptions=("binary item scores for both models on the same N items; D = X_B - X_A in {-1, 0, 1}",
                     "one uniformly random n-subset, evaluated by both models (paired)",
                     "exact three-category (multivariate) hypergeometric computation; no Monte Carlo"))


# --------------------------------------------------------------------------------------
# B7: stratified subsets


def _proportional_allocation_iv(sizes, n):
    m = _int_array(sizes, "sizes")
    if m.ndim != 1 or m.size == 0:
        raise ValueError(f"sizes must be a non-empty 1-D array of stratum sizes; got shape {m.shape}")
    if (m < 1).any():
        raise ValueError(f"sizes must be >= 1 (every stratum has items); got {int(m[m < 1][0])}")
    N = int(m.sum())
    n = _int_scalar(n, "n", low=1)
    if n > N:
        raise ValueError(f"n must be <= N = {N} (a subset cannot exceed the benchmark); got {n}")
    if n < m.size:
        raise ValueError(f"n must be >= the number of strata ({m.size}) so every stratum gets an item; got {n}")
    return m, n


def proportional_allocation(sizes, n) -> np.ndarray:
    r"""Items per stratum for a stratified n-subset: proportional, at least 1 each.

    Parameters
    ----------
    sizes : array_like of int
        Stratum (subject) sizes m_k >= 1, N = sum m_k.
    n : int
        Subset size, number of strata <= n <= N.

    Returns
    -------
    ndarray of int
        n_k with sum n_k = n and 1 <= n_k <= m_k.

    Notes
    -----
    Largest-remainder rounding of :math:`q_k = n m_k / N` (Hamilton's method), raised to 1
    where a stratum would get none; any excess so created is taken back from the strata
    with the largest allocation relative to :math:`q_k`. Deterministic (ties broken by
    stratum order), so a recorded seed reproduces the subset.
    """
    m, n = _proportional_allocation_iv(sizes, n)
    N = int(m.sum())
    q = n * m / N
    alloc = np.minimum(np.maximum(np.floor(q).astype(np.int64), 1), m)
    diff = n - int(alloc.sum())
    while diff != 0:
        if diff > 0:
            room = alloc < m
            score = np.where(room, q - alloc, -np.inf)
            take = np.argsort(-score, kind="stable")[:min(diff, int(room.sum()))]
            alloc[take] += 1
        else:
            room = alloc > 1
            score = np.where(room, alloc - q, -np.inf)
            take = np.argsort(-score, kind="stable")[:min(-diff, int(room.sum()))]
            alloc[take] -= 1
        diff = n - int(alloc.sum())
    return alloc


def _stratified_halfwidth_iv(sizes, allocation, alpha, R):
    m = _int_array(sizes, "sizes")
    nk = _int_array(allocation, "allocation")
    if m.ndim != 1 or m.size == 0:
        raise ValueError(f"sizes must be a non-empty 1-D array of stratum sizes; got shape {m.shape}")
    if nk.shape != m.shape:
        raise ValueError(f"allocation must have one entry per stratum ({m.size}); got shape {nk.shape}")
    if (m < 1).any():
        raise ValueError(f"sizes must be >= 1; got {int(m[m < 1][0])}")
    bad = (nk < 1) | (nk > m)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"allocation must satisfy 1 <= n_k <= m_k; got n_k = {int(nk[i])} for a stratum of "
                         f"{int(m[i])} items")
    return m, nk, check_alpha(alpha), _range(R)


def stratified_halfwidth(sizes, allocation, *, alpha=0.05, R=1.0) -> SubsampleBound:
    r"""Half-width for the stratified estimator sum_k (m_k/N) mean_k of a stratified subset.

    Parameters
    ----------
    sizes : array_like of int
        Stratum sizes m_k (N = sum m_k).
    allocation : array_like of int
        Items drawn per stratum, 1 <= n_k <= m_k (e.g. :func:`proportional_allocation`).
    alpha, R : keyword-only
        Miscoverage level and score range.

    Returns
    -------
    SubsampleBound
        ``method="stratified_hoeffding_serfling"``, ``n = sum n_k``.

    Notes
    -----
    The error :math:`\sum_k (m_k/N)(\bar X_{k,n_k} - \bar X_k)` is a sum of zero-sum
    contrasts on independently drawn stratum subsets; inside each stratum the subset mean of
    a sample without replacement has the finite-population factor
    :math:`(m_k - n_k)/(m_k - 1)` (the exact variance ratio of sampling without and with
    replacement), and the proxies add:

    .. math::

        s^2 = \sum_k \Big(\frac{m_k}{N}\Big)^2 \frac{m_k - n_k}{m_k - 1}\frac{R^2}{4n_k},
        \qquad h = \sqrt{2 s^2 \log(2/\alpha)}

    (a stratum drawn whole, n_k = m_k, contributes 0). Departure (a correction): the factor
    :math:`1 - n_k/m_k` used before is smaller by :math:`(m_k - 1)/m_k`, which matters for tiny
    strata - 50 strata of 2 items with one drawn from each violated the bound 6.49% of the time
    at alpha = 5% (exact, worst case over response vectors); with :math:`(m_k - n_k)/(m_k - 1)`
    0.66% (tests/stats/test_stats_subsample.py). For large strata the two agree, so under proportional
    allocation the proxy is still about Theorem 5.2's :math:`R^2(N-n)/(4nN)`; stratification's
    real gain is in the realised error, which no longer contains between-subject spread (see
    :func:`stratified_error_sd`).
    """
    m, nk, alpha, R = _stratified_halfwidth_iv(sizes, allocation, alpha, R)
    N = int(m.sum())
    fpc = np.where(m > 1, (m - nk) / np.maximum(m - 1.0, 1.0), 0.0)
    proxy = float(np.sum((m / N) ** 2 * fpc * R * R / (4.0 * nk)))
    hw = float(np.sqrt(2.0 * proxy * _log_term(alpha)))
    return SubsampleBound(
        half_width=hw, n=int(nk.sum()), N=N, alpha=alpha, R=R, method="stratified_hoeffding_serfling",
        assumptions=("scores are infinitely exchangeable within each stratum (subject); strata may differ",
                     "within each stratum n_k items are drawn uniformly at random, independently across strata",
                     "the estimator is the stratum-weighted mean sum_k (m_k/N) mean_k, not the plain subset mean"),
        variance_proxy=proxy)


def _stratified_error_sd_iv(counts, sizes, allocation):
    m = _int_array(sizes, "sizes")
    nk = _int_array(allocation, "allocation")
    c = _int_array(counts, "counts")
    if m.ndim != 1 or m.size == 0 or nk.shape != m.shape:
        raise ValueError(f"sizes and allocation must be 1-D with one entry per stratum; got shapes {m.shape} "
                         f"and {nk.shape}")
    if c.ndim == 1:
        c = c[:, None]
    if c.ndim != 2 or c.shape[0] != m.size:
        raise ValueError(f"counts must be (n_strata,) or (n_strata, n_vectors) with n_strata = {m.size}; got "
                         f"shape {np.shape(counts)}")
    if ((c < 0) | (c > m[:, None])).any():
        raise ValueError("counts must be correct counts with 0 <= K_k <= m_k per stratum")
    if ((nk < 1) | (nk > m)).any():
        raise ValueError("allocation must satisfy 1 <= n_k <= m_k")
    return c, m, nk


def stratified_error_sd(counts, sizes, allocation) -> StratifiedErrorSD:
    r"""Exact SD of the stratified and of the uniform subset estimator (binary scores).

    Parameters
    ----------
    counts : array_like of int, shape (n_strata,) or (n_strata, n_vectors)
        Correct answers K_k per stratum of each response vector.
    sizes : array_like of int, shape (n_strata,)
        Stratum sizes m_k.
    allocation : array_like of int, shape (n_strata,)
        Items drawn per stratum n_k (n = sum n_k for the uniform comparison).

    Returns
    -------
    StratifiedErrorSD
        ``method="exact_stratified_variance"``.

    Notes
    -----
    With :math:`p_k = K_k/m_k`, independent hypergeometric draws per stratum give

    .. math::

        \mathrm{Var}\Big(\sum_k \frac{m_k}{N}\frac{H_k}{n_k}\Big)
        = \sum_k \Big(\frac{m_k}{N}\Big)^2 \frac{p_k(1-p_k)}{n_k}\frac{m_k-n_k}{m_k-1},

    against :math:`p(1-p)/n \cdot (N-n)/(N-1)` for a uniform subset of the same size.
    The difference is (up to finite-population factors) the between-subject variance that
    proportional stratification removes. A one-item stratum contributes 0.
    """
    c, m, nk = _stratified_error_sd_iv(counts, sizes, allocation)
    N, n = int(m.sum()), int(nk.sum())
    pk = c / m[:, None]
    fpc = np.where(m > 1, (m - nk) / np.maximum(m - 1.0, 1.0), 0.0)[:, None]
    var_s = np.sum((m[:, None] / N) ** 2 * pk * (1.0 - pk) / nk[:, None] * fpc, axis=0)
    p = c.sum(axis=0) / N
    var_u = p * (1.0 - p) / n * ((N - n) / (N - 1.0) if N > 1 else 0.0)
    return StratifiedErrorSD(
        stratified_sd=np.sqrt(var_s), uniform_sd=np.sqrt(var_u), full_score=p, allocation=nk, n=n, N=N,
        method="exact_stratified_variance",
        assumptions=("binary item scores", "strata sampled independently and uniformly without replacement",
                     "exact second moments; the SD describes spread, not a confidence level"))
