"""Shared fixtures: a Prefect test harness started once per session, and stores built once."""

from __future__ import annotations

import functools
import os
import warnings
from pathlib import Path

import pytest

# The session's server processes (a Prefect API, a Dask cluster) and the signal handling that
# stops them when a run is interrupted; hooks and fixtures are picked up from this module's names.
from session_support import (dask_address, prefect_harness, pytest_configure,  # noqa: F401
                             pytest_keyboard_interrupt, pytest_unconfigure)

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"
TESTS = Path(__file__).resolve().parent
MMLU_CSV = DATA / "mmlu_pro" / "mmlu_pro_item_correctness_long.csv.gz"
MMLU_MAP = DATA / "mmlu_pro" / "mapping.toml"
SMALL_CSV = TESTS / "data" / "small.csv"
SMALL_MAP = ["model=model", "item_id=question", "subject=topic", "domain=area", "score=correct"]
MMLU_ITEMS = DATA / "mmlu_pro" / "items_category_src.csv"  # each item's category and subject (src)
GRICE_CSV = DATA / "llm_stability" / "grice_college_mathematics.csv.gz"
GRICE = "llm_stability_grice_college_mathematics"  # the benchmark GRICE_CSV names


@functools.cache
def tool(name: str):
    """The script ``tools/NAME.py`` loaded as a module, once (tools/ is no package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def mmlu_pro_subject_sizes():
    """Items per MMLU-Pro subject (``src`` of :data:`MMLU_ITEMS`), subjects in name order."""
    import polars as pl

    return pl.read_csv(MMLU_ITEMS).group_by("src").len().sort("src")["len"].to_numpy()


def ingest_native(db: Path, path: Path) -> Path:
    """``path``, a file in benchcert's native columns, ingested into the store ``db`` (created if
    needed; plain function, no Prefect); ``db``."""
    from benchcert.tasks.ingest.service import ingest_file
    from benchcert.tasks.ingest.mapping import parse_mapping

    report = ingest_file(db, path, benchmark=None, mapping=parse_mapping())
    assert report.status == "ingested", report.message
    return db


def matrices_from_scores(scores: dict, subjects):
    """BenchmarkMatrices of one domain from ``{model: score per item}`` and each item's subject
    code (NaN = the model did not answer that item)."""
    import numpy as np
    import polars as pl

    from benchcert.tasks.store.matrices import LONG_SCHEMA, BenchmarkMatrices

    n = subjects.size
    long = pl.DataFrame({
        "model": np.repeat(list(scores), n), "item_id": np.tile([f"q{i:04d}" for i in range(n)], len(scores)),
        "subject": np.tile([f"s{k}" for k in subjects], len(scores)), "domain": "all",
        "score": np.concatenate(list(scores.values())), "n_replicates": 1})
    long = long.filter(pl.col("score").is_not_nan()).sort("subject", "item_id", "model")
    return BenchmarkMatrices(benchmark="b", variant="", long=long.cast(LONG_SCHEMA))

for key, value in {"PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1",
                   "PREFECT_SERVER_UI_ENABLED": "false", "PREFECT_LOGGING_LEVEL": "WARNING",
                   "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",
                   # the suite never writes the user's cache folder (tasks/perturbation/tables.py)
                   "BENCHCERT_CACHE_DIR": "off"}.items():
    os.environ.setdefault(key, value)


@pytest.fixture(scope="session")
def mmlu_db(tmp_path_factory) -> Path:
    """The real MMLU-Pro file ingested once (plain function, no Prefect); tests only read it."""
    from benchcert.tasks.ingest.service import ingest_file
    from benchcert.tasks.ingest.mapping import parse_mapping

    db = tmp_path_factory.mktemp("mmlu") / "store.duckdb"
    report = ingest_file(db, MMLU_CSV, benchmark="mmlu_pro", mapping=parse_mapping(config=MMLU_MAP))
    assert report.status == "ingested", report.message
    return db


@pytest.fixture(scope="module")
def mmlu(mmlu_db):
    """The MMLU-Pro matrices of ``mmlu_db``, read once per test module."""
    from benchcert.tasks.store.connection import open_store
    from benchcert.tasks.store.matrices import load_matrices

    with open_store(mmlu_db, write=False) as con:
        return load_matrices(con, "mmlu_pro")


@pytest.fixture()
def small_mapping():
    from benchcert.tasks.ingest.mapping import parse_mapping

    return parse_mapping(SMALL_MAP)


@pytest.fixture
def no_warnings():
    """Every warning inside the test is an error: clean data must not warn."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


@pytest.fixture
def quiet():
    """Warnings inside the test are ignored (a simulation's degenerate draws warn by design)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
