"""The pooled score test's exact power and its constrained fit at a gap: the oracle of the tests that a gap
equal to the stated MDE is detected with the stated power (tests/stats/comparisons/test_score_mde.py,
tests/stats/test_resolution.py)."""

from __future__ import annotations

import numpy as np
from scipy import stats
from scipy.special import ndtri

from benchcert.stats.comparisons.score import _nearest

Z = float(ndtri(0.975))


def exact_power(x, y, n, z=Z):
    """Two-sided pooled score test of gap 0 (Z(0) = (b - a) / sqrt((b + a) N / (N - 1))) when each item is
    only-B-right with x, only-A-right with y: exact, over the discordant count d and B's wins given d."""
    psi = x + y
    d = np.arange(n + 1)
    thr = z * np.sqrt(d * n / (n - 1.0))
    up = stats.binom.sf(np.floor((d + thr) / 2.0), d, x / psi)  # 2b - d > thr
    down = stats.binom.cdf(np.ceil((d - thr) / 2.0) - 1.0, d, x / psi)  # 2b - d < -thr
    return float((stats.binom.pmf(d, n, psi) * (up + down)).sum())


def fit_at(b, a, n, gap):
    """The constrained fit (x, y) of pooled counts (b, a, n) at item-weighted gap ``gap`` (bisection on t);
    per subject when the counts have a leading subject axis (one multiplier shared by the subjects)."""
    b, a, n = (np.asarray(v, dtype=float) for v in (b, a, n))
    beta, gamma = b / n, a / n
    mu, w = 1.0 - beta - gamma, n / n.sum(axis=0)
    lo, hi = np.full(np.shape(gap), -1.0), np.full(np.shape(gap), 1.0)
    for _ in range(60):
        u = (lo + hi) / 2.0
        x, y = _nearest(beta, gamma, mu, u / (1.0 - np.abs(u)))
        big = (w * (x - y)).sum(axis=0) > gap  # the gap falls as t rises
        lo, hi = np.where(big, u, lo), np.where(big, hi, u)
    return _nearest(beta, gamma, mu, (lo + hi) / 2.0 / (1.0 - np.abs((lo + hi) / 2.0)))


def draw(rng, x, y, n):
    """Multinomial counts (B-only wins, A-only wins) per cell of shares (x, y), n items each."""
    u = rng.binomial(n, np.clip(x + y, 0.0, 1.0))
    b = rng.binomial(u, np.where(x + y > 0, x / np.where(x + y > 0, x + y, 1.0), 0.5))
    return b, u - b


def tilt_at(d, gap):
    """The bounded score test's constrained fit of the differences ``d`` at mean ``gap`` (empirical likelihood
    on the observed values, the rest of the mass on the bound): (values, probabilities), by bisection on t."""
    from benchcert.stats.comparisons.score import _atoms_kappa

    vals, counts = np.unique(np.asarray(d, dtype=float), return_counts=True)
    v, p = vals[None, :], counts[None, :] / counts.sum()
    lo, hi = -1.0, 1.0
    for _ in range(60):
        u = (lo + hi) / 2.0
        t = u / (1.0 - abs(u))
        w = p / np.maximum(_atoms_kappa(v, p, np.array([[t]]), 30)[0] + t * v, 1e-300)
        spare = max(0.0, 1.0 - w.sum())
        lo, hi = (u, hi) if (w * v).sum() - np.sign(t) * spare > gap else (lo, u)  # the mean falls as t rises
    probs = np.r_[w[0], spare]
    return np.r_[vals, -np.sign(t)], probs / probs.sum()
