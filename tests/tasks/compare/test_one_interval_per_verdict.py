"""One interval per verdict (issue #36 finding 3; recorded looks, issue #37): no output shows a decided verdict
beside an interval that covers 0, or an interval that excludes 0 beside "inconclusive".

Over random data (hypothesis): few and many subjects, models that skip whole subjects (so that a pair
shares fewer than 30 subjects and its clustered test is the sign-flip test), 0/1 and fractional
scores, one or several candidates. Checked: ``compare``'s typed rows, its ``--json`` document, its
table (``to_polars``) and the interval its text prints; the audit's comparisons table (primary and
simultaneous intervals) and the report's comparisons section built from it. Before #36 the
clustered interval beside the sign-flip test was CR2's, and the engine's verdict for a sign-flip
primary was the test's while the row's interval was CR2's. Recorded checkpoint verdicts: the first
look, and 2-5 looks of ``compare --record`` on a store that grows between them (its text, --json, the
summary.json entry, the report's verdicts section and the dashboard's verdict row).
"""

from __future__ import annotations

import os
import warnings
from unittest import mock

import numpy as np
import polars as pl
from hypothesis import HealthCheck, event, given, settings
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


def _ingest_look(db, path, models, subj, keep) -> None:
    """Append the items ``keep`` (a boolean mask) of both models to the store: what a nightly adds."""
    from benchcert.tasks.ingest.mapping import parse_mapping
    from benchcert.tasks.ingest.service import ingest_file

    lines = ["model,item_id,subject,domain,score"]
    for name, scores in models.items():
        lines += [f"{name},i{i},s{subj[i]},d{subj[i] % 2},{scores[i]:g}" for i in np.flatnonzero(keep)
                  if not np.isnan(scores[i])]
    path.write_text("\n".join(lines) + "\n")
    assert ingest_file(db, path, benchmark="b", mapping=parse_mapping()).status == "ingested"


def _shown_look(look) -> tuple[str, dict]:
    """What ``compare --record`` prints for ``look`` (flows/cli/compare._show_look): the text and the --json."""
    import contextlib
    import io
    import json
    from types import SimpleNamespace

    from benchcert.flows.cli.compare import _show_look

    out = []
    for as_json in (False, True):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
            _show_look(SimpleNamespace(json=as_json), look)
        out.append(buf.getvalue())
    return out[0], json.loads(out[1])


def _check_recorded_looks(tmp, models, subj, question, batch) -> list[tuple[int, str, str]]:
    """Ask ``compare --record`` once per batch of new items (``batch``: the look at which each item arrives) and
    check every look's outputs; returns (look, verdict, decided_by) per look."""
    import html

    from benchcert.tasks.audit.results import verdict_entry
    from benchcert.tasks.render.sections.audit import verdicts_section
    from benchcert.tasks.render.verdict_rows import verdict_view

    req = service.CompareRequest(db=tmp / "s.duckdb", benchmark="b", baseline="m0", candidates=("m1",),
                                 question=question, hierarchy="subject")
    seen = []
    for j in range(int(batch.max()) + 1):
        if (batch == j).any():  # a look with no new item asks again on the same store
            _ingest_look(req.db, tmp / f"look{j}.csv", models, subj, batch == j)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            look = service.record_look(req)
        v = look.verdict
        assert v.look == j + 1
        seen.append((v.look, v.verdict, v.decided_by or "open"))
        text, doc = _shown_look(look)
        lines = text.splitlines()
        assert lines[0].split(f"look {v.look}: ", 1)[1].startswith(v.verdict), lines[0]
        iv = doc["deciding_interval"]
        assert doc["verdict"] == v.verdict and _agrees(v.verdict, iv["lower"], iv["upper"]), (j + 1, v.verdict, iv)
        if iv["lower"] is not None:
            assert f"interval that decides: [{100 * iv['lower']:.2f}, {100 * iv['upper']:.2f}] pp" in text
        entry = verdict_entry(v.as_dict()).model_dump()  # summary.json's entry, the dashboard's and report's input
        view = verdict_view(entry, "b")
        assert _agrees(entry["verdict"], view.lower, view.upper), (j + 1, entry["verdict"], entry["detail"])
        assert (view.lower, view.upper) == (iv["lower"], iv["upper"])
        page = html.unescape(verdicts_section("b", [entry]).html)
        assert view.interval in page and f" {v.verdict}</span>" in page
    return seen


