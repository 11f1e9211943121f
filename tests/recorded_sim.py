"""Seeded simulations of the recorded (checkpoint) verdict's tests since issue #36.

The verdict's own pieces are run - :mod:`benchcert.tasks.compare.recorded` (``items_first``,
``absent_weight``, ``items_anytime``: the items question's anytime part ``store_weighted_batches``; with
``pooled=True`` the pooled betting test of ``stratified_store_weights``,
:func:`benchcert.stats.sequential.betting_test_counts` with its margin),
:func:`benchcert.stats.sequential.nightly_verdicts`, :func:`benchcert.stats.recorded.subject_e_process` -
in the order :func:`benchcert.tasks.compare.recorded.spend` runs them, on simulated binary scores.
tests/stats/test_recorded_verdicts.py asserts on small runs; ``python tests/recorded_sim.py``
prints the full power / false-claim table quoted in docs/methods.md, section 6 (the slow tests run
the same grid).

Items settings (subjects as fixed strata; the estimand is the item-weighted gap over EVERY
subject of the benchmark, whatever arrived first):

* ``power91``: MMLU-Pro's 91 subject sizes (12,032 items), subject gaps theta + 0.05 N(0, 1)
  recentred so the item-weighted gap is exactly theta, discordance 0.30 (base 0.15);
* ``power30``: 30 of those sizes scaled to 4,011 items, the same gaps;
* ``F1``: 30 subjects, one in ten of 5 items with a -20 point gap, the rest of 200 items with the
  gap that makes the item-weighted gap 0;
* ``F2``: 90 subjects of 5..200 items (log-uniform), gap tied to log size with a 36-point swing
  plus noise, recentred to an item-weighted gap of 0, base 0.25;
* ``F3``: MMLU-Pro's sizes, gap tied to log size with a 30-point swing plus 0.05 noise, recentred;
* ``near_ceiling``: MMLU-Pro's sizes, both models near 98% (base 0.02), a 4-point swing.

Arrival over T looks: ``one`` (every item at look 1), ``spread`` (each subject's items spread
evenly over the looks, its first at look 1), ``random`` (each item at a uniformly random look:
small subjects often have no item at look 1 and count at the worst case there).
"""

from __future__ import annotations

import dataclasses
import warnings
import zlib

import numpy as np

from benchcert.stats.degenerate import DegenerateDataWarning
from benchcert.stats.recorded import either_of, subject_e_process
from benchcert.stats.sequential import betting_test, betting_test_counts, nightly_verdicts
from benchcert.tasks.compare.recorded import absent_weight, items_anytime, items_first

ALPHA, SHARE = 0.05, 0.5

#: MMLU-Pro's 91 subject sizes (12,032 items).
MMLU_SIZES = np.array([
    17, 20, 32, 33, 33, 37, 40, 43, 43, 45, 46, 46, 47, 48, 50, 51, 52, 52, 53, 54, 55, 55, 59, 60, 62, 63, 65, 65,
    66, 67, 67, 67, 68, 69, 70, 71, 72, 73, 74, 74, 75, 76, 76, 79, 79, 80, 83, 83, 84, 84, 85, 86, 87, 90, 98, 100,
    101, 102, 104, 115, 115, 127, 130, 136, 139, 140, 143, 143, 145, 147, 148, 169, 169, 179, 193, 195, 216, 216,
    242, 254, 265, 304, 305, 324, 344, 351, 391, 400, 508, 560, 1003])


def seed(*key) -> int:
    return zlib.crc32(repr(key).encode())


def sizes_30() -> np.ndarray:
    """30 subjects, 4,011 items: every third MMLU-Pro size from the second, scaled."""
    s = np.round(MMLU_SIZES[1::3] * 4011 / MMLU_SIZES[1::3].sum()).astype(int)
    s[-1] += 4011 - s.sum()
    return s


def _recentre(mu, sizes, theta):
    return mu - (mu * sizes).sum(axis=-1, keepdims=True) / sizes.sum(axis=-1, keepdims=True) + theta


