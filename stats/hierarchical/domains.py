"""Every (domain, model) beta fit of a score matrix at once: :class:`DomainFits`, :func:`fit_domains`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._common import _short
from ..degenerate import Ref, warn_degenerate
from ..validation import all_missing_columns, check_alpha, check_codes, check_scores
from ..subject_counts import SubjectCounts, subject_counts
from .fit import _BB_ASSUMPTIONS, _BETA_MEANS_ASSUMPTIONS, _STATUS, _fit_bb_rows, _fit_means_rows
from .profile import _W_GRID

__all__ = ["DomainFits", "fit_domains"]


@dataclass(frozen=True)
class DomainFits:
    """Per-domain fits of every model, with the subject counts they came from.

    Attributes
    ----------
    a, b, nu, mean, s2, icc, loglik : ndarray, shape (D, M)
        As in :class:`BetaFit`, one per (domain, model).
    n_subjects : ndarray, shape (D, M), int
        Answered subjects per domain and model (K_d for that model).
    n_items : ndarray, shape (D, M), int
        Answered items per domain and model.
    status : ndarray of str, shape (D, M)
    degenerate, converged : ndarray of bool, shape (D, M)
    fit_method : ndarray of str, shape (M,)
        ``"beta_binomial_mle"`` (binary scores) or ``"beta_mle_on_subject_means"``.
    binary : ndarray of bool, shape (M,)
        Whether every observed score of the model is 0 or 1.
    n : ndarray, shape (K, M), int
        Answered items per subject and model.
    total : ndarray, shape (K, M)
        Sum of scores per subject and model.
    subject_domains : ndarray, shape (K,), int
    method : str
        ``"domain_beta_fits"``.
    assumptions : tuple of str
    nu_lower, s2_upper, upper_alpha : ndarray, shape (D, M), or None
        With ``proxy_alpha``: per (domain, model) the profile-likelihood lower confidence
        bound on a + b, the subject proxy 1/(4 (nu_lower + 1)) it gives (1/4 for the
        worst-case fallbacks), and its one-sided level (``proxy_alpha`` shared equally over the
        model's domains with two or more answered subjects).
    proxy_alpha : float or None
        The share of alpha spent on the proxies' upper bounds, per model.
    profile : ndarray, shape (D, M, G - 1), or None
        Per (domain, model) and grid interval of log(a + b) the profile deviance at the smaller
        end (its minimum over the interval but slightly above it in a two-mode profile: see
        :attr:`BetaFit.profile`); inf where the proxy is the worst case.
    """

    a: np.ndarray
    b: np.ndarray
    nu: np.ndarray
    mean: np.ndarray
    s2: np.ndarray
    icc: np.ndarray
    loglik: np.ndarray
    n_subjects: np.ndarray
    n_items: np.ndarray
    status: np.ndarray
    degenerate: np.ndarray
    converged: np.ndarray
    fit_method: np.ndarray
    binary: np.ndarray
    n: np.ndarray
    total: np.ndarray
    subject_domains: np.ndarray
    method: str
    assumptions: tuple[str, ...]
    nu_lower: np.ndarray | None = None
    s2_upper: np.ndarray | None = None
    upper_alpha: np.ndarray | None = None
    proxy_alpha: float | None = None
    profile: np.ndarray | None = None

    @property
    def reason(self) -> np.ndarray:
        """Plain-language explanation of each (domain, model) fit's status."""
        return np.vectorize(lambda s: _STATUS[s][1], otypes=[object])(self.status)

    @property
    def subject_means(self) -> np.ndarray:
        """(K, M) subject mean scores; NaN where the model answered none of the subject."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.n > 0, self.total / np.where(self.n > 0, self.n, 1), np.nan)


def _matrix_iv(scores, subjects, subject_domains, n_subjects=None):
    s = check_scores(scores, "scores", ndim=2, allow_nan=True)
    codes = check_codes(subjects, "subjects", length=s.shape[0])
    empty = all_missing_columns(s)
    if empty.size:
        raise ValueError(f"scores has no observed (non-NaN) item for model column(s) {_short(empty)}")
    return (s, *_domains_iv(codes, subject_domains, n_subjects))


def _counts_iv(counts, subjects, subject_domains):
    """:func:`_matrix_iv`'s checks from the matrix' per-subject counts (an audit that does not hold
    the matrix, tasks/store/blocked.py): (codes, doms, k)."""
    if not isinstance(counts, SubjectCounts):
        raise ValueError(f"counts must be a SubjectCounts; got {type(counts).__name__}")
    if not counts.in_unit_interval:
        raise ValueError("scores must lie in [0, 1] (NaN for a missing response); the counts show scores outside it")
    codes = check_codes(subjects, "subjects")
    empty = np.flatnonzero(counts.n.sum(axis=0) == 0)
    if empty.size:
        raise ValueError(f"scores has no observed (non-NaN) item for model column(s) {_short(empty)}")
    return _domains_iv(codes, subject_domains, counts.n.shape[0])


def _domains_iv(codes, subject_domains, n_subjects):
    k = int(codes.max()) + 1 if n_subjects is None else int(n_subjects)
    if subject_domains is None:
        doms = np.zeros(k, dtype=np.int64)
    else:
        doms = check_codes(subject_domains, "subject_domains")
        if doms.shape[0] < int(codes.max()) + 1:
            raise ValueError(f"subject_domains must have one code per subject (at least "
                             f"{int(codes.max()) + 1}); got length {doms.shape[0]}")
        k = doms.shape[0]
    return codes, doms, k


def _counts(s, codes, k):
    """(n, total, binary): answered items and score sums per (subject, model), and whether each
    model's scores are all 0/1, from :func:`~benchcert.stats.subject_counts.subject_counts` (one pass
    in blocks of rows; no gathered copy of the matrix)."""
    return _from_counts(subject_counts(s, codes, k))


def _from_counts(counts: SubjectCounts):
    return counts.n, counts.total, counts.binary


def _fit_domains_iv(scores, subjects, subject_domains):
    return _matrix_iv(scores, subjects, subject_domains)


def fit_domains(scores, subjects, subject_domains=None, *, proxy_alpha=None,
                counts: SubjectCounts | None = None) -> DomainFits:
    r"""Fit every (domain, model) of a score matrix at once (paper section 6.2).

    Parameters
    ----------
    scores : array_like, shape (n_items, n_models), or None
        Item scores in [0, 1]; NaN marks an item a model did not answer. None: ``counts`` stand
        for them (the fits use nothing else).
    subjects : array_like of int, shape (n_items,)
        Subject code of each item, 0..K-1.
    subject_domains : array_like of int, shape (K,), optional
        Domain code of each subject; default one domain (hierarchy "subject" only).
    proxy_alpha : float, keyword-only, optional
        With it, each fit's profile-likelihood upper bound on its subject proxy (see
        :class:`DomainFits`).
    counts : SubjectCounts, keyword-only, optional
        :func:`~benchcert.stats.subject_counts.subject_counts` of the same ``scores`` and
        ``subjects`` (e.g. ``BenchmarkMatrices.subject_counts``, shared by an audit's analyses):
        used instead of counting again (the same numbers).

    Returns
    -------
    DomainFits

    Notes
    -----
    For a model whose observed scores are all 0/1 each domain gets
    :func:`fit_beta_binomial` on its subjects' (correct, answered) counts; otherwise
    :func:`fit_beta_means` on the subject means (section 6.2). A subject a model never
    answered is left out of that model's fit. All fits run as one batch. Subjects with a
    single answered item are kept (they inform the mean only) and warned about.
    """
    if scores is None:
        # The counts stand for the matrix (an audit that does not hold it): the same fits.
        if counts is None:
            raise ValueError("fit_domains needs scores, or counts in their place")
        _, doms, k = _counts_iv(counts, subjects, subject_domains)
        if counts.n.shape[0] != k:
            raise ValueError(f"counts must have one row per subject ({k}); got {counts.n.shape[0]}")
        if proxy_alpha is not None:
            proxy_alpha = check_alpha(proxy_alpha)
        return _fit_domains_counts(*_from_counts(counts), doms, stacklevel=3, proxy_alpha=proxy_alpha)
    s, codes, doms, k = _fit_domains_iv(scores, subjects, subject_domains)
    if proxy_alpha is not None:
        proxy_alpha = check_alpha(proxy_alpha)
    if counts is None:
        n, total, binary = _counts(s, codes, k)
    elif not isinstance(counts, SubjectCounts) or counts.n.shape != (k, s.shape[1]):
        raise ValueError(f"counts must be the SubjectCounts of these scores, shape (K, M) = {(k, s.shape[1])}; got "
                         f"{getattr(getattr(counts, 'n', None), 'shape', type(counts).__name__)}")
    else:
        n, total, binary = _from_counts(counts)
    return _fit_domains_counts(n, total, binary, doms, stacklevel=3, proxy_alpha=proxy_alpha)


def _fit_domains_counts(n, total, binary, doms, stacklevel, proxy_alpha=None):
    k, mdl = n.shape
    d = int(doms.max()) + 1 if doms.size else 1
    single = (n == 1)
    if single.any():
        subj = np.flatnonzero(single.any(axis=1))
        warn_degenerate("fit_domains: {} have a single answered item for some model; such a subject's "
                        "accuracy is 0 or 1 and informs the domain mean only", Ref("subject", subj),
                        stacklevel=stacklevel)
    order = np.argsort(doms, kind="stable")
    sizes = np.bincount(doms, minlength=d)
    kmax = max(int(sizes.max()), 1)
    pos = np.empty(k, dtype=np.int64)
    starts = np.r_[0, np.cumsum(sizes)[:-1]]
    pos[order] = np.arange(k) - np.repeat(starts, sizes)
    # Padded (D, Kmax, M) layout, then one row per (domain, model).
    y_pad = np.zeros((d, kmax, mdl))
    m_pad = np.zeros((d, kmax, mdl))
    y_pad[doms, pos] = total
    m_pad[doms, pos] = n
    y_rows = y_pad.transpose(0, 2, 1).reshape(d * mdl, kmax)
    m_rows = m_pad.transpose(0, 2, 1).reshape(d * mdl, kmax)
    model_of_row = np.tile(np.arange(mdl), d)
    bin_rows = binary[model_of_row]
    ua_rows = None
    if proxy_alpha is not None:
        # Bonferroni over the domains whose proxy is estimated (two or more answered subjects).
        fitted = (np.sum(m_rows > 0, axis=1) >= 2).reshape(d, mdl)
        n_fit = np.maximum(fitted.sum(axis=0), 1)
        ua_rows = np.broadcast_to(proxy_alpha / n_fit, (d, mdl)).reshape(-1)
    names = ("a", "b", "nu", "mean", "s2", "icc", "loglik", "status")
    if ua_rows is not None:
        names += ("nu_lower", "s2_upper", "upper_alpha")
    fields = {f: np.empty(d * mdl, dtype=object if f == "status" else float) for f in names}
    prof_rows = None
    n_sub = np.zeros(d * mdl, dtype=np.int64)
    n_it = np.zeros(d * mdl, dtype=np.int64)
    conv = np.ones(d * mdl, dtype=bool)
    for is_bin in (True, False):
        rows = np.flatnonzero(bin_rows == is_bin)
        if not rows.size:
            continue
        if is_bin:
            # Binary: totals are integer counts (rounded against float summation noise).
            fit = _fit_bb_rows(np.round(y_rows[rows]), m_rows[rows], (rows.size,), stacklevel=stacklevel + 1,
                               upper_alpha=None if ua_rows is None else ua_rows[rows])
        else:
            mk = m_rows[rows] > 0
            with np.errstate(invalid="ignore", divide="ignore"):
                xm = np.where(mk, y_rows[rows] / np.where(mk, m_rows[rows], 1.0), np.nan)
            fit = _fit_means_rows(xm, mk, (rows.size,), stacklevel + 1,
                                  n_items=m_rows[rows].sum(axis=1).astype(np.int64),
                                  upper_alpha=None if ua_rows is None else ua_rows[rows])
        for f in fields:
            fields[f][rows] = getattr(fit, f)
        if ua_rows is not None and rows.size == d * mdl:  # one kind of row: its profiles, not a copy
            prof_rows = fit.profile
        elif ua_rows is not None:
            if prof_rows is None:
                prof_rows = np.full((d * mdl, _W_GRID.size - 1), np.inf)
            prof_rows[rows] = fit.profile
        n_sub[rows] = fit.n_subjects
        n_it[rows] = fit.n_items
        conv[rows] = fit.converged

    if ua_rows is not None and prof_rows is None:  # no row at all
        prof_rows = np.full((d * mdl, _W_GRID.size - 1), np.inf)

    def r(x):
        return np.asarray(x).reshape(d, mdl)

    status = r(fields["status"]).astype(str)
    upper = {}
    if ua_rows is not None:
        upper = dict(nu_lower=r(fields["nu_lower"]).astype(float), s2_upper=r(fields["s2_upper"]).astype(float),
                     upper_alpha=r(fields["upper_alpha"]).astype(float), proxy_alpha=float(proxy_alpha),
                     profile=prof_rows.reshape(d, mdl, -1))
    return DomainFits(
        a=r(fields["a"]).astype(float), b=r(fields["b"]).astype(float), nu=r(fields["nu"]).astype(float),
        mean=r(fields["mean"]).astype(float), s2=r(fields["s2"]).astype(float),
        icc=r(fields["icc"]).astype(float), loglik=r(fields["loglik"]).astype(float),
        n_subjects=r(n_sub), n_items=r(n_it), status=status, degenerate=status != "ok", converged=r(conv),
        fit_method=np.where(binary, "beta_binomial_mle", "beta_mle_on_subject_means"), binary=binary,
        n=n, total=total, subject_domains=doms, method="domain_beta_fits",
        assumptions=_BB_ASSUMPTIONS if binary.all() else _BB_ASSUMPTIONS + _BETA_MEANS_ASSUMPTIONS[:1], **upper,
    )
