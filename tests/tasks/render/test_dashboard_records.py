"""The records a rebuild takes from the site instead of the runs' summaries (tasks/render/record_cache.py, issue
#37): a rebuild reads only new and changed runs and still leaves a cold build's files byte for byte; a changed
run's record is replaced; a corrupt, foreign or edited records file means every summary is read again."""

from __future__ import annotations

import json

import orjson
import pytest

from benchcert.tasks.errors import UsageError
from benchcert.tasks.render import run_records
from benchcert.tasks.render.dashboard import build_site
from benchcert.tasks.render.record_cache import RECORDS_FILE, RecordCache
from benchcert.tasks.render.run_records import load_runs

from test_dashboard import RUNS, _write
from test_dashboard import arts  # noqa: F401  (the fixture: two benchmarks, one named like markup)
from test_dashboard_incremental import NOW, _same_as_cold


def _count_reads(monkeypatch) -> list:
    """The runs whose summary is parsed from here on (benchmark, run id)."""
    read, parse = [], run_records._parse_run

    def counting(root, run_dir, benchmark, run_id):
        read.append((benchmark, run_id))
        return parse(root, run_dir, benchmark, run_id)

    monkeypatch.setattr(run_records, "_parse_run", counting)
    return read


def test_a_rebuild_reads_only_the_new_runs_and_equals_a_cold_build(arts, tmp_path, monkeypatch):
    site = tmp_path / "site"
    first = build_site(arts, site, now=NOW)
    assert (site / RECORDS_FILE).is_file()
    # the kept records are the records read from the runs, field for field
    cache = RecordCache(site)
    kept, problems = load_runs(arts, cache=cache)
    assert cache.hits == first.runs == len(kept) and problems == []
    assert kept == load_runs(arts)[0]
    _write(arts, "fresh", runs=RUNS[:2])  # a nightly: a new benchmark with two runs
    read = _count_reads(monkeypatch)
    again = build_site(arts, site, now=NOW)
    assert again.runs == first.runs + 2
    assert sorted(b for b, _ in read) == ["fresh", "fresh"]  # only the new runs' summaries were parsed
    _same_as_cold(arts, site, tmp_path)  # the records file too: a cold build writes the same bytes


def test_a_changed_run_s_record_is_replaced(arts, tmp_path, monkeypatch):
    site = tmp_path / "site"
    build_site(arts, site, now=NOW)
    run = sorted((arts / "mmlu_pro").iterdir())[-1]
    doc = json.loads((run / "summary.json").read_text())
    doc["models"][0]["pooled"]["estimate"] = 0.123456
    doc["warnings"] = ["rewritten after the build"]
    (run / "summary.json").write_text(json.dumps(doc))
    read = _count_reads(monkeypatch)
    build_site(arts, site, now=NOW)
    assert read == [("mmlu_pro", run.name)]
    model = doc["models"][0]["model"]
    cache = RecordCache(site)
    runs, _ = load_runs(arts, cache=cache)
    changed = next(r for r in runs if r.run_id == run.name)
    assert changed.warnings == ("rewritten after the build",)
    assert next(m for m in changed.models if m.model == model).estimates["pooled"] == 0.123456
    assert "rewritten after the build" in (site / "mmlu_pro" / run.name / "index.html").read_text()
    _same_as_cold(arts, site, tmp_path)


def test_a_corrupt_foreign_or_edited_records_file_means_every_summary_is_read(arts, tmp_path, monkeypatch):
    site = tmp_path / "site"
    n = build_site(arts, site, now=NOW).runs
    good = (site / RECORDS_FILE).read_bytes()
    head, body = good.split(b"\n", 1)
    header = orjson.loads(head)
    entries = orjson.loads(body)
    first = next(iter(entries))
    # an entry changed in shape, with the body's digest made to match: that run alone is read again
    bad_entry = {**entries, first: [entries[first][0], entries[first][1][:-1]]}
    bad_body = orjson.dumps(bad_entry)
    from benchcert.tasks.render.record_cache import _body_digest

    reforged = orjson.dumps({**header, "body": _body_digest(bad_body)}) + b"\n" + bad_body
    cases = {
        "not json": (b"{not json", n),
        "no body": (head, n),
        "another version": (orjson.dumps({**header, "code": "another"}) + b"\n" + body, n),
        "another format": (orjson.dumps({**header, "format": 0}) + b"\n" + body, n),
        "truncated": (good[:-40], n),
        "edited by hand": (good.replace(b"0.4", b"0.9"), n),
        "a list": (orjson.dumps({**header, "body": _body_digest(b"[]")}) + b"\n[]", n),
        "one entry malformed": (reforged, 1),
    }
    for what, (text, reads) in cases.items():
        (site / RECORDS_FILE).write_bytes(text)
        read = _count_reads(monkeypatch)
        build_site(arts, site, now=NOW)
        assert len(read) == reads, what
        _same_as_cold(arts, site, tmp_path)  # and the file is whole again
        monkeypatch.undo()
    # --full reads every summary whatever the file says
    read = _count_reads(monkeypatch)
    build_site(arts, site, now=NOW, full=True)
    assert len(read) == n


def test_the_collector_paused_for_a_build_is_restored_after_it(arts, tmp_path, monkeypatch):
    import gc

    seen = []
    monkeypatch.setattr(run_records, "_parse_run", lambda *a, _p=run_records._parse_run: (seen.append(gc.isenabled()),
                                                                                          _p(*a))[1])
    assert gc.isenabled()
    build_site(arts, tmp_path / "site", now=NOW)
    assert gc.isenabled() and seen and not any(seen)  # paused while the runs were read, on again after
    gc.disable()
    try:
        build_site(arts, tmp_path / "site", now=NOW, full=True)
        assert not gc.isenabled()  # a caller's paused collector stays paused
    finally:
        gc.enable()
    with pytest.raises(UsageError):  # and restored when the build fails
        build_site(arts, tmp_path / "site", now=NOW, max_trend_runs=0)
    assert gc.isenabled()
