"""The paired gap between two models on a random subset (Remark 7.2), exactly, through the
three-category multivariate hypergeometric: :func:`paired_error_distribution`."""

from __future__ import annotations

import numpy as np

from ..degenerate import Ref, warn_degenerate
from ..validation import check_alpha
from .checks import _half_widths, _int_array, _n_of_N, _out
from .hypergeom import _D_of, _MARGIN, _pmf_rows
from .results import PairedErrorDistribution

__all__ = ["paired_error_distribution"]


def _paired_error_distribution_iv(a, b, n, N, alpha, half_widths):
    n, N = _n_of_N(n, N)
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
    return a, b, n, N, alpha, _half_widths(half_widths)


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
