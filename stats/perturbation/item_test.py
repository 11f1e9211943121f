r"""The per-item composite test that keeps its level without a plug-in null range.

:func:`widened_range_test` is the default test of :func:`composite_test` (what ``benchcert perturb``
and the audit run per item); the plug-in test of the paper's Algorithm B/C is kept in
:mod:`.plugin` as an assumption-dependent comparison.
"""

from __future__ import annotations

import dataclasses
import math
from functools import lru_cache

import numpy as np

from ..validation import check_alpha, check_unit_interval
from ._checks import _ASSUMPTION_1, _choice, _int, _null_variants, _real
from .plugin import plugin_test
from .results import CompositeTestResult
from .no_power import no_power_sentence
from .statistic import _composite_statistic_iv, composite_statistic

__all__ = ["LOW_POWER_GAP", "TEST_METHODS", "composite_test", "low_power_sentence", "min_detectable_gap",
           "possible_rejection", "reject_many",
           "widened_range_test", "widened_range_test_scores"]

#: Methods of :func:`composite_test`; the first is the default.
TEST_METHODS = ("calibrated", "widened", "plugin_exact", "plugin_union")

ASSUMPTION_RANDOM_NULLS = ("the null variants' response probabilities are an i.i.d. sample from Unif[a, b], the "
                           "range of all acceptable rewordings (the paper's Assumption 2); used only to bound the "
                           "chance that the tested probability lies beyond the widened range of the sampled ones")
ASSUMPTION_REPLICATES = ("replicates of one variant are independent Bernoulli(p) draws (binary scores, "
                         "independent runs), so Hoeffding's bound holds")
ASSUMPTIONS = (_ASSUMPTION_1, ASSUMPTION_RANDOM_NULLS, ASSUMPTION_REPLICATES)
ASSUMPTIONS_SCORES = (_ASSUMPTION_1, ASSUMPTION_RANDOM_NULLS.replace("response probabilities", "expected scores"),
                      "replicates of one variant are independent draws of a score in [0, 1] (independent runs), so "
                      "Hoeffding's bound holds")


#: Above this many null variants the power check and the smallest detectable gap both use the
#: equal-rates value max t_ij instead of a linear programme with m^2 rows - one cut-off, so an item
#: the check calls testable never reads "detects only a change above 1".
LP_MAX_VARIANTS = 60


def _split(alpha: float, ideal_share: float) -> tuple[float, float]:
    """(ideal_alpha, gamma): alpha_I for the sampling of the null variants, gamma per one-sided bound."""
    ideal = ideal_share * alpha
    return ideal, (alpha - ideal) / 2.0


def _widening(ideal_alpha: float, m: int) -> float:
    # (1 + c)^-(m - 1) = ideal_alpha
    return ideal_alpha ** (-1.0 / (m - 1)) - 1.0


def _margins(r, rt, c, gamma):
    """Hoeffding half-widths t_ij for (1 + c) p_i - c p_j - p' (i = j: p_i - p'), shape (m, m)."""
    inv = 1.0 / np.asarray(r, dtype=float)
    var = (1.0 + c) ** 2 * inv[:, None] + c**2 * inv[None, :] + 1.0 / rt
    np.fill_diagonal(var, inv + 1.0 / rt)
    return np.sqrt(var * math.log(1.0 / gamma) / 2.0)


def _pair_margins(r, test_replicates, alpha, ideal_share):
    """The widening c and the pair margins t_ij of an item whose null variants have counts r."""
    ideal, gamma = _split(alpha, ideal_share)
    c = _widening(ideal, int(r.size))
    return c, _margins(r, int(test_replicates), c, gamma)


def _pair_rows(c, t, *, s_sign):
    """The linear programme's rows over (x_1..x_m, s): -(1+c) x_i + c x_j + s_sign * s <= -t_ij."""
    m = t.shape[0]
    rows = np.zeros((m * m, m + 1))
    i, j = np.divmod(np.arange(m * m), m)
    rows[np.arange(m * m), i] -= 1.0 + c
    rows[np.arange(m * m), j] += c
    rows[:, m] = s_sign
    return rows, -t.reshape(-1)


