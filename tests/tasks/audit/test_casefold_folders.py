"""Issue 26, finding 13: benchmark folders are distinct under case folding, and trees written by
earlier versions (``MMLU/``, kept whatever its case) keep working.

The fold key is ``unicodedata.normalize("NFC", folder).casefold()``: two folders with the same key
are one folder on a case-insensitive (or normalising) filesystem.
"""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchcert.flows.cli import main
from benchcert.tasks.artifacts import runs as artifacts
from benchcert.tasks.artifacts.folders import RESERVED, benchmark_folder, folder_name, inside, safe_component
from benchcert.tasks.artifacts.runs import new_run_id, read_index, refresh_index
from benchcert.tasks.render.dashboard import build_site
from benchcert.tasks.render.run_records import load_runs

from conftest import SMALL_CSV, SMALL_MAP
from run_support import _fields, _summary, stage_and_publish


def key(folder: str) -> str:
    return unicodedata.normalize("NFC", folder).casefold()


def publish(root: Path, bench: str, run_id: str, day: int = 1) -> Path:
    return stage_and_publish(root, summary=_summary(bench, run_id), manifest_fields=_fields(
        bench, run_id, f"2026-11-{day:02d}T00:00:00Z"), tables={"t": pl.DataFrame({"a": [1]})},
        report_html="<html></html>")


@pytest.mark.usefixtures("prefect_harness")
def test_case_variants_get_distinct_folders_through_the_cli(tmp_path, capsys):
    db, arts, site = tmp_path / "s.duckdb", tmp_path / "arts", tmp_path / "site"
    for bench in ("Case", "case"):
        assert main(["ingest", str(SMALL_CSV), "--db", str(db), "--benchmark", bench,
                     *[a for m in SMALL_MAP for a in ("--map", m)], "--in-process"]) == 0
        assert main(["audit", "--db", str(db), "--benchmark", bench, "--artifacts", str(arts)]) == 0
    folders = sorted(p.name for p in arts.iterdir() if p.is_dir() and not p.name.startswith("."))
    assert len(folders) == 2 and len({key(f) for f in folders}) == 2
    index = json.loads((arts / "index.json").read_text())
    by = {e["benchmark"]: e for e in index["benchmarks"]}
    assert set(by) == {"Case", "case"} and by["case"]["dir"] == "case" and by["Case"]["dir"] != "Case"
    assert all(len(e["runs"]) == 1 for e in by.values())
    capsys.readouterr()
    assert main(["dashboard", "build", "--artifacts", str(arts), "--out", str(site), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["runs"] == 2
    # benchmark folders (the site's own views folder, _views, starts with "_": no benchmark folder does)
    site_folders = [p.name for p in site.iterdir() if p.is_dir() and not p.name.startswith("_")]
    assert len(site_folders) == 2 and len({key(f) for f in site_folders}) == 2
    for e in by.values():
        assert (site / e["dir"] / e["latest_run_id"] / "index.html").is_file()
    front = (site / "index.html").read_text()
    assert all(f'href="{e["dir"]}/index.html"' in front for e in by.values())


def test_a_tree_written_by_the_earlier_rule_keeps_its_folders(tmp_path, monkeypatch):
    """Written as before (every plain name kept, ``MMLU/``), then read, extended and shown now."""
    with monkeypatch.context() as m:
        m.setattr(artifacts, "benchmark_folder", lambda root, name: safe_component(name))
        old = [publish(tmp_path, "MMLU", new_run_id(), 1), publish(tmp_path, "gsm8k", new_run_id(), 1)]
    assert [d.parent.name for d in old] == ["MMLU", "gsm8k"]
    (tmp_path / "index.json").unlink()
    index = refresh_index(tmp_path)
    assert {(e.benchmark, e.dir) for e in index.benchmarks} == {("MMLU", "MMLU"), ("gsm8k", "gsm8k")}
    # a new audit of MMLU goes to the same folder; a new 'mmlu' cannot fold onto it
    assert benchmark_folder(tmp_path, "MMLU") == "MMLU"
    again = publish(tmp_path, "MMLU", new_run_id(), 2)
    new = publish(tmp_path, "mmlu", new_run_id(), 3)
    assert again.parent.name == "MMLU" and new.parent.name != "mmlu" and key(new.parent.name) != "mmlu"
    assert benchmark_folder(tmp_path, "mmlu") == new.parent.name  # and it stays there
    for d in (*old, again, new):
        assert d.name == json.loads((d / "manifest.json").read_text())["run_id"]  # run folders are the ids
        assert artifacts.find_run(tmp_path, d.name) == d
    listed = {e["benchmark"]: e for e in read_index(tmp_path)["benchmarks"]}
    assert listed["MMLU"]["runs"] == [old[0].name, again.name] and listed["mmlu"]["runs"] == [new.name]
    runs, problems = load_runs(tmp_path)
    assert problems == [] and sorted(r.benchmark for r in runs) == ["MMLU", "MMLU", "gsm8k", "mmlu"]
    build_site(tmp_path, tmp_path.parent / "site")
    site = tmp_path.parent / "site"
    assert (site / "MMLU" / again.name / "index.html").is_file()
    assert (site / new.parent.name / new.name / "index.html").is_file()
    assert (site / "gsm8k" / old[1].name / "index.html").is_file()


def test_an_old_tree_holding_both_spellings_is_shown_in_two_site_folders(tmp_path, monkeypatch):
    """A case-sensitive disk written by the earlier rule may hold ``Case/`` and ``case/``; the site
    built from it (perhaps copied to a case-insensitive disk) must not merge them."""
    arts = tmp_path / "arts"
    with monkeypatch.context() as m:
        m.setattr(artifacts, "benchmark_folder", lambda root, name: safe_component(name))
        for b in ("Case", "case"):
            publish(arts, b, new_run_id())
    build_site(arts, tmp_path / "site")
    folders = [p.name for p in (tmp_path / "site").iterdir() if p.is_dir() and not p.name.startswith("_")]
    assert len(folders) == 2 and len({key(f) for f in folders}) == 2


names = st.one_of(
    st.text(min_size=1, max_size=12),
    st.text(alphabet="abcABC._-/ \u00e9\u0301e\u0130\u0131\u00df", min_size=1, max_size=8),
    st.sampled_from(["Case", "case", "CASE", "MMLU", "mmlu", "caf\u00e9", "cafe\u0301", "index.json", "INDEX.JSON",
                     "..", "../x", "stra\u00dfe", "STRASSE", "strasse", "a_b-c14cddc033", "A_B-C14CDDC033"]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(names, min_size=1, max_size=12, unique=True))
def test_folder_name_is_injective_under_case_folding_and_never_escapes(batch):
    folders = [folder_name(n) for n in batch]
    assert len({key(f) for f in folders}) == len(batch)
    root = Path("/nonexistent-root")
    for f in folders:
        assert "/" not in f and "\\" not in f and "\x00" not in f and not f.startswith(".")
        assert f.lower() not in RESERVED and inside(root, f).parent == root.resolve()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(legacy=st.lists(names, max_size=6, unique=True), later=st.lists(names, min_size=1, max_size=8))
def test_folders_stay_distinct_and_put_over_an_earlier_tree(tmp_path_factory, legacy, later):
    """An earlier tree (every plain name kept; only one spelling per fold, as a case-insensitive
    disk would have let it exist), then new benchmarks: every benchmark keeps one folder, no two
    fold together, and nothing leaves the root."""
    root = tmp_path_factory.mktemp("arts")
    owner: dict[str, str] = {}
    for n in legacy:
        f = safe_component(n)
        if key(f) not in {key(x) for x in owner.values()}:
            (root / f).mkdir()
            owner[n] = f
    for n in later:
        f = benchmark_folder(root, n)
        assert owner.get(n, f) == f  # an existing benchmark's folder never moves
        assert inside(root, f).parent == root.resolve()
        (root / f).mkdir(exist_ok=True)
        owner[n] = f
    assert len({key(f) for f in owner.values()}) == len(owner)
    assert all(benchmark_folder(root, n) == f for n, f in owner.items())
