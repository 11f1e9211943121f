r"""A smaller benchmark that keeps the answers: drop the inert items, then draw a subject-stratified
random subset of the rest that is as small as the subsample planner's guarantee allows.

The guarantee is the stratified one of the subsample planner (stats/subsample/stratified.py,
:func:`~benchcert.stats.subsample.stratified_halfwidth`, with the proportional allocation and the
draw of ``benchcert subsample --stratified``, tasks/subsample/subsets.py): the stratum-weighted
estimate of a model's score on the non-inert items is within h of its score on all of them with
probability 1 - alpha, for a score of range R = 1; a gap between two models (a paired
difference, range R = 2; the exchangeable-bounds paper's Remark 7.2) within its own h. Taken at
alpha / (K + K (K - 1) / 2), the K audited models' scores and every pairwise gap hold together
(Bonferroni). The inert items enter the full score with the score every audited model had on
them, so the full-score error is (N'/N) h for N' non-inert items of N.

No "lowest-information" items are dropped: a subset chosen by the responses is not a random
subset, and the guarantee would no longer hold for a model that is not among the audited ones.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import polars as pl

from benchcert.stats.bisection import smallest_passing
from benchcert.stats.subsample import proportional_allocation, stratified_halfwidth
from benchcert.tasks.store.benchmark_matrices import BenchmarkMatrices
from benchcert.tasks.subsample.subsets import draw_subset


@dataclass(frozen=True)
class ReducedSet:
    """The reduced item set: its matrix ``rows``, the items evaluated, the calls saved, the bounds it
    carries and what they did on the audited models.

    Attributes
    ----------
    rows : ndarray of int
        Matrix rows (items) of the reduced set.
    n_items, n_inert, n_pool, n_evaluated : int
        Items of the benchmark, inert ones dropped, non-inert ones, items of the reduced set.
    calls_saved_share : float
        Share of the audited responses a run on the reduced set does not make.
    tolerance, alpha, alpha_each : float
        The asked tolerance and level; the Bonferroni share of each model and pair.
    score_bound, gap_bound : float
        Guaranteed (1 - alpha, simultaneous) error of every score and every gap on the full scale.
    max_score_error, max_gap_error : float or None
        The realised largest error among the audited models and pairs.
    sign_changes : int
        Audited pairs whose gap changes sign on the reduced set (exact ties on the full set excluded).
    seed : int
    notes : tuple of str
    """

    rows: np.ndarray
    n_items: int
    n_inert: int
    n_pool: int
    n_evaluated: int
    calls_saved_share: float
    tolerance: float
    alpha: float
    alpha_each: float
    score_bound: float
    gap_bound: float
    max_score_error: float | None
    max_gap_error: float | None
    sign_changes: int
    seed: int
    notes: tuple[str, ...] = ()

    def row(self) -> dict:
        """One row of table ``items_reduced``."""
        return {k: getattr(self, k) for k in (
            "n_items", "n_inert", "n_pool", "n_evaluated", "calls_saved_share", "tolerance", "alpha",
            "alpha_each", "score_bound", "gap_bound", "max_score_error", "max_gap_error", "sign_changes", "seed")}


def _bound(sizes: np.ndarray, n: int, alpha: float, R: float) -> float:
    return float(stratified_halfwidth(sizes, proportional_allocation(sizes, n), alpha=alpha, R=R).half_width)


def smallest_n(sizes: np.ndarray, scale: float, tolerance: float, alpha: float) -> int:
    """The smallest subset size whose gap bound (R = 2, the larger of the two) times ``scale`` is at
    most ``tolerance``: bisection over [strata, N'] (the bound falls with n; the last step checks)."""
    lo, hi = sizes.size, int(sizes.sum())
    if scale * _bound(sizes, lo, alpha, 2.0) <= tolerance:
        return lo
    return smallest_passing(lambda n: scale * _bound(sizes, n, alpha, 2.0) <= tolerance, lo, hi)


def reduced_set(m: BenchmarkMatrices, inert: np.ndarray, *, tolerance: float, alpha: float,
                seed: int) -> ReducedSet | None:
    """The reduced set of ``m`` (see the module's docstring); None when no item is left to draw from."""
    s = m.scores
    pool = np.flatnonzero(~inert)
    N, Np = m.n_items, pool.size
    if Np == 0:
        return None
    answered = ~np.isnan(s)
    present = answered.any(axis=0)
    K = int(present.sum())
    alpha_each = alpha / max(1, K + K * (K - 1) // 2)
    pool_items = m.items[pool].with_columns(pl.Series("matrix_row", pool))
    # the strata in the order draw_subset allocates them (domain, subject), so the bound is the draw's
    sizes = (pool_items.sort("domain", "subject", "item_id").group_by("subject", maintain_order=True).len()
             ["len"].to_numpy())
    scale = Np / N
    n = smallest_n(sizes, scale, tolerance, alpha_each)
    notes = []
    if n >= Np:
        rows = pool
        notes.append(f"items: no random subset of the {Np} non-inert items meets the tolerance {tolerance:g} for every "
                     f"score and gap of {K} models; the reduced set drops the inert items only")
    else:
        drawn, _ = draw_subset(pool_items, n, seed=seed, stratified=True)
        rows = np.sort(drawn["matrix_row"].to_numpy())
    score_bound = scale * _bound(sizes, min(n, Np), alpha_each, 1.0) if n < Np else 0.0
    gap_bound = scale * _bound(sizes, min(n, Np), alpha_each, 2.0) if n < Np else 0.0
    est, full = _estimates(m, pool_items, rows, inert)
    ok = np.isfinite(est) & np.isfinite(full)
    max_score = float(np.abs(est - full)[ok].max()) if ok.any() else None
    e, f = est[ok], full[ok]
    gap_err = np.abs((e[:, None] - e[None, :]) - (f[:, None] - f[None, :]))
    max_gap = float(gap_err.max()) if e.size >= 2 else None
    fg, eg = np.sign(f[:, None] - f[None, :]), np.sign(e[:, None] - e[None, :])
    changes = int(np.triu((fg != 0) & (fg != eg), 1).sum())
    if (~answered[pool][:, present]).any():
        notes.append("items: some models did not answer every item; the reduced set's guarantee is stated for complete "
                     "responses, and the realised errors use each model's answered items")
    total = int(answered.sum())
    kept = int(answered[rows].sum())
    return ReducedSet(rows, N, int(inert.sum()), Np, int(rows.size), 1.0 - kept / total if total else 0.0,
                      tolerance, alpha, alpha_each, score_bound, gap_bound, max_score, max_gap, changes, seed,
                      tuple(notes))


def _estimates(m: BenchmarkMatrices, pool_items: pl.DataFrame, rows: np.ndarray, inert: np.ndarray):
    r"""Each model's full-score estimate from the reduced set and its score on all its answered items.

    Model j's estimate is :math:`(\sum_{i \in \text{inert}} x_{ij} + \sum_k m_{kj} \bar x_{kj}) / n_j`:
    the inert items at their (common) score, each stratum k of the pool by the reduced set's mean
    :math:`\bar x_{kj}` weighted by the stratum's items :math:`m_{kj}` model j answered, over the
    :math:`n_j` items it answered (with complete responses, the stratum-weighted estimator)."""
    s = m.scores
    answered = ~np.isnan(s)
    n_j = answered.sum(axis=0)
    full = np.nansum(s, axis=0) / np.maximum(n_j, 1)
    total = np.nansum(s[inert], axis=0)
    pool_rows = pool_items["matrix_row"].to_numpy()
    pool_subject = pool_items["subject"].to_numpy()
    in_set = np.zeros(m.n_items, dtype=bool)
    in_set[rows] = True
    for subj in np.unique(pool_subject):
        stratum = pool_rows[pool_subject == subj]
        drawn = stratum[in_set[stratum]]
        m_kj = answered[stratum].sum(axis=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a model with none of a stratum's items: NaN
            mean = np.nanmean(s[drawn], axis=0)
        total = total + np.where(m_kj > 0, m_kj * np.nan_to_num(mean, nan=0.0), 0.0)
    est = np.where(n_j > 0, total / np.maximum(n_j, 1), np.nan)
    return est, np.where(n_j > 0, full, np.nan)
