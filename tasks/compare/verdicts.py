r"""Checkpoint verdicts: is the candidate better than the baseline? (anytime-valid, by betting)

:func:`checkpoint_verdict` answers one question - (benchmark, variant, baseline, candidate) -
from the store and records the answer as one *look* in the ``verdicts`` table. Asking the
same question again (every night, or whenever new logs arrive) adds a look; the verdict
stays honest however many looks there are:

Since issue #36 a question first recorded is answered by the tests of
:mod:`benchcert.tasks.compare.recorded` (items: the stratified test of the store's item-weighted
gap at the first look, betting on the items reweighted to the store after it; new-subjects: one
anytime-valid test with all of alpha, ``--assume symmetric`` optional), named in ``first_method``.
Questions recorded earlier keep the tests below:

* the first look runs a fixed-sample directional test at ``alpha * first_look_share``, valid by
  theorem (issue #24; :mod:`benchcert.stats.betting`, recorded as ``first_method``): for
  new-subjects the predictable plug-in betting bound on the subjects' mean differences
  (Waudby-Smith and Ramdas 2024, Section 3), for items a mixture of constant bets on the items,
  valid for the item-weighted gap of independent items whose means differ by subject (AM-GM
  and Markov). Before #24 it was the paired CLT / CR2 test or a skewness-calibrated t, whose
  one-sided level failed in settings a user reaches; looks recorded then have ``first_method``
  NULL and their first-look decision is not used;
* every look runs the anytime-valid betting test (benchcert.stats.sequential) at the rest
  of alpha on all items seen so far, so the false-alarm rate over all looks together stays
  <= alpha (union bound; Ville's inequality for the betting part).

Both parts answer the same question, asked by the user (``question``: ``--question items``, the
default, or ``new-subjects``), fixed at the first look and named in the verdict (``question``,
``question_key``), and every number the verdict reports - both tests, the anytime interval and
the ``gap`` - is about ONE estimand, named in the verdict (``estimand``, recorded in the table).
Until #24 the question was chosen by the number of subjects (new-subjects from 30 on); a pair
recorded so is continued only as the question it was recorded as (asking the other is an error),
so no recorded look changes meaning. When the two estimands' estimates have opposite signs the
verdict says so in a warning.

* ``new-subjects``: "does the gap generalise to new
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
  Since #24 the subjects are bet on in a fixed order unrelated to their gaps (a hash of the
  subject's name), each look using the prefix of that order whose subjects have all entered
  (:func:`benchcert.stats.sequential.subject_entry_means`, ``universe_order``): betting in entry
  order was biased when items arrive at random and the gap moves with size (above);
* ``items`` (or a single subject, or hierarchy none): "is the candidate better on this benchmark's items",
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

:func:`checkpoint_verdict` is the store part (it reads the question's looks and ledger and records
the new look in one transaction, under the store's lock); :func:`answer_look` is the statistics of
one look, a pure function of the matrices and that record. Both tables are defined in
:mod:`benchcert.tasks.store.schema` and created on the first recorded look; every statement uses
bound parameters.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import math
import os
import warnings
import zlib
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace

import numpy as np
import polars as pl

from benchcert.tasks.hierarchy import DEFAULT_HIERARCHY, check_hierarchy
from benchcert.stats.betting import betting_mean_bounds, independent_mean_bounds
from benchcert.stats.comparisons import QUESTIONS, paired_comparison
from benchcert.stats.sequential import betting_test, betting_test_counts, nightly_verdicts, subject_entry_means
from benchcert.stats.subject_means import METHOD as SUBJECT_METHOD
from benchcert.stats.subject_means import ITEM_WEIGHTED, SUBJECT_WEIGHTED, subject_means, subject_weighted_gap
from benchcert.stats.validation import check_unit_interval
from benchcert.tasks.store.matrices import BenchmarkMatrices, choose_variant, load_matrices, models_with_responses
from benchcert.tasks.store.connection import DEFAULT_LOCK_TIMEOUT, open_store
from benchcert.tasks.errors import NoDataError
from benchcert.tasks.store.verdicts import LEDGER_SCHEMA, VERDICT_TABLES, read_question_rows, record_look
from benchcert.tasks.compare import recorded as v2

__all__ = ["CheckpointVerdict", "VerdictError", "VerdictSettings", "QuestionRecord", "Look", "checkpoint_verdict",
           "answer_look", "read_question", "load_models", "VERDICT_TABLES", "QUESTION_KEYS", "opposite_signs"]

#: The questions a user asks (``--question``): the key and its primary method (with subjects).
QUESTION_KEYS = {"items": "stratified_items", "new-subjects": "clustered_subject"}

#: The first look's directional test per question (recorded in ``first_method``).
FIRST_METHODS = {"items": "betting_constant_mixture_items", "new-subjects": "betting_plugin_subject_means"}


def question_key(primary: str) -> str:
    """The ``--question`` a primary method answers (``paired_clt`` and ``stratified_items``: items)."""
    return "new-subjects" if primary == "clustered_subject" else "items"


class VerdictError(NoDataError):
    """The question cannot be answered as asked (unknown model, no shared item, changed alpha; exit code 1)."""


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
    question_key: str = "items"
    first_method: str = ""
    first_lower: float | None = None  # the first-look test's 1 - alpha x share interval: what decides "first_look"
    first_upper: float | None = None

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


@dataclass(frozen=True)
class QuestionRecord:
    """What the store holds about one question: its recorded looks (oldest first) and its item ledger."""

    looks: pl.DataFrame
    ledger: pl.DataFrame  # item_id, look, d: each shared item once, at the look where it entered


def read_question(con, benchmark: str, variant: str, baseline: str, candidate: str) -> QuestionRecord:
    """The recorded looks and the ledger of one question (both empty when it was never recorded)."""
    rows = read_question_rows(con, (benchmark, variant, baseline, candidate))
    if rows is None:
        return QuestionRecord(looks=pl.DataFrame(), ledger=pl.DataFrame(schema=LEDGER_SCHEMA))
    return QuestionRecord(looks=rows[0], ledger=rows[1])


# --------------------------------------------------------------------------------------
# the verdict: the store part


@dataclass(frozen=True)
class VerdictSettings:
    """How a question is answered (see :func:`checkpoint_verdict`); checked when built.

    ``alpha`` and ``first_look_share`` are fixed at the question's first recorded look.
    """

    alpha: float = 0.05
    first_look_share: float = 0.5
    power: float = 0.8
    hierarchy: tuple[str, ...] = DEFAULT_HIERARCHY
    question: str = "items"
    assume: str = "none"

    def __post_init__(self) -> None:
        if self.question not in QUESTION_KEYS:
            raise VerdictError(f"question must be one of {list(QUESTION_KEYS)}; got {self.question!r}")
        if self.assume not in v2.ASSUMES or (self.assume != "none" and self.question != "new-subjects"):
            raise VerdictError(f"assume must be one of {list(v2.ASSUMES)} ('symmetric' with --question new-subjects "
                               f"only); got {self.assume!r} with --question {self.question}")
        if self.question == "new-subjects" and "subject" not in tuple(self.hierarchy):
            raise VerdictError("--question new-subjects needs a hierarchy with subjects (not --hierarchy none)")
        for name, closed in (("alpha", False), ("first_look_share", "left"), ("power", False)):
            try:
                object.__setattr__(self, name, check_unit_interval(name, getattr(self, name), closed=closed))
            except ValueError as exc:
                raise VerdictError(str(exc)) from None
        try:
            object.__setattr__(self, "hierarchy", check_hierarchy(self.hierarchy))
        except ValueError as exc:
            raise VerdictError(str(exc)) from None


def checkpoint_verdict(db: str | os.PathLike, benchmark: str, baseline: str, candidate: str, *,
                       alpha: float = 0.05, variant: str | None = None,
                       hierarchy: tuple[str, ...] = DEFAULT_HIERARCHY, power: float = 0.8,
                       first_look_share: float = 0.5, record: bool = True,
                       lock_timeout: float = DEFAULT_LOCK_TIMEOUT, question: str = "items",
                       assume: str = "none") -> CheckpointVerdict:
    """Verdict on ``candidate`` against ``baseline``; with ``record`` it is stored as the next look.

    Reads the question's earlier looks, answers this look (:func:`answer_look`, which reads and
    writes nothing) and records it, all under one hold of the store's lock.

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
    question : {"items", "new-subjects"}
        What the verdict answers (see the module docstring); fixed at the question's first
        recorded look: asking a recorded question as the other one is an error.
    assume : {"none", "symmetric"}
        ``symmetric`` (new-subjects only): subject gaps symmetric about their mean, for a more
        powerful test (:mod:`benchcert.tasks.compare.recorded`); fixed at the first look.

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
    settings = VerdictSettings(alpha=alpha, first_look_share=first_look_share, power=power, hierarchy=hierarchy,
                               question=question, assume=assume)
    if baseline == candidate:
        raise VerdictError(f"baseline and candidate must differ; got {baseline!r} twice")
    with open_store(db, write=record, lock_timeout=lock_timeout) as con:
        m = load_models(con, benchmark, [baseline, candidate], variant)
        history = read_question(con, benchmark, m.variant, baseline, candidate)
        now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None, microsecond=0)
        look = answer_look(m, baseline, candidate, history, settings, now=now, record=record)
        if record:
            _record(con, look, now)
    return look.verdict


