"""Corollary 6.1 of the exchangeable-bounds paper for any subject weights: :func:`hierarchical_bound`,
and fits plus bound in one call, :func:`hierarchical_interval`."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._common import _short
from ..degenerate import Ref, warn_degenerate
from ..validation import check_alpha, check_codes, check_unit_interval
from .domains import DomainFits, _matrix_iv, fit_domains
from .exchangeable import _half_width
from .profile import joint_subject_bound

__all__ = ["HierarchicalBound", "HierarchicalInterval", "PROXY_SHARE", "hierarchical_bound", "hierarchical_interval"]

_COR61_ASSUMPTIONS = (
    "fixed-domain hierarchy (Corollary 6.1): within a domain, subject accuracies p_k are "
    "exchangeable given a domain factor; within a subject, items are independent given p_k",
    "the interval is about E[Z | domain factors] (domains are fixed strata, sigma2_dom = 0 "
    "by default, as in the paper's MMLU analysis); a top-level proxy can be added",
    "s_d^2 is the Marchal-Arbel proxy of the fitted beta-binomial, a plug-in: the MLE's own "
    "error is not in the half-width (paper sections 6.2, 7.6); non-identifiable domains use "
    "the worst case 1/4",
    "sub-Gaussian (Chernoff) half-width sqrt(2 sigma2_eff log(2/alpha)): conservative "
    "relative to a normal interval with the same variance",
)

_COR61_UPPER_ASSUMPTIONS = (
    _COR61_ASSUMPTIONS[0],
    _COR61_ASSUMPTIONS[1],
    "the subject term is an upper confidence bound: with the domains' profile likelihoods, the one-sided "
    "profile-likelihood bound on sum_d s_d^2 A_d at level proxy_alpha (else the Marchal-Arbel proxy at "
    "each domain's lower bound on a + b, Bonferroni over domains); the union bound with the Chernoff tail "
    "at alpha - proxy_alpha gives miscoverage <= alpha (the likelihood-ratio bound is large-sample; "
    "simulations with 2-11 subjects per domain cover, see tests/stats/hierarchical/test_stats_hierarchical.py); "
    "non-identifiable domains use the worst case 1/4",
    _COR61_ASSUMPTIONS[3],
)

_ITEM_ONLY_ASSUMPTIONS = (
    "hierarchy 'none': items are treated as independent, so only the item-level "
    "bounded-difference proxy (Hoeffding/McDiarmid) is used; dependence between items of a "
    "subject is assumed away and the interval is NOT robust to it",
    "sub-Gaussian (Chernoff) half-width sqrt(2 sigma2_item log(2/alpha))",
)

_WEIGHTINGS = {
    "macro": "macro weights a_k = 1/K over the model's answered subjects",
    "pooled": "pooled weights a_k = m_k/N over the model's answered items",
    "user": "user weights a_k, restricted to the model's answered subjects and renormalised to sum 1",
}


@dataclass(frozen=True)
class HierarchicalBound:
    """Corollary 6.1 for every model of a matrix.

    Attributes
    ----------
    estimate, lower, upper, half_width : ndarray, shape (M,)
        Z_a, the interval clipped to [0, 1], and the unclipped half-width
        sqrt(2 sigma2_eff log(2/alpha)).
    sigma2_item : ndarray, shape (M,)
        (1/4) sum_k a_k^2 / m_k (R = 1).
    sigma2_subj : ndarray, shape (M,)
        sum_d s_d^2 sum_{k in d} a_k^2 (0 for hierarchy "none").
    sigma2_dom : ndarray, shape (M,)
        The top-level proxy supplied (0 by default).
    sigma2_eff : ndarray, shape (M,)
        The sum of the three.
    weights : ndarray, shape (K, M)
        a_k used for each model (0 for unanswered subjects).
    alpha : float
    n : ndarray, shape (M,), int
        Answered items per model.
    n_subjects : ndarray, shape (M,), int
        Subjects with positive weight.
    weighting : str
        ``"macro"``, ``"pooled"`` or ``"user"``.
    method : str
        ``"hierarchical"``.
    assumptions : tuple of str
    proxy_alpha : float
        Share of alpha spent on upper bounds for the subject proxies (0: plug-in or known).
    """

    estimate: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    half_width: np.ndarray
    sigma2_item: np.ndarray
    sigma2_subj: np.ndarray
    sigma2_dom: np.ndarray
    sigma2_eff: np.ndarray
    weights: np.ndarray
    alpha: float
    n: np.ndarray
    n_subjects: np.ndarray
    weighting: str
    method: str
    assumptions: tuple[str, ...]
    proxy_alpha: float = 0.0


def _hierarchical_bound_iv(subject_means, subject_sizes, subject_domains, domain_s2, weights, alpha, sigma2_dom,
                           proxy_alpha=0.0):
    alpha = check_alpha(alpha)
    if isinstance(proxy_alpha, (bool, np.bool_)) or not isinstance(proxy_alpha, (int, float)) \
            or not 0.0 <= float(proxy_alpha) < alpha:
        raise ValueError(f"proxy_alpha must be a number in [0, alpha) = [0, {alpha:g}); got {proxy_alpha!r}")
    try:
        n = np.asarray(subject_sizes, dtype=float)
        x = np.asarray(subject_means, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"subject_means and subject_sizes must be numeric; got {exc}") from exc
    if n.ndim == 1:
        n, x = n[:, None], x[:, None]
    if n.ndim != 2 or x.shape != n.shape or n.size == 0:
        raise ValueError(f"subject_means and subject_sizes must both have shape (K, M); got {x.shape} and {n.shape}")
    if np.any(~np.isfinite(n) | (n < 0) | (n != np.round(n))):
        raise ValueError(f"subject_sizes must be non-negative integers; got {n[~np.isfinite(n) | (n < 0)].flat[:1]!r}")
    ans = n > 0
    if np.any(ans & ~((x >= 0) & (x <= 1))):
        raise ValueError(f"subject_means must lie in [0, 1] where subject_sizes > 0; got {x[ans & ~((x >= 0) & (x <= 1))].flat[0]!r}")
    if not ans.any(axis=0).all():
        raise ValueError(f"every model needs an answered subject; model column(s) {_short(np.flatnonzero(~ans.any(axis=0)))} have none")
    k, mdl = n.shape
    doms = check_codes(subject_domains, "subject_domains", length=k)
    d = int(doms.max()) + 1
    if domain_s2 is None:
        s2 = None
    else:
        s2 = np.asarray(domain_s2, dtype=float)
        if s2.ndim == 1:
            s2 = s2[:, None]
        if s2.shape[0] < d or s2.shape[1] not in (1, mdl):
            raise ValueError(f"domain_s2 must have shape (D, M) = ({d}, {mdl}); got {np.shape(domain_s2)}")
        if np.any(~np.isfinite(s2) | (s2 < 0)):
            raise ValueError(f"domain_s2 must be finite and >= 0; got {s2[~np.isfinite(s2) | (s2 < 0)].flat[0]!r}")
        s2 = np.broadcast_to(s2, (s2.shape[0], mdl))
    if isinstance(weights, str):
        if weights not in ("macro", "pooled"):
            raise ValueError(f"weights must be 'macro', 'pooled' or an array of K subject weights; got {weights!r}")
        w = weights
    else:
        try:
            w = np.asarray(weights, dtype=float)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"weights must be 'macro', 'pooled' or numeric; got {weights!r}") from exc
        if w.shape != (k,):
            raise ValueError(f"weights must have one entry per subject (length {k}); got shape {w.shape}")
        if np.any(~np.isfinite(w) | (w < 0)) or not w.sum() > 0:
            raise ValueError(f"weights must be finite, >= 0 and not all 0; got {weights!r}")
    sd = np.asarray(sigma2_dom, dtype=float)
    if sd.ndim > 1 or (sd.ndim == 1 and sd.shape != (mdl,)) or np.any(~np.isfinite(sd) | (sd < 0)):
        raise ValueError(f"sigma2_dom must be a finite value >= 0 (or one per model); got {sigma2_dom!r}")
    return x, n, doms, d, s2, w, alpha, np.broadcast_to(sd, (mdl,)).astype(float)


def hierarchical_bound(subject_means, subject_sizes, subject_domains, domain_s2, *, weights="macro",
                       alpha=0.05, sigma2_dom=0.0, proxy_alpha=0.0, profile=None) -> HierarchicalBound:
    r"""Corollary 6.1: hierarchical bounded-difference interval for any subject weights.

    Parameters
    ----------
    subject_means : array_like, shape (K, M)
        Mean score of each subject for each model (ignored where ``subject_sizes == 0``).
    subject_sizes : array_like of int, shape (K, M)
        Answered items m_k per subject and model; 0 = the model did not answer the subject.
    subject_domains : array_like of int, shape (K,)
        Domain code of each subject.
    domain_s2 : array_like, shape (D, M) or (D,), or None
        Subject-level proxy s_d^2 per domain (and model), e.g. :attr:`DomainFits.s2`.
        None means hierarchy "none": item-level proxy only.
    weights : {"macro", "pooled"} or array_like of shape (K,), keyword-only
        Subject weights a_k (user weights are renormalised over each model's answered subjects).
    alpha : float, keyword-only
    sigma2_dom : float or array_like of shape (M,), keyword-only
        Optional top-level (domain mixture) proxy; 0 treats domains as fixed strata.
    proxy_alpha : float, keyword-only
        Share of ``alpha`` already spent on upper confidence bounds for ``domain_s2`` (e.g.
        :attr:`DomainFits.s2_upper`); the Chernoff half-width then uses ``alpha -
        proxy_alpha`` and the union bound gives miscoverage <= alpha. 0 (default) when the
        proxies are known or plug-in.
    profile : ndarray, shape (D, M, G - 1), keyword-only, optional
        :attr:`DomainFits.profile`. With ``proxy_alpha > 0`` the subject term is then the joint
        upper confidence bound :func:`joint_subject_bound` at level ``proxy_alpha`` (one
        constraint over all domains) instead of sum_d s_d^2 A_d with ``domain_s2``.

    Returns
    -------
    HierarchicalBound

    Notes
    -----
    Corollary 6.1 (exchangeable bounded-difference paper, section 6.1): with
    :math:`Z_a = \sum_{d,k} a_{d,k}\bar X_{d,k}`, :math:`a_{d,k}\ge 0`, :math:`\sum a = 1`,

    .. math::

        P\{|Z_a - EZ_a| \ge t\} \le 2\exp\Big(-\frac{t^2}{2\sigma^2_{hier}}\Big),\quad
        \sigma^2_{hier} = \underbrace{\tfrac14\sum_{d,k}\frac{a_{d,k}^2}{m_{d,k}}}_{item}
        + \underbrace{\sum_d s_d^2\sum_{k\in d}a_{d,k}^2}_{subject}
        + \underbrace{\sigma^2_{dom}}_{domain},

    (the item term is the paper's :math:`\frac14\sum_{d,k,j}(a_{d,k}/m_{d,k})^2`), and the
    1 - alpha half-width is :math:`h = \sqrt{2\sigma^2_{hier}\log(2/\alpha)}` (section 7.4),
    the interval :math:`Z_a \pm h` clipped to [0, 1]. Macro:
    :math:`a_k = 1/K`; pooled: :math:`a_k = m_k/N`. It is Theorem 4.2 with item constants
    :math:`c = a_k/m_k` and :math:`\sigma^2_{mix} = \sigma^2_{subj} + \sigma^2_{dom}`
    (the tests check this identity against :func:`exchangeable_bound`).

    Departure (missing responses, not in the paper): a model is scored on the subjects and
    items it answered; its weights are taken over those.
    """
    x, n, doms, d, s2, w, alpha, sd = _hierarchical_bound_iv(
        subject_means, subject_sizes, subject_domains, domain_s2, weights, alpha, sigma2_dom, proxy_alpha)
    ans = n > 0
    if isinstance(w, str) and w == "macro":
        a = ans / ans.sum(axis=0)
        weighting = "macro"
    elif isinstance(w, str):
        a = n / n.sum(axis=0)
        weighting = "pooled"
    else:
        a = w[:, None] * ans
        tot = a.sum(axis=0)
        lost = tot <= 0
        if lost.any():
            warn_degenerate("hierarchical_bound: {} answered no subject with positive user weight; macro "
                            "weights used for them instead", Ref("model", np.flatnonzero(lost)))
            a[:, lost] = ans[:, lost]
            tot = a.sum(axis=0)
        partial = (w[:, None] > 0) & ~ans
        if partial.any():
            warn_degenerate("hierarchical_bound: {} did not answer every subject with positive weight; their "
                            "weights are renormalised over the answered subjects",
                            Ref("model", np.flatnonzero(partial.any(axis=0))))
        a = a / tot
        weighting = "user"
    xs = np.where(ans, x, 0.0)
    est = np.clip(np.sum(a * xs, axis=0), 0.0, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        s_item = 0.25 * np.sum(np.where(ans, a * a / np.where(ans, n, 1.0), 0.0), axis=0)
    if s2 is None:
        s_subj = np.zeros_like(s_item)
        assumptions = _ITEM_ONLY_ASSUMPTIONS + (_WEIGHTINGS[weighting],)
    else:
        a2_dom = np.zeros((d, a.shape[1]))
        np.add.at(a2_dom, doms, a * a)
        if profile is not None and proxy_alpha > 0:
            prof = np.asarray(profile, dtype=float)
            if prof.ndim != 3 or prof.shape[:2] != (d, a.shape[1]):
                raise ValueError(f"profile must have shape (D, M, G - 1) = ({d}, {a.shape[1]}, ...); got {prof.shape}")
            s_subj = joint_subject_bound(prof, a2_dom, alpha=float(proxy_alpha))
        else:
            s_subj = np.sum(s2[:d] * a2_dom, axis=0)
        assumptions = ((_COR61_UPPER_ASSUMPTIONS if proxy_alpha > 0 else _COR61_ASSUMPTIONS)
                       + (_WEIGHTINGS[weighting],))
    s_eff = s_item + s_subj + sd
    hw = _half_width(s_eff, alpha - float(proxy_alpha))
    return HierarchicalBound(
        estimate=est, lower=np.clip(est - hw, 0.0, 1.0), upper=np.clip(est + hw, 0.0, 1.0), half_width=hw,
        sigma2_item=s_item, sigma2_subj=s_subj, sigma2_dom=sd.copy(), sigma2_eff=s_eff, weights=a,
        alpha=alpha, n=n.sum(axis=0).astype(np.int64), n_subjects=(a > 0).sum(axis=0).astype(np.int64),
        weighting=weighting, method="hierarchical", assumptions=assumptions, proxy_alpha=float(proxy_alpha),
    )


@dataclass(frozen=True)
class HierarchicalInterval:
    """:func:`hierarchical_interval`'s result: Corollary 6.1 plus the fits behind it.

    Attributes
    ----------
    bound : HierarchicalBound
    fits : DomainFits
    estimate, lower, upper, half_width : ndarray, shape (M,)
        Shortcuts to ``bound``'s fields.
    alpha : float
    n : ndarray, shape (M,)
    method : str
        ``"hierarchical"``.
    assumptions : tuple of str
    """

    bound: HierarchicalBound
    fits: DomainFits
    estimate: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    half_width: np.ndarray
    alpha: float
    n: np.ndarray
    method: str
    assumptions: tuple[str, ...]


def _hierarchical_interval_iv(scores, subjects, subject_domains, fits):
    s, codes, doms, k = _matrix_iv(scores, subjects, subject_domains)
    if fits is not None and not isinstance(fits, DomainFits):
        raise ValueError(f"fits must be a DomainFits from fit_domains; got {type(fits).__name__}")
    if fits is not None and fits.n.shape != (k, s.shape[1]):
        raise ValueError(f"fits were made for {fits.n.shape} (K, M); scores give {(k, s.shape[1])}")
    return s, codes, doms, k


#: Default share of alpha spent on the subject proxies' upper confidence bounds.
PROXY_SHARE = 0.5


def hierarchical_interval(scores, subjects, subject_domains=None, *, weights="macro", alpha=0.05,
                          sigma2_dom=0.0, fits=None, proxy="upper", proxy_share=PROXY_SHARE) -> HierarchicalInterval:
    r"""Fit the domains and apply Corollary 6.1 to every model of a score matrix.

    Parameters
    ----------
    scores : array_like, shape (n_items, n_models)
        Item scores in [0, 1]; NaN = not answered.
    subjects : array_like of int, shape (n_items,)
        Subject code of each item.
    subject_domains : array_like of int, shape (K,), optional
        Domain of each subject (default: one domain).
    weights, alpha, sigma2_dom : keyword-only
        As in :func:`hierarchical_bound`.
    fits : DomainFits, keyword-only, optional
        Reuse fits from :func:`fit_domains` (they do not depend on the weights). With
        ``proxy="upper"`` they must have been made with ``proxy_alpha = proxy_share * alpha``.
    proxy : {"upper", "plugin"}, keyword-only
        ``"upper"`` (default): the subject proxy of each domain is an upper confidence bound
        (see Notes), which keeps the level with few subjects per domain. ``"plugin"``: the
        paper's section 7.4 plug-in of the fitted proxy, which does not (kept for comparison
        and for the paper's numbers).
    proxy_share : float, keyword-only
        Fraction of alpha spent on the proxies' bounds (default 1/2).

    Returns
    -------
    HierarchicalInterval

    Notes
    -----
    :func:`fit_domains` (beta-binomial MLE per domain, Marchal-Arbel proxy) followed by
    :func:`hierarchical_bound` - the paper's section 7.4 procedure, for any weights.

    Why the plug-in is not enough (departure from the paper). Corollary 6.1 holds for the
    TRUE proxies s_d^2. With 2-5 subjects in a domain the beta-binomial MLE of a + b is often
    infinite (under-dispersed fits: about half of them at K_d = 3-5) and the plug-in proxy is
    then ~0, so the subject term vanishes and macro/pooled coverage falls to 0.67-0.88 at
    alpha = 0.05 (pooled weights suffer most: one big subject carries most of the weight).

    The construction used by default. Let alpha_p = proxy_share * alpha. The subject term
    psi = sum_d A_d s_d^2 (A_d = sum of the squared weights of domain d's subjects) is replaced
    by psi_U, its one-sided profile-likelihood upper confidence bound at level alpha_p: the
    largest sum_d A_d / (4 (nu_d + 1)) over precisions whose total profile deviance
    sum_d 2 (l_max,d - l_p,d(nu_d)) is <= z^2_{1 - alpha_p} (each l_p,d profiles the domain's
    mean out; domains are independent, so their deviances add), computed conservatively by
    a knapsack over the grid of log(a + b) (:func:`joint_subject_bound`). An under-dispersed domain has a finite lower
    bound on a + b, so it no longer drives its proxy to 0; one constraint for the whole term
    costs far less than a Bonferroni share per domain. Then, as h is increasing in psi,

    P(|Z_a - E Z_a| > h) <= P(psi_U < psi) + P(|Z_a - E Z_a| > h(psi, alpha - alpha_p))
                         <= alpha_p + (alpha - alpha_p) = alpha

    (union bound). The first inequality's level is the likelihood-ratio bound's large-sample
    level; the seeded simulations in the tests check the whole interval at 2-11 subjects per
    domain, equal and very unequal subject sizes, macro, pooled and user weights, and
    MMLU-Pro's own structure. Cost: on MMLU-Pro (3-11 subjects in each of 14 domains) the
    half-widths grow 1.35-1.39x (macro, median 3.5 -> 4.8 pp) and 1.55-1.97x (pooled,
    4.6 -> 8.2 pp) over the plug-in (benchmarks/hierarchical_cost.py); with a Bonferroni share
    per domain instead (the per-domain bounds in ``fits.s2_upper``) it was 2.2-2.7x and
    2.8-3.7x.
    """
    s, codes, doms, k = _hierarchical_interval_iv(scores, subjects, subject_domains, fits)
    if proxy not in ("upper", "plugin"):
        raise ValueError(f"proxy must be 'upper' or 'plugin'; got {proxy!r}")
    alpha = check_alpha(alpha)
    proxy_share = check_unit_interval("proxy_share", proxy_share)
    p_alpha = proxy_share * alpha if proxy == "upper" else 0.0
    if fits is None:
        fits = fit_domains(s, codes, doms, proxy_alpha=p_alpha if p_alpha > 0 else None)
    elif p_alpha > 0 and (fits.s2_upper is None or not math.isclose(fits.proxy_alpha, p_alpha)):
        raise ValueError(f"fits must come from fit_domains(..., proxy_alpha={p_alpha:g}) for proxy='upper'; "
                         f"got proxy_alpha={fits.proxy_alpha!r}")
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(fits.n > 0, fits.total / np.where(fits.n > 0, fits.n, 1), 0.0)
    bound = hierarchical_bound(means, fits.n, fits.subject_domains, fits.s2_upper if p_alpha > 0 else fits.s2,
                               weights=weights, alpha=alpha, sigma2_dom=sigma2_dom, proxy_alpha=p_alpha,
                               profile=fits.profile if p_alpha > 0 else None)
    return HierarchicalInterval(bound=bound, fits=fits, estimate=bound.estimate, lower=bound.lower,
                                upper=bound.upper, half_width=bound.half_width, alpha=bound.alpha, n=bound.n,
                                method="hierarchical", assumptions=bound.assumptions)
