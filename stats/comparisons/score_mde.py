r"""The minimum detectable effect (the stated resolution) of the paired score tests that decide the items question.

On 0/1 scores the items question's interval and p-value are the pooled score test's
(:func:`~benchcert.stats.comparisons.score.stratified_score_test`, Tango 1998 on the counts pooled
over the subjects). The t approximation's MDE, :math:`(z_{1-\alpha/2} + z_{\mathrm{power}})\,SE`,
takes the variance under the alternative equal to the observed one. Near the ceiling that is not
what a larger gap looks like: with few discordant items a gap comparable to the discordance rate
cannot move without more items becoming discordant, and the score test's variance at the null
grows with it. At accuracy 0.99 (discordance 0.02) a gap equal to the t MDE was detected in
64.2%, 71.7% and 74.7% of runs at 500, 1,000 and 2,000 items, not 80% (two-stage, seed 7, 4,000 runs a
setting, the setup of tests/stats/comparisons/test_score_mde.py's study; docs/analyses.md).
On fractional scores the bounded score test decides (families of up to 20 pairs): its MDE is built the
same way (:func:`bounded_score_test_mde`); on graded scores with 1% of 500 and 1,000 items differing the
t approximation's was detected in 35.8% and 47.2% of runs, 69.5% with a fifth of 1,000 (seed 3, 400 runs a
setting, tests/stats/comparisons/test_score_mde.py's fractional study).
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtr, ndtri

from .score import _TINY, _atoms_fit, _atoms_table, _nearest

#: Bisection steps in u = t / (1 + |t|) for the gap whose power is the target (the bracket is then 2^-40
#: wide in u: the MDE is exact to far below the printed 0.01 points).
MDE_BISECTIONS = 40


def _score_power(x, y, n, z):
    """Power of the two-sided pooled score test of gap 0 at critical value z when the items' outcomes are
    (x, y): the near tail, on the normal reference with the delta method's variance (module notes)."""
    gap, disc = x - y, x + y
    m = np.maximum(n - 1.0, 1.0)
    root = np.sqrt(np.maximum(disc * m, _TINY))
    var = disc - gap * gap + z * z * (1.0 - disc) / (4.0 * m) - z * np.abs(gap) * (1.0 - disc) / root
    return ndtr((np.abs(gap) - z * np.sqrt(disc / m)) / np.sqrt(np.maximum(var, _TINY) / n))