def _record(con, look: Look, now: dt.datetime) -> None:
    """Add the look's row and its new ledger items in one transaction (the tables on first use)."""
    v = look.verdict
    key = [v.benchmark, v.variant, v.baseline, v.candidate]
    row = [*key, v.look, now, v.alpha, v.first_look_share, v.verdict, v.decided_by or None, v.decided_at_look,
           v.fixed_verdict, v.method, v.gap, v.lower, v.upper, v.se, v.p_value, v.p_exact, v.hoeffding_lower,
           v.hoeffding_upper, v.mde, v.power, v.n_shared, v.n_only_baseline, v.n_only_candidate, v.n_excluded,
           v.n_new, v.n_sequential, v.log_e_improved, v.log_e_regressed, v.anytime_p, v.cs_lower, v.cs_upper,
           v.first_p_value, v.first_gap, v.question, v.estimand, v.first_method, v.first_lower, v.first_upper]
    items = None
    if len(look.new_ids):
        items = pl.DataFrame({"benchmark": key[0], "variant": key[1], "baseline": key[2], "candidate": key[3],
                              "item_id": look.new_ids.astype(str), "look": v.look, "d": look.new_d},
                             schema={"benchmark": pl.String, "variant": pl.String, "baseline": pl.String,
                                     "candidate": pl.String, **LEDGER_SCHEMA})
    record_look(con, row, items)


