r"""Prompt-perturbation tests with a composite null (STATS.md section C).

Does a prompt change matter beyond semantically irrelevant rewordings?  Acharyya, Priebe &
Helm, "Testing for LLM response differences: the case of a composite null consisting of
semantically irrelevant query perturbations" (the "composite-null paper") test

.. math::  H_0: p' \in \mathcal P_0 = [a, b] \quad\text{vs}\quad H_A: p' \notin [a, b]

where :math:`[a, b]` is the range of the response probabilities of a user-defined set of null
variants (rewordings the user considers irrelevant) and :math:`p'` is the response probability
of a test variant.  Everything is estimated from binary replicates: a variant answered r times
has :math:`\hat p = K / r`, :math:`K \sim \mathrm{Binomial}(r, p)`.

What is here (pure numpy/scipy, no I/O):

* :func:`composite_statistic` - Algorithm A, :math:`T_{m,r} = \min_j |\hat p_j - \hat p'|` (Eq. 3);
* :func:`estimate_range` - Algorithm B with the unbiased uniform-endpoint correction (C2);
* :func:`theory_bounds` - Lemma 2's m, the ideal size (Lemma 2), the size bound (Theorem 2) and
  the average-power bound (Theorem 4); :func:`power_curve` - Lemma 3 and Theorem 3 as functions
  of :math:`p'`;
* :func:`design_search` - Algorithm C under a sampling budget (Theorems 2 and 4, not the misprinted
  pseudo-code), or its exact-calibration variant; :func:`minimal_budget` - the smallest budget that
  admits a valid design;
* :func:`exact_size` / :func:`exact_power` - beyond the paper (C5): under Assumption 2 each null
  :math:`\hat p_j` follows a uniform-binomial mixture, so size and average power are computable
  exactly instead of bounded by the union bound :math:`2m/\sqrt r`;
* :func:`composite_test` - the fixed-design mode for logs already collected: given the null
  variants and replicates present, the smallest threshold that keeps the size at alpha, the
  p-value and the decision, with explicit handling of degenerate null sets;
* :func:`fisher_contrast` - the classical simple-null test (C6), :func:`benjamini_hochberg`,
  :func:`energy_test` - Szekely-Rizzo energy distance with a permutation p-value (C7), and
  :func:`simulate_rejection` - binomial-count Monte Carlo of the test (C4).

Errata of the paper that this module does *not* copy (STATS.md C2, C3):

* Remark 1's bias correction mixes the Unif(a, b) and Unif(0, b) endpoint estimators; the
  unbiased uniform-endpoint estimators are used instead.
* Algorithm C line 8 prints ``2m/r`` for the union term and section 3.1 misplaces a parenthesis
  in the validity constraint; Theorem 2 (``2m/sqrt(r)``) is what is proven and is used.
* Line 10 / section 3.1 print ``2/(1-(b-a))`` and ``2/(b-a)`` inconsistently; Theorem 4's
  ``2/(1-(b-a))`` (the density of Unif(P_1)) is used.
* The worked example of section 5.2, ((a_hat, b_hat) = (0.898, 1), nu = 5e6, alpha = 0.1 ->
  (m, r, eps) = (26, 192307, 0.085)), violates Theorem 2 (2m/sqrt(r) = 0.119 > alpha); it is a
  product of the ``2m/r`` misprint and is not reproduced.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np
from scipy.special import betainc, gammaln, xlog1py, xlogy
from scipy.stats import fisher_exact

from ._common import check_alpha, warn_degenerate

__all__ = [
    "CompositeStatistic",
    "RangeEstimate",
    "TheoryBounds",
    "PowerCurve",
    "ExactSize",
    "ExactPower",
    "PerturbationDesign",
    "BudgetResult",
    "CompositeTestResult",
    "FisherResult",
    "MultipleTestResult",
    "EnergyTestResult",
    "SimulationResult",
    "composite_statistic",
    "estimate_range",
    "lemma2_m",
    "theory_bounds",
    "power_curve",
    "exact_size",
    "exact_power",
    "design_search",
    "minimal_budget",
    "composite_test",
    "fisher_contrast",
    "benjamini_hochberg",
    "energy_test",
    "simulate_rejection",
]

EPS_MAX_RULES = ("auto", "algorithm_c", "width")
METHODS = ("union", "exact")

_ASSUMPTION_1 = "Assumption 1: the null variants' probabilities (p_1..p_m) are independent of p'"
_ASSUMPTION_2 = ("Assumption 2: null variants are drawn at random from the null set, their probabilities "
                 "i.i.d. Unif[a, b]")
_ASSUMPTION_3 = "Assumption 3 (power only): a test variant's p' ~ Unif(0, 1), hence Unif(P_1) given H_A"
_REPLICATES = "replicates of one variant are i.i.d. Bernoulli(p) (binary scores, independent runs)"
_PLUG_IN = ("(a, b) replaced by the plug-in range estimate (Algorithm B): validity is approximate, as "
            "in the paper (Corollary 2)")

# Mass of a Binomial(r, p) more than 12 sqrt(r) counts (>= 24 SD) from its mean is below 1e-120:
# windows of that half-width lose nothing at double precision.
_WINDOW_SD = 12.0
# Up to this many attainable thresholds are enumerated; beyond, thresholds are bisected as reals.
_MAX_CANDIDATES = 4_000_000
_MAX_EXACT_R = 20_000_000


# --------------------------------------------------------------------------------------
# result types


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
    """Exact size of the realistic test under Assumption 2 (beyond the paper, STATS.md C5).

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
    """Exact average power of the realistic test under Assumptions 2 and 3 (STATS.md C5)."""

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
        Valid p-value of the decision rule (exact: sup over p' of P(T >= t_obs); union:
        Theorem 2's bound at t_obs; fallbacks: Fisher's).
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
        ``"ok"``, ``"identical_null_rates"``, ``"one_null_variant"`` or ``"no_valid_eps"``.
    method : str
        ``"exact"``, ``"union"`` or ``"fisher_fallback"``.
    assumptions, notes : tuple of str
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


@dataclass(frozen=True)
class FisherResult:
    """Classical simple-null contrast: Fisher's exact test of p_a = p_b (two-sided)."""

    p_value: np.ndarray | float
    reject: np.ndarray | bool
    rate_a: np.ndarray | float
    rate_b: np.ndarray | float
    difference: np.ndarray | float
    alpha: float
    n: np.ndarray | int
    method: str
    assumptions: tuple[str, ...]


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


@dataclass(frozen=True)
class EnergyTestResult:
    """Szekely-Rizzo two-sample energy test with a permutation p-value."""

    statistic: float
    energy_distance: float
    p_value: float
    reject: bool | None
    alpha: float | None
    n_x: int
    n_y: int
    n_permutations: int
    method: str
    assumptions: tuple[str, ...]


@dataclass(frozen=True)
class SimulationResult:
    """Monte-Carlo rejection rate of the realistic test (binomial counts, never Bernoulli draws)."""

    rate: float
    rejections: int
    n_sim: int
    eps: float
    m: int
    r: int
    a: float
    b: float
    p_prime: str
    method: str
    assumptions: tuple[str, ...]


# --------------------------------------------------------------------------------------
# validation helpers


def _real(x, name: str, *, lo=None, hi=None, lo_open=False, hi_open=False) -> float:
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Real):
        raise ValueError(f"{name} must be a real number; got {x!r}")
    v = float(x)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite; got {x!r}")
    if lo is not None and (v < lo or (lo_open and v == lo)):
        raise ValueError(f"{name} must be {'>' if lo_open else '>='} {lo}; got {x!r}")
    if hi is not None and (v > hi or (hi_open and v == hi)):
        raise ValueError(f"{name} must be {'<' if hi_open else '<='} {hi}; got {x!r}")
    return v


def _int(x, name: str, *, lo: int = 0) -> int:
    if isinstance(x, (bool, np.bool_)):
        raise ValueError(f"{name} must be an integer >= {lo}; got {x!r}")
    if isinstance(x, numbers.Integral):
        v = int(x)
    elif isinstance(x, numbers.Real) and float(x).is_integer():
        v = int(x)
    else:
        raise ValueError(f"{name} must be an integer >= {lo}; got {x!r}")
    if v < lo:
        raise ValueError(f"{name} must be an integer >= {lo}; got {x!r}")
    return v


def _int_array(x, name: str, *, lo: int) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype == np.bool_ or not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise ValueError(f"{name} must hold integers; got dtype {arr.dtype}")
    if np.issubdtype(arr.dtype, np.floating):
        if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
            bad = arr[~(np.isfinite(arr) & (arr == np.round(arr)))].flat[0]
            raise ValueError(f"{name} must hold integers; got {bad!r}")
    arr = arr.astype(np.int64)
    if arr.size and arr.min() < lo:
        raise ValueError(f"{name} must be >= {lo}; got {int(arr.min())}")
    return arr


def _range_iv(a, b, names=("a", "b")):
    a = _real(a, names[0], lo=0.0, hi=1.0)
    b = _real(b, names[1], lo=0.0, hi=1.0)
    if b < a:
        raise ValueError(f"{names[1]} must be >= {names[0]}; got {names[0]}={a!r}, {names[1]}={b!r}")
    return a, b


def _choice(x, name: str, options) -> str:
    if x not in options:
        raise ValueError(f"{name} must be one of {', '.join(options)}; got {x!r}")
    return x


# --------------------------------------------------------------------------------------
# Algorithm A and B


def _composite_statistic_iv(null_counts, null_replicates, test_count, test_replicates):
    k = _int_array(null_counts, "null_counts", lo=0)
    if k.ndim != 1 or k.size == 0:
        raise ValueError(f"null_counts must be a non-empty 1-D array (one count per null variant); got shape {k.shape}")
    r = _int_array(null_replicates, "null_replicates", lo=1)
    if r.ndim == 0:
        r = np.full(k.shape, int(r))
    if r.shape != k.shape:
        raise ValueError(f"null_replicates must be a scalar or match null_counts' shape {k.shape}; got {r.shape}")
    if np.any(k > r):
        j = int(np.flatnonzero(k > r)[0])
        raise ValueError(f"null_counts must not exceed null_replicates; got {int(k[j])} > {int(r[j])} at index {j}")
    kt = _int(test_count, "test_count", lo=0)
    rt = _int(test_replicates, "test_replicates", lo=1)
    if kt > rt:
        raise ValueError(f"test_count must not exceed test_replicates; got {kt} > {rt}")
    return k, r, kt, rt


