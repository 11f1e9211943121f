"""The paper's bounds: Lemma 2 (ideal test), Lemma 3 / Theorem 3 (power curves), Theorems 2 and 4."""

from __future__ import annotations

import math

import numpy as np

from ..degenerate import warn_degenerate
from ..validation import check_alpha
from ._checks import (_ASSUMPTION_1, _ASSUMPTION_2, _ASSUMPTION_3, _REPLICATES, _int, _int_array, _out,
                      _range_iv, _real)
from .results import PowerCurve, TheoryBounds


def _s(r):
    r = np.asarray(r, dtype=float)
    return np.sqrt(np.log(r) / r)


def _lemma2(eps, w, alpha):
    eps = np.asarray(eps, dtype=float)
    with np.errstate(divide="ignore"):
        denom = np.abs(np.log1p(-np.minimum(eps / w, 1.0)))
        m = np.ceil(abs(math.log(alpha)) / denom)
    # A threshold at or beyond the whole range needs a single variant.
    return np.maximum(np.where(np.isfinite(m), m, 1), 1).astype(np.int64)


def _size_bound(eps, m, r, w):
    eps, m, r = (np.asarray(x, dtype=float) for x in (eps, m, r))
    s = _s(r)
    if w <= 0:
        # A point null: the ideal statistic is 0 under H0, so only the union term remains once
        # eps clears Lemma 1's deviation.
        first = np.where(eps - s >= 0, 0.0, 1.0)
    else:
        first = np.clip(1.0 - (eps - s) / w, 0.0, None) ** m
    return first + 2.0 * m / np.sqrt(r)


def _power_bound(eps, m, r, w):
    eps, m, r = (np.asarray(x, dtype=float) for x in (eps, m, r))
    s = _s(r)
    if w >= 1 or w <= 0:
        return np.full(np.broadcast(eps, m, r).shape, np.nan)
    base = np.clip(1.0 - (eps + s) / w, 0.0, 1.0)
    return 2.0 / (1.0 - w) * (base**m - 1.0) * (eps + s) + (1.0 - 2.0 * m / np.sqrt(r))



def lemma2_m(eps, *, a, b, alpha) -> np.ndarray | int:
    r"""Lemma 2 (Eq. 5/7): the number of null variants that makes the ideal test valid.

    .. math:: m = \left\lceil \frac{|\log \alpha|}{|\log(1 - \epsilon/(b-a))|} \right\rceil

    Valid (size <= alpha) for the ideal test that observes the p_j, when eps < b - a and
    Assumption 2 holds; for eps >= b - a one variant suffices (returned as 1).  Returns an int
    for scalar ``eps``, else an int64 array.
    """
    eps, a, b, alpha = _theory_iv(eps, a, b, alpha)
    if b - a <= 0:
        raise ValueError(f"b - a must be > 0 for Lemma 2; got a={a!r}, b={b!r}")
    return _out(_lemma2(eps, b - a, alpha))


def _theory_iv(eps, a, b, alpha):
    e = np.asarray(eps, dtype=float)
    if not np.all(np.isfinite(e)) or (e.size and e.min() < 0):
        raise ValueError(f"eps must be finite and >= 0; got {eps!r}")
    a, b = _range_iv(a, b)
    alpha = None if alpha is None else check_alpha(alpha)
    return e, a, b, alpha


def theory_bounds(eps, *, m, r, a, b, alpha=None) -> TheoryBounds:
    r"""Size and average-power bounds of the realistic test (Lemma 2, Theorems 2 and 4).

    Parameters
    ----------
    eps : float or array_like
        Rejection threshold(s): reject when :math:`T > \epsilon`.
    m, r : int or array_like of int, keyword-only
        Null variants and replicates per variant (broadcast with ``eps``).
    a, b : float, keyword-only
        Null range (true, or the plug-in from :func:`estimate_range`).
    alpha : float, optional, keyword-only
        Level; when given, ``valid`` and ``lemma2_m`` are filled in.

    Returns
    -------
    TheoryBounds

    Notes
    -----
    With :math:`w = b - a` and :math:`s_r = \sqrt{\log r / r}`:

    * Lemma 2: the ideal test's size is at most :math:`(1 - \epsilon/w)^m`;
    * Theorem 2: :math:`\sup_{p' \in [a,b]} P(T_{m,r} > \epsilon \mid p') \le
      (1 - (\epsilon - s_r)/w)^m + 2m/\sqrt r`;
    * Theorem 4: under Assumption 3, the average power over :math:`p' \sim \mathrm{Unif}(P_1)`
      is at least
      :math:`H = \frac{2}{1-w}\{(1 - (\epsilon + s_r)/w)^m - 1\}(\epsilon + s_r) + 1 - 2m/\sqrt r`.

    The union term :math:`2m/\sqrt r` comes from Lemma 1 (Hoeffding for each of the m
    differences at deviation :math:`s_r`).  Theorem 2 is written with ``2m/sqrt(r)``; Algorithm
    C's line 8 misprints it as ``2m/r`` (an erratum) - not copied.

    Departures (clarifications, not changes): the base :math:`1 - (\epsilon - s_r)/w` is clipped
    at 0 (for :math:`\epsilon - s_r \ge w` the ideal probability is 0, and a negative base
    raised to an even m would be wrong), and likewise the base in Theorem 4.  The proofs only
    need :math:`0 \le \epsilon - s_r \le w` for the size bound; for :math:`\epsilon < s_r` the
    bound exceeds 1 and is trivially true.  Theorem 4 is stated for
    :math:`\epsilon < \min(a, w, 1-b)`; beyond that its formula still lower-bounds the average
    of Theorem 3's :math:`\phi` (the near-boundary zones are truncated, which only raises the
    average).  At w = 1 (P_1 empty) the power bound is NaN; at w = 0 (a point null) the first
    size term is 0 once :math:`\epsilon \ge s_r`.
    """
    eps, a, b, alpha = _theory_iv(eps, a, b, alpha)
    m = _int_array(m, "m", lo=1)
    r = _int_array(r, "r", lo=1)
    w = b - a
    size = _size_bound(eps, m, r, w)
    power = _power_bound(eps, m, r, w)
    if w <= 0:
        ideal = np.where(np.broadcast_to(eps, np.broadcast(eps, m).shape) >= 0, 0.0, 1.0)
        l2 = None
    else:
        ideal = np.clip(1.0 - eps / w, 0.0, None) ** m
        l2 = None if alpha is None else _out(_lemma2(eps, w, alpha))
    if w >= 1:
        warn_degenerate("theory_bounds: b - a = 1 leaves no alternative (P_1 is empty); power bound is NaN")
    valid = None if alpha is None else _out(size <= alpha)
    return TheoryBounds(
        eps=_out(eps), m=_out(m), r=_out(r), a=a, b=b, s_r=_out(_s(r)), lemma2_m=l2, ideal_size=_out(ideal),
        size_bound=_out(size), power_bound=_out(power), valid=valid, alpha=alpha,
        method="composite_null_bounds (Lemma 2, Theorem 2, Theorem 4)",
        assumptions=(_ASSUMPTION_1, _ASSUMPTION_2, _ASSUMPTION_3, _REPLICATES),
    )


