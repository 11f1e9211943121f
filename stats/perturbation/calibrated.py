r"""The default per-item composite test: the widened range with its noise margin calibrated exactly.

Calibrations depend on the design (m, r, r', alpha) only; :func:`register_calibrations` makes ones
computed before known (the tasks layer keeps them on disk: tasks/perturbation/tables.py) and
:func:`computed_calibrations` lists the new ones.  This module does no I/O.

:func:`calibrated_range_test` rejects when the tested variant's rate lies outside the null
variants' observed range widened by :math:`cR + z\sigma`; c is the spacing margin of the
composite-null paper's ideal test (section 3, Lemma 2 with the range unknown) and z is the
smallest multiple of the worst-case binomial SD that keeps the size at alpha, computed in
binomial arithmetic over the composite null (Assumptions 1-2) instead of bounded by Hoeffding's
inequality.  One level, one computation: no allowance is stacked on another.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy.special import betainc, gammaln, xlog1py, xlogy

from ..bisection import smallest_passing
from ..validation import check_alpha
from ._checks import _ASSUMPTION_1, _ASSUMPTION_2, _REPLICATES
from .no_power import no_power_sentence
from .results import CompositeTestResult
from .statistic import _composite_statistic_iv, composite_statistic

__all__ = ["CALIBRATION_GRID", "CALIBRATION_VERSION", "calibrated_power", "reject_many", "calibrated_range_test",
           "calibration", "calibrated_size", "register_calibrations", "computed_calibrations"]

ASSUMPTIONS = (_ASSUMPTION_1, _ASSUMPTION_2, _REPLICATES,
               "every null variant has the same replicate count (otherwise the widened test is used)")

#: Widths w = b - a of the null ranges the size is maximised over; for each width 5 positions
#: a from 0 to (1 - w)/2 (the mirror image p -> 1 - p gives the other half exactly).  Boundary
#: rates (a = 0) and point nulls (w = 0) are included.
CALIBRATION_GRID = (0.0, 0.001, 0.002, 0.005, 0.01, 0.02, 0.035, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
                    0.65, 0.8, 1.0)
_POSITIONS = 9
#: p-values are reported on this ladder of levels (times alpha), each calibrated exactly.
P_LADDER = (0.2, 1.0)
_Z_STEP = 0.02
#: The compass search (:func:`_local_max`) starts from this many of the grid's largest sizes and
#: stops when its position step and width factor are within this of zero and one.
_REFINE_STARTS = 4
_REFINE_TOL = 2e-3
#: Changes whenever the calibration's search changes: stored tables of another version are not used.
CALIBRATION_VERSION = 2


def _window(r: int, a: float, b: float) -> tuple[int, int]:
    # 9 worst-case binomial SDs (0.5 sqrt(r) each) beyond the range: the mass left out is < 1e-18
    pad = 4.5 * math.sqrt(r) + 2.0
    return max(0, int(math.floor(a * r - pad))), min(r, int(math.ceil(b * r + pad)))


def _mixture_cdf(r: int, a: float, b: float, lo: int, hi: int) -> np.ndarray:
    """F with F[x - lo + 1] = P(K <= x), K | p ~ Binomial(r, p), p ~ Unif[a, b]; F[0] = P(K < lo)."""
    k = np.arange(lo, hi + 1, dtype=float)
    if b - a <= 1e-12:
        pmf = np.exp(gammaln(r + 1.0) - gammaln(k + 1.0) - gammaln(r - k + 1.0) + xlogy(k, a) + xlog1py(r - k, -a))
    else:
        pmf = (betainc(k + 1.0, r - k + 1.0, b) - betainc(k + 1.0, r - k + 1.0, a)) / ((b - a) * (r + 1))
    return np.minimum(np.concatenate([[0.0], np.cumsum(np.clip(pmf, 0.0, None))]), 1.0)


def _widening(alpha: float, m: int) -> float:
    # (1 + c)^-(m - 1) = alpha: the ideal test's size at the edge of the range (see Notes)
    return alpha ** (-1.0 / (m - 1)) - 1.0


def _sigma(c: float, r: int, rt: int) -> float:
    """Worst-case (p = 1/2) SD of (1 + c) p_hat_i - c p_hat_j - p_hat'."""
    return 0.5 * math.sqrt(((1.0 + c) ** 2 + c**2) / r + 1.0 / rt)


