"""Integer bisection: the smallest size at which a monotone condition holds.

The planners (items for a half-width, replicates for a size bound, human labels for an assurance,
a calibration step for a level) each search an integer range for the first value that suffices;
this is that search, written once. Pure; no I/O.
"""

from __future__ import annotations

from typing import Callable

__all__ = ["smallest_passing"]


def smallest_passing(ok: Callable[[int], bool], lo: int, hi: int) -> int:
    """The smallest integer n in (lo, hi] with ``ok(n)``, for ``ok`` monotone in n.

    Parameters
    ----------
    ok : callable int -> bool
        False up to some n, True from it on (not checked).
    lo, hi : int
        Brackets, lo < hi: ``ok(lo)`` is False (or lo is below the range) and ``ok(hi)`` is True;
        neither end is evaluated here.

    Returns
    -------
    int
        The first n in (lo, hi] where ``ok`` holds: hi itself when none below it does. About
        log2(hi - lo) calls of ``ok``.
    """
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi
