"""The item analysis service (tasks/items/service.py) and its reduced set (tasks/items/reduce.py) on
made-up matrices: what each table says, the reduced set's guarantee, and refusals."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from benchcert.tasks.errors import NotAnalysableError
from benchcert.tasks.items.reduce import reduced_set
from benchcert.tasks.items.service import ItemsSettings, analyze_items
from benchcert.tasks.store.benchmark_matrices import BenchmarkMatrices
from item_sim import two_pl
from simcheck import rate_ci


def _matrices(x: np.ndarray, n_subjects: int = 10) -> BenchmarkMatrices:
    n_items, n_models = x.shape
    items = pl.DataFrame({"item_id": [f"i{i}" for i in range(n_items)],
                          "subject": [f"s{i % n_subjects}" for i in range(n_items)],
                          "domain": [f"d{i % 2}" for i in range(n_items)]})
    return BenchmarkMatrices("b", "", items=items, models=[f"m{j:02d}" for j in range(n_models)], scores=x)


def test_tables_and_overview():
    rng = np.random.default_rng(1)
    x, swapped, *_ = two_pl(rng, n_models=40, n_items=600, n_swapped=3)
    x[:5] = 1.0   # inert
    swapped[:5] = False
    r = analyze_items(_matrices(x), ItemsSettings(seed=1))
    o = r.overview
    assert o["n_inert"] >= 5 and o["n_inert_all_correct"] >= 5
    assert o["inert_call_share"] == pytest.approx(r.items["inert"].sum() / 600)
    assert r.items.height == 600 and r.items.filter("inert").height == o["n_inert"]
    flagged = r.items.filter("broken_key")["item_id"].to_list()
    assert len(set(flagged) - {f"i{i}" for i in np.flatnonzero(swapped)}) <= 1
    assert r.neighbours.height == 39 and r.bands["n_pairs"].sum() == 39
    assert 0 < o["reliability_lower"] < o["reliability"] < o["reliability_upper"] <= 1
    assert o["irt_fitted"] > 500
    assert set(r.tables()) == {"items", "items_resolution", "items_neighbours", "items_overview", "items_reduced"}


def test_strong_models_agreement_from_choices():
    x = np.array([[1, 1, 1, 0, 0, 0]] * 4 + [[0, 0, 0, 1, 1, 1]], dtype=float)  # item 4: right on the weak ones
    m = _matrices(x, n_subjects=1)
    strong = ["m00", "m01", "m02"]
    choices = pl.DataFrame({"model": strong * 2, "item_id": ["i4"] * 3 + ["i0"] * 3,
                            "choice": ["B", "B", "C", "A", "A", "A"], "key": ["A"] * 6})
    r = analyze_items(m, ItemsSettings(irt=False), choices=choices)
    agree = dict(zip(r.items["item_id"], r.items["strong_agree_non_key"]))
    assert agree["i4"] == pytest.approx(2 / 3) and agree["i0"] == 0.0 and agree["i1"] is None


def test_fewer_than_three_models_is_not_analysable():
    with pytest.raises(NotAnalysableError, match="at least 3 models"):
        analyze_items(_matrices(np.ones((5, 2))), ItemsSettings())


@pytest.mark.montecarlo
def test_reduced_set_guarantee_holds_for_every_score_and_gap_together():
    # one benchmark, many draws of the reduced set: every model's score and every gap within the
    # stated bounds together in at least 1 - alpha of the draws
    rng = np.random.default_rng(2)
    x, *_ = two_pl(rng, n_models=8, n_items=3000, n_swapped=0)
    m = _matrices(x, n_subjects=30)
    inert = (np.nanmax(x, axis=1) == np.nanmin(x, axis=1))
    held, runs = 0, 200
    for seed in range(runs):
        red = reduced_set(m, inert, tolerance=0.06, alpha=0.05, seed=seed)
        assert red.n_evaluated < red.n_pool  # a real subset
        held += int(red.max_score_error <= red.score_bound and red.max_gap_error <= red.gap_bound)
    rate, low, high = rate_ci(held, runs)
    assert high >= 0.95, (rate, low, high)


def test_reduced_set_drops_inert_items_only_when_no_subset_meets_the_tolerance():
    rng = np.random.default_rng(3)
    x, *_ = two_pl(rng, n_models=10, n_items=300, n_swapped=0)
    x[:20] = 0.0
    m = _matrices(x)
    inert = (np.nanmax(x, axis=1) == np.nanmin(x, axis=1))
    red = reduced_set(m, inert, tolerance=0.001, alpha=0.05, seed=0)
    assert red.n_evaluated == red.n_pool == 300 - int(inert.sum())
    assert red.max_score_error == pytest.approx(0.0, abs=1e-12) and red.sign_changes == 0
    assert red.calls_saved_share == pytest.approx(inert.mean())
    assert any("drops the inert items only" in n for n in red.notes)


def test_the_audit_analysis_is_skipped_out_of_core():
    from benchcert.tasks.audit.analyses import run_analysis
    from benchcert.tasks.audit.contract import AuditConfig
    from benchcert.tasks.items import analysis
    from benchcert.tasks.store.blocked import OutOfCoreError

    class OutOfCore(BenchmarkMatrices):
        @property
        def scores(self):
            raise OutOfCoreError("'b' is audited out of core")

    x, *_ = two_pl(np.random.default_rng(9), n_models=5, n_items=50, n_swapped=0)
    plain = _matrices(x)
    m = OutOfCore("b", "", items=plain.items, models=plain.models, scores=x)
    out = run_analysis("items", analysis.analyze, m, AuditConfig(options={"items": {"enabled": True}}))
    assert not out.tables and "skipped" in out.warnings[0] and "out of core" in out.warnings[0]
