"""Calibration summaries of predicted class probabilities: Brier score, log loss, ECE, reliability.

These are the numbers users expect beside the black-box goodness-of-fit test
(:mod:`benchcert.stats.gof`): the test asks whether the probabilities could have produced
the labels; these say how far off they are on average, in the usual units.

* Brier score (multi-class, Brier 1950): mean over items of sum_k (p_ik - 1{y_i = k})^2,
  in [0, 2] (for two classes this is twice the binary "(p - y)^2" convention).
* Log loss: mean of -log p_{i, y_i} (natural log; infinite when a label was given
  probability 0 - reported as infinity with a warning, never clipped).
* Both are means of independent per-item losses, so each gets a bootstrap-free interval:
  mean +/- t_{n-1, 1-alpha/2} s / sqrt(n) (central limit theorem; assumes independent items).
* Expected calibration error of the top label (Guo et al. 2017): items binned by their
  largest probability into ``n_bins`` equal-width bins of [0, 1] (default 15, right-closed,
  the first bin also holding 0); ECE = sum_b (n_b / n) |accuracy_b - confidence_b|.  ECE is
  a biased plug-in (it is positive even for perfectly calibrated probabilities, by about
  sqrt(bins / n)) and has no standard bootstrap-free interval, so none is given; instead
  ``ece_null`` reports the mean ECE that *perfectly calibrated* probabilities with the same
  confidences would show at this n (labels redrawn from the probabilities), so a reader can
  see how much of the ECE is noise.
* Reliability diagram: per bin, the count, mean confidence, accuracy and the Wilson
  interval of the accuracy.

Pure numpy/scipy; no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtri
from benchcert.stats._dist import t as student_t

from .degenerate import warn_degenerate
from .validation import check_alpha
from .gof import _check_labels, _rng, check_probabilities
from .intervals import wilson_interval

__all__ = ["CalibrationResult", "LossResult", "ReliabilityBins", "calibration_summary", "brier_score", "log_loss",
           "expected_calibration_error"]

DEFAULT_BINS = 15


@dataclass(frozen=True)
class LossResult:
    """A mean per-item loss with its two-sided 1 - alpha CLT interval."""

    estimate: float
    lower: float
    upper: float
    se: float
    alpha: float
    n: int
    method: str
    assumptions: tuple[str, ...]


@dataclass(frozen=True)
class ReliabilityBins:
    """Reliability-diagram data for top-label confidence, one entry per non-empty bin."""

    bin_lower: np.ndarray
    bin_upper: np.ndarray
    count: np.ndarray
    confidence: np.ndarray
    accuracy: np.ndarray
    accuracy_lower: np.ndarray
    accuracy_upper: np.ndarray


@dataclass(frozen=True)
class CalibrationResult:
    """Brier score, log loss, top-label ECE and reliability bins for one set of predictions.

    ``ece_null`` is the mean ECE of perfectly calibrated probabilities with the same
    confidences at this n (Monte Carlo, ``null_draws`` label redraws from ``rng``).
    """

    brier: LossResult
    log_loss: LossResult
    ece: float
    ece_null: float
    n_bins: int
    binning: str
    accuracy: float
    mean_confidence: float
    reliability: ReliabilityBins
    alpha: float
    n: int
    n_labels: int
    method: str
    assumptions: tuple[str, ...]


def _iv(labels, probs, alpha):
    p = check_probabilities(probs)
    y = _check_labels(labels, p.shape[0], p.shape[1])
    if p.shape[0] < 2:
        raise ValueError(f"calibration summaries need at least 2 items; got {p.shape[0]}")
    return y, p, check_alpha(alpha)


_LOSS_ASSUMPTIONS = ("items are independent (a mean of per-item losses; CLT interval with Student t quantile)",)


def _mean_interval(losses: np.ndarray, alpha: float, method: str, extra: tuple[str, ...] = ()) -> LossResult:
    n = losses.size
    est = float(losses.mean())
    if not math.isfinite(est):
        warn_degenerate(f"{method}: a label was given probability 0, so the loss is infinite; no interval")
        return LossResult(est, math.nan, math.nan, math.nan, alpha, n, method, _LOSS_ASSUMPTIONS + extra)
    se = float(losses.std(ddof=1) / math.sqrt(n))
    q = float(student_t.ppf(1 - alpha / 2, n - 1))
    return LossResult(est, est - q * se, est + q * se, se, alpha, n, method, _LOSS_ASSUMPTIONS + extra)


def brier_score(labels, probs, *, alpha: float = 0.05) -> LossResult:
    """Multi-class Brier score sum_k (p_k - 1{y = k})^2 averaged over items, with a CLT interval."""
    y, p, alpha = _iv(labels, probs, alpha)
    onehot = np.zeros_like(p)
    onehot[np.arange(len(y)), y] = 1.0
    losses = ((p - onehot) ** 2).sum(axis=1)
    return _mean_interval(losses, alpha, "brier", ("range [0, 2]; 0 = certain and right",))


def log_loss(labels, probs, *, alpha: float = 0.05) -> LossResult:
    """Mean of -log p_{y_i} (natural log), with a CLT interval; infinite (warned) when some p_{y_i} = 0."""
    y, p, alpha = _iv(labels, probs, alpha)
    py = p[np.arange(len(y)), y]
    with np.errstate(divide="ignore"):
        losses = -np.log(py)
    return _mean_interval(losses, alpha, "log_loss", ("natural log; not clipped",))


def _bins(conf: np.ndarray, n_bins: int) -> np.ndarray:
    # right-closed equal-width bins (0, 1/B], ..., ((B-1)/B, 1]; a confidence of 0 goes to the first
    return np.clip(np.ceil(conf * n_bins).astype(np.int64) - 1, 0, n_bins - 1)


def _ece(conf: np.ndarray, correct: np.ndarray, idx: np.ndarray, n_bins: int) -> float:
    sc = np.bincount(idx, weights=conf, minlength=n_bins)
    sa = np.bincount(idx, weights=correct, minlength=n_bins)
    return float(np.abs(sa - sc).sum() / conf.size)


def _check_bins(n_bins) -> int:
    if isinstance(n_bins, bool) or not isinstance(n_bins, (int, np.integer)) or not 1 <= n_bins <= 1000:
        raise ValueError(f"n_bins must be an integer in 1..1000; got {n_bins!r}")
    return int(n_bins)


def expected_calibration_error(labels, probs, *, n_bins: int = DEFAULT_BINS) -> float:
    """Top-label ECE with ``n_bins`` equal-width right-closed bins (see the module notes)."""
    y, p, _ = _iv(labels, probs, 0.05)
    n_bins = _check_bins(n_bins)
    top = p.argmax(axis=1)
    conf = p[np.arange(len(y)), top]
    return _ece(conf, (top == y).astype(float), _bins(conf, n_bins), n_bins)


def calibration_summary(labels, probs, *, n_bins: int = DEFAULT_BINS, alpha: float = 0.05, rng=None,
                        null_draws: int = 200) -> CalibrationResult:
    """All calibration summaries of one set of predictions (see the module notes for each).

    Parameters
    ----------
    labels : array_like of int, shape (n,)
    probs : array_like, shape (n, M)
        Predicted probabilities: finite, >= 0, rows summing to 1 (within 1e-4).
    n_bins : int
        Equal-width confidence bins for ECE and the reliability diagram (default 15).
    alpha : float
        1 - confidence of the Brier / log-loss intervals and the per-bin Wilson intervals.
    rng : numpy Generator, int or None
        For ``ece_null`` (labels redrawn from the probabilities).
    null_draws : int
        Redraws behind ``ece_null`` (0 to skip; it is then NaN).
    """
    y, p, alpha = _iv(labels, probs, alpha)
    n_bins = _check_bins(n_bins)
    if isinstance(null_draws, bool) or not isinstance(null_draws, (int, np.integer)) or null_draws < 0:
        raise ValueError(f"null_draws must be a non-negative integer; got {null_draws!r}")
    n, m = p.shape
    top = p.argmax(axis=1)
    conf = p[np.arange(n), top]
    correct = (top == y).astype(float)
    idx = _bins(conf, n_bins)
    ece = _ece(conf, correct, idx, n_bins)
    if null_draws:
        rng = _rng(rng)
        # perfectly calibrated labels: the top label is right with probability equal to its confidence
        # one draw at a time: memory stays O(n) however many draws
        ece_null = float(np.mean([_ece(conf, (rng.random(n) < conf).astype(float), idx, n_bins)
                                  for _ in range(null_draws)]))
    else:
        ece_null = math.nan
    cnt = np.bincount(idx, minlength=n_bins)
    keep = cnt > 0
    sc = np.bincount(idx, weights=conf, minlength=n_bins)[keep]
    sa = np.bincount(idx, weights=correct, minlength=n_bins)[keep]
    k = cnt[keep].astype(float)
    wilson = wilson_interval(sa / k, k, alpha=alpha)  # per-bin accuracy, as the comparator intervals
    lo, hi = np.atleast_1d(wilson.lower), np.atleast_1d(wilson.upper)
    edges = np.arange(n_bins + 1) / n_bins
    rel = ReliabilityBins(bin_lower=edges[:-1][keep], bin_upper=edges[1:][keep], count=cnt[keep],
                          confidence=sc / k, accuracy=sa / k, accuracy_lower=lo, accuracy_upper=hi)
    return CalibrationResult(
        brier=brier_score(y, p, alpha=alpha), log_loss=log_loss(y, p, alpha=alpha), ece=ece, ece_null=ece_null,
        n_bins=n_bins, binning=f"top-label confidence, {n_bins} equal-width right-closed bins of [0, 1]",
        accuracy=float(correct.mean()), mean_confidence=float(conf.mean()), reliability=rel, alpha=alpha,
        n=n, n_labels=m, method="calibration_summary",
        assumptions=("items are independent",
                     "ECE is a biased plug-in (positive even when calibrated); compare it with ece_null, "
                     "and use the goodness-of-fit test for a decision"))