def _distance(k, r, kt, rt):
    # One expression for every distance, so the exact calibration classifies each attainable
    # value exactly as the statistic computes it (no float disagreement at ties).
    return np.abs(np.asarray(k) / np.asarray(r) - kt / rt)


def composite_statistic(null_counts, null_replicates, test_count, test_replicates) -> CompositeStatistic:
    r"""Algorithm A: :math:`T_{m,r} = \min_{j \le m} |\hat p_j - \hat p'|` (paper Eq. 3).

    Parameters
    ----------
    null_counts : array_like of int, shape (m,)
        Correct (or "yes") responses :math:`K_j` of each null variant.
    null_replicates : int or array_like of int, shape (m,)
        Replicates :math:`r_j` behind each count (a scalar means all equal).
    test_count, test_replicates : int
        :math:`K'` and :math:`r'` of the test variant.

    Returns
    -------
    CompositeStatistic

    Notes
    -----
    With :math:`\hat p_j = K_j / r_j` and :math:`\hat p' = K'/r'`, the test rejects
    :math:`H_0: p' \in [a, b]` when :math:`T > \epsilon`.  The paper uses one r for all
    variants; unequal counts are allowed here (the statistic is the same formula) and the
    calibrations below say how they treat them.
    """
    k, r, kt, rt = _composite_statistic_iv(null_counts, null_replicates, test_count, test_replicates)
    d = _distance(k, r, kt, rt)
    j = int(np.argmin(d))
    return CompositeStatistic(
        statistic=float(d[j]), test_rate=kt / rt, null_rates=k / r, nearest=j, m=int(k.size), r=r,
        r_test=rt, method="min_abs_gap (Algorithm A, Eq. 3)",
        assumptions=(_REPLICATES,),
    )


def _estimate_range_iv(null_rates, bias_correction):
    p = np.asarray(null_rates, dtype=float)
    if p.ndim != 1 or p.size == 0:
        raise ValueError(f"null_rates must be a non-empty 1-D array; got shape {p.shape}")
    if not np.all(np.isfinite(p)) or p.min() < 0 or p.max() > 1:
        bad = p[~(np.isfinite(p) & (p >= 0) & (p <= 1))].flat[0]
        raise ValueError(f"null_rates must lie in [0, 1]; got {bad!r}")
    if not isinstance(bias_correction, (bool, np.bool_)):
        raise ValueError(f"bias_correction must be True or False; got {bias_correction!r}")
    return p, bool(bias_correction)


def estimate_range(null_rates, *, bias_correction=True) -> RangeEstimate:
    r"""Algorithm B: estimate the null range [a, b] from m pilot null rates.

    Parameters
    ----------
    null_rates : array_like, shape (m,)
        :math:`\hat p_j` of m null variants (each from r replicates).
    bias_correction : bool, keyword-only
        Apply the unbiased uniform-endpoint correction (default) or return min and max.

    Returns
    -------
    RangeEstimate

    Notes
    -----
    Algorithm B returns :math:`\hat a = p_{(1)}`, :math:`\hat b = p_{(m)}`, which are biased
    inwards.  For :math:`p_j \sim \mathrm{Unif}[a, b]` i.i.d.,
    :math:`E p_{(1)} = a + (b-a)/(m+1)` and :math:`E p_{(m)} = b - (b-a)/(m+1)`, so

    .. math::

        \hat a = p_{(1)} - \frac{p_{(m)} - p_{(1)}}{m - 1},\qquad
        \hat b = p_{(m)} + \frac{p_{(m)} - p_{(1)}}{m - 1}

    are unbiased (STATS.md C2), then clipped to [0, 1].  Erratum: the paper's Remark 1 gives
    :math:`\hat a = p_{(1)} - (p_{(m)} - p_{(1)})/(m+1)` and
    :math:`\hat b = \frac{m+1}{m} p_{(m)}`, mixing the Unif(a, b) estimator with the Unif(0, b)
    one; it is not used.  Binomial noise in each :math:`\hat p_j` widens the observed range,
    so with few replicates the estimate errs wide (conservative for size).

    With m = 1 no correction is defined: the result is the point [p, p] with a
    :class:`DegenerateDataWarning`.
    """
    p, bias_correction = _estimate_range_iv(null_rates, bias_correction)
    lo, hi = float(p.min()), float(p.max())
    m = int(p.size)
    if bias_correction and m >= 2:
        spread = (hi - lo) / (m - 1)
        a_raw, b_raw = lo - spread, hi + spread
        method = "unbiased_uniform_endpoints"
    else:
        if bias_correction:
            warn_degenerate("estimate_range: one null rate cannot estimate a range; returning the point [p, p]")
        a_raw, b_raw = lo, hi
        method = "min_max (Algorithm B)"
    a_hat, b_hat = min(max(a_raw, 0.0), 1.0), min(max(b_raw, 0.0), 1.0)
    return RangeEstimate(
        a_hat=a_hat, b_hat=b_hat, width=b_hat - a_hat, raw_min=lo, raw_max=hi, m=m,
        clipped=(a_hat != a_raw) or (b_hat != b_raw), method=method,
        assumptions=(_ASSUMPTION_2, "clipped to [0, 1]"),
    )


# --------------------------------------------------------------------------------------
# Lemma 2, Theorems 2-4


def _s(r):
    r = np.asarray(r, dtype=float)
    return np.sqrt(np.log(r) / r)


def _lemma2(eps, w, alpha):
    eps = np.asarray(eps, dtype=float)
    with np.errstate(divide="ignore"):
        denom = np.abs(np.log1p(-np.minimum(eps / w, 1.0)))
        m = np.ceil(abs(math.log(alpha)) / denom)
    # A threshold at or beyond the whole range needs a single variant.
    return np.maximum(np.where(np.isfinite(m), m, 1), 1).astype(np.int64)


def _size_bound(eps, m, r, w):
    eps, m, r = (np.asarray(x, dtype=float) for x in (eps, m, r))
    s = _s(r)
    if w <= 0:
        # A point null: the ideal statistic is 0 under H0, so only the union term remains once
        # eps clears Lemma 1's deviation.
        first = np.where(eps - s >= 0, 0.0, 1.0)
    else:
        first = np.clip(1.0 - (eps - s) / w, 0.0, None) ** m
    return first + 2.0 * m / np.sqrt(r)


def _power_bound(eps, m, r, w):
    eps, m, r = (np.asarray(x, dtype=float) for x in (eps, m, r))
    s = _s(r)
    if w >= 1 or w <= 0:
        return np.full(np.broadcast(eps, m, r).shape, np.nan)
    base = np.clip(1.0 - (eps + s) / w, 0.0, 1.0)
    return 2.0 / (1.0 - w) * (base**m - 1.0) * (eps + s) + (1.0 - 2.0 * m / np.sqrt(r))


def _out(x):
    x = np.asarray(x)
    if x.ndim == 0:
        v = x.item()
        return v
    return x


def lemma2_m(eps, *, a, b, alpha) -> np.ndarray | int:
    r"""Lemma 2 (Eq. 5/7): the number of null variants that makes the ideal test valid.

    .. math:: m = \left\lceil \frac{|\log \alpha|}{|\log(1 - \epsilon/(b-a))|} \right\rceil

    Valid (size <= alpha) for the ideal test that observes the p_j, when eps < b - a and
    Assumption 2 holds; for eps >= b - a one variant suffices (returned as 1).  Returns an int
    for scalar ``eps``, else an int64 array.
    """
    eps, a, b, alpha = _theory_iv(eps, a, b, alpha)
    if b - a <= 0:
        raise ValueError(f"b - a must be > 0 for Lemma 2; got a={a!r}, b={b!r}")
    return _out(_lemma2(eps, b - a, alpha))


def _theory_iv(eps, a, b, alpha):
    e = np.asarray(eps, dtype=float)
    if not np.all(np.isfinite(e)) or (e.size and e.min() < 0):
        raise ValueError(f"eps must be finite and >= 0; got {eps!r}")
    a, b = _range_iv(a, b)
    alpha = None if alpha is None else check_alpha(alpha)
    return e, a, b, alpha


def theory_bounds(eps, *, m, r, a, b, alpha=None) -> TheoryBounds:
    r"""Size and average-power bounds of the realistic test (Lemma 2, Theorems 2 and 4).

    Parameters
    ----------
    eps : float or array_like
        Rejection threshold(s): reject when :math:`T > \epsilon`.
    m, r : int or array_like of int, keyword-only
        Null variants and replicates per variant (broadcast with ``eps``).
    a, b : float, keyword-only
        Null range (true, or the plug-in from :func:`estimate_range`).
    alpha : float, optional, keyword-only
        Level; when given, ``valid`` and ``lemma2_m`` are filled in.

    Returns
    -------
    TheoryBounds

    Notes
    -----
    With :math:`w = b - a` and :math:`s_r = \sqrt{\log r / r}`:

    * Lemma 2: the ideal test's size is at most :math:`(1 - \epsilon/w)^m`;
    * Theorem 2: :math:`\sup_{p' \in [a,b]} P(T_{m,r} > \epsilon \mid p') \le
      (1 - (\epsilon - s_r)/w)^m + 2m/\sqrt r`;
    * Theorem 4: under Assumption 3, the average power over :math:`p' \sim \mathrm{Unif}(P_1)`
      is at least
      :math:`H = \frac{2}{1-w}\{(1 - (\epsilon + s_r)/w)^m - 1\}(\epsilon + s_r) + 1 - 2m/\sqrt r`.

    The union term :math:`2m/\sqrt r` comes from Lemma 1 (Hoeffding for each of the m
    differences at deviation :math:`s_r`).  Theorem 2 is written with ``2m/sqrt(r)``; Algorithm
    C's line 8 misprints it as ``2m/r`` (STATS.md C3 erratum) - not copied.

    Departures (clarifications, not changes): the base :math:`1 - (\epsilon - s_r)/w` is clipped
    at 0 (for :math:`\epsilon - s_r \ge w` the ideal probability is 0, and a negative base
    raised to an even m would be wrong), and likewise the base in Theorem 4.  The proofs only
    need :math:`0 \le \epsilon - s_r \le w` for the size bound; for :math:`\epsilon < s_r` the
    bound exceeds 1 and is trivially true.  Theorem 4 is stated for
    :math:`\epsilon < \min(a, w, 1-b)`; beyond that its formula still lower-bounds the average
    of Theorem 3's :math:`\phi` (the near-boundary zones are truncated, which only raises the
    average).  At w = 1 (P_1 empty) the power bound is NaN; at w = 0 (a point null) the first
    size term is 0 once :math:`\epsilon \ge s_r`.
    """
    eps, a, b, alpha = _theory_iv(eps, a, b, alpha)
    m = _int_array(m, "m", lo=1)
    r = _int_array(r, "r", lo=1)
    w = b - a
    size = _size_bound(eps, m, r, w)
    power = _power_bound(eps, m, r, w)
    if w <= 0:
        ideal = np.where(np.broadcast_to(eps, np.broadcast(eps, m).shape) >= 0, 0.0, 1.0)
        l2 = None
    else:
        ideal = np.clip(1.0 - eps / w, 0.0, None) ** m
        l2 = None if alpha is None else _out(_lemma2(eps, w, alpha))
    if w >= 1:
        warn_degenerate("theory_bounds: b - a = 1 leaves no alternative (P_1 is empty); power bound is NaN")
    valid = None if alpha is None else _out(size <= alpha)
    return TheoryBounds(
        eps=_out(eps), m=_out(m), r=_out(r), a=a, b=b, s_r=_out(_s(r)), lemma2_m=l2, ideal_size=_out(ideal),
        size_bound=_out(size), power_bound=_out(power), valid=valid, alpha=alpha,
        method="composite_null_bounds (Lemma 2, Theorem 2, Theorem 4)",
        assumptions=(_ASSUMPTION_1, _ASSUMPTION_2, _ASSUMPTION_3, _REPLICATES),
    )


