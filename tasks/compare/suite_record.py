"""Recorded suite verdicts (table ``suite_verdicts``): one row per look of (suite, baseline, candidate).

``compare --suite NAME --record`` and ``notify-checkpoint --suite`` record each benchmark's look
(the per-benchmark recorded verdicts, table ``verdicts``) and then this row: the suite's answers at
that look and the whole ``--json`` document, which ``compare --series`` and dashboards read back.
"""

from __future__ import annotations

import json

__all__ = ["record_suite", "suite_history"]


def record_suite(request, result) -> int:
    """Record ``result`` (a :class:`~benchcert.tasks.compare.suite.SuiteResult`) as the next look; its number."""
    from benchcert.tasks.store.connection import open_store
    from benchcert.tasks.store.suites import record_suite_verdict

    s = result.score
    doc = result.as_dict()
    row = {"suite": result.suite.name, "baseline": result.baseline, "candidate": result.candidate,
           "alpha": result.alpha, "question": result.question, "regressed_somewhere": result.regressed_somewhere,
           "n_improved": len(result.improved), "n_regressed": len(result.regressed),
           "score_gap": None if s is None else s.estimate, "score_lower": None if s is None else s.lower,
           "score_upper": None if s is None else s.upper, "score_verdict": None if s is None else s.verdict,
           }
    with open_store(request.db, write=True, lock_timeout=request.lock_timeout) as con:
        return record_suite_verdict(con, row, lambda look: json.dumps({**doc, "look": look}, default=str,
                                                                      allow_nan=False))


def suite_history(db, suite: str, baseline: str | None = None, *, lock_timeout: float = 600.0) -> list[dict]:
    """The recorded looks of ``suite`` (against ``baseline``), each with its JSON document parsed."""
    from benchcert.tasks.store.connection import open_store
    from benchcert.tasks.store.suites import read_suite_verdicts

    with open_store(db, write=False, lock_timeout=lock_timeout) as con:
        rows = read_suite_verdicts(con, suite, baseline).to_dicts()
    for r in rows:
        r["document"] = json.loads(r["document"])
        r["recorded_at"] = r["recorded_at"].isoformat() + "Z"
    return rows
