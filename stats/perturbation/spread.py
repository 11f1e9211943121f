r"""Per-item spread of the null rewordings, and the calibrated test's power averaged over it.

A replicate plan's power depends on each item's own null range [a_i, b_i] (the calibrated test
widens the null variants' observed range by c R plus a noise margin, so wide per-item ranges cost
power), not on the spread of the benchmark-level rates, which averages the items' spreads away.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..validation import check_alpha

__all__ = ["ItemRanges", "item_ranges", "average_power"]


@dataclass(frozen=True)
class ItemRanges:
    """Moment estimates of each item's null range (Assumption 2: rates i.i.d. Unif[a_i, b_i]).

    Attributes
    ----------
    a, b : numpy.ndarray
        Estimated ends, clipped to [0, 1].
    width : numpy.ndarray
        b - a before clipping.
    n_items, n_estimable : int
        Items given, and items with at least two null variants of at least two replicates each
        (the others cannot separate spread from binomial noise and are left out).
    method : str
    """

    a: np.ndarray
    b: np.ndarray
    width: np.ndarray
    n_items: int
    n_estimable: int
    method: str = ("root-mean-square width over items (moments: Var(p) = var(p_hat) - mean(p_hat (1 - p_hat) / "
                   "(r - 1)) per item, averaged), each item at its own mean rate")

    @property
    def median_width(self) -> float:
        return float(np.median(self.width)) if self.width.size else math.nan


def item_ranges(counts, replicates) -> ItemRanges:
    r"""Each item's null range from its null variants' counts (method of moments).

    Parameters
    ----------
    counts, replicates : sequence of array_like of int
        Per item, the successes :math:`K_{ij}` and replicates :math:`r_{ij}` of its null variants.

    Notes
    -----
    Under Assumption 2 with :math:`\hat p_{ij} = K_{ij}/r_{ij}`,
    :math:`E[\hat p_{ij}(1 - \hat p_{ij})] = p_{ij}(1 - p_{ij})(1 - 1/r_{ij})`, so
    :math:`\hat v_i = s_i^2 - \overline{\hat p_{ij}(1 - \hat p_{ij})/(r_{ij} - 1)}` (s^2 the sample
    variance over j) estimates :math:`\mathrm{Var}(p_{ij}) = w_i^2/12` without the binomial noise;
    :math:`\mathrm{Var}(p_{ij}) = w_i^2/12` without the binomial noise.  With few replicates one
    item's :math:`\hat v_i` is mostly noise (and clipping it at 0 would bias it up), but its mean
    over items is unbiased for :math:`E[w_i^2]/12`: every item gets the root-mean-square width
    :math:`\bar w = \sqrt{12 \max(\bar v, 0)}`, placed at the item's mean rate (shifted inside
    [0, 1]).  The spread's distribution over items is summarised by its second moment; where the
    power falls convexly with the width this errs low.  One replicate per variant cannot separate
    spread from noise: such items are not estimable.
    """
    mids, vs = [], []
    n = 0
    for k, r in zip(counts, replicates):
        n += 1
        k = np.asarray(k, dtype=float)
        r = np.broadcast_to(np.asarray(r, dtype=float), k.shape)
        keep = r >= 2
        if keep.sum() < 2:
            continue
        p = k[keep] / r[keep]
        vs.append(float(np.var(p, ddof=1) - np.mean(p * (1.0 - p) / (r[keep] - 1.0))))
        mids.append(float(p.mean()))
    if not vs:
        return ItemRanges(a=np.zeros(0), b=np.zeros(0), width=np.zeros(0), n_items=n, n_estimable=0)
    # one item's v_i is mostly binomial noise with few replicates (and clipping it at 0 biases it);
    # their mean is unbiased for E[w^2] / 12, so every item gets the root-mean-square width
    width = min(math.sqrt(12.0 * max(float(np.mean(vs)), 0.0)), 1.0)
    mid = np.asarray(mids)
    lo = np.clip(mid - width / 2.0, 0.0, 1.0 - width)
    return ItemRanges(a=lo, b=lo + width, width=np.full(mid.size, width), n_items=n, n_estimable=len(vs))


def average_power(a, b, *, m: int, r: int, detect: float, alpha: float = 0.05, step: float = 0.02) -> float:
    r"""The calibrated test's exact power averaged over items with null ranges [a_i, b_i].

    Each item's tested rate lies ``detect`` beyond the end of its range with more room
    (:math:`b_i + d` when :math:`1 - b_i \ge a_i`, else :math:`a_i - d`, clipped to [0, 1]); its
    power is :func:`~benchcert.stats.perturbation.calibrated.calibrated_power` with r replicates
    for every variant.  Ranges are rounded outwards to multiples of ``step`` (wider ranges: less
    power, so the average errs low) and each distinct one is computed once.
    """
    from .calibrated import calibrated_power

    alpha = check_alpha(alpha)
    a = np.floor(np.asarray(a, dtype=float) / step + 1e-9) * step
    b = np.minimum(np.ceil(np.asarray(b, dtype=float) / step - 1e-9) * step, 1.0)
    if a.size == 0:
        return math.nan
    keys, inverse = np.unique(np.round(np.c_[a, b], 6), axis=0, return_inverse=True)
    powers = np.empty(len(keys))
    for i, (lo, hi) in enumerate(keys):
        lo, hi = float(max(lo, 0.0)), float(min(hi, 1.0))
        pt = min(hi + detect, 1.0) if 1.0 - hi >= lo else max(lo - detect, 0.0)
        powers[i] = calibrated_power(pt, m=m, r=r, a=lo, b=hi, alpha=alpha)
    return float(np.mean(powers[np.ravel(inverse)]))