def items_setting(name: str, rng, reps: int, theta: float = 0.0):
    """(sizes (reps, S), gaps (reps, S), base) with item-weighted gap ``theta`` before clipping."""
    if name in ("power91", "power30"):
        sizes = MMLU_SIZES if name == "power91" else sizes_30()
        mu = _recentre(0.05 * rng.standard_normal((reps, sizes.size)), sizes, theta)
        return np.broadcast_to(sizes, mu.shape), mu, 0.15
    if name == "F1":
        sizes = np.where(np.arange(30) % 10 == 0, 5, 200)
        small = sizes == 5
        big_gap = (0.20 * 5 * small.sum()) / (200 * (~small).sum()) + theta
        mu = np.where(small, -0.20, big_gap) + np.zeros((reps, 1))
        return np.broadcast_to(sizes, mu.shape), mu, 0.15
    if name == "F2":
        lo, hi = np.log(5), np.log(200)
        u = rng.uniform(lo, hi, size=(reps, 90))
        z = (u - (lo + hi) / 2) / ((hi - lo) / 2)
        sizes = np.round(np.exp(u)).astype(int)
        mu = -0.36 * z + np.clip(rng.normal(0, 0.05, size=(reps, 90)), -0.1, 0.1)
        return sizes, _recentre(mu, sizes, theta), 0.25
    ln = np.log(MMLU_SIZES)
    x = -(ln - ln.mean()) / (ln.max() - ln.min())
    if name == "F3":
        mu = 0.30 * x + 0.05 * rng.standard_normal((reps, MMLU_SIZES.size))
        return np.broadcast_to(MMLU_SIZES, mu.shape), _recentre(mu, MMLU_SIZES, theta), 0.15
    if name == "near_ceiling":
        mu = 0.04 * x + np.zeros((reps, 1))
        return np.broadcast_to(MMLU_SIZES, mu.shape), _recentre(mu, MMLU_SIZES, theta), 0.02
    raise ValueError(f"unknown setting {name!r}")


