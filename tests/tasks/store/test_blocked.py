"""The out-of-core audit (tasks/store/blocked.py) writes the in-memory audit's artifacts.

Oracle: the same store audited twice, in memory and ``out_of_core`` with blocks of a few models,
compared artifact by artifact (tools/compare_runs.py: identical apart from run ids and times).
The store has holes (models that skipped items), unequal subjects, more than 150 models (the
leaderboard family of comparisons) and models ingested out of name order; the out-of-core
matrices never hand out the whole matrix (their ``scores`` raises, and a spy counts the reads).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from benchcert.stats.comparisons import pack_binary_scores, packed
from benchcert.tasks.ingest.mapping import parse_mapping
from benchcert.tasks.ingest.service import ingest_file
from benchcert.tasks.store import blocked
from benchcert.tasks.store.blocked import BlockedMatrices, OutOfCoreError, load_blocked, store_opener
from benchcert.tasks.store.connection import open_store
from benchcert.tasks.store.matrices import MatrixError, load_matrices

from conftest import tool


def _compare_runs():
    return tool("compare_runs").compare_runs


def _store(tmp_path: Path, n_models: int = 170, n_items: int = 48, fractional: bool = False,
           n_subjects: int = 12) -> Path:
    rng = np.random.default_rng(7)
    subject = [min(i // 3, n_subjects - 1) for i in range(n_items)]  # the last subject larger
    ability = rng.normal(0, 1, n_models)
    rows = []
    for j in rng.permutation(n_models):  # ingest order is not name order
        for i in range(n_items):
            if rng.random() < 0.03:
                continue  # a hole
            p = 1 / (1 + np.exp(-(ability[j] - 0.3 * subject[i] / 4)))
            score = float(rng.random() < p)
            if fractional and i == 0:
                score = 0.5
            rows.append({"model": f"m{j:03d}", "item_id": f"q{i:03d}", "subject": f"s{subject[i]:02d}",
                         "domain": f"d{subject[i] % 3}", "score": score})
    db = tmp_path / "s.duckdb"
    frame = pl.DataFrame(rows)
    half = frame["model"].unique(maintain_order=True).to_list()[: n_models // 2]
    for k, part in enumerate((frame.filter(pl.col("model").is_in(half)), frame.filter(~pl.col("model").is_in(half)))):
        path = tmp_path / f"part{k}.csv"
        part.write_csv(path)
        assert ingest_file(db, path, benchmark="b", mapping=parse_mapping()).status == "ingested"
    return db


@pytest.mark.usefixtures("prefect_harness")
def test_out_of_core_audit_writes_the_in_memory_artifacts(tmp_path, monkeypatch):
    from benchcert.flows.runs import run_audit
    from benchcert.tasks.audit.request import AuditRequest

    db = _store(tmp_path)
    reads = []
    original = BlockedMatrices._read

    def spy(self, cols):
        reads.append(len(cols))
        return original(self, cols)

    monkeypatch.setattr(BlockedMatrices, "_read", spy)
    # the read's packing of the comparisons' bits by the compiled kernel, on blocks of any size
    monkeypatch.setattr(packed, "PACK_KERNEL_MIN_CELLS", 1)
    mem = run_audit("in_process", AuditRequest(db=str(db), benchmark="b", artifacts_root=str(tmp_path / "mem")))
    ooc = run_audit("in_process", AuditRequest(db=str(db), benchmark="b", artifacts_root=str(tmp_path / "ooc"),
                                               out_of_core=True, dask_block_models=7))
    assert _compare_runs()(Path(mem["run_dir"]), Path(ooc["run_dir"])) == []
    assert reads and max(reads) <= 7  # never more than a block of models at a time


def test_blocks_and_columns_are_the_matrix(tmp_path):
    db = _store(tmp_path, n_models=23, n_items=30)
    with open_store(db, write=False) as con:
        full = load_matrices(con, "b")
        m = load_blocked(con, "b", None, store_opener(db, 5.0), block_models=4)
    assert m.models == full.models and m.items.equals(full.items)
    blocks = list(m.column_blocks(3))
    assert [hi - lo for lo, hi, _ in blocks] == [3] * 7 + [2]
    np.testing.assert_array_equal(np.concatenate([b for _, _, b in blocks], axis=1), full.scores)
    pick = [22, 0, 5, 17, 3, 11]
    np.testing.assert_array_equal(m.columns(pick), full.scores[:, pick])
    # The subsample's pairs name a model in several pairs: every repeat is read (a repeat's
    # column was left unwritten, NaN on this store with holes, before).
    pick = [5, 0, 5, 17, 0, 5]
    np.testing.assert_array_equal(m.columns(pick), full.scores[:, pick])
    for f in ("n", "total", "passed", "fractional", "low", "high"):
        np.testing.assert_array_equal(getattr(m.subject_counts, f), getattr(full.subject_counts, f))
    with pytest.raises(OutOfCoreError, match="out of core"):
        m.scores  # noqa: B018 - the property raises


def test_the_counts_pass_packs_the_comparisons_bits_once(tmp_path, monkeypatch):
    """The read packs each model's bits in the pass of its counts; the comparisons take them and read
    no block again (at a billion responses the second read cost about a tenth of the audit)."""
    from benchcert.tasks.audit.contract import AuditConfig
    from benchcert.tasks.compare.analysis import analyze

    db = _store(tmp_path, n_models=170, n_items=48)
    with open_store(db, write=False) as con:
        m = load_blocked(con, "b", None, store_opener(db, 5.0), block_models=9)
        full = load_matrices(con, "b")
    _ = m.subject_counts
    bits = m.packed_bits(m.item_subject)
    again = pack_binary_scores(full.column_blocks(50), full.n_items, len(full.models), full.item_subject)
    for name in ("o_bits", "x_bits", "first", "codes"):
        np.testing.assert_array_equal(getattr(bits, name), getattr(again, name))
    for mine, theirs in zip(bits.colstats, again.colstats):
        np.testing.assert_array_equal(mine, theirs)
    assert m.packed_bits(None) is None and m.packed_bits(np.zeros(m.n_items, dtype=np.int64)) is None
    assert full.packed_bits(full.item_subject) is None  # in memory: packed from the matrix when asked
    reads = []
    monkeypatch.setattr(BlockedMatrices, "_read", lambda self, cols: reads.append(cols))
    ooc = analyze(m, AuditConfig())
    assert reads == []
    assert ooc.tables["comparisons"].equals(analyze(full, AuditConfig()).tables["comparisons"])


def test_a_single_subjects_packed_bits_serve_the_paired_comparisons(tmp_path, monkeypatch):
    """With one subject the comparisons drop the clusters (paired CLT, subjects None): the bits packed
    with the one subject's codes have the layout of no subjects, so they read no block again either."""
    from benchcert.tasks.audit.contract import AuditConfig
    from benchcert.tasks.compare.analysis import analyze

    db = _store(tmp_path, n_models=12, n_items=30, n_subjects=1)
    with open_store(db, write=False) as con:
        m = load_blocked(con, "b", None, store_opener(db, 5.0), block_models=5)
        full = load_matrices(con, "b")
    assert m.subjects.height == 1
    _ = m.subject_counts
    bits = m.packed_bits(None)
    again = pack_binary_scores(full.column_blocks(50), full.n_items, len(full.models), None)
    assert bits.codes is None
    for name in ("o_bits", "x_bits", "first"):
        np.testing.assert_array_equal(getattr(bits, name), getattr(again, name))
    for mine, theirs in zip(bits.colstats, again.colstats):
        np.testing.assert_array_equal(mine, theirs)
    reads = []
    monkeypatch.setattr(BlockedMatrices, "_read", lambda self, cols: reads.append(cols))
    ooc = analyze(m, AuditConfig())
    assert reads == []
    assert ooc.tables["comparisons"].equals(analyze(full, AuditConfig()).tables["comparisons"])


def test_fractional_scores_are_refused(tmp_path):
    db = _store(tmp_path, n_models=5, n_items=12, fractional=True)
    with open_store(db, write=False) as con:
        m = load_blocked(con, "b", None, store_opener(db, 5.0))
    with pytest.raises(OutOfCoreError, match="0/1 scores"):
        m.subject_counts  # noqa: B018


def test_runs_merge_close_codes():
    assert blocked._runs(np.array([0, 1, 2, 50, 200, 201])) == [(0, 51), (200, 2)]
    assert blocked._runs(np.array([], dtype=np.int64)) == []


@pytest.mark.usefixtures("prefect_harness")
def test_cli_out_of_core(capsys, tmp_path, monkeypatch):
    from store_support import cli

    monkeypatch.delenv("PREFECT_API_URL", raising=False)  # the in-process audit a person types
    db = _store(tmp_path, n_models=9, n_items=24)
    code, out, err = cli(capsys, "audit", "--db", db, "--benchmark", "b", "--artifacts", tmp_path / "a",
                         "--out-of-core", "--dask-block-models", "4", "--in-process")
    assert code == 0, err
    (tmp_path / "f").mkdir()
    frac = _store(tmp_path / "f", n_models=4, n_items=12, fractional=True)
    code, out, err = cli(capsys, "audit", "--db", frac, "--benchmark", "b", "--artifacts", tmp_path / "a",
                         "--out-of-core", "--in-process")
    assert code != 0 and "needs 0/1 scores" in err and "without --out-of-core" in err
    assert "unexpected error" not in err