def _range(rates, r, rt, alpha, ideal_share):
    """(range_low, range_high, c, alpha_I, gamma): reject iff the tested rate is outside [low, high]."""
    m = rates.size
    ideal, gamma = _split(alpha, ideal_share)
    c = _widening(ideal, m)
    t = _margins(r, rt, c, gamma)
    centre = (1.0 + c) * rates[:, None] - c * rates[None, :]
    return float(np.min(centre - t)), float(np.max(centre + t)), c, ideal, gamma


def reject_many(null_counts, null_replicates, test_counts, test_replicates, *, alpha=0.05, ideal_share=0.8):
    """Decisions of :func:`widened_range_test` for many items at once (simulation studies).

    ``null_counts`` is (n, m) with a common replicate count per column (scalar or shape (m,)),
    ``test_counts`` (n,) with one ``test_replicates``.  Same margins and comparison as
    :func:`widened_range_test` (its non-``"ok"`` statuses are non-rejections the comparison gives
    by itself), without p-values.
    """
    k = np.asarray(null_counts)
    n, m = k.shape
    if m < 2:
        return np.zeros(n, dtype=bool)
    r = np.broadcast_to(np.asarray(null_replicates), (m,)).astype(float)
    ideal, gamma = _split(check_alpha(alpha), ideal_share)
    c = _widening(ideal, m)
    t = _margins(r, test_replicates, c, gamma)
    rates = k / r
    centre = (1.0 + c) * rates[:, :, None] - c * rates[:, None, :]            # (n, m, m)
    low = np.min(centre - t, axis=(1, 2))
    high = np.max(centre + t, axis=(1, 2))
    pt = np.asarray(test_counts) / test_replicates
    return (pt < low) | (pt > high)


def possible_rejection(null_replicates, test_replicates, *, alpha=0.05, ideal_share=0.8) -> bool:
    r"""Whether any outcome at these replicate counts could make :func:`widened_range_test` reject.

    Rejection below needs rates with :math:`(1 + c)\hat p_i - c\hat p_j - t_{ij} > \hat p' \ge 0`
    for every pair (i, j); the linear programme "maximise s subject to
    :math:`(1 + c) x_i - c x_j - t_{ij} \ge s`, :math:`0 \le x \le 1`" decides whether any
    rates in [0, 1] allow it (s > 0).  The side above is its mirror image.  The programme relaxes
    the lattice :math:`\{k/r_j\}`, so False is certain (no outcome can reject: the item has no
    power) while True may rarely be optimistic.
    """
    r = np.atleast_1d(np.asarray(null_replicates, dtype=np.int64))
    # the answer depends on the multiset of counts only: many items share it
    return _possible(tuple(sorted(int(x) for x in r)), int(test_replicates), check_alpha(alpha), float(ideal_share))


@lru_cache(maxsize=4096)
def _possible(reps: tuple[int, ...], test_replicates: int, alpha: float, ideal_share: float) -> bool:
    r = np.asarray(reps, dtype=float)
    m = int(r.size)
    if m < 2:
        return False
    c, t = _pair_margins(r, test_replicates, alpha, ideal_share)
    if m > LP_MAX_VARIANTS:
        # The programme would have m^2 rows; the common rate 1 is optimal for equal counts.  With
        # unequal counts this may call an item powerless that some outcome could reject - a
        # conservative label, never a wrong rejection.
        return bool(1.0 - t.max() > 0.0)
    rows, rhs = _pair_rows(c, t, s_sign=1.0)                   # s - (1+c) x_i + c x_j <= -t_ij
    from scipy.optimize import linprog  # here, not at import: scipy.optimize costs every command ~0.1 s

    res = linprog(np.r_[np.zeros(m), -1.0], A_ub=rows, b_ub=rhs,
                  bounds=[(0.0, 1.0)] * m + [(None, None)], method="highs")
    return bool(res.status == 0 and -res.fun > 1e-12)


#: Items whose :func:`min_detectable_gap` exceeds this are labelled low power (a convention: a change
#: of more than a quarter of the score scale is rarely what a prompt study is after).
LOW_POWER_GAP = 0.25