# --------------------------------------------------------------------------------------
# the verdict: the statistics of one look (pure)


@dataclass(frozen=True)
class Look:
    """One look's verdict and the items it adds to the question's ledger (ids and differences)."""

    verdict: CheckpointVerdict
    new_ids: np.ndarray
    new_d: np.ndarray


@dataclass(frozen=True)
class _Scores:
    """The two models' scores by item (NaN: not answered, or outside the question's fixed strata)."""

    a: np.ndarray
    b: np.ndarray
    shared: np.ndarray
    subjects: np.ndarray | None
    item_ids: np.ndarray
    order: np.ndarray | None = None  # every subject code answered by either model, in its fixed betting order
    store_counts: np.ndarray | None = None  # items per subject code answered by either model (the store's weights)


@dataclass(frozen=True)
class _Ledger:
    """The betting test's items: the ledger's, then this look's new ones; ``cum`` counts them per look."""

    new_ids: np.ndarray
    new_d: np.ndarray
    d_all: np.ndarray
    cum: np.ndarray


@contextlib.contextmanager
def _collect(caught: list[str]) -> Iterator[None]:
    """Append the text of every warning the block raises to ``caught``, in order."""
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        yield
        caught += [str(w.message) for w in rec]


def answer_look(m: BenchmarkMatrices, baseline: str, candidate: str, history: QuestionRecord,
                settings: VerdictSettings, *, now: dt.datetime, record: bool) -> Look:
    """The verdict at the question's next look, from the matrices and the question's record.

    Pure: reads and writes nothing; ``now`` is the look's time and ``record`` whether it
    will be stored (both only reported). Raises :class:`VerdictError` when the models share
    no item or the settings differ from the question's first look.
    """
    caught: list[str] = []
    sc = _scores(m, baseline, candidate, settings.hierarchy, caught)
    primary, sc = _question(history, sc, caught, settings.question)
    with _collect(caught):
        fixed = paired_comparison(sc.a, sc.b, sc.subjects, alpha=settings.alpha, power=settings.power,
                                  primary=primary)
        fx = _fixed_part(fixed, sc.a, sc.b, sc.shared, sc.subjects, primary, settings.alpha, settings.power)
    _check_settings_fixed(history.looks, settings)
    look = history.looks.height + 1
    led = _grow_ledger(sc, history.ledger, look)
    try:
        method = v2.scheme(history.looks, question_key(primary), settings.assume)
    except v2.AssumeError as exc:
        raise VerdictError(str(exc)) from None
    with _collect(caught):
        if method is None:  # recorded before #36: its own tests, so no recorded look changes meaning
            seq, n_units, seq_assumptions = _betting(primary, sc, history.ledger, led, look,
                                                     settings.alpha * (1 - settings.first_look_share))
            first_p, first_gap, first_method = _first_look(
                history.looks, _first_claim(primary, sc, fx, settings.alpha * settings.first_look_share), caught)
            share, first_iv = settings.first_look_share, (None, None)  # no first-look interval before #37
        else:
            seq, n_units, seq_assumptions, (first_p, first_gap, *first_iv), share = v2.spend(
                method, primary, sc, history, led, look, settings, fx, _sequential)
            first_method = method
            if question_key(primary) == "items" and sc.subjects is not None:
                fx = {**fx, **v2.store_estimand(sc.store_counts, method)}
                if method != v2.POOLED_ITEMS:  # the batches are reweighted to the store: no look need represent it
                    fx["assumptions"] = tuple(a for a in fx["assumptions"] if a != _STRATA_ARRIVAL)
        nv = nightly_verdicts(np.float64(first_p), np.float64(first_gap), seq, alpha=settings.alpha,
                              first_look_share=share)
    anytime = _anytime_fields(seq, nv)
    moved = (_moved_against(anytime["verdict"], nv.decided_at, fx["gap"]) + _other_estimand(primary, sc, candidate)
             + v2.store_grew(history.looks, sc.store_counts, method))
    out = CheckpointVerdict(
        benchmark=m.benchmark, variant=m.variant, baseline=baseline, candidate=candidate, look=look,
        recorded=bool(record), recorded_at=now.isoformat() + "Z", alpha=settings.alpha,
        first_look_share=settings.first_look_share, power=settings.power, **anytime, **_fixed_fields(fx, fixed),
        n_new=int(led.new_d.size), n_sequential=int(led.cum[-1]), first_p_value=first_p, first_gap=first_gap,
        first_lower=first_iv[0], first_upper=first_iv[1],
        assumptions=tuple(dict.fromkeys((fx["estimand_note"],) + tuple(nv.assumptions) + seq_assumptions
                                        + tuple(fx["assumptions"]))),
        sequential_unit="subject" if primary == "clustered_subject" else "item", n_sequential_units=n_units,
        question_key=question_key(primary), first_method=first_method,
        warnings=tuple(dict.fromkeys(caught + moved)))
    return Look(verdict=out, new_ids=led.new_ids, new_d=led.new_d)


