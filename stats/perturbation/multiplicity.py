"""Benjamini-Hochberg across items, for p-values some of which are missing (untested items)."""

from __future__ import annotations

import numpy as np

from ..validation import check_alpha
from .results import MultipleTestResult


def benjamini_hochberg(p_values, *, alpha=0.05) -> MultipleTestResult:
    r"""Benjamini-Hochberg step-up procedure (FDR control at alpha).

    Reject the k smallest p-values, k the largest index with :math:`p_{(k)} \le k\alpha/n`;
    adjusted p-values :math:`\tilde p_{(i)} = \min_{j \ge i} \min(1, n p_{(j)}/j)`.  FDR <= alpha
    for independent or positively dependent (PRDS) p-values (Benjamini & Hochberg 1995;
    Benjamini & Yekutieli 2001).  NaN p-values (untested items) are left out and never rejected.
    """
    from benchcert.stats.comparisons import adjust_pvalues  # one BH implementation for the project

    p = np.asarray(p_values, dtype=float)
    alpha = check_alpha(alpha)
    if p.ndim != 1:
        raise ValueError(f"p_values must be 1-D; got shape {p.shape}")
    ok = ~np.isnan(p)
    if np.any((p[ok] < 0) | (p[ok] > 1)):
        raise ValueError(f"p_values must lie in [0, 1]; got {p[ok][(p[ok] < 0) | (p[ok] > 1)][0]!r}")
    n = int(ok.sum())
    adjusted = np.full(p.shape, np.nan)
    reject = np.zeros(p.shape, dtype=bool)
    if n:
        bh = adjust_pvalues(p[ok], alpha=alpha, method="bh")
        adjusted[ok] = bh.p_adjusted
        reject[ok] = bh.rejected
    return MultipleTestResult(reject=reject, adjusted=adjusted, n_reject=int(reject.sum()), alpha=alpha, n=int(n),
                              method="benjamini_hochberg",
                              assumptions=("p-values independent or PRDS (positive regression dependence)",
                                           "each p-value valid (super-uniform) under its null"))