def _last_rejected_max(i, kt, r, rt, c, margin):
    """J[k', i]: the largest null maximum j with which minimum i rejects below test count k'.

    Reject below iff k'/r' + margin < ((1 + c) i - c j) / r; the same expression decides observed
    data (:func:`_rejects_below`), so calibration and decision agree on every lattice point.
    """
    x = ((1.0 + c) * i[None, :] - (kt[:, None] / rt + margin) * r) / c
    return np.ceil(x).astype(np.int64) - 1


def _rejects_below(kmin, kmax, kt, r, rt, c, margin) -> bool:
    j = _last_rejected_max(np.array([kmin]), np.array([kt]), r, rt, c, margin)[0, 0]
    return bool(kmax <= j and kmin <= j)


def _h_lower(m, r, rt, c, margin, a, b, kt_lo, kt_hi):
    """h[k'] = P(reject below | K' = k') for k' in [kt_lo, kt_hi], null rates i.i.d. Unif[a, b]."""
    lo, hi = _window(r, a, b)
    f = _mixture_cdf(r, a, b, lo, hi)
    i = np.arange(lo, hi + 1)
    kt = np.arange(kt_lo, kt_hi + 1)
    j = _last_rejected_max(i, kt, r, rt, c, margin)
    fj = f[np.clip(j, lo - 1, hi) - lo + 1]
    # P(min = i, max <= j) = P(i <= K <= j)^m - P(i < K <= j)^m
    v = np.clip(fj - f[i - lo][None, :], 0.0, None) ** m - np.clip(fj - f[i - lo + 1][None, :], 0.0, None) ** m
    v[j < i[None, :]] = 0.0
    return v.sum(axis=1)


def _binom_matrix(p, kt_lo, kt_hi, rt):
    k = np.arange(kt_lo, kt_hi + 1, dtype=float)[None, :]
    p = np.asarray(p, dtype=float)[:, None]
    return np.exp(gammaln(rt + 1.0) - gammaln(k + 1.0) - gammaln(rt - k + 1.0) + xlogy(k, p) + xlog1py(rt - k, -p))


def _p_grid(a, b, rt):
    if b - a <= 1e-12:
        return np.array([a])
    e = min(b - a, 8.0 / math.sqrt(rt))
    s = np.linspace(0.0, 1.0, 25) ** 2
    return np.unique(np.r_[np.linspace(a, b, 25), a + e * s, b - e * s])


def _cell_size(m, r, rt, c, margin, a, b) -> float:
    r"""Upper bound on :math:`\sup_{p' \in [a, b]} P(\text{reject})` with null rates i.i.d. Unif[a, b].

    P(reject below) falls and P(reject above) rises with p' (K' is stochastically increasing and
    independent of the null counts), so on a cell :math:`[p_k, p_{k+1}]` of the p' grid the size is
    at most :math:`L(p_k) + U(p_{k+1})`: the maximum over cells bounds the supremum over [a, b].
    """
    kt_lo, kt_hi = _window(rt, a, b)
    h_lo = _h_lower(m, r, rt, c, margin, a, b, kt_lo, kt_hi)
    # above: the mirror image (p -> 1 - p, K -> r - K) of rejecting below
    h_up = _h_lower(m, r, rt, c, margin, 1.0 - b, 1.0 - a, rt - kt_hi, rt - kt_lo)[::-1]
    p = _p_grid(a, b, rt)
    bm = _binom_matrix(p, kt_lo, kt_hi, rt)
    low, up = bm @ h_lo, bm @ h_up
    return float(low[0] + up[0]) if p.size == 1 else float(np.max(low[:-1] + up[1:]))


def _cells():
    for w in CALIBRATION_GRID:
        for a in np.linspace(0.0, (1.0 - w) / 2.0, _POSITIONS if w < 1.0 else 1):
            yield float(a), float(min(a + w, 1.0))