def _scores(m: BenchmarkMatrices, baseline: str, candidate: str, hierarchy: tuple[str, ...],
            caught: list[str]) -> _Scores:
    a, b = m.scores[:, m.models.index(baseline)], m.scores[:, m.models.index(candidate)]
    shared = ~np.isnan(a) & ~np.isnan(b)
    if not shared.any():
        raise VerdictError(f"{candidate!r} and {baseline!r} share no answered item on {m.benchmark!r}; "
                           "there is nothing to compare")
    subjects = m.item_subject if "subject" in hierarchy and m.subjects.height >= 2 else None
    if "subject" in hierarchy and subjects is None:
        caught.append("a single subject: nothing to cluster over, so the fixed-sample test is the paired CLT")
    order = None
    if subjects is not None:
        # new-subjects bets on subjects in an order unrelated to their gaps: by a hash of the name
        names = m.subjects.select(pl.format("{}/{}", "domain", "subject")).to_series().to_list()
        answered = np.unique(subjects[~np.isnan(a) | ~np.isnan(b)])
        order = answered[np.argsort([zlib.crc32(names[c].encode()) for c in answered], kind="stable")]
    counts = None if subjects is None else np.bincount(subjects[~np.isnan(a) | ~np.isnan(b)],
                                                       minlength=m.subjects.height).astype(float)
    return _Scores(a=a, b=b, shared=shared, subjects=subjects, item_ids=m.items["item_id"].to_numpy(), order=order,
                   store_counts=counts)


def _asked_primary(question: str, sc: _Scores) -> str:
    """The primary method of the question asked (items without subjects: the paired CLT)."""
    if question == "new-subjects":
        if sc.subjects is None or np.unique(sc.subjects[sc.shared]).size < 2:
            raise VerdictError("--question new-subjects needs at least 2 subjects with shared items (the units are "
                               "subjects); ask --question items")
        return "clustered_subject"
    return "paired_clt" if sc.subjects is None else "stratified_items"


def _question(history: QuestionRecord, sc: _Scores, caught: list[str], question: str) -> tuple[str, _Scores]:
    """The question's primary method (fixed at its first look, and with it the estimand and the
    betting unit) and the scores it is about.

    A recorded question asked as the other one is an error: its looks (and ledger) answer the
    question they were recorded for - which, before ``--question``, was new-subjects whenever the
    benchmark had 30 or more subjects.
    """
    n_subj_now = None if sc.subjects is None else int(np.unique(sc.subjects[sc.shared]).size)
    primary = _recorded_primary(history.looks, sc.subjects is not None)
    if primary is not None and question_key(primary) != question:
        raise VerdictError(f"this pair's {history.looks.height} recorded look(s) answer --question "
                           f"{question_key(primary)} ({QUESTIONS[primary]}); asked --question {question}. Continue it "
                           f"with --question {question_key(primary)} (its looks keep their meaning), or ask the other "
                           "question on a fresh store")
    if primary is None:
        primary = _asked_primary(question, sc)
    if primary == "stratified_items":
        sc, n_subj_now = _fixed_strata(sc, history.ledger, caught, keep=v2.late_subjects(history.looks))
    if primary == "clustered_subject":
        answered = ~np.isnan(sc.a) | ~np.isnan(sc.b)
        uncovered = np.setdiff1d(np.unique(sc.subjects[answered]), np.unique(sc.subjects[sc.shared])).size
        if uncovered:
            caught.append(f"{uncovered} subject(s) have items one model answered but no shared item: the verdict "
                          f"is about subjects like the {n_subj_now} with shared items, which stand for all "
                          "subjects only if which subjects are covered does not depend on their gaps (it can: "
                          "when items arrive at random over many looks, small subjects come late, and a gap that "
                          "varies with subject size then biases the early looks)")
    return primary, sc


def _fixed_strata(sc: _Scores, ledger: pl.DataFrame, caught: list[str], keep: str = "") -> tuple[_Scores, int]:
    """The items question's scores without the subjects first shared after its first look.

    Subjects are fixed strata, fixed with the question at its first look: a subject first
    shared at a later look is a stratum the question never sampled, not more of the same items
    (betting on its items as if they were raised false alarms far above alpha when subjects'
    gaps differ and arrive subject by subject; tests/stats/test_verdicts_items_arrival.py).
    ``keep`` (questions first recorded since #36: how their betting test counts such subjects,
    :func:`benchcert.tasks.compare.recorded.late_subjects`): their items stay; the verdict's own tests
    (:mod:`benchcert.tasks.compare.recorded`) handle them.
    """
    if ledger.height:
        first_ids = set(ledger.filter(pl.col("look") == 1)["item_id"].to_list())
        strata = np.unique(sc.subjects[np.isin(sc.item_ids, list(first_ids))])
    else:
        strata = np.unique(sc.subjects[sc.shared])
    outside = ~np.isin(sc.subjects, strata) & (~np.isnan(sc.a) | ~np.isnan(sc.b))
    if outside.any() and keep:
        caught.append(f"{int(np.unique(sc.subjects[outside]).size)} subject(s) were not shared at this question's "
                      f"first look: its first look counted them at the worst case; {keep}")
    elif outside.any():
        n_out = int(np.unique(sc.subjects[outside]).size)
        caught.append(f"{n_out} subject(s) ({int((outside & sc.shared).sum())} shared item(s)) were not shared at "
                      f"this question's first look: the items question is about the {strata.size} subjects "
                      "it had then (fixed strata), so their items are left out of every number here; ask "
                      "about them as a question of their own once they are in")
        sc = replace(sc, a=np.where(outside, np.nan, sc.a), b=np.where(outside, np.nan, sc.b),
                     shared=sc.shared & ~outside)
    if strata.size < 30:
        caught.append(f"{int(strata.size)} subjects (fewer than 30): the verdict answers 'is "
                      "the candidate better on this benchmark's items' (subjects as fixed strata); whether the gap "
                      "generalises to new subjects cannot be answered reliably with so few subjects")
    return sc, int(strata.size)


