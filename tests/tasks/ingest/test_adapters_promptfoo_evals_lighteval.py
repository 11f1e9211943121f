"""promptfoo, OpenAI evals and lighteval logs: detection, the tool's own numbers, bad input.

The fixtures were made by the real tools (promptfoo 0.121.20, evals 3.0.1.post1's oaieval,
lighteval 0.13.0; commands in tests/data/native/SOURCE.txt, inputs in
tests/data/native_generators/).  Every reference value is read from the tool's own summary in the
same run, never from benchcert: promptfoo's ``results.stats`` and ``results.prompts[].metrics``
(pass counts, sums of named scores), the OpenAI evals log's ``final_report`` line, lighteval's
``results_<date>.json`` (``results[<task>][<metric>]``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import benchcert as bc
from benchcert.tasks.ingest.adapters import registry
from benchcert.tasks.ingest.adapters.detect import sniff, walk
from benchcert.tasks.ingest.adapters.native import NativeMapping
from benchcert.tasks.ingest.mapping import ColumnMapping
from benchcert.tasks.ingest.service import ingest_file
from benchcert.tasks.store.connection import open_store
from benchcert.tasks.store.matrices import load_matrices

from conftest import TESTS

NATIVE = TESTS / "data" / "native"
PROMPTFOO_JSON = NATIVE / "promptfoo" / "results.json"
PROMPTFOO_JSONL = NATIVE / "promptfoo" / "results.jsonl"
EVALS = NATIVE / "openai_evals"
LIGHTEVAL = NATIVE / "lighteval"
DETAILS = sorted((LIGHTEVAL / "details").rglob("*.parquet"))
RESULTS = sorted((LIGHTEVAL / "results").rglob("results_*.json"))


def ingest(db, path, benchmark=None, **options):
    mapping = NativeMapping(**options) if options else ColumnMapping()
    return ingest_file(db, path, benchmark=benchmark, mapping=mapping)


def model_means(db, benchmark) -> dict[str, float]:
    """Per-model mean as benchcert stores it: replicates averaged per item, then items averaged."""
    with open_store(db, write=False) as con:
        m = load_matrices(con, benchmark, None)
    per_item = m.long.group_by("model", "item_id").agg(pl.col("score").mean())
    return dict(per_item.group_by("model").agg(pl.col("score").mean()).iter_rows())


def audit_pooled(db, benchmark, artifacts) -> dict[str, float]:
    with bc.Store(db, artifacts=artifacts, prefect=False) as store:
        return {m.model: m.pooled.estimate for m in store.audit(benchmark).models}


def promptfoo_summary() -> dict:
    return json.loads(PROMPTFOO_JSON.read_text())["results"]


def final_report(path: Path) -> dict:
    (report,) = [json.loads(t)["final_report"] for t in path.read_text().splitlines() if '"final_report"' in t]
    return report


# --- detection and the registry ------------------------------------------------------------

@pytest.mark.parametrize("path, kind", [
    (PROMPTFOO_JSON, "promptfoo"), (PROMPTFOO_JSONL, "promptfoo"),
    *[(p, "openai_evals") for p in sorted(EVALS.glob("*.jsonl"))],
    *[(p, "lighteval") for p in DETAILS], *[(p, "lighteval_results") for p in RESULTS],
])
def test_detection_reads_content(tmp_path, path, kind):
    assert sniff(path) == kind
    renamed = tmp_path / "renamed.txt"  # the name says nothing: the content decides
    shutil.copy(path, renamed)
    assert sniff(renamed) == kind


def test_the_formats_are_registered_and_offered_by_the_command_line():
    from benchcert.flows.cli import build_parser

    for name in ("promptfoo", "openai_evals", "lighteval"):
        assert name in registry.format_names() and registry.adapter(name).options == ("metric",)
    ingest_parser = build_parser()._subparsers._group_actions[0].choices["ingest"]
    (fmt,) = [a for a in ingest_parser._actions if a.dest == "format"]
    assert {"promptfoo", "openai_evals", "lighteval"} <= set(fmt.choices)


def test_a_plain_parquet_table_is_still_the_generic_reader(tmp_path):
    table = tmp_path / "t.parquet"
    pl.DataFrame({"model": ["m"], "item_id": ["1"], "score": [1.0]}).write_parquet(table)
    assert sniff(table) is None


# --- promptfoo -------------------------------------------------------------------------------

def test_promptfoo_pass_rates_match_promptfoos_counts_through_ingest_and_audit(tmp_path):
    summary = promptfoo_summary()
    expected = {p["provider"]: p["metrics"]["testPassCount"] / (p["metrics"]["testPassCount"]
                                                                 + p["metrics"]["testFailCount"]
                                                                 + p["metrics"]["testErrorCount"])
                for p in summary["prompts"]}
    assert expected == {"echo": 0.0, "canned-sharp": 0.8, "canned-sloppy": 0.4}  # promptfoo's own printout
    db = tmp_path / "s.duckdb"
    r = ingest(db, PROMPTFOO_JSON)
    assert (r.status, r.rows_added) == ("ingested", 30), r.message
    assert "12 successes, 18 failures, 0 errors" in r.message
    means = model_means(db, "capitals")
    assert means == pytest.approx(expected, abs=1e-12)
    assert sum(means.values()) * 10 == pytest.approx(summary["stats"]["successes"])
    assert audit_pooled(db, "capitals", tmp_path / "art") == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("metric", ["correct", "brevity"])
def test_promptfoo_named_metrics_match_promptfoos_sums(tmp_path, metric):
    summary = promptfoo_summary()
    expected = {p["provider"]: p["metrics"]["namedScores"][metric] / p["metrics"]["namedScoresCount"][metric]
                for p in summary["prompts"]}
    db = tmp_path / "s.duckdb"
    assert ingest(db, PROMPTFOO_JSON, metric=metric).status == "ingested"
    assert model_means(db, "capitals") == pytest.approx(expected, abs=1e-12)
    assert 0 < expected["canned-sharp"] < 1  # brevity: fractional scores, correct: 9 of 10


def test_promptfoo_jsonl_gives_the_rows_of_results_json(tmp_path):
    a, b = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    assert ingest(a, PROMPTFOO_JSON, metric="score").status == "ingested"
    refused = ingest(b, PROMPTFOO_JSONL)
    assert refused.status == "error" and "--benchmark" in refused.message  # a .jsonl names no eval
    assert ingest(b, PROMPTFOO_JSONL, benchmark="capitals", metric="score").status == "ingested"
    rows = []
    for db in (a, b):
        with open_store(db, write=False) as con:
            rows.append(load_matrices(con, "capitals", None).long.select("model", "item_id", "score")
                        .sort("model", "item_id"))
    assert rows[0].equals(rows[1]) and rows[0].height == 30


def test_promptfoo_item_from_a_test_variable_and_several_prompts_as_variants(tmp_path):
    doc = json.loads(PROMPTFOO_JSON.read_text())
    extra = json.loads(json.dumps(doc["results"]["results"]))
    for res in extra:  # the same tests under a second prompt template
        res["promptId"], res["prompt"] = "f" * 64, {"raw": "?", "label": "Capital of {{country}}?"}
    doc["results"]["results"] += extra
    two = tmp_path / "two.json"
    two.write_text(json.dumps(doc))
    db = tmp_path / "s.duckdb"
    r = ingest_file(db, two, benchmark=None, mapping=NativeMapping(columns={"item_id": "vars.country"}))
    assert r.status == "ingested" and r.rows_added == 60, r.message
    with open_store(db, write=False) as con:
        variants = sorted(v for (v,) in con.execute("SELECT DISTINCT variant FROM responses").fetchall())
        items = {i for (i,) in con.execute("SELECT DISTINCT item_id FROM items").fetchall()}
    assert variants == ["Capital of {{country}}?", "What is the capital of {{country}}? Answer with the city only."]
    assert "Kenya" in items and "0" not in items


def test_promptfoo_provider_error_scores_zero_and_is_a_reject_under_a_named_metric(tmp_path):
    doc = json.loads(PROMPTFOO_JSON.read_text())
    res = doc["results"]["results"][0]
    res.update(success=False, score=0, error="connection refused", failureReason=2, gradingResult=None,
               namedScores={})
    path = tmp_path / "err.json"
    path.write_text(json.dumps(doc))
    r = ingest(tmp_path / "a.duckdb", path)
    assert r.status == "ingested" and "1 result(s) whose provider failed (scored 0" in r.message
    r = ingest(tmp_path / "b.duckdb", path, metric="correct")
    assert r.status == "rejected"
    assert (r.rejects[0]["line"], r.rejects[0]["field"]) == (1, "namedScores.correct")
    assert "provider failed" in r.rejects[0]["reason"]


# --- OpenAI evals ----------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["canned-sharp_capitals.jsonl", "canned-sloppy_capitals.jsonl",
                                  "canned-sharp_capitals-match.jsonl", "canned-sloppy_capitals-match.jsonl"])
def test_openai_evals_match_accuracy_is_the_final_reports(tmp_path, name):
    path = EVALS / name
    report = final_report(path)
    db = tmp_path / "s.duckdb"
    r = ingest(db, path)
    assert (r.status, r.rows_added) == ("ingested", 12), r.message
    spec = json.loads(path.read_text().splitlines()[0])["spec"]
    (model,) = spec["completion_fns"]
    assert model_means(db, spec["eval_name"]) == pytest.approx({model: report["accuracy"]}, abs=1e-12)
    assert audit_pooled(db, spec["eval_name"], tmp_path / "art") == pytest.approx({model: report["accuracy"]},
                                                                                abs=1e-12)


def test_openai_evals_metrics_events_give_the_reports_f1(tmp_path):
    db = tmp_path / "s.duckdb"
    for name in ("canned-sharp_capitals.jsonl", "canned-sloppy_capitals.jsonl"):
        assert ingest(db, EVALS / name, metric="f1_score").status == "ingested"
    expected = {f"canned/{m}": final_report(EVALS / f"canned-{m}_capitals.jsonl")["f1_score"]
                for m in ("sharp", "sloppy")}
    assert expected == pytest.approx({"canned/sharp": 0.75, "canned/sloppy": 0.375})
    assert model_means(db, "capitals.dev.v0") == pytest.approx(expected, abs=1e-12)


def test_openai_evals_several_events_per_sample_are_replicates(tmp_path):
    lines = (EVALS / "canned-sharp_capitals-match.jsonl").read_text().splitlines()
    events = [json.loads(t) for t in lines if '"type": "match"' in t]
    again = [{**e, "event_id": 100 + i, "data": {**e["data"], "correct": True}} for i, e in enumerate(events)]
    path = tmp_path / "twice.jsonl"
    path.write_text("\n".join(lines + [json.dumps(e) for e in again]) + "\n")
    db = tmp_path / "s.duckdb"
    assert ingest(db, path).rows_added == 24
    with open_store(db, write=False) as con:
        assert con.execute("SELECT max(replicate) FROM responses").fetchone() == (1,)
    assert model_means(db, "capitals-match.dev.v0") == pytest.approx({"canned/sharp": (0.75 + 1) / 2})


# --- lighteval -------------------------------------------------------------------------------

def test_lighteval_details_match_lightevals_results_through_ingest_and_audit(tmp_path):
    expected: dict[str, dict[str, float]] = {}
    for results in RESULTS:
        obj = json.loads(results.read_text())
        model = obj["config_general"]["model_name"]
        for task, metric in (("capitals_gen|0", "em"), ("capitals_mc|0", "acc")):
            expected.setdefault(task, {})[model] = obj["results"][task][metric]
    assert expected["capitals_gen|0"] == pytest.approx({"canned-sharp": 0.75, "canned-sloppy": 5 / 12})
    db = tmp_path / "s.duckdb"
    with bc.Store(db, artifacts=tmp_path / "art", prefect=False) as store:
        added = store.ingest(LIGHTEVAL).rows_added
    assert added == 48  # 2 models x 2 tasks x 12 documents; the results files are metadata
    for task, per_model in expected.items():
        assert model_means(db, task) == pytest.approx(per_model, abs=1e-12)
        assert audit_pooled(db, task, tmp_path / "art") == pytest.approx(per_model, abs=1e-12)


def test_lighteval_model_from_the_folder_else_model_option(tmp_path):
    loose = tmp_path / "details_capitals_mc|0_x.parquet"
    shutil.copy(DETAILS[1], loose)
    r = ingest(tmp_path / "a.duckdb", loose)
    assert r.status == "error" and "--model" in r.message and str(loose) in r.message
    nested = tmp_path / "details" / "org" / "name" / "2026-01-02T03-04-05.678901" / loose.name
    nested.parent.mkdir(parents=True)
    shutil.copy(DETAILS[1], nested)
    r = ingest(tmp_path / "b.duckdb", nested)
    assert r.status == "ingested" and "model org/name" in r.message, r.message


def _rewrite_details(src: Path, dst: Path, edit) -> Path:
    rows = pq.read_table(src).to_pylist()
    edit(rows)
    dst.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=pq.read_schema(src)), dst)
    return dst


# --- bad input: file, line and field named, nothing stored -------------------------------------

def _evals_bad_correct(tmp_path):
    lines = (EVALS / "canned-sharp_capitals-match.jsonl").read_text().splitlines()
    number = next(i for i, t in enumerate(lines) if '"type": "match"' in t)
    event = json.loads(lines[number])
    event["data"]["correct"] = "yes"
    lines[number] = json.dumps(event)
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path, {}, number + 1, "data.correct"


def _evals_broken_line(tmp_path):
    lines = (EVALS / "canned-sharp_capitals-match.jsonl").read_text().splitlines()
    lines[4] = lines[4][:40]
    path = tmp_path / "cut.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path, {}, 5, "<row>"


def _promptfoo_jsonl_no_success(tmp_path):
    lines = PROMPTFOO_JSONL.read_text().splitlines()
    obj = json.loads(lines[6])
    del obj["success"]
    lines[6] = json.dumps(obj)
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path, {"benchmark": "capitals"}, 7, "success"


def _promptfoo_bad_test_index(tmp_path):
    doc = json.loads(PROMPTFOO_JSON.read_text())
    doc["results"]["results"][3]["testIdx"] = "three"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    return path, {}, 4, "testIdx"


def _lighteval_null_metric(tmp_path):
    def edit(rows):
        rows[5]["metric"]["acc"] = None

    path = _rewrite_details(DETAILS[1], tmp_path / "details" / "m" / "2026-01-02T03-04-05.1" / DETAILS[1].name, edit)
    return path, {}, 6, "metric.acc"


@pytest.mark.parametrize("build", [_evals_bad_correct, _evals_broken_line, _promptfoo_jsonl_no_success,
                                   _promptfoo_bad_test_index, _lighteval_null_metric])
def test_bad_entries_name_file_line_and_field_and_store_nothing(tmp_path, build):
    path, options, line, field = build(tmp_path)
    db = tmp_path / "s.duckdb"
    benchmark = options.pop("benchmark", None)
    r = ingest(db, path, benchmark=benchmark, **options)
    assert r.status == "rejected", r.message
    assert str(path) in r.message
    assert (r.rejects[0]["line"], r.rejects[0]["field"]) == (line, field), r.rejects[0]
    assert r.rejects[0]["raw"]
    with open_store(db, write=False) as con:
        assert con.execute("SELECT count(*) FROM responses").fetchone() == (0,)


@pytest.mark.parametrize("path, metric, listed", [
    (PROMPTFOO_JSON, "accuracy", "['pass', 'score', 'brevity', 'correct']"),
    (EVALS / "canned-sharp_capitals.jsonl", "bleu", "['match', 'accuracy', 'f1_score']"),
    (DETAILS[0], "acc", "['em']"),
])
def test_an_unknown_metric_is_refused_listing_the_logs_scores(tmp_path, path, metric, listed):
    r = ingest(tmp_path / "s.duckdb", path, metric=metric)
    assert r.status == "error" and str(path) in r.message and listed in r.message, r.message


@pytest.mark.parametrize("text, fragment", [
    ('{"run_id": "x", "event_id": 0, "sample_id": "a.dev.0", "type": "match", "data": {"correct": true}}\n',
     "line 1: expected the run spec"),
])
def test_an_evals_log_without_its_spec_is_refused(tmp_path, text, fragment):
    path = tmp_path / "nospec.jsonl"
    path.write_text(text)
    r = ingest(tmp_path / "s.duckdb", path, benchmark="b")
    assert r.status == "error" and fragment in r.message and str(path) in r.message, r.message


def test_an_evals_log_with_two_runs_is_refused(tmp_path):
    a = (EVALS / "canned-sharp_capitals-match.jsonl").read_text()
    b = (EVALS / "canned-sloppy_capitals-match.jsonl").read_text()
    path = tmp_path / "two.jsonl"
    path.write_text(a + b)
    r = ingest(tmp_path / "s.duckdb", path, format="openai_evals")
    n = len(a.splitlines()) + 1
    assert r.status == "error" and f"line {n}: a second run spec" in r.message, r.message


def test_walk_takes_every_file_of_the_three_formats():
    sources, unknown = walk(NATIVE)
    names = {Path(s).name for s in sources}
    assert {PROMPTFOO_JSON.name, PROMPTFOO_JSONL.name, *(p.name for p in EVALS.glob("*.jsonl")),
            *(p.name for p in DETAILS), *(p.name for p in RESULTS)} <= names
    assert not [u for u in unknown if any(k in u["path"] for k in ("promptfoo", "openai_evals", "lighteval"))]


def test_promptfoo_named_metric_on_some_tests_only_is_refused_unless_rejects_are_allowed(tmp_path):
    doc = json.loads(PROMPTFOO_JSON.read_text())
    results = doc["results"]["results"]
    del results[2]["namedScores"]["brevity"]  # a test case without that assertion
    path = tmp_path / "some.json"
    path.write_text(json.dumps(doc))
    r = ingest(tmp_path / "a.duckdb", path, metric="brevity")
    assert r.status == "rejected" and r.rejects[0]["line"] == 3 and "--allow-rejects" in r.rejects[0]["reason"]
    db = tmp_path / "b.duckdb"
    r = ingest_file(db, path, benchmark=None, mapping=NativeMapping(metric="brevity"), allow_rejects=True)
    assert (r.status, r.rows_added, r.rows_rejected) == ("ingested", 29, 1), r.message
    label = results[2]["provider"]["label"]
    kept = [x["namedScores"]["brevity"] for x in results if x["provider"]["label"] == label
            and "brevity" in x["namedScores"]]
    assert model_means(db, "capitals")[label] == pytest.approx(sum(kept) / len(kept), abs=1e-12)


def test_promptfoo_results_json_on_one_line_reads_as_the_document(tmp_path):
    path = tmp_path / "min.json"
    path.write_text(json.dumps(json.loads(PROMPTFOO_JSON.read_text()), separators=(",", ":")))
    assert sniff(path) == "promptfoo"
    r = ingest(tmp_path / "s.duckdb", path)
    assert (r.status, r.rows_added) == ("ingested", 30), r.message
