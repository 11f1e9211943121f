"""Input checks shared by the subsample validators."""

from __future__ import annotations

import numbers

import numpy as np

from .._common import unwrap_scalar


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


def _range(R) -> float:
    if isinstance(R, (bool, np.bool_)) or not isinstance(R, numbers.Real) or not np.isfinite(R) or R <= 0:
        raise ValueError(f"R must be a positive finite score range; got {R!r}")
    return float(R)


_out = unwrap_scalar  # 0-d results as Python scalars (stats/_common.py)
