"""Input checks, the assumptions' wording and numerical constants shared by the perturbation modules."""

from __future__ import annotations

import math
import numbers

import numpy as np

from .._common import unwrap_scalar
from ..validation import check_unit_interval

EPS_MAX_RULES = ("auto", "algorithm_c", "width")
METHODS = ("union", "exact")

_ASSUMPTION_1 = "Assumption 1: the null variants' probabilities (p_1..p_m) are independent of p'"
_ASSUMPTION_2 = ("Assumption 2: null variants are drawn at random from the null set, their probabilities "
                 "i.i.d. Unif[a, b]")
_ASSUMPTION_3 = "Assumption 3 (power only): a test variant's p' ~ Unif(0, 1), hence Unif(P_1) given H_A"
_REPLICATES = "replicates of one variant are i.i.d. Bernoulli(p) (binary scores, independent runs)"
_PLUG_IN = ("(a, b) replaced by the plug-in range estimate (Algorithm B): validity is approximate, as "
            "in the paper (Corollary 2)")

# Mass of a Binomial(r, p) more than 12 sqrt(r) counts (>= 24 SD) from its mean is below 1e-120:
# windows of that half-width lose nothing at double precision.
_WINDOW_SD = 12.0
# Up to this many attainable thresholds are enumerated; beyond, thresholds are bisected as reals.
_MAX_CANDIDATES = 4_000_000
_MAX_EXACT_R = 20_000_000


def _real(x, name: str, *, lo=None, hi=None, lo_open=False, hi_open=False) -> float:
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Real):
        raise ValueError(f"{name} must be a real number; got {x!r}")
    v = float(x)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite; got {x!r}")
    if lo is not None and (v < lo or (lo_open and v == lo)):
        raise ValueError(f"{name} must be {'>' if lo_open else '>='} {lo}; got {x!r}")
    if hi is not None and (v > hi or (hi_open and v == hi)):
        raise ValueError(f"{name} must be {'<' if hi_open else '<='} {hi}; got {x!r}")
    return v


def _int(x, name: str, *, lo: int = 0) -> int:
    if isinstance(x, (bool, np.bool_)):
        raise ValueError(f"{name} must be an integer >= {lo}; got {x!r}")
    if isinstance(x, numbers.Integral):
        v = int(x)
    elif isinstance(x, numbers.Real) and float(x).is_integer():
        v = int(x)
    else:
        raise ValueError(f"{name} must be an integer >= {lo}; got {x!r}")
    if v < lo:
        raise ValueError(f"{name} must be an integer >= {lo}; got {x!r}")
    return v


def _int_array(x, name: str, *, lo: int) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype == np.bool_ or not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise ValueError(f"{name} must hold integers; got dtype {arr.dtype}")
    if np.issubdtype(arr.dtype, np.floating):
        if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
            bad = arr[~(np.isfinite(arr) & (arr == np.round(arr)))].flat[0]
            raise ValueError(f"{name} must hold integers; got {bad!r}")
    arr = arr.astype(np.int64)
    if arr.size and arr.min() < lo:
        raise ValueError(f"{name} must be >= {lo}; got {int(arr.min())}")
    return arr


def _null_variants(arr: np.ndarray, name: str, unit: str, null_replicates) -> np.ndarray:
    """The replicates of the null variants whose ``name`` (a count or sum each) is ``arr``: check ``arr``
    is one ``unit`` per null variant, and take ``null_replicates`` as a scalar for all or one each (>= 1)."""
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array (one {unit} per null variant); got shape {arr.shape}")
    r = _int_array(null_replicates, "null_replicates", lo=1)
    if r.ndim == 0:
        r = np.full(arr.shape, int(r))
    if r.shape != arr.shape:
        raise ValueError(f"null_replicates must be a scalar or match {name}' shape {arr.shape}; got {r.shape}")
    return r


def _range_iv(a, b, names=("a", "b")):
    a = check_unit_interval(names[0], a, closed=True)
    b = check_unit_interval(names[1], b, closed=True)
    if b < a:
        raise ValueError(f"{names[1]} must be >= {names[0]}; got {names[0]}={a!r}, {names[1]}={b!r}")
    return a, b


def _choice(x, name: str, options) -> str:
    if x not in options:
        raise ValueError(f"{name} must be one of {', '.join(options)}; got {x!r}")
    return x


_out = unwrap_scalar  # 0-d results as Python scalars (stats/_common.py)
