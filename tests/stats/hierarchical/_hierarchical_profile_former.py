"""The profile-likelihood search of stats/hierarchical/profile.py as it was before issue #15's second
speed-up (commit 0aa6626 of this project), kept verbatim as the oracle of
tests/stats/hierarchical/test_stats_hierarchical_profile_oracle.py: a grid of 116 values of log(a + b), each
maximised over the mean from the fit's own mean by safeguarded Newton (stopping at 1e-7), the
crossing refined by 30 bisections; the likelihood by subject through log-gammas, digammas
and trigammas; and the joint bound's knapsack with an index per budget bin.
"""

from __future__ import annotations

import numpy as np
from scipy.special import betaln, gammaln, psi

from benchcert.stats.hierarchical import likelihood as HL
from benchcert.stats.hierarchical.likelihood import _ab, _row_sum
from benchcert.stats.hierarchical.limits import _LOG_NU_MIN, _LOGIT_MAX, WORST_CASE_S2
from benchcert.stats.hierarchical.profile import _BUDGET_BINS, _W_GRID, knapsack_inputs
from benchcert.stats.hierarchical.special import _trigamma

_PROFILE_CELLS = 1 << 21


class FormerBetaBinomialLik(HL._BetaBinomialLik):
    def profile_loglik(self, a, b):
        """:meth:`loglik` for the profile search (many more rows than the fit): log B(Y + a,
        m - Y + b) as three log-gammas, what scipy's betaln itself does for arguments above 171
        and 10x faster than its ratio of gammas below; the two agree to about 1e-13 per term."""
        a2, b2 = a[:, None], b[:, None]
        terms = gammaln(self.y + a2)
        terms += gammaln(self.f + b2)
        terms -= gammaln(self.m + (a + b)[:, None])
        return _row_sum(terms, self.mask, self.full) - self.k * betaln(a, b)

    def mean_derivs(self, a, b):
        """(la - lb, laa - 2 lab + lbb): what a step in the mean alone needs. The terms in
        a + b (psi and trigamma of m_k + a + b and of a + b) cancel, so they are not computed."""
        a2, b2 = a[:, None], b[:, None]
        mask, full = self.mask, self.full
        ya, fb = self.y + a2, self.f + b2
        d1 = _row_sum(psi(ya) - psi(fb), mask, full) - self.k * (psi(a) - psi(b))
        d2 = _row_sum(_trigamma(ya) + _trigamma(fb), mask, full) - self.k * (_trigamma(a) + _trigamma(b))
        return d1, d2



class FormerBetaLik(HL._BetaLik):
    def profile_loglik(self, a, b):
        return self.loglik(a, b)

    def mean_derivs(self, a, b):
        """(la - lb, laa - 2 lab + lbb), as :meth:`_BetaBinomialLik.mean_derivs`."""
        d1 = self.s1 - self.s2 - self.k * (psi(a) - psi(b))
        d2 = -self.k * (_trigamma(a) + _trigamma(b))
        return d1, d2



def _former(lik):
    if isinstance(lik, HL._BetaBinomialLik):
        return FormerBetaBinomialLik(lik.y, lik.m, lik.mask)
    new = object.__new__(FormerBetaLik)
    new.mask, new.k, new.s1, new.s2 = lik.mask, lik.k, lik.s1, lik.s2
    return new


def _subset(lik, idx):
    return _former(HL._subset(lik, idx))


def _max_over_mean(lik, t, w, *, iters=25, tol=1e-7):
    """Maximise each row's log-likelihood over t = logit(mean) with w = log(a + b) held fixed
    (safeguarded Newton: a step is halved until it does not lower the log-likelihood)."""
    t = t.astype(float).copy()
    a, b, mu, nu = _ab(t, w)
    ll = lik.profile_loglik(a, b)
    act = np.ones(t.shape, dtype=bool)
    for _ in range(iters):
        idx = np.flatnonzero(act)
        if not idx.size:
            break
        sub = lik if idx.size == t.size else _subset(lik, idx)
        ta, wa, lla = t[idx], w[idx], ll[idx]
        a, b, mu, nu = _ab(ta, wa)
        d1, d2 = sub.mean_derivs(a, b)
        v = nu * mu * (1.0 - mu)
        g = v * d1
        h = v * v * d2 + v * (1.0 - 2.0 * mu) * d1
        with np.errstate(divide="ignore", invalid="ignore"):
            step = np.where(h < 0, -g / h, np.sign(g))
        step = np.clip(np.nan_to_num(step), -3.0, 3.0)
        new_t, new_ll = ta.copy(), lla.copy()
        pending = np.abs(step) > tol
        for _ in range(30):
            if not pending.any():
                break
            rows = np.flatnonzero(pending)
            cand = np.clip(ta[rows] + step[rows], -_LOGIT_MAX, _LOGIT_MAX)
            ca, cb, _, _ = _ab(cand, wa[rows])
            cll = _subset(sub, rows).profile_loglik(ca, cb)
            ok = cll >= lla[rows] - 1e-12 * (1.0 + np.abs(lla[rows]))
            new_t[rows[ok]], new_ll[rows[ok]] = cand[ok], cll[ok]
            pending[rows[ok]] = False
            step[rows[~ok]] *= 0.5
            pending &= np.abs(step) > tol
        moved = np.abs(new_t - ta)
        t[idx], ll[idx] = new_t, new_ll
        act[idx] = (moved > tol) & (np.abs(g) > tol * (1.0 + np.abs(lla)))
    return t, ll


