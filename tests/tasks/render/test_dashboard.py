"""The static dashboard: what it reads, the numbers it shows, escaping, containment, the server.

Reference values are the numbers written into the synthetic artifacts by ``_write`` below (and,
for the real-audit test, the run's own summary.json): the dashboard must show them unchanged,
formatted as ``f"{100 * x:.2f}%"`` and ``[lo, hi]`` in percent with two decimals.
"""

from __future__ import annotations

import http.client
import json
import threading
from html.parser import HTMLParser
from pathlib import Path

import polars as pl
import pytest

from benchcert.flows.cli import main
from benchcert.tasks.artifacts.folders import hashed_folder, safe_component
from benchcert.tasks.render.trend import trend_svg
from benchcert.tasks.render.dashboard import MARKER, SITE_CSP, OutputFolderError, build_site, make_server
from benchcert.tasks.render.run_records import (DEFAULT_METHODS, DashboardError, checkpoint_key, checkpoint_rows,
                                                choose_method, load_runs, split_checkpoint, trend_rows)
from benchcert.tasks.schemas import Interval, ModelSummary, ScoreSummary, Summary

from conftest import SMALL_CSV, SMALL_MAP
from run_support import stage_and_publish

EVIL_MODEL = '<script>console.error("xss")</script>'
EVIL_BENCH = '../b<img src=x onerror=alert(1)>'
ALLOWED_TAGS = {"html", "head", "meta", "link", "title", "style", "body", "nav", "h1", "h2", "h3", "p", "a", "b",
                "div", "table", "thead", "tbody", "tr", "th", "td", "section", "ul", "li", "details", "summary",
                "iframe", "footer", "span", "svg", "g", "rect", "line", "circle", "polyline", "text", "caption", "code",
                "desc", "path", "polygon"}


# --------------------------------------------------------------------------- helpers


