"""Result types of the prompt-perturbation tests (frozen dataclasses, like scipy's result objects)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

@dataclass(frozen=True)
class CompositeStatistic:
    """Algorithm A: the composite-null statistic of one test variant.

    Attributes
    ----------
    statistic : float
        :math:`T = \\min_j |\\hat p_j - \\hat p'|`.
    test_rate : float
        :math:`\\hat p'`.
    null_rates : ndarray
        :math:`\\hat p_j` of the m null variants.
    nearest : int
        Index of the null variant attaining the minimum.
    m : int
        Number of null variants.
    r : ndarray
        Replicates per null variant.
    r_test : int
        Replicates of the test variant.
    method : str
    assumptions : tuple of str
    """

    statistic: float
    test_rate: float
    null_rates: np.ndarray
    nearest: int
    m: int
    r: np.ndarray
    r_test: int
    method: str
    assumptions: tuple[str, ...]


@dataclass(frozen=True)
class RangeEstimate:
    """Algorithm B: estimate of the null range [a, b] from m pilot null rates.

    ``a_hat``/``b_hat`` are the (bias-corrected, clipped) end points; ``raw_min``/``raw_max``
    the order statistics; ``clipped`` says whether [0, 1] clipping changed them.
    """

    a_hat: float
    b_hat: float
    width: float
    raw_min: float
    raw_max: float
    m: int
    clipped: bool
    method: str
    assumptions: tuple[str, ...]


@dataclass(frozen=True)
class TheoryBounds:
    """Lemma 2, Theorem 2 and Theorem 4 at given (eps, m, r) and range [a, b].

    Attributes
    ----------
    eps, m, r : ndarray or scalar
        Threshold, null variants, replicates (broadcast together).
    a, b : float
        The null range used (true or plug-in).
    s_r : ndarray or float
        :math:`\\sqrt{\\log r / r}` (Lemma 1's deviation).
    lemma2_m : ndarray or int or None
        Lemma 2's sufficient m for the ideal test at level ``alpha`` (None without alpha).
    ideal_size : ndarray or float
        Lemma 2's bound :math:`(1 - \\epsilon/(b-a))^m` on the ideal test's size.
    size_bound : ndarray or float
        Theorem 2: :math:`(1 - (\\epsilon - s_r)/(b-a))^m + 2m/\\sqrt r`.
    power_bound : ndarray or float
        Theorem 4: average power lower bound under Assumption 3 (NaN when b - a = 1).
    valid : ndarray or bool or None
        ``size_bound <= alpha`` (None without alpha).
    alpha : float or None
    method : str
    assumptions : tuple of str
    """

    eps: np.ndarray | float
    m: np.ndarray | int
    r: np.ndarray | int
    a: float
    b: float
    s_r: np.ndarray | float
    lemma2_m: np.ndarray | int | None
    ideal_size: np.ndarray | float
    size_bound: np.ndarray | float
    power_bound: np.ndarray | float
    valid: np.ndarray | bool | None
    alpha: float | None
    method: str
    assumptions: tuple[str, ...]


@dataclass(frozen=True)
class PowerCurve:
    """Lemma 3 (ideal power) or Theorem 3 (realistic lower bound) as a function of p'."""

    p_prime: np.ndarray
    power: np.ndarray
    eps: float
    m: int
    r: int | None
    a: float
    b: float
    method: str
    assumptions: tuple[str, ...]


@dataclass(frozen=True)
class ExactSize:
    """Exact size of the realistic test under Assumption 2 (beyond the paper).

    ``size`` is :math:`\\sup_{p' \\in [a, b]} P(T > \\epsilon \\mid p')`, attained at ``worst_p``;
    ``average_size`` is the same probability averaged over :math:`p' \\sim \\mathrm{Unif}[a, b]`
    (what the paper's Figure 3 simulates).
    """

    size: float
    worst_p: float
    average_size: float
    eps: float
    m: int
    r: int
    a: float
    b: float
    alpha: float | None
    valid: bool | None
    method: str
    assumptions: tuple[str, ...]


@dataclass(frozen=True)
class ExactPower:
    """Exact average power of the realistic test under Assumptions 2 and 3 (beyond the paper)."""

    power: float
    eps: float
    m: int
    r: int
    a: float
    b: float
    method: str
    assumptions: tuple[str, ...]


@dataclass(frozen=True)
class PerturbationDesign:
    """Algorithm C: the chosen (eps, m, r) under a budget, or why there is none.

    Attributes
    ----------
    valid : bool
        Whether some candidate triple satisfies the size constraint.
    eps, m, r : float, int, int or None
        The chosen design (None when ``valid`` is False).
    size_bound, power_bound : float or None
        Theorem 2 and Theorem 4 at the chosen design (plug-in range).
    exact_size, exact_power : float or None
        Exact size and average power at the chosen design (computed for ``method="exact"``).
    objective : float or None
        The maximised quantity (Theorem 4 bound for ``"union"``, exact power for ``"exact"``).
    alpha, budget : float, int
        Level and total budget nu (pilot included).
    pilot_m, pilot_r, pilot_cost : int
        Pilot variants, replicates and their cost m~ r~ (subtracted from nu, Algorithm C line 2).
    a_hat, b_hat, width : float
        The null range used.
    eps_max : float
    eps_max_rule : str
        Which eps_max rule was applied and why.
    eps_step : float
    n_candidates, n_valid : int
        Thresholds tried and valid.
    min_budget : int or None
        When no triple is valid: the smallest budget that would give one (None if none exists).
    method : str
    assumptions : tuple of str
    notes : tuple of str
    """

    valid: bool
    eps: float | None
    m: int | None
    r: int | None
    size_bound: float | None
    power_bound: float | None
    exact_size: float | None
    exact_power: float | None
    objective: float | None
    alpha: float
    budget: int
    pilot_m: int
    pilot_r: int
    pilot_cost: int
    a_hat: float
    b_hat: float
    width: float
    eps_max: float
    eps_max_rule: str
    eps_step: float
    n_candidates: int
    n_valid: int
    min_budget: int | None
    method: str
    assumptions: tuple[str, ...]
    notes: tuple[str, ...]

    def as_dict(self) -> dict:
        """Plain-JSON form (what ``benchcert plan perturbation --json`` prints)."""
        out = {}
        for k, v in self.__dict__.items():
            out[k] = list(v) if isinstance(v, tuple) else v
        return out


@dataclass(frozen=True)
class BudgetResult:
    """Smallest total budget nu = m r (+ pilot) for which a valid (and, if asked, powerful) design exists.

    ``size`` and ``power`` are the design's size and average power as the method measures them
    (Theorem 2 / Theorem 4 bounds for the union method; exact values for the exact method).
    """

    budget: int | None
    eps: float | None
    m: int | None
    r: int | None
    size: float | None
    power: float | None
    alpha: float
    a: float
    b: float
    pilot_cost: int
    method: str
    assumptions: tuple[str, ...]
    notes: tuple[str, ...]


@dataclass(frozen=True)
class CompositeTestResult:
    """Fixed-design composite test of one test variant against the null variants present.

    Attributes
    ----------
    statistic : float
        T (Algorithm A).
    eps : float or None
        Threshold used by ``method`` (None when no threshold keeps the size at alpha).
    reject : bool
        Whether the change matters beyond the null rewordings at level alpha.
    p_value : float
        p-value of the decision rule: for ``"widened"`` the smallest level at which the test
        rejects (NaN when the item was not tested); for the plug-in methods sup over p' of
        P(T >= t_obs) (exact) or Theorem 2's bound at t_obs (union), Fisher's for their fallbacks.
    eps_union, eps_exact : float or None
        Smallest threshold keeping Theorem 2's bound, respectively the exact size, at alpha
        (``eps_exact`` only computed for ``method="exact"``).
    p_union, p_exact : float or None
    m, r_min, r_max, r_test : int
    test_rate : float
    null_min, null_max : float
        Observed range of the null rates.
    a_hat, b_hat : float or None
        Plug-in range (Algorithm B); None for the fallbacks.
    alpha : float
    status : str
        ``"ok"``; ``"no_alternative"`` (the null range leaves nothing outside it to detect);
        ``"no_power"`` (no outcome at these replicate counts could reject); ``"one_null_variant"``;
        for the plug-in methods also ``"identical_null_rates"`` and ``"no_valid_eps"``.
    method : str
        ``"widened"`` (the default, valid test), ``"plugin_exact"``, ``"plugin_union"`` or
        ``"fisher_fallback"``.
    assumptions, notes : tuple of str
    range_low, range_high : float or None
        ``"widened"`` only: the test rejects iff the tested variant's rate lies outside
        [range_low, range_high], the null variants' range widened by the margin and by
        Hoeffding bounds (see :func:`~benchcert.stats.perturbation.item_test.widened_range_test`).
    widening : float or None
        The margin factor c (``(1 + c)^-(m-1) = ideal_alpha``).
    ideal_alpha, coverage_alpha : float or None
        The split of alpha: ``ideal_alpha`` for the chance that the tested probability lies beyond
        the null variants' widened true range, ``coverage_alpha`` (two one-sided bounds) for the
        binomial noise.
    min_detectable_gap : float or None
        ``"widened"`` only: the smallest observed change the test can detect at these replicate
        counts in the most favourable case, all null variants showing the same rate
        (the largest Hoeffding half-width t_ij); a design property, see
        :func:`~benchcert.stats.perturbation.item_test.widened_range_test`.
    """

    statistic: float
    eps: float | None
    reject: bool
    p_value: float
    eps_union: float | None
    eps_exact: float | None
    p_union: float | None
    p_exact: float | None
    m: int
    r_min: int
    r_max: int
    r_test: int
    test_rate: float
    null_min: float
    null_max: float
    a_hat: float | None
    b_hat: float | None
    alpha: float
    status: str
    method: str
    assumptions: tuple[str, ...]
    notes: tuple[str, ...]
    range_low: float | None = None
    range_high: float | None = None
    widening: float | None = None
    ideal_alpha: float | None = None
    coverage_alpha: float | None = None
    min_detectable_gap: float | None = None


@dataclass(frozen=True)
class MultipleTestResult:
    """Benjamini-Hochberg step-up decisions and adjusted p-values."""

    reject: np.ndarray
    adjusted: np.ndarray
    n_reject: int
    alpha: float
    n: int
    method: str
    assumptions: tuple[str, ...]
