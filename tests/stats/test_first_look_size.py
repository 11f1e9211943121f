"""The items question's first look holds its share of alpha in the settings a user reaches (issue #36).

``tasks/compare/recorded.items_first`` at a1 = alpha x share = 0.025 (alpha 0.05, share 0.5), the
first look the recorded verdict runs, on seeded binary or fractional differences of subjects whose
store gap is exactly 0: each side's false-claim rate is judged by its 95% Clopper-Pearson upper
bound against a1 / 2 = 1.25%. The settings are the ones the stratified first look's pooled variance
got wrong (a large subject shared barely beside a small one shared fully, in both directions) and
the ones a per-subject variance gets wrong without its floor (1-3 shared items carrying most of the
store's weight; small near-ceiling subjects whose shared items are all ties), with 2-5 subjects of
unequal sizes, near-ceiling rates (0.95-0.99) and fractional scores. Subject s's differences are +1
/ -1 with probabilities b_s + g_s / 2 and b_s - g_s / 2 (b_s given, or |g_s| / 2: a subject all
won or all lost), scaled by U(0.5, 1) for fractional scores (every mean scaled by 3/4: the store's
gap stays 0). Measured before the fix (the pooled first look, 1,000 runs): ``large_barely`` 9.1%
[7.4, 11.1] false ``improved``, ``large_barely_mirror`` 10.0% [8.2, 12.0] false ``regressed``,
``heavy1`` / ``heavy2`` / ``heavy3`` 92.7% / 86.1% / 78.1%; each subject's own variance without the
floor 70-90% in the ``heavy`` settings (stats/recorded.py's module docstring).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from recorded_sim import ALPHA, SHARE, seed
from simcheck import rate_ci
from benchcert.stats.degenerate import DegenerateDataWarning
from benchcert.stats.recorded import effective_differences
from benchcert.tasks.compare.recorded import MIN_EFFECTIVE, absent_weight, items_first

A1 = ALPHA * SHARE

#: name: (store sizes, items shared at the first look, subject gaps g_s, base rates b_s (None: |g_s| / 2), fractional)
SETTINGS = {
    # the case: A of 3,000 items, 100 shared at -5 points; B of 150, all shared and all won
    "large_barely": ((3000, 150), (100, 150), (-0.05, 1.0), (0.05, None), False),
    "large_barely_mirror": ((3000, 150), (100, 150), (0.05, -1.0), (0.05, None), False),
    "large_300": ((3000, 150), (300, 150), (-0.05, 1.0), (0.05, None), True),
    # 1-3 shared items of a subject with 95% of the store's weight (ties at 90%), beside B all won
    "heavy1": ((3000, 150), (1, 150), (-0.05, 1.0), (0.05, None), False),
    "heavy2": ((3000, 150), (2, 150), (-0.05, 1.0), (0.05, None), False),
    "heavy3": ((3000, 150), (3, 150), (-0.05, 1.0), (0.05, None), False),
    "heavy3_three": ((3000, 400, 200), (3, 200, 200), (-0.02, 0.0, 0.3), (0.02, 0.15, None), False),
    # 5 subjects of unequal sizes shared unequally, both directions
    "five": ((1000, 500, 200, 50, 20), (30, 200, 200, 50, 20), (-0.04, 0.0, 0.1, 0.2, 0.5),
             (0.05, 0.15, 0.25, 0.2, None), False),
    "five_mirror": ((1000, 500, 200, 50, 20), (30, 200, 200, 50, 20), (0.04, 0.0, -0.1, -0.2, -0.5),
                    (0.05, 0.15, 0.25, 0.2, None), True),
    # near the ceiling (rates 0.95-0.99): small subjects often all ties
    "ceiling_three": ((2000, 300, 40), (2000, 300, 40), (-0.01, 0.02, 0.35), (0.02, 0.025, None), False),
    "ceiling_unequal": ((3000, 300), (600, 300), (-0.01, 0.1), (0.01, 0.05), False),
    "ceiling_five": ((1500, 800, 300, 60, 25), (1500, 800, 300, 60, 25), (-0.005, 0.0, 0.01, -0.02, 0.228),
                     (0.01, 0.02, 0.05, 0.03, None), False),
    # two subjects of unequal sizes, every item shared (the proportional case)
    "two_sizes": ((2000, 60), (2000, 60), (-0.01, 1 / 3), (0.15, 0.25), True),
}


def _draw(rng, name):
    store, shared, gaps, base, frac = SETTINGS[name]
    gaps = np.asarray(gaps, dtype=float)
    b = np.array([abs(g) / 2 if v is None else v for g, v in zip(gaps, base)])
    subj = np.repeat(np.arange(len(store)), shared)
    u = rng.random(subj.size)
    d = np.where(u < b[subj] + gaps[subj] / 2, 1.0, np.where(u > 1 - (b[subj] - gaps[subj] / 2), -1.0, 0.0))
    return (d * (0.5 + 0.5 * rng.random(subj.size)) if frac else d), subj


def first_look_claims(name, reps):
    """(false 'improved', false 'regressed', runs decided by the stratified test) of ``items_first`` at A1."""
    store = np.asarray(SETTINGS[name][0], dtype=float)
    assert abs(float((store * np.asarray(SETTINGS[name][2])).sum())) < 1e-9, name  # the store's gap is 0
    rng = np.random.default_rng(seed("first look size", name))
    up = down = stratified = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        for _ in range(reps):
            d, subj = _draw(rng, name)
            margin = absent_weight(store, np.unique(subj))[1]
            p, est = items_first(d, subj, store, A1, margin)[:2]
            up, down = up + (p <= A1 and est > 0), down + (p <= A1 and est < 0)
            stratified += effective_differences(d, subj, store) >= MIN_EFFECTIVE
    return up, down, stratified


#: Unequal sharing: where the pooled variance (or a per-subject one without its floor) failed. Conservative here
#: (0-1 claims of 2,000 in every one), so 300 runs each: a pass needs 0 claims (CP upper 1.22%), which a true 3%
#: gives with probability 1e-4. ``large_300``, ``five``, ``heavy3_three`` and ``ceiling_unequal`` (mostly decided by
#: the betting bound, the slowest) run in the slow grid.
UNEQUAL = ("large_barely", "large_barely_mirror", "heavy1", "heavy2", "heavy3", "five_mirror")

#: Every subject shared (in proportion): the stratified t decides (the per-subject variance then estimates what the
#: pooled one did) and sits at its nominal rate, as it did with the pooled variance on the same draws (2,000 runs:
#: ``two_sizes`` 1.05% / 1.45% [0.97, 2.08] before and after; ``ceiling_three`` 0.90% / 0.80% before, 0.75% / 0.60%
#: after; 20,000 runs after: ``two_sizes`` 1.23% [1.08, 1.39] / 1.20% [1.05, 1.36], ``ceiling_three`` 1.03% [0.90,
#: 1.19] / 0.86% [0.74, 1.00]). A test at its nominal rate shows no upper bound <= 1.25% in seconds: judged, as
#: tests/stats/test_recorded_verdicts.py judges the t's own setting, against the side's whole budget alpha / 2
#: (the betting part's share is spent by almost nothing at the null), with 1,500 runs (a true 3%: 45 expected, CP
#: upper about 4%); the slow grid runs 20,000.
PROPORTIONAL = ("two_sizes", "ceiling_three")


@pytest.mark.montecarlo
@pytest.mark.parametrize("name", UNEQUAL)
def test_first_look_false_claims_at_most_its_share_with_unequal_sharing(name):
    reps = 300
    up, down, _ = first_look_claims(name, reps)
    for side, hits in (("improved", up), ("regressed", down)):
        rate, lo, hi = rate_ci(hits, reps, level=0.95)
        assert hi <= A1 / 2, (name, side, hits, rate, lo, hi)


@pytest.mark.montecarlo
@pytest.mark.parametrize("name", PROPORTIONAL)
def test_first_look_false_claims_every_subject_shared(name):
    reps = 1500
    up, down, stratified = first_look_claims(name, reps)
    assert stratified >= reps * 0.8, stratified  # the t's setting, not the betting bound's
    for side, hits in (("improved", up), ("regressed", down)):
        rate, lo, hi = rate_ci(hits, reps, level=0.95)
        assert hi <= ALPHA / 2, (name, side, hits, rate, lo, hi)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_first_look_false_claims_grid(name):
    # the unequal-sharing settings at the first look's share (CP upper <= 1.25%, 4,000 runs); two_sizes, where the t
    # sits at its nominal rate (20,000 runs: 1.23% [1.08, 1.39]), at 1.25% + 0.25 points
    reps = 20000 if name in PROPORTIONAL else 4000
    up, down, _ = first_look_claims(name, reps)
    limit = A1 / 2 + (0.0025 if name == "two_sizes" else 0.0)
    for side, hits in (("improved", up), ("regressed", down)):
        rate, lo, hi = rate_ci(hits, reps, level=0.95)
        assert hi <= limit, (name, side, hits, rate, lo, hi)


def test_stratified_first_look_interval_says_what_its_claim_says_with_unequal_sharing():
    # the interval and the p-values come from one statistic: over seeded cases decided by the stratified t (2-5
    # subjects of unequal sizes shared unequally, some subject unshared, a subject of 1-3 shared items, 0/1 or
    # fractional scores, gaps up to 40 points), the interval excludes 0 on a side exactly when the first look claims
    # that side
    rng = np.random.default_rng(seed("first look interval, unequal"))
    claims, cases = {"improved": 0, "regressed": 0}, 0
    while cases < 200:
        k = int(rng.integers(2, 6))
        store = rng.integers(50, 3000, k).astype(float)
        shared = np.minimum(store, rng.integers(1, 400, k)).astype(int)
        shared[rng.random(k) < 0.15] = 0
        if rng.random() < 0.3:
            shared[int(rng.integers(k))] = int(rng.integers(1, 4))
        subj = np.repeat(np.arange(k), shared)
        if subj.size < 2:
            continue
        gap = rng.uniform(-0.4, 0.4)
        u = rng.random(subj.size)
        d = np.where(u < 0.2 + gap / 2, 1.0, np.where(u > 0.8 + gap / 2, -1.0, 0.0))
        if cases % 2:
            d = d * rng.random(subj.size)
        if effective_differences(d, subj, store) < MIN_EFFECTIVE:
            continue
        cases += 1
        p, est, lo, hi = items_first(d, subj, store, A1, absent_weight(store, np.unique(subj))[1])
        up, down = p <= A1 and est > 0, p <= A1 and est < 0
        claims["improved"] += up
        claims["regressed"] += down
        assert up == (lo > 0) and down == (hi < 0) and lo <= est <= hi, (cases, p, est, lo, hi)
    assert min(claims.values()) > 10, claims  # both sides reached
