"""CLI behaviour a script relies on: exit codes, --json, --help, hostile names from logs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchcert.flows.cli import main

from conftest import SMALL_CSV, SMALL_MAP
from store_support import cli

MAPS = [a for m in SMALL_MAP for a in ("--map", m)]


@pytest.mark.parametrize("command", ["ingest", "audit", "runs", "show", "schema"])
def test_every_command_has_help(command):
    r = subprocess.run([sys.executable, "-m", "benchcert.flows.cli", command, "--help"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and "usage: benchcert" in r.stdout


def test_usage_errors_exit_2(capsys, tmp_path):
    with pytest.raises(SystemExit) as e:
        main(["ingest", "x.csv"])  # --db missing
    assert e.value.code == 2
    code, _, err = cli(capsys, "ingest", SMALL_CSV, "--db", tmp_path / "s.duckdb", "--map", "nonsense")
    assert code == 2 and "FIELD=COLUMN" in err
    code, _, err = cli(capsys, "audit", "--db", tmp_path / "s.duckdb", "--benchmark", "b", "--alpha", "2")
    assert code == 2 and "--alpha" in err


def test_missing_store_exits_3(capsys, tmp_path):
    code, _, err = cli(capsys, "audit", "--db", tmp_path / "none.duckdb", "--benchmark", "b")
    assert code == 3 and "no such store" in err
    code, _, err = cli(capsys, "runs", "--db", tmp_path / "none.duckdb")
    assert code == 3


@pytest.mark.usefixtures("prefect_harness")
def test_rejected_file_exits_1_with_reasons(capsys, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("model,question,topic,area,correct\nm,q1,t,a,2\n")
    code, out, _ = cli(capsys, "ingest", bad, "--db", tmp_path / "s.duckdb", "--benchmark", "b", *MAPS, "--json")
    report = json.loads(out)
    assert code == 1 and report["ok"] is False
    (f,) = report["files"]
    assert f["status"] == "rejected" and f["rejects"][0]["line"] == 2
    code, _, err = cli(capsys, "ingest", bad, "--db", tmp_path / "s.duckdb", "--benchmark", "b", *MAPS)
    assert code == 1 and "line 2, field correct (score)" in err and "outside [0, 1]" in err


@pytest.mark.usefixtures("prefect_harness")
def test_directory_ingest_reports_unrecognised_files(capsys, tmp_path):
    d = tmp_path / "logs"
    d.mkdir()
    (d / "a.csv").write_text(SMALL_CSV.read_text())
    (d / "notes.txt").write_text("hello")
    code, out, _ = cli(capsys, "ingest", d, "--db", tmp_path / "s.duckdb", "--benchmark", "b", *MAPS, "--json")
    files = {Path(f["path"]).name: f for f in json.loads(out)["files"]}
    assert code == 1 and files["a.csv"]["status"] == "ingested"
    assert files["notes.txt"]["status"] == "error" and "no adapter recognises" in files["notes.txt"]["message"]


@pytest.mark.usefixtures("prefect_harness")
def test_hostile_names_from_logs_are_escaped_and_contained(capsys, tmp_path):
    evil_model = '<script>alert("x")</script>'
    evil_bench = "../../escape<img src=x onerror=alert(1)>"
    log = tmp_path / "evil.csv"
    log.write_text("model,item_id,subject,score\n"
                   f'"{evil_model.replace(chr(34), chr(34) * 2)}",1,<b>s</b>,1\n'
                   f'"{evil_model.replace(chr(34), chr(34) * 2)}",2,<b>s</b>,0\nok,1,<b>s</b>,1\nok,2,<b>s</b>,1\n')
    db, arts = tmp_path / "s.duckdb", tmp_path / "arts"
    code, out, err = cli(capsys, "ingest", log, "--db", db, "--benchmark", evil_bench)
    assert code == 0, err
    code, out, err = cli(capsys, "audit", "--db", db, "--benchmark", evil_bench, "--artifacts", arts, "--json")
    assert code == 0, err
    run_dir = Path(json.loads(out)["run_dir"]).resolve()
    assert arts.resolve() in run_dir.parents
    html = (run_dir / "report.html").read_text()
    assert "<script>" not in html and "<img" not in html and "<b>s</b>" not in html
    assert "&lt;script&gt;" in html
    summary = json.loads((run_dir / "summary.json").read_text())
    assert {m["model"] for m in summary["models"]} == {evil_model, "ok"}
