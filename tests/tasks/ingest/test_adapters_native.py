"""Native harness logs: detection from content, agreement with the harness's own aggregates, bad files.

Reference values are read straight from the harness's own record in the same log, never from
benchcert: inspect_ai ``results.scores[].metrics.accuracy`` (header.json or the .json log), HELM
``stats.json`` (mean of the stat on the split, no perturbation), lm-evaluation-harness
``results_<date>.json`` (``"<metric>,<filter>"``), and for MMLU-Pro the strict accuracy recomputed
here from ``pred``/``answer`` plus the bundled flattened CSV (data/mmlu_pro, same upstream commit)
as an oracle.  Fixture provenance: tests/data/native/SOURCE.txt.  Synthetic lm-eval logs (MMLU
groups, several filters, the v0.4.0-0.4.2 JSON-list layout) follow the writer in lm-eval's
evaluator.py / loggers/evaluation_tracker.py (``sanitize_list`` stringifies resps).
"""

from __future__ import annotations

import gzip
import json
import math
import shutil
import zipfile
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from benchcert.tasks.ingest.adapters.detect import sniff, walk
from benchcert.tasks.ingest.adapters.native import NativeMapping
from benchcert.tasks.ingest.service import ingest_file
from benchcert.tasks.ingest.mapping import ColumnMapping
from benchcert.tasks.store.matrices import load_matrices
from benchcert.tasks.store.connection import open_store, query_pl

from conftest import MMLU_CSV, TESTS

NATIVE = TESTS / "data" / "native"
INSPECT = NATIVE / "inspect_ai"
HELM = NATIVE / "helm"
HELM_MMLU = HELM / "mmlu-subject=philosophy,method=multiple_choice_joint,model=openai_gpt2"
HELM_HELLASWAG = HELM / "commonsense-dataset=hellaswag,method=multiple_choice_joint,model=eleutherai_pythia-1b-v0"
HELM_NQA = HELM / "narrative_qa-model=openai_gpt2"
LM_EVAL = NATIVE / "lm_eval"
LM_SAMPLES = LM_EVAL / "samples_math_perturbed_full_2026-01-21T03-44-18.458309.jsonl"
LM_RESULTS = LM_EVAL / "results_2026-01-21T03-44-18.458309.json"
JAMBA = NATIVE / "mmlu_pro" / "model_outputs_jamba-1.5-large_5shots.zip"
LLAMA = NATIVE / "mmlu_pro" / "model_outputs_Llama-2-7b-hf_5shots.zip"
POPULARITY_EVAL = INSPECT / "2025-02-11T15-18-04-05-00_popularity_mj7khqpMM4GBCfVQozKgzB.eval"
UNSCORED_EVAL = INSPECT / "2025-02-11T15-17-00-05-00_popularity_dPiJifoWeEQBrfWsAopzWr.eval"
POPULARITY_JSON = INSPECT / "2025-05-12T20-28-13-04-00_popularity.json"
TABLES = ("responses", "items", "sources", "rejects")


def ingest(db, path, benchmark=None, **options):
    mapping = NativeMapping(**options) if options else ColumnMapping()
    return ingest_file(db, path, benchmark=benchmark, mapping=mapping)


def model_means(db, benchmark, variant=None) -> dict[str, float]:
    """Per-model mean as benchcert computes it: replicates averaged per item, then items averaged."""
    with open_store(db, write=False) as con:
        m = load_matrices(con, benchmark, variant)
    return dict(m.long.group_by("model").agg(pl.col("score").mean()).iter_rows())


