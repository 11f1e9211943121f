"""The repository stands alone and its command line says what it does: no references to files
outside it in help and README, plain choices in --help, plan compare from the stored data, and
the hierarchical interval in the audit's console table."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchcert.flows.cli import main

from conftest import ROOT, SMALL_CSV, SMALL_MAP


# The two kinds of outside pointer, spelled so that this file is not one itself.
OUTSIDE = ("STATS" + ".md", ".." + "/shared")


def _cites_outside(text: str) -> bool:
    return any(marker in text for marker in OUTSIDE)


def _help(*argv) -> str:
    r = subprocess.run([sys.executable, "-m", "benchcert.flows.cli", *argv, "--help"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0
    return r.stdout


@pytest.mark.parametrize("argv", [["plan"], ["plan", "compare"], ["compare"], ["audit"], ["ingest"]])
def test_help_cites_nothing_outside_the_project(argv):
    text = _help(*argv)
    assert not _cites_outside(text)


def test_readme_and_docs_cite_nothing_outside_the_project():
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text()
        assert not _cites_outside(text), path


def test_no_tracked_text_cites_files_outside_the_repository():
    """Code, tests, docs and data notes cite the papers' sections or docs/, never a file beside
    the repository (which a clone does not have); this file included."""
    suffixes = {".py", ".md", ".toml", ".txt", ".cfg", ".sh"}
    skip = {".venv", ".git", ".prefect", "demo-output", "bench-output", "serve-state", "__pycache__"}
    offenders = []
    for path in ROOT.rglob("*"):
        rel = path.relative_to(ROOT)
        if any(part in skip or part.endswith(".egg-info") for part in rel.parts) or not path.is_file():
            continue
        if not (path.suffix in suffixes or path.name in ("Makefile", "run")):
            continue
        text = path.read_text(errors="replace")
        if _cites_outside(text):
            offenders.append(str(rel))
    assert not offenders, offenders


def test_compare_help_lists_each_hierarchy_once():
    text = " ".join(_help("compare").split())
    assert "{subject,domain,subject,none}" not in text and "subject,domain (default" in text


@pytest.fixture()
def small_db(tmp_path):
    from benchcert.tasks.ingest.service import ingest_file
    from benchcert.tasks.ingest.mapping import parse_mapping

    db = tmp_path / "s.duckdb"
    assert ingest_file(db, SMALL_CSV, benchmark="b", mapping=parse_mapping(SMALL_MAP)).status == "ingested"
    return db


def _var_d(a: str, b: str) -> float:
    rows = [line.split(",") for line in SMALL_CSV.read_text().splitlines()[1:]]
    score = {(r[0], r[1]): float(r[4]) for r in rows}
    shared = sorted({q for m, q in score if m == a} & {q for m, q in score if m == b})
    return float(np.var([score[b, q] - score[a, q] for q in shared], ddof=1))


def test_plan_compare_uses_the_stored_paired_variance(capsys, small_db):
    assert main(["plan", "compare", "--eps", "0.05", "--db", str(small_db), "--benchmark", "b", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    stored = out["source"]["var_d_from_store"]
    pairs = [("m1", "m2"), ("m1", "m3"), ("m2", "m3")]
    assert stored["var_d"] == pytest.approx(max(_var_d(a, b) for a, b in pairs), abs=1e-12)
    power = {a["method"]: a for a in out["answers"]}["paired_power"]
    z = 1.959963984540054 + 0.8416212335729143
    assert power["n"] == int(np.ceil(z * z * stored["var_d"] / 0.05 ** 2 - 1e-9))
    assert "worst case" not in power["formula"]
    assert main(["plan", "compare", "--eps", "0.05", "--db", str(small_db), "--benchmark", "b", "--models", "m1,m3",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["source"]["var_d_from_store"]["var_d"] == pytest.approx(_var_d("m1", "m3"), abs=1e-12)
    # --var-d still wins; without a store the worst case is used and said.
    assert main(["plan", "compare", "--eps", "0.05", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "worst case" in {a["method"]: a for a in out["answers"]}["paired_power"]["formula"]


def test_audit_table_names_the_headline_question_and_shows_the_hierarchical_half_width(capsys, small_db, tmp_path):
    # Issue #25: the column header names the question; with this store's few subjects the headline is
    # the same-subjects interval and the hierarchical (new-subjects) half-width stands beside it.
    assert main(["audit", "--db", str(small_db), "--benchmark", "b", "--artifacts", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    head = next(line for line in out.splitlines() if line.startswith("model"))
    assert "these subjects" in head and "new subj" in head
    summary = json.loads(next((tmp_path / "a").rglob("summary.json")).read_text())
    m1 = next(m for m in summary["models"] if m["model"] == "m1")
    hier = next(i for i in m1["macro"]["intervals"] if i["method"] == "hierarchical")
    row = next(line for line in out.splitlines() if line.startswith("m1 "))
    assert f"{100 * hier['half_width']:.2f}" in row
