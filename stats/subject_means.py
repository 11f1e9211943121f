r"""Fixed-sample test of the subject-weighted mean gap (each subject counts once).

The checkpoint verdict's "subjects" question (benchcert.tasks.verdicts) is answered about ONE
estimand in all its parts: the subject-weighted mean gap

.. math:: \theta_{S} = E_s[\mu_s], \qquad \mu_s = \text{mean of } D_i = b_i - a_i
          \text{ over subject s's items},

the expectation over the population of subjects the benchmark's subjects are a sample of. Its
anytime-valid part bets on subject means (:func:`benchcert.stats.sequential.subject_entry_means`),
whose null is exactly :math:`\theta_S \le 0`; this module gives the fixed-sample test of the
same estimand for the first look: a one-sample t-test on the subjects' mean differences.

Why not the item-weighted gap :math:`E[\sum_{i \in s} D_i]/E[n_s]` (the ratio the clustered CR2
test of benchcert.stats.comparisons targets)? Its anytime-valid part would have to bet on
subject SUMS scaled by a fixed cap C, :math:`X_s = \sum_{i \in s} D_i / C \in [-1, 1]`. Each
subject enters the betting test once, with the items it has at its first look (a later item of
the subject would enter the test conditionally on its subject's earlier items, which is the
invalid item-level construction). When items arrive a few per subject per look, a subject's
entry sum weights it by its items AT ENTRY, not by its size: for sizes 5..200 spread over 30
looks, a 5-item subject enters with about 1 item and a 200-item subject with about 7, so the
betting test's null would be neither item- nor subject-weighted. A subject's entry MEAN, in
contrast, has expectation :math:`\mu_s` however few items it has at entry (its items arrive in
an order unrelated to their scores), so the subject-weighted estimand is the one a test over
looks can hold to. A cap would add two more problems: it must be fixed before the data (a cap
chosen from the first look's subject sizes is not predictable for the first look's units), and
a later subject larger than the cap could only be clipped (clipping a large negative subject
sum makes the candidate look better: a false "improved") or refused.

The item-weighted gap of the shared items (the accuracy difference a leaderboard shows) is a
different estimand; with unequal subject sizes and gaps that vary with size the two can have
opposite signs, which is why the verdict reports only this one (``estimand``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from . import _dist as _st  # scipy.stats' t through scipy.special (importing scipy.stats costs ~0.5 s)

from ._common import check_alpha, check_power, warn_degenerate

__all__ = ["SubjectWeightedGap", "subject_weighted_gap", "subject_means", "SUBJECT_WEIGHTED", "ITEM_WEIGHTED"]

#: The estimand of the subjects question (named in every verdict that answers it).
SUBJECT_WEIGHTED = ("subject-weighted mean gap: the mean over subjects of each subject's mean difference "
                    "(candidate - baseline); every subject counts once, whatever its number of items")
#: The estimand of the items questions.
ITEM_WEIGHTED = ("item-weighted mean gap: the mean difference (candidate - baseline) over the shared items; "
                 "every item counts once")

_ASSUMPTIONS = (
    "estimand: the subject-weighted mean gap E_s[mu_s] over a population of subjects that the "
    "benchmark's subjects are an independent sample of (each subject counts once)",
    "each subject's mean difference is an unbiased estimate of its mu_s (its shared items are not "
    "chosen by their scores); subjects independent",
    "one-sample Student t on the subjects' means with K - 1 df (K subjects): the subject means "
    "are i.i.d. draws, so no cluster correction is needed; unequal subject sizes only make some "
    "means noisier, which the between-subject SD already contains",
    "two-sided level only: with skewed subject means (small noisy subjects on one side of the gap, "
    "big precise ones on the other) one direction errs more than alpha/2 - measured up to about "
    "twice alpha/2 at 30-40 subjects - while the two-sided error stays within alpha",
)


@dataclass(frozen=True)
class SubjectWeightedGap:
    """One-sample t-test of the subject-weighted mean gap (last axis of the input = subjects).

    Attributes
    ----------
    estimate : float or ndarray
        Mean of the subject means (the subject-weighted gap).
    lower, upper : float or ndarray
        Two-sided 1 - alpha t interval.
    se : float or ndarray
        SD of the subject means (ddof=1) / sqrt(K).
    df : float or ndarray
        K - 1.
    p_value : float or ndarray
        Two-sided p-value of H0: subject-weighted gap = 0.
    verdict : str or ndarray of str
        ``improved`` (interval above 0), ``regressed`` (below 0) or ``inconclusive``.
    mde : float or ndarray
        Smallest gap detected with probability ``power`` by this test (t quantiles on df).
    hoeffding_lower, hoeffding_upper : float or ndarray
        Finite-sample interval for the same estimand from Hoeffding's inequality on the K
        subject means in [-1, 1] (half-width sqrt(2 log(2/alpha) / K)).
    n_subjects : int or ndarray
    alpha, power : float
    method : str
    estimand : str
    assumptions : tuple of str
    """

    estimate: float | np.ndarray
    lower: float | np.ndarray
    upper: float | np.ndarray
    se: float | np.ndarray
    df: float | np.ndarray
    p_value: float | np.ndarray
    verdict: str | np.ndarray
    mde: float | np.ndarray
    hoeffding_lower: float | np.ndarray
    hoeffding_upper: float | np.ndarray
    n_subjects: int | np.ndarray
    alpha: float
    power: float
    method: str
    estimand: str
    assumptions: tuple[str, ...]


def subject_means(d, subjects) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean of ``d`` per subject code: (codes present, means, items per subject)."""
    x = np.asarray(d, dtype=float)
    g = np.asarray(subjects)
    if x.ndim != 1 or g.shape != x.shape or x.size == 0:
        raise ValueError(f"d and subjects must be 1-D arrays of one length >= 1; got shapes {x.shape} and {g.shape}")
    if not np.issubdtype(g.dtype, np.integer) or g.min() < 0:
        raise ValueError(f"subjects must be non-negative integer codes; got dtype {g.dtype}")
    if not np.all((x >= -1) & (x <= 1)):
        raise ValueError(f"d must lie in [-1, 1]; got {x[~((x >= -1) & (x <= 1))][0]!r}")
    cnt = np.bincount(g, minlength=int(g.max()) + 1)
    tot = np.bincount(g, weights=x, minlength=cnt.size)
    present = np.flatnonzero(cnt > 0)
    return present, tot[present] / cnt[present], cnt[present]


