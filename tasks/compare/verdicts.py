r"""Checkpoint verdicts: is the candidate better than the baseline? (anytime-valid, by betting)

:func:`checkpoint_verdict` answers one question - (benchmark, variant, baseline, candidate) -
from the store and records the answer as one *look* in the ``verdicts`` table. Asking the
same question again (every night, or whenever new logs arrive) adds a look; the verdict
stays honest however many looks there are:

* the first look runs the fixed-sample paired test (clustered by subject when the hierarchy
  has subjects) at ``alpha * first_look_share`` - a question asked once keeps most of the
  fixed-sample power;
* every look runs the anytime-valid betting test (benchcert.stats.sequential) at the rest
  of alpha on all items seen so far, so the false-alarm rate over all looks together stays
  <= alpha (union bound; Ville's inequality for the betting part).

Both parts answer the same question, fixed at the first look and named in the verdict
(``question``), and every number the verdict reports - both tests, the anytime interval and the
``gap`` - is about ONE estimand, named in the verdict (``estimand``, recorded in the table):

* with 30 or more subjects (and a hierarchy with subjects): "does the gap generalise to new
  subjects", estimand the SUBJECT-weighted mean gap :math:`\theta_S = E_s[\mu_s]`
  (:math:`\mu_s` = subject s's mean difference; every subject counts once). The first look's
  fixed-sample test is the one-sample t-test on the subjects' mean differences with Hall's (1992)
  skewness correction (:func:`benchcert.stats.subject_means.subject_weighted_gap`, K - 1 df; the
  plain t's false ``improved`` reached 2.0-2.9% at a one-sided 1.25% when small noisy subjects sit
  on one side of the gap, so the verdict's directional claim failed) and ``gap`` is the mean
  of the subject means; the betting test bets on SUBJECTS: each subject enters once, at the look
  where its first item was shared, with the mean difference of its items at that look
  (:func:`benchcert.stats.sequential.subject_entry_means`), whose expectation is
  :math:`\mu_s` however few items it had then, so the betting null is :math:`\theta_S \le 0`.
  Betting on items here was invalid (items of one subject share its gap: 12.5% false alarms at
  alpha = 5% with a between-subject SD of 0.10). Until this version the fixed-sample part and the
  gap were ITEM-weighted (clustered CR2 test) while the betting part was subject-weighted; with
  unequal subject sizes and a gap that moves with size the headline could say ``improved`` with a
  negative gap (tests/tasks/compare/test_verdicts.py). Why not item-weighted throughout: the betting units would
  be subject sums scaled by a cap, which weight a subject by its items at entry rather than by its
  size, and need a cap fixed before the data (benchcert.stats.subject_means explains both).
  Assumption: which subjects are shared at a look does not depend on their gaps. When items arrive
  at random over many looks, small subjects come late and the first look's subjects lean to the
  big ones; with a gap that moves with size the false-alarm rate was 8.8-9.2% at alpha = 5% (30
  looks, 90 subjects, a 36-point swing of the gap with size; 3.2-3.5% with a 20-point swing;
  tests/stats/test_verdicts_estimand.py). The verdict names
  subjects that have items but no shared item;
* with fewer subjects (or hierarchy none): "is the candidate better on this benchmark's items",
  estimand the ITEM-weighted mean gap over the shared items - the fixed-sample test treats subjects
  as fixed strata (paired CLT without subjects) and the betting test bets on items, whose null
  (each look's new items have expected mean difference <= 0) is that question's when every look's
  new items represent the question's items. The strata are fixed with the question at its first
  look: a subject first shared at a later look is a stratum the question never sampled, so its
  items are left out of every number and named in a warning. Pooling them raised false alarms
  7-30% of the time at alpha = 5% when subjects arrived one block per look with gaps that differ
  (tests/stats/test_verdicts_items_arrival.py); no test at the first look can speak for subjects that
  have not arrived.

Each shared item enters the ledger once, at the look where it was first shared, with the
difference it had then; ``verdict_items`` is that ledger. A later look adds only items not
seen before (new items, or items one model had not answered). The fixed-sample
numbers of each look (gap, interval, p-values, MDE) always use every currently shared item
and are reported for information: they are valid for a question asked once.

Both tables are created with ``CREATE TABLE IF NOT EXISTS`` on first use; every statement
uses bound parameters.
"""

