"""The plug-in fixed-design test (the paper's Algorithm B range reused as if it were the true one)."""

from __future__ import annotations

import math

import numpy as np

from ..degenerate import warn_degenerate
from ..validation import check_alpha
from ..two_sample import _fisher_p, fisher_min_p
from ._checks import (_ASSUMPTION_1, _ASSUMPTION_2, _MAX_CANDIDATES, _PLUG_IN, _REPLICATES, METHODS, _choice)
from .bounds import _s, _size_bound
from .exact import (_exact_size_core, _flush, _groups, _log_binom_pmf, _p_grid, _pow, _sup_over_p,
                    _window)
from .results import CompositeTestResult
from .statistic import _composite_statistic_iv, _distance, _exceeds, composite_statistic, estimate_range


def _composite_test_iv(null_counts, null_replicates, test_count, test_replicates, alpha, method, bias_correction):
    k, r, kt, rt = _composite_statistic_iv(null_counts, null_replicates, test_count, test_replicates)
    alpha = check_alpha(alpha)
    method = _choice(method, "method", METHODS)
    if not isinstance(bias_correction, (bool, np.bool_)):
        raise ValueError(f"bias_correction must be True or False; got {bias_correction!r}")
    return k, r, kt, rt, alpha, method, bool(bias_correction)


def _union_threshold(m, r_min, w, alpha):
    union = 2.0 * m / math.sqrt(r_min)
    if union >= alpha:
        return None
    s = float(_s(r_min))
    if w <= 0:
        return s
    return s + w * (1.0 - (alpha - union) ** (1.0 / m))


def _union_p(t, m, r_min, w):
    return float(min(1.0, _size_bound(t, m, r_min, w)))


def _n_candidates(reps, rt):
    return int(sum((int(rj) + 1) * (rt + 1) for rj in np.unique(reps)))


_TIE = 1e-12


def _candidates(reps, rt):
    """Every value the statistic can take, sorted, one float per rational value.

    |i/r_j - k/r'| computed in floats can give the same rational two floats one ulp apart
    (e.g. 0.3 - 0.1 vs 0.2).  Values within a relative 1e-12 are one value (distinct ones are at
    least 1/(r_j r') apart), represented by the largest float of the cluster, so "T <= eps" treats
    every float copy of eps alike.
    """
    out = [np.zeros(1)]
    kt = np.arange(rt + 1)
    for rj in np.unique(reps):
        i = np.arange(rj + 1)
        out.append(_distance(i[None, :], rj, kt[:, None], rt).ravel())
    c = np.unique(np.concatenate(out))
    last = np.r_[c[1:] > c[:-1] * (1 + _TIE) + 1e-15, True]
    return c[last]


def _exact_curve(cands, groups, rt, a, b):
    """Grid-sup exact size at every candidate threshold in one pass (small problems)."""
    lo, hi = _window(rt, a, b)
    kt = np.arange(lo, hi + 1)
    g = np.ones((kt.size, cands.size))
    for grp in groups:
        i = np.arange(grp.lo, grp.hi + 1)
        # |i/r - k'/r'| <= cand  iff  |i r' - k' r| <= floor(cand r r'), in integers: candidates are
        # fractions with denominators <= r_j r' (< 4e6 here), so 1e-8 absorbs the float error of
        # cand r r' without reaching the next attainable value.
        d = np.abs(i[None, :].astype(np.int64) * rt - kt[:, None].astype(np.int64) * grp.r)   # (K', I)
        limit = np.floor(cands * (float(grp.r) * rt) + 1e-8).astype(np.int64)
        if d.size * cands.size <= 2_000_000:
            pc = np.einsum("kic,i->kc", (d[:, :, None] <= limit[None, None, :]).astype(float), grp.pmf)
        else:
            order = np.argsort(d, axis=1, kind="stable")
            d_sorted = np.take_along_axis(d, order, axis=1)
            cum = np.concatenate([np.zeros((kt.size, 1)), np.cumsum(grp.pmf[order], axis=1)], axis=1)
            pc = np.stack([cum[row, np.searchsorted(d_sorted[row], limit, side="right")]
                           for row in range(kt.size)])
        g *= _pow(1.0 - pc, grp.n)
        _flush(g)
    grid = _p_grid(a, b, rt, float(cands[-1]) if cands.size else 0.0)
    pmf = _flush(np.exp(_log_binom_pmf(kt[None, :], rt, grid[:, None])))    # (P, K')
    return pmf @ g, g, grid, lo


