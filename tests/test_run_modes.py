"""In-process and Prefect run modes: the same flow code, the same results, no Prefect where none is configured."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchcert.flows.cli import main
from benchcert.flows.runs import IN_PROCESS, PREFECT, choose_mode, prefect_api_configured

from conftest import SMALL_CSV, SMALL_MAP

MAPS = [a for m in SMALL_MAP for a in ("--map", m)]
#: Fields that name the run or its time, and nothing else.
RUN_FIELDS = ("run_id", "created_at")


def _json(capsys, *argv) -> dict:
    code = main([str(a) for a in argv])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


def _content(run_dir: str) -> dict:
    summary = json.loads((Path(run_dir) / "summary.json").read_text())
    return {k: v for k, v in summary.items() if k not in RUN_FIELDS}


@pytest.mark.usefixtures("prefect_harness")
def test_in_process_and_prefect_modes_write_the_same_summary(capsys, tmp_path):
    runs = {}
    for mode, flag in ((IN_PROCESS, "--in-process"), (PREFECT, "--prefect")):
        db, arts = tmp_path / f"{mode}.duckdb", tmp_path / f"arts-{mode}"
        ing = _json(capsys, "ingest", SMALL_CSV, "--db", db, "--benchmark", "b", *MAPS, "--json", flag)
        assert ing["run_mode"] == mode and ing["files"][0]["status"] == "ingested"
        out = _json(capsys, "audit", "--db", db, "--benchmark", "b", "--artifacts", arts, "--json", flag)
        manifest = json.loads((Path(out["run_dir"]) / "manifest.json").read_text())
        assert out["run_mode"] == manifest["run_mode"] == mode
        # A Prefect run names its flow run; an in-process run has none, and says so.
        assert (manifest["flow_run_id"] is not None) == (mode == PREFECT)
        runs[mode] = out
        # Recorded in the store's catalog either way.
        listed = _json(capsys, "runs", "--db", db, "--json")
        assert [r["run_id"] for r in listed] == [out["run_id"]] and listed[0]["status"] == "completed"
    a, b = _content(runs[IN_PROCESS]["run_dir"]), _content(runs[PREFECT]["run_dir"])
    assert a == b
    assert len(a["models"]) == 3  # not vacuous: the small log's three models
    tables = sorted(p.name for p in (Path(runs[IN_PROCESS]["run_dir"]) / "tables").iterdir())
    assert tables == sorted(p.name for p in (Path(runs[PREFECT]["run_dir"]) / "tables").iterdir())


def test_mode_follows_the_configured_api(monkeypatch, tmp_path):
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.delenv("PREFECT_PROFILE", raising=False)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path))
    assert prefect_api_configured() is None and choose_mode() == IN_PROCESS
    assert choose_mode(True) == PREFECT
    (tmp_path / "profiles.toml").write_text('active = "srv"\n[profiles.srv]\nPREFECT_API_URL = "http://h:4200/api"\n'
                                           '[profiles.other]\n')
    assert prefect_api_configured() == "http://h:4200/api" and choose_mode() == PREFECT
    assert choose_mode(False) == IN_PROCESS
    monkeypatch.setenv("PREFECT_PROFILE", "other")
    assert choose_mode() == IN_PROCESS
    monkeypatch.setenv("PREFECT_API_URL", "http://x:1/api")
    assert choose_mode() == PREFECT


def test_in_process_commands_never_import_prefect(tmp_path):
    """A small ingest and its audit, in fresh processes without a Prefect API: Prefect is never imported."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    env["PREFECT_HOME"] = str(tmp_path / "prefect-home")
    probe = ("import sys\n"
             "from benchcert.flows.cli import main\n"
             "try:\n    code = main(sys.argv[1:])\nexcept SystemExit as e:\n    code = e.code\n"
             "assert not [m for m in sys.modules if m == 'prefect' or m.startswith('prefect.')], 'prefect imported'\n"
             "sys.exit(code)\n")
    db = tmp_path / "s.duckdb"
    for argv in (["--help"], ["ingest", str(SMALL_CSV), "--db", str(db), "--benchmark", "b", *MAPS],
                 ["audit", "--db", str(db), "--benchmark", "b", "--artifacts", str(tmp_path / "a"), "--json"]):
        r = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True, env=env, timeout=120)
        assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["run_mode"] == IN_PROCESS
