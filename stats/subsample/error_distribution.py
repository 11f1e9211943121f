"""The exact error distribution of one model's score on a uniformly random n-subset
(binary scores: H ~ Hypergeometric(N, K, n)): :func:`subsample_error_distribution`."""

from __future__ import annotations

import numpy as np

from ..degenerate import Ref, warn_degenerate
from ..validation import check_alpha
from .checks import _counts, _half_widths, _n_of_N, _out
from .hypergeom import _D_of, _blocks, _quantile_D, _tail, _windows
from .results import SubsampleErrorDistribution

__all__ = ["subsample_error_distribution"]

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
    n, N = _n_of_N(n, N)
    alpha = check_alpha(alpha)
    K = _counts(K, "K", high=N, high_name="N", what="correct-answer count")
    return K, n, N, alpha, _half_widths(half_widths)


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
