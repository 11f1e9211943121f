"""Batched Beta-binomial and Beta log-likelihoods of padded rows and their Newton maximiser
in (logit mean, log precision), with the moment and multi-start initialisations."""

from __future__ import annotations

import numpy as np
from scipy.special import betaln, gammaln, psi

from .limits import _LOGIT_MAX, _LOG_NU_MAX, _LOG_NU_MIN
from .special import _kernels, _trigamma


#: Largest a + b at which :meth:`_BetaBinomialLik.loglik` takes log B as three log-gammas.
_GAMMALN_NU_MAX = 1e3


def _row_sum(x, mask, full):
    return np.sum(x if full else np.where(mask, x, 0.0), axis=1)


class _BetaBinomialLik:
    """Beta-binomial log-likelihood of padded rows (mask = subject present)."""

    def __init__(self, y, m, mask):
        self.y, self.m, self.mask = y, m, mask
        self.k = mask.sum(axis=1)
        self.f = m - y
        self.full = bool(mask.all())  # no padding: the masking is skipped

    def loglik(self, a, b):
        # log B(Y + a, m - Y + b) as three log-gammas, 2.4x faster than scipy's betaln, where
        # a + b <= _GAMMALN_NU_MAX: the log-gammas are then below ~1e4 and the two forms agree to
        # ~1e-12 per term. Above it (an under-dispersed fit heading for a + b = 1e6) log-gammas
        # of ~1e7 would cancel to ~1e-9, and betaln keeps its precision
        # (tests/stats/hierarchical/test_stats_hierarchical_oracle.py).
        a2, b2 = a[:, None], b[:, None]
        nu = a + b
        big = nu > _GAMMALN_NU_MAX
        mod = _kernels["module"]
        if mod is not None and 0 < self.y.shape[1] <= mod.PAIRWISE_MAX:
            # the same terms and row sums in one compiled pass (stats/hierarchical/compiled.py: the same bits)
            rows = mod.bb_loglik_rows(mod.GAMMALN, self.y, self.f, self.m, self.mask, a, b)
            if big.any():
                rows[big] = _row_sum(betaln(self.y[big] + a2[big], self.f[big] + b2[big]), self.mask[big], self.full)
            return rows - self.k * betaln(a, b)
        terms = gammaln(self.y + a2)
        terms += gammaln(self.f + b2)
        terms -= gammaln(self.m + nu[:, None])
        if big.any():
            terms[big] = betaln(self.y[big] + a2[big], self.f[big] + b2[big])
        return _row_sum(terms, self.mask, self.full) - self.k * betaln(a, b)

    def derivs(self, a, b):
        a2, b2 = a[:, None], b[:, None]
        nu = a + b
        mask, full = self.mask, self.full
        mod = _kernels["module"]
        if mod is not None and 0 < self.y.shape[1] <= mod.PAIRWISE_MAX:
            # the same row sums in one compiled pass (stats/hierarchical/compiled.py: the same bits)
            s_a, s_b, s_mn, s_ya, s_fb = mod.bb_deriv_rows(mod.PSI, self.y, self.f, self.m, mask, a, b)
            la = s_a - self.k * (psi(a) - psi(nu))
            lb = s_b - self.k * (psi(b) - psi(nu))
            lab = -s_mn + self.k * _trigamma(nu)
            return la, lb, s_ya - self.k * _trigamma(a) + lab, s_fb - self.k * _trigamma(b) + lab, lab
        ya, fb, mn = self.y + a2, self.f + b2, self.m + nu[:, None]
        psi_mn = psi(mn)
        la = _row_sum(psi(ya) - psi_mn, mask, full) - self.k * (psi(a) - psi(nu))
        lb = _row_sum(psi(fb) - psi_mn, mask, full) - self.k * (psi(b) - psi(nu))
        t_mn = _trigamma(mn)
        t_nu = _trigamma(nu)
        lab = -_row_sum(t_mn, mask, full) + self.k * t_nu
        laa = _row_sum(_trigamma(ya), mask, full) - self.k * _trigamma(a) + lab
        lbb = _row_sum(_trigamma(fb), mask, full) - self.k * _trigamma(b) + lab
        return la, lb, laa, lbb, lab


