"""The Parquet export: hive-partitioned by benchmark, read back into the same matrices as the store."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchcert.tasks.store import connection as store
from benchcert.tasks.store.export import ExportError, export_parquet, open_export
from benchcert.tasks.store.matrices import load_matrices, source_refs

from conftest import MMLU_CSV, MMLU_MAP, SMALL_CSV


@pytest.fixture(scope="module")
def two_benchmarks(tmp_path_factory):
    from benchcert.tasks.ingest.service import ingest_file
    from benchcert.tasks.ingest.mapping import parse_mapping

    db = tmp_path_factory.mktemp("export") / "store.duckdb"
    mapping = parse_mapping(["model=model", "item_id=question", "subject=topic", "domain=area", "score=correct"])
    assert ingest_file(db, SMALL_CSV, benchmark="small/one", mapping=mapping).status == "ingested"
    assert ingest_file(db, MMLU_CSV, benchmark="mmlu_pro", mapping=parse_mapping(config=MMLU_MAP)).status == "ingested"
    return db


def _same(a, b):
    assert a.models == b.models and a.variant == b.variant
    assert a.items.equals(b.items)
    np.testing.assert_array_equal(a.scores, b.scores)
    np.testing.assert_array_equal(a.n_replicates, b.n_replicates)


def test_export_is_partitioned_and_reads_back_the_same_matrices(two_benchmarks, tmp_path):
    out = tmp_path / "export"
    report = export_parquet(two_benchmarks, out)
    assert sorted(report.benchmarks) == ["mmlu_pro", "small/one"]
    assert report.rows["response_codes"] == 347_215 + 22
    # one folder per benchmark, percent-encoded: "small/one" cannot make a sub-folder
    parts = sorted(p.name for p in (out / "response_codes").iterdir())
    assert parts == ["benchmark=mmlu_pro", "benchmark=small%2Fone"]
    manifest = json.loads((out / "export.json").read_text())
    assert manifest["rows"] == report.rows
    with store.open_store(two_benchmarks, write=False) as con:
        ref = {b: (load_matrices(con, b), source_refs(con, b)) for b in report.benchmarks}
    for b in report.benchmarks:
        con = open_export(out, b)
        try:
            _same(load_matrices(con, b), ref[b][0])
            assert source_refs(con, b).equals(ref[b][1])
        finally:
            con.close()


def test_export_of_one_benchmark_replaces_an_earlier_export_and_refuses_other_folders(two_benchmarks, tmp_path):
    out = tmp_path / "export"
    export_parquet(two_benchmarks, out)
    report = export_parquet(two_benchmarks, out, benchmarks=["small/one"])
    assert report.benchmarks == ["small/one"]
    assert [p.name for p in (out / "response_codes").iterdir()] == ["benchmark=small%2Fone"]
    with pytest.raises(ExportError, match="not in the export"):
        open_export(out, "mmlu_pro")
    with pytest.raises(ExportError, match="have no responses"):
        export_parquet(two_benchmarks, out, benchmarks=["nope"])
    (tmp_path / "other").mkdir()
    with pytest.raises(ExportError, match="not a benchcert export"):
        export_parquet(two_benchmarks, tmp_path / "other")
    assert not any(p.name.startswith(".") for p in tmp_path.iterdir())


def test_export_reads_back_recorded_subsets(tmp_path):
    """The export's tables are views: the loaders' "is the table there" check must count views, or a Dask
    worker reads no recorded subset (and no option probabilities) from an export that holds them."""
    import shutil

    from benchcert.tasks.ingest.mapping import parse_mapping
    from benchcert.tasks.ingest.service import ingest_file
    from benchcert.tasks.subsample.subsets import create_subset, load_subsets, load_subsets_from_db

    db = tmp_path / "store.duckdb"
    mapping = parse_mapping(["model=model", "item_id=question", "subject=topic", "domain=area", "score=correct"])
    shutil.copy(SMALL_CSV, tmp_path / "small.csv")
    assert ingest_file(db, tmp_path / "small.csv", benchmark="small", mapping=mapping).status == "ingested"
    create_subset(db, "small", 4, seed=3)
    (recorded,) = load_subsets_from_db(db, "small")
    out = tmp_path / "export"
    assert export_parquet(db, out).rows["subset_items"] == 4
    con = open_export(out, "small")
    try:
        (read,) = load_subsets(con, "small")
    finally:
        con.close()
    assert read.subset_id == recorded.subset_id and read.items.equals(recorded.items)
