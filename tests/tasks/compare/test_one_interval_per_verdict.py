"""One interval per verdict (issue #36 finding 3): no output shows a decided verdict beside an interval
that covers 0, or an interval that excludes 0 beside "inconclusive".

Over random data (hypothesis): few and many subjects, models that skip whole subjects (so that a pair
shares fewer than 30 subjects and its clustered test is the sign-flip test), 0/1 and fractional
scores, one or several candidates. Checked: ``compare``'s typed rows, its ``--json`` document, its
table (``to_polars``) and the interval its text prints; the audit's comparisons table (primary and
simultaneous intervals) and the report's comparisons section built from it. Before #36 the
clustered interval beside the sign-flip test was CR2's, and the engine's verdict for a sign-flip
primary was the test's while the row's interval was CR2's.
"""

from __future__ import annotations

import os
import warnings
from unittest import mock

import numpy as np
import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchcert.stats.comparisons import pairwise_comparisons
from benchcert.tasks.audit.contract import AuditConfig
from benchcert.tasks.compare import analysis as audit_comparisons
from benchcert.tasks.compare import service
from benchcert.tasks.compare.rows import deciding_interval

from conftest import matrices_from_scores

N = int(os.environ.get("BENCHCERT_HYPOTHESIS_EXAMPLES", "25"))
FAST = settings(max_examples=N, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow])


def _agrees(verdict, lower, upper) -> bool:
    """The one rule: decided exactly when the interval excludes 0, in its direction."""
    if lower is None or upper is None or not (np.isfinite(lower) and np.isfinite(upper)):
        return verdict == "inconclusive"
    want = "improved" if lower > 0 else "regressed" if upper < 0 else "inconclusive"
    return verdict == want


def _data(seed, k, n_subjects, per_subject, fractional, skip):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(2, per_subject + 1, n_subjects)
    subj = np.repeat(np.arange(n_subjects), sizes)
    acc = rng.uniform(0.3, 0.9, k)
    subject_gap = rng.normal(0, 0.1, (n_subjects, k))  # gaps that vary by subject
    p = np.clip(acc + subject_gap[subj], 0.02, 0.98)
    x = rng.random(p.shape)
    scores = np.round(np.clip(p + 0.3 * (x - 0.5), 0, 1), 2) if fractional else (x < p).astype(float)
    if skip:  # each non-baseline model skips whole subjects: its pairs share fewer subjects
        for j in range(1, k):
            gone = rng.random(n_subjects) < skip
            scores[np.isin(subj, np.flatnonzero(gone)), j] = np.nan
    return {f"m{j}": scores[:, j] for j in range(k)}, subj


def _compare(models, subj, question, candidates):
    m = matrices_from_scores(models, subj)
    req = service.CompareRequest(db="unused.duckdb", benchmark="b", baseline="m0", candidates=tuple(candidates),
                                 question=question, hierarchy="subject")
    with mock.patch.object(service, "_load", return_value=(m, list(candidates))), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return service.compare_models(req)


def _check_compare(result) -> None:
    doc = result.as_dict()
    table = result.to_polars()
    for row, js, tab in zip(result.comparisons, doc["comparisons"], table.iter_rows(named=True)):
        iv = row.deciding_interval
        assert _agrees(row.verdict, iv.lower, iv.upper), (row.verdict, iv)
        jiv = deciding_interval(js)  # --json: the interval the document says decides
        assert _agrees(js["verdict"], jiv.lower, jiv.upper), (js["verdict"], jiv)
        assert _agrees(tab["verdict"], tab["lower"], tab["upper"]), tab
    # the printed table shows, per candidate, the deciding interval and the verdict read off it
    text = str(result)
    for row in result.comparisons:
        iv = row.deciding_interval
        line = next(x for x in text.splitlines() if x.startswith(row.candidate + " "))
        assert line.rstrip().endswith(row.verdict)
        assert f"[{100 * iv.lower:6.2f}, {100 * iv.upper:6.2f}]" in line


def _check_audit(models, subj) -> None:
    m = matrices_from_scores(models, subj)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = audit_comparisons.analyze(m, AuditConfig(hierarchy=("subject",)))
    t = out.tables["comparisons"].filter(pl.col("n_shared") > 0)
    for r in t.iter_rows(named=True):
        assert _agrees(r["verdict"], r["simultaneous_lower"], r["simultaneous_upper"]), r
        if t.height == 1:  # a family of one: its own interval is the simultaneous one
            assert _agrees(r["verdict"], r["lower"], r["upper"]), r
    html = out.sections[0].html
    for r in t.iter_rows(named=True):
        assert r["verdict"] in html


