"""Compare models on one benchmark: the service behind ``benchcert compare``.

    compare_models(CompareRequest(db, benchmark, baseline, candidates)) -> ComparisonResult
    record_look(CompareRequest(..., candidates=(candidate,))) -> RecordedLook

Paired comparisons on the items both models answered (items only one answered are excluded and
counted): gap, intervals, raw and (for several candidates) Bonferroni/Holm/BH-adjusted p-values,
the verdict and the minimum detectable effect; ``record_look`` asks the checkpoint-verdict
question instead (:mod:`benchcert.tasks.compare.verdicts`).  The CI gate
(:mod:`benchcert.tasks.compare.gate`) decides on the rows either returns.

The verdict rule lives here and only here (:func:`interval_verdicts`): improved when the
deciding interval of the gap (candidate - baseline) lies above 0, regressed below 0, else
inconclusive.  The deciding interval is the primary one for a single candidate and the Bonferroni
simultaneous one for several, so that no verdict contradicts the interval shown beside it; the
audit's comparisons (:mod:`benchcert.tasks.compare.analysis`) decide the same way.

Module-level imports are kept light: the command line builds its parser from :data:`HIERARCHIES`
without importing numpy or scipy.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path

from benchcert.tasks.hierarchy import HIERARCHY_NAMES
from benchcert.tasks.compare.gate import GateDecision, GateOptions, check_options, decide
from benchcert.tasks.compare.rows import ComparisonRow
from benchcert.tasks.compare.settings import CompareSettings
from benchcert.tasks.result_types import TableResult
from benchcert.tasks.errors import UsageError
from benchcert.tasks.finite import finite_or_none as _num  # JSON-safe: NaN and infinities become null

#: The clustering levels ``--hierarchy`` names, as the levels they cluster over.
HIERARCHIES = HIERARCHY_NAMES

#: The questions ``--question`` names (the default first): "items" - is the candidate better on this
#: benchmark's items (the item-weighted gap the leaderboard shows; subjects fixed strata, items a
#: sample of each subject's items); "new-subjects" - does the gap generalise to new subjects (the
#: subject-weighted gap: every subject counts once; subjects a sample of a population).
QUESTION_CHOICES = ("items", "new-subjects")


def interval_verdicts(lower, upper):
    """The verdict of each comparison read off the interval that decides it.

    Parameters
    ----------
    lower, upper : array_like
        Bounds of the gap (candidate - baseline): the primary interval of one comparison, or the
        Bonferroni simultaneous intervals of a family.

    Returns
    -------
    ndarray of str
        ``"improved"`` (lower > 0), ``"regressed"`` (upper < 0) or ``"inconclusive"``: the rule of
        :func:`benchcert.stats.comparisons.pairwise_comparisons`' own verdicts, applied to the
        interval that decides.
    """
    import numpy as np

    from benchcert.stats.comparisons import interval_verdict

    return np.asarray(interval_verdict(lower, upper)).astype(str)


@dataclass(frozen=True)
class CompareRequest(CompareSettings):
    """One ``compare`` question: its own fields, then :class:`CompareSettings`' keyword-only ones
    (alpha, power, variant, hierarchy, lock_timeout, gate, question).

    Attributes
    ----------
    db : Path
        The store.
    benchmark, baseline : str
        The benchmark and the model every candidate is compared against.
    candidates : tuple of str
        The candidates; empty means every other model of the benchmark (variant).
    assume : str
        ``none`` or ``symmetric`` (``--record --question new-subjects`` only: subject gaps symmetric
        about their mean; :mod:`benchcert.tasks.compare.recorded`).
    family : int
        How many such comparisons the verdicts are claimed in a family with (a suite's benchmarks: Holm's
        first step, alpha / family): the MDE beside a verdict is stated at alpha / (family x candidates),
        the level its claim is decided at (``mde_alpha``).
    """

    db: Path
    benchmark: str
    baseline: str
    candidates: tuple[str, ...] = ()
    assume: str = "none"
    family: int = 1


def check_request(request: CompareRequest) -> None:
    """Raise :class:`UsageError` when the request names nothing to compare (before any data is read)."""
    check_options(request.gate or GateOptions())
    if request.hierarchy not in HIERARCHIES:
        raise UsageError(f"hierarchy must be one of {list(HIERARCHIES)}; got {request.hierarchy!r}")
    if request.question not in QUESTION_CHOICES:
        raise UsageError(f"question must be one of {list(QUESTION_CHOICES)}; got {request.question!r}")
    if request.question == "new-subjects" and "subject" not in HIERARCHIES[request.hierarchy]:
        raise UsageError("--question new-subjects needs subjects: it cannot be asked with --hierarchy none")
    if request.baseline in request.candidates:
        raise UsageError(f"the baseline {request.baseline!r} is also a candidate")
    if len(set(request.candidates)) != len(request.candidates):
        raise UsageError(f"a candidate is named twice: {list(request.candidates)}")
    if isinstance(request.family, bool) or not isinstance(request.family, int) or request.family < 1:
        raise UsageError(f"family must be a positive integer; got {request.family!r}")


@dataclass(frozen=True, repr=False)
class ComparisonResult(TableResult):
    """Every candidate against the baseline on one benchmark.

    Attributes
    ----------
    benchmark, variant, baseline : str
        What was compared.
    alpha, power : float
        Level and the power of the minimum detectable effect.
    method, question : str
        The primary interval's method and the question it answers.
    estimand : str
        The gap every verdict and interval is about (item- or subject-weighted, by ``question_key``).
    exact_test : str
        ``mcnemar_exact`` (0/1 scores) or ``sign_test``.
    comparisons : tuple of ComparisonRow
        One typed row per candidate, in the order asked (each also reads as its JSON document,
        NaN as None: ``row["p_values"]``).
    warnings, assumptions : tuple of str
        What the data made of the question, and what the intervals assume.
    gate : GateDecision or None
        The CI gate's decision, when one was asked for.

    Examples
    --------
    >>> import benchcert as bc
    >>> result = bc.example_store().compare("strong", "weak", benchmark="toy", require="non-inferior",
    ...                                     margin=0.02)
    >>> result.estimand.split(":")[0], result.gate.passed
    ('item-weighted mean gap', True)
    >>> result.to_polars().select("candidate", "gap", "verdict").row(0)
    ('strong', 0.25, 'improved')
    """

    benchmark: str
    variant: str
    baseline: str
    alpha: float
    power: float
    method: str
    question: str
    estimand: str
    exact_test: str
    comparisons: tuple[ComparisonRow, ...]
    warnings: tuple[str, ...]
    assumptions: tuple[str, ...]
    gate: GateDecision | None = None
    question_key: str = "items"
    #: Per row, what the deciding test's power rests on (:class:`~benchcert.tasks.compare.more_items.DesignBasis`;
    #: "more items needed" at another level, a suite's): not part of the JSON document.
    bases: tuple = field(default=(), repr=False, compare=False)

    def row(self, candidate: str) -> ComparisonRow:
        """The row of ``candidate``; KeyError naming the candidates when there is none."""
        for r in self.comparisons:
            if r.candidate == candidate:
                return r
        raise KeyError(f"{candidate!r} is not a candidate here; the candidates are "
                       f"{[r.candidate for r in self.comparisons]}")

    def to_polars(self):
        """One row per candidate: gap, the interval that decides (with its method), p-value, MDE and the level it
        is stated at (``mde_alpha``), shared and excluded items, verdict."""
        import polars as pl

        schema = {"candidate": pl.String, "baseline": pl.String, "gap": pl.Float64, "lower": pl.Float64,
                  "upper": pl.Float64, "interval_method": pl.String, "p_value": pl.Float64, "mde": pl.Float64,
                  "mde_alpha": pl.Float64, "n_shared": pl.Int64, "n_excluded": pl.Int64, "verdict": pl.String}
        return pl.DataFrame([r.table_row() for r in self.comparisons], schema=schema)

    def __str__(self) -> str:
        from benchcert.tasks.render.text import comparison_table

        return comparison_table(self)

    def __repr__(self) -> str:
        return f"<ComparisonResult {self._title()}>\n{self}"

    def _title(self) -> str:
        return (f"{self.benchmark!r}: {len(self.comparisons)} candidate(s) against {self.baseline!r}, "
                f"question {self.question_key}")

    def _notes(self) -> list[str]:
        return [f"question: {self.question}", f"estimand: {self.estimand}",
                *(f"warning: {w}" for w in self.warnings[:5])]

    def _chart(self) -> dict | None:
        ivs = [r.deciding_interval for r in self.comparisons]
        return {"labels": [r.candidate for r in self.comparisons],
                "series": [{"name": f"gap, {100 * (1 - self.alpha):g}% interval ({ivs[0].method})",
                            "estimate": [r.gap for r in self.comparisons], "lower": [i.lower for i in ivs],
                            "upper": [i.upper for i in ivs]}] if ivs else [],
                "title": "Gap (candidate - baseline) and the interval that decides its verdict",
                "x_label": "gap", "percent": True}

    @property
    def family_size(self) -> int:
        return len(self.comparisons)

    @property
    def several(self) -> bool:
        """Several candidates: the Bonferroni simultaneous interval decides each verdict."""
        return self.family_size > 1

    def as_dict(self) -> dict:
        """The ``--json`` document (without the gate, which the command line adds with its exit code)."""
        return {"benchmark": self.benchmark, "variant": self.variant, "baseline": self.baseline, "alpha": self.alpha,
                "method": self.method, "question": self.question, "question_key": self.question_key,
                "estimand": self.estimand,
                "family_size": self.family_size, "adjustment": "bonferroni" if self.several else None,
                "comparisons": [r.as_dict() for r in self.comparisons], "warnings": list(self.warnings),
                "assumptions": list(self.assumptions)}


@dataclass(frozen=True)
class RecordedLook:
    """A two-model comparison recorded as the next look of its checkpoint-verdict question.

    Attributes
    ----------
    verdict : CheckpointVerdict
        The look (:func:`benchcert.tasks.compare.verdicts.checkpoint_verdict`).
    gate : GateDecision or None
        The CI gate's decision on the anytime-valid verdict, when one was asked for.
    """

    verdict: object
    gate: GateDecision | None = None


def _load(request: CompareRequest):
    """The matrices of the baseline and the candidates (every other model when none is named)."""
    from benchcert.tasks.compare.verdicts import VerdictError, load_models
    from benchcert.tasks.store.connection import open_store
    from benchcert.tasks.store.matrices import models_with_responses

    baseline, candidates = request.baseline, list(request.candidates)
    with open_store(request.db, write=False, lock_timeout=request.lock_timeout) as con:
        if candidates:
            m = load_models(con, request.benchmark, [baseline, *candidates], request.variant)
        else:
            m0 = load_models(con, request.benchmark, [baseline], request.variant)
            known = models_with_responses(con, request.benchmark, m0.variant)
            candidates = [x for x in known if x != baseline]
            if not candidates:
                raise VerdictError(f"benchmark {request.benchmark!r} has no model besides {baseline!r}")
            m = load_models(con, request.benchmark, [baseline, *candidates], request.variant)
    return m, candidates


def compare_models(request: CompareRequest) -> ComparisonResult:
    """Paired comparisons of every candidate against the baseline, with the gate's decision.

    Raises
    ------
    UsageError
        The request names nothing to compare (:func:`check_request`).
    VerdictError, MatrixError
        An unknown benchmark, variant or model, or a candidate sharing no answered item.
    StoreError
        The store is locked or unusable.
    """
    import numpy as np

    from benchcert.stats.comparisons import adjust_pvalues, family_intervals, pairwise_comparisons
    from benchcert.stats.subject_means import ITEM_WEIGHTED
    from benchcert.tasks.compare.verdicts import VerdictError, opposite_signs

    check_request(request)
    baseline, alpha = request.baseline, request.alpha
    m, candidates = _load(request)
    scores = m.scores
    col = {name: i for i, name in enumerate(m.models)}
    obs = ~np.isnan(scores)
    no_shared = [c for c in candidates if not (obs[:, col[c]] & obs[:, col[baseline]]).any()]
    if no_shared:
        raise VerdictError(f"{no_shared} share no answered item with {baseline!r}; nothing to compare")
    pairs = np.array([[col[baseline], col[c]] for c in candidates])
    clustered = "subject" in HIERARCHIES[request.hierarchy]
    subjects = m.item_subject if clustered and m.subjects.height >= 2 else None
    if request.question == "new-subjects" and subjects is None:
        raise VerdictError(f"--question new-subjects needs at least 2 subjects; {request.benchmark!r} has "
                           f"{m.subjects.height}: ask --question items")
    # items: subjects as fixed strata (the item-weighted gap); new-subjects: the item-level tests are
    # shown for reference, the verdict is the subject means' betting bound below
    primary = None if subjects is None else ("stratified_items" if request.question == "items"
                                             else "clustered_subject")
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        # the MDE at the level each verdict is decided at: Bonferroni over the candidates (and a suite's family)
        r = pairwise_comparisons(scores, subjects, pairs=pairs, alpha=alpha, power=request.power, primary=primary,
                                 mde_alpha=alpha / (len(candidates) * request.family))
    notes = list(dict.fromkeys(str(w.message) for w in rec))
    if clustered and subjects is None:
        notes.insert(0, "a single subject: nothing to cluster over, so intervals are paired CLT")
    many = len(candidates) > 1
    holm = adjust_pvalues(r.p_value, alpha=alpha, method="holm")
    bonf = adjust_pvalues(r.p_value, alpha=alpha, method="bonferroni")
    bh = adjust_pvalues(r.p_value, alpha=alpha, method="bh")
    sim = family_intervals(r, alpha=alpha)
    if r.method == "stratified_items" and np.unique(subjects).size < 30:
        notes.append(f"{np.unique(subjects).size} subjects (fewer than 30): the verdict answers 'is the candidate "
                     "better on this benchmark's items' (subjects as fixed strata); whether the gap generalises to "
                     "new subjects (p_values.clustered_subject) cannot be answered reliably with so few subjects")
    exact = "mcnemar_exact" if "mcnemar_exact" in r.tests else "sign_test"
    rows = []
    for j, cand in enumerate(candidates):
        rows.append({
            "candidate": cand, "baseline": baseline, "verdict": None,
            "gap": _num(r.estimate[j]), "score_candidate": _num(r.mean_b[j]), "score_baseline": _num(r.mean_a[j]),
            "interval": {"method": r.method, "lower": _num(r.lower[j]), "upper": _num(r.upper[j]), "se": _num(r.se[j])},
            "intervals": {name: {"lower": _num(t.lower[j]), "upper": _num(t.upper[j])}
                          for name, t in r.tests.items()
                          if name in ("paired_clt", "clustered_subject", "stratified_items", "hoeffding")},
            "simultaneous_interval": ({"method": "bonferroni", "lower": _num(sim.lower[j]), "upper": _num(sim.upper[j])}
                                      if many else None),
            "p_value": _num(r.p_value[j]),
            "p_values": {name: _num(t.p_value[j]) for name, t in r.tests.items()},
            "p_adjusted": ({"bonferroni": _num(bonf.p_adjusted[j]), "holm": _num(holm.p_adjusted[j]),
                            "bh": _num(bh.p_adjusted[j])} if many else None),
            "exact_test": exact, "mde": _num(r.mde[j]), "mde_alpha": r.mde_alpha, "power": request.power,
            "n_shared": int(r.n[j]), "n_only_candidate": int(r.n_only_b[j]), "n_only_baseline": int(r.n_only_a[j]),
            "n_excluded": int(r.n_excluded[j]),
        })
    # The verdict is the deciding interval's (rows.deciding_interval): the family's simultaneous one
    # (Holm's step-down can reject a pair whose Bonferroni interval still covers 0), else the primary.
    _read_verdicts(rows)
    method, question, estimand, assumptions = r.method, r.question, ITEM_WEIGHTED, tuple(r.assumptions)
    if subjects is not None:
        gaps = both_gaps(scores, subjects, pairs)
        for row, (item_gap, subject_gap) in zip(rows, gaps):
            row["gaps"] = {"item_weighted": _num(item_gap), "subject_weighted": _num(subject_gap)}
            notes += opposite_signs(row["candidate"], item_gap, subject_gap, request.question)
        if request.question == "new-subjects":
            method, question, estimand, assumptions = _subject_verdicts(rows, scores, subjects, pairs, alpha, notes)
            _read_verdicts(rows)
    bases = _bases(r, scores, pairs)
    _add_more_needed(rows, alpha, request.power, request.question, bases)
    typed = tuple(ComparisonRow.from_dict(r) for r in rows)
    return ComparisonResult(
        benchmark=request.benchmark, variant=m.variant, baseline=baseline, alpha=alpha, power=request.power,
        method=method, question=question, estimand=estimand, exact_test=exact, comparisons=typed,
        warnings=tuple(notes), assumptions=assumptions, gate=decide(typed, alpha, request.gate),
        question_key=request.question, bases=bases)


def _bases(r, scores, pairs) -> tuple:
    """Per pair, the :class:`~benchcert.tasks.compare.more_items.DesignBasis` of its deciding test's MDE rule
    (``r.mde_method``): the win counts of a score test, the shared items' differences of the bounded one."""
    import numpy as np

    from benchcert.tasks.compare.more_items import DesignBasis

    rules = np.atleast_1d(r.mde_method)
    nb, na = np.atleast_1d(r.n_b_wins), np.atleast_1d(r.n_a_wins)
    out = []
    for j, (ia, ib) in enumerate(pairs):
        rule = str(rules[j])
        if rule == "score":
            out.append(DesignBasis(rule, float(nb[j]), float(na[j])))
        elif rule == "bounded":
            d = scores[:, ib] - scores[:, ia]
            out.append(DesignBasis(rule, differences=d[~np.isnan(d)]))
        else:
            out.append(DesignBasis(rule))
    return tuple(out)