def _power_curve_iv(p_prime, eps, m, r, a, b):
    p = np.asarray(p_prime, dtype=float)
    if not np.all(np.isfinite(p)) or (p.size and (p.min() < 0 or p.max() > 1)):
        raise ValueError(f"p_prime must lie in [0, 1]; got {p_prime!r}")
    eps = _real(eps, "eps", lo=0.0)
    m = _int(m, "m", lo=1)
    r = None if r is None else _int(r, "r", lo=1)
    a, b = _range_iv(a, b)
    if b <= a:
        raise ValueError(f"b must be > a for a power curve; got a={a!r}, b={b!r}")
    return p, eps, m, r, a, b


def power_curve(p_prime, *, eps, m, a, b, r=None) -> PowerCurve:
    r"""Power of the ideal test (Lemma 3) or Theorem 3's lower bound for the realistic test.

    Parameters
    ----------
    p_prime : array_like
        Test-variant probabilities.
    eps : float, keyword-only
    m : int, keyword-only
    a, b : float, keyword-only
    r : int, optional, keyword-only
        Replicates; None gives the ideal test (Lemma 3), an int Theorem 3's bound.

    Notes
    -----
    Lemma 3 (exact, ideal test, for p' outside [a, b]): with :math:`w = b - a`,
    :math:`P(\tilde T_m > \epsilon \mid p') = P(|p_1 - p'| > \epsilon)^m`, i.e.
    1 for :math:`p' \le a - \epsilon` or :math:`p' \ge b + \epsilon`,
    :math:`((b - p' - \epsilon)/w)^m` on :math:`(a - \epsilon, a)` and
    :math:`((p' - \epsilon - a)/w)^m` on :math:`(b, b + \epsilon)`.  Computed here as the
    product formula for every p' (inside [a, b] too, where it is the ideal size curve of
    Lemma 2's proof), which agrees with the lemma on its domain.

    Theorem 3 (lower bound, realistic test, p' outside [a, b]) with :math:`\delta = \epsilon + s_r`:
    :math:`1 - 2m/\sqrt r` beyond :math:`\delta` of the range and
    :math:`(1 - \delta/w)^m - 2m/\sqrt r` within it (base clipped at 0); NaN inside [a, b],
    where the theorem says nothing.
    """
    p, eps, m, r, a, b = _power_curve_iv(p_prime, eps, m, r, a, b)
    w = b - a
    if r is None:
        near = np.clip(np.minimum(p + eps, b) - np.maximum(p - eps, a), 0.0, None)
        power = (1.0 - near / w) ** m
        method = "ideal_power (Lemma 3)"
        assumptions = (_ASSUMPTION_1, _ASSUMPTION_2)
    else:
        delta = eps + float(_s(r))
        union = 2.0 * m / math.sqrt(r)
        inner = max(0.0, 1.0 - delta / w) ** m - union
        power = np.where((p <= a - delta) | (p >= b + delta), 1.0 - union, inner)
        power = np.where((p >= a) & (p <= b), np.nan, power)
        method = "realistic_power_lower_bound (Theorem 3)"
        assumptions = (_ASSUMPTION_1, _ASSUMPTION_2, _REPLICATES)
    return PowerCurve(p_prime=p, power=np.asarray(power, dtype=float), eps=eps, m=m, r=r, a=a, b=b,
                      method=method, assumptions=assumptions)


# --------------------------------------------------------------------------------------
# exact calibration under Assumption 2 (STATS.md C5)


def _window(r: int, a: float, b: float) -> tuple[int, int]:
    pad = _WINDOW_SD * math.sqrt(r) + 2.0
    return max(0, int(math.floor(a * r - pad))), min(r, int(math.ceil(b * r + pad)))


def _mixture_pmf(r: int, a: float, b: float, lo: int, hi: int) -> np.ndarray:
    """P(K = k) for k in [lo, hi] when K | p ~ Binomial(r, p) and p ~ Unif[a, b]."""
    k = np.arange(lo, hi + 1, dtype=float)
    if b - a <= 1e-12:
        return np.exp(_log_binom_pmf(k, r, a))
    # int_a^b C(r,k) p^k (1-p)^(r-k) dp = [I_b(k+1, r-k+1) - I_a(k+1, r-k+1)] / (r + 1).  More than
    # 12 sqrt(r) counts inside both ends the two incomplete betas are 1 and 0 to double precision,
    # so the (slow) betainc is only evaluated near the ends.
    pmf = np.full(k.shape, 1.0 / ((b - a) * (r + 1)))
    pad = _WINDOW_SD * math.sqrt(r) + 2.0
    edge = ~((k >= a * r + pad) & (k <= b * r - pad))
    ke = k[edge]
    pmf[edge] = (betainc(ke + 1.0, r - ke + 1.0, b) - betainc(ke + 1.0, r - ke + 1.0, a)) / ((b - a) * (r + 1))
    return np.clip(pmf, 0.0, None)


def _flush(x: np.ndarray) -> np.ndarray:
    """Zero values below 1e-250 in place: they cannot matter, and subnormal floats make every
    later product and power an order of magnitude slower."""
    x[x < 1e-250] = 0.0
    return x


def _pow(base: np.ndarray, n: int) -> np.ndarray:
    return _flush(np.power(_flush(np.clip(base, 0.0, 1.0)), n))


def _log_binom_pmf(k, r, p):
    k = np.asarray(k, dtype=float)
    p = np.asarray(p, dtype=float)
    return (gammaln(r + 1.0) - gammaln(k + 1.0) - gammaln(r - k + 1.0) + xlogy(k, p) + xlog1py(r - k, -p))


class _NullGroup:
    """Null variants sharing one replicate count: the mixture pmf and its cdf, computed once."""

    def __init__(self, r: int, n: int, a: float, b: float):
        self.r, self.n = r, n
        self.lo, self.hi = _window(r, a, b)
        self.pmf = _mixture_pmf(r, a, b, self.lo, self.hi)
        self.cdf = np.concatenate([[0.0], np.cumsum(self.pmf)])

    def cdf_at(self, k):
        """P(K <= k) for integer arrays k (0 below the window, the window's total above)."""
        idx = np.clip(np.asarray(k) - self.lo + 1, 0, self.cdf.size - 1)
        return self.cdf[idx]

    def close_prob(self, kt: np.ndarray, rt: int, eps: float) -> np.ndarray:
        """P(|K/r - kt/rt| <= eps) for every test count kt."""
        r = self.r
        x = kt / rt
        lo = np.ceil((x - eps) * r).astype(np.int64)
        hi = np.floor((x + eps) * r).astype(np.int64)

        def ok(k):
            return _distance(k, r, kt, rt) <= eps

        # The float products above can be one off at ties; settle each end with the exact predicate.
        for _ in range(2):
            lo = np.where(ok(lo - 1) & (lo - 1 >= 0), lo - 1, lo)
            lo = np.where(~ok(lo) & (lo <= hi), lo + 1, lo)
            hi = np.where(ok(hi + 1) & (hi + 1 <= r), hi + 1, hi)
            hi = np.where(~ok(hi) & (hi >= lo), hi - 1, hi)
        lo, hi = np.clip(lo, 0, r), np.clip(hi, 0, r)
        return np.where(hi >= lo, self.cdf_at(hi) - self.cdf_at(lo - 1), 0.0)


def _groups(reps: np.ndarray, a: float, b: float) -> list[_NullGroup]:
    values, counts = np.unique(reps, return_counts=True)
    return [_NullGroup(int(v), int(c), a, b) for v, c in zip(values, counts)]


def _reject_given_test(groups, kt, rt, eps):
    """g(kt) = P(every null variant is farther than eps from kt/rt)."""
    g = np.ones(kt.shape, dtype=float)
    for grp in groups:
        g *= _pow(1.0 - grp.close_prob(kt, rt, eps), grp.n)
        _flush(g)
    return g


def _log_choose(lo, hi, r):
    k = np.arange(lo, hi + 1, dtype=float)
    return gammaln(r + 1.0) - gammaln(k + 1.0) - gammaln(r - k + 1.0)


def _expect_binomial(g, kt_lo, rt, p, log_choose=None):
    """E[g(K')] for K' ~ Binomial(rt, p), for each p in an array; g is given on [kt_lo, kt_lo + len(g)).

    Counts outside g's window carry negligible mass for p in the null range (see _window), and
    within it only +/-9 SD around each mean contribute (relative tail mass < 1e-18).
    """
    p = np.atleast_1d(np.asarray(p, dtype=float))
    n_g = g.size
    lc = _log_choose(kt_lo, kt_lo + n_g - 1, rt) if log_choose is None else log_choose
    sd = math.sqrt(rt * float(np.max(p * (1.0 - p)))) if p.size else 0.0
    half = int(9.0 * sd) + 6
    width = min(2 * half + 1, n_g)
    starts = np.clip(np.floor(p * rt).astype(np.int64) - half - kt_lo, 0, n_g - width)
    idx = starts[:, None] + np.arange(width)[None, :]
    k = (idx + kt_lo).astype(float)
    logp = lc[idx] + xlogy(k, p[:, None]) + xlog1py(rt - k, -p[:, None])
    return np.sum(_flush(np.exp(logp)) * g[idx], axis=1)