class Page(HTMLParser):
    """Every tag with its attributes, all text, and each table's cells by table class."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.tables: dict[str, list[list[tuple[str, str, str]]]] = {}  # class -> rows of (text, class, tag)
        self._table: str | None = None
        self._cell: list[str] | None = None
        self._cell_attrs: tuple[str, str] = ("", "")
        self.text: list[str] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        if tag == "table":
            self._table = a.get("class", "")
            self.tables.setdefault(self._table, [])
        elif tag == "tr" and self._table is not None:
            self.tables[self._table].append([])
        elif tag in ("td", "th") and self._table is not None:
            self._cell, self._cell_attrs = [], (a.get("class", ""), tag)

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.tables[self._table][-1].append(("".join(self._cell), *self._cell_attrs))
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)

    def rows(self, cls: str) -> list[dict[str, str]]:
        """Body rows of the tables of class ``cls``: {last class of the cell, else its position: text}."""
        def key(i, c):
            named = [x for x in c.split() if x != "num"]
            return named[-1] if named else str(i)

        return [{key(i, c): t for i, (t, c, _) in enumerate(r)}
                for r in self.tables[cls] if r and any(tag == "td" for _, _, tag in r)]


def pct(x: float) -> str:
    return f"{100 * x:.2f}%"


def iv(lo: float, hi: float) -> str:
    return f"[{100 * lo:.2f}, {100 * hi:.2f}]"


def _score(e: float, methods=("clustered_subject", "iid_clt")) -> ScoreSummary:
    widths = {"hierarchical": 0.08, "clustered_subject": 0.05, "wilson": 0.02, "iid_clt": 0.01}
    return ScoreSummary(estimate=e, intervals=[Interval(method=m, lower=e - widths[m], upper=e + widths[m],
                                                        half_width=widths[m], alpha=0.05) for m in methods])


# Per run (oldest first): model -> (macro, pooled).  step-30000 appears only in the last run, and
# step-2000 only in the first two, so the checkpoint view must take each from a different run.
RUNS = [
    {"org/m@step-2000": (0.40, 0.42), "org/m@step-12000": (0.50, 0.53), "org/m": (0.60, 0.61),
     EVIL_MODEL: (0.30, 0.31)},
    {"org/m@step-2000": (0.41, 0.43), "org/m@step-12000": (0.52, 0.55), "org/m": (0.62, 0.63),
     EVIL_MODEL: (0.32, 0.33)},
    {"org/m@step-30000": (0.57, 0.58), "org/m@step-12000": (0.53, 0.56), "org/m": (0.64, 0.66),
     EVIL_MODEL: (0.34, 0.35)},
]


def _fields(benchmark: str, run_id: str, finished: str) -> dict:
    return {"benchcert_version": "0", "run_id": run_id, "flow_run_id": None, "benchmark": benchmark,
            "status": "completed", "started_at": finished, "finished_at": finished, "config": {},
            "sources": [{"path": "/logs/<b>x</b>.csv", "sha256": "ab" * 32, "format": "csv", "rows_added": 3,
                         "ingested_at": finished}], "timings_s": {}}


def _write(root: Path, benchmark: str, runs=RUNS, methods=("clustered_subject", "iid_clt"),
           last_methods=None) -> list[str]:
    ids = []
    for i, scores in enumerate(runs):
        run_id = f"2026110{i + 1}T020000000Z-{i:06d}"
        ms = methods if (last_methods is None or i < len(runs) - 1) else last_methods
        models = [ModelSummary(model=m, n_items=100, coverage=1.0, n_subjects=2, macro=_score(mac, ms),
                               pooled=_score(poo, ms)) for m, (mac, poo) in scores.items()]
        summary = Summary(run_id=run_id, benchmark=benchmark, created_at=f"2026-11-0{i + 1}T02:00:00Z", alpha=0.05,
                          variant="", n_items=100, n_models=len(models), n_subjects=2, n_domains=1, analyses=["x"],
                          models=models, warnings=[f"warn <i>{i}</i>"])
        stage_and_publish(root, summary=summary,
                          manifest_fields=_fields(benchmark, run_id, f"2026-11-0{i + 1}T02:00:00.000Z"),
                          tables={"model_scores": pl.DataFrame({"model": list(scores)})},
                          report_html=f"<!DOCTYPE html><html><body><p>report of {run_id}</p></body></html>")
        ids.append(run_id)
    return ids


@pytest.fixture()
def arts(tmp_path) -> Path:
    root = tmp_path / "artifacts"
    _write(root, "mmlu_pro")
    _write(root, EVIL_BENCH, runs=RUNS[:1])
    return root


def _pages(site: Path) -> dict[str, Page]:
    """Every page the dashboard wrote (the runs' copied report.html files are the audit's, not its pages)."""
    return {str(p.relative_to(site)): Page(p.read_text(encoding="utf-8")) for p in site.rglob("*.html")
            if p.name != "report.html"}


# --------------------------------------------------------------------------- model ids and trends


@pytest.mark.parametrize("model, expected", [
    ("org/model@step-12000", ("org/model", "step-12000")),
    ("org/model", ("org/model", None)),
    ("a@b@c", ("a@b", "c")),
    ("@x", ("@x", None)),
    ("x@", ("x@", None)),
])
def test_split_checkpoint(model, expected):
    assert split_checkpoint(model) == expected


def test_checkpoints_sort_naturally_with_the_family_id_first():
    labels = ["step-12000", "step-2000", None, "step-30000", "final"]
    assert sorted(labels, key=checkpoint_key) == [None, "final", "step-2000", "step-12000", "step-30000"]


def _trend(runs, bench: str) -> list[dict]:
    """``bench``'s trend rows as its page draws them: with the method of its latest run (load_runs: oldest first)."""
    bruns = [r for r in runs if r.benchmark == bench]
    return trend_rows(bruns, choose_method(bruns[-1]))


def test_trend_rows_hold_every_run_value(arts):
    runs, problems = load_runs(arts)
    assert problems == []
    t = _trend(runs, "mmlu_pro")
    assert len(t) == sum(len(r) for r in RUNS) * 2
    assert {r["method"] for r in t} == {"clustered_subject"}  # the most defensible method present (DEFAULT_METHODS)
    for order, scores in enumerate(RUNS):
        for model, (mac, poo) in scores.items():
            rows = {r["metric"]: r for r in t if r["run_order"] == order and r["model"] == model}
            assert rows["macro"]["estimate"] == mac and rows["pooled"]["estimate"] == poo
            assert rows["macro"]["lower"] == pytest.approx(mac - 0.05)
            assert rows["macro"]["upper"] == pytest.approx(mac + 0.05)
            assert rows["macro"]["family"] == split_checkpoint(model)[0]


