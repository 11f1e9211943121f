"""Result types, vocabulary and the assumptions each comparison method states.

Shared by every module of :mod:`benchcert.stats.comparisons`: what the verdicts are called,
which question each primary method answers, and the frozen results the functions return.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

#: Verdict vocabulary: B (the candidate) against A (the baseline).
VERDICTS = ("improved", "regressed", "inconclusive")

_PRIMARY = ("paired_clt", "clustered_subject", "stratified_items")
#: Fewer subjects than this and the default question is "is B better than A on this
#: benchmark's items" (subjects as fixed strata), not "does it generalise to new subjects".
MIN_SUBJECTS_CLUSTERED = 30
#: The question each primary method answers (reported with every verdict).
QUESTIONS = {
    "clustered_subject": "subjects: does the gap generalise to new subjects like these (subjects are a sample)",
    "stratified_items": "items: is B better than A on this benchmark's items (subjects are fixed strata, items a "
                        "sample of each subject's items)",
    "paired_clt": "items: is B better than A on items like these (items independent, no subject structure)",
}


# --------------------------------------------------------------------------------------
# result types


@dataclass(frozen=True)
class ComparisonTest:
    """One method's interval and two-sided test of H0: E[D] = 0.

    Attributes
    ----------
    estimate : float or ndarray
        The mean gap mean(D) = mean(B - A) on shared items.
    lower, upper : float or ndarray
        1 - alpha confidence bounds for the gap (inside [-1, 1]); for the exact
        McNemar / sign test, whose target is P(B wins a discordant item) - 1/2 rather
        than the mean gap, these are the normal-method bounds and ``se`` is None.
    se : float or ndarray or None
        Standard error behind a normal interval; None for exact / finite-sample methods.
    statistic : float or ndarray
        z statistic (normal methods), the count of items B won (McNemar / sign test),
        or sqrt(n) |gap| (Hoeffding).
    p_value : float or ndarray
        Two-sided p-value.
    alpha : float
    n : int or ndarray
        Shared items used.
    method : str
        ``"paired_clt"``, ``"clustered_subject"``, ``"mcnemar_exact"``, ``"sign_test"``
        or ``"hoeffding"``.
    assumptions : tuple of str
    df : float or ndarray or None
        Degrees of freedom of the t reference (clustered test); None for a normal reference.
    simultaneous_lower, simultaneous_upper : ndarray or None
        The clustered test's sign-flip interval at the family's Bonferroni level
        (alpha / family size) where it is the sign-flip test's (fewer than 30 subjects), NaN
        elsewhere; None for the other tests and for a family of one
        (:func:`~benchcert.stats.comparisons.family_intervals` reads them).
    """

    estimate: np.ndarray | float
    lower: np.ndarray | float
    upper: np.ndarray | float
    se: np.ndarray | float | None
    statistic: np.ndarray | float
    p_value: np.ndarray | float
    alpha: float
    n: np.ndarray | int
    method: str
    assumptions: tuple[str, ...]
    df: np.ndarray | float | None = None
    simultaneous_lower: np.ndarray | None = None
    simultaneous_upper: np.ndarray | None = None


@dataclass(frozen=True)
class PairedComparison:
    """B against A on their shared items: the gap, every test, the verdict, the MDE.

    Scalars for a single pair; arrays of shape (P,) for P pairs.

    Attributes
    ----------
    estimate : gap mean(B - A) on shared items (the headline number).
    lower, upper, se, p_value : the primary method's interval, SE and p-value. ``se`` is the standard
        error at the estimate (paired; for ``stratified_items`` the pooled within-subject one of the t
        test; CR2's for ``clustered_subject``): on 0/1 scores without subjects it is also the score
        test's variance at the estimate, with subjects the score test pools them and does not use it.
    verdict : ``"improved"`` (lower > 0), ``"regressed"`` (upper < 0) or ``"inconclusive"``.
    alpha : float
    n : shared items (answered by both).
    n_only_a, n_only_b : items answered by only one of the two - excluded and counted.
    n_excluded : ``n_only_a + n_only_b``.
    n_clusters : subjects with at least one shared item (None without subjects).
    mean_a, mean_b : each model's mean on the shared items (estimate = mean_b - mean_a).
    n_b_wins, n_a_wins : items where D > 0 / D < 0 (the discordant pairs, for binary scores).
    binary : whether both models' shared scores are all 0/1 (McNemar applies).
    mde : minimum detectable effect of the test that decides, at this n and ``power``: on 0/1 scores for
        the items question the pooled score test's (:func:`~benchcert.stats.comparisons.score_mde.score_test_mde`),
        on fractional scores the bounded score test's where it decides (``bounded_score_test_mde``), elsewhere
        the t approximation's at the primary SE (:func:`minimum_detectable_effect`); at ``mde_alpha``.
    mde_alpha : the two-sided level ``mde`` is stated at: the pairs' ``alpha``, or the level the caller reads the
        family's verdicts at (``mde_alpha=`` of :func:`pairwise_comparisons`: Bonferroni alpha / P).
    mde_method : per pair, what ``mde`` was computed with: ``"score"`` (the pooled score test's power), ``"bounded"``
        (the bounded score test's) or ``"t"`` (the t approximation's).
    power : float
    method : the primary method (``"clustered_subject"``, ``"stratified_items"`` or ``"paired_clt"``).
    assumptions : the primary method's assumptions.
    tests : dict of method name -> :class:`ComparisonTest` (every method computed). The exact
        test is keyed ``"mcnemar_exact"`` when every pair is binary, else ``"sign_test"``
        (the same binomial on the signs of D, which on a binary pair is McNemar's test).
        From item-level scores it also holds ``"unpaired_z"``, the contrast peers report
        (:func:`unpaired_z_test` on each model's own answered items).
    pair_a, pair_b : column indices of A and B (only from :func:`pairwise_comparisons`).
    question : which question the verdict answers (:data:`QUESTIONS`): "subjects" (clustered:
        does the gap generalise to new subjects) or "items" (this benchmark's items).
    """

    estimate: np.ndarray | float
    lower: np.ndarray | float
    upper: np.ndarray | float
    se: np.ndarray | float
    p_value: np.ndarray | float
    verdict: np.ndarray | str
    alpha: float
    n: np.ndarray | int
    n_only_a: np.ndarray | int
    n_only_b: np.ndarray | int
    n_excluded: np.ndarray | int
    n_clusters: np.ndarray | int | None
    mean_a: np.ndarray | float
    mean_b: np.ndarray | float
    n_b_wins: np.ndarray | float
    n_a_wins: np.ndarray | float
    binary: np.ndarray | bool
    mde: np.ndarray | float
    power: float
    method: str
    assumptions: tuple[str, ...]
    tests: dict[str, ComparisonTest] = field(default_factory=dict)
    pair_a: np.ndarray | None = None
    pair_b: np.ndarray | None = None
    question: str = ""
    mde_alpha: float | None = None
    mde_method: np.ndarray | str | None = None


@dataclass(frozen=True)
class AdjustedPValues:
    """Multiplicity-adjusted p-values of one family (the last axis).

    ``rejected`` is ``p_adjusted <= alpha``; ``n`` is the family size m.
    """

    p_raw: np.ndarray
    p_adjusted: np.ndarray
    rejected: np.ndarray
    alpha: float
    n: int
    method: str
    assumptions: tuple[str, ...]


@dataclass(frozen=True)
class SimultaneousIntervals:
    """Intervals that hold simultaneously for a family of ``n`` estimates at 1 - alpha."""

    estimate: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    half_width: np.ndarray
    critical_value: float
    alpha: float
    n: int
    method: str
    assumptions: tuple[str, ...]


@dataclass(frozen=True)
class RankConfidence:
    """Simultaneous rank intervals and groups of statistically tied models.

    Attributes
    ----------
    estimate : ndarray (K,)
        The model scores given (for display).
    order_score : ndarray (K,)
        What the point rank and the group order are by: each model's mean gap against the
        others on the items each pair shares (``order="gaps"``, the default), or ``estimate``.
    rank : ndarray (K,), int
        Point rank (1 = best; ties share the better rank).
    lower, upper : ndarray (K,), int
        Rank bounds: ``lower = 1 + #models significantly better``,
        ``upper = K - #models significantly worse``.
    better_pairs : ndarray (M, 2), int64
        Each row ``(i, j)``: model i is significantly better than model j (each pair once,
        sorted). A list, not a K x K matrix: at 50,000 models (the leaderboard family) the
        matrix and its copies were 10 GB of an out-of-core audit's peak (issue #40).
    better : ndarray (K, K), bool (property)
        ``better[i, j]``, built from ``better_pairs`` on each access: K^2 bytes, for small K.
    n_better, n_worse : ndarray (K,), int64 (properties)
        How many models are significantly better (worse) than each model.
    groups : tuple of tuple of int
        Maximal runs of models, consecutive in estimate order (best first), within
        which no pair is significantly different - the tied groups. They may overlap.
    alpha, n (models), method, assumptions.
    """

    estimate: np.ndarray
    rank: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    better_pairs: np.ndarray
    groups: tuple[tuple[int, ...], ...]
    alpha: float
    n: int
    method: str
    assumptions: tuple[str, ...]
    order_score: np.ndarray | None = None

    @property
    def better(self) -> np.ndarray:
        out = np.zeros((self.n, self.n), dtype=bool)
        out[self.better_pairs[:, 0], self.better_pairs[:, 1]] = True
        return out

    @property
    def n_better(self) -> np.ndarray:
        return np.bincount(self.better_pairs[:, 1], minlength=self.n).astype(np.int64)

    @property
    def n_worse(self) -> np.ndarray:
        return np.bincount(self.better_pairs[:, 0], minlength=self.n).astype(np.int64)


@dataclass(frozen=True)
class DetectableEffect:
    """Minimum detectable effect of a two-sided level-alpha z-test at the current n.

    ``estimate`` is the MDE; ``floor`` is Hardt's information-theoretic floor
    1/sqrt(8 n) (no test of any kind separates accuracy 1/2 from 1/2 + floor with
    n items and total error below 1/2; see :func:`hellinger_min_items`).
    """

    estimate: np.ndarray | float
    se: np.ndarray | float
    floor: np.ndarray | float
    alpha: float
    power: float
    n: np.ndarray | int
    method: str
    assumptions: tuple[str, ...]


@dataclass(frozen=True)
class SampleSize:
    """Items needed for a paired test (or a distinguishing bound) - and the cost."""

    estimate: np.ndarray | int
    delta: np.ndarray | float
    alpha: float | None
    power: float | None
    method: str
    assumptions: tuple[str, ...]


@dataclass(frozen=True)
class AdditionalSampleSize:
    """How many more units (items or subjects) would resolve a gap with the stated power.

    Attributes
    ----------
    more : int or None
        Units to add (0 when the present ones already give the power); None when no finite
        number would (``reason`` says why).
    n_total : int or None
        ``n + more``.
    n : int
        Units now.
    delta : float
        The gap's size the number is for.
    se : float
        The standard error now.
    alpha, power : float
    method : str
    assumptions : tuple of str
    reason : str or None
    """

    more: int | None
    n_total: int | None
    n: int
    delta: float
    se: float
    alpha: float
    power: float
    method: str
    assumptions: tuple[str, ...]
    reason: str | None = None


# --------------------------------------------------------------------------------------
# assumptions (shared wording)

_PAIRED_CLT_ASSUMPTIONS = (
    "items are independent draws from an item population (or the two models' responses are "
    "independent across items given the items); the target is E[B - A] per item",
    "on 0/1 scores the interval and p-value are Tango's (1998) score test of the paired difference, the "
    "variance N / (N - 1) times its maximum likelihood under each null gap, normal reference (valid near "
    "the ceiling, where few items are discordant); on fractional scores the same construction on [-1, 1] "
    "(the bounded score test: the variance of the maximum-likelihood distribution on [-1, 1] with each null "
    "mean), in families of up to 20 pairs; beyond (and beyond 50,000 pairs on 0/1 scores) the normal (CLT) "
    "approximation to mean(D) with the paired SE sd(D, ddof=1)/sqrt(n), which needs enough items away from D = 0",
    "only items answered by both models enter; the gap is about those shared items",
)

_STRATIFIED_ASSUMPTIONS = (
    "subjects are fixed strata (the benchmark's own subjects, not a sample of subjects); inside a "
    "subject the items are independent draws from that subject's items, paired between the models",
    "target is the item-weighted gap over this benchmark's subjects: E[B - A] with each subject "
    "weighted by its share of the shared items",
    "on 0/1 scores the interval and p-value are the score test's (Tango 1998 on the counts pooled over "
    "the subjects, with the variance N / (N - 1) times its maximum likelihood under each null gap, normal "
    "reference; pooling is conservative for fixed strata); on fractional scores the same construction on "
    "[-1, 1] (the bounded score test on the pooled differences) in families of up to 20 pairs; beyond (and "
    "beyond 50,000 pairs on 0/1 scores) SE from the pooled within-subject variance of D, "
    "sqrt(SSW / (N - C) / N), with a Student t reference on N - C df; the exact McNemar / sign test beside "
    "it needs no variance estimate",
    "only items answered by both models enter; the gap is about those shared items",
)

_CLUSTERED_ASSUMPTIONS = (
    "subjects are independent draws from a population of subjects; items inside a subject may "
    "be arbitrarily dependent (cluster-robust SE by subject applied to D, with the CR2 "
    "small-sample correction of Bell and McCaffrey 2002)",
    "target is E[B - A] over fresh subjects and items, not over the realised subjects",
    "Student t critical value and p-value with the Bell-McCaffrey degrees of freedom (at most "
    "C - 1, fewer when subject sizes are unequal); with fewer than about 30 subjects the "
    "question has little power and the SE itself is noisy",
    "with fewer than 30 subjects the p-value (and the verdict, when this is the primary method) is the "
    "sign-flip randomisation test of the subject sums (exact when each subject's sum of D is symmetric "
    "about 0 under H0; stats/comparisons/signflip.py), the interval still CR2's with the "
    "Bell-McCaffrey t reference, which over-rejects there when subject gaps vary",
    "only items answered by both models enter; the gap is about those shared items",
)


_MCNEMAR_ASSUMPTIONS = (
    "binary scores: tests H0 that, among items the models disagree on, each is equally likely "
    "to favour A or B (exact binomial on the discordant pairs; McNemar 1947, exact form)",
    "items independent; valid at any n (no normal approximation); conditional on the number of "
    "discordant pairs",
)

_SIGN_ASSUMPTIONS = (
    "non-binary scores: McNemar's exact test generalised to the sign test on D (exact binomial "
    "on the items where D != 0); tests the median-type hypothesis P(D > 0) = P(D < 0), not E[D] = 0",
    "items independent; exact at any n",
)

_HOEFFDING_ASSUMPTIONS = (
    "items independent (any distribution of D in [-1, 1]); finite-sample, no normal "
    "approximation: P(|mean(D) - E D| >= h) <= 2 exp(-n h^2 / 2) (Hoeffding 1963; Hardt ch. 3, "
    "Theorem 2 with c_i - b_i = 2)",
    "conservative: ignores that Var(D) is usually far below its worst case 1",
)

_UNPAIRED_ASSUMPTIONS = (
    "treats the two models' scores as independent samples (two-sample z-test with each model's "
    "own sample variance, ddof=1); shown as the contrast peers use",
    "ignores the item-level pairing: with positively correlated models (the usual case) its SE "
    "is too large and it loses power; with negatively correlated models it is too small",
)

_MDE_ASSUMPTIONS = (
    "normal approximation: a true gap of size MDE is detected by the two-sided level-alpha "
    "z-test with probability `power`, using the SE at the current n",
    "the SE under the alternative is taken equal to the observed one",
)


def default_primary(n_subjects: int | None) -> str:
    """The default primary method for a benchmark with ``n_subjects`` subjects (None: no
    subject structure): clustered by subject from :data:`MIN_SUBJECTS_CLUSTERED` subjects on,
    else the fixed-strata items question (the clustered one has little power and a noisy SE
    with few subjects: 5 subjects leave it 4 df at most)."""
    if n_subjects is None:
        return "paired_clt"
    return "clustered_subject" if n_subjects >= MIN_SUBJECTS_CLUSTERED else "stratified_items"


def _check_primary(primary, have_subjects: bool, n_subjects: int | None = None) -> str:
    if primary is None:
        return default_primary(n_subjects) if have_subjects else "paired_clt"
    if primary not in _PRIMARY:
        raise ValueError(f"primary must be one of {_PRIMARY}; got {primary!r}")
    if primary in ("clustered_subject", "stratified_items") and not have_subjects:
        raise ValueError(f"primary={primary!r} needs subjects; got subjects=None")
    return primary