from __future__ import annotations

import datetime as dt
import math
import os
from dataclasses import asdict, dataclass, field

import numpy as np
import polars as pl

from benchcert.stats.comparisons import QUESTIONS, default_primary, paired_comparison
from benchcert.stats.sequential import betting_test, betting_test_counts, nightly_verdicts, subject_entry_means
from benchcert.stats.subject_means import METHOD as SUBJECT_METHOD
from benchcert.stats.subject_means import ITEM_WEIGHTED, SUBJECT_WEIGHTED, subject_means, subject_weighted_gap
from benchcert.tasks.store.matrices import BenchmarkMatrices, choose_variant, load_matrices, models_with_responses
from benchcert.tasks.store.connection import DEFAULT_LOCK_TIMEOUT, open_store, query_pl

__all__ = ["CheckpointVerdict", "VerdictError", "checkpoint_verdict", "verdict_history", "load_models",
           "VERDICT_DDL"]

VERDICT_DDL = [
    """CREATE TABLE IF NOT EXISTS verdicts (
        benchmark VARCHAR NOT NULL,
        variant VARCHAR NOT NULL,
        baseline VARCHAR NOT NULL,
        candidate VARCHAR NOT NULL,
        look BIGINT NOT NULL,
        recorded_at TIMESTAMP NOT NULL,
        alpha DOUBLE NOT NULL,
        first_look_share DOUBLE NOT NULL,
        verdict VARCHAR NOT NULL,
        decided_by VARCHAR,
        decided_at_look BIGINT,
        fixed_verdict VARCHAR NOT NULL,
        method VARCHAR NOT NULL,
        gap DOUBLE, lower DOUBLE, upper DOUBLE, se DOUBLE, p_value DOUBLE, p_exact DOUBLE,
        hoeffding_lower DOUBLE, hoeffding_upper DOUBLE, mde DOUBLE, power DOUBLE,
        n_shared BIGINT, n_only_baseline BIGINT, n_only_candidate BIGINT, n_excluded BIGINT,
        n_new BIGINT, n_sequential BIGINT,
        log_e_improved DOUBLE, log_e_regressed DOUBLE, anytime_p DOUBLE, cs_lower DOUBLE, cs_upper DOUBLE,
        first_p_value DOUBLE, first_gap DOUBLE, question VARCHAR, estimand VARCHAR,
        PRIMARY KEY (benchmark, variant, baseline, candidate, look))""",
    """CREATE TABLE IF NOT EXISTS verdict_items (
        benchmark VARCHAR NOT NULL,
        variant VARCHAR NOT NULL,
        baseline VARCHAR NOT NULL,
        candidate VARCHAR NOT NULL,
        item_id VARCHAR NOT NULL,
        look BIGINT NOT NULL,
        d DOUBLE NOT NULL)""",
]

# Stores written before these columns existed gain them (NULL for their old rows).
_MIGRATE = ["ALTER TABLE verdicts ADD COLUMN IF NOT EXISTS question VARCHAR",
            "ALTER TABLE verdicts ADD COLUMN IF NOT EXISTS estimand VARCHAR"]
_COLUMNS = ("benchmark", "variant", "baseline", "candidate", "look", "recorded_at", "alpha", "first_look_share",
            "verdict", "decided_by", "decided_at_look", "fixed_verdict", "method", "gap", "lower", "upper", "se",
            "p_value", "p_exact", "hoeffding_lower", "hoeffding_upper", "mde", "power", "n_shared",
            "n_only_baseline", "n_only_candidate", "n_excluded", "n_new", "n_sequential", "log_e_improved",
            "log_e_regressed", "anytime_p", "cs_lower", "cs_upper", "first_p_value", "first_gap", "question",
            "estimand")

_KEY = "benchmark = ? AND variant = ? AND baseline = ? AND candidate = ?"
# The subjects question's first-look test before the skewness correction (stats/subject_means.py).
_PLAIN_T = "subject_means_t"


class VerdictError(ValueError):
    """The question cannot be answered as asked (unknown model, no shared item, changed alpha)."""


@dataclass(frozen=True)
class CheckpointVerdict:
    """The answer to "is ``candidate`` better than ``baseline`` on ``benchmark``?" at one look.

    ``verdict`` is the headline: valid over every look of this question so far (see the module
    docstring). ``estimand`` names what every number is about (subject- or item-weighted mean
    gap). ``fixed_verdict``, ``gap``, ``lower``/``upper``, ``p_value`` and ``mde`` are this
    look's fixed-sample test of that estimand on every currently shared item of the question
    (valid if the question is asked once): the skewness-corrected t-test on subject means for the
    subjects question, the paired test for the items questions. ``p_exact`` (McNemar / sign test) is
    reported for the items questions only (None for the subjects question: it assumes
    independent items); ``hoeffding_lower``/``hoeffding_upper`` are on items or on subject means
    accordingly. ``n_subjects`` counts the subjects behind the numbers.
    ``cs_lower``/``cs_upper`` are the betting test's anytime-valid interval (at
    its share of alpha), ``anytime_p`` its anytime-valid p-value. ``question`` names what the
    verdict answers (fixed at the first look); ``sequential_unit`` is what the betting test
    bets on ("subject" for the clustered question, else "item") and ``n_sequential_units`` how
    many of them it has seen.
    """

    benchmark: str
    variant: str
    baseline: str
    candidate: str
    look: int
    recorded: bool
    recorded_at: str
    verdict: str
    decided_by: str
    decided_at_look: int | None
    fixed_verdict: str
    alpha: float
    first_look_share: float
    method: str
    gap: float
    lower: float
    upper: float
    se: float
    p_value: float
    p_exact: float | None
    exact_test: str
    hoeffding_lower: float
    hoeffding_upper: float
    mde: float
    power: float
    n_shared: int
    n_only_baseline: int
    n_only_candidate: int
    n_excluded: int
    n_new: int
    n_sequential: int
    e_improved: float
    e_regressed: float
    log_e_improved: float
    log_e_regressed: float
    anytime_p: float
    cs_lower: float | None
    cs_upper: float | None
    first_p_value: float
    first_gap: float
    assumptions: tuple[str, ...] = field(default_factory=tuple)
    warnings: tuple[str, ...] = field(default_factory=tuple)
    question: str = ""
    estimand: str = ""
    n_subjects: int | None = None
    sequential_unit: str = "item"
    n_sequential_units: int = 0

    def as_dict(self) -> dict:
        out = asdict(self)
        out["assumptions"] = list(self.assumptions)
        out["warnings"] = list(self.warnings)
        for k in ("e_improved", "e_regressed"):
            if not math.isfinite(out[k]):
                out[k] = None  # beyond float range: JSON has no infinity
        return out


# --------------------------------------------------------------------------------------
# reading


def load_models(con, benchmark: str, models: list[str], variant: str | None = None) -> BenchmarkMatrices:
    """Matrices of only ``models`` (one variant, replicates averaged), for comparisons.

    Raises :class:`VerdictError` naming the models the benchmark has when one is unknown.
    """
    chosen = choose_variant(con, benchmark, variant)
    known = models_with_responses(con, benchmark, chosen)
    missing = [x for x in models if x not in known]
    if missing:
        raise VerdictError(f"benchmark {benchmark!r} (variant {chosen!r}) has no model(s) {missing}; "
                           f"models: {known}")
    return load_matrices(con, benchmark, chosen, models=list(models))


def _has_tables(con) -> bool:
    rows = con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name IN ('verdicts', "
                       "'verdict_items')").fetchall()
    return rows[0][0] == 2


def verdict_history(db: str | os.PathLike, benchmark: str, baseline: str, candidate: str, *,
                    variant: str = "", lock_timeout: float = DEFAULT_LOCK_TIMEOUT) -> pl.DataFrame:
    """Every recorded look of one question, oldest first (empty if never asked)."""
    with open_store(db, write=False, lock_timeout=lock_timeout) as con:
        if not _has_tables(con):
            return pl.DataFrame()
        return query_pl(con, f"SELECT * FROM verdicts WHERE {_KEY} ORDER BY look",
                        [benchmark, variant, baseline, candidate])


