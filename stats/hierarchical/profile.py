"""Profile likelihood of the precision a + b: its lower confidence bound per fit (the upper bound
on a domain's subject proxy) and :func:`joint_subject_bound`, the bound on the subject term
summed over domains."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln, psi, xlogy

from .likelihood import _BetaLik, _ab, _subset
from .limits import WORST_CASE_S2, _LOGIT_MAX, _LOG_NU_MAX, _LOG_NU_MIN
from .special import _kernels, _trigamma_rough

__all__ = ["joint_subject_bound"]

#: Grid of w = log(a + b) on which the profile likelihood is evaluated for the lower
#: confidence bound on the precision (spacing 0.2: the per-domain crossing is then refined by
#: a bracketing root search; the joint bound is conservative between grid points).
_W_GRID = np.linspace(_LOG_NU_MIN, _LOG_NU_MAX, 116)

#: A fit's profile uses the count form (:class:`_CountProfile`) when its largest subject has at
#: most this many items per subject of the fit: J logs or reciprocals cost less than K special
#: functions up to about that ratio.
_COUNT_FORM_RATIO = 3
#: Newton's stopping rules in t = logit(mean) at fixed precision: a decrement (log-likelihood
#: still to gain) below _L_TOL, or a step below _T_TOL (what is left after either is of the
#: order of its square); and the width in w = log(a + b) at which the crossing search stops:
#: 1e-9, i.e. nu_lower to 1e-9 relative on its conservative side (the former bisection stopped at
#: 1.9e-10; 2e-11 took 2.2 more profile maximisations per fit, issue #40, for digits no bound reads).
_L_TOL = 1e-9
_T_TOL = 1e-10
_W_TOL = 1e-9
#: Largest Newton step in t after which :func:`_max_over_mean` keeps a fit's Hessian for its next step.
_HESS_REUSE = 1e-3


#: Columns from which :func:`_colsum` adds row by row in place: np.add.accumulate writes the whole
#: (J, F) running sum (about 4 ns a cell), a loop over the rows one (F,) vector (under 1 ns a cell
#: once F is in the hundreds); below it the loop's per-row call costs more than the cells.
_COLSUM_LOOP_COLS = 64


def _colsum(x):
    """Sum of each column of a (J, F) array, strictly row after row (a running sum, whatever the
    shape: np.sum may sum a lone column pairwise), so that zero padding rows and the other
    columns of the batch leave each column's sum unchanged to the last bit. Both ways below add
    the rows in the same order, one addition per cell, so they give the same bits."""
    if x.ndim != 2 or x.shape[1] < _COLSUM_LOOP_COLS or x.shape[0] < 2:
        return np.add.accumulate(x, axis=0)[-1]
    out = x[0].copy()
    for row in x[1:]:
        out += row
    return out


def _shifted_sum(fn: str, x, a, sign: int):
    """``_colsum(fn(x + a) - fn(a))`` (``sign`` 1) or ``_colsum(fn(a) - fn(x + a))`` (-1) by the compiled
    kernel (stats/hierarchical/compiled.py), ``fn`` scipy's gammaln or psi: the same operations in the
    same order, so the same bits, in one pass (the special functions are most of a profile's cost)."""
    mod = _kernels["module"]
    a = np.ascontiguousarray(np.broadcast_to(np.asarray(a, dtype=float), (x.shape[1],)))
    return mod.colsum_shifted(getattr(mod, fn), x, a, sign)


def _mean_part(ky, kf):
    """max over mu of ky log mu + kf log(1 - mu) (0 log 0 = 0): the part of :meth:`range_bound` in mu."""
    both = ky + kf
    return xlogy(ky, ky / both) + xlogy(kf, kf / both)


class _CountProfile:
    r"""Beta-binomial log-likelihood at fixed precision through count statistics.

    For integer counts, log Gamma(y + a) - log Gamma(a) = sum_{j < y} log(a + j), so

    .. math:: \sum_k [\log B(y_k + a, f_k + b) - \log B(a, b)]
              = \sum_{j<J} [A_j \log(a + j) + B_j \log(b + j) - N_j \log(a + b + j)]

    with A_j = #{k : y_k > j}, B_j = #{k : f_k > j}, N_j = #{k : m_k > j}, J = max m_k: the
    mean-dependent part and its derivatives need J logs or reciprocals per side instead of
    K log-gammas, digammas and trigammas. Arrays are (J, F), one column per fit.
    """

    def __init__(self, A, B, N):
        self.A, self.B, self.N = A, B, N
        self.j = np.arange(A.shape[0], dtype=float)[:, None]

    @classmethod
    def from_counts(cls, y, m, mask):
        """From padded (F, K) successes and trials (``mask`` = subject present)."""
        f_rows = y.shape[0]
        yy = np.where(mask, y, 0).astype(np.int64)
        mm = np.where(mask, m, 0).astype(np.int64)
        jmax = max(int(mm.max()) if mm.size else 0, 1)
        row = np.repeat(np.arange(f_rows), y.shape[1]).reshape(y.shape) * (jmax + 1)

        def above(v):  # (J, F): #{k : v_k > j}
            hist = np.bincount((row + v).ravel(), minlength=f_rows * (jmax + 1)).reshape(f_rows, jmax + 1)
            tail = np.cumsum(hist[:, ::-1], axis=1)[:, ::-1]  # #{k : v_k >= j}
            return np.ascontiguousarray(tail[:, 1:].T, dtype=float)

        return cls(above(yy), above(mm - yy), above(mm))

    def take(self, idx):
        return _CountProfile(*(np.ascontiguousarray(v[:, idx]) for v in (self.A, self.B, self.N)))

    def const(self, nu):
        """The part that depends on the precision only."""
        return -_colsum(self.N * np.log(nu + self.j))

    def value(self, a, b):
        return _colsum(self.A * np.log(a + self.j)) + _colsum(self.B * np.log(b + self.j))

    def value_slope(self, a, b, nu):
        """(log-likelihood, l_a - l_b) at (a, b): :meth:`value` + :meth:`const` and
        :meth:`mean_slope` (for :func:`_profile_grid`'s bound on points far from the maximum)."""
        return self.value(a, b) + self.const(nu), self.mean_slope(a, b)

    def range_bound(self, nu_lo, nu_hi):
        """An upper bound on the log-likelihood over every mean and every a + b in [nu_lo, nu_hi]
        (see :func:`_profile_grid`): sum_{j >= 1} [(A_j + B_j) log(nu_hi + j) - N_j log(nu_lo + j)]
        + (A_0 + B_0 - N_0) log nu_hi + max over mu of A_0 log mu + B_0 log(1 - mu)."""
        j = self.j[1:]
        rest = _colsum((self.A[1:] + self.B[1:]) * np.log(nu_hi + j) - self.N[1:] * np.log(nu_lo + j)) \
            if j.size else 0.0
        a0, b0, n0 = self.A[0], self.B[0], self.N[0]
        return _mean_part(a0, b0) + (a0 + b0 - n0) * np.log(nu_hi) + rest

    def mean_slope(self, a, b):
        """l_a - l_b: the terms in a + b cancel in a step of the mean alone."""
        return _colsum(self.A * (1.0 / (a + self.j))) - _colsum(self.B * (1.0 / (b + self.j)))

    def mean_curv(self, a, b):
        """l_aa + l_bb (the terms in a + b cancel as in :meth:`mean_slope`)."""
        ra = 1.0 / (a + self.j)
        wa = self.A * ra
        wa *= ra
        rb = 1.0 / (b + self.j)
        wb = self.B * rb
        wb *= rb
        return -(_colsum(wa) + _colsum(wb))


class _SubjectProfile:
    """Beta-binomial log-likelihood at fixed precision, one term per subject: (K, F) arrays of
    successes, failures and trials (padding: all 0, whose terms are exactly 0)."""

    def __init__(self, y, f, m):
        self.y, self.f, self.m = y, f, m

    @classmethod
    def from_counts(cls, y, m, mask):
        yy = np.ascontiguousarray(np.where(mask, y, 0.0).T)
        mm = np.ascontiguousarray(np.where(mask, m, 0.0).T)
        return cls(yy, mm - yy, mm)

    def take(self, idx):
        return _SubjectProfile(*(np.ascontiguousarray(v[:, idx]) for v in (self.y, self.f, self.m)))

    def const(self, nu):
        if _kernels["module"] is not None and self.m.shape[0]:
            return _shifted_sum("GAMMALN", self.m, nu, -1)
        return _colsum(gammaln(nu) - gammaln(self.m + nu))

    def value(self, a, b):
        if _kernels["module"] is not None and self.y.shape[0]:
            return _shifted_sum("GAMMALN", self.y, a, 1) + _shifted_sum("GAMMALN", self.f, b, 1)
        return _colsum(gammaln(self.y + a) - gammaln(a)) + _colsum(gammaln(self.f + b) - gammaln(b))

    def range_bound(self, nu_lo, nu_hi):
        """:meth:`_CountProfile.range_bound` from the subjects' counts: with
        S(n, x) = log Gamma(n + x) - log Gamma(1 + x) = sum_{1 <= j < n} log(j + x), increasing in x,
        sum_k [1{y_k >= 1} S(y_k, nu_hi) + 1{f_k >= 1} S(f_k, nu_hi) - S(m_k, nu_lo)]
        + (K_y + K_f - K) log nu_hi + max over mu of K_y log mu + K_f log(1 - mu)."""
        y, f, m = self.y, self.f, self.m
        g_hi, g_lo = gammaln(1.0 + nu_hi), gammaln(1.0 + nu_lo)
        terms = (np.where(y >= 1, gammaln(y + nu_hi) - g_hi, 0.0) + np.where(f >= 1, gammaln(f + nu_hi) - g_hi, 0.0)
                 - np.where(m >= 1, gammaln(m + nu_lo) - g_lo, 0.0))
        ky, kf, k = (_colsum((v >= 1).astype(float)) for v in (y, f, m))
        return _mean_part(ky, kf) + (ky + kf - k) * np.log(nu_hi) + _colsum(terms)

    def value_slope(self, a, b, nu):
        """(log-likelihood, l_a - l_b) at (a, b), without the second derivative."""
        return self.value(a, b) + self.const(nu), self.mean_slope(a, b)

    def mean_slope(self, a, b):
        if _kernels["module"] is not None and self.y.shape[0]:
            return _shifted_sum("PSI", self.y, a, 1) - _shifted_sum("PSI", self.f, b, 1)
        return _colsum(psi(self.y + a) - psi(a)) - _colsum(psi(self.f + b) - psi(b))

    def mean_curv(self, a, b):
        ta, tb = _trigamma_rough(a), _trigamma_rough(b)
        return _colsum(_trigamma_rough(self.y + a) - ta) + _colsum(_trigamma_rough(self.f + b) - tb)


class _MeansProfile:
    """Beta log-likelihood of subject means at fixed precision, from its sufficient statistics
    (sum log x_k, sum log(1 - x_k), K) per fit."""

    def __init__(self, s1, s2, k):
        self.s1, self.s2, self.k = s1, s2, k.astype(float)

    def take(self, idx):
        return _MeansProfile(self.s1[idx], self.s2[idx], self.k[idx])

    def const(self, nu):
        return self.k * gammaln(nu) - self.s1 - self.s2

    def value(self, a, b):
        return a * self.s1 + b * self.s2 - self.k * (gammaln(a) + gammaln(b))

    def value_slope(self, a, b, nu):
        return self.value(a, b) + self.const(nu), self.s1 - self.s2 - self.k * (psi(a) - psi(b))

    def mean_slope(self, a, b):
        return self.s1 - self.s2 - self.k * (psi(a) - psi(b))

    def mean_curv(self, a, b):
        return -self.k * (_trigamma_rough(a) + _trigamma_rough(b))


def _profile_forms(lik):
    """[(rows, form)]: the fits of ``lik`` split by the cheaper evaluation of their profile."""
    if isinstance(lik, _BetaLik):
        return [(np.arange(lik.k.size), _MeansProfile(lik.s1, lik.s2, lik.k))]
    jmax = np.max(np.where(lik.mask, lik.m, 0), axis=1)
    count = jmax <= _COUNT_FORM_RATIO * np.maximum(lik.k, 1)
    out = []
    for use_count in (True, False):
        rows = np.flatnonzero(count == use_count)
        if rows.size:
            cls = _CountProfile if use_count else _SubjectProfile
            out.append((rows, cls.from_counts(lik.y[rows], lik.m[rows], lik.mask[rows])))
    return out


def _max_over_mean(form, t, w, *, max_iter=200):
    """Maximise each fit's log-likelihood over t = logit(mean) with w = log(a + b) held fixed.

    At fixed a + b the log-likelihood is concave in the mean (a sum of logs, or of minus
    log-gammas, of a + j and b + j, linear in it), so its t-derivative changes sign once:
    Newton's method in t inside a bracket of that sign change (a step that leaves the bracket,
    or is not uphill, is replaced by the bracket's midpoint) reaches the maximiser in [-25, 25]
    from any start. Each fit stops on its own once a step is below ``_T_TOL``. Returns
    (t, profile log-likelihood at w).
    """
    t = np.array(t, dtype=float)
    w = np.broadcast_to(np.asarray(w, dtype=float), t.shape)
    lo = np.full(t.shape, -np.inf)  # largest t seen with derivative > 0
    hi = np.full(t.shape, np.inf)  # smallest t seen with derivative < 0
    act = np.arange(t.size)
    sub = form
    # A fit whose last step was a Newton step of at most _HESS_REUSE keeps its last second
    # derivative in (a, b) and reads only the slope (a digamma per term, not also a trigamma):
    # that derivative has moved by about the step times its relative slope, so the chord step it
    # gives converges as fast from there, and the stopping rules read the exact slope. The choice
    # is each fit's own, so a fit's bits do not depend on its batch.
    d2s = np.zeros(t.size)
    reuse = np.zeros(t.size, dtype=bool)
    for _ in range(max_iter):
        if not act.size:
            break
        ta, wa = t[act], w[act]
        a, b, mu, nu = _ab(ta, wa)
        d1 = sub.mean_slope(a, b)
        need = ~reuse[act]
        if need.all():
            d2s[act] = sub.mean_curv(a, b)
        elif need.any():
            fresh = np.flatnonzero(need)
            d2s[act[fresh]] = sub.take(fresh).mean_curv(a[fresh], b[fresh])
        d2 = d2s[act]
        v = nu * mu * (1.0 - mu)
        g = v * d1
        h = v * v * d2 + v * (1.0 - 2.0 * mu) * d1
        lo_a = np.where(g > 0, ta, lo[act])
        hi_a = np.where(g < 0, ta, hi[act])
        newton = (h < 0) & np.isfinite(g) & np.isfinite(h)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            step = np.where(newton, -g / h, np.sign(g) * 3.0)
        # (np.minimum(np.maximum(x, lo), hi) is np.clip, without its per-call overhead)
        step = np.minimum(np.maximum(np.nan_to_num(step), -3.0), 3.0)
        cand = np.minimum(np.maximum(ta + step, -_LOGIT_MAX), _LOGIT_MAX)
        # Newton's decrement g^2 / (2 |h|), the log-likelihood still to gain, below _L_TOL: the
        # step is taken and ends the search (it leaves a gain of the order of the decrement's
        # square). Any other step must land strictly inside the bracket, else the midpoint.
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            small = newton & (g * g <= -2.0 * _L_TOL * h)
        done = (g == 0) | ~np.isfinite(g) | small | (newton & (np.abs(step) <= _T_TOL))
        ok = done | ((cand > lo_a) & (cand < hi_a))
        mid = 0.5 * (np.maximum(lo_a, -_LOGIT_MAX) + np.minimum(hi_a, _LOGIT_MAX))
        cand = np.where(ok, cand, mid)
        done |= np.abs(cand - ta) <= _T_TOL * 1e-3  # the bracket itself has closed
        reuse[act] = ok & newton & (np.abs(step) <= _HESS_REUSE)
        t[act] = np.where((g == 0) | ~np.isfinite(g), ta, cand)
        lo[act], hi[act] = lo_a, hi_a
        keep = ~done
        if not keep.all():
            act = act[keep]
            sub = form.take(act) if act.size else sub
    a, b, _, nu = _ab(t, w)
    return t, form.value(a, b) + form.const(nu)


def _profile_grid(form, t_hat, w_hat, *, ll_hat=None, far=None):
    """(G, F) profile log-likelihood on :data:`_W_GRID` (-inf where not needed) and the (G, F)
    maximising t. Only grid points up to the first one at or above w_hat are needed: both
    bounds look at precisions below the maximum (above it the deviance rises and the proxy
    falls). The grid is walked downwards from w_hat, each fit's maximiser at one point starting
    the search at the next (extrapolated linearly).

    With ``ll_hat`` (the fits' maximum log-likelihood) and ``far`` (a deviance per fit), a point
    below a point whose deviance 2 (ll_hat - l_p) is above ``far`` is first bounded from one
    evaluation at its start: at fixed a + b the log-likelihood is concave in the mean (see
    :func:`_max_over_mean`), so its tangent at mu_0 bounds it over (0, 1),
    l_p <= l(mu_0) + l'(mu_0) (1 - mu_0 if l' > 0 else -mu_0). Where that bound already puts the
    deviance above ``far``, the point is not maximised: it holds the bound (its deviance is then a
    lower bound, above ``far``) and, as its t, the one of the point above (so that the starts
    below do not extrapolate from points that were not maximised). Before that, for 0/1 scores,
    one bound covers a whole range of :data:`_RANGE_POINTS` grid points, every mean and every
    a + b in the range (:meth:`_CountProfile.range_bound`, tight where a + b is small: there the
    subjects' accuracies would be near 0 or 1); where it puts the deviance above ``far``, it is
    each point's bound. Every other point is maximised as without ``far``, from its start.
    """
    g = _W_GRID
    step = g[1] - g[0]
    f = t_hat.size
    lp = np.full((g.size, f), -np.inf)
    tg = np.zeros((g.size, f))
    top_j = np.searchsorted(g, w_hat + step, side="right") - 1  # last grid index with g_j <= w_hat + step
    range_ub = np.full(f, np.inf)
    ranges = far is not None and hasattr(form, "range_bound")
    for j in range(g.size - 1, -1, -1):
        if ranges and (j % _RANGE_POINTS == _RANGE_POINTS - 1 or j == g.size - 1):  # the top of a range
            range_ub = _range_bounds(form, top_j, j, ll_hat, far)
        rows = np.flatnonzero(top_j >= j)
        if not rows.size:
            continue
        # Start: the fit's mean at its first grid point, then the maximisers of the points
        # above extrapolated (linearly from two, quadratically from three).
        seen = top_j[rows] - j
        t1, t2, t3 = (tg[min(j + i, g.size - 1)][rows] for i in (1, 2, 3))
        start = np.select([seen == 0, seen == 1, seen == 2], [t_hat[rows], t1, 2.0 * t1 - t2],
                          3.0 * t1 - 3.0 * t2 + t3)
        start = np.minimum(np.maximum(start, -_LOGIT_MAX), _LOGIT_MAX)
        if far is not None:
            above_far = (seen > 0) & (2.0 * (ll_hat[rows] - lp[min(j + 1, g.size - 1)][rows]) > far[rows])
            if ranges:
                hit = above_far & np.isfinite(range_ub[rows])
                if hit.any():  # the whole range is far: the bound holds for each of its points
                    lp[j, rows[hit]] = range_ub[rows[hit]]
                    tg[j, rows[hit]] = t1[hit]
                    rows, start, t1, above_far = rows[~hit], start[~hit], t1[~hit], above_far[~hit]
                    if not rows.size:
                        continue
            if above_far.any():
                keep = _far_points(form if above_far.all() and rows.size == f else form.take(rows[above_far]),
                                   rows, start, t1, above_far, g[j], ll_hat, far, lp[j], tg[j])
                rows, start = rows[keep], start[keep]
                if not rows.size:
                    continue
        sub = form if rows.size == f else form.take(rows)
        tg[j, rows], lp[j, rows] = _max_over_mean(sub, start, g[j])
    return lp, tg


#: Grid points per range of :meth:`_CountProfile.range_bound` in :func:`_profile_grid`.
_RANGE_POINTS = 8


def _range_bounds(form, top_j, j, ll_hat, far):
    """Per fit, the range bound (plus rounding) over grid points j - _RANGE_POINTS + 1 .. j where it puts
    the deviance above ``far`` for the whole range, else inf; computed for the fits whose
    first grid point lies above the range (for the others the range holds their maximum)."""
    g = _W_GRID
    lo_j = max(j - _RANGE_POINTS + 1, 0)
    out = np.full(top_j.size, np.inf)
    cand = np.flatnonzero(top_j > j)
    if cand.size:
        ub = (form if cand.size == top_j.size else form.take(cand)).range_bound(np.exp(g[lo_j]), np.exp(g[j]))
        ub = ub + 1e-7 * (1.0 + np.abs(ub))  # rounding
        with np.errstate(invalid="ignore"):
            sure = np.isfinite(ub) & (2.0 * (ll_hat[cand] - ub) > far[cand])
        out[cand[sure]] = ub[sure]
    return out


def _far_points(sub, rows, start, hold, test, w, ll_hat, far, lp_j, tg_j):
    """The points ``rows[test]`` at w (``sub``: their fits) whose tangent bound at ``start`` (see
    :func:`_profile_grid`) puts the deviance above ``far``: their bound and ``hold`` are written to
    ``lp_j`` and ``tg_j``; returns the mask of ``rows`` still to maximise."""
    cand = rows[test]
    t0 = start[test]
    a, b, mu, nu = _ab(t0, np.broadcast_to(w, t0.shape))
    v0, d1 = sub.value_slope(a, b, nu)
    slope = nu * d1  # dl / dmu
    with np.errstate(invalid="ignore", over="ignore"):
        bound = v0 + np.where(slope > 0, slope * (1.0 - mu), -slope * mu)
        bound += 1e-7 * (1.0 + np.abs(v0))  # rounding of both evaluations
        skip = np.isfinite(bound) & (2.0 * (ll_hat[cand] - bound) > far[cand])
    lp_j[cand[skip]] = bound[skip]
    tg_j[cand[skip]] = hold[test][skip]
    keep = np.ones(rows.size, dtype=bool)
    keep[np.flatnonzero(test)[skip]] = False
    return keep


def _crossing(form, lo, hi, f_lo, f_hi, t_lo, t_hi, top, crit, *, max_iter=80):
    """The outside end of a bracket [lo, hi] of the crossing of the profile deviance
    2 (top - l_p(w)) with crit (f = deviance - crit: > 0 at lo, <= 0 at hi), narrowed to
    :data:`_W_TOL` by the Illinois variant of regula falsi (a bisection every fourth step keeps
    the bracket shrinking). The outside end is returned, so the bound errs low."""
    lo, hi, f_lo, f_hi = (np.array(v, dtype=float) for v in (lo, hi, f_lo, f_hi))
    t_lo, t_hi = np.array(t_lo, dtype=float), np.array(t_hi, dtype=float)
    side = np.zeros(lo.shape, dtype=np.int8)  # which end moved last: -1 lo, +1 hi
    act = np.flatnonzero(hi - lo > _W_TOL)
    for it in range(max_iter):
        if not act.size:
            break
        l, h, fl, fh = lo[act], hi[act], f_lo[act], f_hi[act]
        with np.errstate(divide="ignore", invalid="ignore"):
            x = h - fh * (h - l) / (fh - fl)
        bisect = ~((x > l) & (x < h)) | (it % 4 == 3)
        x = np.where(bisect, 0.5 * (l + h), x)
        frac = np.where(h > l, (x - l) / (h - l), 0.5)
        t0 = t_lo[act] + frac * (t_hi[act] - t_lo[act])
        sub = form.take(act)
        tx, lpx = _max_over_mean(sub, t0, x)
        fx = 2.0 * (top[act] - lpx) - crit[act]
        out = fx > 0
        # Illinois: an end kept twice in a row has its value halved
        f_hi[act] = np.where(out & (side[act] == -1), 0.5 * fh, fh)
        f_lo[act] = np.where(~out & (side[act] == 1), 0.5 * fl, fl)
        r_out, r_in = act[out], act[~out]
        lo[r_out], f_lo[r_out], t_lo[r_out] = x[out], fx[out], tx[out]
        hi[r_in], f_hi[r_in], t_hi[r_in] = x[~out], fx[~out], tx[~out]
        side[r_out], side[r_in] = -1, 1
        act = act[hi[act] - lo[act] > _W_TOL]
    return lo


def _precision_lower_bound(form, t_hat, w_hat, ll_hat, crit):
    """One-sided profile-likelihood lower confidence bound on w = log(a + b), per fit.

    The bound is the infimum of {w : 2 (l(w_hat) - l_p(w)) <= crit}: the lowest grid point of
    :data:`_W_GRID` (w <= w_hat) inside the set, refined between it and the grid point below
    it (keeping the outside end). Taking the infimum of the whole set (not only the connected
    piece around the maximum) errs on the low side, i.e. conservative.
    """
    g = _W_GRID
    # Points whose deviance is surely above the critical value (with the margin of the joint
    # bound's rounding, at any level at or above this row's) are bounded, not maximised: neither
    # bound reads more of them than that (see _profile_grid and joint_subject_bound).
    far = crit * (1.0 + 2.0 / _BUDGET_BINS) + 1e-9
    lp, tg = _profile_grid(form, t_hat, w_hat, ll_hat=ll_hat, far=far)
    top = np.maximum(ll_hat, np.max(lp, axis=0))
    dev = 2.0 * (top[None, :] - lp)
    inside = (dev <= crit[None, :]) & (g[:, None] <= w_hat[None, :] + 1e-12)
    any_in = inside.any(axis=0)
    j0 = np.where(any_in, np.argmax(inside, axis=0), 0)
    # The crossing lies between grid points j0 - 1 (outside) and j0 (inside).
    lo, hi = g[np.maximum(j0 - 1, 0)], np.minimum(g[j0], w_hat)
    refine = np.flatnonzero(any_in & (j0 > 0))
    if refine.size:
        jr = j0[refine]
        at_hat = g[jr] > w_hat[refine]
        f_hi = np.where(at_hat, 2.0 * (top[refine] - ll_hat[refine]), dev[jr, refine]) - crit[refine]
        t_hi = np.where(at_hat, t_hat[refine], tg[jr, refine])
        lo[refine] = _crossing(form.take(refine), lo[refine], hi[refine], dev[jr - 1, refine] - crit[refine],
                               f_hi, tg[jr - 1, refine], t_hi, top[refine], crit[refine])
    w_lo = np.where(any_in & (j0 > 0), lo, np.where(any_in, np.minimum(g[0], w_hat), _LOG_NU_MIN))
    # For the joint bound: the deviance over each grid interval [g_j, g_j+1] read as its smaller
    # end, and 0 on the interval holding w_hat. That is the interval's minimum wherever the
    # deviance is monotone across it: every interval of a unimodal profile (falls to 0 at w_hat,
    # then rises). A two-mode profile (a local maximum of l_p at a finite a + b, the fit at the
    # upper bound) dips below both ends in the interval holding that local maximum: there the
    # value overstates the minimum, not a strict lower bound (on test_fit_global_max's 400
    # outlier rows, seed 1, 6 intervals by more than 1e-6, at most 0.0059: under one knapsack
    # bin, z^2/400 = 0.0068 at alpha 0.05, but its cost can round to the next bin).
    holds = (g[:-1, None] <= w_hat[None, :] + 1e-12) & (g[1:, None] >= w_hat[None, :] - 1e-12)
    mdev = np.where(holds, 0.0, np.minimum(dev[:-1], dev[1:]))
    return w_lo, np.maximum(mdev, 0.0)


#: Deviance budget bins of :func:`joint_subject_bound`'s knapsack (costs are rounded down to a
#: bin, which can only enlarge the feasible set: the bound stays conservative).
_BUDGET_BINS = 400


@dataclass(frozen=True)
class KnapsackInputs:
    """What :func:`joint_subject_bound`'s knapsack reads, shared with its former implementation
    (the oracle in the tests) so that the two differ only in the search itself."""

    a: np.ndarray  # (D, M) squared subject weights
    s2j: np.ndarray  # (G - 1,) proxy at each interval's lower end
    fixed: np.ndarray  # (D, M) worst-case domains
    base: np.ndarray  # (M,) their contribution A_d / 4
    cost: np.ndarray  # (D, M, G - 1) deviance in budget bins, nb + 1 when unaffordable

    def single_domain_value(self):
        """With one domain the bound is its own largest affordable proxy: no knapsack needed."""
        ok = ~self.fixed[0][:, None] & (self.cost[0] <= _BUDGET_BINS)
        return np.where(ok, self.a[0][:, None] * self.s2j[None, :], 0.0).max(axis=1)


def _worst_case(prof: np.ndarray, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the worst-case domains, (D, M); their contribution A_d / 4 summed over domains, (M,))."""
    fixed = ~np.isfinite(prof).any(axis=-1)
    return fixed, np.sum(np.where(fixed, a * WORST_CASE_S2, 0.0), axis=0)


def knapsack_inputs(profile, a2_dom, *, alpha, worst=None):
    """Costs (deviance rounded down to 1/400 of the budget z^2_{1-alpha}) and values of
    :func:`joint_subject_bound`'s knapsack; ``worst``: these models' :func:`_worst_case`, when
    computed on the whole array of which they are a block."""
    from benchcert.stats._dist import norm

    crit = float(norm.isf(alpha)) ** 2
    prof = np.asarray(profile, dtype=float)
    a = np.asarray(a2_dom, dtype=float)
    s2j = 0.25 / (np.exp(_W_GRID[:prof.shape[-1]]) + 1.0)
    s2j[0] = WORST_CASE_S2  # below the grid: nu -> 0
    fixed, base = _worst_case(prof, a) if worst is None else worst
    nb = _BUDGET_BINS
    with np.errstate(invalid="ignore", over="ignore"):
        cost = np.where(np.isfinite(prof), np.floor(prof / (crit / nb)), nb + 1).clip(0, nb + 1).astype(np.int64)
    return KnapsackInputs(a=a, s2j=s2j, fixed=fixed, base=base, cost=cost)


def joint_subject_bound(profile, a2_dom, *, alpha):
    r"""Upper confidence bound on the subject term sum_d A_d s_d^2 from every domain's profile likelihood.

    Parameters
    ----------
    profile : ndarray, shape (D, M, G - 1)
        :attr:`DomainFits.profile`: per (domain, model) and grid interval of w = log(a + b), the
        smaller of the profile deviance at the interval's two ends (0 on the fit's interval): its
        minimum over the interval where the deviance is monotone across it, up to
        0.006 above it around the local maximum of a two-mode profile (see
        :func:`_precision_lower_bound`); inf everywhere for a domain
        whose proxy is the worst case 1/4 (inf for single intervals not computed).
    a2_dom : ndarray, shape (D, M)
        A_d = sum of the squared subject weights of domain d (0 for unanswered domains).
    alpha : float, keyword-only
        One-sided level of the bound.

    Returns
    -------
    ndarray, shape (M,)

    Notes
    -----
    The subject term is one number, psi = sum_d A_d s^2(nu_d), s^2(nu) = 1/(4 (nu + 1)), so
    its one-sided profile-likelihood bound is (domains are independent, so their deviances add)

    .. math:: \psi_U = \max\Big\{\sum_d A_d s^2(\nu_d) : \sum_d \mathrm{dev}_d(\nu_d) \le z^2_{1-\alpha}\Big\},

    one constraint for the whole term instead of a Bonferroni share per domain. It is solved
    as a knapsack over the grid intervals of log(nu): each domain picks one interval, worth
    A_d times the proxy at the interval's lower end (the largest in it) and costing the
    interval's smallest deviance (:attr:`BetaFit.profile`) rounded down to 1/400 of the budget.
    Both choices can only raise the value, so the result is >= the exact psi_U. With one
    domain it is that domain's own bound (to within the grid). Worst-case domains add A_d / 4.
    """
    prof, a2 = np.asarray(profile, dtype=float), np.asarray(a2_dom, dtype=float)
    per = max(1, _KNAPSACK_CELLS // max(prof.shape[0] * prof.shape[-1], 1)) if prof.ndim == 3 else 0
    if prof.ndim != 3 or prof.shape[1] <= per:
        return _joint_block(knapsack_inputs(prof, a2, alpha=alpha))
    # Blocks of models: each model's knapsack is its own, so the blocks give the whole computation's
    # numbers while its (D, M, G - 1) temporaries (0.5 GB each at 50,000 models, issue #40) stay a
    # block's. The worst-case base is summed over the domains once, on the whole array, as before.
    fixed, base = _worst_case(prof, a2)
    out = np.empty(prof.shape[1])
    for lo in range(0, prof.shape[1], per):
        cols = slice(lo, lo + per)
        out[cols] = _joint_block(knapsack_inputs(prof[:, cols], a2[:, cols], alpha=alpha,
                                                 worst=(fixed[:, cols], base[cols])))
    return out


#: (domain, model, grid interval) cells of one block of :func:`joint_subject_bound` (32 MB of int64 costs).
_KNAPSACK_CELLS = 1 << 22


def _joint_block(k: KnapsackInputs) -> np.ndarray:
    """:func:`joint_subject_bound` of the models of ``k``."""
    a, s2j, fixed, base, cost, nb = k.a, k.s2j, k.fixed, k.base, k.cost, _BUDGET_BINS
    d, mdl, gi = cost.shape
    if d == 1:
        return base + k.single_domain_value()
    # An interval costing no less than a lower one (larger proxy) is never better: best[m] is
    # nondecreasing in b and the proxy decreases along the grid, so best[b - c'] + v' <= best[b - c] + v
    # (rounding is monotone too); only the intervals that lower the running minimum cost are tried.
    lowest_before = np.minimum.accumulate(np.concatenate([np.full((d, mdl, 1), nb + 1), cost[..., :-1]], axis=-1),
                                          axis=-1)
    useful = (cost <= nb) & (cost < lowest_before)
    compiled = _kernels["module"]
    if compiled is not None and not (np.isnan(a).any() or np.isnan(s2j).any()):
        # The same additions and maxima one model at a time (stats/hierarchical/compiled.py): the same bits.
        use = ~fixed & (a > 0)
        return base + compiled.knapsack_best(cost, useful, use, np.ascontiguousarray(a, dtype=float),
                                             np.ascontiguousarray(s2j, dtype=float), nb)
    # best[m, b]: largest value with total cost <= b bins (nondecreasing in b)
    best = np.zeros((mdl, nb + 1))
    # padded[m, s:s + nb + 1] for s = nb + 1 - c is best[m] shifted right by c bins (-inf below c):
    # one contiguous window per model instead of an index per bin.
    padded = np.full((mdl, 2 * nb + 2), -np.inf)
    windows = np.lib.stride_tricks.sliding_window_view(padded, nb + 1, axis=1)
    for dd in range(d):
        use = ~fixed[dd] & (a[dd] > 0)
        if not use.any():
            continue
        padded[:, nb + 1:] = best
        new = np.full((mdl, nb + 1), -np.inf)
        for j in range(gi):
            c = cost[dd, :, j]
            r = np.flatnonzero(use & useful[dd, :, j])  # the models for which this interval is affordable and useful
            if not r.size:
                continue
            val = windows[r, nb + 1 - c[r]] + (a[dd, r] * s2j[j])[:, None]
            new[r] = np.maximum(new[r], val)
        best = np.where(use[:, None], new, best)
    return base + best[:, nb]


#: Cells (fits x subjects) of one chunk of the profile computation: its temporaries, (subjects or
#: count rows) x fits, stay within a core's cache (the count form is at most _COUNT_FORM_RATIO
#: times wider).
_PROFILE_CELLS = 1 << 16


def _upper_proxy(lik, t_hat, w_hat, ll_hat, upper_alpha):
    """(nu_lower, s2_upper, profile deviances) from the profile bound at one-sided level upper_alpha per row."""
    from benchcert.stats._dist import norm

    crit = np.broadcast_to(norm.isf(np.asarray(upper_alpha, dtype=float)) ** 2, t_hat.shape)
    # Fits are taken in chunks of at most _PROFILE_CELLS cells, so that the temporaries stay
    # small whatever the number of models; every fit is computed on its own (sums over axis 0
    # only), so neither the chunks nor the split by form change any result.
    f = t_hat.size
    per = max(1, _PROFILE_CELLS // max(lik.mask.shape[1], 1))
    w_lo, mdev = np.empty(f), np.empty((_W_GRID.size - 1, f))
    for lo in range(0, f, per):
        chunk = np.arange(lo, min(f, lo + per))
        for sel, form in _profile_forms(_subset(lik, chunk) if chunk.size < f else lik):
            rows = chunk[sel]
            w_lo[rows], mdev[:, rows] = _precision_lower_bound(form, t_hat[rows], w_hat[rows], ll_hat[rows],
                                                               crit[rows])
    nu_lo = np.exp(w_lo)
    return nu_lo, 0.25 / (nu_lo + 1.0), mdev