@FAST
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(2, 4), n_subjects=st.sampled_from([3, 8, 14, 31, 36]),
       per_subject=st.integers(3, 40), fractional=st.booleans(), skip=st.sampled_from([0.0, 0.3]),
       question=st.sampled_from(["items", "new-subjects"]))
def test_no_output_shows_a_verdict_its_interval_contradicts(seed, k, n_subjects, per_subject, fractional, skip,
                                                             question):
    models, subj = _data(seed, k, n_subjects, per_subject, fractional, skip)
    if any(np.isnan(v).all() for v in models.values()):
        return
    shared = [c for c in list(models)[1:] if (~np.isnan(models[c]) & ~np.isnan(models["m0"])).any()]
    if not shared:
        return
    _check_compare(_compare(models, subj, question, shared))
    _check_compare(_compare(models, subj, question, shared[:1]))
    _check_audit(models, subj)


@FAST
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(2, 4), n_subjects=st.integers(6, 29),
       fractional=st.booleans())
def test_a_sign_flip_primary_reads_its_verdict_off_the_inverted_interval(seed, k, n_subjects, fractional):
    # The engine's own verdict with the clustered question below 30 subjects (the stats API): the
    # interval beside it is the sign-flip test inverted, the verdict is read off it, and where it is
    # decided the test rejects.
    models, subj = _data(seed, k, n_subjects, 30, fractional, 0.0)
    scores = np.column_stack(list(models.values()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = pairwise_comparisons(scores, subj, baseline=0, primary="clustered_subject")
    for v, lo, hi, p in zip(r.verdict, r.lower, r.upper, r.p_value):
        assert _agrees(v, lo, hi), (v, lo, hi, p)
        if v != "inconclusive":
            assert p <= r.alpha


def _recorded_first_look(models, subj, question):
    """The recorded verdict's first look of m1 against m0 (tasks/compare/verdicts.answer_look: pure, no store) as
    summary.json carries it (tasks/audit/results.verdict_entry)."""
    import datetime as dt

    from benchcert.tasks.audit.results import verdict_entry
    from benchcert.tasks.compare.verdicts import LEDGER_SCHEMA, QuestionRecord, VerdictSettings, answer_look

    m = matrices_from_scores(models, subj)
    history = QuestionRecord(looks=pl.DataFrame(), ledger=pl.DataFrame(schema=LEDGER_SCHEMA))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        look = answer_look(m, "m0", "m1", history, VerdictSettings(question=question, hierarchy=("subject",)),
                           now=dt.datetime(2026, 11, 28), record=False)
    return verdict_entry(look.verdict.as_dict()).model_dump()


@FAST
@given(seed=st.integers(0, 2**32 - 1), n_subjects=st.sampled_from([3, 8, 14, 31]), per_subject=st.integers(3, 40),
       fractional=st.booleans(), question=st.sampled_from(["items", "new-subjects"]),
       shift=st.sampled_from([0.0, 0.05, 0.15]))
def test_a_recorded_verdict_row_shows_the_interval_that_decides_it(seed, n_subjects, per_subject, fractional,
                                                                    question, shift):
    """The dashboard's and the report's verdict rows (tasks/render/verdict_rows.py) of a recorded look: the interval
    shown beside the verdict is the deciding test's, so it never contradicts the verdict - where the fixed-sample
    interval at full alpha (the row's number before) excluded 0 beside "inconclusive" after one look."""
    from benchcert.tasks.render.verdict_rows import verdict_view

    models, subj = _data(seed, 2, n_subjects, per_subject, fractional, 0.0)
    models["m1"] = np.clip(models["m1"] + shift * (np.random.default_rng(seed).random(subj.size) < 0.5), 0, 1)
    entry = _recorded_first_look(models, subj, question)
    view = verdict_view(entry, "b")
    assert _agrees(entry["verdict"], view.lower, view.upper), (entry["verdict"], entry["detail"], view.interval_kind)
    if entry["detail"]["decided_by"] == "first_look":  # the first-look test's own interval is stored and shown
        assert view.interval_kind.startswith("first-look interval"), entry["detail"]
