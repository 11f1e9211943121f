"""Issue 14 (audit side): degenerate structure, folder names, index rebuild, record-then-publish."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import polars as pl
import pytest

from benchcert.tasks.artifacts import runs as artifacts
from benchcert.tasks.audit.analyses import ANALYSES, run_analysis
from benchcert.tasks.audit.contract import AnalysisOutput, AuditConfig
from benchcert.tasks.audit.request import AuditRequest
from benchcert.tasks.errors import NotAnalysableError
from benchcert.tasks.artifacts.folders import RESERVED, is_plain_folder, safe_component
from benchcert.tasks.artifacts.runs import discard_run, publish_run, read_index, recover_stale, refresh_index, stage_run
from benchcert.tasks.store.matrices import BenchmarkMatrices
from benchcert.tasks.schemas import Index

from run_support import _fields, _summary, stage_and_publish


# --- analyses never crash the audit on degenerate structure ------------------------------------

def _matrices(models: int, items: int, subject_of) -> BenchmarkMatrices:
    rows = [{"model": f"m{m}", "item_id": f"q{i}", "subject": subject_of(i), "domain": "d",
             "score": float((i * (m + 2)) % 3 == 0), "n_replicates": 1}
            for m in range(models) for i in range(items)]
    return BenchmarkMatrices("b", "", pl.DataFrame(rows))


@pytest.mark.parametrize("case", ["one model", "one item", "one subject", "subjects of one item"])
@pytest.mark.parametrize("hierarchy", [("subject", "domain"), ()])
def test_every_analysis_runs_or_skips_on_degenerate_structure(case, hierarchy):
    models, items, subject_of = {"one model": (1, 12, lambda i: f"s{i % 3}"), "one item": (3, 1, lambda i: "s"),
                                 "one subject": (3, 12, lambda i: "s"),
                                 "subjects of one item": (3, 12, lambda i: f"s{i}")}[case]
    m = _matrices(models, items, subject_of)
    for name, fn in ANALYSES.items():
        out = run_analysis(name, fn, m, AuditConfig(hierarchy=hierarchy))  # never raises
        assert not [w for w in out.warnings if "skipped" in w], (name, out.warnings)


def test_split_half_with_no_subject_of_two_items_has_no_correlation():
    """The issue's failure: 'operands could not be broadcast' when every subject has one item."""
    from benchcert.stats.split_half import split_half

    scores = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    from benchcert.stats.degenerate import DegenerateDataWarning

    with pytest.warns(DegenerateDataWarning, match="no subject has 2 or more"):
        r = split_half(scores, np.array([0, 1, 2]), n_splits=10, rng=np.random.default_rng(0))
    assert not r.defined.any() and np.isnan(r.corr).all()


def test_an_analysis_that_raises_is_skipped_with_its_reason_but_scores_is_required():
    m = _matrices(2, 6, lambda i: f"s{i % 2}")

    def broken(matrices, config):
        raise NotAnalysableError("needs two subjects per domain")

    out = run_analysis("fancy", broken, m, AuditConfig())
    assert isinstance(out, AnalysisOutput) and not out.tables
    (w,) = out.warnings
    assert "fancy" in w and "skipped" in w and "needs two subjects per domain" in w and "2 model(s)" in w
    with pytest.raises(NotAnalysableError):
        run_analysis("scores", broken, m, AuditConfig())


# A ValueError or ArithmeticError the analysis did not name (issue #34: only NotAnalysableError is
# "cannot analyse these data") fails the run as a bug, as a KeyError does.
@pytest.mark.parametrize("bug", [KeyError("missing column"), IndexError("off by one"), TypeError("wrong call"),
                                 ValueError("a validator's refusal"), ZeroDivisionError("division by zero"),
                                 np.linalg.LinAlgError("singular matrix")])
def test_a_bug_in_an_analysis_fails_the_run_instead_of_reading_as_skipped(bug):
    m = _matrices(2, 6, lambda i: f"s{i % 2}")

    def buggy(matrices, config):
        raise bug

    with pytest.raises(type(bug)):
        run_analysis("fancy", buggy, m, AuditConfig())


# --- folder names -------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["index.json", "INDEX.JSON", "index.html", "tables", "report.html", ".hidden",
                                  ".tmp-x", ".index.lock", "a_b-c14cddc033"])
def test_reserved_and_hash_shaped_names_get_hashed_folders(name):
    folder = safe_component(name)
    assert folder != name and folder.lower() not in RESERVED and not folder.startswith(".")


def test_folder_names_are_injective_on_the_issue_collision():
    a, b = safe_component("a/b"), safe_component("a_b-c14cddc033")
    assert a == "a_b-c14cddc033" and b != a
    names = ["a/b", "a_b", "a b", "a_b-c14cddc033", safe_component("a_b-c14cddc033"), "index.json", "mmlu_pro"]
    assert len({safe_component(n) for n in names}) == len(names)
    assert all(is_plain_folder(safe_component(n)) or safe_component(n) != n for n in names)


