"""Shared pieces of ``benchcert.stats``: the degenerate-data warning and the indices a warning
carries as fields (:class:`Ref`), input checks, grouping.

Everything here is pure numpy; nothing performs I/O.
"""

from __future__ import annotations

import numbers
import warnings
from dataclasses import dataclass

import numpy as np

__all__ = [
    "DegenerateDataWarning",
    "IndexedWarning",
    "Ref",
    "check_alpha",
    "cr2_mean",
    "warn_degenerate",
    "warn_indexed",
]


#: How each kind of :class:`Ref` reads in a message ("model column(s) [3, 7]").
REF_LABELS = {
    "model": "model column(s)",
    "subject": "subject(s)",
    "domain": "domain(s)",
    "model pair": "model column pair(s)",
    "comparison": "comparison(s)",
    "fit row": "fit rows",
    "domain model": "(domain, model)",
    "entry": "entries",
    "entries": "entries",
}


@dataclass(frozen=True)
class Ref:
    """Indices a warning refers to, kept as data so a caller that knows names can use them.

    The stats layer knows model columns and subject/domain codes, not names. A warning
    carries its indices as ``Ref`` fields (see :class:`IndexedWarning`); the tasks layer
    maps them to names instead of parsing the text.

    Parameters
    ----------
    kind : str
        One of :data:`REF_LABELS`: ``"model"`` (score-matrix columns), ``"subject"``,
        ``"domain"`` (codes), ``"model pair"`` ((model, versus) column pairs),
        ``"comparison"`` (positions in a family of comparisons), ``"fit row"``,
        ``"domain model"`` ((domain, model) pairs), ``"entry"`` (array entries: "entry [3]",
        "entries [3, 4]") or ``"entries"`` (the same, always "entries").
    indices : tuple
        Every index (ints, or tuples of ints for the pair kinds), in the order listed.
    """

    kind: str
    indices: tuple

    def __post_init__(self):
        if self.kind not in REF_LABELS:
            raise ValueError(f"Ref kind must be one of {sorted(REF_LABELS)}; got {self.kind!r}")
        object.__setattr__(self, "indices", tuple(_plain(v) for v in self.indices))

    @property
    def label(self) -> str:
        """The words before the list ("model column(s)"; "entry" or "entries" by count)."""
        if self.kind == "entry":
            return "entry" if len(self.indices) == 1 else "entries"
        return REF_LABELS[self.kind]

    def __str__(self) -> str:
        return f"{self.label} {_short(self.indices)}"


def _plain(v):
    """numpy integers (and tuples of them) as Python ints, so a Ref prints and compares plainly."""
    if isinstance(v, (tuple, list, np.ndarray)):
        return tuple(int(x) for x in v)
    return int(v) if isinstance(v, (np.integer, int)) else v


class IndexedWarning(Warning):
    """A warning whose text is ``template.format(*refs)``, with the :class:`Ref` fields kept.

    ``str(warning)`` is the full text; ``.template`` and ``.refs`` let a caller that knows
    the names of the columns and codes retell it (tasks/audit/analyses.py ``_named``).
    Built from a plain message (``Category("text")``, as ``warnings.warn(text, Category)``
    does), the template is that message and there are no refs.
    """

    def __init__(self, template: str = "", *refs: Ref):
        self.template = template
        self.refs = tuple(refs)
        super().__init__(template.format(*refs) if refs else template)

    def retold(self, prefix: str = "", refs: tuple[Ref, ...] | None = None) -> IndexedWarning:
        """The same warning (same category) with ``prefix`` before its text and, if given, other
        refs (as many as the template's); for a caller that passes a warning on with context.

        >>> str(DegenerateDataWarning("f: {}", Ref("model", [1])).retold("pooled score: "))
        'pooled score: f: model column(s) [1]'
        """
        refs = self.refs if refs is None else tuple(refs)
        escaped = prefix.replace("{", "{{").replace("}", "}}")
        template = self.template if self.refs else self.template.replace("{", "{{").replace("}", "}}")
        return type(self)(escaped + template, *refs) if refs else type(self)(prefix + str(self))

    def __reduce__(self):
        # Pickled (to a worker process and back) with its fields, not only its text.
        return (_rebuild_indexed, (type(self), self.template, self.refs))


def _rebuild_indexed(cls, template, refs):
    return cls(template, *refs)


class DegenerateDataWarning(IndexedWarning, RuntimeWarning):
    """The data do not support the requested quantity in the usual way.

    Raised (as a warning) when a result falls back to a documented default - a
    zero-width interval, a NaN summary of an empty group, a worst-case bound -
    so that no such value is ever returned silently.
    """


def unwrap_scalar(x):
    """0-d results as plain Python scalars (``x.item()``), arrays as they are: what a function
    given scalars returns."""
    x = np.asarray(x)
    return x.item() if x.ndim == 0 else x