def score_test_mde(n_b_wins, n_a_wins, n, *, alpha, power):
    r"""Smallest gap the pooled score test on 0/1 scores detects with ``power`` at two-sided ``alpha``.

    Parameters
    ----------
    n_b_wins, n_a_wins, n : array_like, shape (P,)
        Per pair, the items only B got right, only A got right, and shared items (pooled over subjects).
    alpha, power : float, keyword-only
        Checked by the caller (the comparisons engine).

    Returns
    -------
    ndarray, shape (P,)
        The MDE in (0, 1]: the larger of the two directions' (a gap of that size either way is detected
        with at least ``power``).

    Notes
    -----
    *The alternative.* For a gap :math:`\delta_1` the items' outcomes are taken to be the multinomial
    :math:`(x_1, y_1)` nearest the observed shares with :math:`x_1 - y_1 = \delta_1`: the score test's
    own constrained maximum-likelihood fit at :math:`\delta_1` (Tango 1998, eq. 3-5, the fit the
    interval's end at :math:`\delta_1` uses). Near the ceiling it has more discordant items than the
    data (:math:`\psi_1 = x_1 + y_1` grows with :math:`|\delta_1|`); in the middle it is the data's
    discordance to within a few per cent, and the MDE is the t approximation's to about 1%.

    *The power* (Nam 1997, *Biometrics* 53, sec. 3: the score test's power at an alternative uses the
    null's restricted variance beside the alternative's own). The test rejects upwards when
    :math:`T = \hat\delta - z\sqrt{\hat\psi/(N - 1)} > 0` (at gap 0 the constrained fit is
    :math:`x = y = \hat\psi/2`, with Miettinen and Nurminen's 1985 N / (N - 1)). Under
    :math:`(x_1, y_1)`, with :math:`\mathrm{Var}(D) = \psi_1 - \delta_1^2`,
    :math:`\mathrm{Var}(D^2) = \psi_1(1 - \psi_1)`, :math:`\mathrm{Cov}(D, D^2) = \delta_1(1 - \psi_1)`
    per item, the delta method gives

    .. math:: N\,\mathrm{Var}(T) = \psi_1 - \delta_1^2 + \frac{z^2(1 - \psi_1)}{4(N - 1)}
              - \frac{z|\delta_1|(1 - \psi_1)}{\sqrt{\psi_1 (N - 1)}},

    and power :math:`\Phi\big((|\delta_1| - z\sqrt{\psi_1/(N-1)})/\sqrt{\mathrm{Var}(T)}\big)` (the far
    tail ignored). Departure from Nam's form, which keeps the threshold fixed: near the ceiling the
    discordance count moves the threshold with the gap, and Nam's form overstated the MDE (power
    83-84% instead of 80% at 10 discordant items); this one is within 1.5 points of the exact binomial
    power (conditional on the discordant count) at 5-150 discordant items per direction
    (tests/stats/comparisons/test_score_mde.py). The gap whose power is ``power`` is found by bisection
    in the multiplier t (power is monotone in it), one row per direction.

    The pooled score test with subjects treats them as fixed strata conservatively (its variance holds
    the between-subject spread of gaps), so with subjects this MDE is conservative in the same way.
    """
    nb, na, nn = (np.asarray(v, dtype=float) for v in (n_b_wins, n_a_wins, n))
    safe = np.where(nn > 0, nn, 1.0)
    beta, gamma = nb / safe, na / safe
    mu = np.clip(1.0 - beta - gamma, 0.0, 1.0)
    z = float(ndtri(1.0 - alpha / 2.0))
    up = np.array([[1.0], [-1.0]])  # row 0: a gap upwards (B better), row 1: downwards
    lo, hi = np.full((2, nn.size), -1.0), np.full((2, nn.size), 1.0)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        for _ in range(MDE_BISECTIONS):
            u = (lo + hi) / 2.0
            x, y = _nearest(beta, gamma, mu, u / (1.0 - np.abs(u)))
            p = np.where(up * (x - y) > 0, _score_power(x, y, nn, z), 0.0)
            # upwards the gap (and the power) falls as t rises; downwards it rises
            right = (p > power) == (up > 0)
            lo, hi = np.where(right, u, lo), np.where(right, hi, u)
        u = (lo + hi) / 2.0
        x, y = _nearest(beta, gamma, mu, u / (1.0 - np.abs(u)))
    return np.minimum(np.abs(x - y).max(axis=0), 1.0)


#: Atoms (distinct differences) above which :func:`bounded_score_test_mde` rounds the differences to a grid of
#: this many steps on [-1, 1] (step 0.005: the variance moves by about step^2 / 12 = 2e-6, nothing printed moves).
ATOM_GRID = 400
#: Bisection steps of the inner solve (the null's fit of each alternative) of :func:`bounded_score_test_mde`.
INNER_BISECTIONS = 30


def _tilt(v, p, t):
    """The bounded score test's constrained fit with multiplier t, shape (..., P): (masses on the atoms v, the
    corner's mass at the bound -sign(t), mean, variance) (score._atoms_fit)."""
    return _atoms_fit(v, p, t[..., None])


def _atoms(d_items):
    """Per pair the distinct differences and their shares, padded (share 0) to one width: (v, p, n)."""
    atoms = []
    for d in d_items:
        d = np.asarray(d, dtype=float)
        vals, counts = np.unique(d, return_counts=True)
        if vals.size > ATOM_GRID:
            vals, counts = np.unique(np.round(d * ATOM_GRID / 2.0) * 2.0 / ATOM_GRID, return_counts=True)
        atoms.append((vals, counts))
    return _atoms_table(atoms)


