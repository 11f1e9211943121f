"""Subsample guarantees: how far a random n-item subset's score can be from the full score
(exchangeable-bounds paper sections 5 and 7.5).

Closed-form half-widths (any scores in an interval of length R):

* :func:`theorem_5_2_halfwidth` - the paper's Theorem 5.2 (mixture term cancels);
* :func:`corollary_5_6_halfwidth` - the weighted-subset form, Corollary 5.6;
* :func:`barber_halfwidth` - Barber (2024) applied directly, non-negative or signed weights;
* :func:`serfling_halfwidth` - Serfling (1974) sampling without replacement;
* :func:`stratified_halfwidth` - stratified (by subject) subsets, proportional allocation.

Exact computations for binary scores (beyond the paper; no Monte Carlo):

* :func:`subsample_error_distribution` - a response vector with K correct answers: a
  uniformly random n-subset has H ~ Hypergeometric(N, K, n) correct, so |H/n - K/N| has an
  exactly computable quantile ("empirical 95% error") and violation rate;
* :func:`worst_case_halfwidth` - h*(n, N, alpha), the smallest half-width that holds for
  *every* binary response vector of length N (the max over all K);
* :func:`posthoc_interval` - once a random subset has been evaluated, the exact
  finite-population interval for the full count K;
* :func:`paired_error_distribution` - the paired gap between two models (Remark 7.2),
  exactly, through the three-category multivariate hypergeometric.

One module per component: ``closed_form``, ``error_distribution``, ``worst_case``, ``posthoc``,
``paired`` and ``stratified`` (the functions above), ``hypergeom`` (the exact engine they share),
``results`` (their frozen results) and ``checks`` (input checks). The public names are
re-exported here.

Pure numpy/scipy; no I/O.
"""

# WORST_CASE_ASSUMPTIONS is public without being in __all__, as before the split.
from .closed_form import barber_halfwidth, corollary_5_6_halfwidth, serfling_halfwidth, theorem_5_2_halfwidth
from .error_distribution import subsample_error_distribution
from .paired import paired_error_distribution
from .posthoc import posthoc_interval
from .results import (
    PairedErrorDistribution,
    PosthocInterval,
    StratifiedErrorSD,
    SubsampleBound,
    SubsampleErrorDistribution,
    WorstCaseBound,
)
from .stratified import proportional_allocation, stratified_error_sd, stratified_halfwidth
from .worst_case import WORST_CASE_ASSUMPTIONS, worst_case_halfwidth

__all__ = [
    "SubsampleBound",
    "theorem_5_2_halfwidth",
    "corollary_5_6_halfwidth",
    "barber_halfwidth",
    "serfling_halfwidth",
    "SubsampleErrorDistribution",
    "subsample_error_distribution",
    "WorstCaseBound",
    "worst_case_halfwidth",
    "PosthocInterval",
    "posthoc_interval",
    "PairedErrorDistribution",
    "paired_error_distribution",
    "proportional_allocation",
    "stratified_halfwidth",
    "StratifiedErrorSD",
    "stratified_error_sd",
]
