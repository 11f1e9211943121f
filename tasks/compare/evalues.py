"""Each recorded look's e-values, for procedures that combine many questions (e-Holm, e-BH).

A recorded verdict's betting test keeps, at every look, its capital for each side: an e-value
for "the candidate is no better" (gap <= 0) and one for "the candidate is no worse" (gap >= 0),
about the question's estimand. Each is an e-value at that look whatever made the look happen
(optional stopping: the capital of a nonnegative supermartingale at a stopping time has mean
<= 1), so a suite can combine the e-values of many questions at their latest looks by e-BH
(Wang and Ramdas 2022, JRSS-B 84(3), "False discovery rate control with e-values") or e-Holm
without any assumption on how the questions depend on each other.

They are the anytime part's only: a first look's fixed-sample test (the items question's) is a
p-value and is not in them. The verdict's own decision also uses that test; a suite that wants
the verdict's full power at a first look combines p-values instead.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from benchcert.tasks.compare.verdicts import QuestionRecord, read_question
from benchcert.tasks.store.connection import DEFAULT_LOCK_TIMEOUT, open_store
from benchcert.tasks.store.matrices import choose_variant

__all__ = ["LookEValues", "RecordedEValues", "look_e_values", "recorded_e_values"]


@dataclass(frozen=True)
class LookEValues:
    """One recorded look's e-values (``inf`` when beyond float range; the logs are exact).

    Attributes
    ----------
    look : int
        1-based.
    e_better : float
        Evidence that the candidate is better: an e-value for the null "gap <= 0".
    e_worse : float
        Evidence that the candidate is worse: an e-value for the null "gap >= 0".
    log_e_better, log_e_worse : float
        Their natural logarithms.
    """

    look: int
    e_better: float
    e_worse: float
    log_e_better: float
    log_e_worse: float


@dataclass(frozen=True)
class RecordedEValues:
    """A recorded question's e-values, look by look (oldest first; empty when never recorded).

    ``question`` and ``estimand`` name what the nulls are about, ``method`` the first look's
    recorded test (it names the scheme the question is answered by).
    """

    benchmark: str
    variant: str
    baseline: str
    candidate: str
    question: str
    estimand: str
    method: str
    looks: tuple[LookEValues, ...]


def _exp(x: float) -> float:
    return math.exp(x) if x < 709.0 else math.inf


def look_e_values(record: QuestionRecord) -> tuple[LookEValues, ...]:
    """The e-values of every look of a question's record (pure; see :func:`recorded_e_values`)."""
    looks = record.looks
    if not looks.height:
        return ()
    return tuple(LookEValues(look=int(r["look"]), e_better=_exp(float(r["log_e_improved"])),
                             e_worse=_exp(float(r["log_e_regressed"])), log_e_better=float(r["log_e_improved"]),
                             log_e_worse=float(r["log_e_regressed"]))
                 for r in looks.select("look", "log_e_improved", "log_e_regressed").iter_rows(named=True))


def recorded_e_values(db: str | os.PathLike, benchmark: str, baseline: str, candidate: str, *,
                      variant: str | None = None, lock_timeout: float = DEFAULT_LOCK_TIMEOUT) -> RecordedEValues:
    """Read the e-values of every recorded look of (benchmark, variant, baseline, candidate).

    Parameters
    ----------
    db : path
        The store (read only).
    benchmark, baseline, candidate : str
        The question, as recorded by ``compare --record`` or a checkpoint.
    variant : str, optional
        Prompt variant (the rule of every command: the given, else the stored default, else the
        only one, else the base variant).
    lock_timeout : float, keyword-only

    Returns
    -------
    RecordedEValues
        ``looks`` empty when the question was never recorded.

    Raises
    ------
    benchcert.tasks.store.connection.StoreError
        The store is missing, locked or unusable.
    benchcert.tasks.store.matrices.MatrixError
        Unknown benchmark or variant.
    """
    with open_store(db, write=False, lock_timeout=lock_timeout) as con:
        chosen = choose_variant(con, benchmark, variant)
        record = read_question(con, benchmark, chosen, baseline, candidate)
    first = record.looks.row(0, named=True) if record.looks.height else {}
    return RecordedEValues(benchmark=benchmark, variant=chosen, baseline=baseline, candidate=candidate,
                           question=str(first.get("question") or ""), estimand=str(first.get("estimand") or ""),
                           method=str(first.get("first_method") or ""), looks=look_e_values(record))
