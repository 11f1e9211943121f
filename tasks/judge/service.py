"""Judge-scored benchmarks: human-scale scores, judge-human agreement, paired gaps and label plans.

A benchmark scored by a model judge keeps the judge's score in ``score`` and, for a subset of the
responses, a human's score in ``human_score`` (tasks/schemas.py).  This service holds the rules:

* **which items count** for a model: every response the judge scored is a *judged* item; those
  that also carry a human score are the *labelled* items (a response never has a human score
  without a judge score: the ingest refuses such a row);
* **when a human-scale score is given**: at least :data:`~benchcert.stats.ppi.MIN_HUMAN_LABELS`
  labelled items and at least one judged item without a label (PPI++, :func:`stats.ppi.ppi_mean`);
  below it, how many more labels are needed; every judged item labelled: the human labels' own
  t interval (lambda = 0);
* **the MCAR check**: the labelled items' judge scores against the rest's
  (:func:`stats.ppi.labelled_subset_check`), a warning when they differ beyond chance;
* **paired gaps** (``compare --scale human``): the items labelled for both models are the
  labelled set, every other item both were judged on the unlabelled one
  (:func:`stats.ppi.ppi_gap`); the verdict rule is compare's own
  (:func:`benchcert.tasks.compare.service.interval_verdicts`), with the Bonferroni interval
  deciding for several candidates;
* **label planning** (``plan human-labels``): :func:`stats.ppi.plan_human_labels` on the
  observed doubly-scored items.
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchcert.tasks.store import DEFAULT_LOCK_TIMEOUT
from benchcert.stats.degenerate import DegenerateDataWarning
from benchcert.stats.ppi import (ASSURANCE_DRAWS, MAX_ASSURANCE, MCAR, MIN_HUMAN_LABELS, HumanLabelPlan, JudgeAgreement, LabelledSubsetCheck,
                                 PPIMeanResult, judge_agreement, labelled_subset_check, plan_human_labels, ppi_gap,
                                 ppi_mean)
from benchcert.tasks.compare.rows import ComparisonRow
from benchcert.tasks.errors import NoDataError, UsageError, unit_interval_option
from benchcert.tasks.result_types import TableResult
from benchcert.tasks.store.matrices import BenchmarkMatrices

__all__ = ["ModelHumanScale", "HumanGapResult", "HumanLabelsAnswer", "model_scores", "human_scale",
           "agreement", "compare_human", "plan_labels", "labels_needed_sentence", "mcar_warning", "POOLED"]

#: The name of the pooled row of the agreement table (every model's doubly-scored items together).
POOLED = "(all models)"


@dataclass(frozen=True)
class ModelHumanScale:
    """One model's human-scale score, or why there is none.

    ``n_human`` labelled items, ``n_judge`` judged items (the labelled ones included);
    ``result`` is None below :data:`MIN_HUMAN_LABELS` labels (``labels_needed`` more are
    needed); with every judged item labelled it is the human labels' own interval
    (``result.method`` says so).  ``subset_check`` is the MCAR check (None with fewer than 2
    labelled or 2 unlabelled items).
    """

    model: str
    n_human: int
    n_judge: int
    result: PPIMeanResult | None
    labels_needed: int
    subset_check: LabelledSubsetCheck | None

    def as_dict(self) -> dict:
        r, c = self.result, self.subset_check
        out = {"model": self.model, "n_human": self.n_human, "n_judge": self.n_judge,
               "labels_needed": self.labels_needed, "estimate": None, "lower": None, "upper": None, "alpha": None,
               "lam": None, "method": None, "human_only_lower": None, "human_only_upper": None,
               "judge_only_estimate": None, "subset_p_value": None, "subset_suspicious": None}
        if r is not None:
            out.update(estimate=r.estimate, lower=r.lower, upper=r.upper, alpha=r.alpha, lam=r.lam, method=r.method,
                       human_only_lower=r.human_only_lower, human_only_upper=r.human_only_upper,
                       judge_only_estimate=r.judge_only_estimate)
        if c is not None:
            out.update(subset_p_value=c.p_value, subset_suspicious=c.suspicious)
        return out


def labels_needed_sentence(row: ModelHumanScale) -> str:
    """Why a model has no human-scale score, in one sentence."""
    return (f"{row.model!r} has {row.n_human} human label(s): a human-scale score needs at least "
            f"{MIN_HUMAN_LABELS}, so {row.labels_needed} more (drawn at random from its judged items)")


def model_scores(m: BenchmarkMatrices, j: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(human, judge on the labelled items, judge on the other judged items) of model column ``j``."""
    judge = m.scores[:, j]
    human = m.human[:, j] if m.human is not None else np.full(judge.shape, np.nan)
    judged = ~np.isnan(judge)
    labelled = judged & ~np.isnan(human)
    return human[labelled], judge[labelled], judge[judged & ~labelled]


def _one_model(model: str, y: np.ndarray, yh: np.ndarray, yu: np.ndarray, alpha: float) -> ModelHumanScale:
    n, big_n = y.size, yu.size
    check = labelled_subset_check(yh, yu, alpha=alpha) if n >= 2 and big_n >= 2 else None
    if n < MIN_HUMAN_LABELS:
        return ModelHumanScale(model, n, n + big_n, None, MIN_HUMAN_LABELS - n, check)
    if big_n == 0:  # every judged item labelled: lambda = 0 is the human labels' own t interval
        r = ppi_mean(y, yh, yh[:1], alpha=alpha, lam=0.0)
        r = dataclasses.replace(r, n_judge=0, judge_only_estimate=float(yh.mean()),
                                method="human only (every judged item is labelled)")
    else:
        r = ppi_mean(y, yh, yu, alpha=alpha)
    return ModelHumanScale(model, n, n + big_n, r, 0, check)


def human_scale(m: BenchmarkMatrices, *, alpha: float = 0.05) -> list[ModelHumanScale]:
    """Every model's human-scale score (empty when the benchmark carries no human score)."""
    if m.human is None:
        return []
    return [_one_model(name, *model_scores(m, j), alpha) for j, name in enumerate(m.models)]


def agreement(m: BenchmarkMatrices, *, alpha: float = 0.05) -> list[tuple[str, JudgeAgreement]]:
    """Judge-human agreement per model with at least 2 doubly-scored items, then pooled (:data:`POOLED`)."""
    if m.human is None:
        return []
    out, judge_all, human_all = [], [], []
    for j, name in enumerate(m.models):
        y, yh, _ = model_scores(m, j)
        judge_all.append(yh)
        human_all.append(y)
        if y.size >= 2:
            out.append((name, judge_agreement(yh, y, alpha=alpha)))
    pooled_j, pooled_h = np.concatenate(judge_all), np.concatenate(human_all)
    if len(out) > 1 and pooled_h.size >= 2:
        out.append((POOLED, judge_agreement(pooled_j, pooled_h, alpha=alpha)))
    return out


# --------------------------------------------------------------------------- compare --scale human


@dataclass(frozen=True, repr=False)
class HumanGapResult(TableResult):
    """Candidates against a baseline on the human scale (``compare --scale human``).

    ``comparisons`` are typed rows (:class:`~benchcert.tasks.compare.rows.ComparisonRow`) whose JSON
    documents add ``lam`` (PPI++'s weight on the judge), ``n_human``, ``n_judge``, the interval from
    the labels alone and the judge's own gap.
    """

    benchmark: str
    variant: str
    baseline: str
    alpha: float
    method: str
    question: str
    estimand: str
    comparisons: tuple[ComparisonRow, ...]
    warnings: tuple[str, ...]
    assumptions: tuple[str, ...]
    gate: object = None

    def to_polars(self):
        """One row per candidate: the human-scale gap, the interval that decides, lambda, labelled and
        judged items, verdict."""
        import polars as pl

        rows = [{**r.table_row(), "lam": r["lam"], "n_human": r["n_human"], "n_judge": r["n_judge"]}
                for r in self.comparisons]
        return pl.DataFrame(rows, schema={
            "candidate": pl.String, "baseline": pl.String, "gap": pl.Float64, "lower": pl.Float64,
            "upper": pl.Float64, "interval_method": pl.String, "p_value": pl.Float64, "mde": pl.Float64,
            "n_shared": pl.Int64, "n_excluded": pl.Int64, "verdict": pl.String, "lam": pl.Float64,
            "n_human": pl.Int64, "n_judge": pl.Int64})

    def _title(self) -> str:
        return f"{self.benchmark!r} on the human scale: {len(self.comparisons)} candidate(s) against {self.baseline!r}"

    def _notes(self) -> list[str]:
        return [f"question: {self.question}", f"estimand: {self.estimand}", *self.assumptions[:1]]

    def __repr__(self) -> str:
        return f"<HumanGapResult {self._title()}>\n{self.to_polars()}"

    @property
    def several(self) -> bool:
        return len(self.comparisons) > 1

    def as_dict(self) -> dict:
        return {"benchmark": self.benchmark, "variant": self.variant, "baseline": self.baseline, "alpha": self.alpha,
                "scale": "human", "method": self.method, "question": self.question, "estimand": self.estimand,
                "family_size": len(self.comparisons), "adjustment": "bonferroni" if self.several else None,
                "comparisons": [r.as_dict() for r in self.comparisons], "warnings": list(self.warnings),
                "assumptions": list(self.assumptions)}


HUMAN_QUESTION = ("would people score the candidate higher than the baseline on this benchmark's items? (the "
                  "judge's scores on every item both were judged on, corrected by the human labels of the items "
                  "labelled for both; PPI++)")
HUMAN_ESTIMAND = "item-weighted mean human-score gap (candidate - baseline) over the items both models were judged on"


def _gap_row(m: BenchmarkMatrices, base: int, cand: int, alpha: float, notes: list[str], k: int = 1) -> dict:
    name, bname = m.models[cand], m.models[base]
    jc, jb = m.scores[:, cand], m.scores[:, base]
    hc = m.human[:, cand] if m.human is not None else np.full(jc.shape, np.nan)
    hb = m.human[:, base] if m.human is not None else np.full(jc.shape, np.nan)
    both = ~np.isnan(jc) & ~np.isnan(jb)
    lab = both & ~np.isnan(hc) & ~np.isnan(hb)
    rest = both & ~lab
    row = {"candidate": name, "baseline": bname, "n_human": int(lab.sum()), "n_judge": int(both.sum()),
           "verdict": "inconclusive", "gap": None, "interval": {"method": "ppi++ paired gap", "lower": None,
                                                                "upper": None, "se": None},
           "lam": None, "human_only_interval": None, "judge_only_gap": None}
    if lab.sum() < MIN_HUMAN_LABELS or rest.sum() < 1:
        notes.append(f"{name!r} vs {bname!r}: {int(lab.sum())} item(s) labelled for both; a human-scale gap needs at "
                     f"least {MIN_HUMAN_LABELS} labelled and one judged but unlabelled item: no interval, inconclusive")
        return row
    r = ppi_gap(hc[lab], hb[lab], jc[lab], jb[lab], jc[rest], jb[rest], alpha=alpha)
    row.update(gap=r.estimate, interval={"method": r.method, "lower": r.lower, "upper": r.upper, "se": r.se},
               lam=r.lam, human_only_interval={"lower": r.human_only_lower, "upper": r.human_only_upper},
               judge_only_gap=r.judge_only_estimate)
    if k > 1:  # the family's interval (Bonferroni, alpha / k) beside the marginal one, as compare reports them
        s = ppi_gap(hc[lab], hb[lab], jc[lab], jb[lab], jc[rest], jb[rest], alpha=alpha / k)
        row["simultaneous_interval"] = {"method": "bonferroni", "lower": s.lower, "upper": s.upper}
    if r.n_human >= 2 and r.n_judge >= 2:
        for who, col in ((name, cand), (bname, base)):
            c = labelled_subset_check(m.scores[lab, col], m.scores[rest, col], alpha=alpha)
            if c.suspicious:
                notes.append(mcar_warning(who, c))
    return row


def mcar_warning(model: str, c: LabelledSubsetCheck) -> str:
    return (f"{model!r}: the human-labelled items' mean judge score ({c.mean_labelled:.3f}) differs from the other "
            f"items' ({c.mean_unlabelled:.3f}), {c.method} p = {c.p_value:.3g}: the labelled items look chosen, not "
            "drawn at random, and the human-scale interval assumes they were drawn at random")


def compare_human(request) -> HumanGapResult:
    """``compare --scale human``: the PPI++ interval of each candidate's human-scale gap.

    ``request`` is compare's :class:`~benchcert.tasks.compare.service.CompareRequest`.  Each row's
    ``interval`` is at level alpha; with several candidates ``simultaneous_interval`` (Bonferroni,
    alpha / k) stands beside it and decides the verdict, as in ``compare``.  Raises what ``compare``
    raises (UsageError, VerdictError, MatrixError, StoreError).
    """
    from benchcert.tasks.compare.gate import decide
    from benchcert.tasks.compare.rows import deciding_interval
    from benchcert.tasks.compare.service import check_request, interval_verdicts
    from benchcert.tasks.compare.verdicts import VerdictError, load_models
    from benchcert.tasks.store.connection import open_store
    from benchcert.tasks.store.matrices import load_matrices

    check_request(request)
    if request.question != "items":
        raise UsageError("--scale human answers the items question (the human-scale mean gap over this "
                         "benchmark's items); drop --question new-subjects")
    named = [request.baseline, *request.candidates]
    with open_store(request.db, write=False, lock_timeout=request.lock_timeout) as con:
        # Named models: load_models names the benchmark's models when one is unknown.
        m = (load_models(con, request.benchmark, named, request.variant) if request.candidates
             else load_matrices(con, request.benchmark, request.variant))
    if request.baseline not in m.models:
        raise VerdictError(f"benchmark {request.benchmark!r} (variant {m.variant!r}) has no model "
                           f"{request.baseline!r}; models: {m.models}")
    candidates = list(request.candidates) or [x for x in m.models if x != request.baseline]
    if not candidates:
        raise VerdictError(f"benchmark {request.benchmark!r} has no model besides {request.baseline!r}")
    if m.human is None:
        raise VerdictError(f"benchmark {request.benchmark!r} (variant {m.variant!r}) has no human scores; "
                           "ingest some with --map human_score=COLUMN, or compare on the judge's scale")
    col = {name: i for i, name in enumerate(m.models)}
    k = len(candidates)
    notes: list[str] = []
    rows = [_gap_row(m, col[request.baseline], col[c], request.alpha, notes, k) for c in candidates]
    for row in rows:
        # with several candidates the family's (alpha / k) interval decides, as in compare
        iv = deciding_interval(row)
        if iv.lower is not None:
            row["verdict"] = str(interval_verdicts([iv.lower], [iv.upper])[0])
    return HumanGapResult(benchmark=request.benchmark, variant=m.variant, baseline=request.baseline,
                          alpha=request.alpha, method="ppi++ paired gap", question=HUMAN_QUESTION,
                          estimand=HUMAN_ESTIMAND, comparisons=tuple(ComparisonRow.from_dict(r) for r in rows),
                          warnings=tuple(dict.fromkeys(notes)),
                          assumptions=(MCAR, "the same items are labelled for both models",
                                       "items are independent draws (no clustering by subject: --hierarchy does "
                                       "not apply on the human scale)"),
                          gate=decide(rows, request.alpha, request.gate))