# --------------------------------------------------------------------------------------
# the verdict


def _check_args(alpha, first_look_share, power, hierarchy, baseline, candidate):
    if not isinstance(alpha, (int, float)) or isinstance(alpha, bool) or not 0 < alpha < 1:
        raise VerdictError(f"alpha must be in (0, 1); got {alpha!r}")
    if not isinstance(first_look_share, (int, float)) or isinstance(first_look_share, bool) \
            or not 0 <= first_look_share < 1:
        raise VerdictError(f"first_look_share must be in [0, 1); got {first_look_share!r}")
    if not isinstance(power, (int, float)) or isinstance(power, bool) or not 0 < power < 1:
        raise VerdictError(f"power must be in (0, 1); got {power!r}")
    if tuple(hierarchy) not in (("subject", "domain"), ("subject",), ()):
        raise VerdictError(f"hierarchy must be subject,domain / subject / none; got {hierarchy!r}")
    if baseline == candidate:
        raise VerdictError(f"baseline and candidate must differ; got {baseline!r} twice")


def checkpoint_verdict(db: str | os.PathLike, benchmark: str, baseline: str, candidate: str, *,
                       alpha: float = 0.05, variant: str | None = None,
                       hierarchy: tuple[str, ...] = ("subject", "domain"), power: float = 0.8,
                       first_look_share: float = 0.5, record: bool = True,
                       lock_timeout: float = DEFAULT_LOCK_TIMEOUT) -> CheckpointVerdict:
    """Verdict on ``candidate`` against ``baseline``; with ``record`` it is stored as the next look.

    Parameters
    ----------
    db, benchmark, baseline, candidate
        The store and the question. Model ids are as ingested (a checkpoint is a model id).
    alpha : float
        False-alarm budget over every look of this question. Fixed at the first recorded
        look: asking again with another alpha (or ``first_look_share``) is an error.
    variant : str, optional
        Prompt variant (default: the only one, else the base variant "").
    hierarchy : tuple
        ("subject", "domain") or ("subject",): the fixed-sample test clusters by subject;
        (): paired CLT.
    power : float
        Power at which the minimum detectable effect is reported.
    first_look_share : float in [0, 1)
        Share of alpha for the fixed-sample test at the first look (0 = betting test alone).
    record : bool
        Store this look (False: a dry run that reads earlier looks but writes nothing).

    Raises
    ------
    VerdictError
        Unknown model, no shared item, bad settings, or settings that differ from the
        question's first look.
    benchcert.tasks.store.matrices.MatrixError
        Unknown benchmark or variant.
    benchcert.tasks.store.connection.StoreError
        The store is missing, locked or unusable.
    """
    import warnings as _warnings

    _check_args(alpha, first_look_share, power, hierarchy, baseline, candidate)
    caught: list[str] = []
    with open_store(db, write=record, lock_timeout=lock_timeout) as con:
        m = load_models(con, benchmark, [baseline, candidate], variant)
        ia, ib = m.models.index(baseline), m.models.index(candidate)
        scores = m.scores
        a, b = scores[:, ia], scores[:, ib]
        shared = ~np.isnan(a) & ~np.isnan(b)
        if not shared.any():
            raise VerdictError(f"{candidate!r} and {baseline!r} share no answered item on {benchmark!r}; "
                               "there is nothing to compare")
        subjects = m.item_subject if "subject" in hierarchy and m.subjects.height >= 2 else None
        if "subject" in hierarchy and subjects is None:
            caught.append("a single subject: nothing to cluster over, so the fixed-sample test is the paired CLT")
        key = [benchmark, m.variant, baseline, candidate]
        prev = pl.DataFrame()
        ledger = pl.DataFrame(schema={"item_id": pl.String, "look": pl.Int64, "d": pl.Float64})
        if _has_tables(con):
            prev = query_pl(con, f"SELECT * FROM verdicts WHERE {_KEY} ORDER BY look", key)
            ledger = query_pl(con, f"SELECT item_id, look, d FROM verdict_items WHERE {_KEY} ORDER BY look, item_id",
                              key)
        # The question (and so the primary method, the estimand and the betting unit) is fixed at the first look.
        n_subj_now = None if subjects is None else int(np.unique(subjects[shared]).size)
        primary = _recorded_primary(prev, subjects is not None)
        if primary is None:
            primary = "paired_clt" if subjects is None else default_primary(n_subj_now)
        if primary == "stratified_items":
            # Subjects are fixed strata, fixed with the question at its first look: a subject first
            # shared at a later look is a stratum the question never sampled, not more of the same
            # items (betting on its items as if they were raised false alarms far above alpha when
            # subjects' gaps differ and arrive subject by subject; tests/stats/test_verdicts_items_arrival.py).
            item_ids_all = m.items["item_id"].to_numpy()
            if ledger.height:
                first_ids = set(ledger.filter(pl.col("look") == 1)["item_id"].to_list())
                strata = np.unique(subjects[np.isin(item_ids_all, list(first_ids))])
            else:
                strata = np.unique(subjects[shared])
            outside = ~np.isin(subjects, strata) & (~np.isnan(a) | ~np.isnan(b))
            if outside.any():
                n_out = int(np.unique(subjects[outside]).size)
                caught.append(f"{n_out} subject(s) ({int((outside & shared).sum())} shared item(s)) were not shared at "
                              f"this question's first look: the items question is about the {strata.size} subjects "
                              "it had then (fixed strata), so their items are left out of every number here; ask "
                              "about them as a question of their own once they are in")
                a, b = np.where(outside, np.nan, a), np.where(outside, np.nan, b)
                shared = shared & ~outside
            n_subj_now = int(strata.size)
            caught.append(f"{n_subj_now} subjects (fewer than 30): the verdict answers 'is "
                          "the candidate better on this benchmark's items' (subjects as fixed strata); whether the gap "
                          "generalises to new subjects cannot be answered reliably with so few subjects")
        if primary == "clustered_subject":
            answered = ~np.isnan(a) | ~np.isnan(b)
            uncovered = np.setdiff1d(np.unique(subjects[answered]), np.unique(subjects[shared])).size
            if uncovered:
                caught.append(f"{uncovered} subject(s) have items one model answered but no shared item: the verdict "
                              f"is about subjects like the {n_subj_now} with shared items, which stand for all "
                              "subjects only if which subjects are covered does not depend on their gaps (it can: "
                              "when items arrive at random over many looks, small subjects come late, and a gap that "
                              "varies with subject size then biases the early looks)")
        with _warnings.catch_warnings(record=True) as rec:
            _warnings.simplefilter("always")
            fixed = paired_comparison(a, b, subjects, alpha=alpha, power=power, primary=primary)
            fx = _fixed_part(fixed, a, b, shared, subjects, primary, alpha, power)
            caught += [str(w.message) for w in rec]
        if prev.height:
            first = prev.row(0, named=True)
            if first["alpha"] != alpha or first["first_look_share"] != first_look_share:
                raise VerdictError(
                    f"this question was first asked with alpha={first['alpha']} and first_look_share="
                    f"{first['first_look_share']}; its guarantee holds only if they stay fixed - ask with those "
                    f"(got alpha={alpha}, first_look_share={first_look_share})")
        look = prev.height + 1
        item_ids = m.items["item_id"].to_numpy()
        seen = set(ledger["item_id"].to_list())
        new_mask = shared & ~np.isin(item_ids, list(seen)) if seen else shared
        # A stable, content-free order inside a look; the test's result does not depend on it.
        new_ids = item_ids[new_mask]
        new_d = (b - a)[new_mask]
        d_all = np.concatenate([ledger["d"].to_numpy(), new_d]).astype(float)
        # Items per look; a look that added no item has no ledger rows but still counts as a look.
        per_look = dict(ledger.group_by("look").len().iter_rows()) if ledger.height else {}
        cum = np.cumsum([per_look.get(k, 0) for k in range(1, look)] + [new_d.size]).astype(np.int64)
        seq_alpha = alpha * (1 - first_look_share)
        with _warnings.catch_warnings(record=True) as rec:
            _warnings.simplefilter("always")
            if primary == "clustered_subject":
                subj_of = dict(zip(item_ids.tolist(), m.item_subject.tolist()))
                ids_all = np.concatenate([ledger["item_id"].to_numpy(), new_ids]).astype(str)
                looks_all = np.concatenate([ledger["look"].to_numpy(), np.full(new_d.size, look)]).astype(np.int64)
                units = subject_entry_means(d_all, np.array([subj_of[i] for i in ids_all], dtype=np.int64),
                                            looks_all, n_looks=look)
                seq = betting_test(units.estimate, units.looks, alpha=seq_alpha)
                n_units = int(units.looks[-1])
            else:
                seq = _sequential(d_all, cum, seq_alpha, ledger, look)
                n_units = int(cum[-1])
            if prev.height:
                first_p, first_gap = float(prev["first_p_value"][0]), float(prev["first_gap"][0])
                if primary == "clustered_subject" and _recorded_estimand(prev) != SUBJECT_WEIGHTED:
                    # Recorded before the verdict answered one estimand: that first look tested the
                    # item-weighted gap. Its share of alpha stays spent; its decision is not used.
                    first_p = 1.0
                    caught.append("this question's first look was recorded by an earlier version whose "
                                  "fixed-sample test was about the item-weighted gap, not the verdict's "
                                  "subject-weighted one: its decision is not used (its share of alpha stays "
                                  "spent); the verdict rests on the betting test")
                elif primary == "clustered_subject" and str(prev["method"][0]) == _PLAIN_T:
                    # Recorded with the plain t on subject means, whose one-sided error exceeded alpha/2
                    # with skewed subject means: the first look's test is redone on its own items (the
                    # ledger's look 1 is exactly the items shared then) with this version's test.
                    l1 = ledger.filter(pl.col("look") == 1)
                    _, m1, _ = subject_means(l1["d"].to_numpy(),
                                             np.array([subj_of[i] for i in l1["item_id"].to_list()], dtype=np.int64))
                    r1 = subject_weighted_gap(m1, alpha=alpha, power=power)
                    first_p, first_gap = float(r1.p_value), float(r1.estimate)
                    caught.append("this question's first look was recorded by an earlier version with the plain t-test "
                                  "on subject means (its directional error exceeded alpha/2 when subject means are "
                                  "skewed): its test is redone on the first look's items with the skewness-corrected "
                                  "one")
            else:
                first_p, first_gap = float(fx["p_value"]), float(fx["gap"])
            nv = nightly_verdicts(np.float64(first_p), np.float64(first_gap), seq, alpha=alpha,
                                  first_look_share=first_look_share)
            caught += [str(w.message) for w in rec]
        t = -1
        decided_at = int(nv.decided_at)
        verdict = str(np.asarray(nv.verdict)[t])
        now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None, microsecond=0)
        cs_lo = None if seq.lower is None else float(np.asarray(seq.lower)[t])
        cs_hi = None if seq.upper is None else float(np.asarray(seq.upper)[t])
        log_up, log_down = float(np.asarray(seq.log_e_improved)[t]), float(np.asarray(seq.log_e_regressed)[t])
        with np.errstate(over="ignore"):
            e_up, e_down = float(np.exp(log_up)), float(np.exp(log_down))
        if (verdict == "improved" and fx["gap"] <= 0) or (verdict == "regressed" and fx["gap"] >= 0):
            # Possible only at a later look (a sticky decision, this look's estimate of the same
            # estimand on more data): say so rather than print the two side by side.
            caught.append(f"the verdict '{verdict}' was reached at look {decided_at + 1}; this look's gap of the "
                          f"same estimand is {100 * fx['gap']:+.2f} pp - the decision stands (valid over all "
                          "looks) but the evidence has moved against it since")
        seq_assumptions = tuple(units.assumptions) if primary == "clustered_subject" else ()
        out = CheckpointVerdict(
            benchmark=benchmark, variant=m.variant, baseline=baseline, candidate=candidate, look=look,
            recorded=bool(record), recorded_at=now.isoformat() + "Z",
            verdict=verdict, decided_by=str(nv.decided_by),
            decided_at_look=None if decided_at < 0 else decided_at + 1, fixed_verdict=fx["verdict"],
            alpha=alpha, first_look_share=first_look_share, method=fx["method"], gap=fx["gap"],
            lower=fx["lower"], upper=fx["upper"], se=fx["se"], p_value=fx["p_value"],
            p_exact=fx["p_exact"], exact_test=fx["exact_test"],
            hoeffding_lower=fx["hoeffding_lower"], hoeffding_upper=fx["hoeffding_upper"],
            mde=fx["mde"], power=power, n_shared=int(fixed.n), n_only_baseline=int(fixed.n_only_a),
            n_only_candidate=int(fixed.n_only_b), n_excluded=int(fixed.n_excluded), n_new=int(new_d.size),
            n_sequential=int(cum[-1]), e_improved=e_up, e_regressed=e_down, log_e_improved=log_up,
            log_e_regressed=log_down,
            anytime_p=float(np.asarray(seq.p_value)[t]), cs_lower=cs_lo, cs_upper=cs_hi,
            first_p_value=first_p, first_gap=first_gap,
            assumptions=(fx["estimand_note"],) + tuple(nv.assumptions) + seq_assumptions + tuple(fx["assumptions"]),
            question=fixed.question, estimand=fx["estimand"], n_subjects=fx["n_subjects"],
            sequential_unit="subject" if primary == "clustered_subject" else "item", n_sequential_units=n_units,
            warnings=tuple(dict.fromkeys(caught)))
        if record:
            _record(con, out, now, key, new_ids, new_d)
    return out