def min_detectable_gap(null_replicates, test_replicates, *, alpha=0.05, ideal_share=0.8) -> float:
    r"""Smallest observed change :func:`widened_range_test` can detect at these replicate counts.

    The change is the distance from the tested rate to the nearest end of the null variants'
    observed range. A rejection below needs
    :math:`\hat p' < \min_{i,j}\{(1 + c)\hat p_i - c\hat p_j - t_{ij}\}`, i.e. a gap
    :math:`\min_k \hat p_k - \hat p'` larger than
    :math:`f(\hat p) = \max_{i,j}\{t_{ij} + c\hat p_j - (1 + c)\hat p_i\} + \min_k \hat p_k`,
    which does not change when all rates move together. :math:`g^* = \min f` over null rates
    with a spread of at most 1, a linear programme per choice of the lowest variant k
    (:math:`x_k = 0 \le x \le 1`; the mirror side is the same programme). With equal counts the
    optimum has every null rate equal and :math:`g^* = \max_{i,j} t_{ij}` (a spread only adds the
    margin cR); with unequal counts a spread can lower it a little. :math:`g^*` depends on the
    number of null variants m (through c), the replicate counts and alpha only: a design
    property, known before any data. Items with :math:`g^* >` LOW_POWER_GAP (0.25) are labelled
    low power. With alpha = 0.05 and r replicates for every variant, :math:`g^* \approx 0.53`
    for m = 3, r = 400 (c = 4) and 0.16 for m = 8, r = 400 (c = 0.58); m = 2 (c = 24) needs r
    above about 3,200 for any power at all. Beyond m = 60 the equal-rates value
    :math:`\max t_{ij}` is returned (an upper bound: the label can then err towards "low power").
    """
    r = np.atleast_1d(np.asarray(null_replicates, dtype=np.int64))
    return _min_gap(tuple(sorted(int(x) for x in r)), int(test_replicates), check_alpha(alpha), float(ideal_share))


#: Smallest detectable gaps known without solving their programmes: (sorted replicates, r', alpha,
#: ideal_share) -> gap, filled by :func:`register_min_gaps` (the tasks layer's stored tables).
_KNOWN_GAPS: dict[tuple, float] = {}
#: Gaps solved in this process, for the tasks layer to store (:func:`computed_min_gaps`).
_COMPUTED_GAPS: dict[tuple, float] = {}


def register_min_gaps(entries) -> int:
    """Make gaps solved before known: ``entries`` of ``(replicates, r_test, alpha, ideal_share, gap)``."""
    n = 0
    for reps, rt, alpha, share, gap in entries:
        _KNOWN_GAPS[(tuple(sorted(int(x) for x in reps)), int(rt), float(alpha), float(share))] = float(gap)
        n += 1
    _min_gap.cache_clear()
    return n


def computed_min_gaps() -> list[tuple]:
    """``(replicates, r_test, alpha, ideal_share, gap)`` of every gap solved (not looked up) here."""
    return [(list(k[0]), k[1], k[2], k[3], g) for k, g in _COMPUTED_GAPS.items()]


@lru_cache(maxsize=4096)
def _min_gap(reps: tuple[int, ...], test_replicates: int, alpha: float, ideal_share: float) -> float:
    key = (reps, test_replicates, alpha, ideal_share)
    if key in _KNOWN_GAPS:
        return _KNOWN_GAPS[key]
    r = np.asarray(reps, dtype=float)
    m = int(r.size)
    if m < 2:
        return math.inf
    c, t = _pair_margins(r, test_replicates, alpha, ideal_share)
    if m > LP_MAX_VARIANTS or np.unique(r).size == 1:
        return float(t.max())
    gap = _min_gap_lp(r, m, c, t)
    _COMPUTED_GAPS[key] = gap
    return gap


