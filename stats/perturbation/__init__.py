r"""Prompt-perturbation tests with a composite null (the composite-null paper).

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

from .bounds import lemma2_m, power_curve, theory_bounds
from .design import design_search, minimal_budget
from .exact import exact_power, exact_size
from .multiplicity import benjamini_hochberg
from .item_test import (TEST_METHODS, composite_test, no_power_sentence, possible_rejection, widened_range_test,
                        widened_range_test_scores)
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
    "widened_range_test",
    "widened_range_test_scores",
    "plugin_test",
    "possible_rejection",
    "no_power_sentence",
    "TEST_METHODS",
    "benjamini_hochberg",
]
