"""The items question's anytime test of the store's gap, batch by batch (benchcert.stats.store_batches; issue #36).

Oracles: the pooled betting test (benchcert.stats.sequential), which it must equal exactly when every look shares
every subject in proportion to its store size; an exact enumeration of a batch's outcomes for the bound its
supermartingale rests on. Its false-claim rate and power under unequal sharing are simulated in
tests/stats/test_recorded_verdicts.py.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from benchcert.stats.sequential import betting_test, betting_test_counts
from benchcert.stats.store_batches import MAX_WAIT, settle_looks, store_weighted_batches


def _proportional(rng, fractional):
    """4 subjects of 40..160 store items, a fifth of each shared at each of 5 looks (items ordered by look)."""
    sizes = np.array([40, 80, 120, 160])
    subj = np.tile(np.repeat(np.arange(4), sizes // 5), 5)
    look = np.repeat(np.arange(1, 6), (sizes // 5).sum())
    d = rng.choice([-1.0, 0.0, 1.0], size=subj.size, p=[0.2, 0.5, 0.3])
    if fractional:
        d = d * rng.uniform(0.2, 1.0, subj.size)
    return d, subj, look, sizes.astype(float)


@pytest.mark.parametrize("fractional", [False, True])
def test_proportional_sharing_is_the_pooled_betting_test(fractional):
    d, subj, look, store = _proportional(np.random.default_rng(36 + fractional), fractional)
    cum = np.cumsum(np.bincount(look)[1:])
    r = store_weighted_batches(d, subj, look, store, alpha=0.025)
    if fractional:
        ref = betting_test(d, cum, alpha=0.025)
    else:  # what the engine runs for 0/1 scores
        ref = betting_test_counts(np.cumsum(d == 1)[cum - 1], np.cumsum(d == -1)[cum - 1], cum, alpha=0.025)
    for f in ("log_e_improved", "log_e_regressed", "lower", "upper"):
        assert np.allclose(getattr(r, f), getattr(ref, f), rtol=1e-12, atol=1e-12), f
    assert np.array_equal(r.verdict, ref.verdict) and np.array_equal(r.n, cum)
    assert r.method == "store_weighted_batches"


def test_a_batch_missing_a_subject_keeps_its_factor_below_one_at_the_null():
    # Exact enumeration. Store: A 10, B 10, C 4 items. Look 1: A 2 wins, B 2 wins, all 4 of C's items lost (C
    # exhausted; the store-weighted estimate 16/24 > 0, so look 2 is bet on). Look 2: A 2 items, B 1, C absent
    # (w0 = 1/6, margin 0.2): binary +-1 items with means theta_A, theta_B. At the null's worst corner (store gap 0,
    # theta_C = -1: 10 theta_A + 10 theta_B = 4) the expected growth of every constant bet is <= 1; with theta_C's
    # worst case ignored (store gap +1/6) some bet grows: the margin is needed, and the check can fail
    store = np.array([10.0, 10.0, 4.0])
    first_d, first_s = np.r_[1.0, 1.0, 1.0, 1.0, -1.0, -1.0, -1.0, -1.0], np.repeat([0, 1, 2], [2, 2, 4])
    subj2 = np.array([0, 0, 1])
    lams = 0.5 * 2.0 ** (-np.arange(0, 21, 4) / 2.0)

    def growth(theta_a, theta_b, lam):
        p = {0: (1 + theta_a) / 2, 1: (1 + theta_b) / 2}
        total = 0.0
        for out in itertools.product([1.0, -1.0], repeat=3):
            prob = np.prod([p[s] if o > 0 else 1 - p[s] for s, o in zip(subj2, out)])
            r = store_weighted_batches(np.r_[first_d, out], np.r_[first_s, subj2], np.repeat([1, 2], [8, 3]), store,
                                       alpha=0.05, lambdas=[lam], interval=False)
            assert r.n[-1] == 11  # look 2's items are bet on at look 2 (no subject left to wait for)
            total += prob * np.exp(r.log_e_improved[1] - r.log_e_improved[0])
        return total

    for theta_a in (0.4, 0.2, 0.0, -0.2):
        theta_b = 0.4 - theta_a
        assert max(growth(theta_a, theta_b, lam) for lam in lams) <= 1 + 1e-12, theta_a
    assert max(growth(0.7, 0.5, lam) for lam in lams) > 1.0


def test_settle_looks_waits_for_the_subjects_still_to_come():
    store = np.array([5.0, 3.0, 2.0])
    # look 1: A and B (C not yet shared): wait; look 2: C's 2 items: A, B, C covered -> all bet on at look 2
    subj, look = np.array([0, 0, 1, 2, 2]), np.array([1, 1, 1, 2, 2])
    assert settle_looks(subj, look, store, 2).tolist() == [2, 2, 2, 2, 2]
    assert settle_looks(subj[:3], look[:3], store, 1).tolist() == [0, 0, 0]  # still waiting after look 1
    # a subject fully shared (B: 3 of 3, C: 2 of 2) is not waited for; A still has items to come
    subj, look = np.array([0, 1, 1, 1, 2, 2, 0]), np.array([1, 1, 1, 1, 1, 1, 2])
    assert settle_looks(subj, look, store, 2).tolist() == [1] * 6 + [2]
    # a subject that never comes: the batch is bet on after MAX_WAIT looks, and the next one waits again
    subj = np.zeros(MAX_WAIT + 2, dtype=np.int64)
    look = np.arange(1, MAX_WAIT + 3)
    out = settle_looks(subj, look, np.array([50.0, 10.0]), MAX_WAIT + 2)
    assert out.tolist() == [MAX_WAIT] * MAX_WAIT + [0, 0]
    with pytest.raises(ValueError, match="n_looks"):
        settle_looks(subj, look, np.array([50.0, 10.0]), 2)
    with pytest.raises(ValueError, match="integer arrays"):
        settle_looks(subj, look[:-1], np.array([50.0, 10.0]), MAX_WAIT + 2)


def test_interval_says_what_the_verdict_says_under_unequal_sharing():
    rng = np.random.default_rng(361)
    store = np.array([3000.0, 30.0, 300.0])
    for gap_a in (-0.3, 0.0, 0.3, 0.6):
        subj = np.r_[np.zeros(120, dtype=np.int64), np.ones(30, dtype=np.int64), np.full(60, 2)]
        look = np.r_[rng.integers(1, 7, 120), np.ones(30, dtype=np.int64), rng.integers(3, 7, 60)]
        u = rng.random(subj.size)
        g = np.where(subj == 0, gap_a, np.where(subj == 1, 1.0, 0.1))
        d = np.where(u < 0.1 + g / 2 + 0.2 * (subj == 0), 1.0, np.where(u > 0.9 - 0.2 * (subj == 0) + g / 2, -1.0,
                                                                          0.0))
        r = store_weighted_batches(d, subj, look, store, alpha=0.05)
        thr = np.log(2 / 0.05)
        assert np.all(r.lower <= r.upper) and np.all(np.diff(r.lower) >= 0) and np.all(np.diff(r.upper) <= 0)
        assert np.array_equal(np.maximum.accumulate(r.log_e_improved >= thr), r.lower > 0), gap_a
        assert np.array_equal(np.maximum.accumulate(r.log_e_regressed >= thr), r.upper < 0), gap_a
        # sharply: at a threshold just below the largest log K+(0) over the looks the interval excludes 0, just
        # above it it does not (the interval is inverted from the same capital the e-value reads; nothing forces it)
        for side, bound in (("log_e_improved", "lower"), ("log_e_regressed", "upper")):
            top = float(np.max(getattr(r, side)))
            if top < 1.0:
                continue
            for eps, excludes in ((-1e-3, True), (1e-3, False)):
                rr = store_weighted_batches(d, subj, look, store, alpha=2.0 * np.exp(-(top + eps)))
                got = rr.lower[-1] > 0 if bound == "lower" else rr.upper[-1] < 0
                assert got == excludes, (gap_a, side, eps, getattr(rr, bound)[-1])


def test_a_batch_bet_on_for_neither_side_is_not_counted_as_bet_on():
    # subject 1 (half the store) never comes: after MAX_WAIT looks subject 0's items are one batch at the worst case
    # for subject 1 (margin w0 / (1 - w0) = 1, above half the earlier estimate 0): bet on for neither side. Its items
    # are settled but not bet on, so n (what the verdict prints as "in the sequential test") stays 0
    from benchcert.tasks.compare.recorded import items_anytime

    d, subj, look = np.zeros(MAX_WAIT), np.zeros(MAX_WAIT, dtype=np.int64), np.arange(1, MAX_WAIT + 1)
    r = store_weighted_batches(d, subj, look, np.array([10.0, 10.0]), alpha=0.05)
    assert r.n[-1] == 0 and r.log_e_improved[-1] == 0 and (r.lower[-1], r.upper[-1]) == (-1.0, 1.0)
    _, notes = items_anytime(d, subj, look, np.array([10.0, 10.0]), 0.05)
    assert any(f"{MAX_WAIT} of {MAX_WAIT} items are in batches not bet on" in a for a in notes), notes
    assert not any("items wait to be bet on" in a for a in notes)


def test_the_bets_are_the_first_looks_helpers_batch_by_batch():
    # one implementation of the reweighting (stats/store_batches.py), which tasks/compare/recorded.py imports
    from benchcert.stats import store_batches
    from benchcert.tasks.compare import recorded

    assert recorded.store_weighted_bets is store_batches.store_weighted_bets
    assert recorded.absent_weight is store_batches.absent_weight
    x, big_r = store_batches.store_weighted_bets(np.array([1.0, -1.0, 1.0]), np.array([0, 0, 1]), np.array([4.0, 4.0]))
    # r = (0.75, 1.5): subject 1 is half the store and a third of the items
    assert big_r == 1.5 and x.tolist() == [0.5, -0.5, 1.0]
    assert store_batches.absent_weight(np.array([3.0, 1.0]), np.array([0])) == (0.25, 1 / 3)
    with pytest.raises(ValueError, match="subjects must be integer codes"):
        store_batches.store_weighted_bets(np.array([1.0]), np.array([2]), np.array([4.0, 4.0]))
    with pytest.raises(ValueError, match="d must lie"):
        store_batches.store_weighted_bets(np.array([2.0]), np.array([0]), np.array([4.0, 4.0]))
    with pytest.raises(ValueError, match="store_counts"):
        store_batches.absent_weight(np.array([-1.0, 4.0]), np.array([0]))
    with pytest.raises(ValueError, match="strata must be integer codes"):
        store_batches.absent_weight(np.array([1.0, 4.0]), np.array([0.5]))


def test_store_weighted_batches_validates_its_input():
    d, subj, look, store = np.array([0.5, -1.0]), np.array([0, 1]), np.array([1, 2]), np.array([3.0, 3.0])
    with pytest.raises(ValueError, match="d must lie"):
        store_weighted_batches([2.0, 0.0], subj, look, store)
    with pytest.raises(ValueError, match="subjects must be integer codes"):
        store_weighted_batches(d, [0, 2], look, store)
    with pytest.raises(ValueError, match="looks must be integer"):
        store_weighted_batches(d, subj, [0, 1], store)
    with pytest.raises(ValueError, match="n_looks"):
        store_weighted_batches(d, subj, look, store, n_looks=1)
    with pytest.raises(ValueError, match="store_counts"):
        store_weighted_batches(d, subj, look, [0.0, 3.0])
    with pytest.raises(ValueError, match="one non-zero length"):
        store_weighted_batches(d, subj[:1], look, store)
    with pytest.raises(ValueError, match="lambdas"):
        store_weighted_batches(d, subj, look, store, lambdas=[0.7])
    with pytest.raises(ValueError, match="interval"):
        store_weighted_batches(d, subj, look, store, interval="yes")
    r = store_weighted_batches(d, subj, look, store, n_looks=3)  # a look that added nothing holds the capital
    assert r.log_e_improved.size == 3 and r.log_e_improved[2] == r.log_e_improved[1]
    r = store_weighted_batches(d[:1], subj[:1], look[:1], store)  # its one item waits for subject 1: no evidence
    assert (r.n[-1], r.log_e_improved[-1], r.lower[-1], r.upper[-1]) == (0, 0.0, -1.0, 1.0)
