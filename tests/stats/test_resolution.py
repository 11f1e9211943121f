"""The benchmark's resolution (stats/resolution.py): a true gap equal to the stated resolution is
called different by the paired test in about the stated power's share of runs; bands; saturation."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from benchcert.stats.comparisons import pairwise_comparisons
from benchcert.stats.degenerate import DegenerateDataWarning
from benchcert.stats.resolution import band_resolution, neighbour_resolution, saturation
from score_power_support import fit_at
from simcheck import rate_ci

N_ITEMS, N_SUBJECTS = 2000, 40
SUBJECTS = np.repeat(np.arange(N_SUBJECTS), N_ITEMS // N_SUBJECTS)


def _pair(rng, acc_a, gap, discordance, n=N_ITEMS, *, shares=None):
    """Two 0/1 models on n items: A right with acc_a, B - A = +1 on (discordance + gap)/2 of the items,
    -1 on (discordance - gap)/2 (or on x and y of ``shares`` = (x, y))."""
    p10 = (discordance - gap) / 2.0 if shares is None else shares[1]
    p01 = (discordance + gap) / 2.0 if shares is None else shares[0]
    p11 = acc_a - p10
    u = rng.choice(4, size=n, p=[1.0 - p10 - p01 - p11, p01, p10, p11])
    return np.column_stack([np.isin(u, [2, 3]), np.isin(u, [1, 3])]).astype(float)


def _called_rate(rng, runs, acc, gap, discordance, subjects, nearest=None):
    """Runs (of ``runs``) the paired test calls different at a true gap ``gap``: discordance as given, or
    ``nearest`` = (x, y), the shares of items only B / only A got right (the score test's constrained fit)."""
    hits = 0
    for _ in range(runs):
        s = _pair(rng, acc, gap, discordance, shares=nearest)
        r = pairwise_comparisons(s, subjects, pairs=np.array([[0, 1]]))
        hits += int(np.atleast_1d(r.verdict)[0] != "inconclusive")
    return hits


@pytest.mark.montecarlo
@pytest.mark.parametrize("acc,discordance,subjects", [
    (0.6, 0.30, SUBJECTS),        # clustered by subject (the default with >= 30 subjects)
    (0.85, 0.12, None),           # near the ceiling, no subjects (paired CLT)
], ids=["clustered", "paired-clt-high-score"])
def test_a_gap_equal_to_the_resolution_is_called_different_in_75_to_85_percent(acc, discordance, subjects):
    rng = np.random.default_rng(38)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pilot = _pair(rng, acc, 0.0, discordance)
        stated = float(neighbour_resolution(pilot, subjects).mde[0])
        runs = 600
        # without subjects the stated resolution is the score test's, about the pilot's constrained fit at that
        # gap (stats/comparisons/score_mde.py; near the ceiling a held discordance is 2-3 points conservative)
        d = pilot[:, 1] - pilot[:, 0]
        nearest = None if subjects is not None else fit_at((d > 0).sum(), (d < 0).sum(), d.size, stated)
        hits = _called_rate(rng, runs, acc, stated, discordance, subjects, nearest)
    rate, low, high = rate_ci(hits, runs)
    assert 0.75 <= rate <= 0.85 and low <= 0.80 <= high, (stated, rate, low, high)


def test_neighbours_are_sorted_by_score_and_bands_summarise_them():
    rng = np.random.default_rng(1)
    s = (rng.random((500, 6)) < np.array([0.3, 0.9, 0.5, 0.35, 0.88, 0.55])[None, :]).astype(float)
    res = neighbour_resolution(s)
    assert (res.mean_b >= res.mean_a - 1e-12).all() and res.pair_a.size == 5
    rows = band_resolution(res, width=0.1)
    assert sum(r["n_pairs"] for r in rows) == 5
    for r in rows:
        assert r["resolution_min"] <= r["resolution_median"] <= r["resolution_max"]


def test_saturation_counts_the_items_separating_the_top_models():
    s = np.array([[1, 1, 1, 0], [1, 0, 1, 0], [0, 0, 0, 1], [1, 1, 0, 0]], dtype=float)
    sat = saturation(s, n_top=2)  # the top two: column 0 (0.75), then column 1 (0.5, before column 2: stable)
    assert sat.n_top == 2 and sat.top_score == 0.75
    assert sat.separating_items == 1 and sat.all_missed_items == 1  # item 1 separates them; both miss item 2


def test_neighbours_sharing_no_item_are_left_out():
    s = np.full((6, 3), np.nan)
    s[:3, 0], s[3:, 1], s[:, 2] = [1, 0, 1], [0, 0, 1], [1, 1, 0, 1, 1, 1]
    res = neighbour_resolution(s)   # sorted: col 1 (1/3), col 0 (2/3), col 2 (5/6): 1-0 share nothing
    assert res.pair_a.tolist() == [0] and res.pair_b.tolist() == [2]
    with pytest.warns(DegenerateDataWarning, match="no two neighbouring models"):
        empty = neighbour_resolution(s[:, :2])
    assert empty.mde.size == 0 and band_resolution(empty) == []
