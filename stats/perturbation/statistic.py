"""Algorithm A (the composite statistic, Eq. 3) and Algorithm B (the null range estimate)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..degenerate import warn_degenerate
from ._checks import _ASSUMPTION_2, _REPLICATES, _int, _int_array, _null_variants
from .results import CompositeStatistic, RangeEstimate


def _composite_statistic_iv(null_counts, null_replicates, test_count, test_replicates):
    k = _int_array(null_counts, "null_counts", lo=0)
    r = _null_variants(k, "null_counts", "count", null_replicates)
    if np.any(k > r):
        j = int(np.flatnonzero(k > r)[0])
        raise ValueError(f"null_counts must not exceed null_replicates; got {int(k[j])} > {int(r[j])} at index {j}")
    kt = _int(test_count, "test_count", lo=0)
    rt = _int(test_replicates, "test_replicates", lo=1)
    if kt > rt:
        raise ValueError(f"test_count must not exceed test_replicates; got {kt} > {rt}")
    return k, r, kt, rt


def _rational(eps) -> Fraction:
    """A threshold as the fraction it stands for: the nearest with denominator <= 1e12 (0.05 -> 1/20).

    Attainable distances are fractions with denominator r_j r'; reading eps this way makes
    "distance <= eps" an exact integer comparison, so a tie is a tie in every mirror image.
    """
    return Fraction(float(eps)).limit_denominator(10**12)


def _close_limit(eps, r: int, rt: int) -> int:
    """E = floor(eps r r'): |K/r - K'/r'| <= eps  iff  |K r' - K' r| <= E (integers, exact)."""
    return math.floor(_rational(eps) * int(r) * int(rt))


def _distance(k, r, kt, rt):
    # The statistic as a float, for display; decisions compare integers (_close_limit, _exceeds).
    return np.abs(np.asarray(k) / np.asarray(r) - kt / rt)


def _exceeds(k, r, kt, rt, eps) -> bool:
    """T > eps decided exactly: min_j |K_j r' - K' r_j| / (r_j r') against eps read as a fraction."""
    t = min(Fraction(abs(int(kj) * int(rt) - int(kt) * int(rj)), int(rj) * int(rt)) for kj, rj in zip(k, r))
    return t > _rational(eps)


def composite_statistic(null_counts, null_replicates, test_count, test_replicates) -> CompositeStatistic:
    r"""Algorithm A: :math:`T_{m,r} = \min_{j \le m} |\hat p_j - \hat p'|` (paper Eq. 3).

    Parameters
    ----------
    null_counts : array_like of int, shape (m,)
        Correct (or "yes") responses :math:`K_j` of each null variant.
    null_replicates : int or array_like of int, shape (m,)
        Replicates :math:`r_j` behind each count (a scalar means all equal).
    test_count, test_replicates : int
        :math:`K'` and :math:`r'` of the test variant.

    Returns
    -------
    CompositeStatistic

    Notes
    -----
    With :math:`\hat p_j = K_j / r_j` and :math:`\hat p' = K'/r'`, the test rejects
    :math:`H_0: p' \in [a, b]` when :math:`T > \epsilon`.  The paper uses one r for all
    variants; unequal counts are allowed here (the statistic is the same formula) and the
    calibrations below say how they treat them.
    """
    k, r, kt, rt = _composite_statistic_iv(null_counts, null_replicates, test_count, test_replicates)
    d = _distance(k, r, kt, rt)
    j = int(np.argmin(d))
    return CompositeStatistic(
        statistic=float(d[j]), test_rate=kt / rt, null_rates=k / r, nearest=j, m=int(k.size), r=r,
        r_test=rt, method="min_abs_gap (Algorithm A, Eq. 3)",
        assumptions=(_REPLICATES,),
    )


def _estimate_range_iv(null_rates, bias_correction):
    p = np.asarray(null_rates, dtype=float)
    if p.ndim != 1 or p.size == 0:
        raise ValueError(f"null_rates must be a non-empty 1-D array; got shape {p.shape}")
    if not np.all(np.isfinite(p)) or p.min() < 0 or p.max() > 1:
        bad = p[~(np.isfinite(p) & (p >= 0) & (p <= 1))].flat[0]
        raise ValueError(f"null_rates must lie in [0, 1]; got {bad!r}")
    if not isinstance(bias_correction, (bool, np.bool_)):
        raise ValueError(f"bias_correction must be True or False; got {bias_correction!r}")
    return p, bool(bias_correction)


def estimate_range(null_rates, *, bias_correction=True) -> RangeEstimate:
    r"""Algorithm B: estimate the null range [a, b] from m pilot null rates.

    Parameters
    ----------
    null_rates : array_like, shape (m,)
        :math:`\hat p_j` of m null variants (each from r replicates).
    bias_correction : bool, keyword-only
        Apply the unbiased uniform-endpoint correction (default) or return min and max.

    Returns
    -------
    RangeEstimate

    Notes
    -----
    Algorithm B returns :math:`\hat a = p_{(1)}`, :math:`\hat b = p_{(m)}`, which are biased
    inwards.  For :math:`p_j \sim \mathrm{Unif}[a, b]` i.i.d.,
    :math:`E p_{(1)} = a + (b-a)/(m+1)` and :math:`E p_{(m)} = b - (b-a)/(m+1)`, so

    .. math::

        \hat a = p_{(1)} - \frac{p_{(m)} - p_{(1)}}{m - 1},\qquad
        \hat b = p_{(m)} + \frac{p_{(m)} - p_{(1)}}{m - 1}

    are unbiased (Remark 1's erratum), then clipped to [0, 1].  Erratum: the paper's Remark 1 gives
    :math:`\hat a = p_{(1)} - (p_{(m)} - p_{(1)})/(m+1)` and
    :math:`\hat b = \frac{m+1}{m} p_{(m)}`, mixing the Unif(a, b) estimator with the Unif(0, b)
    one; it is not used.  Binomial noise in each :math:`\hat p_j` widens the observed range,
    so with few replicates the estimate errs wide (conservative for size).

    With m = 1 no correction is defined: the result is the point [p, p] with a
    :class:`DegenerateDataWarning`.
    """
    p, bias_correction = _estimate_range_iv(null_rates, bias_correction)
    lo, hi = float(p.min()), float(p.max())
    m = int(p.size)
    if bias_correction and m >= 2:
        spread = (hi - lo) / (m - 1)
        a_raw, b_raw = lo - spread, hi + spread
        method = "unbiased_uniform_endpoints"
    else:
        if bias_correction:
            warn_degenerate("estimate_range: one null rate cannot estimate a range; returning the point [p, p]")
        a_raw, b_raw = lo, hi
        method = "min_max (Algorithm B)"
    a_hat, b_hat = min(max(a_raw, 0.0), 1.0), min(max(b_raw, 0.0), 1.0)
    return RangeEstimate(
        a_hat=a_hat, b_hat=b_hat, width=b_hat - a_hat, raw_min=lo, raw_max=hi, m=m,
        clipped=(a_hat != a_raw) or (b_hat != b_raw), method=method,
        assumptions=(_ASSUMPTION_2, "clipped to [0, 1]"),
    )
