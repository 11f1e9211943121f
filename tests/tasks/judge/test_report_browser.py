"""The report's judge section in a real browser (headless Chromium, as the dashboard's browser test):
it renders the human-scale table, the assumption, the agreement table and the confusion tables, with
no console error, no request leaving the page, and a hostile model name shown as text."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from benchcert.tasks.ingest.mapping import parse_mapping
from benchcert.tasks.ingest.service import ingest_file

from conftest import ROOT
from judge_support import MAP, write_preferences

EVIL = '<img src=x onerror=console.error("xss")>'


def _browser_harness():
    path = ROOT / "tests" / "tasks" / "render" / "test_dashboard_browser.py"
    spec = importlib.util.spec_from_file_location("dashboard_browser_harness", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> tuple[Path, dict]:
    h = _browser_harness()
    tmp = tmp_path_factory.mktemp("judge-report")
    write_preferences(tmp / "p.csv", n_items=300, n_labelled=100,
                      models={"base": 0.45, "cand": 0.62, EVIL: 0.5, "few": 0.5})
    text = (tmp / "p.csv").read_text().splitlines()
    # "few" keeps only 10 of its labels: the section says how many more it needs
    kept, out = 0, []
    for line in text:
        if line.startswith("few,") and not line.endswith(","):
            kept += 1
            if kept > 10:
                line = line.rsplit(",", 1)[0] + ","
        out.append(line if not line.startswith("<img") else '"' + EVIL.replace('"', '""') + '"' + line[len(EVIL):])
    (tmp / "p.csv").write_text("\n".join(out) + "\n")
    db = tmp / "s.duckdb"
    assert ingest_file(db, tmp / "p.csv", benchmark="prefs", mapping=parse_mapping(MAP)).status == "ingested"
    run_dir = h._audit(db, "prefs", tmp / "arts")
    return run_dir, h


@pytest.fixture(scope="module")
def tab(report, tmp_path_factory):
    run_dir, h = report
    with h.devtools(h._chromium(), tmp_path_factory.mktemp("chromium-profile")) as cdp:
        yield h.Tab(cdp, f"file://{Path(run_dir).resolve()}/")


def test_judge_section_renders(tab, report, tmp_path):
    problems, foreign = tab.open("report.html")
    assert problems == [] and foreign == []
    sec = tab.js("""(() => { const s = document.querySelector('section#judge'); if (!s) return null;
      s.scrollIntoView(); const tables = Array.from(s.querySelectorAll('table'));
      return {title: s.querySelector('h2').textContent, text: s.innerText, n_tables: tables.length,
              captions: tables.map(t => t.caption ? t.caption.textContent : ''),
              first_rows: tables.length ? tables[0].querySelectorAll('tbody tr').length : 0,
              width: s.getBoundingClientRect().width, imgs: s.querySelectorAll('img').length,
              top: s.getBoundingClientRect().top + window.scrollY, height: s.getBoundingClientRect().height}; })()""")
    shots = Path(__import__("os").environ.get("BENCHCERT_TEST_ARTIFACTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    shot = tab.cdp.call("Page.captureScreenshot", tab.session, format="png", captureBeyondViewport=True,
                        clip={"x": 0, "y": sec["top"], "width": 1280, "height": min(sec["height"], 4000), "scale": 1})
    (shots / "report-judge.png").write_bytes(__import__("base64").b64decode(shot["data"]))
    assert sec is not None and sec["title"] == "Judge scores on the human scale"
    assert sec["first_rows"] == 3  # base, cand and the hostile name; "few" has too few labels
    assert "'few' has 10 human label(s)" in sec["text"] and "so 20 more" in sec["text"]
    assert "uniform random sample of the judged items" in sec["text"]
    assert EVIL in sec["text"] and sec["imgs"] == 0  # the model name is text, not markup
    assert "Judge-human agreement per model and pooled" in sec["captions"]
    # one confusion table per model and the pooled one (binary scores)
    assert sum("by human score (rows)" in c for c in sec["captions"]) == 5
    assert sec["width"] > 300
