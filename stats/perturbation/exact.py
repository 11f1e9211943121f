"""Exact numerics under Assumption 2: the uniform-binomial mixture, exact size and exact average power."""

from __future__ import annotations

import math

import numpy as np
from scipy.special import betainc, gammaln, xlog1py, xlogy

from ..validation import check_alpha
from ._checks import (_ASSUMPTION_1, _ASSUMPTION_2, _ASSUMPTION_3, _MAX_EXACT_R, _REPLICATES, _WINDOW_SD, _int,
                      _range_iv, _real)
from .results import ExactPower, ExactSize
from .statistic import _close_limit


def _window(r: int, a: float, b: float) -> tuple[int, int]:
    pad = _WINDOW_SD * math.sqrt(r) + 2.0
    return max(0, int(math.floor(a * r - pad))), min(r, int(math.ceil(b * r + pad)))


def _mixture_pmf(r: int, a: float, b: float, lo: int, hi: int) -> np.ndarray:
    """P(K = k) for k in [lo, hi] when K | p ~ Binomial(r, p) and p ~ Unif[a, b]."""
    k = np.arange(lo, hi + 1, dtype=float)
    if b - a <= 1e-12:
        return np.exp(_log_binom_pmf(k, r, a))
    # int_a^b C(r,k) p^k (1-p)^(r-k) dp = [I_b(k+1, r-k+1) - I_a(k+1, r-k+1)] / (r + 1).  More than
    # 12 sqrt(r) counts inside both ends the two incomplete betas are 1 and 0 to double precision,
    # so the (slow) betainc is only evaluated near the ends.
    pmf = np.full(k.shape, 1.0 / ((b - a) * (r + 1)))
    pad = _WINDOW_SD * math.sqrt(r) + 2.0
    edge = ~((k >= a * r + pad) & (k <= b * r - pad))
    ke = k[edge]
    pmf[edge] = (betainc(ke + 1.0, r - ke + 1.0, b) - betainc(ke + 1.0, r - ke + 1.0, a)) / ((b - a) * (r + 1))
    return np.clip(pmf, 0.0, None)


def _flush(x: np.ndarray) -> np.ndarray:
    """Zero values below 1e-250 in place: they cannot matter, and subnormal floats make every
    later product and power an order of magnitude slower."""
    x[x < 1e-250] = 0.0
    return x


def _pow(base: np.ndarray, n: int) -> np.ndarray:
    return _flush(np.power(_flush(np.clip(base, 0.0, 1.0)), n))


def _log_binom_pmf(k, r, p):
    k = np.asarray(k, dtype=float)
    p = np.asarray(p, dtype=float)
    return (gammaln(r + 1.0) - gammaln(k + 1.0) - gammaln(r - k + 1.0) + xlogy(k, p) + xlog1py(r - k, -p))


