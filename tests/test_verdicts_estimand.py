"""The checkpoint verdict answers one estimand (tasks/verdicts.py, stats/subject_means.py).

For the subjects question (30 or more subjects) every part of the verdict is about the
subject-weighted mean gap theta_S = E_s[mu_s]: the first look's fixed-sample test (t on subject
means), the betting test over looks (on subject entry means) and the reported gap. These seeded
simulations run the verdict's own pieces (subject_weighted_gap, subject_entry_means' units,
betting_test, nightly_verdicts - tests/test_verdicts.py checks that checkpoint_verdict records
exactly these) in the setting the old verdict got wrong: unequal subject sizes (5..200 items) and
a gap that moves with subject size, so that the item- and subject-weighted gaps differ.

Rates are judged with 95% Clopper-Pearson intervals (simcheck.rate_ci), as in issue 18's
acceptance: the upper bound must stay <= alpha + 0.01.
"""

from __future__ import annotations

import warnings

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
        rest = n - first
        for s in range(k):
            out[:, s, 1:] = np.stack([rng.multinomial(m, np.full(looks - 1, 1 / (looks - 1))) for m in rest[:, s]])
    elif arrival == "uniform":
        for s in range(k):
            out[:, s, :] = np.stack([rng.multinomial(m, np.full(looks, 1 / looks)) for m in n[:, s]])
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