def _clip_cell(a: float, w: float) -> tuple[float, float]:
    w = min(max(w, 0.0), 1.0)
    a = min(max(a, 0.0), 1.0 - w)
    return float(a), float(min(a + w, 1.0))


def _local_max(size, a: float, b: float) -> tuple[float, tuple[float, float]]:
    """The size's largest value near the cell (a, b), by a compass search in (a, log w).

    Steps start at half the grid's spacing (a position step, a width factor of 1.5) and halve
    whenever no neighbour is larger; the size is smooth in (a, b) (an average of polynomials in
    the rates), so the search climbs to the local maximum the grid point sits below.
    """
    w = b - a
    best, cell = size(a, b), (a, b)
    da, fw = max((1.0 - w) / (2.0 * (_POSITIONS - 1)), 1e-3) / 2.0, 1.5
    while da > _REFINE_TOL or fw > 1.0 + _REFINE_TOL:
        a0, w0 = cell[0], cell[1] - cell[0]
        moves = [(a0 - da, w0), (a0 + da, w0), (a0, w0 * fw if w0 > 0 else 1e-3), (a0, w0 / fw),
                 (a0 - da, w0 * fw), (a0 + da, w0 / fw)]
        tried = [(size(*c), c) for c in {_clip_cell(*mv) for mv in moves} - {cell}]
        top = max(tried, default=(-1.0, cell))
        if top[0] > best:
            best, cell = top
        else:
            da, fw = da / 2.0, math.sqrt(fw)
    return best, cell


def calibrated_size(m: int, r: int, rt: int, *, alpha: float = 0.05, z: float | None = None) -> float:
    """The largest size over the calibration grid and its refined local maxima (default z: calibrated)."""
    c = _widening(check_alpha(alpha), m)
    z = calibration(m, r, rt, alpha)[0] if z is None else z
    margin = z * _sigma(c, r, rt)
    cells = list(_cells())
    sizes = [_cell_size(m, r, rt, c, margin, a, b) for a, b in cells]
    refined = _refine(m, r, rt, c, margin, cells, np.asarray(sizes))
    return max(max(sizes), *(s for s, _ in refined))


def _sizes(m, r, rt, c, z, cells) -> np.ndarray:
    margin = z * _sigma(c, r, rt)
    return np.array([_cell_size(m, r, rt, c, margin, a, b) for a, b in cells])


def _refine(m, r, rt, c, margin, cells, sizes) -> list[tuple[float, tuple[float, float]]]:
    """Local maxima of the size climbed from the grid's _REFINE_STARTS largest cells."""
    def size(a, b):
        return _cell_size(m, r, rt, c, margin, a, b)

    return [_local_max(size, *cells[i]) for i in np.argsort(sizes)[::-1][:_REFINE_STARTS]]


def _smallest_z(m, r, rt, c, alpha, cells, n_max) -> int | None:
    """Smallest n <= n_max with size <= alpha at z = n * _Z_STEP on these cells (None: none)."""
    if np.all(_sizes(m, r, rt, c, 0.0, cells) <= alpha):
        return 0
    lo, hi = 0, n_max                          # size(lo) > alpha; size(hi) <= alpha to be checked
    if np.any(_sizes(m, r, rt, c, hi * _Z_STEP, cells) > alpha):
        return None
    return smallest_passing(lambda n: bool(np.all(_sizes(m, r, rt, c, n * _Z_STEP, cells) <= alpha)), lo, hi)


#: Calibrations known without computing them: (m, r, r', alpha) -> z, filled by
#: :func:`register_calibrations` (the tasks layer loads the package's table and the user's cache).
_KNOWN: dict[tuple[int, int, int, float], float] = {}
#: Calibrations computed in this process, for the tasks layer to store (:func:`computed_calibrations`).
_COMPUTED: dict[tuple[int, int, int, float], float] = {}