def test_a_store_changed_between_block_reads_is_refused(tmp_path):
    """The out-of-core matrices reopen the store for every read: a row ingested since their plan
    (a new item of the first model, whose code lies past the plan's item range) would land in the
    next model's first cell; the read refuses instead."""
    rows = [{"model": m, "item_id": f"q{i}", "subject": "s", "domain": "d", "score": 1.0}
            for m in ("a", "b") for i in range(5)]
    path = tmp_path / "rows.csv"
    pl.DataFrame(rows).write_csv(path)
    db = tmp_path / "s.duckdb"
    assert ingest_file(db, path, benchmark="b", mapping=parse_mapping()).status == "ingested"
    with open_store(db, write=False) as con:
        m = load_blocked(con, "b", None, store_opener(db, 5.0), block_models=2)
    np.testing.assert_array_equal(m.columns([0, 1]), np.ones((5, 2)))
    late = tmp_path / "late.csv"
    pl.DataFrame([{"model": "a", "item_id": "q5", "subject": "s", "domain": "d", "score": 0.0}]).write_csv(late)
    assert ingest_file(db, late, benchmark="b", mapping=parse_mapping()).status == "ingested"
    with pytest.raises(MatrixError, match="the store changed while the benchmark was being read"):
        m.columns([0, 1])


def test_another_benchmarks_ingest_between_block_reads_is_checked_and_let_through(tmp_path):
    """The store's stamp changes with any ingest; the benchmark's own census then decides: rows of
    another benchmark change nothing it reads, so the reads go on."""
    rows = [{"benchmark": b, "model": m, "item_id": f"q{i}", "subject": "s", "domain": "d", "score": 1.0}
            for b in ("b", "c") for m in ("a", "b") for i in range(5)]
    path = tmp_path / "rows.csv"
    pl.DataFrame(rows).write_csv(path)
    db = tmp_path / "s.duckdb"
    assert ingest_file(db, path, benchmark=None, mapping=parse_mapping()).status == "ingested"
    with open_store(db, write=False) as con:
        m = load_blocked(con, "b", None, store_opener(db, 5.0), block_models=2)
    np.testing.assert_array_equal(m.columns([0, 1]), np.ones((5, 2)))
    late = tmp_path / "late.csv"
    pl.DataFrame([{"benchmark": "c", "model": "z", "item_id": "q9", "subject": "s", "domain": "d",
                   "score": 0.0}]).write_csv(late)
    assert ingest_file(db, late, benchmark=None, mapping=parse_mapping()).status == "ingested"
    np.testing.assert_array_equal(m.columns([1, 0]), np.ones((5, 2)))
