r"""Repeated samples per item (several responses per item at temperature > 0, or several seeds):
variance components, per-item instability, pass@k and mean@k, and how many samples per item to
draw for a fixed budget.

One model's responses are :math:`y_{ik}`, sample k of item i (item i in subject s(i)), modelled
as the nested random effects :math:`y_{ik} = \mu + u_{s} + v_{i} + e_{ik}` with variances
:math:`\sigma^2_s` (between subjects), :math:`\sigma^2_b` (between items within a subject) and
:math:`\sigma^2_w` (within an item, across samples). Miller (2024), "Adding error bars to evals",
sec. 2.4-2.5: averaging K samples per item keeps the item-level intervals valid (the item mean's
variance is :math:`\sigma^2_b + \sigma^2_w/K`, which the CLT over items already carries) and
shrinks only the within-item part.

* :func:`variance_components` - the three components (method of moments) with intervals, and each
  item's within-item variance (its instability);
* :func:`pass_at_k` - the unbiased pass@k of Chen et al. (2021, eq. 1) and mean@k, with intervals;
* :func:`plan_samples` - samples per item K and items n minimising the variance of the benchmark
  mean for a budget, with a cost per item and per sample.

Pure numpy/scipy; no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as _st
from scipy.special import gammaln

from .validation import check_unit_interval

__all__ = ["PassAtK", "SamplesPlan", "VarianceComponents", "pass_at_k", "plan_samples", "variance_components"]


@dataclass(frozen=True)
class VarianceComponents:
    """The three variance components of one model's repeated samples, each with a (1 - alpha)
    interval; ``item_within`` each item's unbiased within-item variance (NaN with one sample)."""

    mean: float
    within: float
    within_lower: float
    within_upper: float
    between_items: float
    between_items_lower: float
    between_items_upper: float
    between_subjects: float
    between_subjects_lower: float
    between_subjects_upper: float
    item_within: np.ndarray
    n_items: int
    n_subjects: int
    mean_samples: float
    alpha: float
    method: str
    assumptions: tuple[str, ...]


def _sums_iv(n, s1, s2, subjects, alpha):
    n = np.asarray(n, dtype=float)
    s1 = np.asarray(s1, dtype=float)
    s2 = np.asarray(s2, dtype=float)
    if n.ndim != 1 or n.shape != s1.shape or n.shape != s2.shape or n.size == 0:
        raise ValueError(f"n, s1 and s2 must be 1-D arrays of one length >= 1; got {n.shape}, {s1.shape}, {s2.shape}")
    if not np.all(np.isfinite(n)) or (n < 1).any() or (n != np.round(n)).any():
        raise ValueError("n must hold integers >= 1 (samples per item)")
    if (s1 < -1e-9).any() or (s1 > n + 1e-9).any():
        raise ValueError("s1 must be a sum of n scores in [0, 1]")
    if (s2 < -1e-9).any() or (s2 > s1 + 1e-9).any() or (s2 * n < s1 * s1 - 1e-7).any():
        raise ValueError("s2 must be the sum of squares of the same scores (s1^2/n <= s2 <= s1)")
    if subjects is None:
        codes = np.zeros(n.size, dtype=np.int64)
    else:
        codes = np.asarray(subjects)
        if codes.shape != n.shape or not np.issubdtype(codes.dtype, np.integer) or (codes < 0).any():
            raise ValueError("subjects must be non-negative integer codes, one per item")
        codes = np.unique(codes, return_inverse=True)[1]
    return n, s1, s2, codes, check_unit_interval("alpha", alpha)


