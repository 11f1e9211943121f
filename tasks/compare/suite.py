"""A checkpoint judged on a suite: ``benchcert compare BASE CAND --suite NAME`` (the service).

    compare_suite(SuiteRequest(db, suite, baseline, candidate)) -> SuiteResult

Each benchmark of the suite is compared by the per-benchmark service
(:func:`benchcert.tasks.compare.service.compare_models`, or
:func:`~benchcert.tasks.compare.service.record_look` under ``--record``): one row per benchmark
with its gap, interval, verdict and question, as ``compare --benchmark`` prints it. Above the rows,
the suite's three answers, each naming its guarantee:

(a) **regressed on some benchmark** - the regressed side of Holm's step-down over the benchmarks'
    one-sided p-values at alpha/2 (:func:`benchcert.stats.multiplicity.directional_holm`): made
    with probability at most alpha/2 when no benchmark regressed, under any dependence between
    benchmarks (the one-sided budget a single benchmark's two-sided level-alpha verdict spends on
    that side; a suite of one benchmark says what its row says). Under ``--record`` the p-values
    are the recorded verdicts' anytime-valid ones, split as each question's ``first_method`` spends its
    level (:func:`benchcert.tasks.compare.suite_evidence.recorded_side_p`), so the claim holds at
    every look and over all looks together, and a suite of one benchmark says what its recorded
    verdict says at every look.
(b) **which benchmarks improved / regressed** - the same Holm decisions of both sides: family-wise
    error of all directional claims at most alpha.
(c) **the suite score** - the weighted mean of the benchmarks' item-weighted gaps, benchmarks as
    fixed strata (:func:`benchcert.stats.suite_score.suite_score`), with its 1 - alpha interval
    and verdict (a fixed-sample interval at this look, also under ``--record``).

Gates (:func:`suite_gate`): ``--fail-on regressed`` fails when (a) is claimed; ``--require
non-inferior --margin D`` (or ``equivalent``) passes only when EVERY benchmark's interval shows it
- an intersection-union test (Berger 1982): the suite passes only if each benchmark's own level-alpha/2
test passes, so if any one benchmark is truly worse than -D the suite passes with probability at
most that benchmark's test's level: no multiplicity correction is needed, and none is made;
``--require suite-non-inferior --margin D`` passes when the suite score's interval lies above -D.
No gate passes a suite on which (a) is claimed (or, for the suite-score gate, whose score regressed).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from benchcert.tasks.compare.gate import GateDecision, GateOptions
from benchcert.tasks.compare.rows import ComparisonRow
from benchcert.tasks.compare.settings import CompareSettings, settings_of
from benchcert.tasks.compare.suite_def import Suite, SuiteError
from benchcert.tasks.compare.suite_evidence import recorded_side_p
from benchcert.tasks.errors import UsageError
from benchcert.tasks.result_types import TableResult, finite_or_none

__all__ = ["SuiteRequest", "BenchmarkLine", "SuiteResult", "compare_suite", "suite_gate", "recorded_side_p",
           "SUITE_REQUIRE"]

#: What ``--require`` can ask of a suite: every benchmark (intersection-union) or the suite score.
SUITE_REQUIRE = ("non-inferior", "equivalent", "suite-non-inferior")


@dataclass(frozen=True)
class SuiteRequest(CompareSettings):
    """One suite question: ``candidate`` against ``baseline`` on every benchmark of ``suite``, with
    :class:`CompareSettings`' keyword-only settings (asked of each benchmark's comparison)."""

    db: Path
    suite: Suite
    baseline: str
    candidate: str
    record: bool = False


@dataclass(frozen=True)
class BenchmarkLine:
    """One benchmark of the suite: its comparison row and where the suite's decisions put it.

    Attributes
    ----------
    benchmark : str
    weight : float
        Its normalised weight in the suite score.
    row : ComparisonRow
        The per-benchmark service's row (gap, interval, verdict; under ``--record`` the recorded
        verdict with its anytime-valid interval).
    suite_claim : str or None
        ``improved`` / ``regressed`` when the suite's Holm decisions name it, else None.
    p_improved, p_regressed : float
        Its one-sided p-values (anytime-valid under ``--record``).
    p_improved_holm, p_regressed_holm : float
        Holm-adjusted; the claim is made where <= alpha/2.
    more_items : dict or None
        For a benchmark the suite does not name: how many more items would let the suite's first
        Holm step (two-sided alpha/m) resolve it with the stated power.
    question, estimand, method : str
    """

    benchmark: str
    weight: float
    row: ComparisonRow
    suite_claim: str | None
    p_improved: float
    p_regressed: float
    p_improved_holm: float
    p_regressed_holm: float
    more_items: dict | None
    question: str
    estimand: str
    method: str
    score_gap: float | None = None
    score_se: float | None = None
    n_items: int | None = None

    def as_dict(self) -> dict:
        return {"benchmark": self.benchmark, "weight": self.weight, "suite_claim": self.suite_claim,
                "p_improved": self.p_improved, "p_regressed": self.p_regressed,
                "p_improved_holm": self.p_improved_holm, "p_regressed_holm": self.p_regressed_holm,
                "question": self.question, "estimand": self.estimand, "method": self.method,
                "item_weighted_gap": self.score_gap, "item_weighted_se": self.score_se,
                "more_items_suite": self.more_items, "comparison": self.row.as_dict()}


@dataclass(frozen=True)
class SuiteResult(TableResult):
    """The suite's answers and one line per benchmark (:func:`compare_suite`).

    Attributes
    ----------
    suite : Suite
    baseline, candidate : str
    alpha, power : float
    question : str
        The ``--question`` every benchmark's row answers.
    lines : tuple of BenchmarkLine
    regressed_somewhere : bool
        Answer (a).
    improved, regressed : tuple of str
        Answer (b): the benchmarks the suite's Holm decisions name.
    score : SuiteScore or None
        Answer (c) (None when some benchmark has no standard error).
    guarantees : dict
        Each answer's guarantee, in words.
    gate : GateDecision or None
    recorded : bool
    look : int or None
        The suite verdict's look number under ``--record``.
    warnings : tuple of str

    Examples
    --------
    >>> import benchcert as bc
    >>> r = bc.example_store().compare("strong", "weak", suite=["toy"])  # a suite of one benchmark
    >>> r.regressed_somewhere, r.improved, r.score.verdict
    (False, ('toy',), 'improved')
    >>> r.line("toy").row.verdict == r.line("toy").suite_claim  # with one benchmark, its own verdict
    True
    """

    suite: Suite
    baseline: str
    candidate: str
    alpha: float
    power: float
    question: str
    lines: tuple[BenchmarkLine, ...]
    regressed_somewhere: bool
    improved: tuple[str, ...]
    regressed: tuple[str, ...]
    score: object | None
    guarantees: dict
    gate: GateDecision | None = None
    recorded: bool = False
    look: int | None = None
    warnings: tuple[str, ...] = field(default_factory=tuple)

    def line(self, benchmark: str) -> BenchmarkLine:
        """The line of ``benchmark`` (KeyError when the suite has none)."""
        for ln in self.lines:
            if ln.benchmark == benchmark:
                return ln
        raise KeyError(benchmark)

    def to_polars(self):
        """One row per benchmark: its weight, its comparison's columns (:meth:`ComparisonRow.table_row`), the
        suite's claim and the Holm-adjusted p-values. A row's ``verdict`` is its own, decided at alpha; its ``mde``
        is stated at ``mde_alpha`` = alpha / m, the level of the suite's claim (``suite_claim``) on that benchmark."""
        import polars as pl

        return pl.DataFrame([{"benchmark": ln.benchmark, "weight": ln.weight, **ln.row.table_row(),
                              "suite_claim": ln.suite_claim, "p_regressed_holm": ln.p_regressed_holm,
                              "p_improved_holm": ln.p_improved_holm} for ln in self.lines])

    def _title(self) -> str:
        return f"suite {self.suite.name!r}: {self.candidate!r} against {self.baseline!r}"

    def _notes(self) -> list[str]:
        from benchcert.tasks.render.text import suite_summary

        return suite_summary(self)

    def score_dict(self) -> dict | None:
        s = self.score
        if s is None:
            return None
        return {"gap": s.estimate, "se": s.se, "lower": s.lower, "upper": s.upper, "p_value": s.p_value,
                "verdict": s.verdict, "alpha": s.alpha, "mde": s.mde, "power": s.power, "more_items": s.more_items,
                "n_items": s.n_items, "method": s.method, "assumptions": list(s.assumptions),
                "weights": {ln.benchmark: ln.weight for ln in self.lines}}

    def as_dict(self) -> dict:
        """The ``--json`` document (without the gate's exit code, which the command line adds)."""
        return {"suite": self.suite.as_dict(), "baseline": self.baseline, "candidate": self.candidate,
                "alpha": self.alpha, "power": self.power, "question": self.question, "recorded": self.recorded,
                "look": self.look, "regressed_somewhere": self.regressed_somewhere,
                "improved": list(self.improved), "regressed": list(self.regressed), "score": self.score_dict(),
                "guarantees": dict(self.guarantees), "benchmarks": [ln.as_dict() for ln in self.lines],
                "gate": None if self.gate is None else self.gate.as_dict(), "warnings": list(self.warnings)}


