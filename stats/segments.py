"""Sums over blocks of rows: :func:`segment_sums`, and :class:`Grouping` (rows grouped by integer
codes, sorted once, summed block by block).

Pure numpy; nothing performs I/O.
"""

from __future__ import annotations

import numpy as np

__all__ = ["Grouping", "segment_sums", "sums_by_reduceat"]


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