def _components(n, s1, s2, codes):
    m = s1 / n
    with np.errstate(invalid="ignore", divide="ignore"):
        v = np.where(n >= 2, (s2 - s1 * s1 / n) / (n - 1.0), np.nan)
    v = np.maximum(v, 0.0)
    within = float(np.nanmean(v)) if np.isfinite(v).any() else float("nan")
    noise = np.where(n >= 2, v / n, np.nan)          # each item mean's sampling variance, unbiased
    noise_mean = float(np.nanmean(noise)) if np.isfinite(noise).any() else float("nan")
    n_s = np.bincount(codes).astype(float)
    sub_mean = np.bincount(codes, weights=m) / n_s
    resid = m - sub_mean[codes]
    dof = float((n_s - 1).sum())
    between_items = float((resid ** 2).sum() / dof - noise_mean) if dof > 0 else float("nan")
    if n_s.size >= 2:
        var_sub = float(sub_mean.var(ddof=1))
        between_subjects = var_sub - float(np.mean((max(between_items, 0.0) + noise_mean) / n_s))
    else:
        between_subjects = float("nan")
    return float(m.mean()), within, between_items, between_subjects, v


def variance_components(n, s1, s2, subjects=None, *, alpha=0.05, n_boot=400, rng) -> VarianceComponents:
    r"""Between-subject, between-item and within-item variance of one model's repeated samples.

    Parameters
    ----------
    n, s1, s2 : array_like, shape (n_items,)
        Per item: samples, sum of scores, sum of squared scores (s2 = s1 for 0/1 scores).
    subjects : array_like of int, optional
        Subject code of each item (None: one subject, no between-subject component).
    alpha : float, keyword-only
    n_boot : int, keyword-only
        Bootstrap resamples of the subjects for the between components' intervals.
    rng : numpy.random.Generator, keyword-only

    Returns
    -------
    VarianceComponents

    Notes
    -----
    Method of moments for the nested one-way design (Searle, Casella & McCulloch 1992, sec. 3.6,
    unbalanced): :math:`\hat\sigma^2_w = \overline{v_i}` with :math:`v_i` item i's unbiased sample
    variance over its samples (items with >= 2 samples; for 0/1 scores
    :math:`v_i = c_i(r_i - c_i)/(r_i(r_i-1))`); :math:`\hat\sigma^2_b` the pooled within-subject
    variance of the item means minus the mean of :math:`v_i/r_i` (their sampling noise);
    :math:`\hat\sigma^2_s` the variance of the subject means minus
    :math:`\overline{(\hat\sigma^2_b + \overline{v/r})/n_s}`. The between components may come out
    negative (then the data show none; reported as estimated).

    Intervals: :math:`\hat\sigma^2_w` is a mean over items of independent unbiased :math:`v_i`,
    so its interval is the t interval over items (items independent given the model); the
    between components get percentile intervals from a bootstrap of subjects (of items when
    there is one subject), which with few subjects is approximate.
    """
    n, s1, s2, codes, alpha = _sums_iv(n, s1, s2, subjects, alpha)
    mean, within, b_items, b_subj, v = _components(n, s1, s2, codes)
    ok = np.isfinite(v)
    k = int(ok.sum())
    if k >= 2:
        se = float(v[ok].std(ddof=1) / math.sqrt(k))
        t = float(_st.t.ppf(1 - alpha / 2, k - 1))
        w_lo, w_hi = max(0.0, within - t * se), within + t * se
    else:
        w_lo = w_hi = float("nan")
    n_sub = int(codes.max()) + 1
    boots = []
    groups = [np.flatnonzero(codes == s) for s in range(n_sub)]
    for _ in range(int(n_boot)):
        if n_sub >= 2:
            pick = rng.integers(0, n_sub, n_sub)
            idx = np.concatenate([groups[p] for p in pick])
            new_codes = np.repeat(np.arange(n_sub), [groups[p].size for p in pick])
        else:
            idx = rng.integers(0, n.size, n.size)
            new_codes = np.zeros(n.size, dtype=np.int64)
        _, _, bi, bs, _ = _components(n[idx], s1[idx], s2[idx], new_codes)
        boots.append((bi, bs))
    b = np.array(boots) if boots else np.full((1, 2), np.nan)
    q = [alpha / 2 * 100, (1 - alpha / 2) * 100]
    bi_lo, bi_hi = (np.nanpercentile(b[:, 0], q) if np.isfinite(b[:, 0]).any() else (np.nan, np.nan))
    bs_lo, bs_hi = (np.nanpercentile(b[:, 1], q) if n_sub >= 2 and np.isfinite(b[:, 1]).any() else (np.nan, np.nan))
    return VarianceComponents(mean, within, w_lo, w_hi, b_items, float(bi_lo), float(bi_hi), b_subj,
                              float(bs_lo), float(bs_hi), v, int(n.size), n_sub, float(n.mean()), alpha,
                              "nested_moments",
                              ("items independent given the model; samples of an item independent given the item",
                               "within: t interval over items; between: percentile bootstrap of subjects "
                               "(approximate with few subjects)"))


