"""The one finite-number helper: a recorded or computed value as a float, or None when it is none.

Artifacts (summary.json, a look's record) carry numbers as JSON numbers or null, and the
computations hand numpy scalars; every page, record and verdict row reads a missing, boolean,
infinite or NaN value the same way: as absent (None), never as a number to print or compare.
"""

from __future__ import annotations

import math
import numbers

__all__ = ["finite_or_none"]


def finite_or_none(value) -> float | None:
    """``value`` as a float when it is a finite real number (Python or numpy, not a boolean), else None."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None