def test_checkpoint_view_takes_each_checkpoint_from_its_latest_run(arts):
    c = [r for r in checkpoint_rows(_trend(load_runs(arts)[0], "mmlu_pro")) if r["metric"] == "macro"]
    assert [r["model"] for r in c] == ["org/m", "org/m@step-2000", "org/m@step-12000", "org/m@step-30000"]
    assert [r["estimate"] for r in c] == [0.64, 0.41, 0.53, 0.57]  # runs 3, 2, 3, 3 of RUNS
    assert [r["run_order"] for r in c] == [2, 1, 2, 2]
    assert EVIL_MODEL not in [r["model"] for r in c]  # no '@': not a checkpoint family


def test_method_follows_the_latest_run_and_older_runs_show_points_only(tmp_path):
    root = tmp_path / "a"
    _write(root, "b", last_methods=("hierarchical", "clustered_subject"))
    runs, _ = load_runs(root)
    assert choose_method(runs[-1]) == "hierarchical" and choose_method(runs[0]) == "clustered_subject"
    assert choose_method(runs[0], ("wilson",)) is None
    t = _trend(runs, "b")
    assert {r["method"] for r in t} == {"hierarchical"}
    assert {r["lower"] for r in t if r["run_order"] < 2} == {None}
    assert None not in {r["lower"] for r in t if r["run_order"] == 2}
    assert len([r for r in t if r["run_order"] < 2]) > 0 and len([r for r in t if r["run_order"] == 2]) > 0


def test_trend_svg_places_points_by_value():
    est, lo, hi = [0.2, 0.5, float("nan"), 0.4], [0.1, 0.45, None, None], [0.3, 0.55, None, None]
    svg = trend_svg(["a", "b", "c", "<d>"], [{"name": "macro", "estimate": est, "lower": lo, "upper": hi}], title="t")
    page = Page(svg)
    pts = [a for t, a in page.tags if t == "g" and a.get("class") == "pt"]
    assert [float(a["data-estimate"]) for a in pts] == [0.2, 0.5, 0.4]  # NaN is not drawn
    cy = [float(a["cy"]) for t, a in page.tags if t == "circle"]
    assert cy[1] < cy[2] < cy[0]  # higher score, higher on the chart (smaller y)
    assert sum(1 for t, a in page.tags if t == "circle" and a.get("class") == "point-only") == 1
    assert "&lt;d&gt;" in svg and "<d>" not in svg
    with pytest.raises(ValueError, match="align"):
        trend_svg(["a"], [{"name": "x", "estimate": [0.1, 0.2]}])


# --------------------------------------------------------------------------- the site