def _subject_weighted_gap_iv(means, alpha, power):
    alpha = check_alpha(alpha)
    power = check_power(power)
    try:
        m = np.asarray(means, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"means must be a numeric array of subject mean differences; got {means!r}") from exc
    if m.ndim == 0 or m.shape[-1] == 0:
        raise ValueError(f"means must have at least one subject on its last axis; got shape {m.shape}")
    ok = np.isnan(m) | ((m >= -1) & (m <= 1))
    if not ok.all():
        raise ValueError(f"means must lie in [-1, 1] (NaN = subject absent); got {m[~ok].flat[0]!r}")
    return m, alpha, float(power)


def subject_weighted_gap(means, *, alpha=0.05, power=0.8) -> SubjectWeightedGap:
    r"""Fixed-sample test and interval for the subject-weighted mean gap.

    Parameters
    ----------
    means : array_like, shape (K,) or (..., K)
        Each subject's mean difference b - a over its shared items, in [-1, 1]; NaN = the
        subject has no shared item (not counted). Leading axes are independent comparisons.
    alpha : float, keyword-only
        Two-sided level.
    power : float, keyword-only
        Power at which the minimum detectable effect is reported.

    Returns
    -------
    SubjectWeightedGap

    Notes
    -----
    With K subjects and means :math:`\bar D_1..\bar D_K`, :math:`\hat\theta_S = K^{-1}\sum_s \bar D_s`,
    :math:`SE = s/\sqrt K` (s the SD with ddof=1), interval
    :math:`\hat\theta_S \pm t_{K-1, 1-\alpha/2} SE`, p-value :math:`2 F_{t,K-1}(-|\hat\theta_S|/SE)`,
    MDE :math:`(t_{K-1,1-\alpha/2} + t_{K-1,\mathrm{power}}) SE`. If the subjects are an i.i.d.
    sample from a subject population, the :math:`\bar D_s` are i.i.d. with mean
    :math:`\theta_S = E\mu_s` (each subject's mean is unbiased for its :math:`\mu_s`, and a
    subject's size enters only through the noise of its mean), so this is the textbook
    one-sample t-test, valid by the CLT over subjects (the verdict uses it with 30 or more
    subjects). This is the cluster-level ("summary statistic") analysis of clustered data, which
    weights clusters equally - unlike the CR2 ratio estimator of
    :func:`benchcert.stats.comparisons.paired_comparison`, which weights items equally and so
    targets the item-weighted gap. With strongly skewed subject means (small noisy subjects on
    one side of the gap, big precise ones on the other) its one-sided error exceeds alpha/2: at
    alpha = 2.5% (the verdict's first-look share) 2.0-2.3% upward instead of 1.25% with 30-40
    subjects and a between-subject SD of the gap of 0.07 (tests/test_verdicts_estimand.py), and
    2.6-2.9% with no between-subject spread (one look, 10,000 reps: 2.65% at 30 subjects, 2.58% at
    40; 30 looks, 40 subjects: 2.90%, 95% CI [2.54, 3.29]). So the checkpoint verdict's
    directional claim (a false ``improved`` <= alpha/2, :func:`benchcert.stats.sequential.nightly_verdicts`)
    does NOT hold for the subjects question in that setting; its two-sided false-alarm rate (about
    3.1% there) does. A skewness-corrected t (Johnson 1978) or a studentized bootstrap on the
    subject means would be the mend. Hoeffding's inequality on the K means in
    [-1, 1] (Hoeffding 1963, Theorem 2) gives the finite-sample interval
    :math:`\hat\theta_S \pm \sqrt{2\log(2/\alpha)/K}` for the same estimand.

    Fewer than two subjects, or means with no spread, warn (:class:`DegenerateDataWarning`):
    with one subject the interval is [-1, 1] and p = 1; with zero spread the interval has zero
    width.
    """
    m, alpha, power = _subject_weighted_gap_iv(means, alpha, power)
    present = ~np.isnan(m)
    k = present.sum(axis=-1)
    kf = k.astype(float)
    x = np.where(present, m, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        est = x.sum(axis=-1) / kf
        ss = np.where(present, (m - est[..., None]) ** 2, 0.0).sum(axis=-1)
        sd = np.sqrt(ss / np.maximum(kf - 1.0, 1.0))
        se = sd / np.sqrt(kf)
    few = k < 2
    if np.any(k == 0):
        raise ValueError("means has no subject (all NaN) in some comparison; there is nothing to test")
    df = np.maximum(kf - 1.0, 1.0)
    tcrit = _st.t.ppf(1.0 - alpha / 2.0, df)
    if few.any():
        warn_degenerate("subject_weighted_gap: fewer than 2 subjects, so the between-subject variance cannot be "
                        "estimated; interval [-1, 1], p-value 1", stacklevel=2)
    # rounding leaves ~1e-17 where every mean is equal; treat it as zero spread
    se = np.where(se < 1e-12, 0.0, se)
    flat = (se == 0) & ~few
    if flat.any():
        warn_degenerate("subject_weighted_gap: every subject has the same mean difference; zero-width interval",
                        stacklevel=2)
    with np.errstate(divide="ignore", invalid="ignore"):
        tstat = np.where(se > 0, est / np.where(se > 0, se, 1.0), np.where(est == 0, 0.0, np.sign(est) * np.inf))
    p = np.where(few, 1.0, 2.0 * _st.t.sf(np.abs(tstat), df))
    lo = np.where(few, -1.0, np.clip(est - tcrit * se, -1.0, 1.0))
    hi = np.where(few, 1.0, np.clip(est + tcrit * se, -1.0, 1.0))
    verdict = np.where(lo > 0, "improved", np.where(hi < 0, "regressed", "inconclusive")).astype(object)
    mde = (tcrit + _st.t.ppf(power, df)) * np.where(few, 1.0, se)
    hw = np.sqrt(2.0 * np.log(2.0 / alpha) / kf)
    h_lo, h_hi = np.clip(est - hw, -1.0, 1.0), np.clip(est + hw, -1.0, 1.0)

    def out(v):
        v = np.asarray(v)
        return v.item() if v.ndim == 0 else v

    return SubjectWeightedGap(estimate=out(est), lower=out(lo), upper=out(hi), se=out(se), df=out(df),
                              p_value=out(p), verdict=out(verdict), mde=out(mde), hoeffding_lower=out(h_lo),
                              hoeffding_upper=out(h_hi), n_subjects=out(k), alpha=alpha, power=power,
                              method="subject_means_t", estimand=SUBJECT_WEIGHTED, assumptions=_ASSUMPTIONS)

