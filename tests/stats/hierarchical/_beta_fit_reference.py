"""A robust reference maximum of the beta-binomial and Beta likelihoods, independent of
stats/hierarchical's maximiser, and a seeded grid of the data a user reaches, for
tests/stats/hierarchical/test_fit_global_max.py.

The reference searches the fits' own box (|logit mean| <= 25, a + b in [1e-4, 1e6]): a profile
over w = log(a + b) on a grid of 241 points (spacing 0.1), the mean at each solved by a grid of
51 logits and a vectorised golden-section search between the best one's neighbours (to 1e-10 in
the logit: at fixed a + b the log-likelihood is concave in the mean, so they bracket its maximum), then L-BFGS-B and Nelder-Mead in (logit mean, w) from each local maximum of the profile
and from the fit's own point; the largest log-likelihood of all. The likelihood is written
afresh with scipy's betaln (no code of stats/hierarchical).

Run it as a script for the full study (every grid setting and 1,000 rows of
:func:`outlier_rows` per replicate; about 5 CPU minutes a replicate): misses of the fits (fit log-likelihood more than 1e-6 below the reference), and how
far the proxy s2 = 1/(4 (a + b + 1)) and a one-domain macro half-width move at each miss.

    .venv/bin/python tests/stats/hierarchical/_beta_fit_reference.py [--reps 1]
"""

from __future__ import annotations

import argparse
import itertools
import math
import warnings

import numpy as np
from scipy.optimize import minimize
from scipy.special import betaln, gammaln

LOG_NU_MIN, LOG_NU_MAX, LOGIT_MAX = math.log(1e-4), math.log(1e6), 25.0
_W = np.linspace(LOG_NU_MIN, LOG_NU_MAX, 241)
_T = np.linspace(-LOGIT_MAX, LOGIT_MAX, 51)
_GOLD = (math.sqrt(5.0) - 1.0) / 2.0


def _ab(t, w):
    mu = 0.5 * (1.0 + np.tanh(0.5 * np.asarray(t, dtype=float)))
    nu = np.exp(w)
    return mu * nu, (1.0 - mu) * nu


class BetaBinomialData:
    """log L(a, b) = sum_k [log C(m_k, y_k) + log B(y_k + a, m_k - y_k + b) - log B(a, b)]."""

    def __init__(self, y, m):
        keep = np.asarray(m) > 0
        self.y, self.m = np.asarray(y, float)[keep], np.asarray(m, float)[keep]
        self.const = float(np.sum(gammaln(self.m + 1) - gammaln(self.y + 1) - gammaln(self.m - self.y + 1)))

    def loglik(self, t, w):
        a, b = _ab(t, w)
        a, b = np.asarray(a)[..., None], np.asarray(b)[..., None]
        return self.const + np.sum(betaln(self.y + a, self.m - self.y + b) - betaln(a, b), axis=-1)


class BetaData:
    """log L(a, b) = sum_k [(a - 1) log x_k + (b - 1) log(1 - x_k)] - K log B(a, b) on the
    means as fit_beta_means squeezes them, (x (K - 1) + 1/2) / K."""

    def __init__(self, means):
        x = np.asarray(means, float)
        x = x[~np.isnan(x)]
        k = x.size
        x = (x * (k - 1.0) + 0.5) / k
        self.k, self.s1, self.s2 = k, float(np.sum(np.log(x))), float(np.sum(np.log1p(-x)))

    def loglik(self, t, w):
        a, b = _ab(t, w)
        return (a - 1.0) * self.s1 + (b - 1.0) * self.s2 - self.k * betaln(a, b)


def _profile(data):
    """(t*(w), l*(w)) on the w grid: the mean solved at each precision."""
    ll = data.loglik(_T[None, :], _W[:, None])  # (W, T)
    j = np.argmax(ll, axis=1)
    lo = _T[np.maximum(j - 1, 0)]
    hi = _T[np.minimum(j + 1, _T.size - 1)]
    # golden section on [lo, hi] for every w at once (the best grid logit's two neighbours bracket it)
    x1, x2 = hi - _GOLD * (hi - lo), lo + _GOLD * (hi - lo)
    f1, f2 = data.loglik(x1, _W), data.loglik(x2, _W)
    for _ in range(50):
        right = f2 > f1
        lo = np.where(right, x1, lo)
        hi = np.where(right, hi, x2)
        x1n = np.where(right, x2, hi - _GOLD * (hi - lo))
        x2n = np.where(right, lo + _GOLD * (hi - lo), x1)
        f1n = np.where(right, f2, data.loglik(x1n, _W))
        f2n = np.where(right, data.loglik(x2n, _W), f1)
        x1, x2, f1, f2 = x1n, x2n, f1n, f2n
    t_star = np.where(f1 >= f2, x1, x2)
    grid_best = ll[np.arange(_W.size), j]
    l_star = np.maximum(np.maximum(f1, f2), grid_best)
    t_star = np.where(grid_best > np.maximum(f1, f2), _T[j], t_star)
    return t_star, l_star


