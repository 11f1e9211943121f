"""End to end on the real MMLU-Pro data: CLI ingest -> audit flow -> artifacts, catalog, Prefect.

Reference values come straight from the bundled CSV (data/mmlu_pro, see SOURCE.txt),
computed here with Polars independently of benchcert's store and matrices.
"""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import jsonschema
import polars as pl
import pytest

from benchcert.flows.cli import main
from benchcert.tasks.schemas import json_schema

from conftest import MMLU_CSV, MMLU_MAP

pytestmark = pytest.mark.usefixtures("prefect_harness")


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def reference() -> pl.DataFrame:
    df = pl.read_csv(MMLU_CSV, schema_overrides={"question_id": pl.String, "correct": pl.Float64})
    subj = df.group_by("model", "src").agg(pl.col("correct").mean().alias("acc"))
    macro = subj.group_by("model").agg(pl.col("acc").mean().alias("macro"))
    pooled = df.group_by("model").agg(pl.col("correct").mean().alias("pooled"), pl.len().alias("n"))
    return pooled.join(macro, on="model")


@pytest.fixture(scope="module")
def audited(tmp_path_factory, prefect_harness):
    """Ingest through the CLI as Prefect flow runs (--prefect) and audit once; several tests read the result."""
    import contextlib
    import io

    root = tmp_path_factory.mktemp("e2e")
    db, arts = root / "store.duckdb", root / "artifacts"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(["ingest", str(MMLU_CSV), "--db", str(db), "--benchmark", "mmlu_pro",
                     "--config", str(MMLU_MAP), "--json", "--prefect"])
    assert code == 0, buf.getvalue()
    first = json.loads(buf.getvalue())
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(["audit", "--db", str(db), "--benchmark", "mmlu_pro", "--artifacts", str(arts), "--json",
                     "--prefect"])
    assert code == 0, buf.getvalue()
    return {"db": db, "arts": arts, "ingest": first, "audit": json.loads(buf.getvalue())}


def test_ingest_reports_every_row(audited):
    (f,) = audited["ingest"]["files"]
    assert f["status"] == "ingested" and f["rows_added"] == 347_215 and f["rows_rejected"] == 0


def test_reingest_adds_zero_rows(audited, capsys):
    code, out, _ = run_cli(capsys, "ingest", MMLU_CSV, "--db", audited["db"], "--benchmark", "mmlu_pro",
                           "--config", MMLU_MAP, "--json")
    assert code == 0
    (f,) = json.loads(out)["files"]
    assert f["status"] == "unchanged" and f["rows_added"] == 0


def test_pooled_and_macro_equal_direct_computation(audited, reference):
    summary = audited["audit"]
    assert summary["n_models"] == 29 and summary["n_items"] == 12_032
    assert summary["n_subjects"] == 91 and summary["n_domains"] == 14
    got = {m["model"]: m for m in summary["models"]}
    for row in reference.iter_rows(named=True):
        m = got[row["model"]]
        assert m["n_items"] == row["n"]
        assert m["pooled"]["estimate"] == pytest.approx(row["pooled"], abs=1e-12)
        assert m["macro"]["estimate"] == pytest.approx(row["macro"], abs=1e-12)


def test_every_model_has_the_comparator_intervals(audited):
    for m in audited["audit"]["models"]:
        methods = {i["method"]: i for i in m["macro"]["intervals"]}
        assert {"iid_clt", "wilson", "clustered_subject"} <= set(methods)
        for i in methods.values():
            assert i["lower"] <= m["macro"]["estimate"] <= i["upper"]
        # On MMLU-Pro subjects differ a lot, so the clustered interval is the wider one.
        assert methods["clustered_subject"]["half_width"] > methods["iid_clt"]["half_width"]


