"""The verdict rule: what an interval of a gap (candidate - baseline) says, written once.

Every verdict of stats/ (paired comparisons, the subject-weighted gap) and, through them, of
tasks/ (compare, the gates, the audit's comparisons) is read off an interval by this rule, so that
no verdict can contradict the interval printed beside it.
"""

from __future__ import annotations

import numpy as np

#: The verdict words.
IMPROVED, REGRESSED, INCONCLUSIVE = "improved", "regressed", "inconclusive"


def interval_verdict(lower, upper) -> np.ndarray:
    """The verdict an interval of the gap (candidate - baseline) gives.

    Parameters
    ----------
    lower, upper : array_like
        The interval's ends (NaN: no interval).

    Returns
    -------
    ndarray of object
        ``"improved"`` where ``lower > 0``, ``"regressed"`` where ``upper < 0``, else
        ``"inconclusive"`` (an interval that covers 0, or none).
    """
    lower = np.asarray(lower)
    upper = np.asarray(upper)
    return np.where(lower > 0, IMPROVED, np.where(upper < 0, REGRESSED, INCONCLUSIVE)).astype(object)