def _polish(data, t0, w0):
    def neg(x):
        v = float(data.loglik(x[0], x[1]))
        return -v if np.isfinite(v) else 1e300

    bounds = [(-LOGIT_MAX, LOGIT_MAX), (LOG_NU_MIN, LOG_NU_MAX)]
    x = np.array([float(np.clip(t0, -LOGIT_MAX, LOGIT_MAX)), float(np.clip(w0, LOG_NU_MIN, LOG_NU_MAX))])
    best = (-neg(x), x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = minimize(neg, x, method="L-BFGS-B", bounds=bounds, options=dict(ftol=0.0, gtol=1e-11, maxiter=500))
        if -r.fun > best[0]:
            best = (-r.fun, r.x)
        r = minimize(neg, best[1], method="Nelder-Mead", bounds=bounds,
                     options=dict(xatol=1e-11, fatol=1e-13, maxiter=4000, initial_simplex=None))
        if -r.fun > best[0]:
            best = (-r.fun, r.x)
    return best


def reference_max(data, t_fit=None, w_fit=None, *, polish=4):
    """(log-likelihood, t, w) of the reference maximum over the fits' box, polishing from the
    ``polish`` highest local maxima of the profile and from the fit's point (t_fit, w_fit)."""
    t_star, l_star = _profile(data)
    peaks = [i for i in range(_W.size)
             if (i == 0 or l_star[i] >= l_star[i - 1]) and (i == _W.size - 1 or l_star[i] >= l_star[i + 1])]
    peaks = sorted(peaks, key=lambda i: -l_star[i])[:polish]
    cands = [(_W[i], t_star[i]) for i in peaks]
    if t_fit is not None:
        cands.append((w_fit, t_fit))
    best = (-np.inf, None)
    for w0, t0 in cands:
        got = _polish(data, t0, w0)
        if got[0] > best[0]:
            best = got
    i = int(np.argmax(l_star))
    if l_star[i] > best[0]:
        best = (float(l_star[i]), np.array([t_star[i], _W[i]]))
    return best[0], best[1][0], best[1][1]


# --- the seeded grid of data ------------------------------------------------------------------

SUBJECTS = (2, 3, 5, 10, 20, 60)
RATES = (0.001, 0.02, 0.3, 0.5, 0.9, 0.99, 0.999)
#: a + b of the subject accuracies' Beta; inf = every subject at the same rate (under-dispersed data)
PRECISIONS = (0.05, 0.5, 3.0, 30.0, 1e3, math.inf)
#: "none", or a subject forced to score exactly 0 ("zero") or all correct ("full")
EDGES = ("none", "zero", "full")


def _sizes(rng, k):
    return np.round(np.exp(rng.uniform(math.log(5), math.log(3000), k))).astype(int)


def _accuracies(rng, k, rate, nu):
    if math.isinf(nu):
        return np.full(k, rate)
    return rng.beta(max(rate * nu, 1e-3), max((1 - rate) * nu, 1e-3), k)


def count_rows(rng, settings):
    """One (successes, trials) row per setting (k, rate, nu, edge), padded with m = 0."""
    width = max(s[0] for s in settings)
    y, m = np.zeros((len(settings), width)), np.zeros((len(settings), width))
    for r, (k, rate, nu, edge) in enumerate(settings):
        mk = _sizes(rng, k)
        yk = rng.binomial(mk, np.clip(_accuracies(rng, k, rate, nu), 0, 1))
        if edge == "zero":
            yk[0] = 0
        elif edge == "full":
            yk[0] = mk[0]
        y[r, :k], m[r, :k] = yk, mk
    return y, m


def mean_rows(rng, settings):
    """One row of subject mean scores (fractional item scores) per setting, padded with NaN: an
    item scores Beta(4 p_k, 4 (1 - p_k)) around its subject's accuracy p_k; "zero"/"full" set a
    subject's mean to exactly 0/1."""
    width = max(s[0] for s in settings)
    x = np.full((len(settings), width), np.nan)
    for r, (k, rate, nu, edge) in enumerate(settings):
        mk = np.minimum(_sizes(rng, k), 400)
        p = np.clip(_accuracies(rng, k, rate, nu), 1e-6, 1 - 1e-6)
        xk = np.array([rng.beta(4 * pk, 4 * (1 - pk), n).mean() for pk, n in zip(p, mk)])
        if edge == "zero":
            xk[0] = 0.0
        elif edge == "full":
            xk[0] = 1.0
        x[r, :k] = xk
    return x


def outlier_rows(rng, n):
    """n (successes, trials) rows of 3-6 subjects that agree within binomial noise (a common rate,
    or a Beta of a + b = 100 around it) but for one or two small subjects (5-69 items) at exactly 0
    or all correct; the others have 100-3,000 items. Padded with m = 0 to 6 columns. A setting
    whose profile likelihood of a + b can have two modes (a local one at a finite a + b, the
    global one at the upper bound)."""
    y, m = np.zeros((n, 6)), np.zeros((n, 6))
    for r in range(n):
        k = int(rng.integers(3, 7))
        mk = np.round(np.exp(rng.uniform(math.log(100), math.log(3000), k))).astype(int)
        rate = rng.choice([0.05, 0.15, 0.3, 0.5, 0.7, 0.85, 0.95])
        p = np.full(k, rate) if rng.random() < 0.5 else rng.beta(rate * 100, (1 - rate) * 100, k)
        yk = rng.binomial(mk, p)
        edge = rng.choice(k, int(rng.integers(1, 3)), replace=False)
        mk[edge] = rng.integers(5, 70, edge.size)
        yk[edge] = 0 if rng.random() < 0.5 else mk[edge]
        y[r, :k], m[r, :k] = yk, mk
    return y, m


def profile_max(data):
    """The largest log-likelihood of the profile (241 values of log(a + b), the mean solved at
    each): a lower bound on the maximum, found without any local search."""
    return float(np.max(_profile(data)[1]))


def all_settings():
    return list(itertools.product(SUBJECTS, RATES, PRECISIONS, EDGES))


def misses(fit, datas, tol=1e-6, *, polish=4):
    """Per fitted row: (row, fit ll, reference ll, reference t, reference w) where the fit is more
    than ``tol`` below the reference; and the number of rows compared."""
    out, compared = [], 0
    status = np.atleast_1d(fit.status)
    for r, data in enumerate(datas):
        if status[r] not in ("ok", "underdispersed", "lower_bound"):
            continue
        compared += 1
        a, b = np.atleast_1d(fit.a)[r], np.atleast_1d(fit.b)[r]
        t_fit, w_fit = math.log(a / b), math.log(a + b)
        ref, t_ref, w_ref = reference_max(data, t_fit, w_fit, polish=polish)
        ll_fit = float(np.atleast_1d(fit.loglik)[r])
        if ll_fit < ref - tol:
            out.append((r, ll_fit, ref, t_ref, w_ref))
    return out, compared


def _half_width(m, nu, alpha=0.05):
    """One-domain macro half-width sqrt(2 (sigma2_item + s2 sum a_k^2) log(2/alpha)), a_k = 1/K."""
    m = m[m > 0]
    k = m.size
    s2 = 0.25 / (nu + 1.0)
    return math.sqrt(2.0 * (0.25 * np.sum(1.0 / m) / k**2 + s2 / k) * math.log(2.0 / alpha))


def _study(reps):  # pragma: no cover - a script
    from benchcert.stats.hierarchical import fit_beta_binomial, fit_beta_means

    settings = all_settings()
    for kind in ("beta_binomial", "beta_means", "beta_binomial_outliers"):
        total = found = 0
        worst_ll = worst_s2 = worst_hw = 0.0
        for rep in range(reps):
            rng = np.random.default_rng([2026, rep, ("beta_binomial", "beta_means", "beta_binomial_outliers").index(kind)])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if kind != "beta_means":
                    y, m = count_rows(rng, settings) if kind == "beta_binomial" else outlier_rows(rng, 1000)
                    fit = fit_beta_binomial(y, m)
                    datas = [BetaBinomialData(y[r], m[r]) for r in range(y.shape[0])]
                else:
                    x = mean_rows(rng, settings)
                    fit = fit_beta_means(x)
                    datas = [BetaData(x[r]) for r in range(x.shape[0])]
            got, compared = misses(fit, datas)
            total += compared
            found += len(got)
            for r, ll_fit, ref, t_ref, w_ref in got:
                nu_fit, nu_ref = float(fit.nu[r]), math.exp(w_ref)
                s2f, s2r = 0.25 / (nu_fit + 1), 0.25 / (nu_ref + 1)
                worst_ll = max(worst_ll, ref - ll_fit)
                worst_s2 = max(worst_s2, abs(s2f - s2r) / s2r)
                if kind != "beta_means":
                    hf, hr = _half_width(m[r], nu_fit), _half_width(m[r], nu_ref)
                    worst_hw = max(worst_hw, abs(hf - hr) / hr)
                where = settings[r] if kind != "beta_binomial_outliers" else ""
                print(f"  {kind} rep {rep} row {r} {where}: ll {ll_fit:.9g} vs {ref:.9g} "
                      f"(-{ref - ll_fit:.3g}); a+b {nu_fit:.6g} vs {nu_ref:.6g}")
        print(f"{kind}: {found} misses of {total} fits (> 1e-6 in ll); largest ll gap {worst_ll:.3g}, "
              f"largest relative move of s2 {worst_s2:.3g}"
              + (f", of the one-domain half-width {worst_hw:.3g}" if kind != "beta_means" else ""))


if __name__ == "__main__":  # pragma: no cover
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=1)
    _study(ap.parse_args().reps)
