"""Along a training run: ``benchcert compare --series 'org/model@step-*' --baseline B --suite NAME``.

Every model of the store whose name matches the pattern (shell-style, ``fnmatch``) is a checkpoint;
its step is the last integer in its name. In step order, each checkpoint is judged on the suite
against the baseline (:func:`benchcert.tasks.compare.suite.compare_suite`; recorded as the next look
of its suite question with ``record=True``), and the series is one JSON document - the artifact a
dashboard reads (schema ``benchcert.suite_series`` version 1, docs/artifacts.md). Each checkpoint
is its own question (its own candidate), so each suite answer keeps its own guarantee; no claim is
made across checkpoints (e.g. "the first checkpoint that regressed") beyond the per-checkpoint ones.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import replace

from benchcert.tasks.compare.suite_def import SuiteError

__all__ = ["SERIES_KIND", "SERIES_VERSION", "checkpoints", "suite_series"]

SERIES_KIND = "benchcert.suite_series"
SERIES_VERSION = 1


def _step(name: str) -> int | None:
    found = re.findall(r"\d+", name)
    return int(found[-1]) if found else None


def checkpoints(db, pattern: str, baseline: str, *, lock_timeout: float = 600.0) -> list[tuple[int | None, str]]:
    """(step, model) of every model matching ``pattern`` but the baseline, in step order (no step last)."""
    from benchcert.tasks.store.connection import open_store
    from benchcert.tasks.store.suites import model_names

    with open_store(db, write=False, lock_timeout=lock_timeout) as con:
        names = [m for m in model_names(con) if fnmatch.fnmatchcase(m, pattern) and m != baseline]
    if not names:
        raise SuiteError(f"--series {pattern!r}: no model in the store matches (besides the baseline {baseline!r})")
    return sorted(((_step(m), m) for m in names), key=lambda t: (t[0] is None, t[0] or 0, t[1]))


def suite_series(request, pattern: str) -> dict:
    """The series document: ``request`` (a SuiteRequest; its candidate is replaced by each checkpoint)."""
    from benchcert.tasks.compare.suite import compare_suite

    rows = []
    for step, model in checkpoints(request.db, pattern, request.baseline, lock_timeout=request.lock_timeout):
        r = compare_suite(replace(request, candidate=model))
        rows.append({"model": model, "step": step, "look": r.look, "regressed_somewhere": r.regressed_somewhere,
                     "improved": list(r.improved), "regressed": list(r.regressed), "score": r.score_dict(),
                     "gate": None if r.gate is None else r.gate.as_dict(),
                     "benchmarks": [{"benchmark": ln.benchmark, "verdict": ln.row.verdict, "gap": ln.row.gap,
                                     "lower": ln.row.deciding_interval.lower,
                                     "upper": ln.row.deciding_interval.upper, "suite_claim": ln.suite_claim}
                                    for ln in r.lines]})
    return {"kind": SERIES_KIND, "version": SERIES_VERSION, "suite": request.suite.as_dict(), "pattern": pattern,
            "baseline": request.baseline, "alpha": request.alpha, "question": request.question,
            "recorded": request.record, "checkpoints": rows}
