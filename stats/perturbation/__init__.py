r"""Prompt-perturbation tests with a composite null (the composite-null paper).

Does a prompt change matter beyond semantically irrelevant rewordings?  Acharyya, Priebe &
Helm, "Testing for LLM response differences: the case of a composite null consisting of
semantically irrelevant query perturbations" (the "composite-null paper") test

.. math::  H_0: p' \in \mathcal P_0 = [a, b] \quad\text{vs}\quad H_A: p' \notin [a, b]

where :math:`[a, b]` is the range of the response probabilities of a user-defined set of null
variants (rewordings the user considers irrelevant) and :math:`p'` is the response probability
of a test variant.  Everything is estimated from binary replicates: a variant answered r times
has :math:`\hat p = K / r`, :math:`K \sim \mathrm{Binomial}(r, p)`.

What is here (pure numpy/scipy, no I/O), one module per component:

* :mod:`.results` - the frozen result types;
* :mod:`.statistic` - :func:`composite_statistic` (Algorithm A, :math:`T_{m,r} = \min_j |\hat p_j -
  \hat p'|`, Eq. 3) and :func:`estimate_range` (Algorithm B with the unbiased uniform-endpoint
  correction, not Remark 1's);
* :mod:`.bounds` - the paper's bounds: :func:`lemma2_m`, :func:`theory_bounds` (Lemma 2, Theorems 2
  and 4) and :func:`power_curve` (Lemma 3, Theorem 3);
* :mod:`.exact` - beyond the paper: under Assumption 2 each null :math:`\hat p_j` follows a
  uniform-binomial mixture, so :func:`exact_size` and :func:`exact_power` are computed exactly
  (ties decided in integers) instead of bounded by the union term :math:`2m/\sqrt r`;
* :mod:`.design` - :func:`design_search` (Algorithm C under a budget, Theorems 2 and 4 or the exact
  calibration) and :func:`minimal_budget`;
* :mod:`.calibrated` - the default per-item test, :func:`calibrated_range_test`: the widened range
  with its noise margin calibrated exactly over the composite null (Assumptions 1-2), and its
  exact power :func:`calibrated_power`;
* :mod:`.item_test` - the per-item tests for logs already collected: :func:`composite_test` and the
  assumption-light :func:`widened_range_test` (Hoeffding margins; valid at alpha for every m >= 2
  and replicate count, no plug-in range, far less power), :func:`widened_range_test_scores` for fractional scores, the ``no_power`` /
  ``no_alternative`` statuses;
* :mod:`.plugin` - :func:`plugin_test`, the paper's plug-in calibration (assumption-dependent,
  kept for comparison);
* :mod:`.multiplicity` - :func:`benjamini_hochberg` across items.

Two-sample tests (Fisher's exact test, the energy-distance test of section 6) live in
:mod:`benchcert.stats.two_sample`; the Monte-Carlo simulator of the realistic test in the tests.

Errata of the paper that this module does *not* copy (its Remark 1, Algorithm C and section 5.2):

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

from __future__ import annotations

from .calibrated import calibrated_power, calibrated_range_test
from .bounds import lemma2_m, power_curve, theory_bounds
from .design import design_search, minimal_budget
from .exact import exact_power, exact_size
from .multiplicity import benjamini_hochberg
from .item_test import (LOW_POWER_GAP, TEST_METHODS, composite_test, low_power_sentence, min_detectable_gap,
                        possible_rejection, widened_range_test, widened_range_test_scores)
from .no_power import no_power_sentence
from .plugin import plugin_test
from .results import (BudgetResult, CompositeStatistic, CompositeTestResult, ExactPower, ExactSize,
                      MultipleTestResult, PerturbationDesign, PowerCurve, RangeEstimate, TheoryBounds)
from .statistic import composite_statistic, estimate_range

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
    "MultipleTestResult",
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
    "calibrated_range_test",
    "calibrated_power",
    "widened_range_test",
    "widened_range_test_scores",
    "plugin_test",
    "possible_rejection",
    "no_power_sentence",
    "LOW_POWER_GAP",
    "low_power_sentence",
    "min_detectable_gap",
    "TEST_METHODS",
    "benjamini_hochberg",
]
