"""Run directories: names that cannot escape their folder, atomic writes, the index."""

from __future__ import annotations

import json

import polars as pl
import pytest

from benchcert.tasks.artifacts.folders import inside, safe_component

from benchcert.tasks.artifacts.runs import find_run, refresh_index
from benchcert.tasks.schemas import Interval, ModelSummary, ScoreSummary, Summary


@pytest.mark.parametrize("name", ["../../etc", "..", ".", "a/b", "a\\b", "/abs", "~user", "x" * 300,
                                  "mödel", "con:1", ".hidden", "a b"])
def test_unsafe_names_become_distinct_safe_folders(name, tmp_path):
    safe = safe_component(name)
    assert "/" not in safe and "\\" not in safe and not safe.startswith(".") and ".." not in safe
    assert len(safe) <= 100
    assert inside(tmp_path, safe).parent == tmp_path.resolve()


def test_safe_names_are_kept_and_collisions_avoided():
    assert safe_component("mmlu_pro") == "mmlu_pro"
    assert safe_component("a/b") != safe_component("a_b")


def test_inside_refuses_escapes(tmp_path):
    with pytest.raises(ValueError, match="escape"):
        inside(tmp_path, "..", "x")


from run_support import _fields, _summary, stage_and_publish  # noqa: E402  (tests/run_support.py)


def test_a_written_run_is_complete_and_indexed(tmp_path):
    for i, bench in enumerate(["../evil", "mmlu_pro", "mmlu_pro"]):
        rid = f"r{i}"
        d = stage_and_publish(tmp_path, summary=_summary(bench, rid),
                              manifest_fields=_fields(bench, rid, f"2026-11-2{i}"),
                              tables={"t": pl.DataFrame({"a": [1, 2]})}, report_html="<html></html>")
        assert d.parent.parent == tmp_path.resolve()
        assert sorted(p.name for p in d.iterdir()) == ["manifest.json", "report.html", "summary.json", "tables"]
    index = json.loads((tmp_path / "index.json").read_text())
    by = {b["benchmark"]: b for b in index["benchmarks"]}
    assert by["mmlu_pro"]["runs"] == ["r1", "r2"] and by["mmlu_pro"]["latest_run_id"] == "r2"
    assert by["../evil"]["dir"] == safe_component("../evil")
    assert find_run(tmp_path, "r0").name == "r0" and find_run(tmp_path, "zzz") is None
    assert not list(tmp_path.glob("*/.tmp-*"))


def test_failed_write_leaves_nothing_and_keeps_older_runs(tmp_path):
    stage_and_publish(tmp_path, summary=_summary("b", "r1"),
                      manifest_fields=_fields("b", "r1", "2026"),
                      tables={}, report_html="")

    class Boom(pl.DataFrame):
        def write_parquet(self, *a, **k):
            raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        stage_and_publish(tmp_path, summary=_summary("b", "r2"),
                          manifest_fields=_fields("b", "r2", "2027"),
                          tables={"t": Boom({"a": [1]})}, report_html="")
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["r1"]
    assert refresh_index(tmp_path).benchmarks[0].runs == ["r1"]
