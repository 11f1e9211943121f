"""The split-half diagnostic of the hierarchical model (exchangeable-bounds paper, section 7.3).

:func:`split_half` - split-half correlation of subject accuracies within each domain, mean over
random splits (paper Table 2); half counts drawn as hypergeometric variates.

Negative within-domain dependence is flagged: under the exchangeable hierarchy two halves of
one subject are non-negatively correlated (paper Proposition 3.2), so a negative value is
evidence against the hierarchy. The other two diagnostics (the beta-binomial ICC and the
subject-subject correlation) are :mod:`benchcert.stats.subject_correlation`.

Pure numpy/scipy; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import contextlib
import warnings

from ._blas import loop_blas_threads
from ._common import _short
from .degenerate import DegenerateDataWarning, Ref, warn_degenerate
from .segments import Grouping, sums_by_reduceat
from .validation import check_codes
from .subject_counts import SubjectCounts
from .hierarchical.domains import DomainFits, _counts, _counts_iv, _domains_iv, _matrix_iv

__all__ = [
    "NoSplittableSubjectWarning",
    "SplitHalfResult",
    "split_half",
]

#: Fewest subjects a domain needs for a split-half correlation: with two, the Pearson
#: correlation of two points is always +1 or -1 and says nothing.
MIN_SUBJECTS = 3


# ======================================================================================
# Split-half reliability


class NoSplittableSubjectWarning(DegenerateDataWarning):
    """No subject has two or more answered items, so no split exists: split_half is skipped.

    Typical of leaderboard-style benchmarks with one item per subject (or "subject" used for
    something item-level). Every (domain, model) is reported undefined.
    """


_SPLIT_ASSUMPTIONS = (
    "each split divides every subject's answered items into complementary halves of sizes "
    "floor(m_k/2) and m_k - floor(m_k/2), uniformly at random",
    "the statistic is the Pearson correlation, across the subjects of a domain, of the two "
    "half accuracies, averaged over the splits where both half vectors vary (paper Table 2)",
    "complementary halves of a finite item set are slightly negatively associated within a "
    "subject (paper section 7.3), so positive values are conservative evidence of stable "
    "subject-level differences; a diagnostic, not a test of exchangeability",
    f"subjects with fewer than 2 answered items cannot be split and are left out; a domain "
    f"needs at least {MIN_SUBJECTS} splittable subjects",
)


@dataclass(frozen=True)
class SplitHalfResult:
    """Split-half correlations per domain and model.

    Attributes
    ----------
    corr : ndarray, shape (D, M)
        Mean correlation over the valid splits; NaN exactly where ``defined`` is False
        (a correlation that does not exist is not replaced by a number).
    sd : ndarray, shape (D, M)
        Standard deviation of the correlation over valid splits (NaN where undefined).
    n_valid : ndarray, shape (D, M), int
        Splits in which both half vectors had non-zero variance.
    n_subjects : ndarray, shape (D, M), int
        Subjects that could be split (>= 2 answered items).
    defined : ndarray of bool, shape (D, M)
    negative : ndarray of bool, shape (D, M)
        Defined and below 0: evidence against the within-domain hierarchy.
    status : ndarray of str, shape (D, M)
        ``"ok"``, ``"too_few_subjects"`` or ``"no_valid_split"``.
    n_splits : int
    alpha : None
        Not an interval; kept None so every diagnostic result has the same fields.
    n : ndarray, shape (M,), int
        Items answered per model.
    method : str
        ``"hypergeometric"`` (binary scores), ``"shuffle"``, ``"hypergeometric+shuffle"``, or
        ``"skipped"`` when no subject has two answered items (with a
        :class:`NoSplittableSubjectWarning`).
    assumptions : tuple of str
    mc_se : ndarray, shape (D, M)
        Monte-Carlo standard error of ``corr`` as an estimate of its expectation over random
        splits: ``sd / sqrt(n_valid)`` (NaN where undefined).
    splits_drawn : ndarray, shape (M,), int
        Splits drawn for each model: ``n_splits`` without ``mc_tol``; with it, between
        ``min_splits`` and ``n_splits`` (sequential stopping).
    mc_tol : float or None
        The Monte-Carlo tolerance the draws stopped at (None: a fixed ``n_splits``).
    """

    corr: np.ndarray
    sd: np.ndarray
    n_valid: np.ndarray
    n_subjects: np.ndarray
    defined: np.ndarray
    negative: np.ndarray
    status: np.ndarray
    n_splits: int
    alpha: None
    n: np.ndarray
    method: str
    assumptions: tuple[str, ...]
    mc_se: np.ndarray
    splits_drawn: np.ndarray
    mc_tol: float | None


class _HypergeomTable:
    """Exact inverse-CDF sampler for many Hypergeometric(N_c, G_c, n_c) cells.

    numpy's ``Generator.hypergeometric`` costs ~250 ns a draw, and 500 splits x 200 subjects
    x 4,000 models is 400 million draws. Each cell's support is short (at most n_c + 1
    values), and cells repeat: a cell's distribution depends only on (subject size, correct
    count), so 800,000 (subject, model) cells of 100-item subjects share at most 101
    distributions. Each distinct distribution's CDF is tabulated once from the log-pmf, and
    every draw is one inverse-CDF search of a uniform in that small, cache-resident table
    (same distribution as numpy's sampler, several times faster).

    ``lo``, ``start`` and ``end`` are per cell; ``start``/``end`` index ``cdf``, the table of
    the cell's distribution (shared with every cell of the same parameters).
    """

    def __init__(self, ngood, nbad, nsample):
        g, b, n = (np.asarray(v, dtype=np.int64).ravel() for v in (ngood, nbad, nsample))
        self.n_cells = g.size
        if g.size and max(int(g.max()), int(b.max()), int(n.max())) < (1 << 20) and min(
                int(g.min()), int(b.min()), int(n.min())) >= 0:
            # One int64 key per cell, in the same (g, b, n) lexicographic order as a row-wise unique
            # (which sorts rows as structured values, several times slower).
            keys, dist = np.unique((g << 40) | (b << 20) | n, return_inverse=True)
            params = np.stack([keys >> 40, (keys >> 20) & 0xFFFFF, keys & 0xFFFFF], axis=1)
            dist = dist.ravel()
        elif g.size:
            params, dist = np.unique(np.stack([g, b, n], axis=1), axis=0, return_inverse=True)
            dist = dist.ravel()
        else:
            params, dist = np.zeros((0, 3), dtype=np.int64), np.zeros(0, dtype=np.intp)
        g, b, n = params[:, 0], params[:, 1], params[:, 2]
        lo = np.maximum(0, n - b)
        hi = np.minimum(n, g)
        length = hi - lo + 1
        start = np.r_[0, np.cumsum(length)[:-1]].astype(np.int64)
        end = start + length  # exclusive
        self.dist = dist.astype(np.int64)
        self.lo, self.start, self.end = lo[dist], start[dist], end[dist]
        self.params, self._d_lo, self._d_start = params, lo, start  # per distribution
        self.n_dists = params.shape[0]
        if not params.shape[0]:
            self.cdf = np.zeros(0)
            self._q_bits, self._q, self._guide = 6, 64, np.zeros(0, dtype=np.int32)
            return
        cell = np.repeat(np.arange(g.size), length)
        x = lo[cell] + (np.arange(length.sum()) - start[cell])
        # log pmf(x) - log pmf(lo) = sum_{j < x} log[(G - j)(n - j) / ((j + 1)(B - n + j + 1))]:
        # two logs per support point instead of six log-gammas.
        gc, bc, nc = g[cell], b[cell], n[cell]
        with np.errstate(divide="ignore", invalid="ignore"):
            step = np.log((gc - x) * (nc - x)) - np.log((x + 1.0) * (bc - nc + x + 1.0))
        step = np.r_[0.0, step[:-1]]
        step[start] = 0.0
        logw = np.cumsum(step)
        logw -= np.repeat(logw[start], length)
        logw -= np.repeat(np.maximum.reduceat(logw, start), length)
        pmf = np.exp(logw)
        csum = np.cumsum(pmf)
        base = np.r_[0.0, csum[:-1]][start]
        cdf = (csum - base[cell]) / (csum[end - 1] - base)[cell]
        cdf[end - 1] = 1.0  # u < 1 always lands inside the support
        self.cdf = cdf
        self._guide = self._guide_table(cdf, start, end)

    _GUIDE_ENTRIES = 1 << 18  # at most 1 MiB of int32 guide table (in a core's cache)

    def _guide_table(self, cdf, start, end):
        """Per distribution d and bin q of [0, 1) in Q equal bins: the number of support
        points with F <= q/Q (the inverse CDF of every u in the bin, when no F value lies
        inside the bin), stored as -1 - count when one does (the bin is then resolved by
        exact comparisons). Q is a power of 2, so u * Q, its floor and q/Q are exact."""
        nd = start.size
        q_bits = int(np.clip(np.floor(np.log2(self._GUIDE_ENTRIES / max(nd, 1))), 6, 14))
        self._q_bits, self._q = q_bits, 1 << q_bits
        edges = np.arange(self._q + 1) / self._q
        lo_n = np.empty((nd, self._q), dtype=np.int32)
        for d in range(nd):  # one small search per distribution (at most a few thousand)
            cnt = np.searchsorted(cdf[start[d]:end[d]], edges, side="right")
            below = np.searchsorted(cdf[start[d]:end[d]], edges[1:], side="left")  # F < (q+1)/Q
            lo_n[d] = np.where(cnt[:-1] == below, cnt[:-1], -1 - cnt[:-1])
        return lo_n.ravel()

    def draw(self, size: int, rng: np.random.Generator) -> np.ndarray:
        """(n_cells, size) draws; row c from cell c.

        Exact inverse CDF, looked up: a uniform u of a cell of distribution d falls in bin
        q = floor(u Q); if no support point's F lies inside that bin, the inverse CDF is the
        guide table's count for (d, q) (no search); otherwise the count is advanced by exact
        comparisons of u with the tabulated F. The draws are exactly those of one
        ``searchsorted`` per cell on the same uniforms (:meth:`_draw_per_cell`, the tests'
        oracle), at a few array passes per draw instead of a Python call per cell.
        """
        u = rng.random((self.n_cells, size))
        return self._invert(u, scratch=True)

    def _invert(self, u: np.ndarray, *, scratch: bool = False, cells: slice = slice(None)) -> np.ndarray:
        """Inverse CDF of ``u`` (one row per cell: the cells ``cells`` of the table); int32 counts. With
        ``scratch`` the caller's ``u`` is overwritten by u * Q (exact: Q is a power of 2, so u is recovered
        where needed)."""
        uq = np.multiply(u, self._q, out=u if scratch else None)
        q = uq.astype(np.int64)
        return self._resolve(q, cells, lambda amb: uq.reshape(-1)[amb] / self._q)

    def _invert_raw(self, raw: np.ndarray, cells: slice = slice(None)) -> np.ndarray:
        """:meth:`_invert` of the uniforms u = (raw >> 11) 2^-53 that ``Generator.random`` makes of the
        64-bit outputs ``raw`` of a PCG64 generator, without forming u: the bin floor(u Q) of Q = 2^s
        bins is raw >> (64 - s), exactly, and u is formed only where a bin needs exact comparisons."""
        q = np.right_shift(raw, np.uint64(64 - self._q_bits)).view(np.int64)
        return self._resolve(q, cells, lambda amb: (raw.reshape(-1)[amb] >> np.uint64(11)) * 2.0 ** -53)

    def _resolve(self, q: np.ndarray, cells: slice, uniforms) -> np.ndarray:
        """Counts from the bins ``q`` (overwritten) of the cells ``cells``: the guide table's count,
        advanced by exact comparisons of u (``uniforms(flat positions)``) with F in the ambiguous bins."""
        dist, lo, start, end = self.dist[cells], self.lo[cells], self.start[cells], self.end[cells]
        q += (dist * self._q)[:, None]
        idx = self._guide[q]  # int32: counts below 2^20
        del q
        flat = idx.reshape(-1)
        amb = np.flatnonzero(flat < 0)
        if amb.size:
            cnt = -1 - flat[amb].astype(np.int64)
            cell = amb // idx.shape[1]
            pos = start[cell] + cnt
            uu = uniforms(amb)
            last = end[cell] - 1
            todo = np.arange(amb.size)
            while todo.size:  # step forward while F(next point) <= u
                fwd = (pos[todo] < last[todo]) & (self.cdf[pos[todo]] <= uu[todo])
                todo = todo[fwd]
                pos[todo] += 1
            flat[amb] = pos - start[cell]
        idx += lo.astype(np.int32)[:, None]
        return idx

    def support(self) -> tuple[np.ndarray, np.ndarray]:
        """(distribution, value) of every support point, in the order of :attr:`cdf` (point p of
        distribution d is ``cdf[start_d + i]``, value lo_d + i)."""
        nd = self._d_start.size
        length = np.diff(np.r_[self._d_start, self.cdf.size])
        d = np.repeat(np.arange(nd), length)
        return d, self._d_lo[d] + (np.arange(self.cdf.size) - self._d_start[d])

    def _invert_raw_points(self, raw: np.ndarray, cells: slice = slice(None)) -> np.ndarray:
        """:meth:`_invert_raw` as support points (indices into :meth:`support`), int32."""
        if getattr(self, "_guide_points", None) is None:
            base = np.repeat(self._d_start, self._q).astype(np.int32)
            # unambiguous bins: the point itself; ambiguous: -1 - the point where the search starts
            self._guide_points = np.where(self._guide >= 0, self._guide + base, self._guide - base)
        q = np.right_shift(raw, np.uint64(64 - self._q_bits)).view(np.int64)
        q += (self.dist[cells] * self._q)[:, None]
        idx = np.take(self._guide_points, q, mode="wrap")  # (indices in range: no bound checks)
        del q
        flat = idx.reshape(-1)
        amb = np.flatnonzero(flat < 0)
        if amb.size:
            pos = -1 - flat[amb].astype(np.int64)
            uu = (raw.reshape(-1)[amb] >> np.uint64(11)) * 2.0 ** -53
            last = self.end[cells][amb // idx.shape[1]] - 1
            todo = np.arange(amb.size)
            while todo.size:  # step forward while F(next point) <= u
                fwd = (pos[todo] < last[todo]) & (self.cdf[pos[todo]] <= uu[todo])
                todo = todo[fwd]
                pos[todo] += 1
            flat[amb] = pos
        return idx

    def _draw_per_cell(self, size: int, rng: np.random.Generator) -> np.ndarray:
        """The reference implementation: one ``searchsorted`` per cell (the tests' oracle)."""
        u = rng.random((self.n_cells, size))
        out = np.empty((self.n_cells, size), dtype=np.int64)
        cdf, start, end, lo = self.cdf, self.start, self.end, self.lo
        for c in range(self.n_cells):
            out[c] = np.searchsorted(cdf[start[c]:end[c]], u[c], side="right")
        out += lo[:, None]
        return out


def _check_rng(rng):
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator (e.g. np.random.default_rng(seed)); got {rng!r}")
    return rng


def _stopping_iv(n_splits, mc_tol, min_splits):
    if isinstance(n_splits, (bool, np.bool_)) or not isinstance(n_splits, (int, np.integer)) or n_splits < 1:
        raise ValueError(f"n_splits must be a positive integer; got {n_splits!r}")
    if mc_tol is not None and (isinstance(mc_tol, (bool, np.bool_)) or not isinstance(mc_tol, (int, float, np.number))
                               or not np.isfinite(mc_tol) or mc_tol <= 0):
        raise ValueError(f"mc_tol must be None or a positive number; got {mc_tol!r}")
    if isinstance(min_splits, (bool, np.bool_)) or not isinstance(min_splits, (int, np.integer)) or min_splits < 2:
        raise ValueError(f"min_splits must be an integer >= 2; got {min_splits!r}")
    return int(n_splits), None if mc_tol is None else float(mc_tol), int(min_splits)


def _split_half_iv(scores, subjects, subject_domains, n_splits, rng, method, counted, mc_tol=None, min_splits=50):
    if scores is None:
        # The counts stand for the matrix (an audit that does not hold it): 0/1 scores only, whose
        # half counts are drawn from the counts alone; shuffling items needs the items.
        if counted is None or not counted.binary.all() or method == "shuffle":
            raise ValueError("split_half without scores needs the fits or counts of 0/1 scores and method 'auto' "
                             f"or 'hypergeometric'; got {type(counted).__name__}, method={method!r}")
        if isinstance(counted, SubjectCounts):
            codes, doms, k = _counts_iv(counted, subjects, subject_domains)  # the matrix path's checks
        else:
            codes = check_codes(subjects, "subjects")
            doms, k = _domains_iv(codes, subject_domains, counted.n.shape[0])[1:]
        s = None
    else:
        s, codes, doms, k = _matrix_iv(scores, subjects, subject_domains)
    n_splits, mc_tol, min_splits = _stopping_iv(n_splits, mc_tol, min_splits)
    rng = _check_rng(rng)
    if method not in ("auto", "hypergeometric", "shuffle"):
        raise ValueError(f"method must be 'auto', 'hypergeometric' or 'shuffle'; got {method!r}")
    return s, codes, doms, k, (n_splits, mc_tol, min_splits), rng, method


def split_half(scores, subjects, subject_domains=None, *, n_splits=500, rng, method="auto",
               fits: DomainFits | None = None, counts: SubjectCounts | None = None,
               mc_tol: float | None = None, min_splits: int = 50) -> SplitHalfResult:
    r"""Split-half correlation of subject accuracies within each domain (paper section 7.3).

    Parameters
    ----------
    scores : array_like, shape (n_items, n_models), or None
        Item scores in [0, 1]; NaN = not answered. None: ``fits`` of 0/1 scores stand for them
        (the half counts are drawn from the per-subject counts alone; the same draws).
    subjects : array_like of int, shape (n_items,)
    subject_domains : array_like of int, shape (K,), optional
        Default: one domain.
    n_splits : int, keyword-only
        Random splits (paper: 500); with ``mc_tol``, the most drawn for any model.
    rng : numpy.random.Generator, keyword-only
        The only source of randomness.
    method : {"auto", "hypergeometric", "shuffle"}, keyword-only
        "auto" draws hypergeometric half counts for models with binary scores and shuffles
        items otherwise; the other values force one path (the tests compare them).
    fits : DomainFits, keyword-only, optional
        :func:`~benchcert.stats.hierarchical.fit_domains` of the same ``scores`` and
        ``subjects``: its per-subject counts are used instead of counting again (the same
        numbers; the matrix is then not gathered a second time).
    counts : SubjectCounts, keyword-only, optional
        The same per-subject counts without the fits (``BenchmarkMatrices.subject_counts``); give
        ``fits`` or ``counts``, not both.
    mc_tol : float, keyword-only, optional
        Sequential stopping: splits are drawn in rounds of ``min_splits`` for every model still
        running, and a model stops once each of its domains is settled - its Monte-Carlo standard
        error ``sd / sqrt(n_valid)`` is at most ``mc_tol`` (with at least ``MIN_VALID_FOR_SE``
        valid splits), or it has no valid split yet, or fewer than ``MIN_SUBJECTS`` splittable
        subjects - or after ``n_splits``. None (default): ``n_splits`` splits for every model.
    min_splits : int, keyword-only
        The round size of sequential stopping (default 50); unused without ``mc_tol``.

    Returns
    -------
    SplitHalfResult

    Notes
    -----
    For split b, subject k's items are divided into halves :math:`A_k^{(b)}` (size
    :math:`\lfloor m_k/2\rfloor`) and its complement, and

    .. math::

        r_d^{(b)} = \mathrm{corr}_{k\in D_d}\big(\hat p^{A,b}_{d,k}, \hat p^{B,b}_{d,k}\big),

    computed when both vectors have non-zero variance; the result is the mean over such
    splits (paper section 7.3, Table 2). For 0/1 scores with :math:`Y_k` correct among
    :math:`m_k`, the half-A count of a uniformly random split is exactly
    Hypergeometric(:math:`m_k`, :math:`Y_k`, :math:`\lfloor m_k/2\rfloor`) (the half is a
    uniformly random draw without replacement of :math:`\lfloor m_k/2\rfloor` of the
    :math:`m_k` items, :math:`Y_k` of them correct), so it is drawn directly (by inverse CDF) instead of shuffling items. Under the hierarchy
    :math:`\mathrm{Cov}(\hat p^A, \hat p^B\mid\Psi_d) = \mathrm{Var}(p_{d,k}\mid\Psi_d)\ge 0`;
    a negative mean is flagged (``negative``). A domain with fewer than 3 splittable subjects,
    or with no split in which both halves vary, has no correlation: NaN, ``defined`` False,
    and a :class:`DegenerateDataWarning`.

    The mean over splits is a Monte-Carlo estimate of the expectation of
    :math:`r_d^{(b)}` over uniformly random splits (the estimand); ``mc_se`` is its standard
    error. With ``mc_tol`` the number of splits is a stopping time: the estimand is unchanged and
    every reported value carries its ``mc_se`` (at most ``mc_tol`` unless the model reached
    ``n_splits``; stopping on the estimated error makes the error slightly optimistic when
    fewer than a few dozen splits are valid, hence ``MIN_VALID_FOR_SE``).
    """
    if fits is not None and counts is not None:
        raise ValueError("give fits or counts, not both")
    if counts is not None:
        if not isinstance(counts, SubjectCounts):
            raise ValueError(f"counts must be a SubjectCounts; got {type(counts).__name__}")
        fits_like = counts
    else:
        fits_like = fits
    s, codes, doms, k, (n_splits, mc_tol, min_splits), rng, method = _split_half_iv(
        scores, subjects, subject_domains, n_splits, rng, method, fits_like, mc_tol, min_splits)
    if counts is not None:
        width = counts.n.shape[1] if s is None else s.shape[1]
        if counts.n.shape != (k, width):
            raise ValueError(f"counts must be the SubjectCounts of these scores, shape (K, M) = {(k, width)}; "
                             f"got {counts.n.shape}")
        n, total, binary = counts.n, counts.total, counts.binary
    elif fits is not None:
        width = fits.n.shape[1] if s is None else s.shape[1]
        if not isinstance(fits, DomainFits) or fits.n.shape != (k, width):
            raise ValueError(f"fits must be the DomainFits of these scores, shape (K, M) = {(k, width)}; got "
                             f"{getattr(getattr(fits, 'n', None), 'shape', type(fits).__name__)}")
        n, total, binary = fits.n, fits.total, fits.binary
    else:
        n, total, binary = _counts(s, codes, k)
    mdl = n.shape[1]
    d = int(doms.max()) + 1
    if method == "hypergeometric" and not binary.all():
        raise ValueError("method='hypergeometric' needs 0/1 scores; model column(s) "
                         f"{_short(np.flatnonzero(~binary))} have other values")
    use_hyper = binary if method == "auto" else np.full(mdl, method == "hypergeometric")
    # Subjects in domain order, so every domain sum is one np.add.reduceat over contiguous rows
    # (no BLAS call: small threaded matmuls are slow on a busy machine).
    order = np.argsort(doms, kind="stable")
    n, total = n[order], total[order]
    grouping = Grouping(doms[order], d)
    splittable = n >= 2
    half = n // 2
    n_sub = grouping.reduce_sorted(splittable).astype(np.int64)

    if not splittable.any():
        warnings.warn("split_half: no subject has 2 or more answered items for any model, so there is no split; "
                      "skipped (every correlation NaN, status too_few_subjects)", NoSplittableSubjectWarning,
                      stacklevel=2)
        nan = np.full((d, mdl), np.nan)
        return SplitHalfResult(
            corr=nan, sd=nan.copy(), n_valid=np.zeros((d, mdl), dtype=np.int64), n_subjects=n_sub,
            defined=np.zeros((d, mdl), dtype=bool), negative=np.zeros((d, mdl), dtype=bool),
            status=np.full((d, mdl), "too_few_subjects"), n_splits=n_splits, alpha=None, n=n.sum(axis=0),
            method="skipped", assumptions=_SPLIT_ASSUMPTIONS, mc_se=nan.copy(),
            splits_drawn=np.zeros(mdl, dtype=np.int64), mc_tol=mc_tol)

    columns = _Columns(grouping=grouping, splittable=splittable, n=n, total=total, half=half, use_hyper=use_hyper,
                       s=s, codes=codes, order=order)
    if mc_tol is None:
        sums, drawn = _draw(columns.inputs(None), d, n_splits, rng), np.full(mdl, n_splits, dtype=np.int64)
    else:
        sums, drawn = _sequential(columns, d, n_sub, n_splits, min_splits, mc_tol, rng)
    corr, sd, n_valid = sums.result()
    mc_se = sd / np.sqrt(np.maximum(n_valid, 1))
    status = np.full((d, mdl), "ok", dtype=object)
    status[n_valid == 0] = "no_valid_split"
    status[n_sub < MIN_SUBJECTS] = "too_few_subjects"
    defined = status == "ok"
    corr = np.where(defined, corr, np.nan)
    sd = np.where(defined, sd, np.nan)
    mc_se = np.where(defined, mc_se, np.nan)
    for st, why in (("too_few_subjects", f"fewer than {MIN_SUBJECTS} subjects with >= 2 answered items"),
                    ("no_valid_split", "no split in which both half-accuracy vectors vary (e.g. every subject "
                                       "all correct)")):
        hit = np.argwhere(status == st)
        if hit.size:
            warn_degenerate(f"split_half: {why} in " + "{}; no correlation is reported there (NaN, defined=False)",
                            Ref("domain model", hit))
    negative = defined & (np.nan_to_num(corr) < 0)
    if negative.any():
        warn_degenerate("split_half: negative mean split-half correlation in {}: evidence against "
                        "exchangeable subjects within that domain", Ref("domain model", np.argwhere(negative)))
    return SplitHalfResult(
        corr=corr, sd=sd, n_valid=n_valid, n_subjects=n_sub, defined=defined, negative=negative,
        status=status.astype(str), n_splits=n_splits, alpha=None, n=n.sum(axis=0),
        method="hypergeometric" if use_hyper.all() else ("shuffle" if not use_hyper.any() else "hypergeometric+shuffle"),
        assumptions=_SPLIT_ASSUMPTIONS, mc_se=mc_se, splits_drawn=drawn, mc_tol=mc_tol,
    )


#: Fewest valid splits whose standard deviation sequential stopping trusts for a cell's Monte-Carlo error.
MIN_VALID_FOR_SE = 20


@dataclass(frozen=True)
class _Columns:
    """The per-subject inputs of every model (subjects in domain order), to draw the splits of some."""

    grouping: Grouping
    splittable: np.ndarray
    n: np.ndarray
    total: np.ndarray
    half: np.ndarray
    use_hyper: np.ndarray
    s: np.ndarray | None
    codes: np.ndarray
    order: np.ndarray

    def inputs(self, cols: np.ndarray | None) -> _SplitInputs:
        """The :class:`_SplitInputs` of the models ``cols`` (None: all, no copy)."""
        pick = (lambda a: a) if cols is None else (lambda a: a[:, cols])
        splittable, n, total, half = pick(self.splittable), pick(self.n), pick(self.total), pick(self.half)
        use_hyper = self.use_hyper if cols is None else self.use_hyper[cols]
        hyper_cols, shuffle_cols = np.flatnonzero(use_hyper), np.flatnonzero(~use_hyper)
        table = None
        cells = splittable[:, hyper_cols]
        if hyper_cols.size and cells.any():
            y = np.round(total[:, hyper_cols]).astype(np.int64)
            table = _HypergeomTable(y[cells], (n[:, hyper_cols] - y)[cells], half[:, hyper_cols][cells])
        # Layout (K, M, splits): the domain sums are then one (D, K) @ (K, M * splits) product.
        with np.errstate(invalid="ignore", divide="ignore"):
            inv_a = np.where(splittable, 1.0 / np.where(splittable, half, 1), 0.0)[:, :, None]
            inv_b = np.where(splittable, 1.0 / np.where(splittable, n - half, 1), 0.0)[:, :, None]
        return _SplitInputs(grouping=self.grouping, splittable=splittable, total=total, inv_a=inv_a, inv_b=inv_b,
                            table=table, cells=cells, hyper_cols=hyper_cols, shuffle_cols=shuffle_cols,
                            s=None if self.s is None else pick(self.s), codes=self.codes, order=self.order)


def _draw(inputs: _SplitInputs, d: int, n_splits: int, rng) -> _SplitSums:
    """The split-half sums of ``n_splits`` splits of the models of ``inputs``."""
    k, mdl = inputs.total.shape
    sums = _SplitSums(d, mdl)
    chunk = max(1, min(n_splits, 2_000_000 // max(k * mdl, 1)))
    # The shuffle path runs one small product per subject and chunk: one BLAS thread (stats/_blas.py).
    with loop_blas_threads() if inputs.shuffle_cols.size else contextlib.nullcontext():
        _split_chunks(sums, inputs, n_splits, chunk, rng)
    return sums


def _sequential(columns: _Columns, d, n_sub, n_splits, round_size, mc_tol, rng):
    """Sequential stopping (``split_half(mc_tol=)``): rounds of ``round_size`` splits for the models not yet
    settled; returns the accumulated sums of every model and the splits drawn per model."""
    mdl = columns.n.shape[1]
    sums = _SplitSums(d, mdl)
    drawn = np.zeros(mdl, dtype=np.int64)
    active, inputs = np.arange(mdl), None
    while active.size:
        b = int(min(round_size, n_splits - drawn[active[0]]))
        if inputs is None:  # rebuilt only when models stopped (the same for every model still running)
            inputs = columns.inputs(None if active.size == mdl else active)
        part = _draw(inputs, d, b, rng)
        sums.s1[:, active] += part.s1
        sums.s2[:, active] += part.s2
        sums.cnt[:, active] += part.cnt
        drawn[active] += b
        if drawn[active[0]] >= n_splits:
            break
        _, sd, cnt = sums.result()
        settled = ((n_sub < MIN_SUBJECTS) | (cnt == 0)
                   | ((cnt >= MIN_VALID_FOR_SE) & (sd <= mc_tol * np.sqrt(np.maximum(cnt, 1)))))
        running = ~settled[:, active].all(axis=0)
        if not running.all():
            active, inputs = active[running], None
    return sums, drawn


@dataclass(frozen=True)
class _SplitInputs:
    """What every chunk of splits reads, fixed over the chunks (subjects in domain order).

    Attributes
    ----------
    grouping : Grouping
        Subjects to domains.
    splittable : ndarray of bool, shape (K, M)
        Cells with two or more answered items.
    total : ndarray, shape (K, M)
        Score sums per cell.
    inv_a, inv_b : ndarray, shape (K, M, 1)
        1 / size of half A and of half B (0 where not splittable).
    table : _HypergeomTable or None
        Draws of the half-A counts of the binary, splittable cells (``cells`` of ``hyper_cols``).
    cells : ndarray of bool, shape (K, len(hyper_cols))
    hyper_cols, shuffle_cols : ndarray of int
        Models drawn from the hypergeometric table, and models whose items are shuffled.
    s, codes, order : ndarray
        Item scores and subject codes (the shuffle path), and the subjects' domain order.
    """

    grouping: Grouping
    splittable: np.ndarray
    total: np.ndarray
    inv_a: np.ndarray
    inv_b: np.ndarray
    table: _HypergeomTable | None
    cells: np.ndarray
    hyper_cols: np.ndarray
    shuffle_cols: np.ndarray
    s: np.ndarray
    codes: np.ndarray
    order: np.ndarray

    @property
    def whole(self) -> bool:
        """Every (subject, model) cell binary and splittable: the table's draws are all the counts."""
        k, mdl = self.total.shape
        return self.table is not None and self.hyper_cols.size == mdl and self.table.n_cells == k * mdl


def _split_chunks(sums, inputs: _SplitInputs, n_splits, chunk, rng):
    """Accumulate the split-half sums over ``n_splits`` splits, ``chunk`` splits at a time."""
    if inputs.whole and not sums_by_reduceat(inputs.grouping.starts.size, inputs.total.shape[0]):
        return _split_whole_by_domain(sums, inputs, n_splits, chunk, rng)
    done = 0
    while done < n_splits:
        b = min(chunk, n_splits - done)
        a_sum = _half_a_sums(inputs, b, rng)
        pa = a_sum * inputs.inv_a
        pb = (inputs.total[:, :, None] - a_sum) * inputs.inv_b
        sums.add(inputs.grouping, inputs.splittable, pa, pb)
        done += b


def _half_a_sums(inputs: _SplitInputs, b, rng):
    """Half-A score sums of ``b`` splits, shape (K, M, b): hypergeometric draws for the binary
    models, shuffled items for the others, 0 where a cell is not splittable."""
    k, mdl = inputs.total.shape
    table, hyper_cols, shuffle_cols = inputs.table, inputs.hyper_cols, inputs.shuffle_cols
    if inputs.whole:
        return _split_whole(table, k, mdl, b, rng)
    a_sum = np.zeros((k, mdl, b))
    if table is not None:
        if hyper_cols.size == mdl:
            a_sum[inputs.cells] = table.draw(b, rng)  # every model binary: no intermediate copy
        else:
            sub = np.zeros((k, hyper_cols.size, b))
            sub[inputs.cells] = table.draw(b, rng)
            a_sum[:, hyper_cols] = sub
    if shuffle_cols.size:
        a_sum[:, shuffle_cols] = _shuffle_half_sums(inputs.s[:, shuffle_cols], inputs.codes, k, b, rng)[inputs.order]
    return a_sum


def _split_whole(table, k, mdl, b, rng):
    """The half-A counts of ``b`` splits when every (subject, model) cell is binary and splittable:
    the table's draws, in cell order, are the whole (K, M, b) array (no zero array and no masked
    copy of it)."""
    return table.draw(b, rng).reshape(k, mdl, b)


#: Cells x splits of one block of the whole path's draws (its temporaries stay within a core's cache).
_BLOCK_DRAWS = 1 << 17


def _split_whole_by_domain(sums, inputs: _SplitInputs, n_splits, chunk, rng):
    """:func:`_split_chunks` when every (subject, model) cell is binary and splittable, one domain (or a
    run of its subjects) at a time: the draws of a chunk come in cell order, subjects in domain order, so
    a domain's are a contiguous stretch of the chunk's stream, drawn, inverted and summed while they are
    in cache, with no (K, M, splits) array. Every number is the one of the chunk-wide computation: the
    same uniforms (a PCG64 generator's raw outputs give them exactly, see
    :meth:`_HypergeomTable._invert_raw`), the same five products, and each domain sum added subject
    after subject in the same order (np.sum over the leading axis, as :func:`segment_sums` does, then
    one row at a time past a run's first subjects).

    With PCG64, a draw is a support point of its cell's distribution (:meth:`_HypergeomTable.support`),
    and the five terms pa, pb, pa^2, pb^2 and pa pb of a point depend on it alone (pa = x / h_A and
    pb = (Y - x) / h_B with the distribution's Y and half sizes, computed with the operations the
    chunk-wide path applies to each cell), so they are tabulated once and gathered."""
    table, grouping = inputs.table, inputs.grouping
    k, mdl = inputs.total.shape
    d = sums.s1.shape[0]
    raw_bits = type(rng.bit_generator) is np.random.PCG64
    total, inv_a, inv_b = inputs.total[:, :, None], inputs.inv_a, inputs.inv_b
    if raw_bits:
        dist, x = table.support()
        good, bad, half = table.params[dist].T
        pa = x * (1.0 / half)  # as a * inv_a: inv_a = 1.0 / h_A, h_A = half
        pb = (good.astype(float) - x) * (1.0 / (good + bad - half))  # as (total - a) * inv_b
        terms5 = np.stack([pa, pb, pa * pa, pb * pb, pa * pb], axis=1)
    bounds = np.r_[grouping.starts, k]
    done = 0
    while done < n_splits:
        b = min(chunk, n_splits - done)
        acc = np.zeros((d, mdl, b, 5))  # sums of pa, pb, pa^2, pb^2, pa pb per domain
        rows = max(1, _BLOCK_DRAWS // max(mdl * b, 1))  # subjects per block
        for code, lo, hi in zip(grouping.codes, bounds[:-1], bounds[1:]):
            out = acc[code]
            for r0 in range(lo, hi, rows):
                r1 = min(hi, r0 + rows)
                cells = slice(r0 * mdl, r1 * mdl)
                if raw_bits:
                    points = table._invert_raw_points(rng.bit_generator.random_raw(((r1 - r0) * mdl, b)), cells)
                    terms = np.take(terms5, points.reshape(-1), axis=0).reshape(r1 - r0, mdl, b, 5)
                else:
                    a = table._invert(rng.random(((r1 - r0) * mdl, b)), scratch=True, cells=cells)
                    a = a.reshape(r1 - r0, mdl, b)
                    pa = a * inv_a[r0:r1]
                    pb = np.subtract(total[r0:r1], a, out=np.empty(a.shape))
                    pb *= inv_b[r0:r1]
                    terms = np.stack([pa, pb, pa * pa, pb * pb, pa * pb], axis=-1)
                if r0 == lo:
                    np.sum(terms, axis=0, out=out)
                else:
                    for row in terms:
                        out += row
        sums.add_domain_sums(grouping, inputs.splittable, *np.moveaxis(acc, -1, 0).copy())
        done += b


class _SplitSums:
    """Running sums of the per-split, per-domain Pearson correlations."""

    def __init__(self, d, mdl):
        self.s1 = np.zeros((d, mdl))
        self.s2 = np.zeros((d, mdl))
        self.cnt = np.zeros((d, mdl), dtype=np.int64)
        self.nd = None

    def add(self, grouping, valid, pa, pb):
        dsum = grouping.reduce_sorted
        self.add_domain_sums(grouping, valid, dsum(pa), dsum(pb), dsum(pa * pa), dsum(pb * pb), dsum(pa * pb))

    def add_domain_sums(self, grouping, valid, sa, sb, saa, sbb, sab):
        """:meth:`add` from the domain sums of pa, pb, pa^2, pb^2 and pa pb, each (D, M, splits)."""
        if self.nd is None:  # (D, M, 1) subjects per domain: the same for every chunk
            self.nd = grouping.reduce_sorted(valid).astype(float)[:, :, None]
        nd = self.nd
        with np.errstate(invalid="ignore", divide="ignore"):
            ndd = np.where(nd > 0, nd, 1.0)
            var_a = saa - sa * sa / ndd
            var_b = sbb - sb * sb / ndd
            cov = sab - sa * sb / ndd
            # Below ~1e-12 a "variance" of accuracies in [0, 1] is rounding error of an
            # exactly constant vector.
            ok = (var_a > 1e-12 * ndd) & (var_b > 1e-12 * ndd)
            r = np.where(ok, cov / np.sqrt(np.where(ok, var_a * var_b, 1.0)), 0.0)
        r = np.clip(r, -1.0, 1.0)
        self.s1 += r.sum(axis=-1)
        self.s2 += (r * r).sum(axis=-1)
        self.cnt += ok.sum(axis=-1)

    def result(self):
        c = np.maximum(self.cnt, 1)
        mean = self.s1 / c
        var = np.maximum(self.s2 / c - mean * mean, 0.0) * (c / np.maximum(c - 1, 1))
        return mean, np.sqrt(var), self.cnt


def _shuffle_half_sums(s, codes, k, b, rng):
    """Half-A score sums by explicitly shuffling each subject's answered items (any scores)."""
    n_items, mdl = s.shape
    out = np.zeros((k, mdl, b))
    obs = ~np.isnan(s)
    filled = np.where(obs, s, 0.0)
    order = np.argsort(codes, kind="stable")
    bounds = np.flatnonzero(np.r_[True, np.diff(codes[order]) != 0, True])
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        idx = order[lo:hi]
        kk = codes[idx[0]]
        o = obs[idx]
        full = o.all(axis=0)
        if full.any():
            # Models that answered every item of the subject share one random order per split.
            m = idx.size
            keys = rng.random((b, m))
            ranks = np.argsort(np.argsort(keys, axis=1), axis=1)
            in_a = (ranks < m // 2).astype(float)
            out[kk, full, :] = (in_a @ filled[idx][:, full]).T
        for j in np.flatnonzero(~full):
            rows = idx[o[:, j]]
            m = rows.size
            if m < 2:
                continue
            keys = rng.random((b, m))
            ranks = np.argsort(np.argsort(keys, axis=1), axis=1)
            out[kk, j, :] = (ranks < m // 2).astype(float) @ filled[rows, j]
    return out
