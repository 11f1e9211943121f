"""The checkpoint verdict answers one estimand (tasks/compare/verdicts.py, stats/subject_means.py).

For the subjects question (30 or more subjects) every part of the verdict is about the
subject-weighted mean gap theta_S = E_s[mu_s]: the first look's fixed-sample test (skewness-corrected t on subject
means), the betting test over looks (on subject entry means) and the reported gap. These seeded
simulations run the verdict's own pieces (subject_weighted_gap, subject_entry_means' units,
betting_test, nightly_verdicts - tests/tasks/compare/test_verdicts.py checks that checkpoint_verdict records
exactly these) in the setting the old verdict got wrong: unequal subject sizes (5..200 items) and
a gap that moves with subject size, so that the item- and subject-weighted gaps differ.

Rates are judged with 95% Clopper-Pearson intervals (simcheck.rate_ci), as in issue 18's
acceptance: the upper bound must stay <= alpha + 0.01.
"""

from __future__ import annotations

import warnings
import zlib

import numpy as np
import pytest

from simcheck import rate_ci
from benchcert.stats.comparisons import paired_comparison_counts
from benchcert.stats.sequential import betting_test, nightly_verdicts
from benchcert.stats.subject_means import subject_weighted_gap

ALPHA = 0.05
SIZES = np.array([5, 10, 20, 50, 100, 200])  # equally likely; log-spaced
_Z = np.log(SIZES) - np.log(SIZES).mean()
_Z = _Z / np.abs(_Z).max()  # in [-1, 1], mean 0 over the size distribution


