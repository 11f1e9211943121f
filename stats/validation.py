"""Input checks of ``benchcert.stats``' public functions: a number in the unit interval, a score
array, integer group codes. Each raises ValueError naming the parameter and the value given,
as scipy's functions do.

Pure numpy; nothing performs I/O.
"""

from __future__ import annotations

import numbers

import numpy as np

from ._common import _short

__all__ = [
    "all_missing_columns",
    "as_float_array",
    "check_alpha",
    "check_codes",
    "check_positive_int",
    "check_power",
    "check_scores",
    "check_unit_interval",
]

#: ``closed`` of :func:`check_unit_interval` -> (lower end included, upper end included).
_ENDS = {"neither": (False, False), "left": (True, False), "right": (False, True), "both": (True, True)}


def check_unit_interval(name: str, value, *, closed: bool | str = False) -> float:
    """Return ``value`` as a float after checking it is a real number in the unit interval.

    The one check of every level, power, share or tolerance between 0 and 1, so that the
    message is the same wherever such a value is refused.

    Parameters
    ----------
    name : str
        The parameter's name as the caller knows it (``"alpha"``, ``"--epsilon"``); it starts
        the message.
    value : real number
        The value to check; Python and numpy reals are accepted, bools (almost certainly a
        mistake), strings, None and NaN are not.
    closed : bool or {"neither", "left", "right", "both"}, default False
        Which ends belong to the interval: False or ``"neither"`` for (0, 1), True or
        ``"both"`` for [0, 1], ``"left"`` for [0, 1), ``"right"`` for (0, 1].

    Returns
    -------
    float

    Raises
    ------
    ValueError
        ``"<name> must be in (0, 1); got <value>"`` (the interval as ``closed`` says), for a
        value outside it or one that is not a real number.

    Examples
    --------
    >>> check_unit_interval("alpha", 0.05)
    0.05
    >>> check_unit_interval("first_look_share", 0, closed="left")
    0.0
    >>> check_unit_interval("power", 1.0)
    Traceback (most recent call last):
    ...
    ValueError: power must be in (0, 1); got 1.0
    """
    key = {False: "neither", True: "both"}.get(closed, closed) if isinstance(closed, bool) else closed
    if key not in _ENDS:
        raise ValueError(f"closed must be True, False or one of {sorted(_ENDS)}; got {closed!r}")
    low_in, high_in = _ENDS[key]
    interval = ("[" if low_in else "(") + "0, 1" + ("]" if high_in else ")")
    # numpy scalars are shown as the Python number they hold ("1.5", not "np.float64(1.5)").
    shown = repr(value.item() if isinstance(value, np.generic) else value)
    real = not isinstance(value, (bool, np.bool_)) and isinstance(value, numbers.Real)
    v = float(value) if real else np.nan
    if not ((0.0 <= v if low_in else 0.0 < v) and (v <= 1.0 if high_in else v < 1.0)):
        raise ValueError(f"{name} must be in {interval}; got {shown}")
    return v


def check_alpha(alpha) -> float:
    """``alpha`` (a miscoverage level or test size) as a float in (0, 1).

    Raises
    ------
    ValueError
        If ``alpha`` is not a real number (bools are rejected too: ``True`` is
        almost certainly a mistake) or lies outside (0, 1); see :func:`check_unit_interval`.
    """
    return check_unit_interval("alpha", alpha)


def check_positive_int(value, name: str) -> int:
    """``value`` as an int >= 1; ValueError naming ``name`` otherwise (numpy integers accepted, bools not)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer; got {value!r}")
    return int(value)


def check_power(power) -> float:
    """A power in (0, 1) as a float; ValueError naming ``power`` otherwise (numpy reals accepted)."""
    return check_unit_interval("power", power)


def as_float_array(x, name: str, what: str = "a numeric array", *, shown: str = "type") -> np.ndarray:
    """``x`` as a float ndarray (no copy when it is one); ValueError "``name`` must be ``what``; got
    ..." when it is not numeric.

    ``shown`` is how the message shows what was given: ``"type"``, its type's name (a value may be a
    large array), or ``"repr"``, the value itself.
    """
    try:
        return np.asarray(x, dtype=float)
    except (TypeError, ValueError) as exc:
        got = type(x).__name__ if shown == "type" else repr(x)
        raise ValueError(f"{name} must be {what}; got {got}") from exc


def check_scores(scores, name: str, *, ndim: int, allow_nan: bool) -> np.ndarray:
    """Validate a score array and return it as float64.

    Scores must lie in [0, 1]; NaN marks a missing response when ``allow_nan``.
    Infinities are always rejected, as are non-numeric dtypes.
    """
    arr = as_float_array(scores, name)
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