def _exact_fixed(k, r, kt, rt, a, b, alpha, t_obs):
    """(eps_exact, p_exact): smallest threshold with sup-size <= alpha, and sup P(T >= t_obs)."""
    groups = _groups(r, a, b)
    if _n_candidates(r, rt) > _MAX_CANDIDATES:
        return _exact_fixed_large(r, rt, a, b, alpha, t_obs, groups)
    cands = _candidates(r, rt)

    def grid_sup(idx):
        return _exact_curve(cands[idx], groups, rt, a, b)[0].max(axis=0)

    def refined(i):
        vals, gmat, grid, glo = _exact_curve(cands[i:i + 1], groups, rt, a, b)
        return _sup_over_p(gmat[:, 0], glo, rt, a, b, float(cands[i]), grid_values=vals[:, 0], grid=grid)[0]

    # The size falls as eps grows.  Narrow a bracket [lo, hi] around the first candidate whose
    # grid-sup is <= alpha, 64 candidates per pass, then confirm with the refined sup (the grid can
    # only understate it), stepping up where needed.
    lo, hi = 0, cands.size - 1
    if grid_sup(np.array([hi]))[0] > alpha:
        idx = cands.size
    else:
        while hi - lo > 64:
            probe = np.unique(np.linspace(lo, hi, 65).round().astype(np.int64))
            ok = probe[grid_sup(probe) <= alpha]
            new_hi = int(ok[0])
            below = probe[probe < new_hi]
            lo, hi = (int(below[-1]) + 1 if below.size else lo), new_hi
        block = np.arange(lo, hi + 1)
        idx = int(block[np.flatnonzero(grid_sup(block) <= alpha)[0]])
        while idx < cands.size and refined(idx) > alpha:
            idx += 1
    eps_exact = float(cands[idx]) if idx < cands.size else None
    # P(T >= t_obs) = size at the value just below t_obs (float copies of t_obs count as t_obs)
    pos = int(np.searchsorted(cands, t_obs * (1 - _TIE) - 1e-15, side="left"))
    p_exact = 1.0 if pos == 0 else min(1.0, refined(pos - 1))
    return eps_exact, p_exact


def _exact_fixed_large(r, rt, a, b, alpha, t_obs, groups):
    """Large replicate counts: bisect over real thresholds instead of enumerating attainable ones.

    The size is a right-continuous step function of eps that only jumps at attainable values
    (rationals i/r_j - k/r', at least 1/(r_j r') apart), so the bisection's upper end sits within
    1e-13 above the first admissible jump; it is then raised over the jump value's float copies
    (as in _candidates) and the decision T > eps uses that very eps.  For r_j r' above ~1e12 two
    distinct rationals can fall within that tolerance; the probability carried by one such value is
    then far below any level of interest.
    """
    def size(e):
        return _exact_size_core(e, r, rt, a, b, groups)[0]

    lo, hi = 0.0, 1.0
    if size(1e-15) <= alpha:
        hi = 1e-15
    else:
        while hi - lo > 1e-13:
            mid = 0.5 * (lo + hi)
            if size(mid) <= alpha:
                hi = mid
            else:
                lo = mid
    # snap up over float copies of the jump value, as _candidates does
    hi = hi * (1 + _TIE) + 1e-15
    p_exact = 1.0 if t_obs <= 0 else min(1.0, size(t_obs * (1 - _TIE) - 1e-15))
    return hi, p_exact


def _farthest_counts(rates, rt):
    """Tested counts where min_j |p_j - k/r'| can be largest: the ends and both sides of every gap's middle
    (the distance to the nearest null rate is piecewise linear in k, peaking at 0, r' or a midpoint)."""
    q = np.unique(rates)
    mids = (q[:-1] + q[1:]) / 2.0 * rt
    return sorted({0, rt, *np.floor(mids).astype(int).tolist(), *np.ceil(mids).astype(int).tolist()})


