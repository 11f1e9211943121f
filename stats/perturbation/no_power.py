"""The words shown wherever an item, or a whole tested variant, has no power.

One sentence for every test of the package (the widened-range and the calibrated test say it
alike), kept apart from both so that neither imports the other for it.
"""

from __future__ import annotations

__all__ = ["no_power_sentence"]


def no_power_sentence(r_min: int, r_max: int, alpha: float, m_min: int | None = None,
                      m_max: int | None = None) -> str:
    """The words shown wherever an item (or a whole variant) has no power.

    With one replicate nothing else matters; otherwise the number of null variants is named too
    (few null variants need a wide margin).
    """
    if r_min == r_max:
        reps = f"r = {r_min} replicate{'s' if r_min != 1 else ''} per variant"
    else:
        reps = f"r = {r_min} to {r_max} replicates per variant"
    if r_max > 1 and m_min is not None:
        m_max = m_min if m_max is None else m_max
        reps = (f"m = {m_min} null variant{'s' if m_min != 1 else ''}" if m_min == m_max else
                f"m = {m_min} to {m_max} null variants") + f" and {reps}"
    return (f"with {reps} no test can reject at alpha = {alpha:g}: this says nothing about whether the prompt "
            "matters")