def test_site_shows_the_numbers_of_every_run(arts, tmp_path):
    site = tmp_path / "site"
    report = build_site(arts, site)
    assert (report.benchmarks, report.runs, report.problems) == (2, 4, ())
    pages = _pages(site)
    bench = safe_component("mmlu_pro")
    ids = sorted(p.split("/")[1] for p in pages if p.startswith(bench + "/") and p.count("/") == 2)
    # overview, grid, model list; 2 benchmark pages, 4 run pages; 5 model pages, 1 training run (org/m)
    assert len(ids) == 3 and report.pages == len(pages) == 3 + 2 + 4 + 5 + 1
    for run_id, scores in zip(ids, RUNS):
        rows = {r["model"]: r for r in pages[f"{bench}/{run_id}/index.html"].rows("models")}
        assert set(rows) == set(scores)
        for model, (mac, poo) in scores.items():
            assert rows[model]["macro"] == pct(mac) and rows[model]["pooled"] == pct(poo)
            assert rows[model]["macro-iv"] == iv(mac - 0.05, mac + 0.05)
            assert rows[model]["pooled-iv"] == iv(poo - 0.05, poo + 0.05)
        assert (site / bench / run_id / "report.html").read_text().count(f"report of {run_id}") == 1
        assert json.loads((site / bench / run_id / "summary.json").read_text())["run_id"] == run_id
    # The benchmark page: every model's numbers in every run, and the checkpoint chart in order.
    bp = pages[f"{bench}/index.html"]
    values = [(r["model"], r["macro"], r["pooled"], r["macro-iv"]) for r in bp.rows("values")]
    for scores in RUNS:
        for model, (mac, poo) in scores.items():
            assert (model, pct(mac), pct(poo), iv(mac - 0.05, mac + 0.05)) in values
    checkpoints = [r["model"] for r in bp.rows("values")][:4]  # the checkpoint table comes first
    assert checkpoints == ["org/m", "org/m@step-2000", "org/m@step-12000", "org/m@step-30000"]
    pts = [float(a["data-estimate"]) for t, a in bp.tags if t == "g" and a.get("class") == "pt"]
    assert {0.41, 0.53, 0.57, 0.64} <= set(pts)
    # The index: both benchmarks, every run, the latest numbers.
    idx = pages["index.html"]
    assert {r["benchmark"] for r in idx.rows("benchmarks")} == {"mmlu_pro", EVIL_BENCH}
    leaders = {r["benchmark"]: (r["leader"], r["pooled"], r["pooled-iv"]) for r in idx.rows("benchmarks")}
    assert leaders["mmlu_pro"] == ("org/m", pct(0.66), iv(0.61, 0.71))  # the latest run's best pooled score
    # One model across benchmarks, and the training run of org/m with its checkpoints in step order.
    model = pages[f"_views/model-{hashed_folder('org/m@step-12000')}.html"].rows("model-benchmarks")
    assert [(r["benchmark"], r["pooled"], r["pooled-iv"]) for r in model] == [
        ("mmlu_pro", pct(0.56), iv(0.51, 0.61)), (EVIL_BENCH, pct(0.53), iv(0.48, 0.58))]  # best pooled first
    series = pages[f"_views/series-{hashed_folder('org/m')}.html"].rows("series-points")
    # a section per benchmark (EVIL_BENCH's one run first, by name), each checkpoint from its latest run
    assert [(r["model"], r["pooled"]) for r in series] == [("org/m@step-2000", pct(0.42)),
                                                           ("org/m@step-12000", pct(0.53)),
                                                           ("org/m@step-2000", pct(0.43)),
                                                           ("org/m@step-12000", pct(0.56)),
                                                           ("org/m@step-30000", pct(0.58))]


