"""The exact worst-case subsample values h*(n, N, alpha) are computed once and kept beside the store."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchcert.tasks.subsample import hstar_cache
from benchcert.tasks.audit.contract import AuditConfig
from benchcert.tasks.subsample import analysis


@pytest.fixture()
def store(tmp_path):
    from benchcert.tasks.ingest.service import ingest_file
    from benchcert.tasks.ingest.mapping import parse_mapping

    rng = np.random.default_rng(7)
    rows = ["model,item_id,subject,score"]
    for m, p in (("a", 0.6), ("b", 0.7)):
        rows += [f"{m},i{i},s{i % 9},{int(rng.random() < p)}" for i in range(600)]
    csv = tmp_path / "x.csv"
    csv.write_text("\n".join(rows) + "\n")
    db = tmp_path / "s.duckdb"
    assert ingest_file(db, csv, benchmark="x", mapping=parse_mapping()).status == "ingested"
    return db


def _counting(monkeypatch):
    calls = []
    real = analysis.worst_case_halfwidth

    def counted(n, N, *, alpha):
        calls.append((n, N, alpha))
        return real(n, N, alpha=alpha)

    monkeypatch.setattr(analysis, "worst_case_halfwidth", counted)
    analysis._worst_case.cache_clear()  # a fresh process: nothing kept in memory
    return calls


def test_a_repeated_audit_does_not_recompute_hstar(store, monkeypatch):
    from benchcert.tasks.audit.steps import read_benchmark

    m, _, _ = read_benchmark(str(store), "x", None, 60.0)
    config = AuditConfig(db=str(store))
    calls = _counting(monkeypatch)
    first = analysis.analyze(m, config).tables["subsample_curve"]
    grid = analysis.n_grid(600)
    assert sorted(n for n, _, _ in calls) == sorted(grid) and len(grid) >= 4
    saved = json.loads(hstar_cache.cache_path(store).read_text())
    assert saved["code"] == hstar_cache.code_version() and len(saved["values"]) == len(grid)

    calls = _counting(monkeypatch)
    second = analysis.analyze(m, config).tables["subsample_curve"]
    assert calls == []  # read from the file, not recomputed
    assert second["exact_worst_case"].to_list() == first["exact_worst_case"].to_list()
    assert second["worst_case_K"].to_list() == first["worst_case_K"].to_list()

    # Another alpha is another key: computed once, the first alpha's values untouched.
    calls = _counting(monkeypatch)
    analysis.analyze(m, AuditConfig(db=str(store), alpha=0.1))
    assert len(calls) == len(grid) and {a for _, _, a in calls} == {0.1}


def test_stale_or_broken_cache_is_recomputed(store, monkeypatch):
    from benchcert.tasks.audit.steps import read_benchmark

    m, _, _ = read_benchmark(str(store), "x", None, 60.0)
    path = hstar_cache.cache_path(store)
    path.parent.mkdir(parents=True, exist_ok=True)
    grid = analysis.n_grid(600)
    # Values written by other code (another version of stats/subsample.py) are not trusted.
    path.write_text(json.dumps({"code": "something-else",
                                "values": {f"{n}/600/0.05": [0.5, 1] for n in grid}}))
    calls = _counting(monkeypatch)
    curve = analysis.analyze(m, AuditConfig(db=str(store))).tables["subsample_curve"]
    assert len(calls) == len(grid) and (curve["exact_worst_case"] < 0.5).all()
    path.write_text("{not json")
    calls = _counting(monkeypatch)
    analysis.analyze(m, AuditConfig(db=str(store)))
    assert len(calls) == len(grid)
    assert json.loads(path.read_text())["code"] == hstar_cache.code_version()
