"""The 2PL benchmark the item-analysis simulations draw (issue #38's acceptance setting)."""

from __future__ import annotations

import numpy as np


def two_pl(rng, *, n_models=60, n_items=4000, n_swapped=20, missing=0.0):
    """(scores (items x models), swapped mask, slopes, difficulties, abilities): abilities N(0, 1),
    slopes LogNormal(0, 0.3), difficulties N(0, 1); ``n_swapped`` discriminating items (slope
    1.5-2.5, |difficulty| < 1) with the key swapped (their 0/1 scores reversed); ``missing`` the
    share of responses removed at random."""
    theta = rng.normal(size=n_models)
    a = rng.lognormal(0.0, 0.3, size=n_items)
    b = rng.normal(size=n_items)
    swapped = np.zeros(n_items, dtype=bool)
    if n_swapped:
        idx = rng.choice(n_items, n_swapped, replace=False)
        swapped[idx] = True
        a[idx] = rng.uniform(1.5, 2.5, n_swapped)
        b[idx] = rng.uniform(-1.0, 1.0, n_swapped)
    p = 1.0 / (1.0 + np.exp(-a[:, None] * (theta[None, :] - b[:, None])))
    x = (rng.random(p.shape) < p).astype(float)
    x[swapped] = 1.0 - x[swapped]
    if missing:
        x[rng.random(x.shape) < missing] = np.nan
    return x, swapped, a, b, theta
