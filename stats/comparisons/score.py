"""The stratified score interval of a paired binary gap (Tango 1998, stratified by Lagrange multiplier).

For 0/1 scores the difference D = B - A of an item is +1 (only B right), -1 (only A right) or 0.
In subject (stratum) c with n_c shared items let (x_c, y_c, z_c) be the probabilities of the three
outcomes and (b_c, a_c, m_c) their counts. The item-weighted gap is

    delta = sum_c n_c (x_c - y_c) / N,        N = sum_c n_c,

estimated by (sum b_c - sum a_c) / N. The Wald (t) interval puts the variance estimated at the
observed counts beside it; near the ceiling few items are discordant, the estimated variance is
small exactly when few items went the baseline's way, and the interval's end away from the
ceiling is too short (issue #36: a non-inferiority gate at a true gap of exactly -D passed 2.7%
against 2.5%). The score test puts the variance of the null instead: for each delta_0 the
multinomial maximum-likelihood (x_c, y_c) under sum_c n_c (x_c - y_c) = N delta_0, and

    Z(delta_0) = (delta_hat - delta_0) / sqrt( sum_c n_c [x_c + y_c - (x_c - y_c)^2] / N^2 ),

the interval being {delta_0 : |Z(delta_0)| < z_{1 - alpha/2}} and the two-sided p-value
2 Phi(-|Z(0)|). With one stratum this is Tango's (1998, *Stat. Med.* 17, eq. 3-5) score interval
for the difference of paired proportions; with several, the strata are fixed and their gaps free
(the estimand is the item-weighted gap, not a common gap as in the Mantel-Haenszel-type stratified
score intervals), and the constrained maximum is found by one Lagrange multiplier t shared by the
strata: with beta, gamma, mu the observed shares of a stratum,

    x = beta / (kappa + t),   y = gamma / (kappa - t),   z = mu / kappa,   x + y + z = 1,

kappa the root above |t| of that sum (a cubic, solved in closed form and polished by Newton),
or kappa = |t| with the rest of the mass on the unobserved outcome the multiplier favours (a
stratum with no item going the baseline's way can still be, under the null, one where some do).
The comparisons engine (engine._stratified_score) calls it with the subjects' counts pooled (C = 1):
with many small subjects the per-subject constrained fit over-fits (14 subjects of 8 items, errors 5%:
a non-inferiority gate at the margin passed 3.1% against 2.5%, pooled 1.8%), while pooling is
conservative for fixed strata and costs about 1 point of power at a 30-point swing of subject gaps
(tests/stats/comparisons/test_score.py). The variance is N / (N - C) times the constrained maximum
likelihood's (Miettinen and Nurminen 1985's N / (N - 1) for C = 1).

Every (delta_0, Z) pair is a function of t, increasing in t for Z and decreasing for delta_0, so
each end and the p-value is one bisection in t.
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtr, ndtri

#: Bisection steps in u = t / (1 + |t|) before the last bracket is interpolated linearly (the bracket is
#: then 2^-24 wide, and the ends of the interval are exact to about 1e-12: tests/stats/comparisons/test_score.py).
BISECTIONS = 24
_TINY = 1e-300


def _kappa(beta, gamma, mu, t):
    """The root above |t| of beta/(k+t) + gamma/(k-t) + mu/k = 1, or |t| when there is none (corner)."""
    # k^3 - k^2 - t (t - beta + gamma) k + mu t^2 = 0: the largest real root, by Cardano or Viete
    c = t * (t - beta + gamma)
    p = -c - 1.0 / 3.0
    q = -2.0 / 27.0 - c / 3.0 + mu * t * t
    # (p/3)^3 as a product: numpy's power() of a negative base leaves its vector path for a scalar one
    # element by element (about 200 ns each, two thirds of this function's time; rounding within 2 ulp)
    p3 = p / 3.0
    disc = (q / 2.0) ** 2 + p3 * p3 * p3
    sq = np.sqrt(np.maximum(disc, 0.0))
    one = np.cbrt(-q / 2.0 + sq) + np.cbrt(-q / 2.0 - sq)
    r = np.sqrt(np.maximum(-p / 3.0, _TINY))
    three = 2.0 * r * np.cos(np.arccos(np.clip(-q / (2.0 * (r * r * r)), -1.0, 1.0)) / 3.0)
    at = np.abs(t)
    k = np.maximum(np.where(disc > 0, one, three) + 1.0 / 3.0, at)
    # one Newton step on f(k) = 1 polishes the closed form's rounding (f is convex and decreasing there)
    a, b, m = beta / np.maximum(k + t, _TINY), gamma / np.maximum(k - t, _TINY), mu / np.maximum(k, _TINY)
    f = a + b + m
    df = -(a * a / np.maximum(beta, _TINY) + b * b / np.maximum(gamma, _TINY) + m * m / np.maximum(mu, _TINY))
    step = np.where(np.isfinite(f) & (df < 0), (f - 1.0) / np.minimum(df, -_TINY), 0.0)
    return np.maximum(k - step, at)


def _nearest(beta, gamma, mu, t):
    """The constrained fit (x, y) = P(only B right), P(only A right) of the observed shares (beta, gamma, mu)
    at multiplier t (Tango's, parametrised as in :func:`stratified_score_test`).

    Each stratum's constrained (x, y, z) = (beta / (k + t), gamma / (k - t), mu / k); at the corner
    (k = |t|) the unobserved outcome the multiplier favours takes the rest of the mass.
    """
    k = _kappa(beta, gamma, mu, t)
    x, y = beta / np.maximum(k + t, _TINY), gamma / np.maximum(k - t, _TINY)
    slack = np.clip(1.0 - x - y - mu / np.maximum(k, _TINY), 0.0, 1.0)
    return np.minimum(x + np.where(t < 0, slack, 0.0), 1.0), np.minimum(y + np.where(t > 0, slack, 0.0), 1.0)


def _at(t, w, beta, gamma, mu, gap, per):
    """(delta_0, Z) at multiplier t: w the strata's item shares n_c / N, shape (C, P); t shape (R, 1, P);
    per the variance's divisor N - C, shape (P,); the strata's fits by :func:`_nearest`.
    """
    x, y = _nearest(beta, gamma, mu, t)
    diff = x - y
    d0 = (w * diff).sum(axis=-2)
    v = (w * (x + y - diff * diff)).sum(axis=-2) / per  # Var(delta_hat) under the constrained fit
    z = np.where(v > 0, (gap - d0) / np.sqrt(np.maximum(v, _TINY)),
                 np.where(gap > d0, np.inf, np.where(gap < d0, -np.inf, 0.0)))
    return d0, z


def stratified_score_test(n_b_wins, n_a_wins, n, levels=(0.05,)):
    """The stratified score test of the item-weighted paired binary gap and its inverted intervals.

    Parameters
    ----------
    n_b_wins, n_a_wins, n : ndarray, shape (C, P)
        Per stratum (subject) c and pair p: items only B got right, only A got right, and shared
        items. One stratum (C = 1) is Tango's (1998) test.
    levels : tuple of float
        Two-sided levels of the intervals (each end a one-sided test at level / 2): the pair's own
        alpha, and for a family its Bonferroni alpha / P.

    Returns
    -------
    statistic, p_value : ndarray, shape (P,)
        Z(0) and 2 Phi(-|Z(0)|) (module docstring).
    ends : list of (lower, upper)
        Per level, {delta_0 : |Z(delta_0)| < z_{1-level/2}}: it excludes 0 exactly when p_value < level
        (both are read off the same monotone Z).

    Notes
    -----
    Internal to :mod:`benchcert.stats.comparisons` (the engine validates the counts); NaN for a pair
    without shared items.
    """
    nb, na, nn = (np.asarray(v, dtype=float) for v in (n_b_wins, n_a_wins, n))
    tot = nn.sum(axis=0)
    safe = np.where(nn > 0, nn, 1.0)
    beta, gamma = nb / safe, na / safe
    mu = np.where(nn > 0, 1.0 - beta - gamma, 1.0)
    safe_tot = np.where(tot > 0, tot, 1.0)
    w = nn / safe_tot
    gap = (nb.sum(axis=0) - na.sum(axis=0)) / safe_tot
    # N Var / (N - C): the constrained fit's per-stratum variances are maximum-likelihood (divisor n_c);
    # the degrees of freedom the strata's means use up are restored as in the t test's SSW / (N - C)
    # (the stratified form of Miettinen and Nurminen's 1985 N / (N - 1))
    strata = (nn > 0).sum(axis=0)
    per = np.maximum(safe_tot - strata, 1.0)
    zc = [float(ndtri(1.0 - a / 2.0)) for a in levels]
    # rows: Z = z_c (a lower end) and Z = -z_c (an upper end) per level, then delta_0 = 0 (the p-value);
    # each row's target function is increasing in t
    rows = 2 * len(zc) + 1
    sign = np.r_[np.ones(rows - 1), -1.0][:, None]
    target = np.r_[[v for c in zc for v in (c, -c)], 0.0][:, None]
    lo, hi = np.full((rows, tot.size), -1.0), np.full((rows, tot.size), 1.0)
    g_lo, g_hi = np.full(lo.shape, -np.inf), np.full(hi.shape, np.inf)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        for _ in range(BISECTIONS):
            u = (lo + hi) / 2.0
            d0, z = _at((u / (1.0 - np.abs(u)))[:, None, :], w, beta, gamma, mu, gap, per)
            g = np.where(sign > 0, z, -d0) - target
            above = g > 0
            hi, g_hi = np.where(above, u, hi), np.where(above, g, g_hi)
            lo, g_lo = np.where(above, lo, u), np.where(above, g_lo, g)
        # the root inside the last bracket, by linear interpolation of g (its midpoint where g is not finite)
        frac = np.where(np.isfinite(g_lo) & np.isfinite(g_hi) & (g_hi > g_lo), -g_lo / (g_hi - g_lo), 0.5)
        u = lo + np.clip(frac, 0.0, 1.0) * (hi - lo)
        d0, z = _at((u / (1.0 - np.abs(u)))[:, None, :], w, beta, gamma, mu, gap, per)
    none = tot == 0
    # Z(0): 0 where the gap is 0; +-inf where delta_0 = 0 is out of the constrained fits' reach
    z0 = np.where(gap == 0, 0.0, np.where(np.abs(d0[-1]) < 1e-9, z[-1], np.where(gap > 0, np.inf, -np.inf)))
    p = np.where(none, np.nan, np.minimum(2.0 * ndtr(-np.abs(z0)), 1.0))
    ends = [(np.where(none, np.nan, np.clip(d0[2 * i], -1.0, 1.0)),
             np.where(none, np.nan, np.clip(d0[2 * i + 1], -1.0, 1.0))) for i in range(len(zc))]
    return np.where(none, np.nan, z0), p, ends



def _atoms_kappa(v, p, t, iters):
    """kappa >= |t| with sum_j p_j / (kappa + t v_j) = 1, or |t| (corner) where that sum is <= 1 there.

    The sum is convex and decreasing in kappa on (|t|, inf), so Newton from a point left of the root
    climbs to it monotonically; max_j (p_j - t v_j) is one (each term of the sum is at most 1 at the
    root) at least p_j from the nearest singular point, so the steps double that distance to the root.
    """
    at = np.abs(t)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        corner = (p / np.maximum(at + t * v, _TINY)).sum(axis=-1, keepdims=True) <= 1.0
        k = np.maximum(np.max(np.where(p > 0, p - t * v, -np.inf), axis=-1, keepdims=True), at)
        for _ in range(iters):
            r = p / np.maximum(k + t * v, _TINY)
            f = r.sum(axis=-1, keepdims=True)
            df = -(r * r / np.maximum(p, _TINY)).sum(axis=-1, keepdims=True)
            k = np.minimum(np.maximum(k - (f - 1.0) / np.minimum(df, -_TINY), k), at + 1.0)
    return np.where(corner, at, k)


def _atoms_fit(v, p, t):
    """The constrained fit at multipliers t, shape (..., 1), of atoms v with shares p, shape (..., m)
    (padding: p = 0): (masses on the atoms, the corner's mass at the bound -sign(t), mean, ML variance)."""
    k = _atoms_kappa(v, p, t, NEWTON)
    w = p / np.maximum(k + t * v, _TINY)
    slack = np.clip(1.0 - w.sum(axis=-1), 0.0, 1.0)  # the corner's mass, at the bound -sign(t)
    d0 = (w * v).sum(axis=-1) - np.sign(t[..., 0]) * slack
    return w, slack, d0, (w * v * v).sum(axis=-1) + slack - d0 * d0


def _atoms_table(atoms):
    """Per pair (distinct values, counts) -> (v, p, n): values and shares padded (share 0) to one width."""
    m = max(a[0].size for a in atoms)
    v, p = np.zeros((len(atoms), m)), np.zeros((len(atoms), m))
    for j, (vals, counts) in enumerate(atoms):
        v[j, :vals.size], p[j, :vals.size] = vals, counts / counts.sum()
    return v, p, np.array([c.sum() for _, c in atoms], dtype=float)


def _atoms_at(t, v, p, gap, per):
    """(delta_0, Z) at multipliers t, shape (R, P, 1), for atoms v with shares p, shape (P, m) (padding: p = 0)."""
    d0, var = _atoms_fit(v, p, t)[2:]
    var = var / per
    z = np.where(var > 0, (gap - d0) / np.sqrt(np.maximum(var, _TINY)),
                 np.where(gap > d0, np.inf, np.where(gap < d0, -np.inf, 0.0)))
    return d0, z


#: Newton steps of the bounded score test's inner solve (tests/stats/comparisons/test_score.py checks its ends
#: against Tango's closed form and a general-purpose constrained optimiser).
NEWTON = 30


def bounded_mean_score_test(d_items, levels=(0.05,)):
    r"""The score test of the mean of a variable in [-1, 1] and its inverted intervals, for P pairs.

    Parameters
    ----------
    d_items : sequence of ndarray
        Per pair, the differences D_i = b_i - a_i of its shared items (fractional scores allowed).
    levels : tuple of float
        Two-sided levels of the intervals.

    Returns
    -------
    statistic, p_value : ndarray, shape (P,)
    ends : list of (lower, upper)
        As :func:`stratified_score_test` (one stratum).

    Notes
    -----
    The generalisation of Tango's (1998) interval from D in {-1, 0, 1} to D in [-1, 1]: at each null
    mean delta_0 the variance is that of the nonparametric maximum-likelihood distribution on [-1, 1]
    with mean delta_0, times n / (n - 1) (Miettinen and Nurminen 1985), and
    Z(delta_0) = (mean(D) - delta_0) / sqrt(Var_0 / n). That distribution puts on the observed
    values v_j (shares p_j) the masses p_j / (kappa + t v_j) (Owen's empirical likelihood, 2001,
    section 2.9, its multiplier parametrised as in :func:`stratified_score_test`), and where those
    cannot reach delta_0 the rest of the mass on the bound -1 or +1 (a value never observed can carry
    mass; the bounds move the mean furthest for the likelihood given up). On values in {-1, 0, 1} it is
    exactly Tango's constrained fit, so on 0/1 scores the two tests agree (tested). Near the ceiling the
    t interval's end away from the ceiling is short on fractional scores as on 0/1 ones (issue #36: a
    non-inferiority gate at the margin passed 4.0-5.2% of runs with 5-14 small subjects); the null's
    variance holds it at most 2.5% (docs/ci-gate.md).

    Near a bound, with differences of small spread, it has little power (0.4% against the t's 98.6% at a
    2-point gap, scores of Beta concentration 20 near the ceiling, 2,000 runs on the pooled differences; 0.1%
    against 99.0% through the audit's path), and no test valid for every
    distribution on [-1, 1] can have much more: if F, the differences' law, has mean theta < 0, then
    G = (1 - p) F + p delta_{+1} with p = |theta| / (1 + |theta|) has mean 0, and n items from G are n
    items from F with probability (1 - p)^n, so a test claiming ``regressed`` under G at most alpha/2 of
    the time claims it under F at most (alpha/2) / (1 - p)^n of the time (20.8% there, n = 107; reached
    only by a coin flip, the likelihood ratio being constant on those samples). The t's power there is
    false claims under G (12.2% against 2.5%), and the fixed-sample betting bounds of
    :mod:`benchcert.stats.betting` (capped bets) lose to this test in every setting simulated
    (tests/stats/comparisons/test_fractional_size.py).
    """
    v, p, n = _atoms_table([np.unique(np.asarray(d, dtype=float), return_counts=True) for d in d_items])
    gap = (v * p).sum(axis=-1)
    per = np.maximum(n - 1.0, 1.0)  # Var(mean) = n Var_ML / (n - 1) / n
    zc = [float(ndtri(1.0 - a / 2.0)) for a in levels]
    rows = 2 * len(zc) + 1
    sign = np.r_[np.ones(rows - 1), -1.0][:, None]
    target = np.r_[[x for q in zc for x in (q, -q)], 0.0][:, None]
    lo, hi = np.full((rows, n.size), -1.0), np.full((rows, n.size), 1.0)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        for _ in range(BISECTIONS + 16):
            u = (lo + hi) / 2.0
            d0, z = _atoms_at((u / (1.0 - np.abs(u)))[..., None], v, p, gap, per)
            above = np.where(sign > 0, z, -d0) - target > 0
            hi, lo = np.where(above, u, hi), np.where(above, lo, u)
        u = (lo + hi) / 2.0
        d0, z = _atoms_at((u / (1.0 - np.abs(u)))[..., None], v, p, gap, per)
    z0 = np.where(gap == 0, 0.0, np.where(np.abs(d0[-1]) < 1e-9, z[-1], np.where(gap > 0, np.inf, -np.inf)))
    ends = [(np.clip(d0[2 * i], -1.0, 1.0), np.clip(d0[2 * i + 1], -1.0, 1.0)) for i in range(len(zc))]
    return z0, np.minimum(2.0 * ndtr(-np.abs(z0)), 1.0), ends
