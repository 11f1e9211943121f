"""How strongly a domain's subjects move together (exchangeable-bounds paper, section 7.3).

* :func:`beta_binomial_icc` - the intraclass correlation 1/(a + b + 1) of each domain's
  beta-binomial fit;
* :func:`subject_correlation` - the model-centred subject-subject correlation matrix across
  models (paper Figure 3), with within-domain summaries.

Negative within-domain dependence is flagged: under the exchangeable hierarchy two subjects of
one domain are non-negatively correlated (paper Proposition 3.2), so a negative value is
evidence against the hierarchy. The split-half correlation, the third of these diagnostics, is
:mod:`benchcert.stats.split_half`.

Pure numpy/scipy; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._common import _short
from .degenerate import Ref, warn_degenerate
from .validation import check_codes
from .hierarchical.domains import DomainFits, _counts, _fit_domains_counts, _matrix_iv

__all__ = [
    "IccResult",
    "beta_binomial_icc",
    "SubjectCorrelation",
    "subject_correlation",
]


# ======================================================================================
# ICC


@dataclass(frozen=True)
class IccResult:
    """Beta-binomial intraclass correlation per domain and model.

    Attributes
    ----------
    icc : ndarray, shape (D, M)
        1/(a + b + 1) of each domain's fit (1 for a worst-case fallback, ~1e-6 for an
        under-dispersed domain). Never NaN.
    n_subjects : ndarray, shape (D, M), int
    status : ndarray of str, shape (D, M)
        The fit's status (see :class:`benchcert.stats.hierarchical.BetaFit`).
    degenerate : ndarray of bool, shape (D, M)
    fits : DomainFits
    alpha : None
    n : ndarray, shape (M,), int
    method : str
        ``"beta_binomial_icc"``.
    assumptions : tuple of str
    """

    icc: np.ndarray
    n_subjects: np.ndarray
    status: np.ndarray
    degenerate: np.ndarray
    fits: DomainFits
    alpha: None
    n: np.ndarray
    method: str
    assumptions: tuple[str, ...]


def _beta_binomial_icc_iv(scores, subjects, subject_domains, fits):
    if fits is not None:
        if not isinstance(fits, DomainFits):
            raise ValueError(f"fits must be a DomainFits; got {type(fits).__name__}")
        return None, None, None, None
    return _matrix_iv(scores, subjects, subject_domains)


def beta_binomial_icc(scores=None, subjects=None, subject_domains=None, *, fits=None) -> IccResult:
    r"""Intraclass correlation 1/(a + b + 1) of each domain's beta-binomial fit.

    Parameters
    ----------
    scores, subjects, subject_domains : array_like
        As in :func:`benchcert.stats.hierarchical.fit_domains` (ignored when ``fits`` is given).
    fits : DomainFits, keyword-only, optional
        Reuse existing fits.

    Returns
    -------
    IccResult

    Notes
    -----
    Under the beta-binomial model two items of one subject have correlation
    :math:`\rho = 1/(a+b+1)` (the share of item variance that is between subjects; paper
    section 7.3's ICC estimates). It equals :math:`4 s_d^2`, the
    Marchal-Arbel proxy rescaled, so a large ICC is exactly what widens the hierarchical
    interval. Degenerate fits are warned about by the fit and keep its fallback value.
    """
    s, codes, doms, k = _beta_binomial_icc_iv(scores, subjects, subject_domains, fits)
    if fits is None:
        n, total, binary = _counts(s, codes, k)
        fits = _fit_domains_counts(n, total, binary, doms, stacklevel=3)
    return IccResult(icc=fits.icc, n_subjects=fits.n_subjects, status=fits.status, degenerate=fits.degenerate,
                     fits=fits, alpha=None, n=fits.n.sum(axis=0), method="beta_binomial_icc",
                     assumptions=fits.assumptions)


# ======================================================================================
# Model-centred subject-subject correlation


_CORR_ASSUMPTIONS = (
    "each model's subject-macro accuracy is subtracted from its subject accuracies, so the "
    "matrix shows relative strengths, not overall model quality (paper section 7.3, Figure 3)",
    "Pearson correlation across models, pairwise over the models that answered both subjects",
    "descriptive only: correlations are across a handful of models, not across repeated draws "
    "of one model's benchmark, and centring alone pulls the average off-diagonal value to "
    "about -1/(K-1)",
)


@dataclass(frozen=True)
class SubjectCorrelation:
    """Model-centred subject-subject correlation matrix.

    Attributes
    ----------
    corr : ndarray, shape (K, K)
        Correlation; NaN exactly where ``defined`` is False (a subject whose centred profile
        is constant, or fewer than 3 models answering both subjects).
    n_models : ndarray, shape (K, K), int
        Models that answered both subjects.
    defined : ndarray of bool, shape (K, K)
    within_domain_mean : ndarray, shape (D,)
        Mean off-diagonal correlation inside each domain (NaN if the domain has < 2
        subjects with defined pairs).
    between_domain_mean : float
        Mean correlation of pairs from different domains (NaN if there is none).
    negative_within : ndarray of bool, shape (D,)
        Within-domain mean correlation below 0.
    subject_domains : ndarray, shape (K,)
    alpha : None
    n : int
        Models used.
    method : str
        ``"model_centred_pearson"``.
    assumptions : tuple of str
    """

    corr: np.ndarray
    n_models: np.ndarray
    defined: np.ndarray
    within_domain_mean: np.ndarray
    between_domain_mean: float
    negative_within: np.ndarray
    subject_domains: np.ndarray
    alpha: None
    n: int
    method: str
    assumptions: tuple[str, ...]


def _subject_correlation_iv(subject_means, subject_domains):
    try:
        x = np.asarray(subject_means, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"subject_means must be numeric; got {exc}") from exc
    if x.ndim != 2 or x.shape[0] < 1:
        raise ValueError(f"subject_means must have shape (K, M); got {x.shape}")
    if x.shape[1] < 3:
        raise ValueError(f"subject_means needs at least 3 models (columns) for a correlation across models; "
                         f"got {x.shape[1]}")
    ok = np.isnan(x) | ((x >= 0) & (x <= 1))
    if not ok.all():
        raise ValueError(f"subject_means must lie in [0, 1] (NaN = not answered); got {x[~ok].flat[0]!r}")
    if np.isnan(x).all(axis=0).any():
        raise ValueError(f"subject_means has no answered subject for model column(s) "
                         f"{_short(np.flatnonzero(np.isnan(x).all(axis=0)))}")
    doms = (np.zeros(x.shape[0], dtype=np.int64) if subject_domains is None
            else check_codes(subject_domains, "subject_domains", length=x.shape[0]))
    return x, doms


def subject_correlation(subject_means, subject_domains=None) -> SubjectCorrelation:
    r"""Model-centred subject-subject correlation matrix (paper section 7.3, Figure 3).

    Parameters
    ----------
    subject_means : array_like, shape (K, M)
        Accuracy of each model on each subject; NaN where a model answered none of it.
        At least 3 models.
    subject_domains : array_like of int, shape (K,), optional
        Domain code of each subject, for the within/between-domain summaries.

    Returns
    -------
    SubjectCorrelation

    Notes
    -----
    :math:`\tilde p_{m,s} = \hat p_{m,s} - K_m^{-1}\sum_u \hat p_{m,u}` (each model's
    subject-macro accuracy removed), then
    :math:`r_{s,t} = \mathrm{Corr}_m(\tilde p_{m,s}, \tilde p_{m,t})`, pairwise over the
    models answering both subjects (computed for all pairs at once from masked cross
    products). Needs >= 3 models (with 2 every correlation is +/-1). Undefined entries
    (constant centred profile, fewer than 3 shared models) are NaN with ``defined`` False
    and a :class:`DegenerateDataWarning`. A domain whose mean within-domain correlation is
    negative is flagged ``negative_within``: descriptive evidence that its subjects do not
    share a common factor (centring alone biases the mean by about -1/(K-1), small for
    many subjects).
    """
    x, doms = _subject_correlation_iv(subject_means, subject_domains)
    k, mdl = x.shape
    w = (~np.isnan(x)).astype(float)
    c = np.where(w > 0, x - np.nanmean(x, axis=0), 0.0)
    n = w @ w.T
    s_i = c @ w.T  # sum over shared models of c_s (row s, col t)
    s_j = s_i.T
    s_ii = (c * c) @ w.T
    s_jj = s_ii.T
    s_ij = c @ c.T
    with np.errstate(invalid="ignore", divide="ignore"):
        nn = np.where(n > 0, n, 1.0)
        cov = s_ij - s_i * s_j / nn
        var_i = s_ii - s_i * s_i / nn
        var_j = s_jj - s_j * s_j / nn
        ok = (n >= 3) & (var_i > 1e-14 * nn) & (var_j > 1e-14 * nn)
        corr = np.where(ok, cov / np.sqrt(np.where(ok, var_i * var_j, 1.0)), np.nan)
    corr = np.clip(corr, -1.0, 1.0)
    np.fill_diagonal(corr, np.where(np.diag(ok), 1.0, np.nan))
    if not ok.all():
        bad = np.flatnonzero(~np.diag(ok))
        what, refs = (("{} have a constant centred profile across models", (Ref("subject", bad),)) if bad.size
                      else ("some subject pairs share fewer than 3 answering models", ()))
        warn_degenerate(f"subject_correlation: {what}; those entries are undefined (NaN, defined=False)", *refs)
    d = int(doms.max()) + 1
    same = doms[:, None] == doms[None, :]
    off = ~np.eye(k, dtype=bool) & ok
    within = np.full(d, np.nan)
    for j in range(d):
        sel = off & same & (doms[:, None] == j)
        if sel.any():
            within[j] = corr[sel].mean()
    between_sel = off & ~same
    between = float(corr[between_sel].mean()) if between_sel.any() else float("nan")
    neg = np.nan_to_num(within, nan=0.0) < 0
    return SubjectCorrelation(corr=corr, n_models=n.astype(np.int64), defined=ok, within_domain_mean=within,
                              between_domain_mean=between, negative_within=neg, subject_domains=doms,
                              alpha=None, n=int(mdl), method="model_centred_pearson", assumptions=_CORR_ASSUMPTIONS)