def _power_curve_iv(p_prime, eps, m, r, a, b):
    p = np.asarray(p_prime, dtype=float)
    if not np.all(np.isfinite(p)) or (p.size and (p.min() < 0 or p.max() > 1)):
        raise ValueError(f"p_prime must lie in [0, 1]; got {p_prime!r}")
    eps = _real(eps, "eps", lo=0.0)
    m = _int(m, "m", lo=1)
    r = None if r is None else _int(r, "r", lo=1)
    a, b = _range_iv(a, b)
    if b <= a:
        raise ValueError(f"b must be > a for a power curve; got a={a!r}, b={b!r}")
    return p, eps, m, r, a, b


def power_curve(p_prime, *, eps, m, a, b, r=None) -> PowerCurve:
    r"""Power of the ideal test (Lemma 3) or Theorem 3's lower bound for the realistic test.

    Parameters
    ----------
    p_prime : array_like
        Test-variant probabilities.
    eps : float, keyword-only
    m : int, keyword-only
    a, b : float, keyword-only
    r : int, optional, keyword-only
        Replicates; None gives the ideal test (Lemma 3), an int Theorem 3's bound.

    Notes
    -----
    Lemma 3 (exact, ideal test, for p' outside [a, b]): with :math:`w = b - a`,
    :math:`P(\tilde T_m > \epsilon \mid p') = P(|p_1 - p'| > \epsilon)^m`, i.e.
    1 for :math:`p' \le a - \epsilon` or :math:`p' \ge b + \epsilon`,
    :math:`((b - p' - \epsilon)/w)^m` on :math:`(a - \epsilon, a)` and
    :math:`((p' - \epsilon - a)/w)^m` on :math:`(b, b + \epsilon)`.  Computed here as the
    product formula for every p' (inside [a, b] too, where it is the ideal size curve of
    Lemma 2's proof), which agrees with the lemma on its domain.

    Theorem 3 (lower bound, realistic test, p' outside [a, b]) with :math:`\delta = \epsilon + s_r`:
    :math:`1 - 2m/\sqrt r` beyond :math:`\delta` of the range and
    :math:`(1 - \delta/w)^m - 2m/\sqrt r` within it (base clipped at 0); NaN inside [a, b],
    where the theorem says nothing.
    """
    p, eps, m, r, a, b = _power_curve_iv(p_prime, eps, m, r, a, b)
    w = b - a
    if r is None:
        near = np.clip(np.minimum(p + eps, b) - np.maximum(p - eps, a), 0.0, None)
        power = (1.0 - near / w) ** m
        method = "ideal_power (Lemma 3)"
        assumptions = (_ASSUMPTION_1, _ASSUMPTION_2)
    else:
        delta = eps + float(_s(r))
        union = 2.0 * m / math.sqrt(r)
        inner = max(0.0, 1.0 - delta / w) ** m - union
        power = np.where((p <= a - delta) | (p >= b + delta), 1.0 - union, inner)
        power = np.where((p >= a) & (p <= b), np.nan, power)
        method = "realistic_power_lower_bound (Theorem 3)"
        assumptions = (_ASSUMPTION_1, _ASSUMPTION_2, _REPLICATES)
    return PowerCurve(p_prime=p, power=np.asarray(power, dtype=float), eps=eps, m=m, r=r, a=a, b=b,
                      method=method, assumptions=assumptions)