def _p_grid(a, b, rt, eps):
    if b - a <= 1e-12:
        return np.array([a])
    if rt <= 100:
        # E[g(K')] is then a polynomial of degree <= 100 in p': 81 points and the local refinement
        # in _sup_over_p pin its maximum.
        return np.linspace(a, b, 81)
    edge = min(b - a, eps + 6.0 / math.sqrt(rt))
    return np.unique(np.concatenate([
        np.linspace(a, b, 61), np.linspace(a, a + edge, 40), np.linspace(b - edge, b, 40)]))


def _sup_over_p(g, kt_lo, rt, a, b, eps, grid_values=None, grid=None):
    """sup over p' in [a, b] of E[g(K')]: grid search, then bounded refinement around the best points."""
    if grid is None:
        grid = _p_grid(a, b, rt, eps)
    lc = _log_choose(kt_lo, kt_lo + g.size - 1, rt)
    vals = _expect_binomial(g, kt_lo, rt, grid, lc) if grid_values is None else grid_values
    best_i = int(np.argmax(vals))
    best, best_p = float(vals[best_i]), float(grid[best_i])
    if grid.size == 1:
        return best, best_p
    # Two rounds of a dense local grid around the two best points: E[g(K')] is a smooth polynomial
    # in p', so this pins its maximum to ~1/4000 of the grid step with two vectorised evaluations.
    for i in np.argsort(vals)[-2:]:
        lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
        for _ in range(2):
            if hi <= lo:
                break
            local = np.linspace(lo, hi, 65)
            lv = _expect_binomial(g, kt_lo, rt, local, lc)
            j = int(np.argmax(lv))
            if lv[j] > best:
                best, best_p = float(lv[j]), float(local[j])
            step = local[1] - local[0]
            lo, hi = max(local[j] - step, grid[0]), min(local[j] + step, grid[-1])
    return min(best, 1.0), best_p


def _test_window(rt, a, b):
    return _window(rt, a, b)


def _exact_size_core(eps, reps, rt, a, b, groups=None):
    groups = _groups(reps, a, b) if groups is None else groups
    lo, hi = _test_window(rt, a, b)
    kt = np.arange(lo, hi + 1)
    g = _reject_given_test(groups, kt, rt, eps)
    size, worst = _sup_over_p(g, lo, rt, a, b, eps)
    if b - a <= 1e-12:
        average = size
    else:
        same = [grp for grp in groups if grp.r == rt]
        pmf = same[0].pmf if same else _mixture_pmf(rt, a, b, lo, hi)
        average = float(np.dot(pmf, g))
    return size, worst, average, g, (lo, hi)


def _exact_iv(eps, m, r, a, b, alpha):
    eps = _real(eps, "eps", lo=0.0)
    m = _int(m, "m", lo=1)
    r = _int(r, "r", lo=1)
    if r > _MAX_EXACT_R:
        raise ValueError(f"r must be <= {_MAX_EXACT_R} for the exact calibration (memory); got {r!r}")
    a, b = _range_iv(a, b)
    alpha = None if alpha is None else check_alpha(alpha)
    return eps, m, r, a, b, alpha


def exact_size(eps, *, m, r, a, b, alpha=None) -> ExactSize:
    r"""Exact size of the realistic test under Assumption 2 (beyond the paper, STATS.md C5).

    Parameters
    ----------
    eps : float
        Threshold: reject when :math:`T > \epsilon`.
    m, r : int, keyword-only
        Null variants and replicates (the test variant also has r replicates).
    a, b : float, keyword-only
        Null range.
    alpha : float, optional, keyword-only
        When given, ``valid = size <= alpha``.

    Returns
    -------
    ExactSize

    Notes
    -----
    Under Assumption 2 each null count is a uniform-binomial mixture,

    .. math::

        P(K_j = k) = \int_a^b \binom{r}{k} p^k (1-p)^{r-k} \frac{dp}{b-a}
                   = \frac{I_b(k+1, r-k+1) - I_a(k+1, r-k+1)}{(b-a)(r+1)},

    (:math:`I_x` the regularized incomplete beta), independent across j and of :math:`K'`.
    Given :math:`K' = k'`, the test rejects iff every null is farther than eps:

    .. math::

        g(k') = \prod_j \bigl(1 - P(|K_j/r - k'/r| \le \epsilon)\bigr),\qquad
        P(T > \epsilon \mid p') = \sum_{k'} \binom{r}{k'} p'^{k'} (1-p')^{r-k'} g(k').

    The size is the supremum over :math:`p' \in [a, b]`, found on a grid (dense near the
    ends of the range, where it is attained) refined by two rounds of dense local grids; the average over
    :math:`p' \sim \mathrm{Unif}[a, b]` is :math:`\sum_{k'} P(K_j = k') g(k')` exactly.  This
    replaces the union bound :math:`2m/\sqrt r` of Theorem 2 by the exact probability, so the
    same level needs far fewer replicates.  Sums run over windows of +/-12 sqrt(r) counts around
    [a r, b r]; the mass left out is below 1e-100.  Distances use the statistic's own float
    expression, so ties at eps are classified exactly as :func:`composite_statistic` would.

    With b = a (a point null) the mixture is Binomial(r, a).
    """
    eps, m, r, a, b, alpha = _exact_iv(eps, m, r, a, b, alpha)
    size, worst, average, _, _ = _exact_size_core(eps, np.full(m, r), r, a, b)
    return ExactSize(
        size=size, worst_p=worst, average_size=average, eps=eps, m=m, r=r, a=a, b=b, alpha=alpha,
        valid=None if alpha is None else bool(size <= alpha),
        method="exact_uniform_binomial_mixture (STATS.md C5)",
        assumptions=(_ASSUMPTION_1, _ASSUMPTION_2, _REPLICATES,
                     "supremum over p' found numerically (grid plus bounded refinement)"),
    )


def _exact_power_core(eps, m, r, a, b):
    groups = _groups(np.full(m, r), a, b)
    # Under H_A (Assumption 3) p' ranges over all of (0, a) U (b, 1): test counts far from the
    # null range see no null within eps, so g = 1 there and only the window needs computing.
    lo, hi = _test_window(r, a, b)
    lo = max(0, lo - int(math.ceil(eps * r)) - 2)
    hi = min(r, hi + int(math.ceil(eps * r)) + 2)
    kt = np.arange(lo, hi + 1, dtype=float)
    g = _reject_given_test(groups, kt.astype(np.int64), r, eps)
    # P(K' = k', p' in (0, a)) + P(K' = k', p' in (b, 1)) = [I_a(k'+1, r-k'+1) + 1 - I_b(...)] / (r + 1)
    wts = (betainc(kt + 1, r - kt + 1, a) + (1.0 - betainc(kt + 1, r - kt + 1, b))) / (r + 1)
    total_alt = a + (1.0 - b)
    inside = float(np.sum(wts))
    return (float(np.dot(wts, g)) + max(total_alt - inside, 0.0)) / total_alt


def exact_power(eps, *, m, r, a, b) -> ExactPower:
    r"""Exact average power over :math:`p' \sim \mathrm{Unif}((0, a) \cup (b, 1))` (Assumptions 2, 3).

    Notes
    -----
    With g as in :func:`exact_size`, the average power is

    .. math::

        \frac{1}{1 - (b - a)} \sum_{k'} g(k')\,
        \frac{I_a(k'+1, r-k'+1) + 1 - I_b(k'+1, r-k'+1)}{r + 1},

    since :math:`\int_0^a \binom{r}{k} p^k (1-p)^{r-k} dp = I_a(k+1, r-k+1)/(r+1)`.  It is the
    exact counterpart of Theorem 4's lower bound H (which it always exceeds).  Requires
    b - a < 1.
    """
    eps, m, r, a, b, _ = _exact_iv(eps, m, r, a, b, None)
    if b - a >= 1:
        raise ValueError(f"b - a must be < 1 for an average power (P_1 is empty otherwise); got a={a!r}, b={b!r}")
    return ExactPower(
        power=_exact_power_core(eps, m, r, a, b), eps=eps, m=m, r=r, a=a, b=b,
        method="exact_average_power (uniform-binomial mixture, STATS.md C5)",
        assumptions=(_ASSUMPTION_1, _ASSUMPTION_2, _ASSUMPTION_3, _REPLICATES),
    )


# --------------------------------------------------------------------------------------
# Algorithm C: the budgeted design search


def _eps_max(a, b, rule):
    w = b - a
    c = min(a, w, 1.0 - b)
    if rule == "algorithm_c":
        return c, "min(a_hat, b_hat - a_hat, 1 - b_hat) (Algorithm C, line 3)"
    if rule == "width":
        return w, "b_hat - a_hat (the paper's section 5.2 experiment)"
    if c > 0:
        return c, "min(a_hat, b_hat - a_hat, 1 - b_hat) (Algorithm C, line 3)"
    edge = "a_hat = 0" if a <= 0 else "b_hat = 1"
    return w, (f"b_hat - a_hat, because {edge} makes Algorithm C's min(a_hat, b_hat - a_hat, 1 - b_hat) zero "
               "(the paper's section 5.2 experiment used the width then; Theorem 2 holds for any "
               "eps <= b - a)")


def _eps_grid(eps_max, step):
    n = int(math.floor(eps_max / step + 1e-9))
    grid = step * np.arange(1, n + 1)
    return grid[grid < eps_max - 1e-12]