def _add_more_needed(rows: list[dict], alpha: float, power: float, question: str, bases: tuple) -> None:
    """Each inconclusive row's ``more_items``: how many more items (subjects for new-subjects) of the
    same design would give ``power`` to the test that decides it (:mod:`benchcert.tasks.compare.more_items`)."""
    from benchcert.tasks.compare.more_items import more_needed

    level = alpha / len(rows) if len(rows) > 1 else alpha  # the Bonferroni interval decides a family
    for row, basis in zip(rows, bases):
        if row["verdict"] != "inconclusive":
            row["more_items"] = None
        elif question == "new-subjects":
            row["more_items"] = more_needed(row.get("subject_means_se"), row.get("n_subjects"), row["gap"],
                                            alpha=level, power=power, unit="subjects")
        else:
            row["more_items"] = more_needed(row["interval"]["se"], row["n_shared"], row["gap"], alpha=level,
                                            power=power, mde=row.get("mde"), mde_alpha=row.get("mde_alpha"),
                                            basis=basis)


def _read_verdicts(rows: list[dict]) -> None:
    """Set each row's verdict from the interval that decides it (:func:`deciding_interval`), by
    :func:`interval_verdicts`: the one rule, read off the one interval."""
    from benchcert.tasks.compare.rows import deciding_interval

    for row in rows:
        iv = deciding_interval(row)
        lower, upper = (float("nan") if x is None else x for x in (iv.lower, iv.upper))
        row["verdict"] = str(interval_verdicts([lower], [upper])[0])


