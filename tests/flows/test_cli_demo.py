"""``benchcert demo`` (issue #33): the bundled MMLU-Pro logs into a new store, audited, the report named.

The demo runs once per module (an MMLU-Pro ingest and audit, a few seconds); the refusals are
checked before anything is ingested, so they cost nothing.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest

from benchcert.flows.cli import main
from benchcert.flows.cli import demo
from benchcert.flows.cli.audit import summary_table

from store_support import cli


def _snapshot(folder: Path) -> dict:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("demo") / "nested" / "demo-output"  # created with its parents
    # (capsys is per test: the module's one run captures its output by hand)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["demo", "--dir", str(folder), "--in-process"])
    return folder, code, out.getvalue(), err.getvalue()


def test_demo_ingests_audits_and_names_the_report(demo_run):
    folder, code, out, err = demo_run
    assert code == 0, err
    store = folder / "benchcert.duckdb"
    assert store.is_file()
    assert f"347215 row(s) added to {store}" in out  # the ingest command's own summary line
    (report,) = re.findall(r"^report: (.+)$", out, re.M)
    report = Path(report)
    assert report.is_file() and report.name == "report.html"
    assert report.parent.parent == (folder / "artifacts" / "mmlu_pro").resolve()
    # The table is the audit command's (its function, on the run's summary), not a copy of it.
    summary = json.loads((report.parent / "summary.json").read_text())
    assert summary_table(summary) in out
    assert summary["n_models"] == 29 and summary["n_items"] == 12032
    # The demo audits with --items (README): the report says what the benchmark itself measures.
    assert "items" in summary["analyses"] and summary["item_analysis"]["n_inert"] == 876
    assert f"--db {store} --benchmark mmlu_pro" in out  # the next step it suggests


def test_demo_refuses_a_dir_that_holds_a_store_and_changes_nothing(capsys, demo_run):
    folder, code, _, _ = demo_run
    assert code == 0
    before = _snapshot(folder)
    code, out, err = cli(capsys, "demo", "--dir", folder, "--in-process")
    assert code == 2 and out == ""
    assert str(folder / "benchcert.duckdb") in err and "already holds a store" in err
    assert _snapshot(folder) == before  # no new run, the store untouched


def test_demo_never_touches_a_users_store_or_files(capsys, tmp_path):
    (tmp_path / "benchcert.duckdb").write_bytes(b"the user's own store")
    (tmp_path / "notes.txt").write_text("keep me")
    before = _snapshot(tmp_path)
    code, _, err = cli(capsys, "demo", "--dir", tmp_path)
    assert code == 2 and str(tmp_path / "benchcert.duckdb") in err
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize("below", ["", "sub"])
def test_demo_refuses_a_file_as_its_folder(capsys, tmp_path, below):
    path = tmp_path / "a-file"
    path.write_text("x")
    target = path / below if below else path
    code, out, err = cli(capsys, "demo", "--dir", target)
    assert code == 2 and out == ""
    assert err.startswith(f"benchcert demo: --dir {target}: ") and err.count("\n") == 1
    assert path.read_text() == "x"


def test_demo_without_its_bundled_data_exits_1_naming_the_file(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(demo, "LOGS", ("mmlu_pro", "no_such_file.csv.gz"))
    code, _, err = cli(capsys, "demo", "--dir", tmp_path / "d")
    assert code == 1 and "no_such_file.csv.gz" in err and "missing from this installation" in err
    assert not (tmp_path / "d").exists()  # checked before the folder is made


def test_demo_in_an_installation_without_the_data_package_exits_1(capsys, tmp_path, monkeypatch):
    import importlib.resources

    def files(package):
        raise ModuleNotFoundError(f"No module named {package!r}")

    monkeypatch.setattr(importlib.resources, "files", files)
    code, _, err = cli(capsys, "demo", "--dir", tmp_path / "d")
    assert code == 1 and "benchcert.data" in err and "unexpected" not in err


def test_demo_help_names_the_store_and_the_refusal(capsys):
    with pytest.raises(SystemExit) as e:
        main(["demo", "--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0
    assert "DIR/benchcert.duckdb" in out and "refused (exit 2)" in out and "benchcert-demo" in out
