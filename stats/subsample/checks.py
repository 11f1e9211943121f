"""Input checks shared by the subsample validators."""

from __future__ import annotations

import numbers

import numpy as np

from .._common import unwrap_scalar
from ..validation import as_float_array


def _int_scalar(value, name: str, *, low: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer >= {low}; got {value!r}")
    v = int(value)
    if v < low:
        raise ValueError(f"{name} must be an integer >= {low}; got {value!r}")
    return v


def _int_array(value, name: str) -> np.ndarray:
    arr = np.asarray(value)
    if arr.dtype == np.bool_ or not (np.issubdtype(arr.dtype, np.integer) or arr.size == 0):
        raise ValueError(f"{name} must be integer(s); got {value!r}")
    return arr.astype(np.int64)


def _n_array(n, N: int, name: str = "n") -> np.ndarray:
    arr = _int_array(n, name)
    if arr.size == 0:
        raise ValueError(f"{name} must hold at least one subset size; got {n!r}")
    if (arr < 1).any():
        raise ValueError(f"{name} must be >= 1 (a subset needs at least one item); got {int(arr[arr < 1].flat[0])}")
    if (arr > N).any():
        raise ValueError(f"{name} must be <= N = {N} (a subset cannot exceed the benchmark); "
                         f"got {int(arr[arr > N].flat[0])}")
    return arr


def _subset_size(n, N: int) -> int:
    """One subset size: an integer n with 1 <= n <= N."""
    n = _int_scalar(n, "n", low=1)
    if n > N:
        raise ValueError(f"n must be <= N = {N} (a subset cannot exceed the benchmark); got {n}")
    return n


def _n_of_N(n, N) -> tuple[int, int]:
    """(n, N): the benchmark size N >= 1 (checked first) and a subset size 1 <= n <= N."""
    N = _int_scalar(N, "N", low=1)
    return _subset_size(n, N), N


def _counts(values, name: str, *, high: int, high_name: str, what: str) -> np.ndarray:
    """A non-empty integer array of counts in [0, ``high_name`` = high] (``what``: one count, in words)."""
    arr = _int_array(values, name)
    if arr.size == 0:
        raise ValueError(f"{name} must hold at least one {what}; got an empty array")
    bad = (arr < 0) | (arr > high)
    if bad.any():
        raise ValueError(f"{name} must be {what}s in [0, {high_name} = {high}]; got {int(arr[bad].flat[0])}")
    return arr


def _half_widths(half_widths) -> np.ndarray:
    """The half-widths whose exceedance probabilities are asked: a 1-D array of finite values >= 0."""
    h = np.atleast_1d(as_float_array(half_widths, "half_widths", "numeric", shown="repr"))
    if h.ndim != 1 or not np.isfinite(h).all() or (h < 0).any():
        raise ValueError(f"half_widths must be a 1-D array of finite values >= 0; got {half_widths!r}")
    return h


def _range(R) -> float:
    if isinstance(R, (bool, np.bool_)) or not isinstance(R, numbers.Real) or not np.isfinite(R) or R <= 0:
        raise ValueError(f"R must be a positive finite score range; got {R!r}")
    return float(R)


_out = unwrap_scalar  # 0-d results as Python scalars (stats/_common.py)