def _arrivals(rng, n, looks, arrival):
    """Items of each (rep, subject) per look, shape (R, K, L).

    'subjects': whole subjects arrive in a random order (not depending on their gaps), 30 at
    the first look and the rest in blocks over the later looks; 'present': every subject has half its items (at least
    one) at look 1, the rest spread at random over the later looks (a benchmark that grows);
    'uniform': every item at a uniformly random look (small subjects enter late)."""
    r, k = n.shape
    if looks == 1:
        return n[..., None].copy()
    out = np.zeros((r, k, looks), dtype=np.int64)
    if arrival == "subjects":
        # 30 subjects at the first look (fewer and the verdict would ask the items question),
        # the others spread evenly over the later looks
        k1 = max(30, k // looks)
        rank = np.argsort(rng.random((r, k)), axis=1).argsort(axis=1)
        look = np.where(rank < k1, 0, 1 + (rank - k1) * (looks - 1) // max(k - k1, 1))
        np.put_along_axis(out, look[..., None], n[..., None], axis=2)
    elif arrival == "present":
        first = np.maximum(n // 2, 1)
        out[..., 0] = first
        out[..., 1:] = rng.multinomial(n - first, np.full(looks - 1, 1 / (looks - 1)))
    elif arrival == "uniform":
        out[...] = rng.multinomial(n, np.full(looks, 1 / looks))
    else:
        raise AssertionError(arrival)
    return out


def _entry_units(nb, na, n_ct):
    """Betting units (subject entry means) in a zero-padded layout shared by all replicates.

    Returns d of shape (U, R) and cumulative looks (L,): a zero unit leaves every e-value at
    m = 0 unchanged, so each column's e-values are those of its own entry means."""
    reps, k, looks = n_ct.shape
    has = n_ct > 0
    entry = np.where(has.any(axis=2), np.argmax(has, axis=2), -1)
    rr, cc = np.nonzero(entry >= 0)
    tt = entry[rr, cc]
    val = (nb[rr, cc, tt] - na[rr, cc, tt]) / n_ct[rr, cc, tt]
    counts = np.zeros((reps, looks), dtype=np.int64)
    np.add.at(counts, (rr, tt), 1)
    width = counts.max(axis=0)
    start = np.r_[0, np.cumsum(width)[:-1]]
    order = np.lexsort((cc, tt, rr))  # per replicate, by look then subject
    rr, tt, val = rr[order], tt[order], val[order]
    # position inside its (rep, look) block
    key = rr * looks + tt
    first_of_block = np.r_[True, key[1:] != key[:-1]]
    block_start = np.maximum.accumulate(np.where(first_of_block, np.arange(key.size), 0))
    pos = start[tt] + np.arange(key.size) - block_start
    d = np.zeros((int(width.sum()), reps))
    d[pos, rr] = val
    return d, np.cumsum(width), (rr, tt, val, counts)


def simulate(reps, k, looks, beta, tau, arrival, seed, *, alpha=ALPHA, share=0.5, delta=0.0):
    """One cell: verdicts of the checkpoint construction after ``looks`` looks.

    Subject gap mu_s = delta + beta * z(n_s) + tau * u_s (u uniform with SD 1, z in [-1, 1] the
    centred log size), so the subject-weighted gap E[mu] is exactly ``delta``; the item-weighted
    gap is delta + beta * E[n z] / E[n], of the sign of beta. Binary pair: P(D = +1) = 0.15 + mu/2,
    P(D = -1) = 0.15 - mu/2. Returns a dict of per-replicate arrays."""
    rng = np.random.default_rng(seed)
    size_idx = rng.integers(0, SIZES.size, size=(reps, k))
    n = SIZES[size_idx]
    mu = delta + beta * _Z[size_idx] + tau * rng.uniform(-np.sqrt(3), np.sqrt(3), size=(reps, k))
    assert np.all(np.abs(mu) <= 0.3)
    n_ct = _arrivals(rng, n, looks, arrival)
    pp, pn = 0.15 + mu / 2, 0.15 - mu / 2
    nb = rng.binomial(n_ct, pp[..., None])
    na = rng.binomial(n_ct - nb, (pn / (1 - pp))[..., None])
    with np.errstate(invalid="ignore", divide="ignore"):
        first_means = np.where(n_ct[..., 0] > 0, (nb[..., 0] - na[..., 0]) / n_ct[..., 0], np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        first = subject_weighted_gap(first_means, alpha=alpha)
        d, cum, _ = _entry_units(nb, na, n_ct)
        seq = betting_test(d, cum, alpha=alpha * (1 - share), interval=False)
        nv = nightly_verdicts(first.p_value, first.estimate, seq, alpha=alpha, first_look_share=share)
        # the replaced construction: the item-weighted clustered (CR2) test at the first look
        old_first = paired_comparison_counts(nb[..., 0], na[..., 0], n_ct[..., 0], by_subject=True,
                                             primary="clustered_subject", alpha=alpha)
        old = nightly_verdicts(old_first.p_value, old_first.estimate, seq, alpha=alpha, first_look_share=share)
    tot_n = n_ct.sum(axis=2)
    with np.errstate(invalid="ignore", divide="ignore"):
        subj_mean = np.where(tot_n > 0, (nb.sum(axis=2) - na.sum(axis=2)) / tot_n, np.nan)
    return dict(verdict=nv.verdict[:, -1], verdict_first=nv.verdict[:, 0], first_gap=first.estimate,
                gap=np.nanmean(subj_mean, axis=1), old_verdict=old.verdict[:, -1], old_verdict_first=old.verdict[:, 0],
                old_gap=(nb.sum(axis=(1, 2)) - na.sum(axis=(1, 2))) / n_ct.sum(axis=(1, 2)), seq=seq,
                n_first=(n_ct[..., 0] > 0).sum(axis=1))


def test_entry_layout_matches_each_replicates_own_units():
    # oracle for the padded layout: one replicate's e-values from its own units, in entry order
    rng = np.random.default_rng(0)
    n_ct = rng.integers(0, 3, size=(4, 6, 3))
    n_ct[:, 0, 0] = 1  # every replicate has a unit at the first look
    nb = rng.binomial(n_ct, 0.3)
    na = rng.binomial(n_ct - nb, 0.3)
    d, cum, (rr, tt, val, counts) = _entry_units(nb, na, n_ct)
    seq = betting_test(d, cum, alpha=0.025, interval=False)
    for r in range(4):
        ref = betting_test(val[rr == r], np.cumsum(counts[r]), alpha=0.025, interval=False)
        assert np.allclose(ref.log_e_improved, seq.log_e_improved[r])
        assert np.allclose(ref.log_e_regressed, seq.log_e_regressed[r])


def _judge(res, alpha=ALPHA):
    """(two-sided rate, CI), (false 'improved' rate, CI) of the final verdicts."""
    hits = res["verdict"] != "inconclusive"
    up = res["verdict"] == "improved"
    return rate_ci(hits, hits.size, level=0.95), rate_ci(up, up.size, level=0.95)


# Measured with the plain t at the first look (2,000 reps each, seeds as below; tau = 0.07): two-sided
# false-alarm rates 2.1-3.5% (the skewness-corrected test only makes the first look stricter)
# for whole subjects arriving over 1 or 30 looks, 2.4-3.4% when every subject is present at the
# first look (5 or 30 looks); every 95% upper bound <= 4.4%.
@pytest.mark.montecarlo
@pytest.mark.parametrize("arrival, looks", [("subjects", 1), ("subjects", 30), ("present", 5), ("present", 30)])
@pytest.mark.parametrize("k", [40, 90])
@pytest.mark.parametrize("beta", [-0.1, 0.1])
def test_false_alarms_under_the_subject_weighted_null_with_size_correlated_gaps(arrival, looks, k, beta):
    # Subject-weighted gap exactly 0; the item-weighted gap is 0.67 * beta (-6.7 or +6.7 points):
    # big subjects on one side, small ones on the other. The verdict must stay within alpha over
    # all looks together, and a false 'improved' within alpha / 2.
    seed = 1000 * looks + k + (1 if beta > 0 else 0) + (7 if arrival == "present" else 0)
    res = simulate(2000, k, looks, beta, 0.07, arrival, seed)
    assert res["n_first"].min() >= 30  # the subjects question: 30 or more subjects at the first look
    (rate, lo, hi), _ = _judge(res)
    assert hi <= ALPHA + 0.01, (rate, lo, hi)
    # at the first look the headline and the gap cannot disagree (both are the subject-weighted gap)
    first = res["verdict_first"]
    assert not np.any((first == "improved") & (res["first_gap"] <= 0))
    assert not np.any((first == "regressed") & (res["first_gap"] >= 0))


@pytest.mark.montecarlo
@pytest.mark.parametrize("tau", [0.0, 0.07])
@pytest.mark.parametrize("k", [30, 40])
def test_false_improved_stays_within_half_alpha_with_skewed_subject_means(k, tau):
    # The directional claim (a false 'improved' <= alpha / 2 when the subject-weighted gap is <= 0)
    # in the setting that strains it most: one look, 30-40 subjects, small noisy subjects on the
    # negative side and big precise ones on the positive side, so the subject means are skewed.
    # Under the plain t on subject means the verdict's false 'improved' was 2.6-2.9% with tau = 0
    # (review: 10,000 reps) - beyond alpha / 2; the skewness-corrected first-look test
    # (stats/subject_means.py; its own share is checked in tests/stats/test_subject_means.py) keeps it
    # within. Measured here (8,000 reps, k / tau = 30/0, 30/0.07, 40/0, 40/0.07): 0.81%, 0.61%, 0.85%,
    # 0.80% (95% upper bounds <= 1.08%); the plain t on the same seeds 2.90% [2.54, 3.29], 2.49%,
    # 2.74% [2.39, 3.12], 2.31%.
    res = simulate(8000, k, 1, 0.1, tau, "subjects", seed=21 + k + int(100 * tau))
    up = res["verdict"] == "improved"
    rate, lo, hi = rate_ci(up, up.size, level=0.95)
    assert lo <= ALPHA / 2 and hi <= ALPHA / 2 + 0.0025, (rate, lo, hi)


@pytest.mark.montecarlo
def test_power_under_a_subject_weighted_improvement():
    # The same simulation detects a 5-point subject-weighted gap (whole subjects, 90 subjects, one look)
    # most of the time, so the false-alarm tests above are not passing by saying nothing.
    res = simulate(1000, 90, 1, -0.1, 0.07, "subjects", seed=11, delta=0.05)
    up = res["verdict"] == "improved"
    rate, lo, _ = rate_ci(up, up.size, level=0.95)
    assert lo > 0.5, rate


@pytest.mark.montecarlo
def test_items_arriving_at_random_over_many_looks_are_outside_the_assumption():
    # The subjects question assumes the subjects with shared items at the first look are not chosen
    # by their gaps. When items arrive at random over 30 looks, the first look holds 1/30 of the
    # items: big subjects are all there, small ones mostly not, and with a gap that moves with size
    # the first look's subjects lean to one side. Measured (90 subjects, 2,000 reps): 9.2% [8.0, 10.6]
    # and 8.8% [7.6, 10.1] with beta = +0.18 / -0.18; with beta = +-0.1, 3.2-3.5% (6.4-7.6% under the
    # plain t on subject means, whose own skewness error added to the bias). The simulation can see
    # it; the verdict names subjects that have items but no shared one
    # (tests/tasks/compare/test_verdicts.py::test_subjects_without_a_shared_item_are_named) and states the assumption.
    res = simulate(2000, 90, 30, 0.18, 0.05, "uniform", seed=30092)
    (rate, lo, _), _ = _judge(res)
    assert lo > ALPHA, rate


@pytest.mark.slow
@pytest.mark.parametrize("arrival, looks", [("subjects", 1), ("subjects", 5), ("subjects", 30), ("present", 5),
                                            ("present", 30), ("uniform", 3)])
@pytest.mark.parametrize("k", [40, 60, 90])
@pytest.mark.parametrize("beta", [-0.1, -0.05, 0.0, 0.05, 0.1])
@pytest.mark.parametrize("tau", [0.0, 0.07, 0.11])
def test_false_alarm_grid(arrival, looks, k, beta, tau):
    seed = zlib.crc32(repr((arrival, looks, k, beta, tau)).encode())
    res = simulate(5000, k, looks, beta, tau, arrival, seed)
    if res["n_first"].min() < 30:
        pytest.skip("fewer than 30 subjects at the first look: the items question")
    (rate, lo, hi), (up, _, up_hi) = _judge(res)
    assert hi <= ALPHA + 0.01 and up_hi <= ALPHA / 2 + 0.01, (rate, hi, up, up_hi)


def test_subject_means_per_code():
    # subject_weighted_gap itself (oracle, edges, validation) is tested in tests/stats/test_subject_means.py
    from benchcert.stats.subject_means import subject_means

    codes, means, counts = subject_means(np.array([1, 0, -1, 0.5]), np.array([3, 3, 0, 3]))
    assert codes.tolist() == [0, 3] and means.tolist() == [-1.0, 0.5] and counts.tolist() == [1, 3]
    for d, g, match in (([2.0], [0], "d must lie"), ([0.1], [-1], "non-negative integer"), ([], [], "1-D")):
        with pytest.raises(ValueError, match=match):
            subject_means(np.array(d, dtype=float), np.array(g, dtype=np.int64))
