"""Every page kind of the dashboard in headless Chromium (Debian's ``chromium``), on the fixture store of
tests/dashboard_fixture.py: 3 benchmarks, a training run of 5 checkpoints with recorded verdicts, a regression
and a stale benchmark (issue #37).

Each page is opened from ``benchcert dashboard serve``-style serving (tasks/render/dashboard.make_server) at
1,400 px and at a phone's 390 px: no console error, no request leaving the server, no script, nothing wider
than the screen, the expected elements, and the numbers read back from each run's summary.json. A page fails
if it shows a verdict without its gap and interval (every element with ``data-verdict`` must carry
``data-gap`` and ``data-interval`` and sit in a row or cell that shows both). Screenshots go to
$BENCHCERT_TEST_ARTIFACTS (default tests/artifacts/), ``dashboard-<page>-<width>.png``.

The DevTools client is test_dashboard_browser.py's (loaded from its file, as tests/tasks/judge does).
"""

from __future__ import annotations

import importlib.util
import json
import os
import threading
from pathlib import Path

import pytest

from benchcert.tasks.artifacts.folders import hashed_folder
from benchcert.tasks.compare.recorded import deciding_gap
from benchcert.tasks.render.dashboard import build_site, make_server

import dashboard_fixture as fx
from conftest import ROOT


def _harness():
    path = Path(__file__).with_name("test_dashboard_browser.py")
    spec = importlib.util.spec_from_file_location("dashboard_browser_harness_pages", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


H = _harness()
PAGES = {"overview": "index.html", "grid": "_views/checkpoints.html", "models": "_views/models.html",
         "model": f"_views/model-{hashed_folder(f'{fx.FAMILY}@step-5000')}.html",
         "series": f"_views/series-{hashed_folder(fx.FAMILY)}.html", "benchmark": "beta/index.html"}


@pytest.fixture(scope="module")
def fixture(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pages")
    db, arts = fx.build(tmp)
    site = tmp / "site"
    build_site(arts, site, now=fx.NOW)
    summaries = {}
    for bench in fx.BENCHES:
        index = json.loads((arts / "index.json").read_text())
        entry = next(e for e in index["benchmarks"] if e["benchmark"] == bench)
        summaries[bench] = [json.loads((arts / entry["dir"] / r / "summary.json").read_text()) for r in entry["runs"]]
    return site, summaries


@pytest.fixture(scope="module")
def base(fixture):
    srv = make_server(fixture[0], port=0, quiet=True)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/"
    srv.shutdown()


@pytest.fixture(scope="module")
def tab(base, tmp_path_factory):
    with H.devtools(H._chromium(), tmp_path_factory.mktemp("chromium-profile")) as cdp:
        yield H.Tab(cdp, base)


@pytest.fixture(scope="module")
def shots() -> Path:
    d = Path(os.environ.get("BENCHCERT_TEST_ARTIFACTS") or ROOT / "tests" / "artifacts")
    d.mkdir(parents=True, exist_ok=True)
    return d


def _width(tab, width: int) -> None:
    tab.cdp.call("Emulation.setDeviceMetricsOverride", tab.session, width=width, height=900, deviceScaleFactor=1,
                 mobile=width < 600)


def _open(tab, shots: Path, name: str, width: int = 1400, path: str | None = None) -> None:
    _width(tab, width)
    problems, foreign = tab.open(path or PAGES[name])
    assert problems == [] and foreign == [], (name, problems, foreign)
    assert tab.js("document.querySelectorAll('script').length") == 0
    # readable at this width: the page itself never scrolls sideways (wide tables scroll in their wrapper)
    assert tab.js("document.documentElement.scrollWidth") <= width, name
    height = tab.cdp.call("Page.getLayoutMetrics", tab.session)["cssContentSize"]["height"]
    import base64

    shot = tab.cdp.call("Page.captureScreenshot", tab.session, format="png", captureBeyondViewport=True,
                        clip={"x": 0, "y": 0, "width": width, "height": min(height, 5000), "scale": 1})
    (shots / f"dashboard-{name}-{width}.png").write_bytes(base64.b64decode(shot["data"]))


VERDICTS_JS = """Array.from(document.querySelectorAll('[data-verdict]')).map(e => {
  const row = e.closest('tr'); const text = (row || e).innerText;
  return {verdict: e.dataset.verdict, gap: e.dataset.gap || '', interval: e.dataset.interval || '', text: text,
          title: e.getAttribute('title') || ''}; })"""


def _bounds(text: str) -> tuple[float, float]:
    lo, hi = text.removesuffix(" pp").strip("[]").replace("\u2212", "-").split(", ")
    return float(lo), float(hi)


def _check_verdicts(tab) -> list[dict]:
    """Every verdict on the page shows its gap and interval (in its row, or in its cell's hidden text and title),
    and the interval shown with it never contradicts it: decided exactly when it excludes 0, in its direction."""
    found = tab.js(VERDICTS_JS)
    for v in found:
        assert v["gap"] and v["gap"] != "\u2014" and v["interval"] and v["interval"] != "\u2014", v
        assert v["gap"] in v["text"] and (v["interval"] in v["text"] or v["interval"] in v["title"]), v
        lo, hi = _bounds(v["interval"])
        assert v["verdict"] == ("improved" if lo > 0 else "regressed" if hi < 0 else "inconclusive"), v
    return found


def _expected_verdicts(summaries) -> dict[tuple[str, str], dict]:
    """(benchmark, candidate) -> the latest verdict detail, from summary.json."""
    out = {}
    for bench, runs in summaries.items():
        for s in runs:
            for v in s["verdicts"]:
                out[(bench, v["model"])] = v
    return out


def _gap(x: float) -> str:
    return f"{100 * x:+.2f} pp".replace("-", "\u2212", 1)


@pytest.mark.parametrize("width", [1400, 390])
def test_every_page_kind_opens_clean_and_shows_verdicts_with_their_numbers(tab, shots, width):
    for name in PAGES:
        _open(tab, shots, name, width)
        _check_verdicts(tab)


def test_overview(tab, fixture, shots):
    _, summaries = fixture
    _open(tab, shots, "overview")
    rows = tab.js("""Array.from(document.querySelectorAll('table.benchmarks tbody tr')).map(tr => ({
      bench: tr.querySelector('td.benchmark').innerText, leader: tr.querySelector('td.leader').innerText,
      pooled: tr.querySelector('td.pooled').innerText, iv: tr.querySelector('td.pooled-iv').innerText,
      regressions: tr.querySelector('td.regressions').innerText}))""")
    assert [r["bench"] for r in rows] == list(fx.BENCHES)
    for r in rows:
        latest = summaries[r["bench"]][-1]
        best = sorted(latest["models"], key=lambda m: (-m["pooled"]["estimate"], m["model"]))[0]
        head = best["pooled"]["headline"]
        assert (r["leader"], r["pooled"]) == (best["model"], f"{100 * best['pooled']['estimate']:.2f}%")
        assert r["iv"] == f"[{100 * head['lower']:.2f}, {100 * head['upper']:.2f}]"
    assert [r["regressions"] for r in rows if r["bench"] == "beta"] == [fx.REGRESSED[1]]
    # open verdicts: every inconclusive latest verdict, with its gap as summary.json has it
    expected = _expected_verdicts(summaries)
    open_rows = tab.js("""Array.from(document.querySelectorAll('table.open-verdicts tbody tr')).map(tr => [
      tr.querySelector('td.benchmark').innerText, tr.querySelector('td.model').innerText,
      tr.querySelector('td.gap').innerText, tr.querySelector('td.question').innerText])""")
    want = sorted([b, m, _gap(v["detail"]["gap"]), "items"] for (b, m), v in expected.items()
                  if v["verdict"] == "inconclusive")
    assert sorted(open_rows) == want and len(want) >= 10
    stale = tab.js("Array.from(document.querySelectorAll('table.stale tbody td:first-child')).map(td => td.innerText)")
    assert stale == ["gamma"]


def test_checkpoint_grid(tab, fixture, shots):
    _, summaries = fixture
    _open(tab, shots, "grid")
    cells = tab.js("""Array.from(document.querySelectorAll('table.grid tbody tr:not(.suite)')).map(tr =>
      [tr.querySelector('th').innerText, Array.from(tr.querySelectorAll('td')).map(td => td.dataset.verdict || '')])""")
    expected = _expected_verdicts(summaries)
    steps = [f"{fx.FAMILY}@step-{s}" for s in fx.STEPS]
    assert cells == [[b, [expected[(b, c)]["verdict"] for c in steps]] for b in fx.BENCHES]
    assert [b for b, row in cells if "regressed" in row] == [fx.REGRESSED[0]]
    # the accessible text table holds the same verdicts with every number
    assert tab.js("document.querySelectorAll('table.grid-numbers tbody tr').length") == len(expected)


def test_suite_verdict_on_top_of_the_grid(tab, fixture, shots):
    """The suite row of the grid and the suite verdicts table show each suite artifact's score, interval and
    verdict (tasks/artifacts/suites.py), and its regressed-somewhere answer."""
    site = fixture[0]
    docs = {d["candidate"]: d for d in
            (json.loads(p.read_text()) for p in (site.parent / "artifacts" / "_suites").rglob("*.json"))}
    assert sorted(docs) == [f"{fx.FAMILY}@step-{s}" for s in fx.SUITE_STEPS]
    _open(tab, shots, "grid")
    _check_verdicts(tab)
    row = tab.js("""(() => { const tr = document.querySelector('table.grid tbody tr.suite');
      return [tr.querySelector('th').innerText, Array.from(tr.querySelectorAll('td')).map(td =>
        [td.dataset.verdict || '', td.dataset.gap || '', td.dataset.interval || ''])]; })()""")
    assert row[0] == f"suite {fx.SUITE} (vs {fx.BASE})"
    steps = [f"{fx.FAMILY}@step-{s}" for s in fx.STEPS]
    want = []
    for c in steps:
        sc = docs[c]["score"] if c in docs else None
        want.append(["", "", ""] if sc is None else
                    [sc["verdict"], _gap(sc["gap"]),
                     f"[{100 * sc['lower']:+.2f}, {100 * sc['upper']:+.2f}] pp".replace("-", "\u2212")])
    assert row[1] == want
    assert docs[fx.REGRESSED[1]]["score"]["verdict"] == "regressed"  # the fixture's regression reaches the suite
    table = tab.js("""Array.from(document.querySelectorAll('table.suite-verdicts tbody tr')).map(tr => [
      tr.querySelector('td.model').innerText, tr.querySelector('td.somewhere').innerText,
      tr.querySelector('td.question').innerText, tr.querySelector('td.gap').innerText,
      tr.querySelector('td.iv').innerText, tr.querySelector('td.verdict [data-verdict]').dataset.verdict])""")
    assert table == [[c, "YES" if docs[c]["regressed_somewhere"] else "no", "items", w[1], w[2], w[0]]
                     for c, w in zip(steps, want) if c in docs]


def test_training_run_page(tab, fixture, shots):
    _, summaries = fixture
    _open(tab, shots, "series")
    charts = tab.js("""Array.from(document.querySelectorAll('svg.series')).map(svg => ({
      label: svg.getAttribute('aria-label'), desc: svg.querySelector('desc').textContent,
      bands: svg.querySelectorAll('.band').length,
      points: Array.from(svg.querySelectorAll('g.pt')).map(g => [Number(g.dataset.estimate), g.dataset.mark || '',
                                                                 g.dataset.flag || ''])}))""")
    assert len(charts) == 3 and all(c["bands"] == 1 and c["desc"] for c in charts)
    expected = _expected_verdicts(summaries)
    for bench, chart in zip(fx.BENCHES, charts):
        latest = {m["model"]: m for m in summaries[bench][-1]["models"]}
        steps = [f"{fx.FAMILY}@step-{s}" for s in fx.STEPS]
        assert [p[0] for p in chart["points"]] == [latest[c]["pooled"]["estimate"] for c in steps]
        assert [p[1] for p in chart["points"]] == [expected[(bench, c)]["verdict"] for c in steps]
        assert [bool(p[2]) for p in chart["points"]] == [(bench, c) == fx.REGRESSED for c in steps]


def test_model_page(tab, fixture, shots):
    _, summaries = fixture
    _open(tab, shots, "model")
    rows = tab.js("""Array.from(document.querySelectorAll('table.model-benchmarks tbody tr')).map(tr => [
      tr.querySelector('td.benchmark').innerText, tr.querySelector('td.pooled-iv').innerText,
      tr.querySelector('td.rank').innerText])""")
    model = f"{fx.FAMILY}@step-5000"
    want = []
    for bench in fx.BENCHES:
        m = next(x for x in summaries[bench][-1]["models"] if x["model"] == model)
        head = m["pooled"]["headline"]
        groups = ", group " + ", ".join(map(str, m["tied_groups"])) if m["tied_groups"] else ""
        want.append((m["pooled"]["estimate"], bench, f"[{100 * head['lower']:.2f}, {100 * head['upper']:.2f}]",
                     f"{m['rank']} [{m['rank_lower']}, {m['rank_upper']}]{groups}"))
    assert rows == [[b, iv, rank] for _, b, iv, rank in sorted(want, key=lambda w: (-w[0], w[1]))]


def test_benchmark_page_leads_with_the_headline(tab, fixture, shots):
    _, summaries = fixture
    _open(tab, shots, "benchmark")
    first_h2 = tab.js("document.querySelector('h2').id")
    assert first_h2 == "headline"
    models = tab.js("Array.from(document.querySelectorAll('table.models tbody td.model')).map(td => td.innerText)")
    latest = summaries["beta"][-1]
    assert models == [m["model"] for m in sorted(latest["models"], key=lambda m: (-m["pooled"]["estimate"], m["model"]))]
    assert fx.EVIL_MODEL in models  # shown as text
    assert tab.js("document.querySelector('p.bad').innerText").endswith(fx.REGRESSED[1])
    # the item-health summary of the latest run's item analysis (audit --items)
    ia = latest["item_analysis"]
    health = dict(tab.js("Array.from(document.querySelectorAll('table.item-health tbody tr')).map(tr => "
                         "Array.from(tr.querySelectorAll('td')).map(td => td.innerText))"))
    assert health["items"] == f"{ia['n_items']:,}"
    assert health["inert items (every model alike)"] == f"{ia['n_inert']:,} of {ia['n_items']:,}"
    assert health[f"suspected broken keys (FDR {ia['fdr']:g})"] == f"{ia['n_broken_key']:,} of {ia['n_tested_broken_key']:,}"


def test_run_page_verdict_rows(tab, fixture, shots):
    site, summaries = fixture
    latest = summaries["beta"][-1]
    _open(tab, shots, "run", path=f"beta/{latest['run_id']}/index.html")
    rows = tab.js("""Array.from(document.querySelectorAll('table.verdicts tbody tr')).map(tr => [
      tr.querySelector('td.model').innerText, tr.querySelector('td.question').innerText,
      tr.querySelector('td.gap').innerText, tr.querySelector('td.iv').innerText,
      tr.querySelector('td.verdict').innerText])""")
    def deciding(d):  # the interval of the test that decided (tasks/render/verdict_rows.deciding_interval)
        lo, hi = (d["first_lower"], d["first_upper"]) if d["decided_by"] == "first_look" else (d["cs_lower"],
                                                                                                d["cs_upper"])
        return f"[{100 * lo:+.2f}, {100 * hi:+.2f}] pp".replace("-", "\u2212")

    assert any(v["detail"]["decided_by"] == "first_look" for v in latest["verdicts"])  # both kinds are checked
    # the first look's own gap beside its interval (not a later look's fixed-sample gap): summary.json carries it.
    # The fixture judges each checkpoint once, so first_gap equals gap here; test_verdict_rows.py has a later look.
    assert all(v["detail"]["first_gap"] is not None for v in latest["verdicts"]
               if v["detail"]["decided_by"] == "first_look")
    want = [[v["model"], "items", _gap(deciding_gap(v["detail"])), deciding(v["detail"]),
             {"improved": "\u25b2", "regressed": "\u25bc"}.get(v["verdict"], "\u25cb") + " " + v["verdict"]]
            for v in latest["verdicts"]]
    assert rows == want


def test_the_verdict_check_catches_a_bare_verdict(tab, shots):
    """Negative control: a verdict word without its gap and interval fails the check every page passes."""
    _open(tab, shots, "overview")
    tab.js("document.body.insertAdjacentHTML('beforeend', "
           "'<table><tr><td><span data-verdict=\"regressed\">regressed</span></td></tr></table>')")
    with pytest.raises(AssertionError):
        _check_verdicts(tab)