def test_artifacts_follow_the_contract(audited):
    run_dir = Path(audited["audit"]["run_dir"])
    arts = audited["arts"]
    assert run_dir.parent.parent == arts.resolve() or run_dir.parent.parent == arts
    manifest = json.loads((run_dir / "manifest.json").read_text())
    summary = json.loads((run_dir / "summary.json").read_text())
    index = json.loads((arts / "index.json").read_text())
    jsonschema.validate(manifest, json_schema("manifest"))
    jsonschema.validate(summary, json_schema("summary"))
    jsonschema.validate(index, json_schema("index"))
    assert sorted(p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*") if p.is_file()) == manifest["files"]
    assert index["benchmarks"][0]["latest_run_id"] == summary["run_id"] == manifest["run_id"]
    assert manifest["flow_run_id"] and manifest["sources"][0]["sha256"]
    assert manifest["run_mode"] == audited["audit"]["run_mode"] == audited["ingest"]["run_mode"] == "prefect"
    for t in manifest["tables"]:
        assert pl.read_parquet(run_dir / t["file"]).height == t["rows"]
    scores = pl.read_parquet(run_dir / "tables" / "model_scores.parquet")
    assert scores.height == 29 and not list(arts.glob("*/.tmp-*"))


class _Refs(HTMLParser):
    def __init__(self):
        super().__init__()
        self.refs, self.svgs = [], 0

    def handle_starttag(self, tag, attrs):
        self.svgs += tag == "svg"
        self.refs += [v for k, v in attrs if k in ("src", "href") and v and not v.startswith("#")]


def test_report_is_offline_and_has_the_interval_plot(audited):
    html = (Path(audited["audit"]["run_dir"]) / "report.html").read_text()
    p = _Refs()
    p.feed(html)
    assert p.refs == [] and p.svgs >= 2
    assert "Meta-Llama-3_1-70B-Instruct" in html


def test_runs_and_show(audited, capsys):
    code, out, _ = run_cli(capsys, "runs", "--db", audited["db"], "--json")
    runs = json.loads(out)
    assert code == 0 and runs[-1]["run_id"] == audited["audit"]["run_id"] and runs[-1]["status"] == "completed"
    code, out, _ = run_cli(capsys, "show", audited["audit"]["run_id"], "--db", audited["db"], "--json")
    assert code == 0 and json.loads(out)["summary"]["run_id"] == audited["audit"]["run_id"]
    code, out, _ = run_cli(capsys, "show", audited["audit"]["run_id"], "--artifacts", audited["arts"])
    assert code == 0 and "Llama-2-7b-hf" in out and "report:" in out
    code, _, err = run_cli(capsys, "show", "no-such-run", "--db", audited["db"])
    assert code == 1 and "not found" in err


def test_run_results_are_in_the_store(audited):
    from benchcert.tasks.store.connection import open_store, query_pl

    with open_store(audited["db"], write=False) as con:
        rows = query_pl(con, "SELECT * FROM run_results WHERE run_id = ?", [audited["audit"]["run_id"]])
    assert rows["model"].n_unique() == 29 and set(rows["metric"]) == {"pooled", "macro"}


def test_prefect_artifacts_under_stable_keys(audited):
    from prefect.artifacts import Artifact

    from benchcert.tasks.audit.steps import artifact_key

    md = Artifact.get(artifact_key("mmlu_pro", "summary"))
    table = Artifact.get(artifact_key("mmlu_pro", "models"))
    assert md is not None and audited["audit"]["run_id"] in md.data
    assert table is not None and "gemini-1.5-pro-002" in str(table.data)


def test_audit_of_unknown_benchmark_fails_clearly(audited, capsys):
    code, _, err = run_cli(capsys, "audit", "--db", audited["db"], "--benchmark", "nope",
                           "--artifacts", audited["arts"])
    assert code == 1 and "no responses" in err and "mmlu_pro" in err


def test_schema_command_prints_valid_json_schemas(capsys, tmp_path):
    code, out, _ = run_cli(capsys, "schema")
    schemas = json.loads(out)
    assert code == 0 and set(schemas) == {"response-row", "manifest", "summary", "index"}
    for s in schemas.values():
        jsonschema.Draft202012Validator.check_schema(s)
    code, out, _ = run_cli(capsys, "schema", "response-row", "--out", tmp_path)
    assert code == 0 and (tmp_path / "response-row.schema.json").is_file()