def _min_gap_lp(r, m, c, t) -> float:
    from scipy.optimize import linprog  # here, not at import: scipy.optimize costs every command ~0.1 s

    rows, rhs = _pair_rows(c, t, s_sign=-1.0)                  # t_ij + c x_j - (1+c) x_i <= s
    best = float(t.max())
    # With x_k = 0 the lowest rate, the pair (k, j) alone gives s >= t_kj + c x_j >= t_kj: a
    # programme whose bound max_j t_kj is not below the best so far cannot improve it.
    starts = np.unique(r, return_index=True)[1]             # variants with equal counts are interchangeable
    bound = {int(k): float(np.max(t[k])) for k in starts}
    for k in sorted(bound, key=bound.get):
        if bound[k] >= best:
            break
        bounds = [(0.0, 0.0) if i == k else (0.0, 1.0) for i in range(m)] + [(None, None)]
        res = linprog(np.r_[np.zeros(m), 1.0], A_ub=rows, b_ub=rhs, bounds=bounds,
                      method="highs")
        if res.status == 0:
            best = min(best, float(res.fun))
    return best


def low_power_sentence(m_min: int, m_max: int, gap: float, alpha: float) -> str:
    """The words shown when the tested items of a variant have low power (median gap over them)."""
    ms = f"m = {m_min}" if m_min == m_max else f"m = {m_min} to {m_max}"
    return (f"low power: with {ms} null variant{'s' if m_max != 1 else ''} and these replicate counts the test "
            f"detects only a change of the rate by more than {gap:.2f} (median over the items), even when the null "
            f"rewordings agree, at alpha = {alpha:g}; not rejecting says little about smaller changes")


def _rejects(rates, r, rt, pt, alpha, ideal_share) -> bool:
    low, high, *_ = _range(rates, r, rt, alpha, ideal_share)
    return bool(pt < low or pt > high)


def _p_value(rates, r, rt, pt, ideal_share) -> float:
    """Smallest level at which the test rejects, by bisection over the level."""
    top = 1.0 - 1e-9
    if not _rejects(rates, r, rt, pt, top, ideal_share):
        return 1.0
    lo, hi = 0.0, top
    for _ in range(64):
        mid = 0.5 * (lo + hi)
        if _rejects(rates, r, rt, pt, mid, ideal_share):
            hi = mid
        else:
            lo = mid
        if hi - lo <= 1e-12 * hi:
            break
    return hi


def _widened_iv(null_counts, null_replicates, test_count, test_replicates, alpha, ideal_share):
    k, r, kt, rt = _composite_statistic_iv(null_counts, null_replicates, test_count, test_replicates)
    alpha = check_alpha(alpha)
    ideal_share = check_unit_interval("ideal_share", ideal_share)
    return k, r, kt, rt, alpha, ideal_share


