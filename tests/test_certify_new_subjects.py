"""Coverage of the new-subjects bounds when a subject's size depends on its difficulty.

The new-subjects question ("how would the model do on items of subjects it has not seen?") takes
the benchmark's subjects as independent draws (size, rate) from a population of subjects. Nothing
stops a benchmark from having big easy subjects and small hard ones, so the bounds must hold when
size and rate are related. Both bounds under test - the failure-rate bound
(:func:`failure_rate_upper_new_subjects`, one-sided) and the band of :func:`stratified_means` with
``new_clusters=True`` (two-sided, every environment at once) - weigh each subject equally; their
target is a new subject's expected rate, E[p_J] (per domain for the band).

Model (seeded). A subject's size is 2, 5, 20, 60 or 200 items (equally likely, except in
``few_big_easy``) and its failure rate p = expit(m_size + sigma u), u ~ N(0, 1), sigma = 1, with
the centre m_size depending on the size:

* ``graded``: rates 70%, 50%, 20%, 5%, 1% at the centre (big subjects easy);
* ``boundary``: 98%, 90%, 30%, 1% and exactly 0 (the 200-item subjects never fail);
* ``reversed``: 1%, 5%, 20%, 50%, 70% (big subjects hard; for the band's other side);
* ``few_big_easy``: sizes 2 (70% of subjects, rate 98% at the centre) and 200 (30%, rate exactly 0).

Items are clustered beyond the shared rate: in half of the subjects (at random) all items share
one Bernoulli(p) draw, in the others they are independent given p. The truth E[p_J] is the
average over the sizes, weighted by their probabilities, of E[expit(m_size + sigma Z)]
(Gauss-Hermite quadrature; 0 for m = -inf). The band is on scores, 1 - failed, of two domains.
A run covers when the bound is on the right side of the truth (the band: for every environment at
once). The claim, coverage >= 1 - alpha, is judged by the 95% Clopper-Pearson lower bound of the
simulated rate (a true coverage of 0.87 at alpha = 0.1 passes with probability 7e-7 in the
failure bound's 1000 runs and 9e-5 in the band's 400).

Measured with these seeds at alpha = 0.1: coverage % [95% Clopper-Pearson interval], before the
fix (subjects weighted by their items, w_j = n_j / n, Hoeffding on Kish's J_eff) -> after (every
subject weighs 1/J, Hoeffding on J).

Failure bound, 1000 runs:
  graded        J=5   100 [99.6, 100]      -> 100 [99.6, 100]
                J=10  100 [99.6, 100]      -> 100 [99.6, 100]
                J=40  82.7 [80.2, 85.0]    -> 99.9 [99.4, 100]
  boundary      J=5   100 [99.6, 100]      -> 100 [99.6, 100]
                J=10  97.7 [96.6, 98.5]    -> 99.1 [98.3, 99.6]
                J=40  1.8 [1.1, 2.8]       -> 98.7 [97.8, 99.3]
  few_big_easy  J=5   83.4 [80.9, 85.7]    -> 99.5 [98.8, 99.8]
                J=10  38.8 [35.8, 41.9]    -> 98.7 [97.8, 99.3]
                J=40  0.0 [0.0, 0.4]       -> 99.1 [98.3, 99.6]
Band (all three environments at once), 400 runs:
  graded J=5 + reversed J=40               71.0 [66.3, 75.4]  -> 100 [99.1, 100]
  few_big_easy J=10 + boundary J=10        84.2 [80.3, 87.7]  -> 99.8 [98.6, 100]
  reversed J=40 + few_big_easy J=6         73.8 [69.1, 78.0]  -> 99.5 [98.2, 99.9]

The old code fails 5 of the 9 failure-bound checks and all 3 band checks. With few subjects it
often covered only because Hoeffding on 2-3 effective subjects is nearly [0, 1]; with 40 subjects
its pooled rate sat far from a new subject's (``few_big_easy``: 30% of subjects have 200 items
and never fail, 70% have 2 items and fail about 97% of the time; the pooled rate is about 2%, a
new subject's 68%).
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from scipy.special import expit, logit

from benchcert.stats.certify import failure_rate_upper_new_subjects, stratified_means

from simcheck import rate_ci

SIZES = np.array([2, 5, 20, 60, 200])
EVEN = np.full(5, 0.2)
#: setting: (subject sizes, their probabilities, centre of the failure rate of each size on the logit scale)
SETTINGS = {"graded": (SIZES, EVEN, logit(np.array([0.7, 0.5, 0.2, 0.05, 0.01]))),
            "boundary": (SIZES, EVEN, np.r_[logit(np.array([0.98, 0.9, 0.3, 0.01])), -np.inf]),
            "reversed": (SIZES, EVEN, logit(np.array([0.01, 0.05, 0.2, 0.5, 0.7]))),
            "few_big_easy": (np.array([2, 200]), np.array([0.7, 0.3]), np.array([logit(0.98), -np.inf]))}
SIGMA = 1.0
ALPHA = 0.1


def _new_subject_rate(setting):
    """E[p_J] for a new subject J: sizes equally likely, the random effect integrated out."""
    _, probs, centre = SETTINGS[setting]
    z, w = np.polynomial.hermite_e.hermegauss(80)
    per_size = [0.0 if m == -np.inf else float(np.sum(w * expit(m + SIGMA * z)) / np.sqrt(2 * np.pi))
                for m in centre]
    return float(np.dot(probs, per_size))


def _subjects(rng, setting, J):
    """(failed items, subject label of each item) of J subjects drawn from the population."""
    size_of, probs, centre = SETTINGS[setting]
    s = rng.choice(size_of.size, size=J, p=probs)
    sizes = size_of[s]
    p = expit(centre[s] + SIGMA * rng.standard_normal(J))
    lab = np.repeat(np.arange(J), sizes)
    shared = np.repeat(rng.random(J) < 0.5, sizes)                    # all items of the subject move together
    one = np.repeat(rng.random(J), sizes)
    failed = np.where(shared, one, rng.random(lab.size)) < p[lab]
    return failed, lab


def failure_coverage(setting, J, reps, seed):
    rng = np.random.default_rng(seed)
    truth = _new_subject_rate(setting)
    hits = np.empty(reps, dtype=bool)
    for r in range(reps):
        failed, lab = _subjects(rng, setting, J)
        hits[r] = failure_rate_upper_new_subjects(failed, lab, alpha=ALPHA).upper >= truth - 1e-12
    return hits


# Two domains (atoms) with their own subject populations; the band covers both and a mix at once.
P = np.array([[1.0, 0.0], [0.0, 1.0], [0.3, 0.7]])


def band_coverage(settings, Js, reps, seed):
    rng = np.random.default_rng(seed)
    truth = P @ np.array([1.0 - _new_subject_rate(s) for s in settings])    # scores: 1 - failure rate
    hits = np.empty(reps, dtype=bool)
    for r in range(reps):
        samples, labels = [], []
        for s, J in zip(settings, Js):
            failed, lab = _subjects(rng, s, J)
            samples.append(1.0 - failed)
            labels.append(lab)
        b = stratified_means(samples, [x.size for x in samples], P, delta=ALPHA, finite_population=False,
                             clusters=labels, new_clusters=True)
        hits[r] = bool(np.all((b.lower <= truth + 1e-12) & (truth <= b.upper + 1e-12)))
    return hits


@pytest.mark.parametrize("J", [5, 10, 40])
@pytest.mark.parametrize("setting", ["graded", "boundary", "few_big_easy"])
def test_failure_bound_for_new_subjects_holds_when_size_tracks_difficulty(setting, J):
    hits = failure_coverage(setting, J, 1000, zlib.crc32(f"failure/{setting}/{J}".encode()))
    rate, lo, hi = rate_ci(hits, hits.size, level=0.95)
    assert lo >= 1 - ALPHA, (setting, J, rate, lo, hi)


@pytest.mark.parametrize("settings, Js", [(("graded", "reversed"), (5, 40)),
                                          (("few_big_easy", "boundary"), (10, 10)),
                                          (("reversed", "few_big_easy"), (40, 6))])
def test_new_subjects_band_holds_when_size_tracks_difficulty(settings, Js):
    hits = band_coverage(settings, Js, 400, zlib.crc32(f"band/{settings}/{Js}".encode()))
    rate, lo, hi = rate_ci(hits, hits.size, level=0.95)
    assert lo >= 1 - ALPHA, (settings, Js, rate, lo, hi)