class _BetaLik:
    """Beta log-likelihood of padded rows of values in (0, 1)."""

    def __init__(self, x, mask):
        self.mask = mask
        self.k = mask.sum(axis=1)
        self.s1 = np.sum(np.where(mask, np.log(np.where(mask, x, 0.5)), 0.0), axis=1)
        self.s2 = np.sum(np.where(mask, np.log1p(-np.where(mask, x, 0.5)), 0.0), axis=1)

    def loglik(self, a, b):
        return (a - 1.0) * self.s1 + (b - 1.0) * self.s2 - self.k * betaln(a, b)

    def derivs(self, a, b):
        nu = a + b
        la = self.s1 - self.k * (psi(a) - psi(nu))
        lb = self.s2 - self.k * (psi(b) - psi(nu))
        lab = self.k * _trigamma(nu)
        laa = -self.k * _trigamma(a) + lab
        lbb = -self.k * _trigamma(b) + lab
        return la, lb, laa, lbb, lab


def _ab(t, w):
    mu = 0.5 * (1.0 + np.tanh(0.5 * t))  # logistic, stable for large |t|
    nu = np.exp(w)
    return mu * nu, (1.0 - mu) * nu, mu, nu


def _maximise(lik, t0, w0, *, max_iter=150, tol=1e-10):
    """Batched Levenberg-Marquardt ascent in (t, w) = (logit mean, log precision).

    Each row is an independent 2-parameter problem; the damping adapts per row, a step is
    kept only if it raises that row's log-likelihood, and w is held in
    [log NU_MIN, log NU_MAX] (a projected step: at a bound with the gradient pointing out,
    only the mean moves). Returns (t, w, loglik, converged, grad_w).
    """
    t, w = t0.astype(float).copy(), np.clip(w0.astype(float), _LOG_NU_MIN, _LOG_NU_MAX)
    a, b, mu, nu = _ab(t, w)
    ll = lik.loglik(a, b)
    lam = np.full(t.shape, 1e-3)
    done = np.zeros(t.shape, dtype=bool)
    gw = np.zeros(t.shape)
    for _ in range(max_iter):
        act = ~done
        if not act.any():
            break
        idx = np.flatnonzero(act)
        sub = lik if act.all() else _subset(lik, idx)
        ta, wa, lla = t[idx], w[idx], ll[idx]
        a, b, mu, nu = _ab(ta, wa)
        la, lb, laa, lbb, lab = sub.derivs(a, b)
        v = nu * mu * (1.0 - mu)  # d a / d t = - d b / d t
        gt = v * (la - lb)
        gwa = a * la + b * lb
        htt = v * v * (laa - 2.0 * lab + lbb) + v * (1.0 - 2.0 * mu) * (la - lb)
        hww = a * a * laa + 2.0 * a * b * lab + b * b * lbb + gwa
        htw = v * ((la - lb) + a * laa + b * lab - a * lab - b * lbb)
        gw[idx] = gwa
        at_hi = (wa >= _LOG_NU_MAX - 1e-12) & (gwa > 0)
        at_lo = (wa <= _LOG_NU_MIN + 1e-12) & (gwa < 0)
        fixed_w = at_hi | at_lo
        gnorm = np.abs(gt) + np.where(fixed_w, 0.0, np.abs(gwa))
        conv = gnorm <= tol * (1.0 + np.abs(lla))
        # Up to 8 damping increases per outer iteration, vectorised over rows.
        lam_a = lam[idx]
        new_t, new_w, new_ll = ta.copy(), wa.copy(), lla.copy()
        pending = ~conv
        step_small = np.zeros(idx.size, dtype=bool)
        for _ in range(8):
            if not pending.any():
                break
            # Solve (-H + lam I) delta = g ; -H made positive by the damping when needed.
            ntt, nww, ntw = -htt, -hww, -htw
            scale = np.maximum(np.abs(ntt) + np.abs(nww), 1e-12)
            d_tt = ntt + lam_a * scale
            d_ww = nww + lam_a * scale
            det = d_tt * d_ww - ntw * ntw
            ok_pd = (d_tt > 0) & (det > 0)
            with np.errstate(divide="ignore", invalid="ignore"):
                dt_full = (d_ww * gt - ntw * gwa) / det
                dw_full = (d_tt * gwa - ntw * gt) / det
                dt_only = gt / d_tt
            dt = np.where(fixed_w, dt_only, dt_full)
            dw = np.where(fixed_w, 0.0, dw_full)
            ok_pd = np.where(fixed_w, d_tt > 0, ok_pd)
            # Steps are capped so that one iteration never jumps across the whole range.
            dt = np.clip(np.nan_to_num(dt), -5.0, 5.0)
            dw = np.clip(np.nan_to_num(dw), -5.0, 5.0)
            cand_t = np.clip(ta + dt, -_LOGIT_MAX, _LOGIT_MAX)
            cand_w = np.clip(wa + dw, _LOG_NU_MIN, _LOG_NU_MAX)
            try_rows = pending & ok_pd
            if try_rows.any():
                ca, cb, _, _ = _ab(cand_t[try_rows], cand_w[try_rows])
                sub_try = _subset(sub, np.flatnonzero(try_rows))
                cll = sub_try.loglik(ca, cb)
                better = np.zeros(idx.size, dtype=bool)
                better[try_rows] = cll >= lla[try_rows] - 1e-12 * (1.0 + np.abs(lla[try_rows]))
                gain = np.zeros(idx.size)
                gain[try_rows] = cll
                accept = better & pending
                new_t[accept], new_w[accept], new_ll[accept] = cand_t[accept], cand_w[accept], gain[accept]
                step_small |= accept & (np.abs(cand_t - ta) + np.abs(cand_w - wa) < tol)
                lam_a = np.where(accept, np.maximum(lam_a / 5.0, 1e-12), lam_a)
                pending &= ~accept
            lam_a = np.where(pending, np.maximum(lam_a * 10.0, 1e-6), lam_a)
        lam[idx] = lam_a
        t[idx], w[idx], ll[idx] = new_t, new_w, new_ll
        stuck = pending  # no improving step found even with heavy damping: at a maximum
        done[idx] = conv | step_small | stuck
    return t, w, ll, done, gw


