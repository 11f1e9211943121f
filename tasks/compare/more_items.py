"""What an open question needs: "inconclusive; about N more items would resolve a g-point gap with 80% power".

Every inconclusive verdict (one benchmark, a suite's benchmark, the suite score) reports how many
more units of the same design would give the stated power to the test that decides it:

* for the gap observed (its size), and
* for the minimum detectable gap the comparison prints beside the verdict (the MDE at level alpha),
  when the deciding test runs at a smaller level than that MDE assumes (several candidates,
  Bonferroni; a suite, Holm's first step); at the same level it is 0 by definition.

Units are items (same subjects, items added in the present proportions) for the items question and
subjects for the new-subjects question. One rule computes every number:
:func:`benchcert.stats.comparisons.additional_sample_size`, the minimum detectable effect solved for
n (the rule of ``plan compare`` too). For the new-subjects question the rule is the normal test's on
the subjects' mean differences; the verdict's betting bound is valid without normality and needs more
subjects than that, so the number there is a lower bound and says so.
"""

from __future__ import annotations

import math

__all__ = ["more_needed", "more_items_line"]


def _finite(x) -> float | None:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def more_needed(se, n, gap, *, alpha: float, power: float, unit: str = "items", mde=None,
                mde_alpha: float | None = None) -> dict | None:
    """The "more units needed" document of one inconclusive verdict (None without an SE or a unit).

    Parameters
    ----------
    se : float
        The gap's standard error now (the normal test's; for subjects, of their mean differences).
    n : int
        Units behind it (shared items, or subjects).
    gap : float
        The observed gap.
    alpha : float, keyword-only
        The (two-sided) level of the test that decides the verdict.
    power : float, keyword-only
    unit : {"items", "subjects"}, keyword-only
    mde : float, optional, keyword-only
        The minimum detectable gap printed beside the verdict; its own number is added when given.
    mde_alpha : float, optional, keyword-only
        The level that MDE is stated at (the pair's own alpha). Where the deciding test runs at that level
        (``alpha >= mde_alpha``: one pair) the present units resolve the MDE by definition, so its number is 0;
        the normal rule is not asked, because the score tests' MDE on 0/1 and fractional scores can be below
        the normal rule's and would ask for a few more units than the definition does.
    """
    from benchcert.stats.comparisons import additional_sample_size

    se, gap = _finite(se), _finite(gap)
    if se is None or gap is None or n is None or int(n) < 1 or se <= 0:
        return None
    obs = additional_sample_size(se, int(n), gap, alpha=alpha, power=power)
    out = {"unit": unit, "power": power, "alpha": alpha, "n": int(n), "se": se, "method": obs.method,
           "observed_gap": abs(gap), "more_for_observed_gap": obs.more,
           "n_total_for_observed_gap": obs.n_total, "reason": obs.reason,
           "assumptions": list(obs.assumptions)}
    mde = _finite(mde)
    if mde is not None and mde > 0:
        if mde_alpha is not None and alpha >= mde_alpha:
            out.update(mde=mde, more_for_mde=0)
        else:
            out.update(mde=mde, more_for_mde=additional_sample_size(se, int(n), mde, alpha=alpha, power=power).more)
    if unit == "subjects":
        out["assumptions"].append("the normal test's number on the subjects' mean differences: the verdict's "
                                  "betting bound (valid without normality) needs more subjects, so read it as a "
                                  "lower bound")
    return out


def more_items_line(name: str, doc: dict | None) -> str | None:
    """The one line a person reads: "NAME: inconclusive; about N more items would resolve ..."."""
    if not doc:
        return None
    unit, pw = doc["unit"], f"{100 * doc['power']:g}%"
    if doc["more_for_observed_gap"] is None:
        head = f"{name}: inconclusive; {doc['reason']}"
    else:
        lower = "at least " if unit == "subjects" else "about "
        head = (f"{name}: inconclusive; {lower}{doc['more_for_observed_gap']:,} more {unit} (same design) would "
                f"resolve a {100 * doc['observed_gap']:.2f}-point gap (the one observed) with {pw} power")
    if doc.get("more_for_mde"):
        head += f", {doc['more_for_mde']:,} a {100 * doc['mde']:.2f}-point gap (the MDE shown)"
    return head + f" at level {doc['alpha']:.3g}"