def plugin_test(null_counts, null_replicates, test_count, test_replicates, *, alpha=0.05,
                method="exact", bias_correction=True) -> CompositeTestResult:
    r"""Plug-in fixed-design composite test (assumption-dependent; see the warning below).

    Given m null variants with :math:`K_j` successes in :math:`r_j` replicates and a test
    variant with :math:`K'` in :math:`r'`: estimate the null range from the null rates
    (Algorithm B, bias-corrected), find the smallest threshold that keeps the size at alpha,
    and decide.

    Parameters
    ----------
    null_counts, null_replicates : array_like of int, shape (m,) (replicates may be a scalar)
    test_count, test_replicates : int
    alpha : float, keyword-only
    method : {"exact", "union"}, keyword-only
        ``"exact"`` (default): exact size under Assumption 2 with the plug-in range
        (:func:`exact_size`, generalised to each variant's own replicate count);
        ``"union"``: Theorem 2's bound.
    bias_correction : bool, keyword-only

    Returns
    -------
    CompositeTestResult

    Notes
    -----
    Union bound: with :math:`r_{min}` the smallest replicate count present, the smallest eps with
    :math:`(1 - (\epsilon - s)/w)^m + 2m/\sqrt{r_{min}} \le \alpha` is

    .. math:: \epsilon_U = s + w\,(1 - (\alpha - 2m/\sqrt{r_{min}})^{1/m}),

    defined only when :math:`2m/\sqrt{r_{min}} < \alpha`; otherwise no threshold keeps the
    bound at alpha (status ``"no_valid_eps"`` for ``method="union"``: never reject).  Using
    :math:`r_{min}` for unequal counts is valid: Hoeffding's bound for
    :math:`\hat p_j - \hat p'` with separate sums has variance proxy
    :math:`1/r_j + 1/r' \le 2/r_{min}`, tighter than the paper's Lemma 1 at :math:`r_{min}`.
    Its p-value is Theorem 2's bound at :math:`\epsilon = T`.

    Exact: the statistic takes finitely many values; the exact size (sup over
    :math:`p' \in [\hat a, \hat b]`) is computed at each and the smallest value with size
    :math:`\le \alpha` is :math:`\epsilon_E`; reject iff :math:`T > \epsilon_E`.  The p-value
    :math:`\sup_{p'} P(T \ge t_{obs})` is the size at the attainable value just below
    :math:`t_{obs}`, so ``reject == (p_value <= alpha)``.  Unequal replicate counts enter
    exactly (each null's mixture uses its own :math:`r_j`).

    Degenerate null sets (explicit, warned, reported in ``status``):

    * all null rates identical - the range estimate collapses to a point and the composite null
      to a simple one; decided by Fisher's exact test of the test variant against the pooled
      null variants (``status="identical_null_rates"``, ``method="fisher_fallback"``);
    * one null variant - no range can be estimated; Fisher's exact test against it
      (``status="one_null_variant"``).
    * a threshold that no tested count at r' can exceed given the null variants observed, or either of these where no table with these replicate counts gives Fisher a p-value <= alpha
      (:func:`~benchcert.stats.two_sample.fisher_min_p`): ``status="no_power"``, no p-value.

    ASSUMPTION-DEPENDENT, NOT THE DEFAULT.  The plug-in range comes from the same null variants
    the statistic uses and is then treated as the true range (the paper's Corollary 2 makes
    validity only approximate).  It does not hold its level: with p_j ~ Unif[0.4, 0.6] and the
    tested rate at the range's edge the rejection rate at alpha = 0.05 is about 18% for m = 2,
    r = 200, and it rejects where the plug-in range is [0, 1] (no alternative left).  Kept for
    comparison (``method="plugin_exact"`` / ``"plugin_union"`` of :func:`composite_test`); the
    valid per-item test is :func:`~benchcert.stats.perturbation.item_test.widened_range_test`.
    """
    k, r, kt, rt, alpha, method, bias_correction = _composite_test_iv(
        null_counts, null_replicates, test_count, test_replicates, alpha, method, bias_correction)
    stat = composite_statistic(k, r, kt, rt)
    rates = k / r
    m = int(k.size)
    r_min, r_max = int(min(r.min(), rt)), int(max(r.max(), rt))
    notes = []
    if r_min != r_max:
        notes.append(f"unequal replicate counts ({r_min} to {r_max}): the union bound uses r_min = {r_min}; "
                     "the exact calibration uses each variant's own count")
    base = dict(statistic=stat.statistic, m=m, r_min=r_min, r_max=r_max, r_test=rt, test_rate=kt / rt,
                null_min=float(rates.min()), null_max=float(rates.max()), alpha=alpha)
    assumptions = (_ASSUMPTION_1, _ASSUMPTION_2, _REPLICATES, _PLUG_IN)
    if m == 1 or np.all(rates == rates[0]):
        status = "one_null_variant" if m == 1 else "identical_null_rates"
        why = ("one null variant cannot span a range" if m == 1 else
               f"all {m} null variants have rate {rates[0]:g}, so the range estimate is a point")
        warn_degenerate(f"plugin_test: {why}; the composite null collapses to a simple null, decided by "
                        "Fisher's exact test against the pooled null variants")
        min_p = fisher_min_p(rt, int(r.sum()))
        if min_p > alpha:   # no outcome could reject: not "not significant"
            return CompositeTestResult(eps=None, reject=False, p_value=math.nan, eps_union=None, eps_exact=None,
                                       p_union=None, p_exact=None, a_hat=None, b_hat=None, status="no_power",
                                       method="fisher_fallback",
                                       assumptions=("pooled null variants share one p (simple null)", _REPLICATES),
                                       notes=tuple(notes + [f"{why}; Fisher's exact test against the pooled null "
                                                            f"variants cannot reject at alpha = {alpha:g} (smallest "
                                                            f"attainable p-value {min_p:.3g})"]), **base)
        p = _fisher_p(kt, rt, int(k.sum()), int(r.sum()))
        return CompositeTestResult(eps=None, reject=bool(p <= alpha), p_value=p, eps_union=None, eps_exact=None,
                                   p_union=None, p_exact=None, a_hat=None, b_hat=None, status=status,
                                   method="fisher_fallback",
                                   assumptions=("pooled null variants share one p (simple null)", _REPLICATES),
                                   notes=tuple(notes + [why + "; Fisher exact test vs pooled null variants"]),
                                   **base)
    rng_est = estimate_range(rates, bias_correction=bias_correction)
    a, b = rng_est.a_hat, rng_est.b_hat
    w = b - a
    eps_u = _union_threshold(m, r_min, w, alpha)
    p_u = _union_p(stat.statistic, m, r_min, w)
    eps_e = p_e = None
    if method == "exact":
        eps_e, p_e = _exact_fixed(k, r, kt, rt, a, b, alpha, stat.statistic)
        eps, p = eps_e, p_e
    else:
        eps, p = eps_u, p_u
        if eps_u is None:
            notes.append(f"2m/sqrt(r_min) = {2 * m / math.sqrt(r_min):.3g} >= alpha: Theorem 2 admits no threshold "
                         "at these replicate counts (use the exact calibration)")
    status = "ok" if eps is not None else "no_valid_eps"
    if eps is not None and eps >= 1.0 - _TIE:
        # T is a distance between rates in [0, 1]: no outcome exceeds a threshold of 1
        status = "no_power"
        notes.append(f"threshold {eps:.3g}: no outcome at these replicate counts can exceed it at alpha = {alpha:g}")
        p = math.nan
    if status == "ok" and not any(_exceeds(k, r, x, rt, eps) for x in _farthest_counts(rates, rt)):
        # no tested count is farther than the threshold from every null rate: the item cannot reject
        status = "no_power"
        notes.append(f"threshold {eps:.3g}: no count of the tested variant at r' = {rt} can exceed it given these "
                     f"null variants at alpha = {alpha:g}")
        p = math.nan
    if status == "no_valid_eps":
        p = math.nan    # cannot reject: untested, out of every share and of Benjamini-Hochberg
    reject = bool(status == "ok" and _exceeds(k, r, kt, rt, eps))
    return CompositeTestResult(eps=eps, reject=reject, p_value=float(p), eps_union=eps_u, eps_exact=eps_e,
                               p_union=p_u, p_exact=p_e, a_hat=a, b_hat=b, status=status, method=f"plugin_{method}",
                               assumptions=assumptions, notes=tuple(notes), **base)
