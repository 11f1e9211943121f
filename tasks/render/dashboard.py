"""The ops dashboard: a static, offline site built from run artifacts, and a loopback server.

It reads only the artifact contract (``<root>/index.json`` and each run's ``manifest.json``,
``summary.json`` and ``report.html``), never the live DuckDB store, so it can be rebuilt
while audits are writing and on any machine that can read the artifacts.

Site layout (a benchmark's folder is its artifacts folder, :func:`site_folders`; a run's is
:func:`~benchcert.tasks.artifacts.folders.safe_component` of its id, so nothing a log says can leave
the site folder)::

    <out>/index.html                           benchmarks and their runs, newest first
    <out>/<benchmark>/index.html               trends: each model's macro and pooled score with
                                               its interval across runs, and across the
                                               checkpoints of a model family
    <out>/<benchmark>/<run id>/index.html      one run: models, changes, verdicts, warnings, sources
    <out>/<benchmark>/<run id>/report.html     the run's own report (copied), embedded in a frame
    <out>/<benchmark>/<run id>/{summary,manifest}.json  copies, for download

Safety rules:

* every string that comes from an artifact (model, benchmark, subject names, warnings, paths,
  run ids) is escaped with :func:`~benchcert.tasks.render.escape.escape`; markup built here is
  wrapped in :class:`_Html` so a table cell is either known-safe markup or escaped text, never
  "probably fine";
* no script, no external URL, no web font: each page carries a Content-Security-Policy meta
  tag (:data:`SITE_CSP`) that forbids every fetch except same-origin frames (the embedded
  report, itself sandboxed without scripts), and :func:`serve` sends the same policy as a header;
* the site is assembled in a hidden sibling folder and swapped into place under a lock, and an
  existing ``--out`` folder is only replaced if an earlier build marked it as a dashboard.

The runs and the trend tables are read by :mod:`benchcert.tasks.render.run_records`; the
charts are drawn by :mod:`benchcert.tasks.render.charts` and :mod:`benchcert.tasks.render.trend`.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import shutil
import socket
import threading
import uuid
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

import polars as pl
from filelock import FileLock

from benchcert.tasks.artifacts.folders import hashed_folder, folder_candidates, folder_name, inside, safe_component

from benchcert.tasks.artifacts.runs import iso
from benchcert.tasks.errors import UsageError
from benchcert.tasks.render.charts import fmt_interval as _iv
from benchcert.tasks.render.charts import fmt_percent as _pct
from benchcert.tasks.render.charts import interval_plot_svg
from benchcert.tasks.render.trend import trend_svg
from benchcert.tasks.render.escape import escape
from benchcert.tasks.render.run_records import (DEFAULT_METHODS, METRICS, DashboardError, RunRecord, checkpoint_key,
                                                checkpoint_table, choose_method, load_runs, method_label,
                                                score_interval,
                                                split_checkpoint, trend_table)

__all__ = [
    "SITE_CSP",
    "MARKER",
    "OutputFolderError",
    "SiteReport",
    "build_site",
    "make_server",
    # read by the command line from here, defined in run_records
    "DEFAULT_METHODS",
    "DashboardError",
]

#: Same-origin frames are the only fetch a page may make (the embedded report.html).
SITE_CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-src 'self'; "
            "base-uri 'none'; form-action 'none'")

#: File that marks a folder as built by :func:`build_site` (so a rebuild may replace it).
MARKER = ".benchcert-dashboard"

_COLORS = {"macro": "#0072b2", "pooled": "#d55e00"}
_DASH = "\u2014"


class OutputFolderError(UsageError, DashboardError):
    """The --out folder cannot be used (not a dashboard, or inside the artifacts root): the option's
    mistake, so UsageError comes first and gives the exit code (2); still a DashboardError."""


class _Html(str):
    """Markup built here from escaped parts; inserted verbatim, everything else is escaped."""


def _h(value) -> str:
    return value if isinstance(value, _Html) else escape(value)


def _link(href: str, text) -> _Html:
    return _Html(f'<a href="{escape(href)}">{_h(text)}</a>')


# --------------------------------------------------------------------------- HTML pages

_CSS = """
:root{--fg:#1f2328;--muted:#59636e;--border:#d0d7de;--alt:#f6f8fa;--accent:#0969da;--bad:#cf222e;--good:#1a7f37}
*{box-sizing:border-box}
body{font:15px/1.5 system-ui,-apple-system,'Segoe UI',Roboto,Arial,sans-serif;color:var(--fg);margin:0 auto;
max-width:1180px;padding:20px 28px 48px}
a{color:var(--accent)}
h1{font-size:1.6em;margin:.3em 0 .2em;overflow-wrap:anywhere}
h2{font-size:1.25em;margin:1.6em 0 .5em;border-bottom:1px solid var(--border);padding-bottom:4px}
h3{font-size:1.05em;margin:1.2em 0 .4em;overflow-wrap:anywhere}
nav.crumbs{font-size:13px;color:var(--muted)}
nav.crumbs a{color:var(--muted)}
p.note{color:var(--muted);font-size:13px}
table{border-collapse:collapse;font-size:13px;font-variant-numeric:tabular-nums;margin:0 0 1em}
th,td{padding:3px 10px;border-bottom:1px solid var(--border);text-align:left;vertical-align:top;
overflow-wrap:anywhere}
thead th{background:var(--alt);font-weight:600}
td.num,th.num{text-align:right;white-space:nowrap}
.table-wrap{overflow-x:auto;max-width:100%}
.bad{color:var(--bad);font-weight:600}
.good{color:var(--good)}
ul.problems li{color:var(--bad)}
details{margin:.3em 0 1em}
summary{cursor:pointer;color:var(--muted);font-size:13px}
svg{max-width:100%;height:auto;display:block}
iframe.report{width:100%;height:80vh;border:1px solid var(--border);border-radius:4px}
footer{color:var(--muted);font-size:12px;border-top:1px solid var(--border);margin-top:40px;padding-top:8px}
""".strip()


def _page(title: str, crumbs: list[tuple[str | None, str]], body: list[str], generated: str) -> str:
    nav = " / ".join(_link(href, text) if href else escape(text) for href, text in crumbs)
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{escape(SITE_CSP)}">',
        '<meta name="referrer" content="no-referrer">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        # An inline icon stops the browser from asking the server for /favicon.ico.
        '<link rel="icon" href="data:,">',
        f"<title>{escape(title)}</title>", f"<style>\n{_CSS}\n</style>", "</head>", "<body>",
        f'<nav class="crumbs">{nav}</nav>', f"<h1>{escape(title)}</h1>", *body,
        f"<footer>benchcert dashboard \u00b7 built {escape(generated)} from run artifacts \u00b7 "
        "static and offline: no scripts, no network</footer>", "</body>", "</html>", ""])


def _table(headers: list, rows: list[list], *, cls: str = "", num: set[int] = frozenset(),
           cell_cls: list[str] | None = None) -> str:
    def td(i, v):
        classes = " ".join(c for c in (("num" if i in num else ""), (cell_cls[i] if cell_cls else "")) if c)
        return f'<td class="{classes}">{_h(v)}</td>' if classes else f"<td>{_h(v)}</td>"

    head = "".join(f'<th scope="col"{" class=num" if i in num else ""}>{_h(h)}</th>' for i, h in enumerate(headers))
    thead = f"<thead><tr>{head}</tr></thead>" if any(headers) else ""
    body = "".join("<tr>" + "".join(td(i, v) for i, v in enumerate(r)) + "</tr>" for r in rows)
    if not rows:
        body = f'<tr><td colspan="{len(headers)}">none</td></tr>'
    attr = f' class="{escape(cls)}"' if cls else ""
    return (f'<div class="table-wrap"><table{attr}>'
            f"{thead}<tbody>{body}</tbody></table></div>")


def _href(*parts: str) -> str:
    return "/".join(quote(p, safe="") for p in parts)


def _level(alpha: float) -> str:
    return f"{100 * (1 - alpha):g}%"


def _models_table(run: RunRecord, method: str | None) -> str:
    level = _level(run.alpha)
    head = ["model", "checkpoint of", "items", "coverage", "macro", f"macro {level} ({method_label(run, method)})",
            "pooled", f"pooled {level} ({method_label(run, method, 'pooled')})"]
    rows = []
    for m in sorted(run.models, key=lambda m: -m.estimates["macro"]):
        fam, ck = split_checkpoint(m.model)
        rows.append([m.model, fam if ck is not None else "", m.n_items, f"{100 * m.coverage:.1f}%",
                     _pct(m.estimates["macro"]), _iv(*score_interval(m, "macro", method)),
                     _pct(m.estimates["pooled"]), _iv(*score_interval(m, "pooled", method))])
    return _table(head, rows, cls="models", num={2, 3, 4, 5, 6, 7},
                  cell_cls=["model", "family", "items", "coverage", "macro", "macro-iv", "pooled", "pooled-iv"])


def _run_page(run: RunRecord, method: str | None, bench_href: str, generated: str, has_report: bool,
              sibling_ids: set[str]) -> str:
    body = [_table(["", ""], [  # no header row: a key/value list
        ["benchmark", _link(f"../{bench_href}", run.benchmark)], ["run id", run.run_id],
        ["started", run.started_at], ["finished", run.finished_at], ["Prefect flow run", run.flow_run_id or _DASH],
        ["variant", repr(run.variant)], ["models", run.n_models], ["items", run.n_items],
        ["subjects", run.n_subjects], ["domains", run.n_domains], ["alpha", f"{run.alpha:g}"],
        ["files", _Html(" \u00b7 ".join(_link(f, f) for f in (["report.html"] if has_report else [])
                                         + ["summary.json", "manifest.json"]))],
    ], cls="meta")]
    if run.regressions:
        body.append('<p class="bad">Regressions: ' + ", ".join(escape(m) for m in run.regressions) + "</p>")
    body.append(f"<h2>Models</h2><p class=\"note\">{_level(run.alpha)} intervals, method "
                f"{escape(method_label(run, method) if method else 'none available')}; sorted by macro score.</p>")
    body.append(_models_table(run, method))
    ch = run.changes
    if ch is not None:
        body.append("<h2>Changes since the previous run</h2>")
        prev = ch.get("previous_run_id")
        if not prev:
            body.append('<p class="note">First run of this benchmark.</p>')
        else:
            # Link only to a run the site has (a skipped run has no page).
            prev_html = (_link("../" + _href(safe_component(prev)) + "/index.html", prev) if prev in sibling_ids
                         else escape(prev))
            body.append(f"<p>Previous run: {prev_html}."
                        f" New models: {escape(', '.join(map(str, ch.get('new_models') or [])) or 'none')}."
                        f" Removed: {escape(', '.join(map(str, ch.get('removed_models') or [])) or 'none')}.</p>")
            moves = [mv for mv in ch.get("moves") or [] if isinstance(mv, dict)]
            body.append(_table(["model", "metric", "direction", "previous", "previous interval", "method", "now"], [
                [mv.get("model"), mv.get("metric"),
                 _Html(f'<span class="{"bad" if mv.get("direction") == "down" else "good"}">'
                       f'{escape(mv.get("direction"))}</span>'),
                 _pct(_num(mv.get("previous"))), _iv(_num(mv.get("previous_lower")), _num(mv.get("previous_upper"))),
                 mv.get("method"), _pct(_num(mv.get("current")))] for mv in moves], cls="moves", num={3, 4, 6}))
    if run.verdicts:
        body.append("<h2>Verdicts</h2>")
        body.append(_table(["kind", "model", "baseline", "verdict"], [
            [v.get("kind"), v.get("model"), v.get("baseline") or _DASH,
             _Html(f'<span class="{"bad" if v.get("verdict") == "regressed" else ""}">'
                   f'{escape(v.get("verdict"))}</span>')]
            for v in run.verdicts], cls="verdicts"))
    if run.warnings:
        body.append("<h2>Warnings</h2><ul>" + "".join(f"<li>{escape(w)}</li>" for w in run.warnings) + "</ul>")
    body.append("<h2>Sources</h2>")
    body.append(_table(["path", "sha256", "format", "rows added", "ingested"], [
        [s.get("path"), s.get("sha256"), s.get("format"), s.get("rows_added"), s.get("ingested_at")]
        for s in run.sources], cls="sources", num={3}))
    body.append("<h2>Tables</h2>")
    body.append(_table(["name", "file", "rows", "columns"], [
        [t.get("name"), t.get("file"), t.get("rows"), ", ".join(map(str, t.get("columns") or []))]
        for t in run.tables], num={2}))
    body.append("<h2>Report</h2>")
    if has_report:
        # Same-origin but without allow-scripts: the report cannot run code even if it held some.
        body.append('<p><a href="report.html">Open the full report</a></p>'
                    '<iframe class="report" src="report.html" title="run report" sandbox="allow-same-origin">'
                    "</iframe>")
    else:
        body.append('<p class="note">This run has no report.html.</p>')
    return _page(f"Run {run.run_id}", [("../../index.html", "dashboard"), (f"../{bench_href}", run.benchmark),
                                       (None, run.run_id)], body, generated)


def _nan(v) -> float:
    return math.nan if v is None else v


def _num(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _when(timestamp: str) -> str:
    """'2026-11-26T02:00:03.123Z' -> '2026-11-26 02:00' (an x label; tooltips keep the run id)."""
    return timestamp[:16].replace("T", " ")


def _series(rows: list[dict]) -> list[dict]:
    """Trend series (macro, pooled) from trend-table rows holding one point per metric."""
    out = []
    for metric in METRICS:
        rs = [r for r in rows if r["metric"] == metric]
        out.append({"name": metric, "color": _COLORS[metric],
                    "estimate": [r["estimate"] for r in rs], "lower": [r["lower"] for r in rs],
                    "upper": [r["upper"] for r in rs],
                    "tips": [f"{r['model']} \u00b7 {metric} {_pct(r['estimate'])} {_iv(r['lower'], r['upper'])} "
                             f"\u00b7 run {r['run_id']} ({r['finished_at']})" for r in rs]})
    return out


def _values_table(rows: list[dict], run_links: dict[str, str]) -> str:
    """The numbers behind a trend: one row per (model, run), macro and pooled side by side."""
    by: dict[tuple[str, str], dict] = {}
    for r in rows:
        by.setdefault((r["model"], r["run_id"]), {})[r["metric"]] = r
    out = []
    for (model, run_id), d in by.items():
        mac, poo = d["macro"], d["pooled"]
        out.append([model, _link(run_links[run_id], run_id), mac["finished_at"], _pct(mac["estimate"]),
                    _iv(mac["lower"], mac["upper"]), _pct(poo["estimate"]), _iv(poo["lower"], poo["upper"])])
    return _table(["model", "run", "finished", "macro", "macro interval", "pooled", "pooled interval"], out,
                  cls="values", num={3, 4, 5, 6}, cell_cls=["model", "run", "finished", "macro", "macro-iv",
                                                            "pooled", "pooled-iv"])


def _bench_page(bench: str, runs: list[RunRecord], trends: pl.DataFrame, ckpts: pl.DataFrame, method: str | None,
                run_href: dict[str, str], generated: str, max_trend_runs: int) -> str:
    latest = runs[-1]
    level = _level(latest.alpha)
    body = [f"<p>{len(runs)} run(s); latest {_link(run_href[latest.run_id], latest.run_id)} finished "
            f"{escape(latest.finished_at)}: {latest.n_models} models, {latest.n_items} items. Intervals: "
            f"{level} <b>{escape(method_label(latest, method) if method else 'none available')}</b>.</p>"]
    if latest.regressions:
        body.append('<p class="bad">Regressions in the latest run: '
                    + ", ".join(escape(m) for m in latest.regressions) + "</p>")

    body.append("<h2>Latest run</h2>")
    ordered = sorted(latest.models, key=lambda m: m.estimates["macro"])
    if ordered:
        body.append(interval_plot_svg([m.model for m in ordered], [
            {"name": metric, "color": _COLORS[metric], "estimate": [m.estimates[metric] for m in ordered],
             "lower": [_nan(score_interval(m, metric, method)[0]) for m in ordered],
             "upper": [_nan(score_interval(m, metric, method)[1]) for m in ordered]}
            for metric in METRICS], title=f"{bench}: latest run, {level} {method_label(latest, method) if method else ''}",
                              x_label="score"))
    body.append(_models_table(latest, method))

    t = trends.filter(pl.col("benchmark") == bench)
    c = ckpts.filter(pl.col("benchmark") == bench)
    if c.height:
        body.append('<h2 id="checkpoints">Checkpoints</h2><p class="note">Each checkpoint\'s scores from the latest '
                    "run that includes it, in checkpoint order.</p>")
        for fam in c["family"].unique(maintain_order=True).to_list():
            rows = c.filter(pl.col("family") == fam).to_dicts()
            labels = [r["checkpoint"] or r["model"] for r in rows if r["metric"] == "macro"]
            body.append(f'<section class="family"><h3>{escape(fam)}</h3>')
            body.append(trend_svg(labels, _series(rows), title=f"{fam} across checkpoints"))
            body.append(_values_table(rows, run_href) + "</section>")

    body.append('<h2 id="runs">Across runs</h2>')
    all_ids = [r.run_id for r in runs]
    shown_ids = all_ids[-max_trend_runs:]
    if len(shown_ids) < len(all_ids):
        body.append(f'<p class="note">Charts show the last {len(shown_ids)} of {len(all_ids)} runs.</p>')
    if len(all_ids) == 1:
        body.append('<p class="note">One run so far: trends are drawn from the second run on.</p>')
    shown = t.filter(pl.col("run_id").is_in(shown_ids))
    families = sorted(t["family"].unique().to_list())
    for fam in families:
        body.append(f'<section class="family"><h3>{escape(fam)}</h3>')
        members = sorted(t.filter(pl.col("family") == fam)["model"].unique().to_list(),
                         key=lambda m: checkpoint_key(split_checkpoint(m)[1]))
        for model in members:
            rows = shown.filter(pl.col("model") == model).sort("run_order", "metric").to_dicts()
            when = [_when(r["finished_at"]) for r in rows if r["metric"] == "macro"]
            charted = len(when) >= 2  # a single point is no trend; its numbers are shown open instead
            if charted:
                body.append(trend_svg(when, _series(rows), title=model))
            body.append(("<details>" if charted else "<details open>") + "<summary>numbers for " + escape(model)
                        + "</summary>"
                        + _values_table(t.filter(pl.col("model") == model).sort("run_order").to_dicts(), run_href)
                        + "</details>")
        body.append("</section>")

    body.append('<h2>All runs</h2>')
    body.append(_table(["run", "finished", "models", "items", "regressions"], [
        [_link(run_href[r.run_id], r.run_id), r.finished_at, r.n_models, r.n_items,
         ", ".join(r.regressions) or _DASH] for r in reversed(runs)], cls="runs", num={2, 3}))
    return _page(bench, [("../index.html", "dashboard"), (None, bench)], body, generated)


def _index_page(by_bench: dict[str, list[RunRecord]], bench_dir: dict[str, str], problems: list[str],
                artifacts_root: Path, generated: str, methods) -> str:
    body = [f'<p class="note">Built from the artifacts at {escape(artifacts_root)}.</p>', "<h2>Benchmarks</h2>"]
    rows = []
    for bench, runs in sorted(by_bench.items()):
        last = runs[-1]
        rows.append([_link(_href(bench_dir[bench]) + "/index.html", bench), len(runs),
                     _link(_href(bench_dir[bench], safe_component(last.run_id)) + "/index.html", last.run_id),
                     last.finished_at, last.n_models, last.n_items, ", ".join(last.regressions) or _DASH])
    body.append(_table(["benchmark", "runs", "latest run", "finished", "models", "items", "regressions"], rows,
                       cls="benchmarks", num={1, 4, 5}))
    body.append("<h2>Latest results</h2>")
    for bench, runs in sorted(by_bench.items()):
        last = runs[-1]
        method = choose_method(last, methods)
        body.append(f'<section class="latest"><h3>{_link(_href(bench_dir[bench]) + "/index.html", bench)}</h3>'
                    f'<p class="note">Run {escape(last.run_id)}, {_level(last.alpha)} intervals '
                    f"({escape(method_label(last, method) if method else 'none available')}).</p>"
                    f"{_models_table(last, method)}</section>")
    body.append("<h2>Runs</h2>")
    all_runs = sorted((r for rs in by_bench.values() for r in rs), key=lambda r: (r.finished_at, r.run_id),
                      reverse=True)
    body.append(_table(["finished", "benchmark", "run", "models", "items", "regressions"], [
        [r.finished_at, _link(_href(bench_dir[r.benchmark]) + "/index.html", r.benchmark),
         _link(_href(bench_dir[r.benchmark], safe_component(r.run_id)) + "/index.html", r.run_id),
         r.n_models, r.n_items, ", ".join(r.regressions) or _DASH] for r in all_runs], cls="runs", num={3, 4}))
    if problems:
        body.append("<h2>Skipped</h2><ul class=\"problems\">"
                    + "".join(f"<li>{escape(p)}</li>" for p in problems) + "</ul>")
    return _page("benchcert dashboard", [(None, "dashboard")], body, generated)


# --------------------------------------------------------------------------- build


@dataclass(frozen=True)
class SiteReport:
    out: Path
    benchmarks: int
    runs: int
    pages: int
    problems: tuple[str, ...]


def _copy_inside(root: Path, src: Path, dst: Path) -> bool:
    try:
        real = inside(root, str(src.relative_to(root)))
    except ValueError:
        return False
    if not real.is_file():
        return False
    shutil.copyfile(real, dst)
    return True


def _check_out(out: Path) -> None:
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / MARKER).is_file())):
        raise OutputFolderError(f"{out} exists and is not a benchcert dashboard; refusing to replace it "
                             "(choose an empty or new --out folder)")



def site_folders(by_bench: dict[str, list[RunRecord]]) -> dict[str, str]:
    """Each benchmark's folder in the site: its artifacts folder (so links keep their address),
    or its hashed :func:`~benchcert.tasks.artifacts.folders.folder_name` where that folder is not
    one of its own or would fold onto another benchmark's (an old tree holding both ``Case/``
    and ``case/``): no two benchmarks share a site folder on any filesystem."""
    out: dict[str, str] = {}
    taken: set[str] = set()
    for bench in sorted(by_bench):
        folder = by_bench[bench][-1].run_dir.parent.name
        if folder not in folder_candidates(bench) or folder.casefold() in taken:
            folder = folder_name(bench)
            if folder.casefold() in taken:
                folder = hashed_folder(bench)
        taken.add(folder.casefold())
        out[bench] = folder
    return out

def build_site(artifacts_root: str | os.PathLike, out_dir: str | os.PathLike, *, methods=DEFAULT_METHODS,
               max_trend_runs: int = 90, now: dt.datetime | None = None) -> SiteReport:
    """Build the static dashboard of ``artifacts_root`` into ``out_dir`` and return what was built.

    The site is written to a hidden sibling of ``out_dir`` and swapped into place under a lock
    (a server on ``out_dir`` sees the old or the new site); ``out_dir`` is replaced only when
    empty or built by an earlier call.  Runs that cannot be read are listed on the index page
    and in :attr:`SiteReport.problems`, and the rest is built.
    """
    if max_trend_runs < 1:
        raise UsageError(f"max_trend_runs must be >= 1; got {max_trend_runs!r}")
    root, out = Path(artifacts_root).resolve(), Path(out_dir)
    if out.resolve() == root.resolve() or root.resolve() in out.resolve().parents:
        raise OutputFolderError(f"--out {out} must not be inside the artifacts root {root}")
    _check_out(out)
    runs, problems = load_runs(root)
    generated = iso(now or dt.datetime.now(dt.timezone.utc))
    by_bench: dict[str, list[RunRecord]] = {}
    for r in runs:
        by_bench.setdefault(r.benchmark, []).append(r)
    trends = trend_table(runs, methods)
    ckpts = checkpoint_table(trends)

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    pages = 0
    try:
        (tmp / MARKER).write_text("built by benchcert dashboard build\n", encoding="utf-8")
        bench_dir = site_folders(by_bench)
        for bench, bruns in by_bench.items():
            method = choose_method(bruns[-1], methods)
            bdir = inside(tmp, bench_dir[bench])
            bdir.mkdir()
            run_href = {r.run_id: _href(safe_component(r.run_id)) + "/index.html" for r in bruns}
            for run in bruns:
                rdir = inside(bdir, safe_component(run.run_id))
                rdir.mkdir()
                has_report = _copy_inside(root, run.run_dir / "report.html", rdir / "report.html")
                for name in ("summary.json", "manifest.json"):
                    _copy_inside(root, run.run_dir / name, rdir / name)
                (rdir / "index.html").write_text(_run_page(run, method, "index.html", generated, has_report,
                                                           set(run_href)),
                                                 encoding="utf-8")
                pages += 1
            (bdir / "index.html").write_text(
                _bench_page(bench, bruns, trends, ckpts, method, run_href, generated, max_trend_runs),
                encoding="utf-8")
            pages += 1
        (tmp / "index.html").write_text(_index_page(by_bench, bench_dir, problems, root, generated, methods),
                                        encoding="utf-8")
        pages += 1
        with FileLock(str(out.parent / f".{out.name}.lock"), timeout=120):
            _check_out(out)
            old = out.parent / f".{out.name}.old-{uuid.uuid4().hex[:8]}"
            if out.exists():
                os.replace(out, old)
            os.replace(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return SiteReport(out=out, benchmarks=len(by_bench), runs=len(runs), pages=pages, problems=tuple(problems))


# --------------------------------------------------------------------------- serve


class _SiteHandler(SimpleHTTPRequestHandler):
    """GET/HEAD of files inside the site folder only: no listings, no dotfiles, no symlinks out."""

    server_version = "benchcert-dashboard"
    sys_version = ""
    quiet = False
    #: Seconds a connection may sit idle (nothing sent) before it is closed, so half-open or
    #: slow clients cannot hold threads forever.
    timeout = 20.0
    #: Seconds from the start of a request until its headers must all have arrived: the idle
    #: timeout restarts with every byte, so a client trickling one byte at a time is cut here.
    header_deadline = 10.0

    def handle_one_request(self):
        lock = threading.Lock()
        self._headers_read, self._cut = False, False

        def cut() -> None:
            with lock:
                if self._headers_read:
                    return
                self._cut = True  # the headers are still arriving: end the connection
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

        self._cut_lock = lock
        timer = threading.Timer(self.header_deadline, cut)
        timer.daemon = True
        timer.start()
        try:
            super().handle_one_request()
        except OSError:
            # Writing to the connection cut (an error page for the partial request) fails: that
            # was a traceback per cut connection (issue #39), and it is no error of the server's.
            if not self._cut:
                raise
        finally:
            timer.cancel()
        if self._cut:
            self.close_connection = True
            if not self.quiet:
                # The base class's: this class's log_message is silent for a cut request, whose
                # partial request line and error page (never sent) would be logged as answered.
                super().log_message("connection cut: request headers not complete after %g s; no response",
                                    self.header_deadline)

    def parse_request(self):
        # A request cut before its headers are complete is not answered: reading the stream the cut
        # ended would see a complete request and answer it into a closed socket.
        ok = not self._cut and super().parse_request()  # reads the headers
        with self._cut_lock:
            self._headers_read = True
        return ok and not self._cut

    def send_head(self):
        rel = unquote(urlsplit(self.path).path)
        if any(part.startswith(".") for part in rel.split("/") if part) or "\\" in rel or "\x00" in rel:
            self.send_error(404)
            return None
        root = os.path.realpath(self.directory)
        real = os.path.realpath(self.translate_path(self.path))
        if real != root and not real.startswith(root + os.sep):
            self.send_error(404)
            return None
        if os.path.isdir(real) and not os.path.isfile(os.path.join(real, "index.html")):
            self.send_error(404)
            return None
        return super().send_head()

    def list_directory(self, path):
        self.send_error(404)
        return None

    def end_headers(self):
        self.send_header("Content-Security-Policy", SITE_CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("X-Frame-Options", "SAMEORIGIN")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cache-Control", "no-cache")
        super().end_headers()

    def log_message(self, format, *args):
        if not self.quiet and not getattr(self, "_cut", False):
            super().log_message(format, *args)


class _BoundedServer(ThreadingHTTPServer):
    """A threading server that serves at most ``max_connections`` connections at once; a
    connection beyond that is closed at once instead of costing a thread."""

    daemon_threads = True
    max_connections = 64

    def server_activate(self):
        self._slots = threading.BoundedSemaphore(self.max_connections)
        super().server_activate()

    def process_request(self, request, client_address):
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


def make_server(directory: str | os.PathLike, host: str = "127.0.0.1", port: int = 8765, *,
                quiet: bool = False, idle_timeout: float = 20.0, max_connections: int = 64,
                header_deadline: float = 10.0) -> ThreadingHTTPServer:
    """An HTTP server for a built site (call ``serve_forever``); port 0 picks a free port.

    A connection idle for ``idle_timeout`` seconds (no request line, or a request sent too
    slowly) is closed, a request whose line and headers have not all arrived within
    ``header_deadline`` seconds of its start is closed whatever trickles in, and at most
    ``max_connections`` are served at once (more are closed on arrival), so half-open, slow
    or trickling clients cannot pile up threads or hold a slot.

    Raises
    ------
    DashboardError
        When ``directory`` holds no built dashboard (no index.html).
    """
    directory = Path(directory)
    if not (directory / "index.html").is_file():
        raise DashboardError(f"{directory}: no dashboard here (no index.html); build one with "
                             "`benchcert dashboard build --artifacts DIR --out DIR`")
    if not idle_timeout > 0:
        raise ValueError(f"idle_timeout must be > 0; got {idle_timeout!r}")
    if not header_deadline > 0:
        raise ValueError(f"header_deadline must be > 0; got {header_deadline!r}")
    if not max_connections >= 1:
        raise ValueError(f"max_connections must be >= 1; got {max_connections!r}")
    handler = type("Handler", (_SiteHandler,), {"quiet": quiet, "timeout": float(idle_timeout),
                                                  "header_deadline": float(header_deadline)})
    server_cls = type("Server", (_BoundedServer,), {"max_connections": int(max_connections)})
    return server_cls((host, port), lambda *a, **k: handler(*a, directory=str(directory), **k))