def register_calibrations(entries) -> int:
    """Make calibrations computed before (same :data:`CALIBRATION_VERSION`) known; returns how many.

    ``entries`` is an iterable of ``(m, r, r_test, alpha, z)``; z may be ``math.inf``.
    """
    n = 0
    for m, r, rt, alpha, z in entries:
        _KNOWN[(int(m), int(r), int(rt), float(alpha))] = float(z)
        n += 1
    calibration.cache_clear()
    return n


def computed_calibrations() -> list[tuple[int, int, int, float, float]]:
    """``(m, r, r_test, alpha, z)`` of every calibration computed (not looked up) in this process."""
    return [(*key, z) for key, z in _COMPUTED.items()]


@lru_cache(maxsize=256)
def calibration(m: int, r: int, rt: int, alpha: float) -> tuple[float, float]:
    """(z, c): the smallest margin z (a multiple of 0.02) whose size over (a, b) is <= alpha.

    The size's supremum over null ranges (a, b) is found numerically: the grid of
    :data:`CALIBRATION_GRID` widths x _POSITIONS positions, then a compass search from the
    _REFINE_STARTS largest cells to the local maxima between grid points (:func:`_local_max`).
    The rejection region shrinks as z grows, so the size falls with z: z is bisected on a few
    active cells (the worst ones), then checked on every cell and refined maximum; cells that
    fail join the active set and the search repeats.  z = inf when no margin short of the one
    that makes rejection impossible keeps the level.
    """
    c = _widening(alpha, m)
    key = (int(m), int(r), int(rt), float(alpha))
    if key in _KNOWN:
        return _KNOWN[key], c
    z = _calibrate(m, r, rt, c, alpha)
    _COMPUTED[key] = z
    return z, c


def _calibrate(m, r, rt, c, alpha) -> float:
    cells = list(_cells())
    n_max = int(math.ceil(1.0 / (_sigma(c, r, rt) * _Z_STEP)))      # z sigma >= 1: nothing can reject
    sizes = _sizes(m, r, rt, c, 0.0, cells)
    n = 0
    active = [cells[i] for i in np.argsort(sizes)[-3:]]
    while True:
        if np.any(sizes > alpha):
            n = _smallest_z(m, r, rt, c, alpha, active, n_max)
            if n is None:
                return math.inf
            sizes = _sizes(m, r, rt, c, n * _Z_STEP, cells)
        refined = _refine(m, r, rt, c, n * _Z_STEP * _sigma(c, r, rt), cells, sizes)
        bad = [cells[i] for i in np.flatnonzero(sizes > alpha)] + [cell for s, cell in refined if s > alpha]
        if not bad:
            return n * _Z_STEP
        active += bad
        cells += [cell for s, cell in refined if s > alpha]
        sizes = np.r_[sizes, [s for s, _ in refined if s > alpha]]


def calibrated_power(p_test, *, m: int, r: int, a: float, b: float, r_test: int | None = None,
                     alpha: float = 0.05) -> float:
    """Exact rejection probability at tested probability ``p_test``, null rates i.i.d. Unif[a, b]."""
    rt = r if r_test is None else int(r_test)
    z, c = calibration(int(m), int(r), rt, check_alpha(alpha))
    if not math.isfinite(z):
        return 0.0
    margin = z * _sigma(c, r, rt)
    h_lo = _h_lower(m, r, rt, c, margin, a, b, 0, rt)
    h_up = _h_lower(m, r, rt, c, margin, 1.0 - b, 1.0 - a, 0, rt)[::-1]
    return float((_binom_matrix([p_test], 0, rt, rt) @ (h_lo + h_up))[0])