def _check_settings_fixed(looks: pl.DataFrame, settings: VerdictSettings) -> None:
    if not looks.height:
        return
    first = looks.row(0, named=True)
    if first["alpha"] != settings.alpha or first["first_look_share"] != settings.first_look_share:
        raise VerdictError(
            f"this question was first asked with alpha={first['alpha']} and first_look_share="
            f"{first['first_look_share']}; its guarantee holds only if they stay fixed - ask with those "
            f"(got alpha={settings.alpha}, first_look_share={settings.first_look_share})")


def _grow_ledger(sc: _Scores, ledger: pl.DataFrame, look: int) -> _Ledger:
    """The ledger plus this look's new shared items (items not in the ledger), and the items per look."""
    seen = set(ledger["item_id"].to_list())
    new_mask = sc.shared & ~np.isin(sc.item_ids, list(seen)) if seen else sc.shared
    # A stable, content-free order inside a look; the test's result does not depend on it.
    new_ids = sc.item_ids[new_mask]
    new_d = (sc.b - sc.a)[new_mask]
    d_all = np.concatenate([ledger["d"].to_numpy(), new_d]).astype(float)
    # Items per look; a look that added no item has no ledger rows but still counts as a look.
    per_look = dict(ledger.group_by("look").len().iter_rows()) if ledger.height else {}
    cum = np.cumsum([per_look.get(k, 0) for k in range(1, look)] + [new_d.size]).astype(np.int64)
    return _Ledger(new_ids=new_ids, new_d=new_d, d_all=d_all, cum=cum)


def _betting(primary: str, sc: _Scores, ledger: pl.DataFrame, led: _Ledger, look: int, seq_alpha: float):
    """The betting test over every look so far, the number of units it has seen and its assumptions.

    The subjects question bets on subjects (each once, at the look of its first shared item,
    with its mean difference then); the items questions bet on items.
    """
    if primary != "clustered_subject":
        return _sequential(led.d_all, led.cum, seq_alpha), int(led.cum[-1]), ()
    units = v2.subject_units(sc, ledger, led, look)
    return _prefix_betting(units, seq_alpha), int(units.looks[-1]), tuple(units.assumptions)


def _prefix_betting(units, seq_alpha):
    """The betting test on the subjects' prefix at each look; looks before the first subject of
    the order has entered hold the capital at 1 (no evidence)."""
    cum = np.asarray(units.looks)
    if cum[-1] == 0:
        seq = betting_test(np.zeros(1), np.array([1]), alpha=seq_alpha)
        zero = np.zeros(cum.size)
        return replace(seq, estimate=np.full(cum.size, np.nan), lower=np.full(cum.size, -1.0),
                       upper=np.full(cum.size, 1.0), log_e_improved=zero, log_e_regressed=zero, e_improved=zero + 1,
                       e_regressed=zero + 1, p_value=zero + 1, verdict=np.full(cum.size, "inconclusive", dtype=object),
                       decided_at=np.array(-1), n=cum)
    start = int(np.argmax(cum > 0))
    seq = betting_test(units.estimate, cum[start:], alpha=seq_alpha)
    if start == 0:
        return seq
    pad = np.zeros(start)
    return replace(seq, estimate=np.concatenate([np.full(start, np.nan), seq.estimate]),
                   lower=np.concatenate([pad - 1, seq.lower]), upper=np.concatenate([pad + 1, seq.upper]),
                   log_e_improved=np.concatenate([pad, seq.log_e_improved]),
                   log_e_regressed=np.concatenate([pad, seq.log_e_regressed]),
                   e_improved=np.concatenate([pad + 1, seq.e_improved]), e_regressed=np.concatenate([pad + 1, seq.e_regressed]),
                   p_value=np.concatenate([pad + 1, seq.p_value]),
                   verdict=np.concatenate([np.full(start, "inconclusive", dtype=object), seq.verdict]),
                   decided_at=np.where(np.asarray(seq.decided_at) >= 0, np.asarray(seq.decided_at) + start, -1), n=cum)


