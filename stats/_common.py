"""Shared pieces of ``benchcert.stats``: the degenerate-data warning, input checks, grouping.

Everything here is pure numpy; nothing performs I/O.
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np

__all__ = [
    "DegenerateDataWarning",
    "check_alpha",
    "warn_degenerate",
]


class DegenerateDataWarning(RuntimeWarning):
    """The data do not support the requested quantity in the usual way.

    Raised (as a warning) when a result falls back to a documented default - a
    zero-width interval, a NaN summary of an empty group, a worst-case bound -
    so that no such value is ever returned silently.
    """


def warn_degenerate(message: str, stacklevel: int = 3) -> None:
    """Emit a :class:`DegenerateDataWarning` attributed to the public caller."""
    warnings.warn(message, DegenerateDataWarning, stacklevel=stacklevel)


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
    nan = np.isnan(arr)
    if nan.any() and not allow_nan:
        bad = np.flatnonzero(nan.reshape(arr.shape[0], -1).any(axis=1))
        raise ValueError(
            f"{name} must not contain NaN (missing responses); got NaN at item(s) {_short(bad)}"
        )
    finite = arr[~nan]
    if finite.size and not np.all(np.isfinite(finite)):
        raise ValueError(f"{name} must be finite or NaN; got {finite[~np.isfinite(finite)][0]!r}")
    out_of_range = (finite < 0.0) | (finite > 1.0)
    if out_of_range.any():
        raise ValueError(f"{name} must lie in [0, 1]; got {finite[out_of_range][0]!r}")
    return arr


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


class Grouping:
    """Row grouping by integer codes, built once and reused for many column sums.

    Sorting once and summing contiguous blocks with ``np.add.reduceat`` keeps a
    (n_items, n_models) group sum a single vectorised pass, with no Python loop
    over items or models and no dense (n_groups, n_items) indicator matrix.
    """

    def __init__(self, codes: np.ndarray, n_groups: int):
        self.n_groups = int(n_groups)
        self.order = np.argsort(codes, kind="stable")
        sorted_codes = codes[self.order]
        if sorted_codes.size:
            self.starts = np.flatnonzero(np.r_[True, sorted_codes[1:] != sorted_codes[:-1]])
        else:
            self.starts = np.zeros(0, dtype=np.intp)
        self.present = sorted_codes[self.starts]

    def sum(self, values: np.ndarray) -> np.ndarray:
        """Sum ``values`` (n_items,) or (n_items, M) within groups -> (n_groups,) or (n_groups, M)."""
        values = np.asarray(values)
        if values.dtype == np.bool_:
            # np.add on booleans is a logical OR, not a count.
            values = values.astype(np.int64)
        out = np.zeros((self.n_groups,) + values.shape[1:], dtype=np.result_type(values, float))
        if self.starts.size:
            out[self.present] = np.add.reduceat(values[self.order], self.starts, axis=0)
        return out