def _guarantees(alpha: float, m: int, recorded: bool) -> dict:
    when = ("at every look and over all looks together (Holm on the recorded verdicts' anytime-valid p-values: "
            "Ville's inequality, union bound)" if recorded else "at one look (Holm on the per-benchmark tests)")
    return {
        "regressed_somewhere": f"claimed with probability <= {alpha / 2:g} (alpha/2) when no benchmark of the {m} "
                               f"regressed, under any dependence between benchmarks, {when}",
        "named": f"family-wise error of all improved/regressed claims <= {alpha:g} ({alpha / 2:g} per side; Holm "
                 "step-down, any dependence)",
        "score": f"{100 * (1 - alpha):g}% normal interval of the weighted mean of the benchmarks' item-weighted gaps "
                 "(benchmarks fixed strata)" + ("; fixed-sample at this look, not anytime-valid" if recorded else ""),
        "non_inferior_every_benchmark": "intersection-union test: each benchmark's own one-sided level-alpha/2 test; "
                                        "no multiplicity correction needed (a suite with one benchmark worse than "
                                        "the margin passes only if that benchmark's test errs)",
    }


def _per_benchmark(request: SuiteRequest, benchmark: str, question: str):
    from benchcert.tasks.compare.service import CompareRequest

    # family: each benchmark's MDE is stated at Holm's first step, alpha / m, the level its suite claim needs
    return CompareRequest(db=request.db, benchmark=benchmark, baseline=request.baseline,
                          candidates=(request.candidate,), family=len(request.suite.benchmarks),
                          **{**settings_of(request), "gate": None, "question": question})


