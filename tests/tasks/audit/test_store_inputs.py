"""The analyses' store inputs (parse flags, option probabilities, recorded subsets) are read with the
matrices, on the read's connection: an in-process audit opens the store twice (the read, the run
record), not once more per input, and its artifacts are those of the analyses reading them themselves."""

from __future__ import annotations

import contextlib
from pathlib import Path

from benchcert.flows.runs import run_audit
from benchcert.tasks.audit import steps
from benchcert.tasks.audit.request import AuditRequest
from benchcert.tasks.store import connection

from store_support import cli

ROOT = Path(__file__).resolve().parents[3]
TOOLS = ROOT / "tools"


def _store(capsys, tmp_path: Path) -> Path:
    """Two models of 12 items in 3 subjects with parse flags (a few unparsed), and a recorded subset."""
    rows = ["model,item_id,subject,score,parsed"]
    for j, model in enumerate(("alpha", "beta")):
        for i in range(12):
            rows.append(f"{model},q{i},s{i % 3},{(i + j) % 3 % 2},{'false' if (i + j) % 5 == 0 else 'true'}")
    log = tmp_path / "log.csv"
    log.write_text("\n".join(rows) + "\n")
    db = tmp_path / "s.duckdb"
    assert cli(capsys, "ingest", log, "--db", db, "--benchmark", "b", "--in-process")[0] == 0
    assert cli(capsys, "subsample", "--db", db, "--benchmark", "b", "--n", "6", "--seed", "3")[0] == 0
    # a checkpoint evaluated on the recorded subset only: the audit estimates its full score from it
    from benchcert.tasks.subsample.subsets import load_subsets_from_db

    (subset,) = load_subsets_from_db(db, "b")
    part = tmp_path / "checkpoint.csv"
    part.write_text("model,item_id,subject,score\n" + "".join(
        f"gamma,{item},{subj},{k % 2}\n" for k, (item, subj) in
        enumerate(zip(subset.items["item_id"], subset.items["subject"]))))
    assert cli(capsys, "ingest", part, "--db", db, "--benchmark", "b", "--in-process")[0] == 0
    return db


def test_one_read_serves_every_input_and_the_artifacts_are_the_same(capsys, tmp_path, monkeypatch):
    import sys

    sys.path.insert(0, str(TOOLS))
    from compare_runs import compare_runs

    db = _store(capsys, tmp_path)
    opened = []
    real = connection.open_store

    @contextlib.contextmanager
    def counting(*a, **k):
        opened.append(k.get("write"))
        with real(*a, **k) as con:
            yield con

    monkeypatch.setattr(connection, "open_store", counting)
    from benchcert.tasks.subsample import subsets

    monkeypatch.setattr(subsets, "open_store", counting)  # (imported by name there)
    one = run_audit("in_process", AuditRequest(db=str(db), benchmark="b", artifacts_root=str(tmp_path / "one")))
    assert opened == [False, True], opened  # the read (matrices and every input), then the run record
    import polars as pl

    tables = Path(one["run_dir"]) / "tables"
    assert pl.read_parquet(tables / "parse_failures.parquet").height == 2
    assert set(pl.read_parquet(tables / "subsample_estimates.parquet")["model"]) == {"gamma"}

    # Without the read's inputs each analysis opens the store itself: one opening more per input read.
    monkeypatch.setattr(steps, "store_inputs", lambda con, m: {})
    opened.clear()
    two = run_audit("in_process", AuditRequest(db=str(db), benchmark="b", artifacts_root=str(tmp_path / "two")))
    assert len(opened) == 5, opened  # the read, parse flags, subsets, option probabilities, the run record
    assert compare_runs(Path(one["run_dir"]), Path(two["run_dir"])) == []
