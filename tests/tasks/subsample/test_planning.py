"""tasks/subsample/planning.py, the service of ``benchcert plan`` and ``benchcert subsample``: the
user's mistakes are named errors with their exit codes, and h* has one way in (hstar_cache)."""

from __future__ import annotations

import dataclasses

import pytest

from benchcert.tasks.errors import MissingStoreError, NoDataError, UsageError, UserError
from benchcert.tasks.ingest.mapping import parse_mapping
from benchcert.tasks.ingest.service import ingest_file
from benchcert.tasks.subsample import hstar_cache, planning

from conftest import SMALL_CSV, SMALL_MAP


@pytest.fixture()
def db(tmp_path):
    path = tmp_path / "s.duckdb"
    assert ingest_file(path, SMALL_CSV, benchmark="small", mapping=parse_mapping(SMALL_MAP)).status == "ingested"
    return path


@pytest.mark.parametrize("source,required,message", [
    (planning.SizeSource(), True, "give the benchmark size"),
    (planning.SizeSource(N=0), False, "--N must be >= 1"),
    (planning.SizeSource(db="x.duckdb"), False, "--db and --benchmark go together"),
    (planning.SizeSource(N=5, db="x.duckdb", benchmark="b"), False, "either --N or --db/--benchmark"),
])
def test_where_N_comes_from_usage_errors(source, required, message):
    with pytest.raises(UsageError, match=message) as got:
        planning.resolve_N(source, required=required)
    assert got.value.exit_code == 2


def test_N_from_the_store_and_its_errors(db, tmp_path):
    N, where = planning.resolve_N(planning.SizeSource(db=db, benchmark="small"), required=True)
    assert N == 8 and where == {"db": str(db), "benchmark": "small"}
    assert planning.resolve_N(planning.SizeSource(), required=False) == (None, {})
    with pytest.raises(NoDataError, match="'nope' has no items") as got:
        planning.store_item_count(db, "nope", 10.0)
    assert got.value.exit_code == 1 and isinstance(got.value, UserError)
    with pytest.raises(MissingStoreError, match="no such store"):
        planning.store_item_count(tmp_path / "none.duckdb", "small", 10.0)


def test_plans_are_frozen_results_and_planner_errors_are_usage_errors(db):
    r = planning.plan_estimate(0.05, planning.SizeSource(N=1000), alpha=0.05, exact=False)
    assert r.to_dict()["source"] == {"N_from": "--N"} and r.plan.N == 1000
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.source = {}  # type: ignore[misc]
    with pytest.raises(UsageError, match="--alpha must be in"):
        planning.plan_zero_failure(0.1, planning.SizeSource(), alpha=1.5)
    with pytest.raises(UsageError, match="eps must be in"):
        planning.plan_zero_failure(2.0, planning.SizeSource(), alpha=0.05)
    with pytest.raises(UsageError, match="--models needs --db"):
        planning.plan_compare(0.05, planning.SizeSource(), alpha=0.05, power=0.8, var_d=None, models=["a", "b"])
    stored = planning.plan_compare(0.05, planning.SizeSource(db=db, benchmark="small"), alpha=0.05, power=0.8,
                                   var_d=None, models=None)
    assert stored.source["var_d_from_store"]["rule"].startswith("the largest of")
    with pytest.raises(UsageError, match="--models must name two models"):
        planning.plan_compare(0.05, planning.SizeSource(db=db, benchmark="small"), alpha=0.05, power=0.8,
                              var_d=None, models=["m1", "zz"])


def test_a_subset_draw_names_whose_mistake_it_is(db):
    with pytest.raises(NoDataError, match="no items"):
        planning.draw_subset(db, "nope", 2, seed=1, stratified=False, alpha=0.05, lock_timeout=10.0)
    with pytest.raises(UsageError, match="n must be <= N"):
        planning.draw_subset(db, "small", 50, seed=1, stratified=False, alpha=0.05, lock_timeout=10.0)
    drawn = planning.draw_subset(db, "small", 3, seed=1, stratified=False, alpha=0.05, lock_timeout=10.0)
    assert drawn.manifest.n == 3 and drawn.guarantee["exact_worst_case_half_width"] == pytest.approx(
        hstar_cache.exact_worst_case(3, 8, 0.05)[0], abs=0)


def test_hstar_has_one_way_in(tmp_path):
    from benchcert.tasks.subsample.analysis import _worst_case

    db = tmp_path / "s.duckdb"
    calls = []

    def counted(n, N, alpha):
        calls.append(n)
        return hstar_cache.exact_worst_case(n, N, alpha)

    first = hstar_cache.worst_cases([3, 5], 20, 0.05, db, one=counted)
    assert sorted(calls) == [3, 5] and first == {n: _worst_case(n, 20, 0.05) for n in (3, 5)}
    assert hstar_cache.worst_cases([3, 5], 20, 0.05, db, one=counted) == first and sorted(calls) == [3, 5]
    assert planning.worst_case_cached(db, 5, 20, 0.05) == first[5]
    assert hstar_cache.worst_cases([4], 20, 0.05) == {4: hstar_cache.exact_worst_case(4, 20, 0.05)}
