r"""Every comparator interval for many models at once (the exchangeable-bounds paper's Table 3 comparators).

One vectorised pass over a score matrix (or its per-subject counts) gives, for every model
column, what :func:`~benchcert.stats.intervals.iid_interval`,
:func:`~benchcert.stats.intervals.wilson_interval`,
:func:`~benchcert.stats.intervals.clustered_interval` and
:func:`~benchcert.stats.intervals.lm_eval_group_interval` give for that model alone; the single
intervals, their assumptions and the shared helpers are in :mod:`benchcert.stats.intervals`.

Pure numpy/scipy; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._common import _short, cr2_mean
from .intervals import (_CLUSTERED_ASSUMPTIONS, _CLUSTERED_WEIGHTING, _CLUSTERED_ZERO, _IID_ASSUMPTIONS, _IID_BASE,
                        _IID_BINARY, _IID_FRACTIONAL_NOTE, _IID_SAMPLE, _LM_EVAL_ASSUMPTIONS, _LM_EVAL_ZERO,
                        _MACRO_N_NOTE, _WILSON_ASSUMPTIONS, _WILSON_BINARY_NOTE, IntervalResult, _check_weighting,
                        _clt_result, _iid_core, _t_crit, _wilson_core, _z)
from .segments import Grouping
from .validation import all_missing_columns, check_alpha, check_codes, check_scores

__all__ = [
    "comparator_intervals",
    "comparator_intervals_both",
    "comparator_intervals_counts",
    "comparator_intervals_from_counts",
]


def _comparator_intervals_iv(scores, subjects, weighting, alpha):
    alpha = check_alpha(alpha)
    weighting = _check_weighting(weighting, "weighting")
    s = check_scores(scores, "scores", ndim=2, allow_nan=True)
    codes = check_codes(subjects, "subjects", length=s.shape[0])
    empty = all_missing_columns(s)
    if empty.size:
        raise ValueError(
            f"scores has no observed (non-NaN) item for model column(s) {_short(empty)}"
        )
    return s, codes, weighting, alpha


def comparator_intervals(
    scores, subjects, *, weighting="pooled", alpha=0.05
) -> dict[str, IntervalResult]:
    r"""All A2 comparator intervals for every model of a score matrix.

    Parameters
    ----------
    scores : array_like, shape (n_items, n_models)
        Item scores in [0, 1]; NaN marks an item the model did not answer
        (dropped for that model only).
    subjects : array_like of int, shape (n_items,)
        Subject code of each item (the clusters).
    weighting : {"pooled", "macro"}, keyword-only
        Which score the intervals are about.
    alpha : float, keyword-only
        Miscoverage level in (0, 1).

    Returns
    -------
    dict of str to IntervalResult
        Keys ``"iid_clt"``, ``"wilson"``, ``"clustered_subject"`` and, for
        ``weighting="pooled"`` only, ``"lm_eval_group"`` (lm-eval has no macro
        analogue). Each holds (n_models,) arrays; ``n`` is the observed items
        per model and ``n_clusters`` the subjects answered.

    Notes
    -----
    Column m equals calling :func:`iid_interval`, :func:`wilson_interval`,
    :func:`clustered_interval` and :func:`lm_eval_group_interval` on that
    model's observed items (the tests check this), but is computed from
    (subject, model) sums in one vectorised pass. With :math:`n_{km}`,
    :math:`t_{km}` the count and sum of model m's observed scores in subject k
    and :math:`N_m = \sum_k n_{km}`, the clustered residual sums are
    :math:`(t_{km} - n_{km}\hat\theta_m)/N_m` (pooled) or
    :math:`(t_{km}/n_{km} - \hat\theta_m)/C_m` (macro).

    iid_clt and wilson use the chosen estimate with n = observed items. For
    the macro score this counts items as if they were equally weighted, as the
    paper's Table 3 does; note that table's half-widths themselves come from
    the pooled accuracy (see :func:`iid_interval`).
    """
    s, codes, weighting, alpha = _comparator_intervals_iv(
        scores, subjects, weighting, alpha
    )
    return _comparators(s, codes, (weighting,), alpha)[weighting]


def comparator_intervals_both(scores, subjects, *, alpha=0.05) -> dict[str, dict[str, IntervalResult]]:
    """:func:`comparator_intervals` for ``"macro"`` and ``"pooled"`` (keys of the result) from one
    pass over the matrix: the same numbers as two calls, at little more than the cost of one."""
    s, codes, _, alpha = _comparator_intervals_iv(scores, subjects, "pooled", alpha)
    return _comparators(s, codes, ("macro", "pooled"), alpha)


def comparator_intervals_counts(n_km, t_km, *, alpha=0.05) -> dict[str, dict[str, IntervalResult]]:
    """iid_clt, wilson and clustered_subject intervals of the macro and pooled scores of 0/1 scores
    from their per-subject counts: what :func:`comparator_intervals_both` gives for those three
    methods, to the last bit, without the score matrix (``lm_eval_group`` needs the items: not
    computed).

    Parameters
    ----------
    n_km : array_like of int, shape (K, M)
        Answered items per subject and model (every subject of the benchmark: 0 where a model
        answered none of it).
    t_km : array_like, shape (K, M)
        Correct answers per subject and model (0 <= t_km <= n_km).
    alpha : float, keyword-only
    """
    alpha = check_alpha(alpha)
    n, t = _check_counts(n_km, t_km)
    return _comparators_from_sums(_subject_sums(n.astype(np.float64), t, np.ones(n.shape[1], dtype=bool), None),
                                  ("macro", "pooled"), alpha)


def comparator_intervals_from_counts(n_km, t_km, *, weighting="pooled", alpha=0.05) -> dict[str, IntervalResult]:
    r""":func:`comparator_intervals` of 0/1 scores from their per-subject counts, without the matrix:
    iid_clt, wilson, clustered_subject and (pooled) lm_eval_group.

    Parameters
    ----------
    n_km : array_like of int, shape (K, M)
        Answered items per subject and model (0 where a model answered none of a subject).
    t_km : array_like, shape (K, M)
        Correct answers per subject and model (whole numbers, 0 <= t_km <= n_km).
    weighting : {"pooled", "macro"}, keyword-only
    alpha : float, keyword-only

    Returns
    -------
    dict of str to IntervalResult
        As :func:`comparator_intervals` on the 0/1 matrix the counts are of.

    Notes
    -----
    iid_clt, wilson and clustered_subject are those of :func:`comparator_intervals` to the last
    bit (they are functions of the counts). lm_eval_group's within-subject sum of squares is
    computed in closed form: a subject with :math:`t` ones among :math:`n` answered items has
    :math:`\sum_i (s_i - t/n)^2 = t(n - t)/n` exactly, where the matrix path adds the n squared
    deviations one by one; the two agree to rounding (a relative 1e-12 in the tests).
    """
    alpha = check_alpha(alpha)
    weighting = _check_weighting(weighting, "weighting")
    n, t = _check_counts(n_km, t_km)
    sums = _subject_sums(n.astype(np.float64), t, np.ones(n.shape[1], dtype=bool), None, within=weighting == "pooled")
    return _comparators_one(weighting, sums, alpha, None)


def _check_counts(n_km, t_km) -> tuple[np.ndarray, np.ndarray]:
    n = np.asarray(n_km)
    t = np.asarray(t_km, dtype=np.float64)
    if n.ndim != 2 or t.shape != n.shape or not np.issubdtype(n.dtype, np.integer):
        raise ValueError(f"n_km (integer) and t_km must both have shape (K, M); got {n.dtype} {n.shape} and {t.shape}")
    if np.any(n < 0) or np.any(~np.isfinite(t) | (t < 0) | (t > n) | (t != np.round(t))):
        raise ValueError("n_km must be >= 0 and t_km whole numbers in [0, n_km]")
    empty = np.flatnonzero(n.sum(axis=0) == 0)
    if empty.size:
        raise ValueError(f"n_km has no answered item for model column(s) {_short(empty)}")
    return n, t


def _comparators(s, codes, weightings, alpha) -> dict[str, dict[str, IntervalResult]]:
    # One row gather serves every group sum below; it dominates the cost at MMLU scale.
    grouping = Grouping(codes)
    s_sorted = grouping.gather(s)
    obs_sorted = ~np.isnan(s_sorted)
    # fmax ignores NaN, so with scores validated >= 0 it zero-fills missing entries
    # in one pass, in place on our private sorted copy (no extra full-size array).
    filled = np.fmax(s_sorted, 0.0, out=s_sorted)

    n_km = grouping.reduce_sorted(obs_sorted).astype(np.float64)
    t_km = grouping.reduce_sorted(filled)
    # Binary models: p(1-p) is the item variance. Fractional scores: the sample variance, as
    # iid_interval(item_var=) - one formula for both.
    binary = np.all(~obs_sorted | (filled == 0.0) | (filled == 1.0), axis=0)
    sq = None if binary.all() else grouping.reduce_sorted(filled * filled).sum(axis=0)
    return _comparators_from_sums(_subject_sums(n_km, t_km, binary, sq), weightings, alpha,
                                  _ItemRows(grouping, filled, obs_sorted))


@dataclass(frozen=True)
class _SubjectSums:
    """A score matrix's (subject, model) sums and what every comparator derives from them.

    Attributes
    ----------
    n_km, t_km : ndarray, shape (K, M)
        Answered items and their score sum per subject and model.
    binary : ndarray of bool, shape (M,)
        Models whose answered scores are all 0 or 1.
    sq : ndarray, shape (M,), or None
        Sum of squared scores per model (None when every model is binary).
    answered, mean_km : ndarray, shape (K, M)
        n_km > 0, and the subject means (0 where unanswered).
    n_items, c, pooled, macro : ndarray, shape (M,)
        Answered items, answered subjects, pooled and macro score per model.
    ss_within : ndarray, shape (M,), or None
        The within-subject sum of squares lm_eval_group needs, when known without the items
        (0/1 scores: from the counts).
    """

    n_km: np.ndarray
    t_km: np.ndarray
    binary: np.ndarray
    sq: np.ndarray | None
    answered: np.ndarray
    n_items: np.ndarray
    c: np.ndarray
    mean_km: np.ndarray
    pooled: np.ndarray
    macro: np.ndarray
    ss_within: np.ndarray | None = None


@dataclass(frozen=True)
class _ItemRows:
    """The item rows in subject order (lm_eval_group's within-subject deviations need them)."""

    grouping: Grouping
    filled: np.ndarray  # scores, missing ones 0
    obs_sorted: np.ndarray  # answered


def _subject_sums(n_km, t_km, binary, sq, within: bool = False) -> _SubjectSums:
    """The sums; ``within``: with lm_eval_group's within-subject sum of squares of 0/1 scores,
    :math:`\\sum_k t_k (n_k - t_k) / n_k`."""
    answered = n_km > 0
    n_items = n_km.sum(axis=0)
    c = answered.sum(axis=0)
    mean_km = np.where(answered, t_km / np.where(answered, n_km, 1.0), 0.0)
    ss_within = None
    if within:
        ss_within = np.where(answered, t_km * (n_km - t_km) / np.where(answered, n_km, 1.0), 0.0).sum(axis=0)
    return _SubjectSums(n_km=n_km, t_km=t_km, binary=binary, sq=sq, answered=answered, n_items=n_items, c=c,
                        mean_km=mean_km, pooled=t_km.sum(axis=0) / n_items, macro=mean_km.sum(axis=0) / c,
                        ss_within=ss_within)


def _comparators_from_sums(sums: _SubjectSums, weightings, alpha, rows: _ItemRows | None = None):
    return {weighting: _comparators_one(weighting, sums, alpha, rows) for weighting in weightings}


def _comparators_one(weighting, sums: _SubjectSums, alpha, rows: _ItemRows | None):
    """The comparator intervals of one weighting; lm_eval_group (pooled only) needs ``rows``."""
    n_km, t_km, binary, sq, answered = sums.n_km, sums.t_km, sums.binary, sums.sq, sums.answered
    n_items, c, mean_km, pooled, macro = sums.n_items, sums.c, sums.mean_km, sums.pooled, sums.macro
    z = _z(alpha)
    label = "model"
    n_out = n_items.astype(np.int64)
    c_out = c.astype(np.int64)
    theta = pooled if weighting == "pooled" else macro
    extra = (_MACRO_N_NOTE,) if weighting == "macro" else ()

    out: dict[str, IntervalResult] = {}

    if binary.all():
        est, lower, upper, hw, se = _iid_core(theta, n_items, alpha, label)
        iid_notes = _IID_ASSUMPTIONS
    else:
        tot = t_km.sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            sample = np.where(n_items >= 2, np.maximum(sq - tot * tot / n_items, 0.0) / (n_items - 1.0), np.nan)
        var = np.where(binary, theta * (1.0 - theta), sample)
        est, lower, upper, hw, se = _iid_core(theta, n_items, alpha, label, var=var)
        iid_notes = _IID_BASE + (_IID_BINARY, _IID_SAMPLE, _IID_FRACTIONAL_NOTE)
    out["iid_clt"] = IntervalResult(
        estimate=est, lower=lower, upper=upper, half_width=hw, alpha=alpha, n=n_out,
        method="iid_clt", assumptions=iid_notes + extra, se=se, weighting=weighting,
    )

    est, lower, upper, hw = _wilson_core(theta, n_items, alpha)
    if not binary.all():
        lower, upper, hw = (np.where(binary, x, np.nan) for x in (lower, upper, hw))
    out["wilson"] = IntervalResult(
        estimate=est, lower=lower, upper=upper, half_width=hw, alpha=alpha, n=n_out,
        method="wilson", assumptions=_WILSON_ASSUMPTIONS + extra + ((_WILSON_BINARY_NOTE,) if not binary.all() else ()),
        weighting=weighting,
    )

    if weighting == "pooled":
        resid = (t_km - n_km * theta) / n_items
    else:
        resid = np.where(answered, (mean_km - theta) / c, 0.0)
    ok = c >= 2
    with np.errstate(invalid="ignore", divide="ignore"):
        if weighting == "pooled":
            var_cl, df_cl = cr2_mean(n_km, resid * n_items)
            se_cl = np.sqrt(var_cl)
        else:
            se_cl = np.sqrt(c / (c - 1.0) * np.sum(resid**2, axis=0))
            df_cl = c - 1.0
    crit_cl = np.where(ok, _t_crit(alpha, np.where(ok, df_cl, 1.0)), z)
    out["clustered_subject"] = _clt_result(
        theta, se_cl, ok, crit_cl, alpha=alpha, n=n_out, n_clusters=c_out, method="clustered_subject",
        assumptions=_CLUSTERED_ASSUMPTIONS + (_CLUSTERED_WEIGHTING[weighting],), weighting=weighting,
        reason="fewer than 2 answered subjects, so the between-subject variance cannot be estimated",
        zero_reason=_CLUSTERED_ZERO, label=label,
    )

    if weighting == "pooled" and (rows is not None or sums.ss_within is not None):
        if rows is not None:
            # Deviations from each item's own subject mean, zeroed where missing; two-pass
            # (rather than sum of squares minus squared sum) so nothing cancels.
            dev = rows.filled - rows.grouping.expand_sorted(mean_km)
            dev[~rows.obs_sorted] = 0.0
            dev *= dev
            ss_within = rows.grouping.reduce_sorted(dev).sum(axis=0)
        else:
            ss_within = sums.ss_within
        dof = n_items - c
        ok = dof > 0
        with np.errstate(invalid="ignore", divide="ignore"):
            se_lm = np.sqrt(ss_within / dof / n_items)
        out["lm_eval_group"] = _clt_result(
            pooled, se_lm, ok, z, alpha=alpha, n=n_out, n_clusters=c_out, method="lm_eval_group",
            assumptions=_LM_EVAL_ASSUMPTIONS, weighting="pooled",
            reason="every answered subject has a single item (N = K), so the pooled within-subject variance is 0/0",
            zero_reason=_LM_EVAL_ZERO, label=label,
        )
    return out