def widened_range_test(null_counts, null_replicates, test_count, test_replicates, *, alpha=0.05,
                       ideal_share=0.8) -> CompositeTestResult:
    r"""Per-item composite test: is the tested rate outside the null variants' widened range?

    Parameters
    ----------
    null_counts, null_replicates : array_like of int, shape (m,) (replicates may be a scalar)
        Successes :math:`K_j` in :math:`r_j` replicates of each null variant (rewordings the user
        considers semantically irrelevant).
    test_count, test_replicates : int
        :math:`K'` in :math:`r'` replicates of the tested variant.
    alpha : float, keyword-only
    ideal_share : float in (0, 1), keyword-only
        Share s of alpha spent on the sampling of the null variants, :math:`\alpha_I = s\alpha`;
        the rest, :math:`2\gamma = (1 - s)\alpha`, on the binomial noise (two one-sided bounds).

    Returns
    -------
    CompositeTestResult
        ``method="widened"``; reject iff ``test_rate`` lies outside
        [``range_low``, ``range_high``].

    Notes
    -----
    *Hypothesis* (composite-null paper, section 3; Assumptions 1-2 of section 4.1): the
    acceptable rewordings have response probabilities filling :math:`[a, b]`; :math:`H_0: p' \in [a, b]` against
    :math:`H_A: p' \notin [a, b]`, the m null variants' :math:`p_1, \dots, p_m` i.i.d.
    :math:`\mathrm{Unif}[a, b]` (Assumption 2) and independent of :math:`p'` (Assumption 1).
    Nothing is plugged in for a or b.

    *Test.*  With :math:`\hat p = K/r`, :math:`c = \alpha_I^{-1/(m-1)} - 1`,
    :math:`\theta_{ij} = (1 + c)p_i - c p_j - p'` and the Hoeffding half-width
    :math:`t_{ij} = \sqrt{S_{ij}\log(1/\gamma)/2}`,
    :math:`S_{ij} = (1+c)^2/r_i + c^2/r_j + 1/r'` (:math:`S_{ii} = 1/r_i + 1/r'`), reject iff

    .. math::

        \hat p' < \min_{i,j}\{(1 + c)\hat p_i - c\hat p_j - t_{ij}\} \quad\text{or}\quad
        \hat p' > \max_{i,j}\{(1 + c)\hat p_i - c\hat p_j + t_{ij}\}.

    Without noise this is "outside :math:`[p_{(1)} - cR, p_{(m)} + cR]`", the null variants'
    range R widened on each side by the margin :math:`\epsilon = cR`.

    *Level.*  Fix :math:`p' \in [a, b]`; :math:`p_{(1)}, p_{(m)}` the extreme null probabilities,
    attained at indices :math:`j_*, j^*` (fixed given the :math:`p_j`), :math:`R` their distance,
    and :math:`A = A_- \cup A_+`, :math:`A_- = \{p' < p_{(1)} - cR\} = \{\theta_{ij} > 0\ \forall
    i, j\}`, :math:`A_+` its mirror image (the ideal rejection).

    1. :math:`P(A) \le \alpha_I`.  Given that all :math:`p_j` exceed :math:`p'` (probability
       :math:`((b - p')/w)^m`, :math:`w = b - a`) they are i.i.d. uniform on :math:`[p', b]`; the
       m + 1 spacings of m uniforms are :math:`E_i/\sum E` for i.i.d. exponentials, so the first
       spacing G and the range R satisfy :math:`P(G > cR) = P(E_0 > c\,\Gamma_{m-1}) =
       E[e^{-c\Gamma_{m-1}}] = (1 + c)^{-(m-1)}`, whatever the scale w.  With the mirror event,
       :math:`P(A) = [((b-p')/w)^m + ((p'-a)/w)^m]\,(1 + c)^{-(m-1)} \le \alpha_I`, with
       equality at :math:`p' = a` or b, for every :math:`a < b`.
    2. Off :math:`A_-`, :math:`\theta_{j_*j^*} \le 0`, so a rejection below needs
       :math:`\hat\theta_{j_*j^*} - \theta_{j_*j^*} > t_{j_*j^*}`.  :math:`\hat\theta - \theta` is
       a sum of independent centred terms, :math:`r_i` of range :math:`(1+c)/r_i`, :math:`r_j` of
       range :math:`c/r_j` and :math:`r'` of range :math:`1/r'`, so Hoeffding's inequality
       bounds this by :math:`\exp(-2t^2/S) = \gamma` - given the :math:`p_j`, with no
       assumption on how they were drawn.  Likewise above.

    Hence :math:`\sup_{p' \in [a, b]} P(\text{reject}) \le P(A) + 2\gamma \le \alpha_I + 2\gamma
    = \alpha` for every m >= 2, every :math:`r_j, r' \ge 1` and every :math:`0 \le a < b \le 1`
    (one bound per side: no Bonferroni over the m variants or the :math:`m^2` pairs, because the
    argument only uses the pair :math:`(j_*, j^*)`).  Step 2 is conditional on the
    :math:`p_j`: when the tested probability lies within the null variants' own widened range -
    e.g. rewordings clustered at 0.99 with one at 0.9 and a tested rate of 0.9 - the test rejects
    with probability at most :math:`2\gamma` however the rewordings cluster; Assumption 2 only
    prices the event A.  The p-value is the smallest level at which the test rejects (bisection
    over the level; the decision at alpha is computed directly and the p-value is kept on the same
    side of alpha).

    *Statuses* (only ``"ok"`` can reject):

    * ``"one_null_variant"`` - m = 1: :math:`(1 + c)^0 = 1`, no margin controls A; not tested;
    * ``"no_alternative"`` - the null variants' observed rates run from 0 to 1, or the widened
      range covers [0, 1]: no rate the tested variant could show lies outside it;
    * ``"no_power"`` - no outcome at these replicate counts could reject
      (:func:`possible_rejection`), e.g. one replicate per variant.

    Departure from the paper: the paper fixes eps from a plug-in range (Algorithm B/C), whose
    error it ignores (Corollary 2); here the margin is proportional to the observed range, which
    is what makes the level hold without knowing w.  The price is power with few null variants
    (with the default share, alpha_I = 0.04 at alpha = 0.05: c = 24 for m = 2, 4 for m = 3, 0.58 for m = 8).
    """
    k, r, kt, rt, alpha, ideal_share = _widened_iv(null_counts, null_replicates, test_count, test_replicates,
                                                   alpha, ideal_share)
    stat = composite_statistic(k, r, kt, rt).statistic
    return _widened(k / r, r, kt / rt, rt, alpha, ideal_share, stat, "widened", ASSUMPTIONS)