def _first_claim(primary: str, sc: _Scores, fx: dict, a1: float) -> tuple[float, float, str]:
    """The first look's directional test at ``a1`` (alpha x first-look share): (p, gap, method).

    Valid by theorem at the fixed sample (:mod:`benchcert.stats.betting`): new-subjects bets on
    the subjects' mean differences (i.i.d. bounded units; predictable plug-in), items on the
    items with a mixture of constant bets (independent items whose means differ by subject; the
    item-weighted gap, subjects as fixed strata). ``p <= a1`` decides, in the direction of the
    side whose capital crossed; a crossing against the sign of ``gap`` (possible only in
    principle) is not used.
    """
    question = question_key(primary)
    d = (sc.b - sc.a)[sc.shared]
    if a1 <= 0:
        return 1.0, float(fx["gap"]), FIRST_METHODS[question]
    if question == "new-subjects":
        # the subjects in their fixed order, up to the first one with no shared item (module docstring)
        codes, means, _ = subject_means(d, sc.subjects[sc.shared])
        have = np.isin(sc.order, codes)
        prefix = sc.order[:sc.order.size if have.all() else int(np.argmin(have))]
        if prefix.size == 0:
            return 1.0, float(fx["gap"]), FIRST_METHODS[question]
        r = betting_mean_bounds(means[np.searchsorted(codes, prefix)], alpha=a1, n_planned=int(sc.order.size))
        p, direction = float(r.p_value), float(r.direction)
    else:
        r = independent_mean_bounds(d, alpha=a1)
        lp, lm = float(r.log_e_improved[-1]), float(r.log_e_regressed[-1])
        p, direction = min(1.0, 2.0 * math.exp(-max(lp, lm))), float(np.sign(lp - lm))
    if direction * float(fx["gap"]) <= 0:
        p = 1.0
    return p, float(fx["gap"]), FIRST_METHODS[question]


def _first_look(looks: pl.DataFrame, claim: tuple[float, float, str], caught: list[str]) -> tuple[float, float, str]:
    """The first look's directional p-value, gap and method, which the headline keeps spending on."""
    if not looks.height:
        return claim
    first = looks.row(0, named=True)
    first_p, first_gap, method = float(first["first_p_value"]), float(first["first_gap"]), first.get("first_method")
    if not method:
        # Recorded before the first look's directional test was the betting bound: that test (a
        # CLT or a skewness-calibrated t, and before it an item-weighted one) had no finite-sample
        # guarantee. Its share of alpha stays spent; its decision is not used.
        caught.append("this question's first look was recorded by an earlier version whose first-look test had no "
                      "finite-sample directional guarantee: its decision is not used (its share of alpha stays "
                      "spent); the verdict rests on the betting test over all looks. The recorded looks keep "
                      "their question and estimand (columns question, estimand; first_method empty)")
        return 1.0, first_gap, ""
    return first_p, first_gap, str(method)