def reject_many(null_counts, null_replicates: int, test_counts, test_replicates: int, *, alpha=0.05):
    """Decisions of :func:`calibrated_range_test` for many items at once (simulation studies).

    ``null_counts`` is (n, m) with one replicate count r for every null variant, ``test_counts``
    (n,) with ``test_replicates`` each; the same lattice comparison as the per-item test.
    """
    k = np.asarray(null_counts, dtype=np.int64)
    n, m = k.shape
    r, rt = int(null_replicates), int(test_replicates)
    z, c = calibration(m, r, rt, check_alpha(alpha))
    if m < 2 or not math.isfinite(z):
        return np.zeros(n, dtype=bool)
    margin = z * _sigma(c, r, rt)
    kt = np.asarray(test_counts, dtype=np.int64)
    kmin, kmax = k.min(axis=1), k.max(axis=1)

    def below(lo_, hi_, t_):
        x = ((1.0 + c) * lo_ - (t_ / rt + margin) * r) / c
        j = np.ceil(x).astype(np.int64) - 1
        return (hi_ <= j) & (lo_ <= j)

    out = below(kmin, kmax, kt) | below(r - kmax, r - kmin, rt - kt)
    return out & ~((kmin == 0) & (kmax == r))


def _ladder_p(kmin, kmax, kt, r, rt, m, alpha) -> float:
    for share in P_LADDER:
        z, c = calibration(m, r, rt, share * alpha)
        if math.isfinite(z) and _decide(kmin, kmax, kt, r, rt, c, z * _sigma(c, r, rt)):
            return share * alpha
    return 1.0


def _decide(kmin, kmax, kt, r, rt, c, margin) -> bool:
    return (_rejects_below(kmin, kmax, kt, r, rt, c, margin)
            or _rejects_below(r - kmax, r - kmin, rt - kt, r, rt, c, margin))


