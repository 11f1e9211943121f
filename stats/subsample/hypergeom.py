"""The exact hypergeometric engine of the binary-score computations: truncated pmf rows, tails
and quantiles of the error |H/n - K/N|, in blocks of bounded size (no Monte Carlo)."""

from __future__ import annotations

import numpy as np

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
