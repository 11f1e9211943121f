r"""A recorded verdict's evidence as the suite reads it: each side's anytime-valid one-sided p-value.

    recorded_side_p(db, verdict) -> (p improved, p regressed)

The suite's recorded answer (a) is Holm's step-down at alpha/2 per side over these p-values
(:func:`benchcert.stats.multiplicity.directional_holm`); this module is the one place that turns
what a recorded verdict stores into them. A recorded question spends its level as its first look
chose, named in ``first_method`` (:mod:`benchcert.tasks.compare.recorded` since issue #36,
:mod:`benchcert.tasks.compare.verdicts` before it):

=================================  ===========================================  ======================
``first_method``                   first look                                   betting test (every look)
=================================  ===========================================  ======================
``store_weighted_batches``         stratified test (or, below 100 effectively   alpha (1 - s), each
                                   nonzero differences, the betting bound) at   look's new items
                                   alpha s                                      reweighted to the store
``stratified_store_weights``       as ``store_weighted_batches``                alpha (1 - s); two
                                                                                tests at half of it
                                                                                each when a subject had
                                                                                nothing shared at look 1
``betting_constant_mixture_items`` betting bound at alpha s                     alpha (1 - s)
``betting_plugin_subject_means``   betting bound at alpha s                     alpha (1 - s)
``""`` (before issue #24)          not used (its share stays spent)             alpha (1 - s)
``plugin_betting_all_alpha``       none: s = 0, whatever the stored share       alpha
``symmetric_selfnormalised``       none: s = 0                                  alpha
=================================  ===========================================  ======================

(s = the question's ``first_look_share``.) For a side, with :math:`p_1` the first look's one-sided
p-value (half the stored two-sided ``first_p_value`` on the side of ``first_gap``, 1 on the other;
for the betting bound :math:`1/E`, Markov) and :math:`E_t` the side's stored e-value at look t,

.. math:: p = \min\{1,\ p_1/s,\ 1/((1 - s)\max_{t \le T} E_t)\}

(:func:`benchcert.stats.multiplicity.e_to_anytime_p`; the first term only when the first look
decides). The stored :math:`E_t` is already the e-process the verdict thresholds at
:math:`2/(\alpha(1-s))`: for the two-test form it is :math:`\max(K_1, K_2)/2` (both at half the
level; :func:`benchcert.stats.recorded.either_of`), an e-process because it is at most the mean of
two nonnegative supermartingales. Validity: :math:`P(p_1/s \le x) \le s x` under the side's null
(the first look's test at its level, for every level) and :math:`P(\exists t: (1-s)E_t \ge 1/x)
\le (1 - s)x` (Ville's inequality), so :math:`P(p \le x) \le x` at every look and over all looks.
Agreement: the verdict claims a side at look T exactly when its first look did (:math:`p_1 \le
\alpha s/2`) or the side's e-value reached :math:`2/(\alpha(1-s))` at some look up to T, i.e.
exactly when :math:`p \le \alpha/2` (when both sides are, the verdict reverts to inconclusive
and :func:`side_p_values` returns 1 for both); a suite of one benchmark says what its recorded verdict says
(tests/tasks/compare/test_suite.py checks it look by look through the store).
"""

from __future__ import annotations

import math

from benchcert.tasks.errors import DataError
from benchcert.tasks.store import DEFAULT_LOCK_TIMEOUT

__all__ = ["RecordedMethodError", "FIRST_LOOK_SPLIT", "side_p_values", "recorded_side_p"]

#: How each recorded scheme splits its level: True = the first look spends ``first_look_share``
#: and may decide; "spent" = the share is spent but the first look does not decide (pre-#24 looks);
#: False = one anytime-valid test with all of alpha (the stored share is not used).
FIRST_LOOK_SPLIT = {
    "store_weighted_batches": True,
    "stratified_store_weights": True,
    "betting_constant_mixture_items": True,
    "betting_plugin_subject_means": True,
    "": "spent",
    "plugin_betting_all_alpha": False,
    "symmetric_selfnormalised": False,
}


class RecordedMethodError(DataError):
    """A recorded question names a ``first_method`` this version cannot read (exit code 1): the
    suite would have to guess how its level was split, and does not."""


def side_p_values(first_method: str | None, *, first_p_value: float, first_gap: float, first_look_share: float,
                  max_log_e_improved: float, max_log_e_regressed: float,
                  alpha: float | None = None) -> tuple[float, float]:
    """(p improved, p regressed) of a recorded question from what it stores (pure; module docstring).

    Parameters
    ----------
    first_method : str or None
        The question's recorded scheme (None or "" for looks recorded before issue #24).
    first_p_value, first_gap : float, keyword-only
        The first look's two-sided directional p-value and gap (the stored columns).
    first_look_share : float, keyword-only
        The stored share s of alpha (ignored by the all-alpha schemes).
    max_log_e_improved, max_log_e_regressed : float, keyword-only
        The running maximum over the recorded looks of each side's stored log e-value.
    alpha : float, optional, keyword-only
        The question's level. When given and BOTH sides are at most alpha/2 (the first look said one
        side and the betting test later the other, or both betting sides crossed), the verdict
        reverts to inconclusive (:func:`benchcert.stats.sequential.nightly_verdicts`), and so do
        these: both are returned as 1. Raising a p-value keeps it valid; the suite then names the
        benchmark on neither side, as its verdict does.

    Raises
    ------
    RecordedMethodError
        ``first_method`` is not one of :data:`FIRST_LOOK_SPLIT`.
    """
    from benchcert.stats.multiplicity import e_to_anytime_p

    method = first_method or ""
    if method not in FIRST_LOOK_SPLIT:
        raise RecordedMethodError(
            f"recorded first_method {method!r} is not one this version knows ({sorted(k for k in FIRST_LOOK_SPLIT if k)}"
            " or empty): the suite cannot tell how its level was split; upgrade benchcert or ask the suite without "
            "--record")
    split = FIRST_LOOK_SPLIT[method]
    share = 0.0 if split is False else float(first_look_share)
    p1 = min(1.0, float(first_p_value) / 2.0) if split is True and math.isfinite(float(first_p_value)) else 1.0
    gap = float(first_gap) if math.isfinite(float(first_gap)) else 0.0
    p_up = e_to_anytime_p(float(max_log_e_improved), first_p=p1 if gap > 0 else 1.0, first_look_share=share)
    p_down = e_to_anytime_p(float(max_log_e_regressed), first_p=p1 if gap < 0 else 1.0, first_look_share=share)
    if alpha is not None and p_up <= alpha / 2 and p_down <= alpha / 2:
        return 1.0, 1.0
    return p_up, p_down


def recorded_side_p(db, verdict, *, lock_timeout: float = DEFAULT_LOCK_TIMEOUT) -> tuple[float, float]:
    """(p improved, p regressed) of a recorded verdict (a ``CheckpointVerdict``), anytime-valid over all its looks.

    Reads the question's stored e-values look by look
    (:func:`benchcert.tasks.compare.evalues.recorded_e_values`) and its first look's p-value, gap,
    share and ``first_method`` from ``verdict``; :func:`side_p_values` does the rest. ``verdict``'s
    own look counts whether or not it was stored.
    """
    from benchcert.tasks.compare.evalues import recorded_e_values

    v = verdict
    rec = recorded_e_values(db, v.benchmark, v.baseline, v.candidate, variant=v.variant, lock_timeout=lock_timeout)
    if rec.looks and rec.method != (v.first_method or ""):
        raise RecordedMethodError(f"{v.benchmark!r}: the stored question's first_method {rec.method!r} differs from "
                                  f"this look's {v.first_method!r}; the store changed under the suite - ask again")
    up = max([float(v.log_e_improved)] + [lk.log_e_better for lk in rec.looks])
    down = max([float(v.log_e_regressed)] + [lk.log_e_worse for lk in rec.looks])
    return side_p_values(v.first_method, first_p_value=v.first_p_value, first_gap=v.first_gap,
                         first_look_share=v.first_look_share, max_log_e_improved=up, max_log_e_regressed=down,
                         alpha=v.alpha)