def test_benchmark_named_index_json_does_not_break_the_root(tmp_path):
    for i, bench in enumerate(["index.json", "mmlu_pro", "a/b", "a_b-c14cddc033"]):
        stage_and_publish(tmp_path, summary=_summary(bench, f"r{i}"),
                          manifest_fields=_fields(bench, f"r{i}", f"2026-11-2{i}"),
                          tables={}, report_html="<html></html>")
    index = json.loads((tmp_path / "index.json").read_text())
    assert sorted(e["benchmark"] for e in index["benchmarks"]) == ["a/b", "a_b-c14cddc033", "index.json", "mmlu_pro"]
    assert len({e["dir"] for e in index["benchmarks"]}) == 4
    assert not list(tmp_path.glob(".index.json.*"))
    # a later audit of another benchmark still works
    stage_and_publish(tmp_path, summary=_summary("x", "r9"),
                      manifest_fields=_fields("x", "r9", "2026-11-29"),
                      tables={}, report_html="")
    assert (tmp_path / "index.json").is_file()


@pytest.mark.parametrize("damage", ["missing", "garbage", "wrong shape", "stale"])
def test_index_is_rebuilt_when_missing_or_damaged(tmp_path, damage):
    from benchcert.tasks.audit.changes import previous_summary

    stage_and_publish(tmp_path, summary=_summary("b", "r1"),
                      manifest_fields=_fields("b", "r1", "2026-11-21"),
                      tables={}, report_html="")
    index = tmp_path / "index.json"
    {"missing": index.unlink, "garbage": lambda: index.write_text("{not json"),
     "wrong shape": lambda: index.write_text('{"benchmarks": 3}'),
     "stale": lambda: index.write_text(Index(updated_at="x", benchmarks=[]).model_dump_json())}[damage]()
    assert previous_summary(tmp_path, "b")["run_id"] == "r1"
    assert read_index(tmp_path)["benchmarks"][0]["runs"] == ["r1"]


# --- record, then publish -------------------------------------------------------------------------

def test_a_staged_run_is_invisible_until_published(tmp_path):
    staged = stage_run(tmp_path, summary=_summary("b", "r1"), manifest_fields=_fields("b", "r1", "2026-11-21"),
                       tables={"t": pl.DataFrame({"a": [1]})}, report_html="")
    assert staged.name.startswith(".tmp-") and refresh_index(tmp_path).benchmarks == []
    assert recover_stale(tmp_path, {"r1"}) == {"published": [], "removed": []}  # its writer (us) is alive
    final = publish_run(tmp_path, staged)
    assert final.name == "r1" and not (final / ".lock").exists()
    assert read_index(tmp_path)["benchmarks"][0]["runs"] == ["r1"]
    assert publish_run(tmp_path, staged) == final  # idempotent
    staged = stage_run(tmp_path, summary=_summary("b", "r2"), manifest_fields=_fields("b", "r2", "2026-11-22"),
                       tables={}, report_html="")
    discard_run(staged)
    assert not staged.exists() and read_index(tmp_path)["benchmarks"][0]["runs"] == ["r1"]


_KILLER = textwrap.dedent("""
    import os, signal, sys
    from benchcert.tasks.artifacts import runs as artifacts
    from benchcert.flows import steps
    from benchcert.tasks.audit import results
    from benchcert.flows import audit
    point = sys.argv[4]
    def die(*a, **k):
        os.kill(os.getpid(), signal.SIGKILL)
    if point == "after-analyses":
        results.build_summary = die
    elif point == "after-record":
        artifacts.publish_run = die
    elif point == "after-rename":
        artifacts.refresh_index = die  # publish_run renames the folder, then re-indexes
    from benchcert.tasks.audit.request import AuditRequest
    audit.audit_flow(AuditRequest(db=sys.argv[1], benchmark="b", artifacts_root=sys.argv[2], alpha=0.05,
                                  variant=None, lock_timeout=30.0, webhook_url=None))
    print("not killed")
""")