class _NullGroup:
    """Null variants sharing one replicate count: the mixture pmf and its cdf, computed once."""

    def __init__(self, r: int, n: int, a: float, b: float):
        self.r, self.n = r, n
        self.lo, self.hi = _window(r, a, b)
        self.pmf = _mixture_pmf(r, a, b, self.lo, self.hi)
        self.cdf = np.concatenate([[0.0], np.cumsum(self.pmf)])

    def cdf_at(self, k):
        """P(K <= k) for integer arrays k (0 below the window, the window's total above)."""
        idx = np.clip(np.asarray(k) - self.lo + 1, 0, self.cdf.size - 1)
        return self.cdf[idx]

    def close_prob(self, kt: np.ndarray, rt: int, eps: float) -> np.ndarray:
        r"""P(|K/r - kt/rt| <= eps) for every test count kt, decided in integers.

        :math:`|K/r - k'/r'| \le \epsilon` iff :math:`|K r' - k' r| \le E = \lfloor \epsilon r r'
        \rfloor` with eps read as the fraction it stands for (:func:`_rational`), so ties at eps
        are ties whatever floating-point rounding would have said, and a problem and its mirror
        image (p -> 1 - p, K -> r - K) count exactly the same outcomes.
        """
        r = self.r
        e = np.int64(_close_limit(eps, r, rt))
        c = np.asarray(kt, dtype=np.int64) * np.int64(r)
        lo = -((e - c) // rt)                          # ceil((c - E) / r')
        hi = (c + e) // rt
        lo, hi = np.clip(lo, 0, r), np.clip(hi, 0, r)
        return np.where(hi >= lo, self.cdf_at(hi) - self.cdf_at(lo - 1), 0.0)


def _groups(reps: np.ndarray, a: float, b: float) -> list[_NullGroup]:
    values, counts = np.unique(reps, return_counts=True)
    return [_NullGroup(int(v), int(c), a, b) for v, c in zip(values, counts)]


def _reject_given_test(groups, kt, rt, eps):
    """g(kt) = P(every null variant is farther than eps from kt/rt)."""
    g = np.ones(kt.shape, dtype=float)
    for grp in groups:
        g *= _pow(1.0 - grp.close_prob(kt, rt, eps), grp.n)
        _flush(g)
    return g


def _log_choose(lo, hi, r):
    k = np.arange(lo, hi + 1, dtype=float)
    return gammaln(r + 1.0) - gammaln(k + 1.0) - gammaln(r - k + 1.0)


def _expect_binomial(g, kt_lo, rt, p, log_choose=None):
    """E[g(K')] for K' ~ Binomial(rt, p), for each p in an array; g is given on [kt_lo, kt_lo + len(g)).

    Counts outside g's window carry negligible mass for p in the null range (see _window), and
    within it only +/-9 SD around each mean contribute (relative tail mass < 1e-18).
    """
    p = np.atleast_1d(np.asarray(p, dtype=float))
    n_g = g.size
    lc = _log_choose(kt_lo, kt_lo + n_g - 1, rt) if log_choose is None else log_choose
    sd = math.sqrt(rt * float(np.max(p * (1.0 - p)))) if p.size else 0.0
    half = int(9.0 * sd) + 6
    width = min(2 * half + 1, n_g)
    starts = np.clip(np.floor(p * rt).astype(np.int64) - half - kt_lo, 0, n_g - width)
    idx = starts[:, None] + np.arange(width)[None, :]
    k = (idx + kt_lo).astype(float)
    logp = lc[idx] + xlogy(k, p[:, None]) + xlog1py(rt - k, -p[:, None])
    return np.sum(_flush(np.exp(logp)) * g[idx], axis=1)


def _p_grid(a, b, rt, eps):
    if b - a <= 1e-12:
        return np.array([a])
    if rt <= 100:
        # E[g(K')] is then a polynomial of degree <= 100 in p': 81 points and the local refinement
        # in _sup_over_p pin its maximum.
        return np.linspace(a, b, 81)
    edge = min(b - a, eps + 6.0 / math.sqrt(rt))
    return np.unique(np.concatenate([
        np.linspace(a, b, 61), np.linspace(a, a + edge, 40), np.linspace(b - edge, b, 40)]))


def _sup_over_p(g, kt_lo, rt, a, b, eps, grid_values=None, grid=None):
    """sup over p' in [a, b] of E[g(K')]: grid search, then bounded refinement around the best points."""
    if grid is None:
        grid = _p_grid(a, b, rt, eps)
    lc = _log_choose(kt_lo, kt_lo + g.size - 1, rt)
    vals = _expect_binomial(g, kt_lo, rt, grid, lc) if grid_values is None else grid_values
    best_i = int(np.argmax(vals))
    best, best_p = float(vals[best_i]), float(grid[best_i])
    if grid.size == 1:
        return best, best_p
    # Two rounds of a dense local grid around the two best points: E[g(K')] is a smooth polynomial
    # in p', so this pins its maximum to ~1/4000 of the grid step with two vectorised evaluations.
    for i in np.argsort(vals)[-2:]:
        lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
        for _ in range(2):
            if hi <= lo:
                break
            local = np.linspace(lo, hi, 65)
            lv = _expect_binomial(g, kt_lo, rt, local, lc)
            j = int(np.argmax(lv))
            if lv[j] > best:
                best, best_p = float(lv[j]), float(local[j])
            step = local[1] - local[0]
            lo, hi = max(local[j] - step, grid[0]), min(local[j] + step, grid[-1])
    return min(best, 1.0), best_p


def _exact_size_core(eps, reps, rt, a, b, groups=None):
    groups = _groups(reps, a, b) if groups is None else groups
    lo, hi = _window(rt, a, b)
    kt = np.arange(lo, hi + 1)
    g = _reject_given_test(groups, kt, rt, eps)
    size, worst = _sup_over_p(g, lo, rt, a, b, eps)
    if b - a <= 1e-12:
        average = size
    else:
        same = [grp for grp in groups if grp.r == rt]
        pmf = same[0].pmf if same else _mixture_pmf(rt, a, b, lo, hi)
        average = float(np.dot(pmf, g))
    return size, worst, average, g, (lo, hi)


def _exact_iv(eps, m, r, a, b, alpha):
    eps = _real(eps, "eps", lo=0.0)
    m = _int(m, "m", lo=1)
    r = _int(r, "r", lo=1)
    if r > _MAX_EXACT_R:
        raise ValueError(f"r must be <= {_MAX_EXACT_R} for the exact calibration (memory); got {r!r}")
    a, b = _range_iv(a, b)
    alpha = None if alpha is None else check_alpha(alpha)
    return eps, m, r, a, b, alpha


def exact_size(eps, *, m, r, a, b, alpha=None) -> ExactSize:
    r"""Exact size of the realistic test under Assumption 2 (beyond the paper).

    Parameters
    ----------
    eps : float
        Threshold: reject when :math:`T > \epsilon`.
    m, r : int, keyword-only
        Null variants and replicates (the test variant also has r replicates).
    a, b : float, keyword-only
        Null range.
    alpha : float, optional, keyword-only
        When given, ``valid = size <= alpha``.

    Returns
    -------
    ExactSize

    Notes
    -----
    Under Assumption 2 each null count is a uniform-binomial mixture,

    .. math::

        P(K_j = k) = \int_a^b \binom{r}{k} p^k (1-p)^{r-k} \frac{dp}{b-a}
                   = \frac{I_b(k+1, r-k+1) - I_a(k+1, r-k+1)}{(b-a)(r+1)},

    (:math:`I_x` the regularized incomplete beta), independent across j and of :math:`K'`.
    Given :math:`K' = k'`, the test rejects iff every null is farther than eps:

    .. math::

        g(k') = \prod_j \bigl(1 - P(|K_j/r - k'/r| \le \epsilon)\bigr),\qquad
        P(T > \epsilon \mid p') = \sum_{k'} \binom{r}{k'} p'^{k'} (1-p')^{r-k'} g(k').

    The size is the supremum over :math:`p' \in [a, b]`, found on a grid (dense near the
    ends of the range, where it is attained) refined by two rounds of dense local grids; the average over
    :math:`p' \sim \mathrm{Unif}[a, b]` is :math:`\sum_{k'} P(K_j = k') g(k')` exactly.  This
    replaces the union bound :math:`2m/\sqrt r` of Theorem 2 by the exact probability, so the
    same level needs far fewer replicates.  Sums run over windows of +/-12 sqrt(r) counts around
    [a r, b r]; the mass left out is below 1e-100.  Distances are compared
    in integers (:math:`|K r' - K' r| \le \lfloor \epsilon r r' \rfloor`, eps as the
    fraction it stands for), so ties at eps are exact and mirror images (p -> 1 - p) give the
    same size.

    With b = a (a point null) the mixture is Binomial(r, a).
    """
    eps, m, r, a, b, alpha = _exact_iv(eps, m, r, a, b, alpha)
    size, worst, average, _, _ = _exact_size_core(eps, np.full(m, r), r, a, b)
    return ExactSize(
        size=size, worst_p=worst, average_size=average, eps=eps, m=m, r=r, a=a, b=b, alpha=alpha,
        valid=None if alpha is None else bool(size <= alpha),
        method="exact_uniform_binomial_mixture (beyond the paper)",
        assumptions=(_ASSUMPTION_1, _ASSUMPTION_2, _REPLICATES,
                     "supremum over p' found numerically (grid plus bounded refinement)"),
    )


def _exact_power_core(eps, m, r, a, b):
    groups = _groups(np.full(m, r), a, b)
    # Under H_A (Assumption 3) p' ranges over all of (0, a) U (b, 1): test counts far from the
    # null range see no null within eps, so g = 1 there and only the window needs computing.
    lo, hi = _window(r, a, b)
    lo = max(0, lo - int(math.ceil(eps * r)) - 2)
    hi = min(r, hi + int(math.ceil(eps * r)) + 2)
    kt = np.arange(lo, hi + 1, dtype=float)
    g = _reject_given_test(groups, kt.astype(np.int64), r, eps)
    # P(K' = k', p' in (0, a)) + P(K' = k', p' in (b, 1)) = [I_a(k'+1, r-k'+1) + 1 - I_b(...)] / (r + 1)
    wts = (betainc(kt + 1, r - kt + 1, a) + (1.0 - betainc(kt + 1, r - kt + 1, b))) / (r + 1)
    total_alt = a + (1.0 - b)
    inside = float(np.sum(wts))
    return (float(np.dot(wts, g)) + max(total_alt - inside, 0.0)) / total_alt


def exact_power(eps, *, m, r, a, b) -> ExactPower:
    r"""Exact average power over :math:`p' \sim \mathrm{Unif}((0, a) \cup (b, 1))` (Assumptions 2, 3).

    Notes
    -----
    With g as in :func:`exact_size`, the average power is

    .. math::

        \frac{1}{1 - (b - a)} \sum_{k'} g(k')\,
        \frac{I_a(k'+1, r-k'+1) + 1 - I_b(k'+1, r-k'+1)}{r + 1},

    since :math:`\int_0^a \binom{r}{k} p^k (1-p)^{r-k} dp = I_a(k+1, r-k+1)/(r+1)`.  It is the
    exact counterpart of Theorem 4's lower bound H (which it always exceeds).  Requires
    b - a < 1.
    """
    eps, m, r, a, b, _ = _exact_iv(eps, m, r, a, b, None)
    if b - a >= 1:
        raise ValueError(f"b - a must be < 1 for an average power (P_1 is empty otherwise); got a={a!r}, b={b!r}")
    return ExactPower(
        power=_exact_power_core(eps, m, r, a, b), eps=eps, m=m, r=r, a=a, b=b,
        method="exact_average_power (uniform-binomial mixture, beyond the paper)",
        assumptions=(_ASSUMPTION_1, _ASSUMPTION_2, _ASSUMPTION_3, _REPLICATES),
    )