@dataclass(frozen=True)
class PassAtK:
    """pass@k (0/1 scores) and mean@k of one model over items, each with a t interval over items."""

    k: int
    pass_at_k: float
    pass_lower: float
    pass_upper: float
    mean_at_k: float
    mean_lower: float
    mean_upper: float
    n_items: int
    alpha: float
    method: str
    assumptions: tuple[str, ...]


def _log_comb(a, b):
    return gammaln(a + 1) - gammaln(b + 1) - gammaln(a - b + 1)


def pass_at_k(n, c, *, k, alpha=0.05) -> PassAtK:
    r"""pass@k and mean@k over items from each item's samples ``n`` and correct ones ``c``.

    Notes
    -----
    Per item, the unbiased :math:`\widehat{\text{pass@}k}_i = 1 - \binom{n_i - c_i}{k}/\binom{n_i}{k}`
    (Chen et al. 2021, eq. 1; items with fewer than k samples are left out) and
    :math:`\text{mean@}k_i = c_i/n_i` (the expected mean of k samples); each is averaged over items
    and given the t interval over items, which carries the within-item sampling variance (Miller
    2024, sec. 2.5). Clipped to [0, 1].
    """
    n = np.asarray(n, dtype=float)
    c = np.asarray(c, dtype=float)
    if n.shape != c.shape or n.ndim != 1 or (c < 0).any() or (c > n).any():
        raise ValueError("n and c must be 1-D of one shape with 0 <= c <= n")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive integer; got {k!r}")
    alpha = check_unit_interval("alpha", alpha)
    ok = n >= k
    with np.errstate(invalid="ignore"):
        fail = np.where(n[ok] - c[ok] >= k, np.exp(_log_comb(n[ok] - c[ok], k) - _log_comb(n[ok], k)), 0.0)
    per_pass = 1.0 - fail
    per_mean = c / n

    def ci(x):
        if x.size < 2:
            return float(x.mean()) if x.size else float("nan"), float("nan"), float("nan")
        t = float(_st.t.ppf(1 - alpha / 2, x.size - 1))
        h = t * float(x.std(ddof=1)) / math.sqrt(x.size)
        return float(x.mean()), max(0.0, float(x.mean()) - h), min(1.0, float(x.mean()) + h)

    p, pl_, pu = ci(per_pass)
    mm, ml, mu = ci(per_mean)
    return PassAtK(int(k), p, pl_, pu, mm, ml, mu, int(ok.sum()), alpha, "unbiased_pass_at_k_t",
                   ("items independent; an item's samples exchangeable", "pass@k over items with >= k samples"))


@dataclass(frozen=True)
class SamplesPlan:
    """How many samples per item (``k``) on how many items (``n``) minimise the variance of the
    benchmark mean within ``budget``: its ``variance`` and (1 - alpha) ``half_width``; ``k_continuous``
    the unconstrained optimum :math:`\\sqrt{c_1\\sigma^2_w/(c_2\\sigma^2_b)}`."""

    k: int
    n: int
    cost: float
    variance: float
    half_width: float
    k_continuous: float
    budget: float
    cost_item: float
    cost_sample: float
    alpha: float
    method: str
    assumptions: tuple[str, ...]