def _subset(lik, idx):
    if isinstance(lik, _BetaBinomialLik):
        return type(lik)(lik.y[idx], lik.m[idx], lik.mask[idx])
    new = object.__new__(_BetaLik)
    new.mask, new.k, new.s1, new.s2 = lik.mask[idx], lik.k[idx], lik.s1[idx], lik.s2[idx]
    return new


def _moment_start(p, wts, mask, inv_m_mean):
    """Method-of-moments (logit mean, log precision) of padded rows of subject proportions."""
    k = mask.sum(axis=1)
    mu = np.sum(np.where(mask, p * wts, 0.0), axis=1) / np.maximum(np.sum(np.where(mask, wts, 0.0), axis=1), 1e-300)
    mu = np.clip(mu, 1e-6, 1 - 1e-6)
    dev = np.where(mask, (p - mu[:, None]) ** 2, 0.0)
    s2 = np.sum(dev, axis=1) / np.maximum(k - 1, 1)
    v = mu * (1.0 - mu)
    rho = (s2 / v - inv_m_mean) / np.maximum(1.0 - inv_m_mean, 1e-12)
    rho = np.clip(rho, 1.0 / (1e5 + 1.0), 1.0 / (0.5 + 1.0))
    return np.log(mu / (1.0 - mu)), np.log(1.0 / rho - 1.0)


#: Cells (fits x subjects) of one block of :func:`_best_of_starts`: the maximiser's temporaries are
#: (starts x fits, subjects) arrays, about 5 GB at 500,000 fits of 20 subjects in one batch (issue #40).
_START_CELLS = 1 << 19


