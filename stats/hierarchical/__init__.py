"""Hierarchical exchangeable uncertainty for benchmark scores (exchangeable-bounds paper, sections 4 and 6).

The exchangeable bounded-difference paper (sections 4 and 6) bounds the deviation of a
benchmark score from its mean when items are exchangeable within subjects and subjects
within domains:

* :func:`exchangeable_bound` - Theorem 4.2, the general bounded-difference bound with a
  mixture proxy, sigma2_eff = sum c_i^2 / 4 + sigma2_mix;
* :func:`fit_beta_binomial` / :func:`fit_beta_means` - the beta-binomial maximum-likelihood
  fit of one domain's subject counts (section 6.2), batched over many domains and models;
* :func:`marchal_arbel_proxy` - the closed-form sub-Gaussian proxy 1 / (4 (a + b + 1)) of a
  Beta(a, b) variable (section 6.2, Eq. 3-4);
* :func:`fit_domains` - every (domain, model) fit of a score matrix at once;
* :func:`hierarchical_bound` - Corollary 6.1 for any subject weights (macro, pooled or
  user-given), with its three variance components;
* :func:`hierarchical_interval` - fits and Corollary 6.1 in one call, by default with an
  upper confidence bound on each domain's subject proxy (valid with few subjects per domain).

One module per component: ``exchangeable`` (Theorem 4.2, Marchal-Arbel), ``fit`` (the beta fits),
``likelihood`` (their batched likelihoods and Newton maximiser), ``special`` (trigamma),
``profile`` (profile-likelihood bounds on the precision), ``domains`` (every fit of a matrix),
``bound`` (Corollary 6.1) and ``limits`` (the precision range searched). The public names are
re-exported here.

Pure numpy/scipy; no I/O.
"""

# PROXY_SHARE, NU_MAX, NU_MIN and WORST_CASE_S2 are public without being in __all__, as before the split.
from .bound import PROXY_SHARE, HierarchicalBound, HierarchicalInterval, hierarchical_bound, hierarchical_interval
from .domains import DomainFits, fit_domains
from .exchangeable import ExchangeableBound, exchangeable_bound, marchal_arbel_proxy
from .fit import BetaFit, fit_beta_binomial, fit_beta_means
from .limits import NU_MAX, NU_MIN, WORST_CASE_S2
from .profile import joint_subject_bound

__all__ = [
    "ExchangeableBound",
    "exchangeable_bound",
    "marchal_arbel_proxy",
    "BetaFit",
    "fit_beta_binomial",
    "fit_beta_means",
    "DomainFits",
    "fit_domains",
    "HierarchicalBound",
    "hierarchical_bound",
    "HierarchicalInterval",
    "hierarchical_interval",
    "joint_subject_bound",
]