def _arrivals(rng, sizes, looks, arrival):
    """Items of each subject per look, shape (S, T)."""
    if arrival == "one" or looks == 1:
        return sizes[:, None].copy()
    if arrival == "random":
        return rng.multinomial(sizes, np.full(looks, 1.0 / looks))
    j = np.arange(sizes.max())[None, :]
    look_of = np.where(j < sizes[:, None], (j * looks) // sizes[:, None], looks)
    return np.stack([(look_of == t).sum(axis=1) for t in range(looks)], axis=1)


def items_verdicts(name: str, reps: int, *, theta: float = 0.0, looks: int = 1, arrival: str = "one",
                   alpha: float = ALPHA, share: float = SHARE, rng=None, pooled: bool = False):
    """Final recorded verdicts (reps,) and each run's estimand (the item-weighted gap over every subject).
    ``pooled``: the anytime part as ``stratified_store_weights`` ran it (pooled items) instead of
    ``store_weighted_batches``."""
    rng = np.random.default_rng(seed("items", name, theta, looks, arrival)) if rng is None else rng
    sizes, mu, base = items_setting(name, rng, reps, theta)
    mu = np.clip(mu, -2 * base + 1e-9, 2 * base - 1e-9)
    estimand = (mu * sizes).sum(axis=-1) / sizes.sum(axis=-1)
    out = np.empty(reps, dtype=object)
    vals = np.array([1.0, -1.0, 0.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        for r in range(reps):
            n = _arrivals(rng, sizes[r], looks, arrival)
            pp, pn = base + mu[r] / 2, base - mu[r] / 2
            nb = rng.binomial(n, pp[:, None])
            na = rng.binomial(n - nb, (pn / (1 - pp))[:, None])
            strata = np.flatnonzero(n[:, 0] > 0)
            w0, margin = absent_weight(sizes[r].astype(float), strata)
            s1 = n[strata, 0]
            d = np.repeat(np.tile(vals, strata.size), np.stack([nb[strata, 0], na[strata, 0],
                                                                 s1 - nb[strata, 0] - na[strata, 0]], 1).ravel())
            subj = np.repeat(strata, s1)
            p1, g1 = items_first(d, subj, sizes[r].astype(float), alpha * share, margin)[:2] if share > 0 else (1.0, 0.0)
            seq = (_items_betting(nb, na, n, strata, w0, margin, alpha * (1 - share)) if pooled else
                   batch_betting(nb, na, n, sizes[r].astype(float), alpha * (1 - share)))
            out[r] = nightly_verdicts(p1, g1, seq, alpha=alpha, first_look_share=share).verdict[-1]
    return out, estimand


def batch_betting(nb, na, n, store, seq_alpha):
    """The items verdict's anytime part (tasks/compare/recorded.items_anytime, ``store_weighted_batches``) on
    counts per subject and look, shape (S, T): each item's difference, subject and look."""
    s_n, t_n = n.shape
    per = np.stack([nb, na, n - nb - na], axis=-1).reshape(-1)
    d = np.repeat(np.tile([1.0, -1.0, 0.0], s_n * t_n), per)
    subj = np.repeat(np.repeat(np.arange(s_n), 3 * t_n), per)
    look = np.repeat(np.tile(np.repeat(np.arange(1, t_n + 1), 3), s_n), per)
    return items_anytime(d, subj, look, store, seq_alpha, n_looks=t_n, interval=False)[0]


def _items_betting(nb, na, n, strata, w0, margin, seq_alpha):
    """The items verdict's betting part as ``stratified_store_weights`` ran it: one test when every subject was
    shared at look 1, else two at half the level (the first look's subjects at the margin; every item
    from the look at which every subject has an item)."""
    cb, ca, cn = (np.cumsum(v.sum(axis=0)) for v in (nb, na, n))
    if w0 == 0:
        return betting_test_counts(cb, ca, cn, alpha=seq_alpha, interval=False)
    c1 = [np.cumsum(v[strata].sum(axis=0)) for v in (nb, na, n)]
    part1 = betting_test_counts(*c1, alpha=seq_alpha / 2, margin=margin, interval=False)
    start = int(np.argmax(n > 0, axis=1).max()) + 1
    tail = betting_test_counts(cb[start - 1:], ca[start - 1:], cn[start - 1:], alpha=seq_alpha / 2, interval=False)
    pad = np.zeros(start - 1)
    part2 = dataclasses.replace(tail, log_e_improved=np.r_[pad, tail.log_e_improved],
                                log_e_regressed=np.r_[pad, tail.log_e_regressed])
    return either_of(part1, part2, alpha=seq_alpha)


# --------------------------------------------------------------------------------------
# new subjects


def subject_population(name: str, rng, reps: int, k: int, theta: float = 0.0):
    """(sizes, subject gaps, base) of k subjects per run; the population's subject-weighted gap is ``theta``.

    ``sym``: MMLU-Pro sizes drawn at random, gaps theta + 0.05 N(0, 1) (symmetric about theta);
    ``sym_wide``: gaps theta + 0.10 uniform (symmetric, wider); ``size_swing``: the gap moves with
    log size (a 20-point swing, subject-weighted mean theta) - subject means then are NOT symmetric;
    ``F1``: one subject in ten of 5 items with a -20 point gap, the rest of 200 items at +2.22 (mean 0;
    far from symmetric).
    """
    if name == "F1":
        small = rng.random((reps, k)) < 0.1
        return np.where(small, 5, 200), np.where(small, -0.20, 0.0222) + theta, 0.15
    n = rng.choice(MMLU_SIZES, size=(reps, k))
    if name == "sym":
        return n, theta + 0.05 * rng.standard_normal((reps, k)), 0.15
    if name == "sym_wide":
        return n, theta + 0.10 * rng.uniform(-np.sqrt(3), np.sqrt(3), size=(reps, k)), 0.15
    if name == "size_swing":
        ln = np.log(MMLU_SIZES)
        z = (np.log(n) - ln.mean()) / (ln.max() - ln.min())
        return n, theta + 0.20 * z, 0.15
    raise ValueError(f"unknown setting {name!r}")


def subject_means(rng, n, mu, base):
    mu = np.clip(mu, -2 * base + 1e-9, 2 * base - 1e-9)
    nb = rng.binomial(n, base + mu / 2)
    na = rng.binomial(n - nb, (base - mu / 2) / (1 - base - mu / 2))
    return (nb - na) / n


def subject_verdicts(name: str, reps: int, k: int, *, theta: float = 0.0, assume: str = "none", looks: int = 1,
                     alpha: float = ALPHA):
    """Final recorded new-subjects verdicts (reps,): one anytime-valid test with all of alpha.

    With ``looks`` > 1 every item arrives at a uniformly random look, each subject enters at the look
    of its first item with its mean then, and the test reads the prefix of the (index) order entered.
    """
    rng = np.random.default_rng(seed("subjects", name, k, theta, assume, looks))
    n, mu, base = subject_population(name, rng, reps, k, theta)
    out = np.empty(reps, dtype=object)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        if looks == 1:
            x = subject_means(rng, n, mu, base)
            for r in range(reps):
                out[r] = subject_e_process(x[r], np.array([k]), alpha=alpha, n_planned=k, assume=assume).verdict[-1]
            return out
        counts = rng.multinomial(n.reshape(-1), np.full(looks, 1.0 / looks)).reshape(reps, k, looks)
        first = np.argmax(counts > 0, axis=-1)
        m = np.take_along_axis(counts, first[..., None], axis=-1)[..., 0]
        x = subject_means(rng, m, mu, base)
        for r in range(reps):
            entered = first[r][None, :] <= np.arange(looks)[:, None]
            cum = np.where(entered.all(axis=1), k, np.argmin(entered, axis=1))
            if cum[-1] == 0:
                out[r] = "inconclusive"
                continue
            start = int(np.argmax(cum > 0))
            out[r] = subject_e_process(x[r], cum[start:], alpha=alpha, n_planned=k, assume=assume).verdict[-1]
    return out


# --------------------------------------------------------------------------------------
# the table


# --------------------------------------------------------------------------------------
# the items question's first look with unequal sharing (issue #36's review)

#: (store sizes, items shared at the first look, subject gaps, fractional scores) - a log written one subject at
#: a time shares a large subject barely and a small one fully. ``reviewer20`` / ``reviewer40``: subject A of 3,000
#: items (20 / 40 shared) at -2 points, B of 30 items all shared and all wins: the store's gap is -1 point, and the
#: pooled bets claimed "improved" in 54.1% / 42.2% of runs. ``three_at0``: three subjects, the smallest shared
#: fully at a +100 point gap (boundary rate), the store's gap exactly 0. ``absent_at0``: a third subject not shared
#: at all (counted at the worst case, margin w0 / (1 - w0)) whose -30 point gap makes the store's gap 0.
#: ``fractional``: ``reviewer20`` with each difference scaled by U(0.5, 1). ``power_unequal``: A 80 of 3,000
#: shared at +25 points, B as above; ``power_proportional``: four subjects shared at a quarter each, +25 points.
UNEQUAL = {
    "reviewer20": ((3000, 30), (20, 30), (-0.02, 1.0), False),
    "reviewer40": ((3000, 30), (40, 30), (-0.02, 1.0), False),
    "three_at0": ((1000, 200, 20), (15, 5, 20), (-0.02, 0.0, 1.0), False),
    "absent_at0": ((2000, 30, 100), (20, 30, 0), (0.0, 1.0, -0.3), False),
    "fractional": ((3000, 30), (20, 30), (-0.02, 1.0), True),
    "power_unequal": ((3000, 30), (80, 30), (0.25, 1.0), False),
    "power_proportional": ((40, 80, 120, 160), (10, 20, 30, 40), (0.25, 0.25, 0.25, 0.25), False),
}


def unequal_first_looks(name: str, reps: int, *, a1: float = ALPHA * SHARE, pooled: bool = False):
    """The items first look (:func:`benchcert.tasks.compare.recorded.items_first` at ``a1``, the margin of
    :func:`benchcert.tasks.compare.recorded.absent_weight`) on ``reps`` draws of an :data:`UNEQUAL` setting:
    (claims "improved", claims "regressed", the store's gap, the largest effective number of nonzero differences).
    Subject s's differences are +1 / -1 with probabilities b + g/2 and b - g/2, b = max(0.05, |g| / 2).
    ``pooled`` runs the bets as they were before the review (unweighted shared items, at the margin) instead."""
    store, shared, gaps, frac = (np.asarray(v) for v in UNEQUAL[name])
    store = store.astype(float)
    rng = np.random.default_rng(seed("unequal", name))
    subj = np.repeat(np.arange(store.size), shared)
    margin = absent_weight(store, np.unique(subj))[1]
    base = np.maximum(0.05, np.abs(gaps) / 2)
    up = down = 0
    n_eff = 0.0
    for _ in range(reps):
        u = rng.random(subj.size)
        b, g = base[subj], gaps[subj]
        d = np.where(u < b + g / 2, 1.0, np.where(u > 1 - (b - g / 2), -1.0, 0.0))
        if frac:
            d = d * (0.5 + 0.5 * rng.random(subj.size))
        sq = d * d
        n_eff = max(n_eff, float(sq.sum() ** 2 / (sq * sq).sum()) if sq.any() else 0.0)
        p, est = (_pooled_first(d, subj, store, a1, margin) if pooled else items_first(d, subj, store, a1, margin)[:2])
        up, down = up + (p <= a1 and est > 0), down + (p <= a1 and est < 0)
    gap = float((store * gaps).sum() / store.sum()) * (0.75 if frac else 1.0)
    return up, down, gap, n_eff


def _pooled_first(d, subj, store, a1, margin):
    """The first look's bets before the review: the shared items pooled, at the margin (no reweighting)."""
    r = betting_test(d, np.array([d.size]), alpha=a1, margin=margin, interval=False)
    lp, lm = float(r.log_e_improved[-1]), float(r.log_e_regressed[-1])
    p, side = min(1.0, 2.0 * np.exp(-max(lp, lm))), (1.0 if lp > lm else -1.0)
    n_s = np.bincount(subj, minlength=store.size)
    est = float((store * np.where(n_s > 0, np.bincount(subj, weights=d, minlength=store.size) / np.maximum(n_s, 1),
                                  0.0)).sum() / store.sum())
    return (1.0 if side * est <= 0 else p), est


#: The items question's whole recorded verdict over several looks with unequal sharing (issue #36): per subject
#: (store items, gap, shared items, first look, last look); a subject's shared items land at uniformly random looks
#: in [first, last] (ragged batches). ``late_at0``: A 3,000 items barely shared, B 30 items all shared and all won
#: at look 1, C 300 items entering at look 4; store gap exactly 0. ``late_minus1``: the same at a store gap of -1
#: point. ``ragged_minus1``: four subjects over 10 looks, D entering at look 6, store gap -1 point.
#: ``power_late``: ``late_at0`` with 600 of A's items shared and every gap raised by 8 points (store gap +7.9
#: points); ``power_prop``: four subjects each shared at a fifth of its store items per look over 5 looks, +3 points
#: (every look in proportion).
UNEQUAL_LOOKS = {
    "late_at0": (8, ((3000, -0.01, 160, 1, 8), (30, 1.0, 30, 1, 1), (300, 0.0, 150, 4, 8))),
    "late_minus1": (8, ((3000, -0.0211, 160, 1, 8), (30, 1.0, 30, 1, 1), (300, 0.0, 150, 4, 8))),
    "ragged_minus1": (10, ((2000, -0.0455, 60, 1, 10), (30, 1.0, 30, 1, 3), (500, 0.02, 100, 1, 10),
                           (50, 0.5, 50, 6, 6))),
    "power_late": (8, ((3000, 0.07, 600, 1, 8), (30, 1.0, 30, 1, 1), (300, 0.08, 150, 4, 8))),
    "power_prop": (5, ((500, 0.03, 500, 0, 0), (1000, 0.03, 1000, 0, 0), (250, 0.03, 250, 0, 0),
                       (2000, 0.03, 2000, 0, 0))),
}


def unequal_looks(name: str, reps: int, *, pooled: bool = False, alpha: float = ALPHA, share: float = SHARE):
    """(claims "improved", claims "regressed", the store's gap) of the whole recorded items verdict at the last look
    of an :data:`UNEQUAL_LOOKS` setting: the first look (``items_first`` at alpha x share, the margin of the
    subjects not shared at look 1), the anytime part at the rest (``items_anytime``; ``pooled``: as
    ``stratified_store_weights`` ran it), nightly_verdicts. Differences as :func:`unequal_first_looks`; a subject
    with first look 0 is shared in proportion (a fifth of its items at each look)."""
    looks, spec = UNEQUAL_LOOKS[name]
    store = np.array([v[0] for v in spec], dtype=float)
    gaps = np.array([v[1] for v in spec])
    rng = np.random.default_rng(seed("unequal looks", name))
    up = down = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        for _ in range(reps):
            d, subj, look = _unequal_run(rng, spec, gaps, looks)
            one = look == 1
            strata = np.unique(subj[one])
            w0, margin = absent_weight(store, strata)
            p1, g1 = items_first(d[one], subj[one], store, alpha * share, margin)[:2]
            if pooled:
                nb, na, n = (np.zeros((store.size, looks), dtype=np.int64) for _ in range(3))
                for arr, sel in ((nb, d == 1.0), (na, d == -1.0), (n, np.ones(d.size, bool))):
                    np.add.at(arr, (subj[sel], look[sel] - 1), 1)
                seq = _items_betting(nb, na, n, strata, w0, margin, alpha * (1 - share))
            else:
                seq = items_anytime(d, subj, look, store, alpha * (1 - share), n_looks=looks, interval=False)[0]
            v = nightly_verdicts(p1, g1, seq, alpha=alpha, first_look_share=share).verdict[-1]
            up, down = up + (v == "improved"), down + (v == "regressed")
    return up, down, float((store * gaps).sum() / store.sum())


def _unequal_run(rng, spec, gaps, looks):
    """One run of an :data:`UNEQUAL_LOOKS` setting with subject gaps ``gaps``: (d, subject, look) per item."""
    base = np.maximum(0.05, np.abs(gaps) / 2)
    per = np.zeros((len(spec), looks), dtype=np.int64)
    for s, (_, _, k, first, last) in enumerate(spec):
        if first == 0:
            per[s] = k // looks
        else:
            per[s] = np.bincount(rng.integers(first, last + 1, k) - 1, minlength=looks)
    subj = np.repeat(np.repeat(np.arange(len(spec)), looks), per.reshape(-1))
    look = np.repeat(np.tile(np.arange(1, looks + 1), len(spec)), per.reshape(-1))
    u = rng.random(subj.size)
    b, g = base[subj], gaps[subj]
    return np.where(u < b + g / 2, 1.0, np.where(u > 1 - (b - g / 2), -1.0, 0.0)), subj, look


def unequal_sequence_misses(name: str, reps: int, *, shift: float = 0.0, alpha: float = ALPHA * (1 - SHARE),
                            pooled: bool = False):
    """(runs whose anytime interval lies wholly above the store's gap at some look, runs wholly below it, the
    store's gap) for an :data:`UNEQUAL_LOOKS` setting with every subject gap moved by ``shift`` (clipped to
    [-1, 1]): the confidence sequence of :func:`benchcert.stats.store_batches.store_weighted_batches` (the
    verdict's ``cs_lower`` / ``cs_upper``) at ``alpha``; ``pooled``: the pooled
    :func:`benchcert.stats.sequential.betting_test` on the shared items instead. The sequence is intersected over
    looks, so the last look's interval is the one to judge."""
    looks, spec = UNEQUAL_LOOKS[name]
    store = np.array([v[0] for v in spec], dtype=float)
    gaps = np.clip(np.array([v[1] for v in spec]) + shift, -1.0, 1.0)
    truth = float((store * gaps).sum() / store.sum())
    rng = np.random.default_rng(seed("unequal sequence", name, shift))
    above = below = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        for _ in range(reps):
            d, subj, look = _unequal_run(rng, spec, gaps, looks)
            if pooled:
                order = np.argsort(look, kind="stable")
                seq = betting_test(d[order], np.cumsum(np.bincount(look, minlength=looks + 1)[1:]), alpha=alpha)
            else:
                seq = items_anytime(d, subj, look, store, alpha, n_looks=looks)[0]
            above, below = above + bool(seq.lower[-1] > truth), below + bool(seq.upper[-1] < truth)
    return above, below, truth


def _fmt(hits, reps):
    from simcheck import rate_ci

    rate, lo, hi = rate_ci(hits, reps, level=0.95)
    return f"{100 * rate:5.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]"


def main(reps: int = 2000) -> None:  # pragma: no cover - the study; the slow tests assert on it
    print(f"items question, recorded verdict (alpha {ALPHA}, first-look share {SHARE}), {reps} runs per row")
    for name, theta in (("power91", 0.02), ("power30", 0.02), ("power30", 0.03)):
        v, _ = items_verdicts(name, reps, theta=theta)
        print(f"  power  {name:13s} gap {100 * theta:.0f} pts, 1 look: improved {_fmt(v == 'improved', reps)}")
    for arrival in ("spread", "random"):
        v, _ = items_verdicts("power91", reps // 2, theta=0.02, looks=30, arrival=arrival)
        print(f"  power  power91       gap 2 pts, 30 looks {arrival}: improved by the last {_fmt(v == 'improved', reps // 2)}")
    for name in ("F1", "F2", "F3", "near_ceiling"):
        for looks, arrival in ((1, "one"), (30, "spread"), (30, "random")):
            v, est = items_verdicts(name, reps, looks=looks, arrival=arrival)
            print(f"  false  {name:13s} {looks:2d} looks {arrival:6s}: improved "
                  f"{_fmt((v == 'improved') & (est <= 0), reps)}, regressed {_fmt((v == 'regressed') & (est >= 0), reps)}")
    print("items question, unequal sharing over several looks (recorded_sim.unequal_looks), whole verdict")
    for name in UNEQUAL_LOOKS:
        for pooled in (False, True):
            up, down, gap = unequal_looks(name, reps // 2, pooled=pooled)
            print(f"  {name:14s} store gap {100 * gap:+.1f} pts, anytime part "
                  f"{'pooled (stratified_store_weights)' if pooled else 'store_weighted_batches'}: improved "
                  f"{_fmt(up, reps // 2)}, regressed {_fmt(down, reps // 2)}")
    print("new-subjects question (one anytime-valid test, all of alpha)")
    for name, k, theta, assume in (("sym", 91, 0.05, "none"), ("sym_wide", 91, 0.05, "none"),
                                   ("sym", 30, 0.05, "symmetric"), ("sym", 30, 0.08, "symmetric"),
                                   ("sym_wide", 30, 0.05, "symmetric"), ("sym_wide", 30, 0.08, "symmetric")):
        v = subject_verdicts(name, reps, k, theta=theta, assume=assume)
        print(f"  power  {name:10s} k={k:3d} gap {100 * theta:.0f} pts, --assume {assume:9s}: "
              f"{_fmt(v == 'improved', reps)}")
    for name, k, assume, looks in (("sym", 30, "symmetric", 1), ("sym_wide", 30, "symmetric", 1),
                                   ("sym", 91, "symmetric", 30), ("sym", 91, "none", 1), ("sym", 30, "none", 30),
                                   ("size_swing", 30, "none", 1), ("size_swing", 30, "symmetric", 1),
                                   ("size_swing", 91, "symmetric", 1), ("size_swing", 91, "symmetric", 30),
                                   ("F1", 30, "none", 1), ("F1", 30, "symmetric", 1), ("F1", 91, "symmetric", 1)):
        v = subject_verdicts(name, reps, k, assume=assume, looks=looks)
        print(f"  false  {name:10s} k={k:3d} --assume {assume:9s} {looks:2d} looks: improved "
              f"{_fmt(v == 'improved', reps)}, regressed {_fmt(v == 'regressed', reps)}")


if __name__ == "__main__":  # pragma: no cover
    import sys

    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