def _best_of_starts(lik, starts):
    """Run the maximiser from several starts (batched together) and keep each row's best, then (the
    beta-binomial) a further ascent from :func:`_coarse_start` where that start lies outside the found
    maximum's basin; a block of rows at a time: every row is maximised on its own (its sums run along
    its own row), so the blocks give the one batch's numbers."""
    n = starts[0][0].size
    per = max(1, _START_CELLS // max(lik.mask.shape[1], 1))
    if n <= per:
        return _best_of_starts_block(lik, starts)
    out = (np.empty(n), np.empty(n), np.empty(n), np.empty(n, dtype=bool), np.empty(n))
    for lo in range(0, n, per):
        idx = np.arange(lo, min(n, lo + per))
        part = _best_of_starts_block(_subset(lik, idx), [(t0[idx], w0[idx]) for t0, w0 in starts])
        for o, p in zip(out, part):
            o[idx] = p
    return out


#: log(a + b) of :func:`_coarse_start`'s grid: 12 points from the lower bound to the upper.
_W_COARSE = np.linspace(_LOG_NU_MIN, _LOG_NU_MAX, 12)
_W_COARSE_STEP = _W_COARSE[1] - _W_COARSE[0]  # 2.09


def _coarse_start(lik, t0):
    """Per row, the best point (w, log-likelihood) of a coarse grid in w = log(a + b)
    (:data:`_W_COARSE`) at t = ``t0``: one log-likelihood per grid point, over the block's rows
    together (no (12 x rows, subjects) arrays)."""
    lls = np.empty((_W_COARSE.size, t0.size))
    for j, wj in enumerate(_W_COARSE):
        a, b, _, _ = _ab(t0, np.full(t0.shape, wj))
        lls[j] = lik.loglik(a, b)
    best = np.argmax(np.where(np.isfinite(lls), lls, -np.inf), axis=0)
    return _W_COARSE[best], lls[best, np.arange(t0.size)]


def _best_of_starts_block(lik, starts):
    n = starts[0][0].size
    t0 = np.concatenate([s[0] for s in starts])
    w0 = np.concatenate([s[1] for s in starts])
    big = _stack(lik, len(starts))
    t, w, ll, conv, gw = _maximise(big, t0, w0)
    s = len(starts)
    ll_r = ll.reshape(s, n)
    best = np.argmax(np.where(np.isfinite(ll_r), ll_r, -np.inf), axis=0)
    pick = best * n + np.arange(n)
    out = [t[pick], w[pick], ll[pick], conv[pick], gw[pick]]
    # The profile likelihood of a + b can have two modes. Subjects that agree within binomial
    # noise but for a few small ones at 0 or 100% (y = [0, 81, 0, 47] of m = [8, 529, 32, 353])
    # have a local maximum at a + b = 14 and the global one at the upper bound 1e6, with the dip
    # between them near a + b = 100: the three starts all climb to the lower mode (about 1% of
    # such fits; tests/stats/hierarchical/test_fit_global_max.py). A coarse grid in log(a + b)
    # at the first start's mean (the weighted mean, the binomial MLE as a + b grows) sees the
    # other basin; a row ascends again from its best grid point where that point beats the
    # maximum found or lies more than a grid step from it, and keeps the higher of the two. The
    # Beta likelihood is concave in (a, b) (an exponential family): one mode, no second ascent.
    if not isinstance(lik, _BetaBinomialLik):
        return tuple(out)
    w_grid, ll_grid = _coarse_start(lik, starts[0][0])
    again = np.flatnonzero((ll_grid > out[2]) | (np.abs(w_grid - out[1]) > _W_COARSE_STEP))
    if again.size:
        more = _maximise(_subset(lik, again), starts[0][0][again], w_grid[again])
        up = more[2] > out[2][again]
        for o, v in zip(out, more):
            o[again[up]] = v[up]
    return tuple(out)


def _stack(lik, times):
    if isinstance(lik, _BetaBinomialLik):
        return type(lik)(np.tile(lik.y, (times, 1)), np.tile(lik.m, (times, 1)), np.tile(lik.mask, (times, 1)))
    new = object.__new__(_BetaLik)
    new.mask = np.tile(lik.mask, (times, 1))
    new.k, new.s1, new.s2 = (np.tile(v, times) for v in (lik.k, lik.s1, lik.s2))
    return new