def both_gaps(scores, subjects, pairs) -> list[tuple[float, float]]:
    """(item-weighted, subject-weighted) gap of each pair (baseline, candidate) on its shared items."""
    import numpy as np

    from benchcert.stats.subject_means import subject_means

    out = []
    for ia, ib in pairs:
        a, b = scores[:, ia], scores[:, ib]
        shared = ~np.isnan(a) & ~np.isnan(b)
        d = (b - a)[shared]
        _, means, _ = subject_means(d, np.asarray(subjects)[shared])
        out.append((float(d.mean()), float(means.mean())))
    return out


def _best_case_gap(k: int, level: float) -> float | None:
    """The smallest gap the subject-level betting bound can show with ``k`` subjects, in the best
    case (every subject's mean difference exactly that gap); None when no gap in (0, 1] can be shown.
    What the data cannot answer, said as a number: below it the verdict is inconclusive whatever
    the models do."""
    import numpy as np

    from benchcert.stats.betting import betting_mean_bounds

    if k < 2:
        return None
    grid = np.arange(1, 1001) / 1000
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lower = betting_mean_bounds(np.repeat(grid[:, None], k, axis=1), alpha=level).lower
    shown = np.flatnonzero(np.asarray(lower) > 0)
    return float(grid[shown[0]]) if shown.size else None