def snapshot(db: Path) -> dict[str, pl.DataFrame]:
    with open_store(db, write=False) as con:
        tables = {t for (t,) in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        return {t: query_pl(con, f"SELECT * FROM {t}").sort(pl.all())  # table names are constants
                for t in (*TABLES, "option_probs") if t in tables}


def inspect_header(path: Path) -> dict:
    if path.suffix == ".eval":
        with zipfile.ZipFile(path) as z:
            return json.loads(z.read("header.json"))
    return json.loads(path.read_text())


def inspect_accuracy(path: Path, scorer: str) -> float:
    (entry,) = [s for s in inspect_header(path)["results"]["scores"] if s["name"] == scorer]
    return entry["metrics"]["accuracy"]["value"]


def helm_mean(run: Path, stat: str, split: str) -> float:
    (entry,) = [s for s in json.loads((run / "stats.json").read_text())
                if s["name"] == {"name": stat, "split": split}]
    return entry["mean"]


def mmlu_pro_outputs(path: Path) -> list[dict]:
    with zipfile.ZipFile(path) as z:
        (name,) = z.namelist()
        return json.loads(z.read(name))


# --- detection from content ----------------------------------------------------------------

@pytest.mark.parametrize("path, kind", [
    (POPULARITY_EVAL, "inspect_ai"), (POPULARITY_JSON, "inspect_ai"), (INSPECT / "data_arc_qwen.json", "inspect_ai"),
    (HELM_MMLU, "helm"), (HELM_MMLU / "per_instance_stats.json", "helm"), (HELM_MMLU / "run_spec.json", "helm_part"),
    (LM_SAMPLES, "lm_eval"), (LM_RESULTS, "lm_eval_results"), (JAMBA, "mmlu_pro_raw"),
    (MMLU_CSV, None), (TESTS / "data" / "small.csv", None),
])
def test_detection_reads_content(path, kind):
    assert sniff(path) == kind


@pytest.mark.parametrize("src, misleading", [
    (POPULARITY_EVAL, "results.csv"), (POPULARITY_JSON, "log.jsonl"), (JAMBA, "outputs.eval"),
    (LM_SAMPLES, "notes.txt"), (HELM_MMLU / "per_instance_stats.json", "data.parquet"),
])
def test_misleading_names_do_not_fool_detection(tmp_path, src, misleading):
    dst = tmp_path / misleading
    shutil.copy(src, dst)
    assert sniff(dst) == sniff(src)


def test_renamed_logs_ingest_by_content(tmp_path):
    db = tmp_path / "s.duckdb"
    renamed = tmp_path / "results.csv"  # an inspect .eval zip under a CSV name
    shutil.copy(POPULARITY_EVAL, renamed)
    r = ingest(db, renamed)
    assert (r.status, r.format, r.rows_added) == ("ingested", "inspect_ai", 10), r.message
    zipped = tmp_path / "outputs.csv"  # the MMLU-Pro model is read from the archive's member name
    shutil.copy(LLAMA, zipped)
    r = ingest(db, zipped)
    assert (r.status, r.format, r.read["model"]) == ("ingested", "mmlu_pro_raw", "Llama-2-7b-hf"), r.message


# --- each real log agrees with the aggregate its harness recorded --------------------------

INSPECT_LOGS = [  # (log, scorer, rows, items); accuracy from the log itself
    (POPULARITY_EVAL, "match", 10, 10),
    (INSPECT / "log_streaming.eval", "match", 4, 2),  # 2 epochs: replicates, averaged like inspect's mean reducer
    (INSPECT / "mmlu-summary-choices.eval", "choice", 1, 1),
    (INSPECT / "log_message_deduplication.eval", "closeness_log", 1, 1),  # log version 3, numeric value
    (INSPECT / "log_read_sample.eval", "match", 1, 1),
    (INSPECT / "log_read_sample.json", "match", 1, 1),
    (POPULARITY_JSON, "match", 3, 3),  # status cancelled
    (INSPECT / "data_arc_qwen.json", "choice", 3, 3),
    (INSPECT / "data_pubmedqa_gpt4o_mini.json", "choice", 2, 2),
]


@pytest.mark.parametrize("log, scorer, rows, items", INSPECT_LOGS, ids=lambda v: getattr(v, "name", None))
def test_inspect_logs_match_inspect_accuracy(tmp_path, log, scorer, rows, items):
    db = tmp_path / "s.duckdb"
    r = ingest(db, log)
    assert r.status == "ingested" and r.rows_added == rows, r.message
    spec = inspect_header(log)["eval"]
    means = model_means(db, spec["task"])
    assert list(means) == [spec["model"]]
    assert means[spec["model"]] == pytest.approx(inspect_accuracy(log, scorer), abs=1e-12)
    with open_store(db, write=False) as con:
        assert con.execute("SELECT count(*) FROM items").fetchall()[0][0] == items


def test_inspect_epochs_are_replicates_and_metadata_feeds_subject(tmp_path):
    db = tmp_path / "s.duckdb"
    assert ingest(db, INSPECT / "log_streaming.eval").status == "ingested"
    assert ingest(db, INSPECT / "mmlu-summary-choices.eval").status == "ingested"
    with open_store(db, write=False) as con:
        reps = query_pl(con, "SELECT item_id, list(replicate ORDER BY replicate) AS r FROM responses "
                             "WHERE benchmark = 'popularity' GROUP BY item_id ORDER BY item_id")
        subj = con.execute("SELECT subject, domain FROM items WHERE benchmark = 'inspect_evals/mmlu_0_shot'").fetchall()
    assert reps["r"].to_list() == [[0, 1], [0, 1]]
    assert subj == [("college_physics", "all")]  # metadata.subject of the sample (summaries.json shows it too)


def test_inspect_eval_and_json_containers_give_the_same_rows(tmp_path):
    db = tmp_path / "s.duckdb"
    a = ingest(db, INSPECT / "log_read_sample.eval")
    b = ingest(db, INSPECT / "log_read_sample.json")
    assert a.status == b.status == "ingested" and (a.rows_added, b.rows_added, b.rows_already_stored) == (1, 0, 1)


@pytest.mark.parametrize("value, expected", [
    ("C", 1.0), ("I", 0.0), ("P", 0.5), ("N", 0.0), (True, 1.0), (False, 0.0), (0.25, 0.25), (1, 1.0),
    ("yes", 1.0), ("False", 0.0), ("0.75", 0.75),
])
def test_inspect_value_conventions(value, expected):
    # inspect_ai scorer/_metric.py value_to_float: CORRECT="C", INCORRECT="I", PARTIAL="P", NOANSWER="N".
    from benchcert.tasks.ingest.adapters.inspect_ai import value_to_float

    assert value_to_float(value) == (expected, None)


@pytest.mark.parametrize("value", ["maybe", {"a": 1}, [1, 0], None])
def test_inspect_values_inspect_would_turn_into_zero_are_reported(value):
    from benchcert.tasks.ingest.adapters.inspect_ai import value_to_float

    score, why = value_to_float(value)
    assert score is None and why


def test_inspect_several_scorers_need_a_choice(tmp_path):
    log = json.loads(POPULARITY_JSON.read_text())
    partial = {"1": "P", "2": "I", "3": "C"}
    for sample in log["samples"]:
        sample["scores"]["rubric"] = {"value": partial[str(sample["id"])]}
    log["results"]["scores"].append({"name": "rubric", "scorer": "rubric", "params": {},
                                     "metrics": {"accuracy": {"name": "accuracy", "value": 0.5, "params": {}}}})
    path = tmp_path / "two.json"
    path.write_text(json.dumps(log))
    db = tmp_path / "s.duckdb"
    r = ingest(db, path)
    assert r.status == "error" and "several scorers ['match', 'rubric']" in r.message and "--scorer" in r.message
    r = ingest(db, path, scorer="rubric")
    assert r.status == "ingested", r.message
    assert model_means(db, "popularity") == {"openai/gpt-4o-mini": pytest.approx(inspect_accuracy(path, "rubric"))}


def test_inspect_metadata_mapping_names_missing_fields(tmp_path):
    db = tmp_path / "s.duckdb"
    r = ingest(db, POPULARITY_JSON, columns={"subject": "nested.foo"})
    assert r.status == "rejected" and r.rows_rejected == 2
    assert {(x["line"], x["field"]) for x in r.rejects} == {(2, "metadata.nested.foo"), (3, "metadata.nested.foo")}
    assert "missing" in r.rejects[0]["reason"] and str(POPULARITY_JSON) in r.message


@pytest.mark.parametrize("run, options, stat, split, rows", [
    (HELM_MMLU, {}, "exact_match", "test", 9),            # default: exact_match on the test split
    (HELM_HELLASWAG, {}, "exact_match", "valid", 10),     # the run's only split
    (HELM_NQA, {}, "exact_match", "test", 4),
    (HELM_NQA, {"stat": "f1_score"}, "f1_score", "test", 4),
    (HELM_MMLU, {"stat": "exact_match:valid"}, "exact_match", "valid", 1),
], ids=["mmlu", "hellaswag", "narrative_qa", "narrative_qa-f1", "mmlu-valid"])
def test_helm_runs_match_helm_stats_json(tmp_path, run, options, stat, split, rows):
    db = tmp_path / "s.duckdb"
    r = ingest(db, run, **options)
    assert r.status == "ingested" and r.rows_added == rows, r.message
    spec = json.loads((run / "run_spec.json").read_text())
    means = model_means(db, spec["groups"][0])
    assert means == {spec["adapter_spec"]["model"]: pytest.approx(helm_mean(run, stat, split), abs=1e-12)}


def test_helm_mmlu_subject_domain_item_ids_and_perturbations(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(HELM_MMLU, run)
    instances = json.loads((run / "per_instance_stats.json").read_text())
    typo = {"name": "typos", "robustness": True, "fairness": False, "computed_on": "perturbed", "prob": 0.1}
    perturbed = [{**json.loads(json.dumps(inst)), "perturbation": typo} for inst in instances]  # deep copies
    for inst in perturbed:  # the perturbed copy gets every answer wrong, so the variants differ
        for st in inst["stats"]:
            if st["name"]["name"] == "exact_match":
                st.update(sum=0.0, mean=0.0, min=0.0, max=0.0)
    (run / "per_instance_stats.json").write_text(json.dumps(instances + perturbed))
    db = tmp_path / "s.duckdb"
    r = ingest(db, run)
    assert r.status == "ingested" and r.rows_added == 18, r.message
    with open_store(db, write=False) as con:
        items = con.execute("SELECT DISTINCT subject, domain, item_id LIKE 'subject=philosophy/id%' FROM items").fetchall()
        variants = dict(con.execute("SELECT variant, avg(score) FROM responses GROUP BY variant").fetchall())
    assert items == [("philosophy", "humanities", True)]  # MMLU group from lm-eval's _generate_configs.py
    assert variants == {"": pytest.approx(helm_mean(HELM_MMLU, "exact_match", "test")), "typos": 0.0}


def test_lm_eval_real_log_matches_its_results_file(tmp_path):
    db = tmp_path / "s.duckdb"
    r = ingest(db, LM_SAMPLES)
    assert r.status == "ingested" and r.rows_added == 10, r.message
    results = json.loads(LM_RESULTS.read_text())
    # The stored log is the first 10 of 5000 docs; lm-eval's 0.0 over all 5000 means every doc scored 0.
    assert model_means(db, "math_perturbed_full") == {
        results["model_name"]: pytest.approx(results["results"]["math_perturbed_full"]["exact_match,none"])}
    assert r.read["metric"] == "exact_match"  # no acc logged: the documented fallback
    meta = ingest(db, LM_RESULTS)
    assert meta.status == "metadata" and meta.ok and "no per-item rows" in meta.message


@pytest.mark.parametrize("path, ref", [(JAMBA, "jamba-1.5-large"), (LLAMA, "Llama-2-7b-hf")])
def test_mmlu_pro_raw_matches_pred_answer_and_the_flattened_csv(tmp_path, path, ref):
    outputs = mmlu_pro_outputs(path)
    strict = np.mean([o["pred"] is not None and o["pred"] == o["answer"] for o in outputs])
    db = tmp_path / "s.duckdb"
    r = ingest(db, path)
    assert r.status == "ingested" and r.rows_added == len(outputs), r.message
    assert model_means(db, "mmlu_pro") == {ref: pytest.approx(strict, abs=1e-12)}
    # Oracle: the same upstream zip flattened to CSV (data/mmlu_pro/SOURCE.txt), this model's rows only:
    # every key is already stored with the same score and the same subject/domain, so nothing is added.
    csv = tmp_path / "ref.csv"
    flat = pl.read_csv(MMLU_CSV, infer_schema=False).filter(pl.col("model") == ref)
    flat.filter(pl.col("question_id").is_in([str(o["question_id"]) for o in outputs])).write_csv(csv)
    mapping = ColumnMapping(columns={"item_id": "question_id", "subject": "src", "domain": "category",
                                     "score": "correct"})
    again = ingest_file(db, csv, benchmark="mmlu_pro", mapping=mapping)
    assert again.status == "ingested", again.message
    assert (again.rows_added, again.rows_already_stored) == (0, len(outputs))


# --- lm-evaluation-harness layouts, written as lm-eval writes them -------------------------

MMLU_TASKS = {"mmlu_philosophy": "mmlu_humanities", "mmlu_formal_logic": "mmlu_humanities",
              "mmlu_anatomy": "mmlu_stem"}


def write_lm_eval_mmlu(root: Path, rng: np.random.Generator, model="org/tiny-lm", date="2024-07-01T10-00-00.123456",
                       n_docs=25) -> tuple[Path, dict, dict]:
    """A v0.4.3+ run of three MMLU subtasks: samples_<task>_<date>.jsonl + results_<date>.json."""
    out = root / model.replace("/", "__")
    out.mkdir(parents=True)
    results = {"results": {}, "group_subtasks": {"mmlu_humanities": ["mmlu_philosophy", "mmlu_formal_logic"],
                                                 "mmlu_stem": ["mmlu_anatomy"], "mmlu": ["mmlu_humanities", "mmlu_stem"]},
               "configs": {}, "versions": {}, "n-shot": {}, "model_name": model,
               "config": {"model": "hf", "model_args": f"pretrained={model},dtype=float16"}}
    probs = {}
    for task in MMLU_TASKS:
        accs, norms, lines = [], [], []
        for doc_id in range(n_docs):
            choices = [f"option {c} " + "x" * int(rng.integers(1, 20)) for c in "ABCD"]
            gold = int(rng.integers(0, 4))
            lls = -rng.gamma(2.0, 2.0, size=4)
            acc = float(np.argmax(lls) == gold)
            norm = float(np.argmax(lls / np.array([len(c) for c in choices])) == gold)
            accs.append(acc)
            norms.append(norm)
            probs[(task, doc_id)] = np.exp(lls - lls.max()) / np.exp(lls - lls.max()).sum()
            lines.append({
                "doc_id": doc_id, "doc": {"question": f"q{doc_id}", "subject": task[5:], "choices": choices,
                                          "answer": gold},
                "target": str(gold),
                "arguments": {f"gen_args_{j}": {"arg_0": f"q{doc_id}\nAnswer:", "arg_1": f" {c}"}
                              for j, c in enumerate("ABCD")},
                "resps": [[[str(ll), "False"]] for ll in lls], "filtered_resps": [[str(ll), "False"] for ll in lls],
                "filter": "none", "metrics": ["acc", "acc_norm"], "doc_hash": "0" * 64, "prompt_hash": "1" * 64,
                "target_hash": "2" * 64, "acc": acc, "acc_norm": norm})
        (out / f"samples_{task}_{date}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
        results["results"][task] = {"alias": task, "acc,none": float(np.mean(accs)), "acc_norm,none": float(np.mean(norms))}
        results["configs"][task] = {"task": task, "output_type": "multiple_choice"}
    (out / f"results_{date}.json").write_text(json.dumps(results, indent=2))
    return out, results, probs


def test_lm_eval_mmlu_groups_give_benchmark_subject_domain(tmp_path):
    out, results, probs = write_lm_eval_mmlu(tmp_path, np.random.default_rng(3))
    db = tmp_path / "s.duckdb"
    for f in sorted(out.glob("samples_*.jsonl")):
        r = ingest(db, f)
        assert r.status == "ingested" and r.rows_added == 25, r.message
    with open_store(db, write=False) as con:
        m = load_matrices(con, "mmlu")
        stored = query_pl(con, "SELECT item_id, probs FROM option_probs ORDER BY item_id")
    subj = m.long.group_by("subject", "domain").agg(pl.col("score").mean()).sort("subject")
    assert subj.rows() == sorted((t, d, pytest.approx(results["results"][t]["acc,none"])) for t, d in MMLU_TASKS.items())
    assert m.long["item_id"][0].count("/") == 1 and m.models == ["org/tiny-lm"]
    # Option probabilities: softmax of the logged log-likelihoods, one per item.
    assert stored.height == 75
    for item_id, p in stored.iter_rows():
        task, doc = item_id.split("/")
        np.testing.assert_allclose(p, probs[(task, int(doc))], rtol=1e-12)
        assert math.isclose(sum(p), 1.0)


def test_lm_eval_metric_choice(tmp_path):
    out, results, _ = write_lm_eval_mmlu(tmp_path, np.random.default_rng(4))
    f = next(out.glob("samples_mmlu_anatomy_*.jsonl"))
    db = tmp_path / "s.duckdb"
    assert ingest(db, f, metric="acc_norm").status == "ingested"
    assert model_means(db, "mmlu") == {"org/tiny-lm": pytest.approx(results["results"]["mmlu_anatomy"]["acc_norm,none"])}


def test_lm_eval_filters_become_variants(tmp_path):
    rng = np.random.default_rng(5)
    out = tmp_path / "org__m"
    out.mkdir()
    date = "2024-08-02T11-12-13.000001"
    lines, by_filter = [], {"strict-match": [], "flexible-extract": []}
    for doc_id in range(30):  # lm-eval writes one entry per (doc, filter)
        for filt, p in (("strict-match", 0.3), ("flexible-extract", 0.6)):
            em = float(rng.random() < p)
            by_filter[filt].append(em)
            lines.append({"doc_id": doc_id, "doc": {"question": "q", "answer": "#### 4"}, "target": "#### 4",
                          "arguments": {"gen_args_0": {"arg_0": "Q", "arg_1": {"until": ["\n\n"]}}},
                          "resps": [["The answer is 4."]], "filtered_resps": ["4"], "filter": filt,
                          "metrics": ["exact_match"], "doc_hash": "0", "prompt_hash": "1", "target_hash": "2",
                          "exact_match": em})
    (out / f"samples_gsm8k_{date}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    results = {"results": {"gsm8k": {f"exact_match,{k}": float(np.mean(v)) for k, v in by_filter.items()}},
               "configs": {"gsm8k": {"task": "gsm8k"}}, "model_name": "org/m", "group_subtasks": {"gsm8k": []}}
    (out / f"results_{date}.json").write_text(json.dumps(results))
    db = tmp_path / "s.duckdb"
    r = ingest(db, out / f"samples_gsm8k_{date}.jsonl")
    assert r.status == "ingested" and r.rows_added == 60, r.message
    for filt in by_filter:
        assert model_means(db, "gsm8k", filt) == {"org/m": pytest.approx(results["results"]["gsm8k"][f"exact_match,{filt}"])}


def test_lm_eval_old_json_list_layout(tmp_path):
    """v0.4.0-0.4.2: ``<model_args>_<task>.jsonl`` is one JSON list; a doc repeats once per filter."""
    rng = np.random.default_rng(6)
    entries, per_filter = [], {"none": [], "maj@8": []}
    for filt in per_filter:  # evaluator.py loops filters, then docs
        for doc_id in range(12):
            lls = (-rng.gamma(2.0, 1.0, size=3)).tolist()
            acc = float(rng.random() < 0.5)
            per_filter[filt].append(acc)
            entries.append({"doc_id": doc_id, "doc": {"q": doc_id}, "target": 1,
                            "arguments": [["ctx", f" {c}"] for c in "abc"],
                            "resps": [[[ll, False]] for ll in lls], "filtered_resps": [[ll, False] for ll in lls],
                            "acc": acc})
    (tmp_path / "pretrained__org__old-model,dtype__float16_arc_easy.jsonl").write_text(json.dumps(entries, indent=2))
    results = {"results": {"arc_easy": {f"acc,{k}": float(np.mean(v)) for k, v in per_filter.items()}},
               "configs": {"arc_easy": {"task": "arc_easy", "filter_list": [{"name": k} for k in per_filter]}},
               "versions": {"arc_easy": "Yaml"}, "config": {"model": "hf", "model_args": "pretrained=org/old-model"}}
    (tmp_path / "results.json").write_text(json.dumps(results, indent=2))
    src = tmp_path / "pretrained__org__old-model,dtype__float16_arc_easy.jsonl"
    assert sniff(src) == "lm_eval"
    db = tmp_path / "s.duckdb"
    r = ingest(db, src)
    assert r.status == "ingested" and r.rows_added == 24, r.message
    assert model_means(db, "arc_easy", "") == {"org/old-model": pytest.approx(results["results"]["arc_easy"]["acc,none"])}
    assert model_means(db, "arc_easy", "maj@8") == {
        "org/old-model": pytest.approx(results["results"]["arc_easy"]["acc,maj@8"])}


# --- malformed logs: a clear error naming the file, and the store unchanged ----------------

def rewrite_eval(src: Path, dst: Path, change) -> Path:
    """Copy an .eval archive, passing the first sample through ``change``."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        first = sorted(n for n in zin.namelist() if n.startswith("samples/"))[0]
        for name in zin.namelist():
            data = zin.read(name)
            if name == first:
                data = json.dumps(change(json.loads(data))).encode()
            zout.writestr(name, data)
    return dst


def truncate(src: Path, dst: Path, fraction=0.6) -> Path:
    data = src.read_bytes()
    dst.write_bytes(data[: int(len(data) * fraction)])
    return dst


def edit_json(src: Path, dst: Path, change) -> Path:
    dst.write_text(json.dumps(change(json.loads(src.read_text()))))
    return dst


def helm_copy(tmp: Path, change) -> Path:
    run = tmp / "run"
    shutil.copytree(HELM_MMLU, run)
    edit_json(run / "per_instance_stats.json", run / "per_instance_stats.json", change)
    return run


def _drop(key):
    return lambda s: {k: v for k, v in s.items() if k != key}


def _mmlu_pro(tmp: Path, change) -> Path:
    outputs = mmlu_pro_outputs(LLAMA)[:50]
    change(outputs)
    dst = tmp / "model_outputs_Llama-2-7b-hf_5shots.zip"
    with zipfile.ZipFile(dst, "w") as z:
        z.writestr("model_outputs_Llama-2-7b-hf_5shots.json", json.dumps(outputs))
    return dst


def _lm_lines(tmp: Path, change) -> Path:
    lines = LM_SAMPLES.read_text().splitlines()
    lines[3] = json.dumps(change(json.loads(lines[3])))
    dst = tmp / LM_SAMPLES.name
    dst.write_text("\n".join(lines) + "\n")
    shutil.copy(LM_RESULTS, tmp / LM_RESULTS.name)
    return dst


def _set(d, **kw):
    d.update(kw)
    return d


BAD = {  # name: (build(tmp) -> path, options, expected status, fragment of the message or first reason)
    "eval truncated": (lambda t: truncate(POPULARITY_EVAL, t / "a.eval"), {}, "error", "truncated"),
    "eval sample without id": (lambda t: rewrite_eval(POPULARITY_EVAL, t / "a.eval", _drop("id")), {},
                               "rejected", "missing sample id"),
    "eval sample without scores": (lambda t: rewrite_eval(POPULARITY_EVAL, t / "a.eval", _drop("scores")), {},
                                   "rejected", "the sample has no scores"),
    "eval score value of the wrong type": (
        lambda t: rewrite_eval(POPULARITY_EVAL, t / "a.eval",
                               lambda s: _set(s, scores={"match": {"value": {"a": 1}}})), {}, "rejected",
        "benchcert needs one number per sample"),
    "eval epoch not an integer": (lambda t: rewrite_eval(POPULARITY_EVAL, t / "a.eval", lambda s: _set(s, epoch="one")),
                                  {}, "rejected", "epoch must be an integer"),
    "eval unknown scorer": (lambda t: shutil.copy(POPULARITY_EVAL, t / "a.eval"), {"scorer": "rubric"}, "error",
                            "unknown scorer 'rubric': this log's scorers are ['match']"),
    "eval never scored": (lambda t: shutil.copy(UNSCORED_EVAL, t / "a.eval"), {}, "error", "never scored"),
    "inspect json truncated": (lambda t: truncate(POPULARITY_JSON, t / "a.json"), {}, "error", "truncated"),
    "inspect json without samples": (lambda t: shutil.copy(INSPECT / "data_with_llm_scoring.json", t / "a.json"), {},
                                     "error", "no samples"),
    "inspect json score not convertible": (
        lambda t: edit_json(POPULARITY_JSON, t / "a.json",
                            lambda d: _set(d, samples=[_set(d["samples"][0], scores={"match": {"value": "maybe"}}),
                                                       *d["samples"][1:]])), {}, "rejected", "not C/I/P/N"),
    "helm instance without id": (lambda t: helm_copy(t, lambda x: [_drop("instance_id")(x[0]), *x[1:]]), {},
                                 "rejected", "missing"),
    "helm stat mean of the wrong type": (
        lambda t: helm_copy(t, lambda x: [_set(x[0], stats=[_set(s, mean="high") if s["name"]["name"] == "exact_match"
                                                            else s for s in x[0]["stats"]]), *x[1:]]), {},
        "rejected", "expected a numeric mean"),
    "helm per_instance_stats truncated": (
        lambda t: truncate(HELM_MMLU / "per_instance_stats.json", helm_copy(t, lambda x: x) / "per_instance_stats.json").parent,
        {}, "error", "truncated"),
    "helm unknown stat": (lambda t: helm_copy(t, lambda x: x), {"stat": "accuracy"}, "error", "unknown stat 'accuracy'"),
    "mmlu-pro zip truncated": (lambda t: truncate(LLAMA, t / "model_outputs_x_5shots.zip"), {}, "error", "truncated"),
    "mmlu-pro entry without answer": (lambda t: _mmlu_pro(t, lambda o: o[3].pop("answer")), {}, "rejected", "missing"),
    "mmlu-pro pred of the wrong type": (lambda t: _mmlu_pro(t, lambda o: o[4].update(pred=3)), {}, "rejected",
                                        "expected an option letter or null"),
    "lm-eval line without doc_id": (lambda t: _lm_lines(t, _drop("doc_id")), {}, "rejected", "missing"),
    "lm-eval metric of the wrong type": (lambda t: _lm_lines(t, lambda s: _set(s, exact_match=[1, 2])), {}, "rejected",
                                         "expected a number, got list"),
    "lm-eval line truncated": (lambda t: truncate(LM_SAMPLES, t / LM_SAMPLES.name, 0.55), {}, "rejected",
                               "unparsable JSON"),
    "lm-eval unknown metric": (lambda t: _lm_lines(t, lambda s: s), {"metric": "acc_norm"}, "error",
                               "unknown metric 'acc_norm'"),
}


@pytest.fixture(scope="module")
def populated(tmp_path_factory) -> Path:
    """A store holding one log of every format, so 'unchanged' covers real rows."""
    db = tmp_path_factory.mktemp("pop") / "s.duckdb"
    for path in (POPULARITY_EVAL, HELM_MMLU, LM_SAMPLES, LLAMA):
        assert ingest(db, path).status == "ingested"
    out, _, _ = write_lm_eval_mmlu(tmp_path_factory.mktemp("lm"), np.random.default_rng(7), n_docs=3)
    assert ingest(db, next(out.glob("samples_mmlu_anatomy_*"))).status == "ingested"  # creates option_probs
    return db


@pytest.mark.parametrize("case", list(BAD))
def test_malformed_logs_name_file_and_problem_and_leave_the_store_unchanged(tmp_path, populated, case):
    build, options, status, fragment = BAD[case]
    work = tmp_path / "w"
    work.mkdir()
    path = Path(build(work))
    db = tmp_path / "s.duckdb"
    shutil.copy(populated, db)
    before = snapshot(db)
    r = ingest(db, path, **options)
    assert r.status == status, r.message
    assert str(path) in r.message
    text = r.message + " " + " ".join(x["reason"] for x in r.rejects)
    assert fragment in text, text
    if status == "rejected":
        assert r.rejects[0]["field"] and r.rejects[0]["raw"], r.rejects[0]
    after = snapshot(db)
    assert after.keys() == before.keys()
    for t in before:
        assert_frame_equal(before[t], after[t])


def test_allow_rejects_keeps_the_good_samples(tmp_path):
    bad = rewrite_eval(POPULARITY_EVAL, tmp_path / "a.eval", _drop("scores"))
    db = tmp_path / "s.duckdb"
    r = ingest_file(db, bad, benchmark=None, mapping=ColumnMapping(), allow_rejects=True)
    assert r.status == "ingested" and (r.rows_added, r.rows_rejected) == (9, 1), r.message
    with open_store(db, write=False) as con:
        assert con.execute("SELECT field, path FROM rejects").fetchall() == [("scores", str(bad))]


# --- round trip: the same log twice adds nothing ------------------------------------------

@pytest.mark.parametrize("path", [POPULARITY_EVAL, POPULARITY_JSON, HELM_MMLU, LM_SAMPLES, LLAMA],
                         ids=["eval", "inspect-json", "helm", "lm-eval", "mmlu-pro"])
def test_ingesting_the_same_log_twice_adds_nothing(tmp_path, path):
    db = tmp_path / "s.duckdb"
    first = ingest(db, path)
    assert first.status == "ingested" and first.rows_added > 0, first.message
    before = snapshot(db)
    again = ingest(db, path)
    assert again.status == "unchanged" and again.rows_added == 0, again.message
    copy = tmp_path / "elsewhere" / path.name  # same content under another path: recognised by its hash
    shutil.copytree(path, copy) if path.is_dir() else (copy.parent.mkdir(), shutil.copy(path, copy))
    if path == LM_SAMPLES:
        shutil.copy(LM_RESULTS, copy.parent / LM_RESULTS.name)
    assert ingest(db, copy).status == "unchanged"
    after = snapshot(db)
    for t in before:
        assert_frame_equal(before[t], after[t])


def test_helm_run_directory_is_one_source_hashing_both_files(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(HELM_MMLU, run)
    db = tmp_path / "s.duckdb"
    first = ingest(db, run)
    spec = json.loads((run / "run_spec.json").read_text())
    spec["adapter_spec"]["temperature"] = 0.5  # rows unchanged, but the run's content is not
    (run / "run_spec.json").write_text(json.dumps(spec))
    second = ingest(db, run)
    assert first.sha256 != second.sha256 and second.status == "ingested" and second.rows_added == 0
    assert ingest(db, run / "per_instance_stats.json").status == "unchanged"  # the file stands for its run


# --- directories ---------------------------------------------------------------------------

def test_walk_finds_sources_by_content_and_reports_the_rest(tmp_path):
    d = tmp_path / "logs"
    shutil.copytree(NATIVE, d)
    (d / "notes.txt").write_text("hello")
    (d / "lm_eval" / "x.gz").write_bytes(gzip.compress(b"not a log"))
    sources, unknown = walk(d)
    names = {Path(s).relative_to(d).as_posix() for s in sources}
    assert {"helm/" + HELM_MMLU.name, "helm/" + HELM_NQA.name, "helm/" + HELM_HELLASWAG.name} <= names
    assert not any(n.endswith(("run_spec.json", "stats.json", "scenario.json")) for n in names)
    assert {"inspect_ai/" + POPULARITY_EVAL.name, "lm_eval/" + LM_RESULTS.name, "lm_eval/" + LM_SAMPLES.name,
            "mmlu_pro/" + JAMBA.name} <= names
    assert sorted(Path(u["path"]).name for u in unknown) == ["SOURCE.txt", "notes.txt", "x.gz"]
    assert all("no adapter recognises" in u["message"] for u in unknown)


def test_cli_ingests_a_directory_of_harness_logs(capsys, tmp_path, monkeypatch):
    from benchcert.flows import ingest as ingest_flow_module
    from benchcert.flows.cli import main

    # The flow is one Prefect task per file around ingest_file (tests/flows/test_cli.py runs it under
    # Prefect); here the plain loop keeps the test free of the seconds a Prefect API costs to start.
    def plain_flow(paths, db, benchmark, mapping, allow_rejects=False, lock_timeout=600.0, atomic=False):
        return [ingest_file(db, p, benchmark=benchmark, mapping=mapping, allow_rejects=allow_rejects,
                            lock_timeout=lock_timeout) for p in paths]

    monkeypatch.setattr(ingest_flow_module, "ingest_flow", plain_flow)
    d = tmp_path / "logs"
    d.mkdir()
    shutil.copytree(HELM_MMLU, d / HELM_MMLU.name)
    shutil.copy(POPULARITY_EVAL, d / "popularity.eval")
    shutil.copy(LM_SAMPLES, d / LM_SAMPLES.name)
    shutil.copy(LM_RESULTS, d / LM_RESULTS.name)
    (d / "notes.txt").write_text("hello")
    db = tmp_path / "s.duckdb"
    code = main(["ingest", str(d), "--db", str(db), "--json"])
    files = {Path(f["path"]).name: f for f in json.loads(capsys.readouterr().out)["files"]}
    assert code == 1  # notes.txt is reported, never skipped silently
    assert {k: v["status"] for k, v in files.items()} == {
        HELM_MMLU.name: "ingested", "popularity.eval": "ingested", LM_SAMPLES.name: "ingested",
        LM_RESULTS.name: "metadata", "notes.txt": "error"}
    assert files["popularity.eval"]["read"]["scorer"] == "match"
    code = main(["ingest", str(d / "popularity.eval"), "--db", str(db), "--scorer", "rubric"])
    err = capsys.readouterr().err
    assert code == 1 and "unknown scorer 'rubric'" in err
    renamed = tmp_path / "samples.csv"
    shutil.copy(HELM_MMLU / "per_instance_stats.json", renamed)
    code = main(["ingest", str(renamed), "--db", str(db), "--format", "inspect_ai"])
    assert code == 1 and "not an inspect_ai log" in capsys.readouterr().err