_ITEMS_ARRIVAL = ("betting on items: each look's new items are a representative sample of the question's items "
                  "(their mean gap has expectation <= the question's under its null), e.g. items arriving at random "
                  "or every subject's items spread over the looks")
_STRATA_ARRIVAL = _ITEMS_ARRIVAL + ("; not so when one look brings only some subjects whose gaps differ - which is why "
                                    "subjects first shared after the first look are left out")
_ITEMS_EXACT_NOTE = ("McNemar / sign test and Hoeffding are on items (independent items): they answer the items "
                     "question, not reported for the subjects question")


def _recorded_primary(prev: pl.DataFrame, have_subjects: bool) -> str | None:
    """The question key recorded at the first look (None on a first look or if unusable now)."""
    if not prev.height:
        return None
    first = prev.row(0, named=True)
    by_text = {v: k for k, v in QUESTIONS.items()}
    primary = by_text.get(first.get("question") or "")
    if primary is None:  # rows recorded before the question column: the method named it
        primary = {_PLAIN_T: "clustered_subject", SUBJECT_METHOD: "clustered_subject"}.get(str(first["method"]),
                                                                                           str(first["method"]))
    if primary not in QUESTIONS or (primary != "paired_clt" and not have_subjects):
        return None
    return primary


def _recorded_estimand(prev: pl.DataFrame) -> str | None:
    return prev.row(0, named=True).get("estimand") if prev.height else None