def calibrated_range_test(null_counts, null_replicates, test_count, test_replicates, *,
                          alpha=0.05) -> CompositeTestResult:
    r"""Per-item composite test whose size over the paper's composite null is computed, not bounded.

    Parameters
    ----------
    null_counts, null_replicates : array_like of int, shape (m,) (replicates may be a scalar)
        Successes :math:`K_j` in r replicates of each null variant (one replicate count r for all).
    test_count, test_replicates : int
        :math:`K'` in :math:`r'` replicates of the tested variant.
    alpha : float, keyword-only

    Returns
    -------
    CompositeTestResult
        ``method="calibrated"``; reject iff ``test_rate`` lies outside [``range_low``,
        ``range_high``]; ``p_value`` on the ladder alpha x (0.2, 1), else 1.

    Notes
    -----
    *Hypothesis* (composite-null paper, section 3, Assumptions 1-2 of section 4.1):
    :math:`H_0: p' \in [a, b]`, the null variants' probabilities i.i.d. Unif[a, b] and independent
    of :math:`p'`, replicates Bernoulli; a and b unknown (nothing is plugged in).

    *Test.*  With :math:`\hat p_{(1)}, \hat p_{(m)}` the smallest and largest null rates,
    :math:`\hat R` their distance, :math:`c = \alpha^{-1/(m-1)} - 1` and
    :math:`\sigma = \tfrac12\sqrt{((1+c)^2 + c^2)/r + 1/r'}` (the SD of
    :math:`(1+c)\hat p_i - c\hat p_j - \hat p'` at p = 1/2, its largest), reject iff

    .. math:: \hat p' < \hat p_{(1)} - c\hat R - z\sigma \quad\text{or}\quad
              \hat p' > \hat p_{(m)} + c\hat R + z\sigma .

    Without noise this is the ideal test with margin cR: given :math:`p' = a` the spacings of the
    m uniforms give :math:`P(p_{(1)} - p' > cR) = (1+c)^{-(m-1)} = \alpha` whatever the width
    b - a (the spacing argument of :func:`~benchcert.stats.perturbation.item_test.widened_range_test`).

    *Calibration (exact, binomial arithmetic).*  For given (a, b, p') the size is computed exactly:
    the null counts are i.i.d. with the uniform-binomial mixture cdf F (as in
    :func:`~benchcert.stats.perturbation.exact.exact_size`), the pair (min, max) has
    :math:`P(\min = i, \max \le j) = (F(j) - F(i-1))^m - (F(j) - F(i))^m`, and summing over the
    lattice gives P(reject below | K' = k') for every k', then over Binomial(r', p').  The
    supremum over p' is bounded rigorously by monotonicity (:func:`_cell_size`); the supremum over
    (a, b) is found per design (m, r, r'): the grid :data:`CALIBRATION_GRID` (18 widths, 9
    positions each, mirror images exact; point nulls and boundary rates included), then a compass
    search from the largest cells to the local maxima between grid points (:func:`_local_max`).
    z is the smallest multiple of 0.02 whose size on the grid and at those maxima is <= alpha
    (bisection: the rejection region shrinks as z grows).  With z = 0 already valid, z = 0.
    Issue #36: with 5 positions and no search the size reached 5.18% at m = 2, r = 50, r' = 3.

    *Departures.*  (1) The supremum over (a, b) is found numerically, not bounded analytically;
    tests/stats/perturbation/test_calibrated_size_grid.py computes the exact size on an independent
    dense grid of null ranges for every (m, r, r') in {2, 3, 5, 8} x {10, 50, 400} x {3, 10, r}
    (largest 4.96%, m = 8, r = r' = 50).  (2) Unequal replicate
    counts among the null variants are not calibrated: :func:`composite_test` then runs the
    assumption-light widened test.  (3) p-values are coarse (ladder of exactly calibrated levels)
    so Benjamini-Hochberg across items stays valid and is conservative.

    Power at m = 8, r = r' = 400, null rates Unif[0.4, 0.6], tested rate 0.6 + d, alpha = 0.05
    (exact, this calibration): see docs/methods.md.
    """
    k, r, kt, rt = _composite_statistic_iv(null_counts, null_replicates, test_count, test_replicates)
    alpha = check_alpha(alpha)
    if np.unique(r).size != 1:
        raise ValueError("null_replicates must be equal for the calibrated test; got "
                         f"{int(r.min())} to {int(r.max())} (use the widened test for unequal counts)")
    rr = int(r[0])
    stat = composite_statistic(k, r, kt, rt).statistic
    rates = k / rr
    m = int(k.size)
    base = dict(statistic=stat, m=m, r_min=int(min(rr, rt)), r_max=int(max(rr, rt)), r_test=rt, test_rate=kt / rt,
                null_min=float(rates.min()), null_max=float(rates.max()), alpha=alpha, eps=None, eps_union=None,
                eps_exact=None, p_union=None, p_exact=None, a_hat=None, b_hat=None, method="calibrated",
                assumptions=ASSUMPTIONS)
    if m == 1:
        return CompositeTestResult(reject=False, p_value=math.nan, status="one_null_variant",
                                   notes=("one null variant cannot span a range: not tested",), **base)
    z, c = calibration(m, rr, rt, alpha)
    sig = _sigma(c, rr, rt)
    margin = z * sig
    kmin, kmax = int(k.min()), int(k.max())
    spread = (kmax - kmin) / rr
    low, high = kmin / rr - c * spread - margin, kmax / rr + c * spread + margin
    extra = dict(range_low=low, range_high=high, widening=c, ideal_alpha=None, coverage_alpha=None,
                 min_detectable_gap=margin if math.isfinite(margin) else math.inf)
    if kmin == 0 and kmax == rr:
        return CompositeTestResult(reject=False, p_value=math.nan, status="no_alternative",
                                   notes=("the null variants' rates run from 0 to 1: no rate lies outside their "
                                          "range",), **base, **extra)
    # the most extreme outcome (all nulls at r, the tested variant at 0) must be able to reject
    if not math.isfinite(z) or not _rejects_below(rr, rr, 0, rr, rt, c, margin):
        return CompositeTestResult(reject=False, p_value=math.nan, status="no_power",
                                   notes=(no_power_sentence(min(rr, rt), max(rr, rt), alpha, m),), **base, **extra)
    if low <= 0.0 and high >= 1.0:
        return CompositeTestResult(reject=False, p_value=math.nan, status="no_alternative",
                                   notes=(f"the widened null range [{low:.3g}, {high:.3g}] covers every rate the "
                                          "tested variant could show",), **base, **extra)
    reject = _decide(kmin, kmax, kt, rr, rt, c, margin)
    p = _ladder_p(kmin, kmax, kt, rr, rt, m, alpha) if reject else 1.0
    return CompositeTestResult(reject=reject, p_value=float(p), status="ok", notes=(), **base, **extra)