def _design_iv(a_hat, b_hat, budget, alpha, pilot_m, pilot_r, eps_step, eps_max_rule, method):
    a, b = _range_iv(a_hat, b_hat, ("a_hat", "b_hat"))
    budget = _int(budget, "budget", lo=1)
    alpha = check_alpha(alpha)
    pilot_m = _int(pilot_m, "pilot_m", lo=0)
    pilot_r = _int(pilot_r, "pilot_r", lo=0)
    eps_step = _real(eps_step, "eps_step", lo=0.0, hi=1.0, lo_open=True)
    eps_max_rule = _choice(eps_max_rule, "eps_max_rule", EPS_MAX_RULES)
    method = _choice(method, "method", METHODS)
    if pilot_m * pilot_r > budget:
        raise ValueError(f"budget must exceed the pilot cost pilot_m * pilot_r = {pilot_m * pilot_r}; got {budget}")
    return a, b, budget, alpha, pilot_m, pilot_r, eps_step, eps_max_rule, method


_DESIGN_NOTES = {
    "union": ("validity: Theorem 2 bound (1 - (eps - s_r)/w)^m + 2m/sqrt(r) <= alpha (not Algorithm C line 8's "
              "misprinted 2m/r)",
              "objective: Theorem 4 average-power bound with 2/(1 - w) (not section 3.1's 2/(b - a))",
              "m = max(ceil(|log alpha| / |log(1 - eps/w)|), m~) (Lemma 2), r = floor((nu - m~ r~) / m)"),
    "exact": ("validity: exact size under Assumption 2 (uniform-binomial mixture) <= alpha, beyond the paper",
              "objective: exact average power under Assumptions 2 and 3",
              "m = the smallest m >= max(Lemma 2's m, m~) whose exact size is <= alpha; r = floor((nu - m~ r~) / m)"),
}


def design_search(a_hat, b_hat, budget, *, alpha, pilot_m=0, pilot_r=0, eps_step=0.001,
                  eps_max_rule="auto", method="union") -> PerturbationDesign:
    r"""Algorithm C: choose (eps, m, r) under a sampling budget nu.

    Parameters
    ----------
    a_hat, b_hat : float
        Plug-in null range (from :func:`estimate_range` on a pilot, or given).
    budget : int
        Total budget :math:`\nu` in model calls, pilot included.
    alpha : float, keyword-only
    pilot_m, pilot_r : int, keyword-only
        Pilot size :math:`\tilde m, \tilde r`; the pilot cost is subtracted from nu and m is at
        least :math:`\tilde m` (Algorithm C lines 2 and 6).
    eps_step : float, keyword-only
        Grid step :math:`\eta_\epsilon`; thresholds :math:`\eta, 2\eta, \dots < \epsilon_{max}`.
    eps_max_rule : {"auto", "algorithm_c", "width"}, keyword-only
        ``"algorithm_c"``: :math:`\min(\hat a, \hat b - \hat a, 1 - \hat b)` (line 3);
        ``"width"``: :math:`\hat b - \hat a` (what the paper's experiment used when
        :math:`\hat b = 1`); ``"auto"`` (default): Algorithm C's rule unless it is zero, then the
        width.  The rule applied is stated in the result.
    method : {"union", "exact"}, keyword-only
        ``"union"``: the paper's Theorem 2 constraint and Theorem 4 objective.  ``"exact"``: the
        exact size and exact average power under Assumption 2 (slower; use a coarser eps_step).

    Returns
    -------
    PerturbationDesign
        When no triple is valid, ``min_budget`` gives the smallest nu that would admit one.

    Notes
    -----
    With :math:`w = \hat b - \hat a`, :math:`s_r = \sqrt{\log r / r}`, for each eps on the grid:

    .. math::

        m = \max\left(\left\lceil \frac{|\log\alpha|}{|\log(1 - \epsilon/w)|}\right\rceil,
                      \tilde m\right),\quad r = \left\lfloor \frac{\nu - \tilde m\tilde r}{m}
                      \right\rfloor,

    valid iff :math:`(1 - (\epsilon - s_r)/w)^m + 2m/\sqrt r \le \alpha` (Theorem 2), and the
    valid triple maximising
    :math:`H = \frac{2}{1-w}\{(1 - (\epsilon + s_r)/w)^m - 1\}(\epsilon + s_r) + 1 - 2m/\sqrt r`
    (Theorem 4) is chosen.  Errata (STATS.md C3): Algorithm C line 8 prints 2m/r, section 3.1
    misplaces a parenthesis in the constraint, and line 10 / section 3.1 disagree on the factor
    2/(1 - w) vs 2/(b - a); Theorems 2 and 4 are what is proven and are implemented.  The
    paper's worked example (0.898, 1), nu = 5e6, alpha = 0.1 -> (26, 192307, 0.085) violates
    Theorem 2 and is not reproduced.

    Degenerate ranges: w = 0 (all pilot rates equal) or w = 1 admit no design (warned).
    """
    a, b, budget, alpha, pilot_m, pilot_r, eps_step, eps_max_rule, method = _design_iv(
        a_hat, b_hat, budget, alpha, pilot_m, pilot_r, eps_step, eps_max_rule, method)
    w = b - a
    pilot_cost = pilot_m * pilot_r
    eps_max, rule = _eps_max(a, b, eps_max_rule)
    assumptions = (_ASSUMPTION_1, _ASSUMPTION_2, _ASSUMPTION_3, _REPLICATES, _PLUG_IN)
    notes = list(_DESIGN_NOTES[method])
    common = dict(alpha=alpha, budget=budget, pilot_m=pilot_m, pilot_r=pilot_r, pilot_cost=pilot_cost,
                  a_hat=a, b_hat=b, width=w, eps_max=eps_max, eps_max_rule=rule, eps_step=eps_step,
                  method="union_bound (Theorems 2 and 4)" if method == "union" else "exact_mixture (STATS.md C5)",
                  assumptions=assumptions)
    if w <= 0 or w >= 1:
        warn_degenerate(f"design_search: the null range has width {w:g}; "
                        + ("all pilot rates are equal, so Lemma 2 needs infinitely many variants"
                           if w <= 0 else "[0, 1] leaves no alternative to detect"))
        return PerturbationDesign(valid=False, eps=None, m=None, r=None, size_bound=None, power_bound=None,
                                  exact_size=None, exact_power=None, objective=None, n_candidates=0, n_valid=0,
                                  min_budget=None, notes=tuple(notes + ["degenerate null range: no design"]),
                                  **common)
    grid = _eps_grid(eps_max, eps_step)
    spend = budget - pilot_cost
    best = None
    n_valid = 0
    if grid.size:
        ms = np.maximum(_lemma2(grid, w, alpha), pilot_m)
        rs = spend // ms
        if method == "union":
            ok = rs >= 1
            size = np.where(ok, _size_bound(grid, ms, np.maximum(rs, 1), w), np.inf)
            power = np.where(ok, _power_bound(grid, ms, np.maximum(rs, 1), w), -np.inf)
            valid = ok & (size <= alpha)
            n_valid = int(valid.sum())
            if n_valid:
                i = int(np.flatnonzero(valid)[np.argmax(power[valid])])
                best = dict(eps=float(grid[i]), m=int(ms[i]), r=int(rs[i]), objective=float(power[i]),
                            exact_size=None, exact_power=None)
        else:
            for e, m0 in zip(grid, ms):
                found = _exact_smallest_m(float(e), int(m0), spend, a, b, alpha)
                if found is None:
                    continue
                n_valid += 1
                m, r, size = found
                pw = _exact_power_core(float(e), m, r, a, b)
                if best is None or pw > best["objective"]:
                    best = dict(eps=float(e), m=m, r=r, objective=pw, exact_size=size, exact_power=pw)
    if best is None:
        mb = minimal_budget(a, b, alpha=alpha, pilot_m=pilot_m, pilot_r=pilot_r, eps_step=eps_step,
                            eps_max_rule=eps_max_rule, method=method)
        notes.append("no valid (eps, m, r) under this budget"
                     + (f"; the smallest budget that gives one is {mb.budget}" if mb.budget else
                        "; no budget gives one on this eps grid"))
        return PerturbationDesign(valid=False, eps=None, m=None, r=None, size_bound=None, power_bound=None,
                                  exact_size=None, exact_power=None, objective=None, n_candidates=int(grid.size),
                                  n_valid=0, min_budget=mb.budget, notes=tuple(notes), **common)
    sb = float(_size_bound(best["eps"], best["m"], best["r"], w))
    pb = float(_power_bound(best["eps"], best["m"], best["r"], w))
    return PerturbationDesign(valid=True, eps=best["eps"], m=best["m"], r=best["r"], size_bound=sb,
                              power_bound=pb, exact_size=best["exact_size"], exact_power=best["exact_power"],
                              objective=best["objective"], n_candidates=int(grid.size), n_valid=n_valid,
                              min_budget=None, notes=tuple(notes), **common)


def _exact_smallest_m(eps, m0, spend, a, b, alpha, extra=6):
    """Smallest m in [m0, m0 + extra] with exact size <= alpha at r = spend // m (None if none)."""
    for m in range(m0, m0 + extra + 1):
        r = spend // m
        if r < 1:
            return None
        if r > _MAX_EXACT_R:
            continue
        size = _exact_size_core(eps, np.full(m, r), r, a, b)[0]
        if size <= alpha:
            return m, r, size
    return None


def _ideal_average_power(eps, m, a, b):
    """Lemma 3 averaged over p' ~ Unif((0, a) U (b, 1)): the r -> infinity limit of the average power."""
    w = b - a
    total = 0.0
    for side in (a, 1.0 - b):
        near = min(eps, side)
        u_hi = max(0.0, (w + near - eps) / w)
        u_lo = max(0.0, (w - eps) / w)
        total += (side - near) + w / (m + 1) * (u_hi ** (m + 1) - u_lo ** (m + 1))
    return total / (1.0 - w)


def _min_r(valid, r_cap):
    """Smallest r in [1, r_cap] with valid(r), assuming validity is monotone in r (None if none)."""
    if valid(1):
        return 1
    if r_cap < 2:
        return None
    hi = 2
    while not valid(hi):
        if hi >= r_cap:
            return None
        hi = min(hi * 2, r_cap)
    lo = hi // 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if valid(mid):
            hi = mid
        else:
            lo = mid
    return hi