def _fixed_part(fixed, a, b, shared, subjects, primary, alpha, power) -> dict:
    """This look's fixed-sample numbers, all about the question's estimand.

    Items questions: ``paired_comparison``'s primary test, McNemar/sign test and Hoeffding on
    the shared items (item-weighted gap). Subjects question: the one-sample t-test on the
    subjects' mean differences and Hoeffding on those means (subject-weighted gap,
    :mod:`benchcert.stats.subject_means`); the item-level exact test is not reported.
    """
    if primary != "clustered_subject":
        exact_name = "mcnemar_exact" if "mcnemar_exact" in fixed.tests else "sign_test"
        estimand = ITEM_WEIGHTED
        if primary == "stratified_items":
            estimand += (f", in the {int(np.unique(subjects[shared]).size)} subjects shared at the question's first "
                         "look (fixed strata; a subject first shared later is not part of it)")
        return dict(verdict=str(fixed.verdict), method=str(fixed.method), gap=float(fixed.estimate),
                    lower=float(fixed.lower), upper=float(fixed.upper), se=float(fixed.se),
                    p_value=float(fixed.p_value), p_exact=float(fixed.tests[exact_name].p_value),
                    exact_test=exact_name, hoeffding_lower=float(fixed.tests["hoeffding"].lower),
                    hoeffding_upper=float(fixed.tests["hoeffding"].upper), mde=float(fixed.mde),
                    assumptions=tuple(fixed.assumptions)
                    + (_STRATA_ARRIVAL if primary == "stratified_items" else _ITEMS_ARRIVAL,),
                    estimand=estimand,
                    n_subjects=None if subjects is None else int(np.unique(subjects[shared]).size),
                    estimand_note=f"estimand: {estimand}; the fixed-sample test, the betting test (on items), "
                                  "the anytime interval and the gap are all about it")
    _, means, _ = subject_means((b - a)[shared], subjects[shared])
    r = subject_weighted_gap(means, alpha=alpha, power=power)
    return dict(verdict=str(r.verdict), method=r.method, gap=float(r.estimate), lower=float(r.lower),
                upper=float(r.upper), se=float(r.se), p_value=float(r.p_value), p_exact=None, exact_test="none",
                hoeffding_lower=float(r.hoeffding_lower), hoeffding_upper=float(r.hoeffding_upper),
                mde=float(r.mde), assumptions=tuple(r.assumptions) + (_ITEMS_EXACT_NOTE,), estimand=SUBJECT_WEIGHTED,
                n_subjects=int(r.n_subjects),
                estimand_note=f"estimand: {SUBJECT_WEIGHTED}; the fixed-sample test (skewness-corrected t on subject "
                              "means), the betting test (on subject means), the anytime interval and the gap are all "
                              "about it")


