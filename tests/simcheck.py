"""Judging a simulated rate: the observed rate with its exact (Clopper-Pearson) interval."""

from __future__ import annotations

import numpy as np
from scipy import stats


def rate_ci(hits, reps, level=0.99):
    """(rate, low, high) of ``sum(hits)`` successes in ``reps`` trials; the simulation tests'
    claims are judged against this interval, not the point estimate."""
    hits = int(np.sum(hits))
    ci = stats.binomtest(hits, reps).proportion_ci(confidence_level=level, method="exact")
    return hits / reps, ci.low, ci.high