def minimal_budget(a_hat, b_hat, *, alpha, power=None, eps=None, pilot_m=0, pilot_r=0, eps_step=0.001,
                   eps_max_rule="auto", method="union", m_max=None) -> BudgetResult:
    r"""Smallest budget :math:`\nu = m r + \tilde m \tilde r` that admits a valid design.

    Parameters
    ----------
    a_hat, b_hat : float
    alpha : float, keyword-only
    power : float, optional, keyword-only
        Also require a guaranteed average power of at least this much: Theorem 4's bound H for
        ``"union"``, the exact average power (:func:`exact_power`) for ``"exact"``.  Without it
        any valid design counts - including useless ones (e.g. r = 1 with the exact size, whose
        size and power are both near 0), which is what Algorithm C's "smallest budget that gives
        a valid triple" means.
    eps : float, optional, keyword-only
        Fix the threshold and let m vary from Lemma 2's m upward.  Without it, Algorithm C's
        rules apply: eps on the grid below eps_max, m from Lemma 2 (at least the pilot's m~) for
        ``"union"``, and for ``"exact"`` the first of Lemma 2's m and the next three whose exact
        size fits (the exact grid is thinned to at most 25 thresholds).
    pilot_m, pilot_r, eps_step, eps_max_rule : keyword-only
        As in :func:`design_search`.
    method : {"union", "exact"}, keyword-only
    m_max : int, optional, keyword-only
        Largest m tried when ``eps`` is given (default 4 * Lemma 2's m + 20 for ``"union"``,
        Lemma 2's m + 3 for ``"exact"``).

    Returns
    -------
    BudgetResult

    Notes
    -----
    For fixed (eps, m) the Theorem 2 bound falls and the Theorem 4 bound rises with r (r >= 3),
    so the smallest adequate r is found by doubling and bisection.  The exact size and power are
    not strictly monotone in r (lattice effects); the bisection only ever returns an r at which
    both requirements were computed to hold, so the returned design is valid, though a slightly
    smaller r could exist.  Exact r is capped at 2e7.
    """
    a, b = _range_iv(a_hat, b_hat, ("a_hat", "b_hat"))
    alpha = check_alpha(alpha)
    method = _choice(method, "method", METHODS)
    power = None if power is None else _real(power, "power", lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    pilot_m = _int(pilot_m, "pilot_m", lo=0)
    pilot_r = _int(pilot_r, "pilot_r", lo=0)
    eps_step = _real(eps_step, "eps_step", lo=0.0, hi=1.0, lo_open=True)
    eps_max_rule = _choice(eps_max_rule, "eps_max_rule", EPS_MAX_RULES)
    m_max = None if m_max is None else _int(m_max, "m_max", lo=1)
    w = b - a
    if eps is not None:
        eps = _real(eps, "eps", lo=0.0, lo_open=True)
        if w > 0 and eps >= w:
            raise ValueError(f"eps must be < b_hat - a_hat = {w:g}; got {eps!r}")
    pilot_cost = pilot_m * pilot_r
    assumptions = (_ASSUMPTION_1, _ASSUMPTION_2, _REPLICATES) + ((_ASSUMPTION_3,) if power else ())
    name = "union_bound (Theorems 2 and 4)" if method == "union" else "exact_mixture (STATS.md C5)"
    target = () if power is None else (f"guaranteed average power >= {power:g}",)
    if w <= 0 or w >= 1:
        warn_degenerate(f"minimal_budget: the null range has width {w:g}; no design exists")
        return BudgetResult(budget=None, eps=None, m=None, r=None, size=None, power=None, alpha=alpha, a=a, b=b,
                            pilot_cost=pilot_cost, method=name, assumptions=assumptions,
                            notes=("degenerate null range",))
    r_cap = 10**15 if method == "union" else _MAX_EXACT_R

    def evaluate(e, m, r):
        if method == "union":
            return float(_size_bound(e, m, r, w)), float(_power_bound(e, m, r, w))
        size = _exact_size_core(e, np.full(m, r), r, a, b)[0]
        if size > alpha or power is None:
            return size, None
        return size, _exact_power_core(e, m, r, a, b)

    def adequate(e, m, r):
        size, pw = evaluate(e, m, r)
        return size <= alpha and (power is None or pw >= power)

    best = None
    ceiling = None
    if method == "exact":
        # Theorem 2 and 4 bound the exact size and power, so the union method's answer is adequate
        # for the exact criteria too: no exact design needs more, which caps the (costly) search.
        union = minimal_budget(a, b, alpha=alpha, power=power, eps=eps, pilot_m=pilot_m, pilot_r=pilot_r,
                               eps_step=eps_step, eps_max_rule=eps_max_rule, method="union", m_max=m_max)
        if union.budget is not None:
            ceiling = (union.budget - pilot_cost, union.eps, union.m, union.r)

    def consider(e, m):
        nonlocal best
        if method == "exact" and power is not None and _ideal_average_power(e, m, a, b) < power:
            # even r = infinity (the ideal test, Lemma 3) would not reach the target
            return None
        # No r above what the best design so far costs can win: capping prunes most of the search.
        bound = best if best is not None else ceiling
        cap = r_cap if bound is None else min(r_cap, (bound[0] - 1) // m)
        if cap < 1:
            return None
        r = _min_r(lambda rr: adequate(e, m, rr), cap)
        if r is not None and (best is None or m * r < best[0]):
            best = (m * r, float(e), m, r)
        return r

    if eps is not None:
        m0 = max(int(_lemma2(eps, w, alpha)), pilot_m, 1)
        top = m_max if m_max is not None else (4 * m0 + 20 if method == "union" else m0 + 3)
        since_best = 0
        for m in range(m0, top + 1):
            before = best
            consider(eps, m)
            since_best = 0 if best is not before else since_best + 1
            if since_best >= 5:
                break
        notes = (f"eps fixed at {eps:g}; m searched from Lemma 2's {m0} to at most {top}",) + target
    else:
        eps_max, rule = _eps_max(a, b, eps_max_rule)
        grid = _eps_grid(eps_max, eps_step)
        if method == "exact" and grid.size > 25:
            grid = grid[np.unique(np.linspace(0, grid.size - 1, 25).round().astype(int))]
        # Large thresholds need few variants and are cheap to evaluate: visit them first so the
        # cost cap prunes the expensive small-eps end.
        for e in grid[::-1]:
            m0 = max(int(_lemma2(e, w, alpha)), pilot_m, 1)
            for m in ([m0] if method == "union" else range(m0, m0 + 4)):
                consider(float(e), m)
        notes = (f"Algorithm C rules; eps_max = {eps_max:g} ({rule})",) + target
    if best is None and ceiling is not None and ceiling[3] <= _MAX_EXACT_R:
        best = ceiling
        notes = notes + ("no cheaper exact design than the union-bound one",)
    if best is None:
        return BudgetResult(budget=None, eps=None, m=None, r=None, size=None, power=None, alpha=alpha, a=a, b=b,
                            pilot_cost=pilot_cost, method=name, assumptions=assumptions,
                            notes=notes + ("no adequate design found",))
    cost, e, m, r = best
    size, pw = evaluate(e, m, r)
    if method == "exact" and pw is None:
        pw = _exact_power_core(e, m, r, a, b)
    return BudgetResult(budget=int(cost + pilot_cost), eps=e, m=m, r=r, size=size, power=pw, alpha=alpha,
                        a=a, b=b, pilot_cost=pilot_cost, method=name, assumptions=assumptions, notes=notes)


# --------------------------------------------------------------------------------------
# fixed-design mode for collected logs


def _composite_test_iv(null_counts, null_replicates, test_count, test_replicates, alpha, method, bias_correction):
    k, r, kt, rt = _composite_statistic_iv(null_counts, null_replicates, test_count, test_replicates)
    alpha = check_alpha(alpha)
    method = _choice(method, "method", METHODS)
    if not isinstance(bias_correction, (bool, np.bool_)):
        raise ValueError(f"bias_correction must be True or False; got {bias_correction!r}")
    return k, r, kt, rt, alpha, method, bool(bias_correction)


def _fisher_p(k1, n1, k2, n2) -> float:
    return float(fisher_exact([[k1, n1 - k1], [k2, n2 - k2]], alternative="two-sided").pvalue)


def _union_threshold(m, r_min, w, alpha):
    union = 2.0 * m / math.sqrt(r_min)
    if union >= alpha:
        return None
    s = float(_s(r_min))
    if w <= 0:
        return s
    return s + w * (1.0 - (alpha - union) ** (1.0 / m))


def _union_p(t, m, r_min, w):
    return float(min(1.0, _size_bound(t, m, r_min, w)))


def _n_candidates(reps, rt):
    return int(sum((int(rj) + 1) * (rt + 1) for rj in np.unique(reps)))


_TIE = 1e-12


def _candidates(reps, rt):
    """Every value the statistic can take, sorted, one float per rational value.

    |i/r_j - k/r'| computed in floats can give the same rational two floats one ulp apart
    (e.g. 0.3 - 0.1 vs 0.2).  Values within a relative 1e-12 are one value (distinct ones are at
    least 1/(r_j r') apart), represented by the largest float of the cluster, so "T <= eps" treats
    every float copy of eps alike.
    """
    out = [np.zeros(1)]
    kt = np.arange(rt + 1)
    for rj in np.unique(reps):
        i = np.arange(rj + 1)
        out.append(_distance(i[None, :], rj, kt[:, None], rt).ravel())
    c = np.unique(np.concatenate(out))
    last = np.r_[c[1:] > c[:-1] * (1 + _TIE) + 1e-15, True]
    return c[last]


def _exact_curve(cands, groups, rt, a, b):
    """Grid-sup exact size at every candidate threshold in one pass (small problems)."""
    lo, hi = _test_window(rt, a, b)
    kt = np.arange(lo, hi + 1)
    g = np.ones((kt.size, cands.size))
    for grp in groups:
        i = np.arange(grp.lo, grp.hi + 1)
        d = _distance(i[None, :], grp.r, kt[:, None], rt)                   # (K', I)
        # Every comparison is between the very floats the statistic produces (no offsets or rounding).
        if d.size * cands.size <= 2_000_000:
            pc = np.einsum("kic,i->kc", (d[:, :, None] <= cands[None, None, :]).astype(float), grp.pmf)
        else:
            order = np.argsort(d, axis=1, kind="stable")
            d_sorted = np.take_along_axis(d, order, axis=1)
            cum = np.concatenate([np.zeros((kt.size, 1)), np.cumsum(grp.pmf[order], axis=1)], axis=1)
            pc = np.stack([cum[row, np.searchsorted(d_sorted[row], cands, side="right")]
                           for row in range(kt.size)])
        g *= _pow(1.0 - pc, grp.n)
        _flush(g)
    grid = _p_grid(a, b, rt, float(cands[-1]) if cands.size else 0.0)
    pmf = _flush(np.exp(_log_binom_pmf(kt[None, :], rt, grid[:, None])))    # (P, K')
    return pmf @ g, g, grid, lo


def _exact_fixed(k, r, kt, rt, a, b, alpha, t_obs):
    """(eps_exact, p_exact): smallest threshold with sup-size <= alpha, and sup P(T >= t_obs)."""
    groups = _groups(r, a, b)
    if _n_candidates(r, rt) > _MAX_CANDIDATES:
        return _exact_fixed_large(r, rt, a, b, alpha, t_obs, groups)
    cands = _candidates(r, rt)

    def grid_sup(idx):
        return _exact_curve(cands[idx], groups, rt, a, b)[0].max(axis=0)

    def refined(i):
        vals, gmat, grid, glo = _exact_curve(cands[i:i + 1], groups, rt, a, b)
        return _sup_over_p(gmat[:, 0], glo, rt, a, b, float(cands[i]), grid_values=vals[:, 0], grid=grid)[0]

    # The size falls as eps grows.  Narrow a bracket [lo, hi] around the first candidate whose
    # grid-sup is <= alpha, 64 candidates per pass, then confirm with the refined sup (the grid can
    # only understate it), stepping up where needed.
    lo, hi = 0, cands.size - 1
    if grid_sup(np.array([hi]))[0] > alpha:
        idx = cands.size
    else:
        while hi - lo > 64:
            probe = np.unique(np.linspace(lo, hi, 65).round().astype(np.int64))
            ok = probe[grid_sup(probe) <= alpha]
            new_hi = int(ok[0])
            below = probe[probe < new_hi]
            lo, hi = (int(below[-1]) + 1 if below.size else lo), new_hi
        block = np.arange(lo, hi + 1)
        idx = int(block[np.flatnonzero(grid_sup(block) <= alpha)[0]])
        while idx < cands.size and refined(idx) > alpha:
            idx += 1
    eps_exact = float(cands[idx]) if idx < cands.size else None
    # P(T >= t_obs) = size at the value just below t_obs (float copies of t_obs count as t_obs)
    pos = int(np.searchsorted(cands, t_obs * (1 - _TIE) - 1e-15, side="left"))
    p_exact = 1.0 if pos == 0 else min(1.0, refined(pos - 1))
    return eps_exact, p_exact


def _exact_fixed_large(r, rt, a, b, alpha, t_obs, groups):
    """Large replicate counts: bisect over real thresholds instead of enumerating attainable ones.

    The size is a right-continuous step function of eps that only jumps at attainable values
    (rationals i/r_j - k/r', at least 1/(r_j r') apart), so the bisection's upper end sits within
    1e-13 above the first admissible jump; it is then raised over the jump value's float copies
    (as in _candidates) and the decision T > eps uses that very eps.  For r_j r' above ~1e12 two
    distinct rationals can fall within that tolerance; the probability carried by one such value is
    then far below any level of interest.
    """
    def size(e):
        return _exact_size_core(e, r, rt, a, b, groups)[0]

    lo, hi = 0.0, 1.0
    if size(1e-15) <= alpha:
        hi = 1e-15
    else:
        while hi - lo > 1e-13:
            mid = 0.5 * (lo + hi)
            if size(mid) <= alpha:
                hi = mid
            else:
                lo = mid
    # snap up over float copies of the jump value, as _candidates does
    hi = hi * (1 + _TIE) + 1e-15
    p_exact = 1.0 if t_obs <= 0 else min(1.0, size(t_obs * (1 - _TIE) - 1e-15))
    return hi, p_exact


def composite_test(null_counts, null_replicates, test_count, test_replicates, *, alpha=0.05,
                   method="exact", bias_correction=True) -> CompositeTestResult:
    r"""Fixed-design composite test for logs already collected.

    Given m null variants with :math:`K_j` successes in :math:`r_j` replicates and a test
    variant with :math:`K'` in :math:`r'`: estimate the null range from the null rates
    (Algorithm B, bias-corrected), find the smallest threshold that keeps the size at alpha,
    and decide.

    Parameters
    ----------
    null_counts, null_replicates : array_like of int, shape (m,) (replicates may be a scalar)
    test_count, test_replicates : int
    alpha : float, keyword-only
    method : {"exact", "union"}, keyword-only
        ``"exact"`` (default): exact size under Assumption 2 with the plug-in range
        (:func:`exact_size`, generalised to each variant's own replicate count);
        ``"union"``: Theorem 2's bound.
    bias_correction : bool, keyword-only

    Returns
    -------
    CompositeTestResult

    Notes
    -----
    Union bound: with :math:`r_{min}` the smallest replicate count present, the smallest eps with
    :math:`(1 - (\epsilon - s)/w)^m + 2m/\sqrt{r_{min}} \le \alpha` is

    .. math:: \epsilon_U = s + w\,(1 - (\alpha - 2m/\sqrt{r_{min}})^{1/m}),

    defined only when :math:`2m/\sqrt{r_{min}} < \alpha`; otherwise no threshold keeps the
    bound at alpha (status ``"no_valid_eps"`` for ``method="union"``: never reject).  Using
    :math:`r_{min}` for unequal counts is valid: Hoeffding's bound for
    :math:`\hat p_j - \hat p'` with separate sums has variance proxy
    :math:`1/r_j + 1/r' \le 2/r_{min}`, tighter than the paper's Lemma 1 at :math:`r_{min}`.
    Its p-value is Theorem 2's bound at :math:`\epsilon = T`.

    Exact: the statistic takes finitely many values; the exact size (sup over
    :math:`p' \in [\hat a, \hat b]`) is computed at each and the smallest value with size
    :math:`\le \alpha` is :math:`\epsilon_E`; reject iff :math:`T > \epsilon_E`.  The p-value
    :math:`\sup_{p'} P(T \ge t_{obs})` is the size at the attainable value just below
    :math:`t_{obs}`, so ``reject == (p_value <= alpha)``.  Unequal replicate counts enter
    exactly (each null's mixture uses its own :math:`r_j`).

    Degenerate null sets (explicit, warned, reported in ``status``):

    * all null rates identical - the range estimate collapses to a point and the composite null
      to a simple one; decided by Fisher's exact test of the test variant against the pooled
      null variants (``status="identical_null_rates"``, ``method="fisher_fallback"``);
    * one null variant - no range can be estimated; Fisher's exact test against it
      (``status="one_null_variant"``).

    The plug-in range comes from the same null variants the statistic uses, as in the paper's
    Algorithm C with the pilot reused; with few replicates their binomial noise widens the
    estimate, which errs conservative (checked by simulation in the tests).
    """
    k, r, kt, rt, alpha, method, bias_correction = _composite_test_iv(
        null_counts, null_replicates, test_count, test_replicates, alpha, method, bias_correction)
    stat = composite_statistic(k, r, kt, rt)
    rates = k / r
    m = int(k.size)
    r_min, r_max = int(min(r.min(), rt)), int(max(r.max(), rt))
    notes = []
    if r_min != r_max:
        notes.append(f"unequal replicate counts ({r_min} to {r_max}): the union bound uses r_min = {r_min}; "
                     "the exact calibration uses each variant's own count")
    base = dict(statistic=stat.statistic, m=m, r_min=r_min, r_max=r_max, r_test=rt, test_rate=kt / rt,
                null_min=float(rates.min()), null_max=float(rates.max()), alpha=alpha)
    assumptions = (_ASSUMPTION_1, _ASSUMPTION_2, _REPLICATES, _PLUG_IN)
    if m == 1 or np.all(rates == rates[0]):
        status = "one_null_variant" if m == 1 else "identical_null_rates"
        why = ("one null variant cannot span a range" if m == 1 else
               f"all {m} null variants have rate {rates[0]:g}, so the range estimate is a point")
        warn_degenerate(f"composite_test: {why}; the composite null collapses to a simple null, decided by "
                        "Fisher's exact test against the pooled null variants")
        p = _fisher_p(kt, rt, int(k.sum()), int(r.sum()))
        return CompositeTestResult(eps=None, reject=bool(p <= alpha), p_value=p, eps_union=None, eps_exact=None,
                                   p_union=None, p_exact=None, a_hat=None, b_hat=None, status=status,
                                   method="fisher_fallback",
                                   assumptions=("pooled null variants share one p (simple null)", _REPLICATES),
                                   notes=tuple(notes + [why + "; Fisher exact test vs pooled null variants"]),
                                   **base)
    rng_est = estimate_range(rates, bias_correction=bias_correction)
    a, b = rng_est.a_hat, rng_est.b_hat
    w = b - a
    eps_u = _union_threshold(m, r_min, w, alpha)
    p_u = _union_p(stat.statistic, m, r_min, w)
    eps_e = p_e = None
    if method == "exact":
        eps_e, p_e = _exact_fixed(k, r, kt, rt, a, b, alpha, stat.statistic)
        eps, p = eps_e, p_e
    else:
        eps, p = eps_u, p_u
        if eps_u is None:
            notes.append(f"2m/sqrt(r_min) = {2 * m / math.sqrt(r_min):.3g} >= alpha: Theorem 2 admits no threshold "
                         "at these replicate counts (use the exact calibration)")
    status = "ok" if eps is not None else "no_valid_eps"
    reject = bool(eps is not None and stat.statistic > eps)
    return CompositeTestResult(eps=eps, reject=reject, p_value=float(p), eps_union=eps_u, eps_exact=eps_e,
                               p_union=p_u, p_exact=p_e, a_hat=a, b_hat=b, status=status, method=method,
                               assumptions=assumptions, notes=tuple(notes), **base)


# --------------------------------------------------------------------------------------
# classical contrast, multiplicity, energy distance


def _fisher_iv(count_a, reps_a, count_b, reps_b, alpha):
    ka = _int_array(count_a, "count_a", lo=0)
    na = _int_array(reps_a, "reps_a", lo=1)
    kb = _int_array(count_b, "count_b", lo=0)
    nb = _int_array(reps_b, "reps_b", lo=1)
    try:
        ka, na, kb, nb = np.broadcast_arrays(ka, na, kb, nb)
    except ValueError:
        raise ValueError(f"count_a, reps_a, count_b, reps_b must broadcast; got shapes "
                         f"{ka.shape}, {na.shape}, {kb.shape}, {nb.shape}") from None
    if np.any(ka > na) or np.any(kb > nb):
        raise ValueError("counts must not exceed their replicates; got count_a > reps_a or count_b > reps_b")
    return ka, na, kb, nb, check_alpha(alpha)


def fisher_contrast(count_a, reps_a, count_b, reps_b, *, alpha=0.05) -> FisherResult:
    r"""Classical simple-null test :math:`H_0: p_a = p_b` (Fisher's exact test, two-sided).

    This is the test of the paper's Figure 1 (STATS.md C6): it treats the base prompt as the
    whole null, so any semantically irrelevant rewording whose response probability differs at
    all is rejected once r is large.  Reported beside the composite decision.  Vectorised over
    broadcast arrays of counts; the p-value conditions on the margins (hypergeometric), so it
    is valid at every r.
    """
    ka, na, kb, nb, alpha = _fisher_iv(count_a, reps_a, count_b, reps_b, alpha)
    p = np.array([_fisher_p(int(x1), int(n1), int(x2), int(n2))
                  for x1, n1, x2, n2 in zip(ka.ravel(), na.ravel(), kb.ravel(), nb.ravel())]).reshape(ka.shape)
    ra, rb = ka / na, kb / nb
    return FisherResult(p_value=_out(p), reject=_out(p <= alpha), rate_a=_out(ra), rate_b=_out(rb),
                        difference=_out(ra - rb), alpha=alpha, n=_out(na + nb),
                        method="fisher_exact (two-sided)",
                        assumptions=(_REPLICATES, "simple null: the base prompt alone defines H0"))


def benjamini_hochberg(p_values, *, alpha=0.05) -> MultipleTestResult:
    r"""Benjamini-Hochberg step-up procedure (FDR control at alpha).

    Reject the k smallest p-values, k the largest index with :math:`p_{(k)} \le k\alpha/n`;
    adjusted p-values :math:`\tilde p_{(i)} = \min_{j \ge i} \min(1, n p_{(j)}/j)`.  FDR <= alpha
    for independent or positively dependent (PRDS) p-values (Benjamini & Hochberg 1995;
    Benjamini & Yekutieli 2001).  NaN p-values (untested items) are left out and never rejected.
    """
    from benchcert.stats.comparisons import adjust_pvalues  # one BH implementation for the project

    p = np.asarray(p_values, dtype=float)
    alpha = check_alpha(alpha)
    if p.ndim != 1:
        raise ValueError(f"p_values must be 1-D; got shape {p.shape}")
    ok = ~np.isnan(p)
    if np.any((p[ok] < 0) | (p[ok] > 1)):
        raise ValueError(f"p_values must lie in [0, 1]; got {p[ok][(p[ok] < 0) | (p[ok] > 1)][0]!r}")
    n = int(ok.sum())
    adjusted = np.full(p.shape, np.nan)
    reject = np.zeros(p.shape, dtype=bool)
    if n:
        bh = adjust_pvalues(p[ok], alpha=alpha, method="bh")
        adjusted[ok] = bh.p_adjusted
        reject[ok] = bh.rejected
    return MultipleTestResult(reject=reject, adjusted=adjusted, n_reject=int(reject.sum()), alpha=alpha, n=int(n),
                              method="benjamini_hochberg",
                              assumptions=("p-values independent or PRDS (positive regression dependence)",
                                           "each p-value valid (super-uniform) under its null"))


def _energy_iv(x, y, n_permutations, alpha, rng):
    def arr(v, name):
        a = np.asarray(v, dtype=float)
        if a.ndim == 1:
            a = a[:, None]
        if a.ndim != 2 or a.shape[0] < 2:
            raise ValueError(f"{name} must be (n, d) with n >= 2 (or 1-D); got shape {np.shape(v)}")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{name} must be finite")
        return a

    xa, ya = arr(x, "x"), arr(y, "y")
    if xa.shape[1] != ya.shape[1]:
        raise ValueError(f"x and y must have the same dimension; got {xa.shape[1]} and {ya.shape[1]}")
    n_permutations = _int(n_permutations, "n_permutations", lo=1)
    alpha = None if alpha is None else check_alpha(alpha)
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator; got {type(rng).__name__}")
    return xa, ya, n_permutations, alpha


def energy_test(x, y, *, n_permutations=999, alpha=None, rng) -> EnergyTestResult:
    r"""Two-sample energy test of :math:`F_x = F_y` on embedded responses (STATS.md C7).

    Parameters
    ----------
    x, y : array_like, shape (n, d) and (n', d) (1-D means d = 1)
        Embedded responses to two prompts.
    n_permutations : int, keyword-only
    alpha : float, optional, keyword-only
        When given, ``reject = p_value <= alpha``.
    rng : numpy.random.Generator, keyword-only

    Notes
    -----
    Szekely & Rizzo (2004): with Euclidean distances,

    .. math::

        \mathcal E = 2\,\overline{|X - Y|} - \overline{|X - X'|} - \overline{|Y - Y'|},\qquad
        T = \frac{n n'}{n + n'}\,\mathcal E

    (V-statistic means over all pairs, including i = j), and the permutation p-value
    :math:`(1 + \#\{T^{(b)} \ge T\})/(1 + B)` over B random relabellings of the pooled sample,
    exact in level for exchangeable samples under :math:`H_0`.  This is the simple-null test
    of the paper's section 6 (Figure 5); a composite version for non-binary responses is
    open research (the paper's Discussion).  One pairwise-distance matrix serves every
    permutation: block sums are quadratic forms in the group indicator.
    """
    xa, ya, n_permutations, alpha = _energy_iv(x, y, n_permutations, alpha, rng)
    z = np.vstack([xa, ya])
    n, n2 = xa.shape[0], ya.shape[0]
    N = n + n2
    sq = np.sum(z * z, axis=1)
    d = np.sqrt(np.clip(sq[:, None] + sq[None, :] - 2.0 * z @ z.T, 0.0, None))
    total = d.sum()

    def stat(ind):
        # ind: (B, N) 0/1 indicators of the x-group
        dx = ind @ d
        sxx = np.einsum("bn,bn->b", dx, ind)
        row = d.sum(axis=1)
        sxy = ind @ row - sxx
        syy = total - 2.0 * sxy - sxx
        e = 2.0 * sxy / (n * n2) - sxx / n**2 - syy / n2**2
        return e

    obs_ind = np.zeros((1, N))
    obs_ind[0, :n] = 1.0
    e_obs = float(stat(obs_ind)[0])
    t_obs = n * n2 / N * e_obs
    count = 0
    chunk = max(1, min(n_permutations, 2_000_000 // max(N * N, 1) + 1))
    done = 0
    while done < n_permutations:
        bsz = min(chunk, n_permutations - done)
        perm = np.argsort(rng.random((bsz, N)), axis=1)
        ind = (perm < n).astype(float)
        e = stat(ind)
        # relative tolerance: permutations equal to the observed split must count as >=
        count += int(np.sum(n * n2 / N * e >= t_obs - 1e-12 * max(abs(t_obs), 1.0)))
        done += bsz
    p = (1 + count) / (1 + n_permutations)
    return EnergyTestResult(statistic=t_obs, energy_distance=e_obs, p_value=p,
                            reject=None if alpha is None else bool(p <= alpha), alpha=alpha, n_x=n, n_y=n2,
                            n_permutations=n_permutations, method="energy_distance_permutation (Szekely-Rizzo 2004)",
                            assumptions=("responses i.i.d. within each prompt; embedding fixed in advance",
                                         "simple null F_x = F_y (not the composite null)"))


# --------------------------------------------------------------------------------------
# simulation (used by the tests and the Figure 3 study)


def simulate_rejection(eps, *, m, r, a, b, p_prime, n_sim, rng, chunk=None) -> SimulationResult:
    r"""Monte-Carlo rejection rate of :math:`T_{m,r} > \epsilon` under Assumption 2.

    Parameters
    ----------
    eps : float
    m, r : int, keyword-only
    a, b : float, keyword-only
        True null range: :math:`p_j \sim \mathrm{Unif}[a, b]` i.i.d., fresh each replication.
    p_prime : float or {"null", "alternative"}, keyword-only
        A fixed p'; ``"null"`` draws :math:`p' \sim \mathrm{Unif}[a, b]` (the paper's Figure 3
        size curve); ``"alternative"`` draws :math:`p' \sim \mathrm{Unif}((0, a) \cup (b, 1))`
        (Assumption 3, the Figure 3 average-power curve).
    n_sim : int, keyword-only
    rng : numpy.random.Generator, keyword-only

    Notes
    -----
    Each variant's r replicates are simulated as one Binomial(r, p) count - the sufficient
    statistic - never as r Bernoulli draws.  The paper's Figure 3 repeats 100 null draws for
    each of 1000 p'; drawing a fresh p' per replication estimates the same average.
    """
    eps = _real(eps, "eps", lo=0.0)
    m = _int(m, "m", lo=1)
    r = _int(r, "r", lo=1)
    a, b = _range_iv(a, b)
    n_sim = _int(n_sim, "n_sim", lo=1)
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator; got {type(rng).__name__}")
    if isinstance(p_prime, str):
        _choice(p_prime, "p_prime", ("null", "alternative"))
        label = p_prime
    else:
        label = f"{_real(p_prime, 'p_prime', lo=0.0, hi=1.0):g}"
    chunk = chunk or max(1, 4_000_000 // (m + 1))
    rejections = 0
    done = 0
    while done < n_sim:
        n = min(chunk, n_sim - done)
        if p_prime == "null":
            pp = rng.uniform(a, b, n)
        elif p_prime == "alternative":
            u = rng.uniform(0.0, a + 1.0 - b, n)
            pp = np.where(u < a, u, u - a + b)
        else:
            pp = np.full(n, float(p_prime))
        kt = rng.binomial(r, pp)
        k = rng.binomial(r, rng.uniform(a, b, (n, m)))
        t = np.min(_distance(k, r, kt[:, None], r), axis=1)
        rejections += int(np.sum(t > eps))
        done += n
    return SimulationResult(rate=rejections / n_sim, rejections=rejections, n_sim=n_sim, eps=eps, m=m, r=r, a=a,
                            b=b, p_prime=label, method="monte_carlo_binomial_counts",
                            assumptions=(_ASSUMPTION_1, _ASSUMPTION_2, _REPLICATES))