def _fixed_rows(request: SuiteRequest):
    """Each benchmark's per-benchmark result (the question asked) and its items-question result
    (the suite score's strata); one compare when the question is items."""
    from benchcert.tasks.compare.service import compare_models

    out = []
    for b in request.suite.benchmarks:
        asked = compare_models(_per_benchmark(request, b, request.question))
        items = asked if request.question == "items" else compare_models(_per_benchmark(request, b, "items"))
        out.append((asked, items))
    return out


def _recorded_row(look) -> ComparisonRow:
    """A recorded verdict as a comparison row: its verdict and the interval that decides it (the first-look
    test's or the anytime one, :func:`~benchcert.tasks.compare.recorded.deciding_interval`)."""
    from benchcert.tasks.compare.recorded import deciding_gap, deciding_interval

    v = look.verdict
    lower, upper, key, _ = deciding_interval(v.as_dict())  # the first-look test's interval or the anytime one
    return ComparisonRow.from_dict({
        "candidate": v.candidate, "baseline": v.baseline, "verdict": v.verdict, "gap": deciding_gap(v.as_dict()),
        "interval": {"method": v.method if key == "fixed_sample" else key, "lower": lower, "upper": upper,
                     "se": None},
        "p_value": v.anytime_p, "n_shared": v.n_shared, "n_excluded": v.n_excluded, "mde": v.mde, "look": v.look,
        "decided_by": v.decided_by or None, "decided_at_look": v.decided_at_look, "question_key": v.question_key,
        "fixed_sample": {"gap": v.gap, "lower": v.lower, "upper": v.upper, "p_value": v.p_value,
                         "method": v.method}})


