r"""The benchmark's resolution: the smallest gap between two models of a given score that its paired
test detects with the stated power, per score band, and how saturated its top is.

:func:`neighbour_resolution` - for each pair of neighbours in the ranking, the minimum detectable
effect of the paired test benchcert's comparisons use (:func:`benchcert.stats.comparisons.
pairwise_comparisons`, its ``mde``), and their summary per band of score;
:func:`saturation` - the top models' distance to the ceiling and the items that still separate them.

Pure numpy/scipy; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .comparisons import pairwise_comparisons
from .degenerate import warn_degenerate
from .validation import check_power, check_scores, check_unit_interval

__all__ = ["NeighbourResolution", "Saturation", "band_resolution", "neighbour_resolution", "saturation"]


@dataclass(frozen=True)
class NeighbourResolution:
    """Neighbours in the ranking (arrays of shape (P,)): columns ``pair_a`` (lower score) and
    ``pair_b``, their pooled means, the observed gap, the paired test's p-value and verdict, and
    ``mde`` the smallest true gap it detects with ``power`` at these items (the resolution at
    that pair's score)."""

    pair_a: np.ndarray
    pair_b: np.ndarray
    mean_a: np.ndarray
    mean_b: np.ndarray
    gap: np.ndarray
    se: np.ndarray
    p_value: np.ndarray
    verdict: np.ndarray
    mde: np.ndarray
    alpha: float
    power: float
    method: str
    assumptions: tuple[str, ...]


@dataclass(frozen=True)
class Saturation:
    """The top ``n_top`` models: the best mean score, its headroom to 1, the items on which they
    do not all agree (those that still separate them) and the items all of them miss."""

    n_top: int
    top_score: float
    headroom: float
    separating_items: int
    all_missed_items: int
    n_items: int


def _neighbour_iv(scores, alpha, power):
    s = check_scores(scores, "scores", ndim=2, allow_nan=True)
    if s.shape[1] < 2:
        raise ValueError(f"scores must hold at least 2 model columns; got {s.shape[1]}")
    return s, check_unit_interval("alpha", alpha), check_power(power)


def neighbour_resolution(scores, subjects=None, *, alpha=0.05, power=0.8, primary=None) -> NeighbourResolution:
    r"""The paired test's resolution between every pair of neighbours in the ranking.

    Parameters
    ----------
    scores : array_like, shape (n_items, K)
        Scores in [0, 1]; NaN = not answered.
    subjects : array_like of int, optional
        Subject codes, as the comparisons take them (the clustered test).
    alpha, power : float, keyword-only
        The test's two-sided level and the power the resolution is stated at.
    primary : str, optional, keyword-only
        The test (default: the comparisons' default for these subjects).

    Returns
    -------
    NeighbourResolution

    Notes
    -----
    The models are sorted by pooled mean; pair t is (model t, model t + 1) (left out when the two
    share no answered item). For each,
    :func:`~benchcert.stats.comparisons.pairwise_comparisons` gives the paired test's SE and the
    minimum detectable effect of the test that decides: :math:`(q_{1-\alpha/2} + q_{\text{power}})\,SE`
    (t quantiles on the clustered test's df; :func:`~benchcert.stats.comparisons.minimum_detectable_effect`)
    for the new-subjects question (and fractional scores of more than 20 pairs), the score tests' power at
    their constrained fits for the items question
    (:func:`~benchcert.stats.comparisons.score_mde.score_test_mde`). It is the pair's own: it uses how often the two
    models disagree, which is what makes a paired comparison sharper than one standard error
    of measurement per model (the reliability view), and sharper than an unpaired test.
    A true gap equal to ``mde`` is called different with probability about ``power``
    (tests/stats/test_resolution.py).
    """
    s, alpha, power = _neighbour_iv(scores, alpha, power)
    means = np.nanmean(s, axis=0)
    order = np.argsort(means, kind="stable")
    pairs = np.column_stack([order[:-1], order[1:]])
    # neighbours that share no answered item have no paired test: left out
    answered = ~np.isnan(s)
    shared = (answered[:, pairs[:, 0]] & answered[:, pairs[:, 1]]).sum(axis=0)
    pairs = pairs[shared > 0]
    if pairs.shape[0] == 0:
        warn_degenerate("neighbour_resolution: no two neighbouring models share an answered item; no resolution")
        e = np.zeros(0)
        return NeighbourResolution(e.astype(int), e.astype(int), e, e, e, e, e, e.astype(object), e, alpha, power,
                                   "none", ("no neighbouring pair shares an item",))
    r = pairwise_comparisons(s, subjects, pairs=pairs, alpha=alpha, power=power, primary=primary)
    return NeighbourResolution(pairs[:, 0], pairs[:, 1], np.atleast_1d(r.mean_a), np.atleast_1d(r.mean_b),
                               np.atleast_1d(r.estimate), np.atleast_1d(r.se), np.atleast_1d(r.p_value),
                               np.atleast_1d(r.verdict), np.atleast_1d(r.mde), alpha, power, r.method,
                               tuple(r.assumptions) + ("the resolution of a pair is the MDE of its deciding test at "
                                                       "these items (for the items question the score "
                                                       "test's, else (q_(1-alpha/2) + q_power) x the pair's SE)",))


def band_resolution(res: NeighbourResolution, *, width=0.1) -> list[dict]:
    """Per band of score (the pair's mean of the two models' scores, bands of ``width``): the number
    of neighbour pairs and the median, smallest and largest resolution among them."""
    width = check_unit_interval("width", width)
    mid = (res.mean_a + res.mean_b) / 2.0
    band = np.minimum(np.floor(mid / width), np.floor((1.0 - 1e-12) / width)).astype(int)
    rows = []
    for b in np.unique(band):
        sel = (band == b) & np.isfinite(res.mde)
        if not sel.any():
            continue
        m = res.mde[sel]
        rows.append({"band_low": float(b * width), "band_high": float(min(1.0, (b + 1) * width)),
                     "n_pairs": int(sel.sum()), "resolution_median": float(np.median(m)),
                     "resolution_min": float(m.min()), "resolution_max": float(m.max())})
    return rows


def saturation(scores, *, n_top=3) -> Saturation:
    """The top ``n_top`` models by pooled mean (fewer if there are fewer models): their best score,
    its headroom, the items on which they do not all score alike (answered by all of them), and the
    items every one of them scored 0 on."""
    s = check_scores(scores, "scores", ndim=2, allow_nan=True)
    means = np.nanmean(s, axis=0)
    k = int(min(max(1, n_top), s.shape[1]))
    top = np.argsort(-means, kind="stable")[:k]
    t = s[:, top]
    ok = ~np.isnan(t).any(axis=1)
    t = t[ok]
    separating = int((t.max(axis=1) != t.min(axis=1)).sum()) if t.size else 0
    missed = int((t.max(axis=1) == 0).sum()) if t.size else 0
    best = float(means[top[0]])
    return Saturation(k, best, 1.0 - best, separating, missed, int(ok.sum()))
