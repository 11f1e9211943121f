"""Tests for benchcert.stats.calibration.

Reference values: scikit-learn's log_loss and a direct Brier/ECE loop (oracles); the
interval claims are checked by seeded Monte Carlo against a 99% Clopper-Pearson interval.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from sklearn.metrics import log_loss as sk_log_loss

from simcheck import rate_ci
from benchcert.stats.degenerate import DegenerateDataWarning
from benchcert.stats.calibration import (
    brier_score,
    calibration_summary,
    expected_calibration_error,
    log_loss,
)


def _dirichlet_case(rng, n=500, m=4):
    p = rng.dirichlet(np.ones(m) * 0.7, size=n)
    y = np.array([rng.choice(m, p=row) for row in p])
    return y, p


def test_brier_and_log_loss_match_direct_computation_and_sklearn():
    y, p = _dirichlet_case(np.random.default_rng(1))
    onehot = np.eye(4)[y]
    assert brier_score(y, p).estimate == pytest.approx(np.mean(np.sum((p - onehot) ** 2, axis=1)), rel=1e-12)
    assert log_loss(y, p).estimate == pytest.approx(sk_log_loss(y, p, labels=range(4)), rel=1e-9)


def _ece_loop(y, p, bins):
    conf = p.max(axis=1)
    pred = p.argmax(axis=1)
    total = 0.0
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        inb = (conf > lo) & (conf <= hi) if b else (conf >= 0) & (conf <= hi)
        if inb.any():
            total += inb.sum() / len(y) * abs((pred[inb] == y[inb]).mean() - conf[inb].mean())
    return total


@pytest.mark.parametrize("bins", [1, 10, 15])
def test_ece_matches_a_loop_over_bins(bins):
    y, p = _dirichlet_case(np.random.default_rng(2))
    assert expected_calibration_error(y, p, n_bins=bins) == pytest.approx(_ece_loop(y, p, bins), abs=1e-12)


def test_reliability_bins_add_up():
    y, p = _dirichlet_case(np.random.default_rng(3))
    r = calibration_summary(y, p, rng=0)
    rel = r.reliability
    assert rel.count.sum() == len(y)
    assert np.all((rel.confidence > rel.bin_lower) & (rel.confidence <= rel.bin_upper + 1e-12))
    assert np.all((rel.accuracy_lower <= rel.accuracy) & (rel.accuracy <= rel.accuracy_upper))
    assert r.ece == pytest.approx(np.sum(rel.count * np.abs(rel.accuracy - rel.confidence)) / len(y))
    assert r.accuracy == pytest.approx(np.mean(p.argmax(1) == y))


def test_calibrated_predictions_have_ece_near_its_null_and_miscalibrated_ones_do_not():
    rng = np.random.default_rng(4)
    y, p = _dirichlet_case(rng, n=2000)
    good = calibration_summary(y, p, rng=1)
    # ECE of calibrated probabilities is noise of the size ece_null predicts
    assert good.ece < 2.5 * good.ece_null
    # sharpen the probabilities (overconfidence): ECE grows far beyond the null level
    sharp = p ** 3 / (p ** 3).sum(axis=1, keepdims=True)
    bad = calibration_summary(y, sharp, rng=1)
    assert bad.ece > 4 * bad.ece_null


@pytest.mark.montecarlo
def test_brier_interval_covers_at_nominal_level():
    # Known truth: probabilities from a fixed Dirichlet design, labels drawn from them;
    # the expected Brier score is E sum_k p_k (1 - p_k) ... computed exactly per item and averaged.
    rng = np.random.default_rng(5)
    n, reps = 300, 400
    p = rng.dirichlet(np.ones(3), size=n)
    truth_brier = float(np.mean(1 - np.sum(p ** 2, axis=1)))   # E[sum_k (p_k - 1{Y=k})^2] = 1 - sum p_k^2
    truth_ll = float(np.mean(-np.sum(p * np.log(p), axis=1)))  # entropy
    cov_b = cov_l = 0
    for _ in range(reps):
        y = (rng.random(n)[:, None] > np.cumsum(p, axis=1)).sum(axis=1)
        b, ll = brier_score(y, p), log_loss(y, p)
        cov_b += b.lower <= truth_brier <= b.upper
        cov_l += ll.lower <= truth_ll <= ll.upper
    for hits in (cov_b, cov_l):  # observed 0.95 / 0.945 (seed 5)
        rate, lo, hi = rate_ci(hits, reps)
        assert lo <= 0.95 <= hi, rate


def test_zero_probability_on_the_label_gives_infinite_log_loss_with_a_warning():
    y = np.array([0, 1, 1, 0])
    p = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.5, 0.5]])
    with pytest.warns(DegenerateDataWarning, match="infinite"):
        r = log_loss(y, p)
    assert math.isinf(r.estimate) and math.isnan(r.lower)


@pytest.mark.parametrize("probs, fragment", [
    ([[0.5, 0.6], [0.5, 0.5]], "row 0 sums to 1.1"),
    ([[-0.1, 1.1], [0.5, 0.5]], "row 0 has a negative"),
    ([[0.5, 0.5], [np.nan, 1.0]], "row 1 is not finite"),
    ([0.5, 0.5], "2-D"),
])
def test_bad_probabilities_are_refused_with_the_row(probs, fragment):
    with pytest.raises(ValueError, match=fragment):
        calibration_summary([0, 1][: len(probs)] if len(probs) == 2 else [0], probs)


def test_bad_labels_and_settings_are_refused():
    p = np.full((3, 2), 0.5)
    with pytest.raises(ValueError, match="labels must lie in 0..1"):
        brier_score([0, 1, 2], p)
    with pytest.raises(ValueError, match="n_bins"):
        calibration_summary([0, 1, 0], p, n_bins=0)
    with pytest.raises(ValueError, match="alpha"):
        log_loss([0, 1, 0], p, alpha=1.5)


def test_no_warning_on_ordinary_input():
    y, p = _dirichlet_case(np.random.default_rng(6), n=50)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        calibration_summary(y, p, rng=0)