def compare_suite(request: SuiteRequest) -> SuiteResult:
    """The suite's answers (a)-(c) and one line per benchmark, with the gate's decision.

    Raises
    ------
    UsageError
        A gate that contradicts itself, or a suite-only ``--require`` without a margin.
    SuiteError
        The candidate or baseline has no responses on some benchmark of the suite.
    VerdictError, MatrixError, StoreError
        As :func:`benchcert.tasks.compare.service.compare_models`.
    """
    import numpy as np

    from benchcert.stats.multiplicity import directional_holm, one_sided_p_values
    from benchcert.stats.suite_score import suite_score
    from benchcert.tasks.compare.more_items import more_needed

    check_suite_gate(request.gate)
    _check_models(request)
    fixed = _fixed_rows(request)
    notes: list[str] = []
    if request.record:
        from benchcert.tasks.compare.service import record_look

        looks = [record_look(_per_benchmark(request, b, request.question)) for b in request.suite.benchmarks]
        rows = [_recorded_row(lk) for lk in looks]
        sides = [recorded_side_p(request.db, lk.verdict, lock_timeout=request.lock_timeout) for lk in looks]
        p_up, p_down = np.array([s[0] for s in sides]), np.array([s[1] for s in sides])
        for lk in looks:
            notes += [f"{lk.verdict.benchmark!r}: {w}" for w in lk.verdict.warnings]
    else:
        rows = [asked.comparisons[0] for asked, _ in fixed]
        p_two = np.array([1.0 if r.p_value is None else r.p_value for r in rows])
        p_up, p_down = one_sided_p_values(p_two, np.array([0.0 if r.gap is None else r.gap for r in rows]))
        for asked, _ in fixed:
            notes += [f"{asked.benchmark!r}: {w}" for w in asked.warnings]
    fam = directional_holm(p_up, p_down, alpha=request.alpha)
    m = len(rows)
    items_rows = [items.comparisons[0] for _, items in fixed]
    score = _score(items_rows, request, notes, suite_score)
    weights = (np.asarray(request.suite.weights, dtype=float) / float(np.sum(request.suite.weights))).tolist()
    lines = []
    for j, (b, row) in enumerate(zip(request.suite.benchmarks, rows)):
        claim = "improved" if fam.improved[j] else "regressed" if fam.regressed[j] else None
        ir = items_rows[j]
        more = None
        if claim is None:
            items = request.question == "items" or request.record
            src = rows[j] if not request.record else ir
            more = more_needed(src["interval"]["se"] if items else src.get("subject_means_se"),
                               src["n_shared"] if items else src.get("n_subjects"),
                               src.gap, alpha=request.alpha / m, power=request.power,
                               unit="items" if items else "subjects", mde=src.get("mde"),
                               mde_alpha=src.get("mde_alpha"), basis=fixed[j][1].bases[0] if items else None,
                               recorded=request.record)
        asked = fixed[j][0]
        lines.append(BenchmarkLine(
            benchmark=b, weight=weights[j], row=row, suite_claim=claim, p_improved=float(fam.p_improved[j]),
            p_regressed=float(fam.p_regressed[j]), p_improved_holm=float(fam.p_improved_adjusted[j]),
            p_regressed_holm=float(fam.p_regressed_adjusted[j]), more_items=more, question=asked.question,
            estimand=asked.estimand, method=asked.method, score_gap=ir.gap,
            score_se=finite_or_none(ir["interval"]["se"]), n_items=ir.n_shared))
    result = SuiteResult(
        suite=request.suite, baseline=request.baseline, candidate=request.candidate, alpha=request.alpha,
        power=request.power, question=request.question, lines=tuple(lines), regressed_somewhere=fam.any_regressed,
        improved=tuple(ln.benchmark for ln in lines if ln.suite_claim == "improved"),
        regressed=tuple(ln.benchmark for ln in lines if ln.suite_claim == "regressed"), score=score,
        guarantees=_guarantees(request.alpha, m, request.record), recorded=request.record,
        warnings=tuple(dict.fromkeys(notes)))
    result = replace(result, gate=suite_gate(result, request.gate))
    if request.record:
        from benchcert.tasks.compare.suite_record import record_suite

        result = replace(result, look=record_suite(request, result))
    return result


def _score(items_rows, request: SuiteRequest, notes: list[str], suite_score):
    """Answer (c) from each benchmark's items-question row (None, with a note, when one has no SE)."""
    missing = [b for b, r in zip(request.suite.benchmarks, items_rows)
               if r.gap is None or finite_or_none(r["interval"]["se"]) is None]
    if missing:
        notes.append(f"no suite score: {missing} have no standard error for their gap (too few shared items)")
        return None
    return suite_score([r.gap for r in items_rows], [r["interval"]["se"] for r in items_rows],
                       [r.n_shared for r in items_rows], weights=list(request.suite.weights),
                       alpha=request.alpha, power=request.power)


