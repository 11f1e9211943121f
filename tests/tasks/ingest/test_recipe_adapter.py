"""docs/architecture.md's recipe for a new log format, followed: a toy adapter (this module) and one
registration, nothing else touched; a toy log ingested through detection and through ``--format``."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from benchcert.flows.cli import main
from benchcert.tasks.ingest.adapters import native, registry
from benchcert.tasks.ingest.adapters.generic import Reject

FORMAT = "toy"


# --- 1. the adapter's module (here, this test): sniff and open ------------------------------------

def sniff(probe: registry.Probe) -> str | None:
    """A toy log: one JSON object a line, the first carrying ``"toy_log"``."""
    return FORMAT if isinstance(probe.obj, dict) and "toy_log" in probe.obj else None


def open_toy(path: Path, mapping, benchmark: str | None, kind: str | None) -> native.NativeSource:
    native.check_mapped(path, FORMAT, mapping, ())

    def records():
        with open(path, encoding="utf-8") as fh:
            for line, text in enumerate(fh, start=1):
                obj = json.loads(text)
                score, problem = native.to_float(obj.get("ok"), strings=False)
                if problem is not None:
                    yield Reject(line=line, field="ok", reason=problem, raw=text)
                    continue
                yield native.Row(line=line, model=obj["who"], item_id=obj["q"], score=score, src=obj)

    return native.NativeSource(format=FORMAT, path=path, sha256=native.sha256_file(path),
                               benchmark=benchmark or "toy_bench", settings={}, read={"format": FORMAT},
                               records=records)


ADAPTER = registry.Adapter(name=FORMAT, reads="toy logs", sniff=sniff, open=open_toy)


# --- 2. its registration --------------------------------------------------------------------

@pytest.fixture
def toy_registered():
    registry.register(ADAPTER)
    try:
        yield
    finally:
        registry.unregister(FORMAT)


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _stored(db: Path) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute("SELECT r.benchmark, r.model, r.item_id, r.score, s.format FROM responses r "
                           "JOIN sources s USING (source_id) ORDER BY r.model, r.item_id").fetchall()


def test_a_toy_adapter_registered_as_the_recipe_says_is_detected(tmp_path, toy_registered, capsys):
    log = _write(tmp_path / "run.log", [{"toy_log": 1, "who": "m1", "q": "q1", "ok": True},
                                        {"who": "m1", "q": "q2", "ok": 0}, {"who": "m2", "q": "q1", "ok": 0.5}])
    db = tmp_path / "s.duckdb"
    assert main(["ingest", str(log), "--db", str(db), "--json", "--in-process"]) == 0
    (report,) = json.loads(capsys.readouterr().out)["files"]
    assert report["status"] == "ingested" and report["format"] == FORMAT and report["rows_added"] == 3
    assert _stored(db) == [("toy_bench", "m1", "q1", 1.0, FORMAT), ("toy_bench", "m1", "q2", 0.0, FORMAT),
                           ("toy_bench", "m2", "q1", 0.5, FORMAT)]


def test_format_forces_the_toy_adapter_and_its_rejects_name_the_line(tmp_path, toy_registered, capsys):
    # No "toy_log" key: detection would not choose it; --format does.
    log = _write(tmp_path / "plain.jsonl", [{"who": "m1", "q": "q1", "ok": 1}, {"who": "m1", "q": "q2", "ok": "1"}])
    db = tmp_path / "s.duckdb"
    assert main(["ingest", str(log), "--db", str(db), "--format", FORMAT, "--benchmark", "b", "--json",
                 "--in-process"]) == 1
    (report,) = json.loads(capsys.readouterr().out)["files"]
    assert report["status"] == "rejected" and report["rejects"][0]["line"] == 2
    assert main(["ingest", str(log), "--db", str(db), "--format", FORMAT, "--benchmark", "b", "--allow-rejects",
                 "--json", "--in-process"]) == 0
    assert _stored(db) == [("b", "m1", "q1", 1.0, FORMAT)]


def test_without_its_registration_the_toy_format_is_unknown(tmp_path, capsys):
    log = _write(tmp_path / "plain.jsonl", [{"who": "m1", "q": "q1", "ok": 1}])
    with pytest.raises(SystemExit) as exc:
        main(["ingest", str(log), "--db", str(tmp_path / "s.duckdb"), "--format", FORMAT])
    assert exc.value.code == 2 and "invalid choice: 'toy'" in capsys.readouterr().err
