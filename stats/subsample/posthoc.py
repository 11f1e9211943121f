"""The exact finite-population interval for the full count K once a random subset has been
evaluated: :func:`posthoc_interval`."""

from __future__ import annotations

import numpy as np
from benchcert.stats import _dist as _st  # scipy.stats, imported only where hypergeom is used

from ..validation import check_alpha
from .checks import _counts, _n_of_N, _out
from .results import PosthocInterval

__all__ = ["posthoc_interval"]


def _posthoc_interval_iv(k, n, N, alpha):
    n, N = _n_of_N(n, N)
    alpha = check_alpha(alpha)
    k = _counts(k, "k", high=n, high_name="n", what="correct count")
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
