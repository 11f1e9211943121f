"""The perturbation test's design tables on disk (tasks/perturbation/tables.py, issue #36 finding 7):
the cache folder the user sets, files written whole (temporary file, then rename) by concurrent
runs without loss, the table shipped with the package, and versions kept apart."""

from __future__ import annotations

import json
import math
import multiprocessing as mp
import os
from pathlib import Path

import pytest

from benchcert.stats.perturbation import calibrated, item_test
from benchcert.tasks.perturbation import tables


@pytest.fixture
def clean(monkeypatch, tmp_path):
    """An empty cache folder, no shipped table, nothing known or computed in this process."""
    monkeypatch.setenv(tables.ENV_DIR, str(tmp_path / "cache"))
    monkeypatch.setenv(tables.ENV_SHIPPED, "0")
    saved = (dict(calibrated._KNOWN), dict(calibrated._COMPUTED), dict(item_test._KNOWN_GAPS),
             dict(item_test._COMPUTED_GAPS), set(tables._loaded))
    for d in (calibrated._KNOWN, calibrated._COMPUTED, item_test._KNOWN_GAPS, item_test._COMPUTED_GAPS):
        d.clear()
    tables._loaded.clear()
    calibrated.calibration.cache_clear()
    item_test._min_gap.cache_clear()
    yield tmp_path / "cache" / "perturbation"
    for d, old in zip((calibrated._KNOWN, calibrated._COMPUTED, item_test._KNOWN_GAPS, item_test._COMPUTED_GAPS),
                      saved):
        d.clear()
        d.update(old)
    tables._loaded.clear()
    tables._loaded.update(saved[4])
    calibrated.calibration.cache_clear()
    item_test._min_gap.cache_clear()


def test_cache_folder_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(tables.ENV_DIR, str(tmp_path / "c"))
    assert tables.cache_dir() == tmp_path / "c" / "perturbation"
    monkeypatch.setenv(tables.ENV_DIR, "off")
    assert tables.cache_dir() is None
    monkeypatch.delenv(tables.ENV_DIR)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert tables.cache_dir() == tmp_path / "xdg" / "benchcert" / "perturbation"


def test_a_run_saves_what_it_computed_and_the_next_reads_it(clean):
    with tables.design_tables():
        z, _ = calibrated.calibration(3, 5, 5, 0.05)
        gap = item_test.min_detectable_gap([3, 4, 6], 5)
    (path,) = clean.glob("tables-v*.json")
    data = json.loads(path.read_text())
    assert data["version"] == calibrated.CALIBRATION_VERSION
    assert [3, 5, 5, 0.05, z] in data["calibrations"] and [[3, 4, 6], 5, 0.05, 0.8, gap] in data["min_gaps"]
    assert not list(clean.glob(".tmp-*"))                          # the temporary file was renamed
    # a new process: nothing known until the folder is read
    calibrated._KNOWN.clear(), item_test._KNOWN_GAPS.clear(), tables._loaded.clear()
    calibrated.calibration.cache_clear()
    tables.load()
    assert calibrated._KNOWN[(3, 5, 5, 0.05)] == z and not calibrated._COMPUTED
    assert item_test._KNOWN_GAPS[((3, 4, 6), 5, 0.05, 0.8)] == gap


def test_another_version_and_broken_files_are_ignored(clean):
    clean.mkdir(parents=True)
    v = calibrated.CALIBRATION_VERSION
    (clean / f"tables-v{v}-old.json").write_text(json.dumps({"version": v - 1, "calibrations": [[2, 7, 7, 0.05, 9.0]]}))
    (clean / f"tables-v{v}-broken.json").write_text("{not json")
    (clean / f"tables-v{v}-inf.json").write_text(json.dumps({"version": v, "calibrations": [[2, 1, 1, 0.05, None]]}))
    tables.load()
    assert (2, 7, 7, 0.05) not in calibrated._KNOWN and math.isinf(calibrated._KNOWN[(2, 1, 1, 0.05)])


def _worker(folder: str, r: int) -> None:
    os.environ[tables.ENV_DIR] = folder
    os.environ[tables.ENV_SHIPPED] = "0"
    with tables.design_tables():
        calibrated.calibration(2, r, r, 0.05)


def test_concurrent_runs_lose_nothing(clean):
    """Six processes calibrating different designs into one folder at once: every design is there,
    every file is whole JSON, no temporary file is left."""
    folder = str(clean.parent.parent / "cache")
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_worker, args=(folder, r)) for r in (2, 3, 4, 5, 6, 7)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(300)
        assert p.exitcode == 0
    files = list(clean.glob("tables-v*.json"))
    found = {tuple(row[:4]) for f in files for row in json.loads(f.read_text())["calibrations"]}
    assert {(2, r, r, 0.05) for r in (2, 3, 4, 5, 6, 7)} <= found
    assert not list(clean.glob(".tmp-*"))


def test_many_files_are_merged_into_one(clean, monkeypatch):
    monkeypatch.setattr(tables, "MERGE_AFTER", 3)
    for r in (2, 3, 4, 5):
        with tables.design_tables():
            calibrated.calibration(2, r, r, 0.05)
    files = list(clean.glob("tables-v*.json"))
    assert len(files) == 1
    rows = json.loads(files[0].read_text())["calibrations"]
    assert {tuple(row[:4]) for row in rows} == {(2, r, r, 0.05) for r in (2, 3, 4, 5)}


def test_an_unwritable_cache_leaves_the_run_alone(clean, monkeypatch, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv(tables.ENV_DIR, str(blocker))                  # a file where a folder should be
    with tables.design_tables():
        z, _ = calibrated.calibration(2, 4, 4, 0.05)
    assert z >= 0 and blocker.read_text() == ""


def test_the_shipped_table_matches_the_code():
    """The package's table is of this version, holds the bundled data's and the study's designs, and a
    sample of its entries equals a fresh computation (else tools/perturbation_tables.py must be rerun)."""
    from importlib.resources import files

    data = json.loads((files("benchcert.tasks.perturbation") / tables.SHIPPED).read_text())
    assert data["version"] == calibrated.CALIBRATION_VERSION
    known = {tuple(row[:4]): row[4] for row in data["calibrations"]}
    assert {(m, r, rt, 0.05) for m in (2, 3, 5, 8) for r in (10, 50) for rt in sorted({3, 10, r})} <= set(known)
    assert len(data["min_gaps"]) > 100
    for key in [(2, 10, 3, 0.05), (5, 10, 10, 0.05), (3, 50, 10, 0.05)]:
        fresh = calibrated._calibrate(*key[:3], calibrated._widening(0.05, key[0]), 0.05)
        assert known[key] == pytest.approx(fresh), key
    gap_row = data["min_gaps"][0]
    item_test._min_gap.cache_clear()
    saved = dict(item_test._KNOWN_GAPS)
    item_test._KNOWN_GAPS.clear()
    try:
        assert item_test._min_gap(tuple(gap_row[0]), *gap_row[1:4]) == pytest.approx(gap_row[4])
    finally:
        item_test._KNOWN_GAPS.update(saved)
        item_test._min_gap.cache_clear()


def test_shipped_table_path_is_package_data():
    root = Path(__file__).resolve().parents[3]
    pyproject = (root / "pyproject.toml").read_text()
    assert '"benchcert.tasks.perturbation" = ["calibrations.json"]' in pyproject