def warn_indexed(category: type[IndexedWarning], template: str, *refs: Ref, stacklevel: int = 2) -> None:
    """Emit ``category(template, *refs)``; ``stacklevel`` counts from this function's caller,
    as for :func:`warnings.warn` called there.

    ``template`` holds one ``{}`` per ref: ``"f: {} answered no subject"`` with
    ``Ref("model", [3])`` reads "f: model column(s) [3] answered no subject".
    """
    warnings.warn(category(template, *refs), stacklevel=stacklevel + 1)


def warn_degenerate(template: str, *refs: Ref, stacklevel: int = 3) -> None:
    """Emit a :class:`DegenerateDataWarning` attributed to the public caller.

    ``template`` holds one ``{}`` per :class:`Ref` in ``refs``; without refs it is the
    message as it is (braces and all).
    """
    warn_indexed(DegenerateDataWarning, template, *refs, stacklevel=stacklevel)


def check_power(power) -> float:
    """A power in (0, 1) as a float; ValueError naming ``power`` otherwise (numpy reals accepted)."""
    if isinstance(power, (bool, np.bool_)) or not isinstance(power, numbers.Real) or not 0 < power < 1:
        raise ValueError(f"power must be in (0, 1); got {power!r}")
    return float(power)


def check_alpha(alpha) -> float:
    """Return ``alpha`` as a float after checking it lies in the open interval (0, 1).

    Raises
    ------
    ValueError
        If ``alpha`` is not a real number (bools are rejected too: ``True`` is
        almost certainly a mistake) or lies outside (0, 1).
    """
    if isinstance(alpha, (bool, np.bool_)) or not isinstance(alpha, numbers.Real):
        raise ValueError(f"alpha must be a real number in (0, 1); got {alpha!r}")
    a = float(alpha)
    if not (0.0 < a < 1.0):
        raise ValueError(f"alpha must be in (0, 1); got {alpha!r}")
    return a


def _short(values, limit: int = 8) -> str:
    """Render the first few entries of an index list for an error or warning message."""
    values = [int(v) if isinstance(v, (np.integer, int)) else v for v in values]
    if len(values) <= limit:
        return str(values)
    return str(values[:limit])[:-1] + f", ... ({len(values)} in all)]"


