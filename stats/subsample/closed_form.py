"""Closed-form subsample half-widths for scores in an interval of length R: Theorem 5.2,
Corollary 5.6 (weighted subsets), Barber (2024) and Serfling (1974)."""

from __future__ import annotations

import numpy as np
from scipy.special import digamma

from ..degenerate import warn_degenerate
from ..validation import as_float_array, check_alpha
from .checks import _int_scalar, _n_array, _out, _range
from .results import SubsampleBound

__all__ = ["barber_halfwidth", "corollary_5_6_halfwidth", "serfling_halfwidth", "theorem_5_2_halfwidth"]


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
    w = as_float_array(weights, "weights", "a numeric 1-D array")
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