def test_every_log_string_is_escaped_and_every_link_stays_in_the_site(arts, tmp_path):
    site = tmp_path / "site"
    build_site(arts, site)
    for rel, page in _pages(site).items():
        html_text = (site / rel).read_text(encoding="utf-8")
        assert {t for t, _ in page.tags} <= ALLOWED_TAGS, rel
        assert "<script" not in html_text.lower() and "<img" not in html_text.lower() and "<i>" not in html_text
        csp = [a["content"] for t, a in page.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
        assert csp == [SITE_CSP], rel
        for tag, attrs in page.tags:
            assert not any(k.startswith("on") for k in attrs), (rel, tag)
            for key in ("href", "src"):
                if key in attrs and attrs[key] != "data:,":
                    target = ((site / rel).parent / attrs[key].split("#")[0]).resolve()
                    assert site.resolve() in target.parents and target.is_file(), (rel, attrs[key])
    text = "".join(_pages(site)["index.html"].text)
    assert EVIL_BENCH in text and EVIL_MODEL in "".join(_pages(site)["_views/models.html"].text)  # text, not dropped


def test_changes_and_verdicts_are_shown(arts, tmp_path):
    run_dir = next((arts / "mmlu_pro").glob("20261103*"))
    summary = json.loads((run_dir / "summary.json").read_text())
    summary["changes"] = {"previous_run_id": "20261102T020000000Z-000001", "new_models": ["org/m@step-30000"],
                          "removed_models": ["org/m@step-2000"], "regressions": [EVIL_MODEL],
                          "moves": [{"model": EVIL_MODEL, "metric": "macro", "method": "clustered_subject",
                                     "previous": 0.32, "current": 0.20, "previous_lower": 0.27,
                                     "previous_upper": 0.37, "direction": "down"}]}
    summary["verdicts"] = [{"kind": "checkpoint", "model": "org/m@step-30000", "baseline": "org/m",
                            "verdict": "regressed", "detail": {"gap": -0.07, "lower": -0.1, "upper": -0.04,
                                                               "question_key": "items", "decided_by": "anytime",
                                                               "look": 2, "cs_lower": -0.12, "cs_upper": -0.02}}]
    (run_dir / "summary.json").write_text(json.dumps(summary))
    site = tmp_path / "site"
    build_site(arts, site)
    page = _pages(site)[f"mmlu_pro/{run_dir.name}/index.html"]
    (move,) = page.rows("moves")
    assert list(move.values()) == [EVIL_MODEL, "macro", "\u25bc down", "32.00%", "[27.00, 37.00]", "clustered_subject",
                                   "20.00%"]
    assert list(page.rows("verdicts")[0].values()) == [
        "org/m@step-30000", "org/m", "items", "\u22127.00 pp", "[\u221212.00, \u22122.00] pp",
        "anytime interval (valid at every look)", "[\u221210.00, \u22124.00] pp", "\u25bc regressed",
        "anytime test (look 2)", "decided"]  # the anytime test decided: its interval first, the fixed-sample one after
    assert ("a", {"href": "../20261102T020000000Z-000001/index.html"}) in page.tags
    regressions = [r["regressions"] for r in _pages(site)["index.html"].rows("benchmarks")
                   if r["benchmark"] == "mmlu_pro"]
    assert regressions == [f"{EVIL_MODEL}, org/m@step-30000"]


def test_unreadable_runs_are_skipped_and_named(arts, tmp_path):
    index = json.loads((arts / "index.json").read_text())
    bad_dir = arts / "mmlu_pro" / sorted(p.name for p in (arts / "mmlu_pro").iterdir())[0]
    (bad_dir / "summary.json").write_text("{not json")
    outside = tmp_path / "secret.html"
    outside.write_text("SECRET")
    second = arts / "mmlu_pro" / index["benchmarks"][1]["runs"][1]
    (second / "report.html").unlink()
    (second / "report.html").symlink_to(outside)
    index["benchmarks"].append({"benchmark": "x", "dir": "../..", "latest_run_id": "r", "latest_finished_at": "t",
                                "runs": ["r"]})
    index["benchmarks"][1]["runs"] += ["../../../etc", index["benchmarks"][1]["runs"][2]]
    (arts / "index.json").write_text(json.dumps(index))
    site = tmp_path / "site"
    report = build_site(arts, site)
    assert report.runs == 3 and len(report.problems) == 4
    assert sum(": unreadable (" in p for p in report.problems) == 2  # the broken summary, the missing folder
    assert any("unsafe folder" in p for p in report.problems) and any("twice" in p for p in report.problems)
    assert not (site / "mmlu_pro" / second.name / "report.html").exists()  # a symlink out of the root is not copied
    assert "SECRET" not in "".join(p.read_text() for p in site.rglob("*") if p.is_file())
    skipped = [t for t, a in _pages(site)["index.html"].tags if t == "ul"]
    assert skipped == ["ul"]


def test_output_folder_rules(arts, tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("keep me")
    with pytest.raises(OutputFolderError, match="not a benchcert dashboard"):
        build_site(arts, theirs)
    assert (theirs / "notes.txt").read_text() == "keep me"
    with pytest.raises(OutputFolderError, match="inside the artifacts root"):
        build_site(arts, arts / "site")
    with pytest.raises(DashboardError, match="no such file"):
        build_site(tmp_path / "nothing", tmp_path / "site")
    site = tmp_path / "site"
    build_site(arts, site)
    (site / "stale.html").write_text("old")
    build_site(arts, site)  # an earlier dashboard is replaced whole
    assert (site / MARKER).is_file() and not (site / "stale.html").exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".site")) == [".site.lock"]