def _subject_verdicts(rows, scores, subjects, pairs, alpha, notes=None):
    """The new-subjects question: each row's gap, interval, p-value and verdict become the betting
    bound's on the subjects' mean differences (benchcert.stats.betting; Bonferroni over several
    candidates); the item-level tests stay in ``intervals``/``p_values`` for reference."""
    import numpy as np

    from benchcert.stats.betting import betting_mean_bounds
    from benchcert.stats.comparisons import QUESTIONS
    from benchcert.stats.subject_means import SUBJECT_WEIGHTED, subject_means

    level = alpha / len(rows)
    for row, (ia, ib) in zip(rows, pairs):
        a, b = scores[:, ia], scores[:, ib]
        shared = ~np.isnan(a) & ~np.isnan(b)
        _, means, _ = subject_means((b - a)[shared], np.asarray(subjects)[shared])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # fewer than 2 subjects: wide bounds, said by n_subjects
            bb = betting_mean_bounds(means, alpha=level)
        row.update(verdict=str(bb.verdict), gap=_num(bb.estimate), p_value=_num(bb.p_value),
                   p_adjusted=({"bonferroni": _num(min(1.0, bb.p_value * len(rows))), "holm": None, "bh": None}
                               if len(rows) > 1 else None),
                   interval={"method": bb.method, "lower": _num(bb.lower), "upper": _num(bb.upper), "se": None},
                   simultaneous_interval=({"method": "bonferroni", "lower": _num(bb.lower), "upper": _num(bb.upper)}
                                          if len(rows) > 1 else None),
                   mde=None, mde_alpha=None, n_subjects=int(bb.n),
                   subject_means_se=_num(np.std(means, ddof=1) / np.sqrt(means.size)) if means.size > 1 else None)
        floor = _best_case_gap(int(bb.n), level)
        row["best_case_detectable_gap"] = floor
        if notes is not None and bb.verdict == "inconclusive" and (floor is None or abs(bb.estimate) < floor):
            notes.append(
                f"{row['candidate']!r} vs {row['baseline']!r}: with {int(bb.n)} subject(s) the new-subjects bound "
                + ("cannot show any gap" if floor is None else
                   f"cannot show a gap below {100 * floor:.1f} pp even if every subject had the same gap")
                + f" (observed {100 * bb.estimate:+.1f} pp): inconclusive says the data cannot answer this "
                "question; more subjects would (about 5.3 / gap of them at best), or ask --question items")
    bb_assumptions = tuple(bb.assumptions) + (
        "each subject's mean difference over its shared items is unbiased for its gap (items not chosen by score)",)
    return "betting_plugin", QUESTIONS["clustered_subject"], SUBJECT_WEIGHTED, bb_assumptions