def _check_models(request: SuiteRequest) -> None:
    """Every benchmark of the suite must have responses from both models: a suite verdict on part of
    it would answer another question."""
    from benchcert.tasks.store.connection import open_store
    from benchcert.tasks.store.suites import shared_benchmarks

    with open_store(request.db, write=False, lock_timeout=request.lock_timeout) as con:
        have = set(shared_benchmarks(con, [request.baseline, request.candidate]))
    missing = [b for b in request.suite.benchmarks if b not in have]
    if missing:
        raise SuiteError(f"suite {request.suite.name!r}: {request.candidate!r} and {request.baseline!r} do not both "
                         f"have responses on {missing}; ingest them, or ask --suite all (every benchmark both have)")


def check_suite_gate(options: GateOptions | None) -> None:
    """Raise :class:`UsageError` when the suite gate's options contradict each other."""
    from benchcert.tasks.compare.gate import check_options

    if options is None:
        return
    if options.require == "suite-non-inferior":
        check_options(replace(options, require="non-inferior"))
    else:
        check_options(options)


def suite_gate(result: SuiteResult, options: GateOptions | None) -> GateDecision | None:
    """The CI gate over a suite (module docstring): None when no gate was asked for."""
    if options is None or (options.fail_on is None and options.require is None):
        return None
    failed, undecided = [], []
    for ln in result.lines:
        if ln.suite_claim == "regressed" and options.require != "suite-non-inferior":
            failed.append(_failure(ln, "regressed (suite family-wise, Holm)"))
    if options.require in ("non-inferior", "equivalent"):
        from benchcert.tasks.compare.gate import margin_reason

        for ln in result.lines:
            iv = ln.row.deciding_interval
            if iv.lower is None or iv.upper is None:
                undecided.append(ln.benchmark)
            # the row's own "regressed" is replaced by the suite's Holm claim above (per-benchmark
            # alarms at alpha each would fail most clean suites); the margin test is the row's interval
            why = margin_reason(iv.lower, iv.upper, options)
            if why is not None and ln.suite_claim != "regressed":
                failed.append(_failure(ln, why))
    if options.require == "suite-non-inferior":
        s = result.score
        d = options.margin
        if s is None:
            failed.append({"benchmark": "(suite score)", "reason": "no suite score", "gap": None, "lower": None,
                           "upper": None})
        elif s.verdict == "regressed" or not s.lower > -d:
            failed.append({"benchmark": "(suite score)", "gap": s.estimate, "lower": s.lower, "upper": s.upper,
                           "reason": "regressed (suite score)" if s.verdict == "regressed" else
                           f"suite score not shown non-inferior within {100 * d:g} pp (its interval's lower end "
                           f"is not above -{100 * d:g} pp)"})
    level = f"{100 * (1 - result.alpha):g}%"
    if failed:
        f = failed[0]
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        iv = "" if f["lower"] is None else f", {level} interval [{100 * f['lower']:.2f}, {100 * f['upper']:.2f}] pp"
        reason = (f"gate failed: suite {result.suite.name!r}, {result.candidate!r} against {result.baseline!r}: "
                  f"{f['benchmark']}: {f['reason']}{iv}{more}")
    else:
        rule = {"non-inferior": f"every benchmark shown non-inferior within {_pp(options.margin)} pp "
                                "(intersection-union)",
                "equivalent": f"every benchmark shown equivalent within {_pp(options.margin)} pp (intersection-union)",
                "suite-non-inferior": f"suite score shown non-inferior within {_pp(options.margin)} pp"}.get(
            options.require, "no benchmark regressed at the suite's family-wise level")
        if undecided:
            rule += f"; not decided, no interval: {', '.join(repr(b) for b in undecided)}"
        reason = f"gate passed: {rule} (suite {result.suite.name!r}, {len(result.lines)} benchmark(s), {level})"
    return GateDecision(fail_on=options.fail_on, margin=options.margin, passed=not failed, failed=tuple(failed),
                        undecided=tuple(undecided), reason=reason, require=options.require)


def _failure(ln: BenchmarkLine, why: str) -> dict:
    iv = ln.row.deciding_interval
    return {"benchmark": ln.benchmark, "candidate": ln.row.candidate, "baseline": ln.row.baseline, "reason": why,
            "gap": ln.row.gap, "lower": iv.lower, "upper": iv.upper, "interval_method": iv.method}


def _pp(x) -> str:
    return "" if x is None else f"{100 * x:g}"


def require_suite_usage(gate: GateOptions | None, suite: str | None) -> None:
    """``--require suite-non-inferior`` without ``--suite`` is a usage error."""
    if gate is not None and gate.require == "suite-non-inferior" and suite is None:
        raise UsageError("--require suite-non-inferior needs --suite NAME (the suite score it asks about)")
