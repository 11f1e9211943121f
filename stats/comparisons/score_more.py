r"""How many items the score tests that decide the items question need to resolve a gap ("more items needed").

The minimum detectable effect of those tests (:mod:`~benchcert.stats.comparisons.score_mde`) solved for the
number of items instead of the gap: the smallest :math:`N` at which the score test's MDE at the deciding
level and power is at most the gap, with the design held (on 0/1 scores the shares of items only B got
right, only A got right and neither differing; on fractional scores the atoms of the differences and their
shares), items added in the present proportions. The normal rule
(:func:`~benchcert.stats.comparisons.additional_sample_size`, the t approximation's MDE solved for n) takes
the variance under the alternative equal to the observed one; near the ceiling the score test's grows with
the gap, and a gap equal to the t approximation's MDE was detected in only 64.2-74.7% of seeded runs at
accuracy 0.99 (docs/analyses.md): this rule asks for the items the deciding test needs.
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtri

from .results import AdditionalSampleSize
from .score_mde import (
    MDE_BISECTIONS,
    _alternative,
    _atoms,
    _bounded_power,
    _moments,
    _null_variance,
    _score_power,
)
from .score import _nearest

__all__ = ["score_test_items_needed", "bounded_score_test_items_needed", "score_additional_sample_size"]

#: Bisection steps in log N over [2, MAX_ITEMS] (the bracket is then far below one item wide).
N_BISECTIONS = 64
#: Beyond this many items no practical evaluation resolves the gap (the answer is "none").
MAX_ITEMS = 1e12
#: The alternative's gap must match the gap asked to this tolerance (else the gap is out of the fit's reach).
GAP_TOL = 1e-9


def _smallest_n(power_at, target):
    """Per element, the smallest N in [2, MAX_ITEMS] with ``power_at(N) >= target`` (bisection in log N, the power
    rising with N); inf where even MAX_ITEMS does not reach it."""
    hi = np.full(np.shape(power_at(np.array(2.0))), np.log(MAX_ITEMS))
    lo = np.full_like(hi, np.log(2.0))
    reach = power_at(np.exp(hi)) >= target
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        for _ in range(N_BISECTIONS):
            mid = (lo + hi) / 2.0
            ok = power_at(np.exp(mid)) >= target
            lo, hi = np.where(ok, lo, mid), np.where(ok, mid, hi)
    return np.where(reach, np.ceil(np.exp(hi) - 1e-9), np.inf)


def _fit_gap(gap_at, g):
    """Per direction (row 0 upwards, row 1 downwards) and pair, the multiplier t whose constrained fit has gap
    +g / -g (the fit's gap falls as t rises: bisection in u = t / (1 + |t|))."""
    up = np.array([[1.0], [-1.0]])
    lo, hi = np.full((2, g.size), -1.0), np.full((2, g.size), 1.0)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        for _ in range(MDE_BISECTIONS):
            u = (lo + hi) / 2.0
            above = gap_at(u / (1.0 - np.abs(u))) > up * g
            lo, hi = np.where(above, u, lo), np.where(above, hi, u)
    u = (lo + hi) / 2.0
    return u / (1.0 - np.abs(u)), up


def _direction(need, gap, both):
    """Per pair, the items of the gap's own direction (row 0 for a gap >= 0, row 1 below 0), or with ``both``
    the larger of the two directions' (what an MDE, the smallest gap detected either way, is)."""
    return need.max(axis=0) if both else np.where(gap < 0, need[1], need[0])


def score_test_items_needed(n_b_wins, n_a_wins, n, gap, *, alpha, power, both_directions=False):
    r"""Items the pooled score test on 0/1 scores needs to detect a gap ``gap`` (signed) with ``power``.

    Parameters
    ----------
    n_b_wins, n_a_wins, n : array_like, shape (P,)
        Per pair, the items only B got right, only A got right, and shared items (pooled over subjects).
    gap : array_like, shape (P,)
        The gap to resolve, signed (B's share minus A's): the design held, the direction matters (near the
        ceiling a gap against the side with more wins needs far more items).
    alpha, power : float, keyword-only
        The two-sided level of the test that decides and the power wanted (checked by the caller).
    both_directions : bool, keyword-only
        False (default): the items to detect ``gap`` in its own direction (a gap of 0 counts as upwards). True:
        the items to detect ``|gap|`` in either direction, the larger number (the MDE's inverse: at that N the
        MDE, the larger direction's, is at most ``|gap|``).

    Returns
    -------
    ndarray, shape (P,)
        The smallest total N (items, the present ones included) at which
        The smallest total N (items, the present ones included) at which the score test, the shares held,
        detects ``gap`` with ``power`` (with ``both_directions``: at which
        :func:`~benchcert.stats.comparisons.score_mde.score_test_mde` is at most ``|gap|``); inf where no N up
        to :data:`MAX_ITEMS` does (a gap of 0).

    Notes
    -----
    :func:`score_test_mde`'s power: at the gap's constrained fit :math:`(x_1, y_1)` (Tango 1998, eq. 3-5, the
    nearest multinomial to the observed shares with :math:`x_1 - y_1 = \pm|\delta|`, which does not depend on
    N), Nam (1997)'s power with the delta method's variance, :math:`P(N)`, rises with N; the answer is the
    smallest N with :math:`P(N) \ge` ``power`` in the gap's direction (or in both, the MDE being the larger
    direction's), found by bisection in log N. So the MDE at that N, the shares held, is at most the gap (tested).
    """
    nb, na, nn, g = np.broadcast_arrays(*(np.atleast_1d(np.asarray(v, dtype=float)) for v in
                                          (n_b_wins, n_a_wins, n, gap)))
    signed, g = g, np.abs(g)
    safe = np.where(nn > 0, nn, 1.0)
    beta, gamma = nb / safe, na / safe
    mu = np.clip(1.0 - beta - gamma, 0.0, 1.0)
    z = float(ndtri(1.0 - alpha / 2.0))
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        t, up = _fit_gap(lambda t: np.subtract(*_nearest(beta, gamma, mu, t)), g)
        x, y = _nearest(beta, gamma, mu, t)
    need = _smallest_n(lambda m: _score_power(x, y, m, z), power)
    need = np.where(np.abs(x - y - up * g) <= GAP_TOL, need, np.inf)
    return np.where((g > 0) & (nn > 0), _direction(need, signed, both_directions), np.inf)


def bounded_score_test_items_needed(d_items, gap, *, alpha, power, both_directions=False):
    r"""Items the bounded score test (fractional scores) needs to detect a gap ``gap`` (signed) with ``power``.

    Parameters
    ----------
    d_items : sequence of ndarray
        Per pair, the differences D_i = b_i - a_i in [-1, 1] of its shared items.
    gap : array_like, shape (P,)
        The gap to resolve, signed (the mean of D).
    alpha, power, both_directions : keyword-only
        As :func:`score_test_items_needed`.

    Returns
    -------
    ndarray, shape (P,)
        The smallest total N at which the bounded score test, the atoms of the differences and their shares
        held, detects ``gap`` with ``power`` (with ``both_directions``:
        :func:`~benchcert.stats.comparisons.score_mde.bounded_score_test_mde` is at most ``|gap|``); inf where
        none does.

    Notes
    -----
    :func:`score_test_items_needed`'s construction on :func:`bounded_score_test_mde`'s alternative (the bounded
    score test's constrained fit :math:`F_1` of the atoms at mean :math:`\pm|\delta|`, the null's variance
    :math:`V_0` beside it): neither depends on N, so the power is that function's closed form in N, and the
    bisection is in N alone.
    """
    v, p, _ = _atoms(d_items)
    signed = np.broadcast_to(np.atleast_1d(np.asarray(gap, dtype=float)), (v.shape[0],))
    g = np.abs(signed)
    z = float(ndtri(1.0 - alpha / 2.0))
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        t, up = _fit_gap(lambda t: _alternative(v, p, t)[0], g)
        mean, var1, v1, p1 = _alternative(v, p, t)
        var0, moments = _null_variance(v1, p1), _moments(v1, p1)
    need = _smallest_n(lambda m: _bounded_power(mean, var1, var0, moments, m, z), power)
    need = np.where(np.abs(mean - up * g) <= GAP_TOL, need, np.inf)
    return np.where(g > 0, _direction(need, signed, both_directions), np.inf)


_SCORE_MORE_ASSUMPTIONS = (
    "more items of the same design: the shares of the outcomes (0/1 scores: only the candidate right, only the "
    "baseline right, no difference; fractional scores: the distinct differences) stay as observed now",
    "the power of the score test that decides (Nam 1997's, at the gap's constrained fit; docs/methods.md), "
    "two-sided level alpha; the far tail ignored",
)


def score_additional_sample_size(n_total, n, delta, se, *, alpha, power, method) -> AdditionalSampleSize:
    """The :class:`AdditionalSampleSize` document of one pair from its score test's N (:func:`score_test_items_needed`
    or :func:`bounded_score_test_items_needed`), ``method`` naming which."""
    gap = abs(float(delta))
    if gap == 0:
        return AdditionalSampleSize(None, None, n, gap, se, alpha, power, method, _SCORE_MORE_ASSUMPTIONS,
                                    "a gap of 0 is never resolved")
    if not np.isfinite(n_total):
        return AdditionalSampleSize(None, None, n, gap, se, alpha, power, method, _SCORE_MORE_ASSUMPTIONS,
                                    "the gap is too small for any practical number of items to resolve it")
    total = int(n_total)
    return AdditionalSampleSize(max(0, total - n), max(total, n), n, gap, se, alpha, power, method,
                                _SCORE_MORE_ASSUMPTIONS, None)
