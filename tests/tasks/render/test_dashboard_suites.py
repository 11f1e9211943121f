"""Suite verdicts among the artifacts (tasks/artifacts/suites.py) and on the dashboard's checkpoint grid (issue #37):
written where no name can lead out, read back with bad files named and skipped, every string escaped."""

from __future__ import annotations

import json
import os

from benchcert.tasks.artifacts.runs import refresh_index
from benchcert.tasks.artifacts.suites import SUITES_DIR, read_suite_verdicts, write_suite_verdict
from benchcert.tasks.render.dashboard import build_site

EVIL = '<img src=x onerror="alert(1)">/../..'


def _doc(candidate: str, *, suite: str = "core", verdict: str = "regressed", gap: float = -0.05) -> dict:
    return {"suite": {"name": suite, "benchmarks": ["a", "b"]}, "baseline": "org/base", "candidate": candidate,
            "alpha": 0.05, "question": "items", "look": 2, "regressed_somewhere": verdict == "regressed",
            "improved": [], "regressed": ["a"] if verdict == "regressed" else [],
            "score": {"gap": gap, "lower": gap - 0.02, "upper": gap + 0.02, "verdict": verdict, "method": "strata",
                      "mde": 0.03, "more_items": None}}


def test_written_inside_its_folder_whatever_the_names_and_read_back(tmp_path):
    root = tmp_path / "artifacts"
    p = write_suite_verdict(root, _doc(EVIL, suite=EVIL))
    assert p.parent.parent == (root / SUITES_DIR).resolve() and p.suffix == ".json"
    write_suite_verdict(root, _doc(EVIL, suite=EVIL, verdict="inconclusive", gap=0.0))  # a later look replaces it
    docs, problems = read_suite_verdicts(root)
    assert problems == [] and [d["score"]["verdict"] for d in docs] == ["inconclusive"]


def test_bad_files_are_named_and_skipped_and_a_link_out_is_not_read(tmp_path):
    root = tmp_path / "artifacts"
    write_suite_verdict(root, _doc("org/ckpt@step-1"))
    folder = next((root / SUITES_DIR).iterdir())
    (folder / "broken.json").write_text("{not json")
    (folder / "other.json").write_text(json.dumps({"kind": "something else"}))
    outside = tmp_path / "secret.json"
    outside.write_text(json.dumps(_doc("org/stolen")))
    os.symlink(outside, folder / "link.json")
    docs, problems = read_suite_verdicts(root)
    assert [d["candidate"] for d in docs] == ["org/ckpt@step-1"]
    assert len(problems) == 3 and all(str(folder) in p for p in problems)


def test_the_grid_page_lists_suite_verdicts_with_their_numbers_escaped(tmp_path):
    root = tmp_path / "artifacts"
    refresh_index(root)  # an artifacts root without runs yet
    write_suite_verdict(root, _doc(EVIL))
    report = build_site(root, tmp_path / "site")
    html = (tmp_path / "site" / "_views" / "checkpoints.html").read_text()
    assert report.problems == () and 'class="verdicts suite-verdicts"' in html
    assert "<img" not in html and "&lt;img src=x" in html
    assert 'data-gap="\u22125.00 pp" data-interval="[\u22127.00, \u22123.00] pp"' in html
    # the index never lists the suites' folder as a benchmark
    assert json.loads((root / "index.json").read_text())["benchmarks"] == []


def test_each_suite_verdict_shows_its_own_guarantees_not_one_text_for_all(tmp_path):
    # Two suites at different alphas, one recorded over looks: each row's guarantee text is the one its
    # document carries (tasks/compare/suite.py), so the recorded one says its score is not anytime-valid.
    from benchcert.tasks.compare.suite import _guarantees

    root = tmp_path / "artifacts"
    refresh_index(root)
    one = {**_doc("org/ckpt@step-1", suite="core"), "alpha": 0.05, "guarantees": _guarantees(0.05, 2, True)}
    two = {**_doc("org/ckpt@step-1", suite="safety"), "alpha": 0.1, "guarantees": _guarantees(0.1, 2, False)}
    write_suite_verdict(root, one)
    write_suite_verdict(root, two)
    build_site(root, tmp_path / "site")
    html = (tmp_path / "site" / "_views" / "checkpoints.html").read_text()
    notes = html[html.index('class="note suite-guarantees"'):]
    core, safety = notes[notes.index("<li>core"):], notes[notes.index("<li>safety"):]
    assert "probability &lt;= 0.025 (alpha/2)" in core and "not anytime-valid" in core.split("</li>")[0]
    assert "probability &lt;= 0.05 (alpha/2)" in safety and "not anytime-valid" not in safety.split("</li>")[0]