def _sequential(d_all, cum, seq_alpha, ledger, look):
    """Betting test over the ledger plus this look's new items (count path for ternary differences)."""
    if d_all.size == 0:  # cannot happen on a first look (some item is shared); guards later looks too
        raise VerdictError("no item has entered the sequential test")
    if np.all(np.isin(d_all, (-1.0, 0.0, 1.0))):
        pos = np.cumsum(d_all == 1.0)[cum - 1]
        neg = np.cumsum(d_all == -1.0)[cum - 1]
        return betting_test_counts(pos, neg, cum, alpha=seq_alpha)
    return betting_test(d_all, cum, alpha=seq_alpha)


def _record(con, v: CheckpointVerdict, now, key, new_ids, new_d) -> None:
    con.execute("BEGIN TRANSACTION")
    try:
        for stmt in VERDICT_DDL + _MIGRATE:
            con.execute(stmt)
        row = [*key, v.look, now, v.alpha, v.first_look_share, v.verdict, v.decided_by or None, v.decided_at_look,
               v.fixed_verdict, v.method, v.gap, v.lower, v.upper, v.se, v.p_value, v.p_exact, v.hoeffding_lower,
               v.hoeffding_upper, v.mde, v.power, v.n_shared, v.n_only_baseline, v.n_only_candidate, v.n_excluded,
               v.n_new, v.n_sequential, v.log_e_improved, v.log_e_regressed, v.anytime_p, v.cs_lower, v.cs_upper,
               v.first_p_value, v.first_gap, v.question, v.estimand]
        con.execute(f"INSERT INTO verdicts ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(row))})", row)
        if len(new_ids):
            items = pl.DataFrame({"benchmark": key[0], "variant": key[1], "baseline": key[2], "candidate": key[3],
                                  "item_id": new_ids.astype(str), "look": v.look, "d": new_d},
                                 schema={"benchmark": pl.String, "variant": pl.String, "baseline": pl.String,
                                         "candidate": pl.String, "item_id": pl.String, "look": pl.Int64,
                                         "d": pl.Float64})
            con.register("_verdict_items", items.to_arrow())
            con.execute("INSERT INTO verdict_items SELECT benchmark, variant, baseline, candidate, item_id, look, d "
                        "FROM _verdict_items")
            con.unregister("_verdict_items")
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise
