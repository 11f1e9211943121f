"""Issue 14: the nightly flow audits every benchmark it can and reports the others."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest


@pytest.mark.parametrize("problem", ["truncated gzip", "broken mapping"])
@pytest.mark.usefixtures("prefect_harness")
def test_nightly_audits_the_benchmarks_it_can_and_reports_the_others(tmp_path, problem):
    from benchcert.flows.nightly import NightlyProblems, nightly_flow
    from benchcert.tasks.store.connection import list_runs, open_store

    inbox = tmp_path / "inbox"
    (inbox / "a_bench").mkdir(parents=True)
    (inbox / "b_bench").mkdir()
    data = gzip.compress(("model,item_id,score\n" + "".join(f"m,q{i},1\n" for i in range(3000))).encode())
    if problem == "truncated gzip":
        (inbox / "a_bench" / "truncated.csv.gz").write_bytes(data[: len(data) // 2])
        named = "truncated.csv.gz"
    else:
        (inbox / "a_bench" / "ok.csv").write_text("model,item_id,score\nm,q1,1\n")
        (inbox / "a_bench" / "mapping.toml").write_text("[map\nscore = ")
        named = "mapping.toml"
    rows = "".join(f"m{m},q{i},{(i * (m + 1)) % 2}\n" for m in range(2) for i in range(12))
    (inbox / "b_bench" / "good.csv").write_text("model,item_id,score\n" + rows)
    db, art = tmp_path / "s.duckdb", tmp_path / "artifacts"
    with pytest.raises(NightlyProblems) as err:
        nightly_flow(str(inbox), str(db), str(art))
    assert "a_bench" in str(err.value) and named in str(err.value) and "b_bench" not in str(err.value)
    with open_store(db, write=False) as con:
        runs = list_runs(con)
    assert runs["benchmark"].to_list() == ["b_bench"] and runs["status"].to_list() == ["completed"]
    assert (Path(runs["run_dir"][0]) / "summary.json").is_file()


@pytest.mark.usefixtures("prefect_harness")
def test_a_limit_variable_with_no_usable_value_stops_the_nightly_before_any_file(tmp_path, monkeypatch):
    """As on the command line: the run fails naming the variable and its value, the store is not
    touched (before, every file of every benchmark was refused for it, one by one)."""
    from benchcert.flows.nightly import nightly_flow
    from benchcert.tasks.ingest.adapters.limits import LimitSettingError

    inbox = tmp_path / "inbox"
    (inbox / "b_bench").mkdir(parents=True)
    (inbox / "b_bench" / "good.csv").write_text("model,item_id,score\nm,q1,1\nm,q2,0\n")
    monkeypatch.setenv("BENCHCERT_MAX_LINE_BYTES", "inf")
    with pytest.raises(LimitSettingError, match="BENCHCERT_MAX_LINE_BYTES.*inf"):
        nightly_flow(str(inbox), str(tmp_path / "s.duckdb"), str(tmp_path / "artifacts"))
    assert not (tmp_path / "s.duckdb").exists()