def bounded_score_test_mde(d_items, *, alpha, power):
    r"""Smallest gap the bounded score test (fractional scores) detects with ``power`` at two-sided ``alpha``.

    Parameters
    ----------
    d_items : sequence of ndarray
        Per pair, the differences D_i = b_i - a_i in [-1, 1] of its shared items.
    alpha, power : float, keyword-only
        Checked by the caller (the comparisons engine).

    Returns
    -------
    ndarray, shape (P,)
        The larger of the two directions' MDE, in (0, 1].

    Notes
    -----
    The construction of :func:`score_test_mde` for
    :func:`~benchcert.stats.comparisons.score.bounded_mean_score_test`. The alternative at a gap
    :math:`\delta_1` is that test's constrained fit of the data there, :math:`F_1` (empirical likelihood on
    the observed differences, the rest of the mass on the bound; Owen 2001, sec. 2.9); the null's variance
    beside it, :math:`V_0`, is the fit of :math:`F_1` at mean 0 (what the test's variance at 0 converges to
    under :math:`F_1`; Nam 1997's null variance beside the alternative's), and the delta method's term for the
    threshold's spread, in the moments :math:`m_k = E_{F_1} D^k`:

    .. math:: N\,\mathrm{Var}(T) = \mathrm{Var}_{F_1}(D) + s^2 (m_4 - m_2^2)
              - 2 s\,\mathrm{sign}(\delta_1)(m_3 - \delta_1 m_2),
              \qquad s = \frac{z}{2\sqrt{V_0 (N - 1)}},

    and power :math:`\Phi\big((|\delta_1| - z\sqrt{V_0/(N - 1)})/\sqrt{\mathrm{Var}(T)/N}\big)`
    (the far tail ignored). On differences in {-1, 0, 1} (:math:`m_2 = m_4 = \psi_1`,
    :math:`m_3 = \delta_1`, :math:`V_0 = \psi_1`) it is :func:`score_test_mde`'s formula, and the two
    MDEs agree to 1e-6 (tested). More than :data:`ATOM_GRID`
    distinct differences are rounded to that grid for this computation only.
    """
    v, p, n = _atoms(d_items)
    z = float(ndtri(1.0 - alpha / 2.0))
    up = np.array([[1.0], [-1.0]])
    lo, hi = np.full((2, n.size), -1.0), np.full((2, n.size), 1.0)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        for _ in range(MDE_BISECTIONS):
            u = (lo + hi) / 2.0
            gap, var1, v1, p1 = _alternative(v, p, u / (1.0 - np.abs(u)))
            var0 = _null_variance(v1, p1)
            pw = np.where(up * gap > 0, _bounded_power(gap, var1, var0, _moments(v1, p1), n, z), 0.0)
            right = (pw > power) == (up > 0)
            lo, hi = np.where(right, u, lo), np.where(right, hi, u)
        u = (lo + hi) / 2.0
        gap = _alternative(v, p, u / (1.0 - np.abs(u)))[0]
    return np.minimum(np.abs(gap).max(axis=0), 1.0)


def _moments(v1, p1):
    """(m_2, m_3, m_4) = E D^k of the distributions (v1, p1), shape (..., m) -> (...,)."""
    return tuple((p1 * v1 ** k).sum(axis=-1) for k in (2, 3, 4))


def _bounded_power(gap, var1, var0, moments, n, z):
    """Power of the two-sided bounded score test at critical value z and n items against the alternative of
    mean ``gap``, variance ``var1`` and moments (m_2, m_3, m_4), beside the null's variance ``var0`` there
    (:func:`bounded_score_test_mde`'s formula; the near tail)."""
    m2, m3, m4 = moments
    m = np.maximum(n - 1.0, 1.0)
    # the delta method's terms for the threshold's second moment (the binary case's, in moments)
    slope = z / (2.0 * np.sqrt(np.maximum(var0 * m, _TINY)))
    var_t = var1 + slope * slope * (m4 - m2 * m2) - 2.0 * slope * np.sign(gap) * (m3 - gap * m2)
    return ndtr((np.abs(gap) - z * np.sqrt(var0 / m)) / np.sqrt(np.maximum(var_t, _TINY) / n))


def _alternative(v, p, t):
    """The fit at multiplier t, shape (2, P), as atoms with the corner appended: (mean, variance, v1, p1)."""
    w, spare, mean, var = _tilt(v, p, t)
    v1 = np.concatenate([np.broadcast_to(v, w.shape), -np.sign(t)[..., None]], axis=-1)
    return mean, var, v1, np.concatenate([w, spare[..., None]], axis=-1)


def _null_variance(v1, p1):
    """The variance of the fit at mean 0 of the distributions (v1, p1), shape (2, P, m) (bisection in t)."""
    lo, hi = np.full(v1.shape[:-1], -1.0), np.full(v1.shape[:-1], 1.0)
    for _ in range(INNER_BISECTIONS):
        u = (lo + hi) / 2.0
        above = _tilt(v1, p1, u / (1.0 - np.abs(u)))[2] > 0  # the mean falls as t rises
        lo, hi = np.where(above, u, lo), np.where(above, hi, u)
    u = (lo + hi) / 2.0
    return _tilt(v1, p1, u / (1.0 - np.abs(u)))[3]