@pytest.mark.usefixtures("prefect_harness")
def test_kill_9_during_an_audit_leaves_catalog_and_index_in_agreement(tmp_path):
    """Kill -9 between renaming a recorded run into place and re-indexing, right after the
    analyses, and between recording and publishing; catalog and index agree after each kill
    where they can, and after the next audit always (no published run without its record, and
    no recorded run left unpublished)."""
    from prefect.settings import PREFECT_API_URL

    from benchcert.flows.audit import audit_flow
    from benchcert.tasks.ingest.service import ingest_file
    from benchcert.tasks.ingest.mapping import parse_mapping
    from benchcert.tasks.store.connection import list_runs, open_store

    db, art = tmp_path / "s.duckdb", tmp_path / "artifacts"
    src = tmp_path / "b.csv"
    src.write_text("model,item_id,subject,score\n" + "".join(
        f"m{m},q{i},s{i % 3},{(i * (m + 2)) % 3 == 0}\n" for m in range(3) for i in range(30)))
    assert ingest_file(db, src, benchmark="b", mapping=parse_mapping()).status == "ingested"
    script = tmp_path / "killer.py"
    script.write_text(_KILLER)
    env = {**os.environ, "PREFECT_API_URL": str(PREFECT_API_URL.value())}

    def agree() -> tuple[set, set]:
        with open_store(db, write=False) as con:
            runs = list_runs(con, "b")
        catalog = set(runs.filter(pl.col("status") == "completed")["run_id"].to_list())
        index = {r for e in read_index(art)["benchmarks"] for r in e["runs"]} if art.is_dir() else set()
        return catalog, index

    for point in ("after-rename", "after-analyses", "after-record"):
        p = subprocess.run([sys.executable, str(script), str(db), str(art), "x", point], env=env,
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == -9, (point, p.stdout[-2000:], p.stderr[-3000:])
        if point == "after-rename":  # no index.json was written; its readers rebuild it from the folders
            assert not (art / "index.json").exists()
            catalog, index = agree()
            assert len(catalog) == 1 and catalog == index
    catalog, index = agree()
    # killed after recording: the catalog holds that run, its folder is still staged
    assert len(catalog) == 2 and len(index) == 1
    assert len(list((art / "b").glob(".tmp-*"))) == 1
    out = audit_flow(AuditRequest(db=str(db), benchmark="b", artifacts_root=str(art), alpha=0.05, variant=None,
                                  lock_timeout=30.0))  # the next audit finishes or removes them
    catalog, index = agree()
    assert catalog == index and len(catalog) == 3 and out["run_id"] in catalog
    assert not list((art / "b").glob(".tmp-*"))
    for run_id in catalog:
        assert (art / "b" / run_id / "summary.json").is_file()


@pytest.mark.usefixtures("prefect_harness")
def test_lock_lost_after_the_analyses_publishes_nothing(tmp_path, monkeypatch):
    """The issue's failure: the store's lock could not be taken after the analyses, yet the run
    appeared in index.json as completed with no catalog row."""
    from benchcert.flows.audit import audit_flow
    from benchcert.tasks.ingest.service import ingest_file
    from benchcert.tasks.ingest.mapping import parse_mapping
    from benchcert.tasks.store.connection import StoreLockedError, lock_path

    db, art = tmp_path / "s.duckdb", tmp_path / "artifacts"
    src = tmp_path / "b.csv"
    src.write_text("model,item_id,subject,score\n" + "".join(
        f"m{m},q{i},s{i % 3},{(i * (m + 2)) % 3 == 0}\n" for m in range(3) for i in range(30)))
    assert ingest_file(db, src, benchmark="b", mapping=parse_mapping()).status == "ingested"
    holder = []
    real_stage = artifacts.stage_run

    def stage_then_lose_the_lock(*a, **k):
        staged = real_stage(*a, **k)
        p = subprocess.Popen([sys.executable, "-c", "import sys, time; from filelock import FileLock; "
                              f"lk = FileLock({str(lock_path(db))!r}); lk.acquire(); print('held', flush=True); time.sleep(60)"],
                             stdout=subprocess.PIPE, text=True)
        assert p.stdout.readline().strip() == "held"
        holder.append(p)
        return staged

    monkeypatch.setattr(artifacts, "stage_run", stage_then_lose_the_lock)
    try:
        with pytest.raises(StoreLockedError):
            audit_flow(AuditRequest(db=str(db), benchmark="b", artifacts_root=str(art), alpha=0.05, variant=None,
                                    lock_timeout=0.2))
    finally:
        for p in holder:
            p.kill()
            p.wait()
    assert read_index(art)["benchmarks"] == []
    assert not [p for p in (art / "b").iterdir()]  # no run directory, no staging folder


@pytest.mark.parametrize("damage", ["missing", "garbage"])
def test_dashboard_build_rebuilds_a_missing_or_damaged_index(tmp_path, damage):
    from benchcert.tasks.render.dashboard import DashboardError, build_site

    arts = tmp_path / "arts"
    stage_and_publish(arts, summary=_summary("b", "r1"),
                      manifest_fields=_fields("b", "r1", "2026-11-21T00:00:00.000Z"),
                      tables={}, report_html="<html></html>")
    index = arts / "index.json"
    if damage == "missing":
        index.unlink()
    else:
        index.write_text("{broken")
    report = build_site(arts, tmp_path / "site")
    assert report.runs == 1 and json.loads(index.read_text())["benchmarks"][0]["runs"] == ["r1"]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DashboardError, match="artifacts root"):
        build_site(empty, tmp_path / "site2")  # no runs: not an artifacts root, nothing written
    assert not (empty / "index.json").exists()