def test_cli_build_and_exit_codes(arts, tmp_path, capsys):
    code = main(["dashboard", "build", "--artifacts", str(arts), "--out", str(tmp_path / "site"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["runs"] == 4 and Path(out["index"]).is_file()
    code = main(["dashboard", "build", "--artifacts", str(arts), "--out", str(tmp_path / "site"),
                 "--method", "iid_clt"])
    assert code == 0
    rows = Page((tmp_path / "site" / "mmlu_pro" / "index.html").read_text()).rows("models")
    assert rows[0]["macro-iv"] == iv(0.64 - 0.01, 0.64 + 0.01)  # iid_clt half-width 0.01
    assert main(["dashboard", "build", "--artifacts", str(tmp_path / "none"), "--out", str(tmp_path / "s2")]) == 1
    assert main(["dashboard", "build", "--artifacts", str(arts), "--out", str(arts)]) == 2
    assert main(["dashboard", "serve", "--dir", str(tmp_path / "none")]) == 1
    assert "dashboard build" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["dashboard", "build", "--help"])
    assert e.value.code == 0 and DEFAULT_METHODS[1] in capsys.readouterr().out


# --------------------------------------------------------------------------- the server


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("served")
    _write(tmp_path / "artifacts", "mmlu_pro")
    site = tmp_path / "site"
    build_site(tmp_path / "artifacts", site)
    (tmp_path / "secret.txt").write_text("SECRET")
    (site / "leak.txt").symlink_to(tmp_path / "secret.txt")
    (site / "emptydir").mkdir()
    server = make_server(site, "127.0.0.1", 0, quiet=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def _get(port: int, path: str, method: str = "GET") -> tuple[int, dict, bytes]:
    con = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    con.putrequest(method, path, skip_accept_encoding=True)  # the raw path, not normalised by a client
    con.endheaders()
    r = con.getresponse()
    body = r.read()
    con.close()
    return r.status, dict(r.getheaders()), body


def test_server_serves_the_site_with_security_headers(served):
    status, headers, body = _get(served, "/")
    assert status == 200 and b"benchcert dashboard" in body
    assert headers["Content-Security-Policy"] == SITE_CSP and headers["X-Content-Type-Options"] == "nosniff"
    status, _, body = _get(served, "/mmlu_pro/index.html")
    assert status == 200 and b"step-30000" in body


@pytest.mark.parametrize("path", ["/../secret.txt", "/%2e%2e/secret.txt", "/..%2fsecret.txt", "/leak.txt",
                                  "/.benchcert-dashboard", "/emptydir/", "/mmlu_pro/..%5c..%5csecret.txt",
                                  "//etc/passwd", "/nonexistent.html"])
def test_server_serves_nothing_outside_the_site(served, path):
    status, _, body = _get(served, path)
    assert status == 404 and b"SECRET" not in body and b"root:" not in body


def test_server_is_read_only(served):
    assert _get(served, "/index.html", "POST")[0] == 501
    assert _get(served, "/index.html", "PUT")[0] == 501


# --------------------------------------------------------------------------- one real audit


@pytest.mark.usefixtures("prefect_harness")
def test_dashboard_of_real_audits_through_the_cli(tmp_path, capsys):
    """Two audits by `benchcert audit` (the second after a new checkpoint's logs arrive), then the dashboard.

    Ingestion calls the plain function (the CLI's ingest is tested in test_cli.py) to keep this fast.
    """
    from benchcert.tasks.ingest.service import ingest_file
    from benchcert.tasks.ingest.mapping import parse_mapping

    db, arts, site = tmp_path / "s.duckdb", tmp_path / "arts", tmp_path / "site"
    mapping = parse_mapping(SMALL_MAP)
    rows = [line.split(",") for line in SMALL_CSV.read_text().splitlines()[1:]]
    ckpt = tmp_path / "ckpt.csv"
    ckpt.write_text("model,question,topic,area,correct\n" + "".join(
        f"org/m@step-{s},{q},{t},{a},{(i + k) % 2}\n" for k, s in enumerate((2000, 12000))
        for i, (_, q, t, a, _c) in enumerate(r for r in rows if r[0] == "m1")))
    for f in (SMALL_CSV, ckpt):
        assert ingest_file(db, f, benchmark="small", mapping=mapping).status == "ingested"
    assert main(["audit", "--db", str(db), "--benchmark", "small", "--artifacts", str(arts)]) == 0
    new = tmp_path / "ckpt2.csv"
    new.write_text("model,question,topic,area,correct\n" + "".join(
        f"org/m@step-30000,{q},{t},{a},1\n" for _, q, t, a, _c in (r for r in rows if r[0] == "m1")))
    assert ingest_file(db, new, benchmark="small", mapping=mapping).status == "ingested"
    assert main(["audit", "--db", str(db), "--benchmark", "small", "--artifacts", str(arts)]) == 0
    capsys.readouterr()
    assert main(["dashboard", "build", "--artifacts", str(arts), "--out", str(site), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["runs"] == 2
    index = json.loads((arts / "index.json").read_text())
    latest = index["benchmarks"][0]["latest_run_id"]
    summary = json.loads((arts / "small" / latest / "summary.json").read_text())
    # the dashboard draws each score's headline interval (summary 1.2), else the first method present
    methods = {i["method"] for i in summary["models"][0]["macro"]["intervals"]} | {"headline"}
    method = next(m for m in DEFAULT_METHODS if m in methods)
    page = Page((site / "small" / latest / "index.html").read_text())
    rows = {r["model"]: r for r in page.rows("models")}
    assert set(rows) == {m["model"] for m in summary["models"]} >= {"org/m@step-30000", "m1"}
    for m in summary["models"]:
        ivs = {i["method"]: i for i in m["macro"]["intervals"]} | {"headline": m["macro"]["headline"]}
        assert rows[m["model"]]["macro"] == pct(m["macro"]["estimate"])
        assert rows[m["model"]]["macro-iv"] == iv(ivs[method]["lower"], ivs[method]["upper"])
    bench = Page((site / "small" / "index.html").read_text())
    ck = [r["model"] for r in bench.rows("values")][:3]
    assert ck == ["org/m@step-2000", "org/m@step-12000", "org/m@step-30000"]


def test_a_running_server_serves_the_rebuilt_site(arts, tmp_path):
    """Production loop: `dashboard serve` keeps running while a job rebuilds the site after each run."""
    site = tmp_path / "site"
    build_site(arts, site)
    server = make_server(site, "127.0.0.1", 0, quiet=True)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        port = server.server_address[1]
        assert b"fresh_bench" not in _get(port, "/")[2]
        _write(arts, "fresh_bench", runs=RUNS[:1])
        build_site(arts, site)
        status, _, body = _get(port, "/")
        assert status == 200 and b"fresh_bench" in body
        assert _get(port, "/fresh_bench/index.html")[0] == 200
    finally:
        server.shutdown()
        server.server_close()


def test_a_trickling_client_cannot_hold_a_slot_past_the_header_deadline(tmp_path):
    """Issue #26 finding 11: the idle timer restarts with every byte, so clients sending a byte at a
    time held every slot; the headers of a request must all arrive within one deadline."""
    import socket
    import threading
    import time
    import urllib.request

    (tmp_path / "index.html").write_text("<html>ok</html>")
    server = make_server(tmp_path, "127.0.0.1", 0, quiet=True, idle_timeout=5.0, max_connections=2,
                         header_deadline=1.0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    stop = threading.Event()
    request = b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 200
    closed_after: list[int] = []  # bytes sent when the server hung up

    def trickle():
        s = socket.create_connection(server.server_address, timeout=10)
        for sent, ch in enumerate(request):
            if stop.wait(0.1):
                break
            try:
                s.send(bytes([ch]))
            except OSError:
                closed_after.append(sent)
                break
        else:
            s.settimeout(0.1)
        s.close()

    clients = [threading.Thread(target=trickle, daemon=True) for _ in range(2)]
    try:
        for c in clients:
            c.start()
        time.sleep(1.8)  # past the deadline: the slots are free again
        url = f"http://127.0.0.1:{server.server_address[1]}/index.html"
        with urllib.request.urlopen(url, timeout=3) as resp:
            assert resp.status == 200 and b"ok" in resp.read()
        for c in clients:
            c.join(timeout=5)
        # hung up on before the headers were complete (the idle timer, restarted by every byte, never fires)
        assert len(closed_after) == 2 and all(n < len(request) for n in closed_after), closed_after
    finally:
        stop.set()
        server.shutdown()
        server.server_close()