# --------------------------------------------------------------------------- plan human-labels


@dataclass(frozen=True)
class HumanLabelsAnswer:
    """``plan human-labels``: labels needed per model for a +-epsilon human-scale interval."""

    benchmark: str
    variant: str
    epsilon: float
    alpha: float
    plans: tuple[tuple[str, HumanLabelPlan], ...]
    skipped: tuple[str, ...]
    assurance: float | None = None
    warnings: tuple[str, ...] = ()  # "model: what the planner fell back to" (a pilot whose labels all agree)

    def as_dict(self) -> dict:
        return {"benchmark": self.benchmark, "variant": self.variant, "epsilon": self.epsilon, "alpha": self.alpha,
                "assurance": self.assurance, "warnings": list(self.warnings),
                "plans": [{"model": name, **{k: (list(v) if isinstance(v, tuple) else v)
                                             for k, v in dataclasses.asdict(p).items()}}
                          for name, p in self.plans],
                "skipped": list(self.skipped)}


def plan_labels(db: str | Path, benchmark: str, *, epsilon: float, alpha: float = 0.05, model: str | None = None,
                variant: str | None = None, lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
                assurance: float | None = None) -> HumanLabelsAnswer:
    """Labels needed for a +-``epsilon`` human-scale interval per model, from the doubly-scored items so far.

    ``assurance`` (in (0, 1)): plan so that that share of (pilot, label set) pairs reach epsilon, the pilot's
    error counted (:func:`~benchcert.stats.ppi.plan_human_labels`); None: the typical outcome.

    Raises UsageError (epsilon or assurance outside (0, 1), assurance above MAX_ASSURANCE), NoDataError (no human scores, unknown
    model), MatrixError / StoreError from the store.
    """
    from benchcert.tasks.store.connection import open_store
    from benchcert.tasks.store.matrices import load_matrices

    unit_interval_option("--epsilon", epsilon)
    if assurance is not None:
        unit_interval_option("--assurance", assurance)
        if assurance > MAX_ASSURANCE:
            raise UsageError(f"--assurance {assurance:g}: at most {MAX_ASSURANCE:.4f} can be planned "
                             f"({ASSURANCE_DRAWS} label sets drawn per n; stats/ppi.py)")
    with open_store(db, write=False, lock_timeout=lock_timeout) as con:
        m = load_matrices(con, benchmark, variant)
    if m.human is None:
        raise NoDataError(f"benchmark {benchmark!r} (variant {m.variant!r}) has no human scores: label a random "
                          "pilot of its judged items and ingest it with --map human_score=COLUMN first")
    if model is not None and model not in m.models:
        raise NoDataError(f"benchmark {benchmark!r} has no model {model!r}; models: {m.models}")
    plans, skipped, notes = [], [], []
    for j, name in enumerate(m.models):
        if model is not None and name != model:
            continue
        y, yh, yu = model_scores(m, j)
        if y.size < 2 or yu.size < 1:
            skipped.append(f"{name!r}: {y.size} labelled and {yu.size} unlabelled judged item(s); a plan needs "
                           "at least 2 labelled (a pilot) and 1 unlabelled")
            continue
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("ignore", RuntimeWarning)  # numpy's, on degenerate moments
            warnings.simplefilter("always", DegenerateDataWarning)  # checked first: the planner's fallbacks are told
            plans.append((name, plan_human_labels(y, yh, np.concatenate([yh, yu]), epsilon=float(epsilon),
                                                  alpha=alpha, assurance=assurance,
                                                  rng=np.random.default_rng([20261128, j]))))
        notes += [f"{name!r}: {w.message}" for w in caught if issubclass(w.category, DegenerateDataWarning)]
    return HumanLabelsAnswer(benchmark=benchmark, variant=m.variant, epsilon=float(epsilon), alpha=alpha,
                             plans=tuple(plans), skipped=tuple(skipped), assurance=assurance, warnings=tuple(notes))
