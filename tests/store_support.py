"""What the store and CLI tests share: the 'store unchanged' oracle, a store of 0/1 scores, and
``cli``, a command run in this process."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from polars.testing import assert_frame_equal

from benchcert.tasks.store.connection import open_store, query_pl

TABLES = ("responses", "response_codes", "models", "variants", "items", "sources", "rejects", "runs", "run_results")


def snapshot(db: Path) -> dict[str, pl.DataFrame]:
    """Every row of every table, in a canonical order: the 'store unchanged' oracle."""
    with open_store(db, write=False) as con:
        return {t: query_pl(con, f"SELECT * FROM {t}").sort(pl.all()) for t in TABLES}


def assert_unchanged(before: dict, db: Path) -> None:
    after = snapshot(db)
    for t in TABLES:
        assert_frame_equal(before[t], after[t], check_row_order=True)


def store_of_correct(root: Path, benchmark: str, models: dict, n_subjects: int) -> Path:
    """A store of 0/1 scores under ``root``: ``models[name][i]`` is whether the model got item ``i``
    right, item ``i`` in subject ``i % n_subjects`` (one CSV, ingested as a user would)."""
    from benchcert.tasks.ingest.mapping import parse_mapping
    from benchcert.tasks.ingest.service import ingest_file

    csv = root / f"{benchmark}.csv"
    lines = ["model,item_id,subject,score"]
    for name, correct in models.items():
        lines += [f"{name},i{i},s{i % n_subjects},{int(c)}" for i, c in enumerate(correct)]
    csv.write_text("\n".join(lines) + "\n")
    path = root / "s.duckdb"
    assert ingest_file(path, csv, benchmark=benchmark, mapping=parse_mapping()).status == "ingested"
    return path


def ingested_text(db: Path, csv: Path, text: str, benchmark: str = "b") -> Path:
    """``text`` (benchcert's native columns) written to ``csv`` and ingested into the store ``db``
    (created if needed; plain function, no Prefect); ``db``."""
    from benchcert.tasks.ingest.mapping import parse_mapping
    from benchcert.tasks.ingest.service import ingest_file

    csv.write_text(text)
    report = ingest_file(db, csv, benchmark=benchmark, mapping=parse_mapping())
    assert report.status == "ingested", report.message
    return db


def cli_store(root: Path, name: str, rows: list[str], benchmark: str) -> Path:
    """The CSV lines ``rows`` (header first) written to ``root/NAME.csv`` and ingested by ``benchcert
    ingest`` (its output swallowed) into ``root/NAME.duckdb``; the store's path."""
    import contextlib
    import io

    from benchcert.flows.cli import main

    path = root / f"{name}.csv"
    path.write_text("\n".join(rows) + "\n")
    db = root / f"{name}.duckdb"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["ingest", str(path), "--db", str(db), "--benchmark", benchmark]) == 0
    return db


def cli(capsys, *argv):
    """Run ``benchcert ARGV...`` in this process: (exit code, stdout, stderr)."""
    from benchcert.flows.cli import main

    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err
