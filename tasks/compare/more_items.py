"""What an open question needs: "inconclusive; about N more items would resolve a g-point gap with 80% power".

Every inconclusive verdict (one benchmark, a suite's benchmark, the suite score) reports how many
more units of the same design would give the stated power to the test that decides it:

* for the gap observed (its size), and
* for the minimum detectable gap the comparison prints beside the verdict (the MDE at ``mde_alpha``),
  when the deciding test runs at a smaller level than that MDE is stated at; at the same level it is 0
  by definition.

Units are items (same subjects, items added in the present proportions) for the items question and
subjects for the new-subjects question. Where the items question's verdict is a score test's (0/1
scores: the pooled score test; fractional scores: the bounded score test), the number is that test's
MDE solved for the items (:mod:`benchcert.stats.comparisons.score_more`: the shares of the outcomes held);
elsewhere (the t interval decides, or subjects) the normal rule,
:func:`benchcert.stats.comparisons.additional_sample_size`, the t approximation's MDE solved for n (the
rule of ``plan compare`` too). For the new-subjects question the rule is the normal test's on the
subjects' mean differences; the verdict's betting bound is valid without normality and needs more
subjects than that, so the number there is a lower bound and says so. So is a recorded verdict's
(``--record``: the first-look test at alpha x share, then betting at alpha (1 - share), decide it; the
number is the fixed-sample test's).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["DesignBasis", "more_needed", "more_items_line"]


@dataclass(frozen=True)
class DesignBasis:
    """What the deciding test's power rests on besides the SE: the rule its MDE was computed with
    (``PairedComparison.mde_method``: ``score``, ``bounded`` or ``t``) and the data that rule holds fixed as items
    are added (``score``: the items only the candidate / only the baseline got right; ``bounded``: the shared
    items' differences)."""

    rule: str
    n_b_wins: float | None = None
    n_a_wins: float | None = None
    differences: object = None


def _more(se, n, gap, alpha, power, basis, both=False):
    """The :class:`AdditionalSampleSize` of ``gap`` by the deciding test's rule (``basis``), else the normal rule.
    A score test's number is for ``gap`` in its own direction (the observed gap, signed: the design held, the
    other direction can need far more items), or with ``both`` for either direction (an MDE's)."""
    from benchcert.stats.comparisons import additional_sample_size
    from benchcert.stats.comparisons.score_more import (bounded_score_test_items_needed,
                                                        score_additional_sample_size, score_test_items_needed)

    if basis is None or basis.rule not in ("score", "bounded") or gap == 0:
        return additional_sample_size(se, n, gap, alpha=alpha, power=power)
    if basis.rule == "score":
        total = score_test_items_needed([basis.n_b_wins], [basis.n_a_wins], [n], [gap], alpha=alpha, power=power,
                                       both_directions=both)[0]
    else:
        total = bounded_score_test_items_needed([basis.differences], [gap], alpha=alpha, power=power,
                                                both_directions=both)[0]
    method = "score_test_power" if basis.rule == "score" else "bounded_score_test_power"
    return score_additional_sample_size(total, n, gap, se, alpha=alpha, power=power, method=method)


def _finite(x) -> float | None:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def more_needed(se, n, gap, *, alpha: float, power: float, unit: str = "items", mde=None,
                mde_alpha: float | None = None, basis: DesignBasis | None = None,
                recorded: bool = False) -> dict | None:
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
        The level that MDE is stated at (``PairedComparison.mde_alpha``: the deciding level, alpha / P in a
        family). Where the deciding test runs at that level (``alpha >= mde_alpha``) the present units resolve
        the MDE by definition, so its number is 0. Every present caller is there (a row's MDE is stated at its
        deciding level or a stricter one: a family's alpha / P, a suite's alpha / m), so ``more_for_mde`` is 0
        for all of them; the other branch is for an MDE stated at a larger level than the deciding one.
    basis : DesignBasis, optional, keyword-only
        For items: the deciding test's MDE rule and its data; with a score test's (``score``, ``bounded``) the
        numbers are that test's power solved for the items, else (and for subjects) the normal rule's.
    recorded : bool, keyword-only
        The verdict is a recorded one (``--record``): decided by the first-look test at alpha x share, then by
        betting at alpha (1 - share), which need more units than the fixed-sample test at ``alpha`` the number
        is computed for; the number is then a lower bound (``lower_bound``) and says so.
    """
    se, gap = _finite(se), _finite(gap)
    if se is None or gap is None or n is None or int(n) < 1 or se <= 0:
        return None
    basis = basis if unit == "items" else None
    obs = _more(se, int(n), gap, alpha, power, basis)
    out = {"unit": unit, "power": power, "alpha": alpha, "n": int(n), "se": se, "method": obs.method,
           "observed_gap": abs(gap), "more_for_observed_gap": obs.more,
           "n_total_for_observed_gap": obs.n_total, "reason": obs.reason,
           "assumptions": list(obs.assumptions)}
    mde = _finite(mde)
    if mde is not None and mde > 0:
        out.update(mde=mde, mde_alpha=mde_alpha)
        out["more_for_mde"] = (0 if mde_alpha is not None and alpha >= mde_alpha
                               else _more(se, int(n), mde, alpha, power, basis, both=True).more)
    out["lower_bound"] = unit == "subjects" or recorded
    if recorded:
        out["assumptions"].append("the fixed-sample test's number at the level given: a recorded verdict is decided "
                                  "by the first-look test at alpha x share, then by betting at alpha (1 - share), "
                                  "which need more, so read it as a lower bound")
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
        lower = "at least " if doc.get("lower_bound", unit == "subjects") else "about "
        head = (f"{name}: inconclusive; {lower}{doc['more_for_observed_gap']:,} more {unit} (same design) would "
                f"resolve a {100 * doc['observed_gap']:.2f}-point gap (the one observed) with {pw} power")
    if doc.get("more_for_mde"):
        head += f", {doc['more_for_mde']:,} a {100 * doc['mde']:.2f}-point gap (the MDE shown)"
    return head + f" at level {doc['alpha']:.3g}"