def check_scores(scores, name: str, *, ndim: int, allow_nan: bool) -> np.ndarray:
    """Validate a score array and return it as float64.

    Scores must lie in [0, 1]; NaN marks a missing response when ``allow_nan``.
    Infinities are always rejected, as are non-numeric dtypes.
    """
    try:
        arr = np.asarray(scores, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a numeric array; got {type(scores).__name__}") from exc
    if arr.ndim != ndim:
        shape = "(n_items,)" if ndim == 1 else "(n_items, n_models)"
        raise ValueError(f"{name} must be {ndim}-D with shape {shape}; got shape {arr.shape}")
    if arr.shape[0] == 0:
        raise ValueError(f"{name} must contain at least one item; got shape {arr.shape}")
    if ndim == 2 and arr.shape[1] == 0:
        raise ValueError(f"{name} must contain at least one model column; got shape {arr.shape}")
    # fmin/fmax reductions skip NaN, so two passes with no full-size temporaries
    # settle the common valid case; the slower diagnosis runs only on bad input.
    lo = np.fmin.reduce(arr, axis=None)
    hi = np.fmax.reduce(arr, axis=None)
    if lo < 0.0 or hi > 1.0:
        bad = ~np.isnan(arr) & ~((arr >= 0.0) & (arr <= 1.0))
        first = float(arr[bad].flat[0])
        if not np.isfinite(first):
            raise ValueError(f"{name} must be finite{' or NaN' if allow_nan else ''}; got {first!r}")
        raise ValueError(f"{name} must lie in [0, 1]; got {first!r}")
    if not allow_nan and (np.isnan(lo) or np.isnan(arr).any()):
        rows = np.flatnonzero(np.isnan(arr).reshape(arr.shape[0], -1).any(axis=1))
        raise ValueError(
            f"{name} must not contain NaN (missing responses); got NaN at item(s) {_short(rows)}"
        )
    return arr


def all_missing_columns(arr: np.ndarray) -> np.ndarray:
    """Indices of the columns of a 2-D score array that are entirely NaN."""
    # fmax skips NaN, so a column's reduction is NaN only when every entry is NaN.
    return np.flatnonzero(np.isnan(np.fmax.reduce(arr, axis=0)))


def check_codes(codes, name: str, *, length: int | None = None) -> np.ndarray:
    """Validate non-negative integer group codes and return them as int64.

    Integer-valued floats are refused on purpose: they usually mean a join went
    wrong upstream (NaN-filled codes), which should surface rather than be cast away.
    """
    arr = np.asarray(codes)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array of integer codes; got shape {arr.shape}")
    if arr.size and not (np.issubdtype(arr.dtype, np.integer) or arr.dtype == np.bool_):
        raise ValueError(f"{name} must hold integer codes; got dtype {arr.dtype}")
    if length is not None and arr.shape[0] != length:
        raise ValueError(
            f"{name} must have one code per item (length {length}); got length {arr.shape[0]}"
        )
    arr = arr.astype(np.int64, copy=False)
    if arr.size and arr.min() < 0:
        raise ValueError(f"{name} must be non-negative integer codes; got {int(arr.min())}")
    return arr


def sums_by_reduceat(n_segments: int, n_rows: int) -> bool:
    """Whether :func:`segment_sums` sums ``n_segments`` blocks of ``n_rows`` rows (2-D or more)
    with ``np.add.reduceat`` rather than a sum per block. Callers that must reproduce its float
    sums bit for bit (the two add a block's rows in different orders) ask this one rule."""
    return n_segments > max(64, n_rows // 8)


def segment_sums(values: np.ndarray, starts: np.ndarray, dtype=None) -> np.ndarray:
    """Sums of the row blocks ``values[starts[i]:starts[i + 1]]`` (the last block to the end).

    What ``np.add.reduceat(values, starts, axis=0, dtype=dtype)`` computes for strictly
    increasing ``starts`` beginning at 0: exactly for integers, booleans and 0/1 scores,
    and to rounding (the two add a block's rows in different orders) for other floats.
    For 2-D and larger arrays with blocks of several rows, reduceat along axis 0
    runs ~20x slower than a sum per block (0.25 s against 0.01 s for 200 blocks of a
    20,000 x 800 matrix), which made it the main cost of every per-subject table at
    leaderboard size; there it loops over blocks instead.
    """
    values = np.asarray(values)
    starts = np.asarray(starts)
    if values.ndim < 2 or starts.size == 0 or sums_by_reduceat(starts.size, values.shape[0]):
        return np.add.reduceat(values, starts, axis=0, dtype=dtype)
    out = np.empty((starts.size,) + values.shape[1:], dtype=dtype if dtype is not None else values.dtype)
    bounds = np.r_[starts, values.shape[0]]
    for i in range(starts.size):
        np.sum(values[bounds[i]:bounds[i + 1]], axis=0, dtype=out.dtype, out=out[i])
    return out


class Grouping:
    """Row grouping by integer codes, built once and reused for many column sums.

    Sorting once and summing contiguous blocks with ``np.add.reduceat`` keeps a
    (n_items, n_models) group sum a single vectorised pass, with no Python loop
    over items or models and no dense (n_groups, n_items) indicator matrix.

    With ``n_groups`` given, output row g is code g (codes without items give
    zero rows). Without it the groups are the distinct codes present, in
    increasing order (``self.codes``), so sparse or huge codes cost nothing.
    """

    def __init__(self, codes: np.ndarray, n_groups: int | None = None):
        codes = np.asarray(codes)
        self.order = np.argsort(codes, kind="stable")
        sorted_codes = codes[self.order]
        if sorted_codes.size:
            self.starts = np.flatnonzero(np.r_[True, sorted_codes[1:] != sorted_codes[:-1]])
        else:
            self.starts = np.zeros(0, dtype=np.intp)
        self.codes = sorted_codes[self.starts]
        self.sizes = np.diff(np.r_[self.starts, sorted_codes.size])
        self.compact = n_groups is None
        self.n_groups = self.codes.size if n_groups is None else int(n_groups)

    def gather(self, values: np.ndarray) -> np.ndarray:
        """Rows of ``values`` in group order (np.take is ~3x faster than fancy indexing here)."""
        return np.take(np.asarray(values), self.order, axis=0)

    def reduce_sorted(self, values: np.ndarray) -> np.ndarray:
        """Group sums of rows already in group order (see :meth:`gather`).

        Booleans and integers are summed as int64 (np.add on booleans alone would
        be a logical OR); floats as float64.
        """
        values = np.asarray(values)
        integral = values.dtype == np.bool_ or np.issubdtype(values.dtype, np.integer)
        dtype = np.int64 if integral else np.result_type(values.dtype, np.float64)
        if self.compact:
            return segment_sums(values, self.starts, dtype)
        out = np.zeros((self.n_groups,) + values.shape[1:], dtype=dtype)
        if self.starts.size:
            out[self.codes] = segment_sums(values, self.starts, dtype)
        return out

    def expand_sorted(self, group_values: np.ndarray) -> np.ndarray:
        """Broadcast per-group rows back onto the sorted item rows (inverse of a group sum)."""
        group_values = np.asarray(group_values)
        if not self.compact:
            group_values = group_values[self.codes]
        return np.repeat(group_values, self.sizes, axis=0)

    def sum(self, values: np.ndarray) -> np.ndarray:
        """Sum ``values`` (n_items,) or (n_items, M) within groups -> (n_groups,) or (n_groups, M)."""
        return self.reduce_sorted(self.gather(values))


def cr2_mean(n_c, r_c, rho=0.0):
    r"""CR2 cluster-robust variance of a mean over clustered items and its Bell-McCaffrey df.

    Parameters
    ----------
    n_c : ndarray, shape (C, P)
        Items per cluster (0 = cluster absent for that column).
    r_c : ndarray, shape (C, P)
        Per-cluster residual sums :math:`r_c = \sum_{i \in c}(D_i - \bar D)`.
    rho : float or ndarray of shape (P,)
        Working intraclass correlation for the degrees of freedom (0 = independent items).

    Returns
    -------
    (var, df) : ndarrays of shape (P,)

    Notes
    -----
    For the intercept-only regression :math:`D_i = \mu + e_i` the hat-matrix block of cluster
    c is :math:`H_{cc} = J_{n_c}/N`, so the CR2 adjustment :math:`A_c = (I - H_{cc})^{-1/2}`
    maps the residual sum to :math:`r_c/\sqrt{1 - f_c}`, :math:`f_c = n_c/N`, and (Bell and
    McCaffrey 2002; Pustejovsky and Tipton 2018, Eq. 6)

    .. math:: V_{CR2} = \frac{1}{N^2}\sum_c \frac{r_c^2}{1 - f_c}.

    Bell-McCaffrey degrees of freedom: :math:`(\sum_j\lambda_j)^2/\sum_j\lambda_j^2`, with
    :math:`\lambda` the eigenvalues of :math:`G^\top\Omega G`, G's column c being
    :math:`w_c(1_c - f)`, :math:`w_c = (1 - f_c)^{-1/2}/N`, and :math:`\Omega` the working
    covariance: exchangeable within clusters with correlation rho (Imbens and Kolesar 2016,
    sec. 5, who estimate rho from the data). With :math:`q_c = (1-\rho)n_c + \rho n_c^2`,
    :math:`Q = \sum q_c`, :math:`a = Wq`, :math:`b = Wf`, the trace and the Frobenius norm
    give the two sums without an eigendecomposition:
    :math:`\sum\lambda = \sum_c w_c^2(q_c - 2f_cq_c + f_c^2Q)` and
    :math:`\sum\lambda^2 = \sum_c w_c^4q_c^2 + 2\sum_c w_c^4q_c(Qf_c^2 - 2q_cf_c)
    + 2(a\cdot b)^2 + 2|a|^2|b|^2 - 4Q(a\cdot b)|b|^2 + Q^2|b|^4`.
    With equal cluster sizes the df are C - 1; with unequal sizes fewer. The comparisons use
    rho = 0 (the usual working model): on MMLU-Pro's subject sizes (17-1,003 items) the size at
    alpha = 5% is 4.8-5.6% for between-subject SDs of the gap of 0-0.13 (CR1 with C - 1 df:
    6.3%); with rho estimated from the data (Imbens and Kolesar's choice) it was 3.6-3.8%,
    conservative enough to cost power (tests/stats/test_stats_comparisons.py). The comparator
    intervals (stats/intervals.py) use the same correction for a model's pooled score.
    """
    n_c = np.asarray(n_c, dtype=float)
    big_n = n_c.sum(axis=0)
    present = n_c > 0
    f = np.where(present, n_c / big_n, 0.0)
    keep = np.where(present & (f < 1), 1.0 - f, 1.0)
    use = present & (f < 1)
    rho = np.asarray(rho, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        var = np.sum(np.where(use, r_c * r_c / keep, 0.0), axis=0) / (big_n * big_n)
        w2 = np.where(use, 1.0 / (keep * big_n * big_n), 0.0)
        q = (1.0 - rho) * n_c + rho * n_c * n_c
        big_q = np.sum(np.where(present, q, 0.0), axis=0)
        s1 = np.sum(w2 * (q - 2.0 * f * q + f * f * big_q), axis=0)
        ab = np.sum(w2 * q * f, axis=0)
        aa = np.sum(w2 * q * q, axis=0)
        bb = np.sum(w2 * f * f, axis=0)
        s2 = (np.sum(w2 * w2 * q * q, axis=0) + 2.0 * np.sum(w2 * w2 * q * (big_q * f * f - 2.0 * q * f), axis=0)
              + 2.0 * ab * ab + 2.0 * aa * bb - 4.0 * big_q * ab * bb + big_q * big_q * bb * bb)
        df = s1 * s1 / s2
    c = present.sum(axis=0)
    df = np.where(np.isfinite(df) & (df > 0), np.minimum(df, np.maximum(c - 1.0, 1.0)), 1.0)
    return var, df
