"""Benchmark scores: pooled, subject-macro and per-domain means (the exchangeable-bounds paper, section 7.2 and Table 1; docs/methods.md, section 1).

Pure numpy; vectorised over models so a full MMLU matrix (about 14k items x
tens of models) is summarised in a few milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._common import _short
from .degenerate import Ref, warn_degenerate
from .segments import Grouping
from .validation import all_missing_columns, check_codes, check_scores

__all__ = ["BenchmarkScores", "benchmark_scores", "benchmark_scores_from_counts"]


@dataclass(frozen=True)
class BenchmarkScores:
    """Descriptive scores of M models on a benchmark of K subjects in D domains.

    Attributes
    ----------
    n : ndarray, shape (K, M), int
        Observed (non-missing) items per subject per model.
    total : ndarray, shape (K, M), float
        Sum of the observed scores per subject per model.
    subject_mean : ndarray, shape (K, M), float
        ``total / n``; NaN where ``n == 0`` (a subject the model never answered,
        which is warned about).
    pooled : ndarray, shape (M,)
        Mean over all observed items of the model.
    macro : ndarray, shape (M,)
        Mean of ``subject_mean`` over the subjects the model answered (n > 0).
    n_items : ndarray, shape (M,), int
        Observed items per model.
    n_subjects : ndarray, shape (M,), int
        Subjects with at least one observed item.
    subject_sd : ndarray, shape (M,)
        Sample SD (ddof=1) of the subject means (paper Table 1 "Subject SD");
        NaN, with a warning, for a model with fewer than two subjects.
    subject_min, subject_max : ndarray, shape (M,)
        Range of the subject means (paper Table 1 "Subject range").
    domain_n : ndarray, shape (D, M), int
        Observed items per domain per model.
    domain_pooled : ndarray, shape (D, M)
        Item-weighted mean within each domain (NaN, warned, if the domain has no
        observed item for that model).
    domain_macro : ndarray, shape (D, M)
        Mean of the subject means of the domain's answered subjects.
    method : str
        ``"empirical_means"``.
    assumptions : tuple of str
        What the numbers mean and do not mean.
    """

    n: np.ndarray
    total: np.ndarray
    subject_mean: np.ndarray
    pooled: np.ndarray
    macro: np.ndarray
    n_items: np.ndarray
    n_subjects: np.ndarray
    subject_sd: np.ndarray
    subject_min: np.ndarray
    subject_max: np.ndarray
    domain_n: np.ndarray
    domain_pooled: np.ndarray
    domain_macro: np.ndarray
    method: str
    assumptions: tuple[str, ...]


_SCORES_ASSUMPTIONS = (
    "scores lie in [0, 1]; NaN marks a missing response and is excluded per model "
    "(it is not scored as wrong)",
    "macro = unweighted mean over the subjects the model answered; a subject with no "
    "observed item for a model is left out of that model's macro, SD and range",
    "subject SD (ddof=1) and range are descriptive only: they treat subject means as "
    "i.i.d. and are not standard errors of any score",
)


def _count_of_codes(given, max_code: int, name: str, kind: str) -> int:
    """How many ``kind`` codes there are: ``given`` (argument ``name``), which must exceed every code,
    or ``max_code + 1`` when it is None."""
    if given is None:
        return max_code + 1
    count = _check_count(given, name)
    if count <= max_code:
        raise ValueError(f"{name} must exceed every {kind} code (max code {max_code}); got {given}")
    return count


def _benchmark_scores_iv(scores, subjects, subject_domains, n_subjects, n_domains):
    scores = check_scores(scores, "scores", ndim=2, allow_nan=True)
    n_items_total, n_models = scores.shape
    subjects = check_codes(subjects, "subjects", length=n_items_total)
    k = _count_of_codes(n_subjects, int(subjects.max()), "n_subjects", "subject")

    if subject_domains is None:
        domains = np.zeros(k, dtype=np.int64)
    else:
        domains = check_codes(subject_domains, "subject_domains")
        if domains.shape[0] != k:
            raise ValueError(
                f"subject_domains must have one code per subject (length {k}); "
                f"got length {domains.shape[0]}"
            )
    d = _count_of_codes(n_domains, int(domains.max()), "n_domains", "domain")

    empty = all_missing_columns(scores)
    if empty.size:
        raise ValueError(
            f"scores has no observed (non-NaN) item for model column(s) {_short(empty)}"
        )
    return scores, subjects, domains, k, d


def _check_count(value, name: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be a positive integer; got {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be a positive integer; got {value!r}")
    return int(value)


def benchmark_scores(
    scores,
    subjects,
    *,
    subject_domains=None,
    n_subjects=None,
    n_domains=None,
) -> BenchmarkScores:
    r"""Pooled, subject-macro and per-domain scores of every model (the exchangeable-bounds paper, section 7.2 and Table 1; docs/methods.md, section 1).

    Parameters
    ----------
    scores : array_like, shape (n_items, n_models)
        Item scores in [0, 1]; NaN marks an item the model did not answer.
    subjects : array_like of int, shape (n_items,)
        Subject code of each item, in ``0 .. K-1``.
    subject_domains : array_like of int, shape (K,), optional
        Domain code of each subject, in ``0 .. D-1``. Default: one domain.
    n_subjects : int, optional
        K, if some subjects have no items at all (default ``max(subjects) + 1``).
    n_domains : int, optional
        D, if some domains have no subjects (default ``max(subject_domains) + 1``).

    Returns
    -------
    BenchmarkScores

    Notes
    -----
    For one model write :math:`O_k` for its observed items of subject k,
    :math:`m_k = |O_k|` and :math:`\bar X_k = m_k^{-1}\sum_{j\in O_k} X_j`.
    With :math:`\mathcal K = \{k : m_k > 0\}` and :math:`K' = |\mathcal K|`,

    .. math::

        \text{pooled} = \frac{\sum_k \sum_{j\in O_k} X_j}{\sum_k m_k},\qquad
        \text{macro}  = Z = \frac{1}{K'}\sum_{k\in\mathcal K} \bar X_k,

        \text{subject SD} = \Big(\frac{1}{K'-1}\sum_{k\in\mathcal K}
                            (\bar X_k - Z)^2\Big)^{1/2},

    and the domain versions restrict the sums to the subjects of the domain.
    These are the quantities of Table 1 and Section 7.2 (the macro score
    :math:`Z = K^{-1}\sum_k \bar X_k`, K = 57) of the exchangeable
    bounded-difference benchmarks paper. The SD is, as the paper stresses, a
    descriptive i.i.d.-style spread, not an inferential quantity.

    Departure: the paper has no missing responses. Here a missing response is
    dropped (never scored 0), so a model that skipped a whole subject has its
    macro taken over fewer subjects; this is warned about because such macros
    are not comparable across models.
    """
    scores, subjects, domains, k, d = _benchmark_scores_iv(
        scores, subjects, subject_domains, n_subjects, n_domains
    )
    # One row gather serves both sums; the gather dominates the cost at MMLU scale.
    grouping = Grouping(subjects, k)
    scores_sorted = grouping.gather(scores)
    n = grouping.reduce_sorted(~np.isnan(scores_sorted))
    # fmax ignores NaN, so with scores validated >= 0 it zero-fills missing entries
    # in one pass, in place on our private sorted copy (no extra full-size array).
    total = grouping.reduce_sorted(np.fmax(scores_sorted, 0.0, out=scores_sorted))
    return _scores_of_counts(n, total, domains, d)


def benchmark_scores_from_counts(n, total, *, subject_domains=None, n_domains=None) -> BenchmarkScores:
    """:func:`benchmark_scores` from the per-subject counts of the score matrix, without the matrix.

    Parameters
    ----------
    n : array_like of int, shape (K, M)
        Answered items per subject and model.
    total : array_like, shape (K, M)
        Sum of the answered scores per subject and model (each subject's rows summed in row
        order: :attr:`benchcert.stats.subject_counts.SubjectCounts.total`).
    subject_domains, n_domains
        As in :func:`benchmark_scores`.

    Returns
    -------
    BenchmarkScores
        The same numbers as :func:`benchmark_scores` on the matrix the counts are of, to the
        last bit (its sums are these counts).
    """
    n = np.asarray(n)
    total = np.asarray(total, dtype=np.float64)
    if n.ndim != 2 or total.shape != n.shape or not np.issubdtype(n.dtype, np.integer) or n.size == 0:
        raise ValueError(f"n (integer) and total must both have shape (K, M) with K, M >= 1; got "
                         f"{n.dtype} {n.shape} and {total.shape}")
    if np.any(n < 0):
        raise ValueError("n must be >= 0")
    k = n.shape[0]
    if subject_domains is None:
        domains = np.zeros(k, dtype=np.int64)
    else:
        domains = check_codes(subject_domains, "subject_domains", length=k)
    d = _count_of_codes(n_domains, int(domains.max()), "n_domains", "domain")
    empty = np.flatnonzero(n.sum(axis=0) == 0)
    if empty.size:
        raise ValueError(f"scores has no observed (non-NaN) item for model column(s) {_short(empty)}")
    return _scores_of_counts(n.astype(np.int64, copy=False), total, domains, d)


def _scores_of_counts(n, total, domains, d) -> BenchmarkScores:
    answered = n > 0

    with np.errstate(invalid="ignore", divide="ignore"):
        subject_mean = np.where(answered, total / np.where(answered, n, 1), np.nan)

    skipped = np.argwhere(~answered)
    if skipped.size:
        models_hit = np.unique(skipped[:, 1])
        subjects_hit = np.unique(skipped[:, 0])
        warn_degenerate(
            "{} have no observed item for {}: those subject means are NaN and left out of the macro "
            "score, subject SD and range of those models",
            Ref("subject", subjects_hit), Ref("model", models_hit),
        )

    n_items = n.sum(axis=0)
    pooled = total.sum(axis=0) / n_items
    n_subj = answered.sum(axis=0)
    means0 = np.where(answered, subject_mean, 0.0)
    macro = means0.sum(axis=0) / n_subj

    dev2 = np.where(answered, (subject_mean - macro) ** 2, 0.0).sum(axis=0)
    few = n_subj < 2
    with np.errstate(invalid="ignore", divide="ignore"):
        subject_sd = np.where(few, np.nan, np.sqrt(dev2 / np.maximum(n_subj - 1, 1)))
    if few.any():
        warn_degenerate(
            "{} answered fewer than 2 subjects: subject SD is undefined and returned as NaN",
            Ref("model", np.flatnonzero(few)),
        )
    subject_min = np.where(answered, subject_mean, np.inf).min(axis=0)
    subject_max = np.where(answered, subject_mean, -np.inf).max(axis=0)

    # Domains aggregate the (K, M) subject tables, so this costs O(K M), not O(N M).
    dom_group = Grouping(domains, d)
    domain_n = dom_group.sum(n)
    domain_total = dom_group.sum(total)
    domain_k = dom_group.sum(answered)
    domain_mean_sum = dom_group.sum(means0)
    dom_ok = domain_n > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        domain_pooled = np.where(dom_ok, domain_total / np.where(dom_ok, domain_n, 1), np.nan)
        domain_macro = np.where(dom_ok, domain_mean_sum / np.where(dom_ok, domain_k, 1), np.nan)
    if not dom_ok.all():
        bad = np.argwhere(~dom_ok)
        warn_degenerate(
            "{} have no observed item for {}: their domain scores are NaN",
            Ref("domain", np.unique(bad[:, 0])), Ref("model", np.unique(bad[:, 1])),
        )

    return BenchmarkScores(
        n=n,
        total=total,
        subject_mean=subject_mean,
        pooled=pooled,
        macro=macro,
        n_items=n_items,
        n_subjects=n_subj,
        subject_sd=subject_sd,
        subject_min=subject_min,
        subject_max=subject_max,
        domain_n=domain_n,
        domain_pooled=domain_pooled,
        domain_macro=domain_macro,
        method="empirical_means",
        assumptions=_SCORES_ASSUMPTIONS,
    )