def record_look(request: CompareRequest) -> RecordedLook:
    """Record a two-model comparison as the next look of its checkpoint-verdict question.

    The gate reads the anytime-valid verdict and, where there is one, the anytime interval.

    Raises
    ------
    UsageError
        Not exactly one candidate, or the request names nothing to compare.
    VerdictError, MatrixError, StoreError
        As :func:`compare_models`.
    """
    from benchcert.tasks.compare.verdicts import checkpoint_verdict

    check_request(request)
    if len(request.candidates) != 1:
        raise UsageError("--record needs exactly one baseline and one candidate (A B, or --baseline M C)")
    baseline, (candidate,) = request.baseline, request.candidates
    v = checkpoint_verdict(request.db, request.benchmark, baseline, candidate, alpha=request.alpha,
                           variant=request.variant, hierarchy=HIERARCHIES[request.hierarchy], power=request.power,
                           record=True, lock_timeout=request.lock_timeout, question=request.question,
                           assume=request.assume)
    from benchcert.tasks.compare.recorded import deciding_gap, deciding_interval

    lower, upper, key, _ = deciding_interval(v.as_dict())  # the interval of the test that decided (or would)
    row = {"candidate": candidate, "baseline": baseline, "verdict": v.verdict, "gap": deciding_gap(v.as_dict()),
           "interval": {"lower": lower, "upper": upper, "method": v.method if key == "fixed_sample" else key}}
    return RecordedLook(verdict=v, gate=decide([row], request.alpha, request.gate))