def _anytime_fields(seq, nv) -> dict:
    """The headline verdict and the betting test's numbers at this (the last) look."""
    decided_at = int(nv.decided_at)
    log_up, log_down = float(np.asarray(seq.log_e_improved)[-1]), float(np.asarray(seq.log_e_regressed)[-1])
    with np.errstate(over="ignore"):
        e_up, e_down = float(np.exp(log_up)), float(np.exp(log_down))
    return dict(verdict=str(np.asarray(nv.verdict)[-1]), decided_by=str(nv.decided_by),
                decided_at_look=None if decided_at < 0 else decided_at + 1, e_improved=e_up, e_regressed=e_down,
                log_e_improved=log_up, log_e_regressed=log_down, anytime_p=float(np.asarray(seq.p_value)[-1]),
                cs_lower=None if seq.lower is None else float(np.asarray(seq.lower)[-1]),
                cs_upper=None if seq.upper is None else float(np.asarray(seq.upper)[-1]))


def _fixed_fields(fx: dict, fixed) -> dict:
    """This look's fixed-sample numbers as :class:`CheckpointVerdict` fields."""
    return dict(fixed_verdict=fx["verdict"], method=fx["method"], gap=fx["gap"], lower=fx["lower"],
                upper=fx["upper"], se=fx["se"], p_value=fx["p_value"], p_exact=fx["p_exact"],
                exact_test=fx["exact_test"], hoeffding_lower=fx["hoeffding_lower"],
                hoeffding_upper=fx["hoeffding_upper"], mde=fx["mde"], n_shared=int(fixed.n),
                n_only_baseline=int(fixed.n_only_a), n_only_candidate=int(fixed.n_only_b),
                n_excluded=int(fixed.n_excluded), question=fixed.question, estimand=fx["estimand"],
                n_subjects=fx["n_subjects"])


def opposite_signs(candidate: str, item_gap: float, subject_gap: float, question: str) -> list[str]:
    """The warning, in words, when the two estimands' estimates point different ways."""
    if item_gap * subject_gap >= 0:
        return []
    asked, other = ("item-weighted", "subject-weighted") if question == "items" else ("subject-weighted",
                                                                                       "item-weighted")
    return [f"{candidate}: the item-weighted gap ({100 * item_gap:+.2f} pp, every item counts once) and the "
            f"subject-weighted gap ({100 * subject_gap:+.2f} pp, every subject counts once) have opposite signs: "
            f"the candidate does better on one and worse on the other. This verdict is about the {asked} gap "
            f"(--question {question}); the {other} one is a different question"]


def _other_estimand(primary: str, sc: _Scores, candidate: str) -> list[str]:
    """The warning when the item- and subject-weighted gaps of this look have opposite signs."""
    if sc.subjects is None:
        return []
    d = (sc.b - sc.a)[sc.shared]
    _, means, _ = subject_means(d, sc.subjects[sc.shared])
    return opposite_signs(candidate, float(d.mean()), float(means.mean()), question_key(primary))


def _moved_against(verdict: str, decided_at, gap: float) -> list[str]:
    """The warning when this look's gap has the other sign than a decision reached earlier."""
    if (verdict == "improved" and gap <= 0) or (verdict == "regressed" and gap >= 0):
        # Possible only at a later look (a sticky decision, this look's estimate of the same
        # estimand on more data): say so rather than print the two side by side.
        return [f"the verdict '{verdict}' was reached at look {int(decided_at) + 1}; this look's gap of the "
                f"same estimand is {100 * gap:+.2f} pp - the decision stands (valid over all "
                "looks) but the evidence has moved against it since"]
    return []


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
        primary = {SUBJECT_METHOD: "clustered_subject"}.get(str(first["method"]), str(first["method"]))
    if primary not in QUESTIONS or (primary != "paired_clt" and not have_subjects):
        return None
    return primary


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


def _sequential(d_all, cum, seq_alpha, margin=0.0):
    """Betting test over the ledger plus this look's new items (count path for ternary differences)."""
    if d_all.size == 0:  # cannot happen on a first look (some item is shared); guards later looks too
        raise VerdictError("no item has entered the sequential test")
    if np.all(np.isin(d_all, (-1.0, 0.0, 1.0))):
        pos = np.cumsum(d_all == 1.0)[cum - 1]
        neg = np.cumsum(d_all == -1.0)[cum - 1]
        return betting_test_counts(pos, neg, cum, alpha=seq_alpha, margin=margin)
    return betting_test(d_all, cum, alpha=seq_alpha, margin=margin)