@settings(max_examples=max(2, N // 3), deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), n_subjects=st.sampled_from([3, 8, 31]), per_subject=st.integers(4, 60),
       fractional=st.booleans(), question=st.sampled_from(["items", "new-subjects"]),
       shift=st.sampled_from([0.0, 0.08, 0.4, -0.4]), looks=st.integers(2, 5))
def test_recorded_verdicts_at_later_looks_show_the_interval_that_decides(tmp_path_factory, seed, n_subjects,
                                                                         per_subject, fractional, question, shift,
                                                                         looks):
    """``compare --record`` asked 2-5 times on a store that grows between the looks (a nightly's new items): at
    every look its text, its --json, the summary.json entry, the report's verdicts section and the dashboard's
    verdict row show the verdict beside the interval that decides it, and never one that contradicts it."""
    models, subj = _data(seed, 2, n_subjects, per_subject, fractional, 0.0)
    models["m1"] = np.clip(models["m1"] + shift, 0, 1)
    batch = np.random.default_rng(seed + 1).integers(0, looks, subj.size)  # the look at which each item arrives
    batch[np.unique(subj, return_index=True)[1]] = 0  # every subject has an item at the first look
    for look, verdict, by in _check_recorded_looks(tmp_path_factory.mktemp("looks"), models, subj, question, batch):
        event(f"look {'1' if look == 1 else '2-5'}: {verdict}, {by}")  # what the search reached


def test_a_verdict_decided_at_a_later_look_shows_the_interval_that_decides(tmp_path):
    """The search above reaches few decided verdicts at later looks (hypothesis favours small data): here the items
    question with a gap of about 8 points on 31 subjects, a tenth of the items at the first look (open) and the
    rest over three more looks (decided by the anytime test), every look checked as above."""
    models, subj = _data(7, 2, 31, 40, False, 0.0)
    models["m1"] = np.clip(models["m1"] + 0.12 * (np.random.default_rng(7).random(subj.size) < 0.7), 0, 1)
    frac = np.random.default_rng(8).random(subj.size)
    batch = np.select([frac < 0.1, frac < 0.4, frac < 0.7], [0, 1, 2], 3)
    batch[np.unique(subj, return_index=True)[1]] = 0  # every subject at the first look (fixed strata)
    seen = _check_recorded_looks(tmp_path, models, subj, "items", batch)
    assert seen[0][1] == "inconclusive" and any(look > 1 and verdict != "inconclusive" for look, verdict, _ in seen), seen


def test_a_first_look_verdict_recorded_without_its_interval_shows_one_that_agrees_when_recorded():
    # A look recorded before issue #37 decided by the first-look test has no first-look interval: the anytime
    # interval when it lies on the verdict's side of 0, else the fixed-sample one, named as not the verdict's;
    # the dashboard passes summary.json's verdict (its detail has none) and the gate reads the same interval
    from benchcert.tasks.compare.gate import GateOptions, decide
    from benchcert.tasks.compare.recorded import deciding_interval as recorded_interval
    from benchcert.tasks.render.verdict_rows import verdict_view

    old = {"decided_by": "first_look", "look": 2, "gap": 0.04, "lower": 0.02, "upper": 0.06,
           "cs_lower": 0.005, "cs_upper": 0.08, "first_look_share": 0.5}
    assert recorded_interval({**old, "verdict": "improved"})[:3] == (0.005, 0.08, "anytime")
    assert recorded_interval(old, "improved")[:3] == (0.005, 0.08, "anytime")
    view = verdict_view({"kind": "checkpoint", "model": "c", "baseline": "b", "verdict": "improved", "detail": old})
    assert (view.lower, view.upper) == (0.005, 0.08) and "first-look test decided" in view.interval_kind
    covers = {**old, "cs_lower": -0.01}
    lo, hi, key, name = recorded_interval(covers, "improved")
    assert (lo, hi, key) == (0.02, 0.06, "fixed_sample") and "not recorded" in name
    below = {**old, "cs_lower": -0.08, "cs_upper": -0.005}
    assert recorded_interval(below, "improved")[2] == "fixed_sample"  # the anytime interval on the other side
    assert recorded_interval(below, "regressed")[:3] == (-0.08, -0.005, "anytime")
    for detail, method in ((old, "anytime"), (covers, "fixed_sample")):
        lo, hi, key, _ = recorded_interval(detail, "improved")
        row = {"candidate": "c", "baseline": "b", "verdict": "improved", "gap": 0.04,
               "interval": {"lower": lo, "upper": hi, "method": key}}
        gate = decide([row], 0.05, GateOptions(require="non-inferior", margin=0.001))
        assert gate.passed == (lo > -0.001) and key == method


def test_the_gap_beside_a_first_look_interval_is_the_first_looks_own():
    # A verdict the first-look test decided, seen at look 3: its interval is the first look's, so the gap
    # beside it is the first look's too (here -3 pp in [-5, -1]), not look 3's fixed-sample -0.5 pp, which
    # that interval does not contain. An anytime-decided verdict keeps the look's gap beside its interval.
    from benchcert.tasks.compare.recorded import deciding_gap
    from benchcert.tasks.render.verdict_rows import verdict_view

    first = {"decided_by": "first_look", "look": 3, "gap": -0.005, "lower": -0.02, "upper": 0.01,
             "first_gap": -0.03, "first_lower": -0.05, "first_upper": -0.01, "first_look_share": 0.5,
             "cs_lower": -0.06, "cs_upper": 0.02}
    assert deciding_gap(first) == -0.03
    view = verdict_view({"kind": "checkpoint", "model": "c", "baseline": "b", "verdict": "regressed",
                         "detail": first})
    assert view.gap_value == -0.03 and view.lower <= view.gap_value <= view.upper
    anytime = {**first, "decided_by": "anytime"}
    assert deciding_gap(anytime) == -0.005