def plan_variance(k, n, between, within, N=None):
    r""":math:`\sigma^2_b/n \cdot f + \sigma^2_w/(nK)`, f the finite-population factor
    :math:`(N - n)/(N - 1)` of the items when ``N`` is given (this benchmark's items), else 1."""
    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    f = 1.0 if N is None else np.where(N > 1, (N - n) / max(N - 1.0, 1.0), 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(n >= 1, between * f / n + within / (n * k), np.inf)


def plan_samples(between, within, *, budget, n_items, cost_item=0.0, cost_sample=1.0, alpha=0.05,
                 these_items=False) -> SamplesPlan:
    r"""Samples per item K and items n for a budget, minimising the variance of the mean score.

    Parameters
    ----------
    between, within : float
        :math:`\sigma^2_b` (between items; the between-subject part can be added to it) and
        :math:`\sigma^2_w` (within an item), e.g. from :func:`variance_components`.
    budget : float, keyword-only
        What may be spent; an item evaluated K times costs ``cost_item + K cost_sample``.
    n_items : int, keyword-only
        Items available (N).
    these_items : bool, keyword-only
        The estimand is these N items' mean (finite-population factor on the between part), not
        the mean over a population of items (Miller 2024's default).

    Notes
    -----
    :math:`\mathrm{Var}(K, n) = \sigma^2_b f/n + \sigma^2_w/(nK)` with
    :math:`n = \min(N, \lfloor B/(c_1 + K c_2)\rfloor)` (Miller 2024, sec. 2.5; two-stage sampling,
    Cochran 1977, sec. 10.6). While the budget buys fewer than N items, the continuous optimum is
    :math:`K^* = \sqrt{c_1\sigma^2_w/(c_2\sigma^2_b)}` (with no cost per item, K = 1: a new item
    is worth more than a repeat); once every item is bought, more samples per item are all that
    is left. The plan evaluates the integer candidates around :math:`K^*`, around the K at which
    n reaches N, 1 and the largest affordable K, and keeps the best (checked against an
    exhaustive search in tests/stats/test_replicates.py).
    """
    for name, v in (("between", between), ("within", within)):
        if not (isinstance(v, (int, float, np.floating)) and math.isfinite(v) and v >= 0):
            raise ValueError(f"{name} must be a variance >= 0; got {v!r}")
    if not (budget > 0 and cost_sample > 0 and cost_item >= 0):
        raise ValueError(f"budget and cost_sample must be > 0 and cost_item >= 0; got {budget}, {cost_sample}, "
                         f"{cost_item}")
    if isinstance(n_items, bool) or not isinstance(n_items, (int, np.integer)) or n_items < 1:
        raise ValueError(f"n_items must be a positive integer; got {n_items!r}")
    alpha = check_unit_interval("alpha", alpha)
    k_max = int((budget - cost_item) // cost_sample)
    if k_max < 1:
        raise ValueError(f"budget {budget} buys no sample (cost of one item with one sample: "
                         f"{cost_item + cost_sample})")
    N = int(n_items)
    k_star = math.sqrt(cost_item * within / (cost_sample * between)) if between > 0 else float("inf")
    k_full = (budget / N - cost_item) / cost_sample   # the K at which exactly N items are bought
    cand = {1, k_max}
    for x in (k_star, k_full):
        if math.isfinite(x):
            for d in (-1, 0, 1, 2):
                cand.add(int(math.floor(x)) + d)
    ks = np.array(sorted(c for c in cand if 1 <= c <= k_max))
    ns = np.minimum(N, np.floor(budget / (cost_item + ks * cost_sample) + 1e-9)).astype(np.int64)
    var = plan_variance(ks, ns, between, within, N if these_items else None)
    best = int(np.argmin(var))   # ties: the smaller K (fewer repeats)
    z = float(_st.norm.ppf(1 - alpha / 2))
    return SamplesPlan(int(ks[best]), int(ns[best]), float(ns[best] * (cost_item + ks[best] * cost_sample)),
                       float(var[best]), z * math.sqrt(float(var[best])), k_star, float(budget), float(cost_item),
                       float(cost_sample), alpha, "two_stage_optimum",
                       ("variance components known (estimated from the pilot: a plan, not a guarantee)",
                        "items drawn at random; samples independent given the item",
                        "these items' mean (finite-population factor)" if these_items else
                        "a population of items (no finite-population factor)"))