def _precision_lower_bound(lik, t_hat, w_hat, ll_hat, crit):
    """One-sided profile-likelihood lower confidence bound on w = log(a + b), per row.

    The bound is the infimum of {w : 2 (l(w_hat) - l_p(w)) <= crit}: the lowest grid point of
    :data:`_W_GRID` (w <= w_hat) inside the set, refined by bisection between it and the grid
    point below it (keeping the outside end). Taking the infimum of the whole set (not only
    the connected piece around the maximum) errs on the low side, i.e. conservative.
    """
    g, f = _W_GRID, t_hat.size
    # Only grid points up to the first one at or above w_hat are needed: both bounds look at
    # precisions below the maximum (above it the deviance rises and the proxy falls).
    step = g[1] - g[0]
    jj, ff = np.nonzero(g[:, None] <= w_hat[None, :] + step)
    _, lp_v = _max_over_mean(_subset(lik, ff), t_hat[ff], g[jj])
    lp = np.full((g.size, f), -np.inf)
    lp[jj, ff] = lp_v
    top = np.maximum(ll_hat, np.max(lp, axis=0))
    dev = 2.0 * (top[None, :] - lp)
    inside = (dev <= crit[None, :]) & (g[:, None] <= w_hat[None, :] + 1e-12)
    any_in = inside.any(axis=0)
    j0 = np.where(any_in, np.argmax(inside, axis=0), 0)
    # The crossing lies between grid points j0 - 1 (outside) and j0 (inside): bisection on w,
    # the mean re-profiled at each step; the outside end is kept, so the bound errs low.
    lo, hi = g[np.maximum(j0 - 1, 0)], np.minimum(g[j0], w_hat)
    refine = np.flatnonzero(any_in & (j0 > 0))
    if refine.size:
        sub = _subset(lik, refine)
        lo_r, hi_r, tr = lo[refine], hi[refine], t_hat[refine]
        for _ in range(30):
            mid = 0.5 * (lo_r + hi_r)
            tr, lp_mid = _max_over_mean(sub, tr, mid)
            out = 2.0 * (top[refine] - lp_mid) > crit[refine]
            lo_r = np.where(out, mid, lo_r)
            hi_r = np.where(out, hi_r, mid)
        lo[refine] = lo_r
    w_lo = np.where(any_in & (j0 > 0), lo, np.where(any_in, np.minimum(g[0], w_hat), _LOG_NU_MIN))
    # For the joint bound: a lower bound on the deviance over each grid interval [g_j, g_j+1],
    # assuming the profile deviance is unimodal in w (falls to 0 at w_hat, then rises): the
    # smaller end, and 0 on the interval holding w_hat.
    holds = (g[:-1, None] <= w_hat[None, :] + 1e-12) & (g[1:, None] >= w_hat[None, :] - 1e-12)
    mdev = np.where(holds, 0.0, np.minimum(dev[:-1], dev[1:]))
    return w_lo, np.maximum(mdev, 0.0)


def upper_proxy(lik, t_hat, w_hat, ll_hat, upper_alpha):
    lik = _former(lik)
    """(nu_lower, s2_upper) from the profile bound at one-sided level upper_alpha per row."""
    from benchcert.stats._dist import norm

    crit = np.broadcast_to(norm.isf(np.asarray(upper_alpha, dtype=float)) ** 2, t_hat.shape)
    # The profile over the grid holds up to G rows per fit: fits are taken in chunks of at most
    # _PROFILE_CELLS grid cells, so that the temporaries stay bounded whatever the number of
    # models (every fit is computed on its own, so the chunks do not change the results).
    f = t_hat.size
    per = max(1, _PROFILE_CELLS // (_W_GRID.size * lik.mask.shape[1]))
    if f <= per:
        w_lo, mdev = _precision_lower_bound(lik, t_hat, w_hat, ll_hat, crit)
    else:
        w_lo, mdev = np.empty(f), np.empty((_W_GRID.size - 1, f))
        for lo in range(0, f, per):
            rows = np.arange(lo, min(f, lo + per))
            w_lo[rows], mdev[:, rows] = _precision_lower_bound(_subset(lik, rows), t_hat[rows], w_hat[rows],
                                                               ll_hat[rows], crit[rows])
    nu_lo = np.exp(w_lo)
    return nu_lo, 0.25 / (nu_lo + 1.0), mdev


def joint_subject_bound(profile, a2_dom, *, alpha):
    """The knapsack of stats/hierarchical/profile.py's joint_subject_bound as it was: an index per
    budget bin for every interval. Its inputs (costs, values) are the current module's
    knapsack_inputs, unchanged since, so the oracle compares the search alone."""
    k = knapsack_inputs(profile, a2_dom, alpha=alpha)
    a, s2j, fixed, base, cost, nb = k.a, k.s2j, k.fixed, k.base, k.cost, _BUDGET_BINS
    d, mdl, gi = cost.shape
    if d == 1:
        return base + k.single_domain_value()
    # best[m, b]: largest value with total cost <= b bins (nondecreasing in b)
    best = np.zeros((mdl, nb + 1))
    bins = np.arange(nb + 1)
    for dd in range(d):
        use = ~fixed[dd] & (a[dd] > 0)
        if not use.any():
            continue
        new = np.full((mdl, nb + 1), -np.inf)
        for j in range(gi):
            c = cost[dd, :, j]
            r = np.flatnonzero(use & (c <= nb))  # only the models for which this interval is affordable
            if not r.size:
                continue
            src = bins[None, :] - c[r, None]
            val = np.where(src >= 0, best[r[:, None], np.maximum(src, 0)], -np.inf) + (a[dd, r] * s2j[j])[:, None]
            new[r] = np.maximum(new[r], val)
        best = np.where(use[:, None], new, best)
    return base + best[:, nb]
