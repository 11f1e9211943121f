"""Seeded fractional (non-0/1) paired scores in subjects, for the items question's bounded score test.

:func:`fractional_scores` draws both models' scores per item; tests/stats/comparisons/test_score.py
runs the bounded score test on their differences directly (gates at the margin, beside the stratified t
test it replaced, :func:`t_lower`), and
tests/stats/comparisons/test_fractional_size.py runs the public comparison path the audit uses
(:func:`benchcert.stats.comparisons.pairwise_comparisons` with subjects) on them (size and power).
"""

from __future__ import annotations

import numpy as np
from scipy import stats


def fractional_scores(rng, sizes, mean_a, k, rho, gaps, reps, grid=0):
    """(a, b, subjects): the baseline's and the candidate's scores, shape (reps, N), and each item's subject.

    Subject c's items: the baseline's score Beta with mean ``mean_a[c]`` and concentration ``k``; the
    candidate's equal to the baseline's with probability ``rho`` (a tie: the same item is as hard for
    both), else an independent Beta whose mean makes the subject's expected gap exactly ``gaps[c]``.
    With ``grid`` > 0 each score is rounded to a multiple of 1 / grid at random, without bias (partial
    credit: the means, so the gaps, are unchanged). ``mean_a`` and ``gaps`` broadcast over the subjects.
    """
    sizes = np.asarray(sizes)
    ma = np.broadcast_to(np.asarray(mean_a, dtype=float), sizes.shape)
    gap = np.broadcast_to(np.asarray(gaps, dtype=float), sizes.shape)
    mp = (ma + gap - rho * ma) / (1 - rho)
    assert np.all((mp > 0) & (mp < 1)), mp
    subj = np.repeat(np.arange(sizes.size), sizes)
    a = rng.beta(k * ma[subj], k * (1 - ma[subj]), size=(reps, subj.size))
    other = rng.beta(k * mp[subj], k * (1 - mp[subj]), size=(reps, subj.size))
    tie = rng.random((reps, subj.size)) < rho
    if grid:
        def credit(x):
            low = np.floor(x * grid)
            return (low + (rng.random(x.shape) < x * grid - low)) / grid

        a, other = credit(a), credit(other)
    return a, np.where(tie, a, other), subj


def swung_gaps(sizes, swing, theta=0.0):
    """Subject gaps theta + swing (+1, -1, +1, ...), recentred so that their item-weighted mean is exactly
    ``theta`` (the items question's estimand with the subjects as fixed strata)."""
    sizes = np.asarray(sizes, dtype=float)
    sign = np.where(np.arange(sizes.size) % 2, -1.0, 1.0)
    return theta + swing * (sign - (sizes * sign).sum() / sizes.sum())


def t_lower(d, sizes, alpha=0.05):
    """The stratified t interval's lower end it replaced (pooled within-subject variance, t on N - C df)."""
    edges = np.r_[0, np.cumsum(sizes)]
    ssw = sum(((d[:, i:j] - d[:, i:j].mean(axis=1, keepdims=True)) ** 2).sum(axis=1)
              for i, j in zip(edges[:-1], edges[1:]))
    n, c = d.shape[1], len(sizes)
    return d.mean(axis=1) - stats.t.ppf(1 - alpha / 2, n - c) * np.sqrt(ssw / (n - c) / n)