def _widened(rates, r, pt, rt, alpha, ideal_share, stat, method, assumptions) -> CompositeTestResult:
    m = int(rates.size)
    r_min, r_max = int(min(r.min(), rt)), int(max(r.max(), rt))
    base = dict(statistic=stat, m=m, r_min=r_min, r_max=r_max, r_test=rt, test_rate=pt,
                null_min=float(rates.min()), null_max=float(rates.max()), alpha=alpha, eps=None, eps_union=None,
                eps_exact=None, p_union=None, p_exact=None, a_hat=None, b_hat=None, method=method,
                assumptions=assumptions)
    if m == 1:
        return CompositeTestResult(reject=False, p_value=math.nan, status="one_null_variant",
                                   notes=("one null variant cannot span a range: under Assumption 2 the tested "
                                          "rate can lie outside it with probability 1; not tested",), **base)
    low, high, c, ideal, gamma = _range(rates, r, rt, alpha, ideal_share)
    extra = dict(range_low=low, range_high=high, widening=c, ideal_alpha=ideal, coverage_alpha=2 * gamma,
                 min_detectable_gap=min_detectable_gap(r, rt, alpha=alpha, ideal_share=ideal_share))
    if rates.min() == 0.0 and rates.max() == 1.0:
        return CompositeTestResult(reject=False, p_value=math.nan, status="no_alternative",
                                   notes=("the null variants' rates run from 0 to 1: no rate lies outside their "
                                          "range",), **base, **extra)
    if not possible_rejection(r, rt, alpha=alpha, ideal_share=ideal_share):
        return CompositeTestResult(reject=False, p_value=math.nan, status="no_power",
                                   notes=(no_power_sentence(r_min, r_max, alpha, m),), **base, **extra)
    if low <= 0.0 and high >= 1.0:
        return CompositeTestResult(reject=False, p_value=math.nan, status="no_alternative",
                                   notes=(f"the widened null range [{low:.3g}, {high:.3g}] covers every rate the "
                                          "tested variant could show",), **base, **extra)
    reject = bool(pt < low or pt > high)
    p = _p_value(rates, r, rt, pt, ideal_share)
    # the bisection's tolerance must never contradict the decision at alpha itself
    p = min(p, alpha) if reject else max(p, math.nextafter(alpha, 1.0))
    return CompositeTestResult(reject=reject, p_value=float(p), status="ok", notes=(), **base, **extra)


def _bounded_iv(null_sums, null_replicates, test_sum, test_replicates, alpha, ideal_share):
    s = np.asarray(null_sums, dtype=float)
    r = _null_variants(s, "null_sums", "sum", null_replicates)
    if not np.all(np.isfinite(s)) or np.any(s < 0) or np.any(s > r):
        raise ValueError(f"null_sums must lie in [0, null_replicates] (scores in [0, 1]); got {null_sums!r}")
    st = _real(test_sum, "test_sum", lo=0.0)
    rt = _int(test_replicates, "test_replicates", lo=1)
    if st > rt:
        raise ValueError(f"test_sum must not exceed test_replicates (scores in [0, 1]); got {st} > {rt}")
    alpha = check_alpha(alpha)
    ideal_share = check_unit_interval("ideal_share", ideal_share)
    return s, r, st, rt, alpha, ideal_share


def widened_range_test_scores(null_sums, null_replicates, test_sum, test_replicates, *, alpha=0.05,
                              ideal_share=0.8) -> CompositeTestResult:
    r"""The widened-range test for fractional scores in [0, 1] (mean score instead of a rate).

    Parameters
    ----------
    null_sums : array_like of float, shape (m,)
        Sum of the scores of each null variant's :math:`r_j` replicates.
    null_replicates : int or array_like of int
    test_sum : float
    test_replicates : int

    Notes
    -----
    :func:`widened_range_test` with :math:`p_j` the expected score of variant j and
    :math:`\hat p_j` its mean over replicates.  Its level proof carries over unchanged: step 1
    is about the :math:`p_j` only, and Hoeffding's inequality (step 2) holds for any independent
    variables bounded in [0, 1], not only Bernoulli ones.  The question becomes "does the mean
    score move outside the null variants' widened range?"; a change that keeps the mean but alters
    the shape of the score distribution is not what it tests (the energy test in
    :mod:`benchcert.stats.two_sample` compares whole distributions against one reference).
    """
    s, r, st, rt, alpha, ideal_share = _bounded_iv(null_sums, null_replicates, test_sum, test_replicates, alpha,
                                                   ideal_share)
    rates, pt = s / r, st / rt
    stat = float(np.min(np.abs(rates - pt)))
    return _widened(rates, r, pt, rt, alpha, ideal_share, stat, "widened_mean_score", ASSUMPTIONS_SCORES)


def composite_test(null_counts, null_replicates, test_count, test_replicates, *, alpha=0.05, method="calibrated",
                   ideal_share=0.8, bias_correction=True) -> CompositeTestResult:
    r"""Fixed-design composite test of one tested variant against the null variants present.

    ``method="calibrated"`` (default):
    :func:`~benchcert.stats.perturbation.calibrated.calibrated_range_test`, the widened range with
    its noise margin calibrated exactly over the paper's composite null (Assumptions 1-2); with
    unequal replicate counts among the null variants it is not calibrated and the widened test
    runs instead (noted).  ``"widened"``: :func:`widened_range_test`, the assumption-light option
    (Hoeffding margins that hold given the null probabilities, whatever their distribution; valid
    at level alpha for every m >= 2 and every replicate count, far less power).
    ``"plugin_exact"`` / ``"plugin_union"``: the paper's plug-in calibration
    (:func:`~benchcert.stats.perturbation.plugin.plugin_test`), which treats Algorithm B's
    estimate as the true range and does NOT hold its level (assumption-dependent; kept for
    comparison).  ``ideal_share`` applies to the widened-range test, ``bias_correction`` to the
    plug-in tests.
    """
    method = _choice(method, "method", TEST_METHODS)
    if method == "calibrated":
        from .calibrated import calibrated_range_test

        _, r, _, _ = _composite_statistic_iv(null_counts, null_replicates, test_count, test_replicates)
        if np.unique(r).size == 1:
            return calibrated_range_test(null_counts, null_replicates, test_count, test_replicates, alpha=alpha)
        res = widened_range_test(null_counts, null_replicates, test_count, test_replicates, alpha=alpha,
                                 ideal_share=ideal_share)
        return dataclasses.replace(res, notes=res.notes + (
            "unequal replicate counts among the null variants: the calibrated test is not calibrated for them; "
            "the assumption-light widened test decided this item",))
    if method == "widened":
        return widened_range_test(null_counts, null_replicates, test_count, test_replicates, alpha=alpha,
                                  ideal_share=ideal_share)
    return plugin_test(null_counts, null_replicates, test_count, test_replicates, alpha=alpha,
                       method=method.removeprefix("plugin_"), bias_correction=bias_correction)
