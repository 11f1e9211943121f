"""The dashboard's run page and benchmark page (trends), in the site's one look (:mod:`site_html`).

Both list models in the one order of every page (:func:`~benchcert.tasks.render.run_records.headline_order`:
the headline's pooled score, best first, ties by name), draw each score's headline interval first, and
show every verdict with its question, gap and interval (:mod:`benchcert.tasks.render.verdict_rows`).
"""

from __future__ import annotations

import math

from benchcert.tasks.artifacts.folders import safe_component
from benchcert.tasks.finite import finite_or_none as _num
from benchcert.tasks.render.charts import fmt_interval as _iv
from benchcert.tasks.render.charts import fmt_percent as _pct
from benchcert.tasks.render.charts import interval_plot_svg
from benchcert.tasks.render.escape import escape
from benchcert.tasks.render.run_records import (RunRecord, checkpoint_key, checkpoint_rows, headline_order,
                                                method_label, score_interval, split_checkpoint, trend_rows)
from benchcert.tasks.render.site_html import DASH, METRIC_COLORS, Html, href, level, link, page, table
from benchcert.tasks.render.trend import trend_svg
from benchcert.tasks.render.verdict_rows import verdicts_table

__all__ = ["models_table", "run_page", "bench_page", "rank_text"]


def rank_text(m) -> str:
    """``"2 [1, 3], group 1"``: the comparisons' rank with its simultaneous interval and tied groups."""
    if m.rank is None:
        return DASH
    iv = f" [{m.rank_lower}, {m.rank_upper}]" if m.rank_lower is not None and m.rank_upper is not None else ""
    groups = (", group " + ", ".join(map(str, m.tied_groups))) if m.tied_groups else ""
    return f"{m.rank}{iv}{groups}"


def models_table(run: RunRecord, method: str | None) -> str:
    lvl = level(run.alpha)
    head = ["model", "checkpoint of", "items", "coverage", "pooled",
            f"pooled {lvl} ({method_label(run, method, 'pooled')})", "macro",
            f"macro {lvl} ({method_label(run, method)})", "rank [interval], tied group"]
    rows = []
    for m in headline_order(run.models):
        fam, ck = split_checkpoint(m.model)
        rows.append([m.model, fam if ck is not None else "", m.n_items, f"{100 * m.coverage:.1f}%",
                     _pct(m.estimates["pooled"]), _iv(*score_interval(m, "pooled", method)),
                     _pct(m.estimates["macro"]), _iv(*score_interval(m, "macro", method)), rank_text(m)])
    return table(head, rows, cls="models", num={2, 3, 4, 5, 6, 7},
                 cell_cls=["model", "family", "items", "coverage", "pooled", "pooled-iv", "macro", "macro-iv", "rank"])


_ARROW = {"down": "\u25bc", "up": "\u25b2"}  # direction by shape too, not by colour alone


def _changes(run: RunRecord, sibling_ids: set[str]) -> list[str]:
    ch = run.changes
    if ch is None:
        return []
    body = ["<h2>Changes since the previous run</h2>"]
    prev = ch.get("previous_run_id")
    if not prev:
        return body + ['<p class="note">First run of this benchmark.</p>']
    # Link only to a run the site has (a skipped run has no page).
    prev_html = link("../" + href(safe_component(prev)) + "/index.html", prev) if prev in sibling_ids else escape(prev)
    body.append(f"<p>Previous run: {prev_html}."
                f" New models: {escape(', '.join(map(str, ch.get('new_models') or [])) or 'none')}."
                f" Removed: {escape(', '.join(map(str, ch.get('removed_models') or [])) or 'none')}.</p>")
    moves = [mv for mv in ch.get("moves") or [] if isinstance(mv, dict)]
    body.append(table(["model", "metric", "direction", "previous", "previous interval", "method", "now"], [
        [mv.get("model"), mv.get("metric"),
         Html(f'<span class="{"bad" if mv.get("direction") == "down" else "good"}">'
              f'{_ARROW.get(mv.get("direction"), "")} {escape(mv.get("direction"))}</span>'),
         _pct(_num(mv.get("previous"))), _iv(_num(mv.get("previous_lower")), _num(mv.get("previous_upper"))),
         mv.get("method"), _pct(_num(mv.get("current")))] for mv in moves], cls="moves", num={3, 4, 6}))
    return body


def run_page(run: RunRecord, method: str | None, bench_href: str, generated: str, has_report: bool,
             sibling_ids: set[str], views: list) -> str:
    """``views``: the run's verdicts as :func:`~benchcert.tasks.render.verdict_rows.verdict_view` makes them (the
    site's data holds them: :func:`~benchcert.tasks.render.site_views.site_data`)."""
    body = [table(["", ""], [  # no header row: a key/value list
        ["benchmark", link(f"../{bench_href}", run.benchmark)], ["run id", run.run_id],
        ["started", run.started_at], ["finished", run.finished_at], ["Prefect flow run", run.flow_run_id or DASH],
        ["variant", repr(run.variant)], ["models", run.n_models], ["items", run.n_items],
        ["subjects", run.n_subjects], ["domains", run.n_domains], ["alpha", f"{run.alpha:g}"],
        ["files", Html(" \u00b7 ".join(link(f, f) for f in (["report.html"] if has_report else [])
                                        + ["summary.json", "manifest.json"]))],
    ], cls="meta")]
    if run.regressions:
        body.append('<p class="bad">\u25bc Regressions: ' + ", ".join(escape(m) for m in run.regressions) + "</p>")
    if run.verdicts:
        body.append("<h2>Verdicts</h2><p class=\"note\">Each checkpoint verdict with the question it answers, the "
                    "gap (candidate \u2212 baseline) and the interval of the test that decides it, as recorded (the "
                    "anytime interval is valid at every look).</p>")
        body.append(verdicts_table(views))
    body.append(f"<h2>Models</h2><p class=\"note\">{level(run.alpha)} intervals, method "
                f"{escape(method_label(run, method) if method else 'none available')}; sorted by the headline's "
                "pooled score (ties by name).</p>")
    body.append(models_table(run, method))
    body += _changes(run, sibling_ids)
    if run.warnings:
        body.append("<h2>Warnings</h2><ul>" + "".join(f"<li>{escape(w)}</li>" for w in run.warnings) + "</ul>")
    body.append("<h2>Sources</h2>")
    body.append(table(["path", "sha256", "format", "rows added", "ingested"], [
        [s.get("path"), s.get("sha256"), s.get("format"), s.get("rows_added"), s.get("ingested_at")]
        for s in run.sources], cls="sources", num={3}))
    body.append("<h2>Tables</h2>")
    body.append(table(["name", "file", "rows", "columns"], [
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
    return page(f"Run {run.run_id}", [("../../index.html", "overview"), (f"../{bench_href}", run.benchmark),
                                      (None, run.run_id)], body, generated, root="../../")


def _nan(v) -> float:
    return math.nan if v is None else v


def _when(timestamp: str) -> str:
    """'2026-11-26T02:00:03.123Z' -> '2026-11-26 02:00' (an x label; tooltips keep the run id)."""
    return timestamp[:16].replace("T", " ")


def _series(rows: list[dict]) -> list[dict]:
    """Trend series (pooled, macro) from trend-table rows holding one point per metric."""
    out = []
    for metric in ("pooled", "macro"):
        rs = [r for r in rows if r["metric"] == metric]
        out.append({"name": metric, "color": METRIC_COLORS[metric],
                    "estimate": [r["estimate"] for r in rs], "lower": [r["lower"] for r in rs],
                    "upper": [r["upper"] for r in rs],
                    "tips": [f"{r['model']} \u00b7 {metric} {_pct(r['estimate'])} {_iv(r['lower'], r['upper'])} "
                             f"\u00b7 run {r['run_id']} ({r['finished_at']})" for r in rs]})
    return out


def _values_table(rows: list[dict], run_links: dict[str, str]) -> str:
    """The numbers behind a trend: one row per (model, run), pooled and macro side by side."""
    by: dict[tuple[str, str], dict] = {}
    for r in rows:
        by.setdefault((r["model"], r["run_id"]), {})[r["metric"]] = r
    out = []
    for (model, run_id), d in by.items():
        mac, poo = d["macro"], d["pooled"]
        out.append([model, link(run_links[run_id], run_id), mac["finished_at"], _pct(poo["estimate"]),
                    _iv(poo["lower"], poo["upper"]), _pct(mac["estimate"]), _iv(mac["lower"], mac["upper"])])
    return table(["model", "run", "finished", "pooled", "pooled interval", "macro", "macro interval"], out,
                 cls="values", num={3, 4, 5, 6}, cell_cls=["model", "run", "finished", "pooled", "pooled-iv",
                                                           "macro", "macro-iv"])


def _latest_chart(bench: str, latest: RunRecord, method: str | None) -> str:
    ordered = headline_order(latest.models)
    if not ordered:
        return ""
    label = method_label(latest, method, "pooled") if method else ""
    return interval_plot_svg([m.model for m in ordered], [
        {"name": f"{metric} \u00b7 {method_label(latest, method, metric) if method else 'no interval'}",
         "color": METRIC_COLORS[metric], "estimate": [m.estimates[metric] for m in ordered],
         "lower": [_nan(score_interval(m, metric, method)[0]) for m in ordered],
         "upper": [_nan(score_interval(m, metric, method)[1]) for m in ordered]}
        for metric in ("pooled", "macro")], title=f"{bench}: latest run, {level(latest.alpha)} {label}",
        x_label="score")


def bench_page(bench: str, runs: list[RunRecord], method: str | None, run_href: dict[str, str], generated: str,
               max_trend_runs: int, verdicts: list) -> str:
    """``runs``: the benchmark's runs, oldest first; ``method``: its interval method (:func:`choose_method` on the
    latest run); ``verdicts``: the latest verdict of each (model, baseline) on this benchmark (VerdictView)."""
    latest = runs[-1]
    lvl = level(latest.alpha)
    body = [f"<p>{len(runs)} run(s); latest {link(run_href[latest.run_id], latest.run_id)} finished "
            f"{escape(latest.finished_at)}: {latest.n_models} models, {latest.n_items} items. Intervals: "
            f"{lvl} <b>{escape(method_label(latest, method) if method else 'none available')}</b>.</p>"]
    if latest.regressions:
        body.append('<p class="bad">\u25bc Regressions in the latest run: '
                    + ", ".join(escape(m) for m in latest.regressions) + "</p>")
    body.append('<h2 id="headline">Headline: latest run</h2>')
    body.append(_latest_chart(bench, latest, method))
    body.append(models_table(latest, method))
    body += _item_health(next((r for r in reversed(runs) if r.item_analysis), None), run_href)
    if verdicts:
        body.append('<h2 id="verdicts">Checkpoint verdicts</h2><p class="note">The latest recorded verdict of each '
                    "candidate and baseline on this benchmark.</p>" + verdicts_table(verdicts))
    t = trend_rows(runs, method)
    c = checkpoint_rows(t)
    if c:
        body.append('<h2 id="checkpoints">Checkpoints</h2><p class="note">Each checkpoint\'s scores from the latest '
                    "run that includes it, in checkpoint order.</p>")
        for fam in dict.fromkeys(r["family"] for r in c):
            rows = [r for r in c if r["family"] == fam]
            labels = [r["checkpoint"] or r["model"] for r in rows if r["metric"] == "macro"]
            body.append(f'<section class="family"><h3>{escape(fam)}</h3>')
            body.append(trend_svg(labels, _series(rows), title=f"{fam} across checkpoints"))
            body.append(_values_table(rows, run_href) + "</section>")
    body += _across_runs(runs, t, run_href, max_trend_runs)
    body.append('<h2>All runs</h2>')
    body.append(table(["run", "finished", "models", "items", "regressions"], [
        [link(run_href[r.run_id], r.run_id), r.finished_at, r.n_models, r.n_items,
         ", ".join(r.regressions) or DASH] for r in reversed(runs)], cls="runs", num={2, 3}))
    return page(bench, [("../index.html", "overview"), (None, bench)], body, generated, root="../")


def _item_health(run: RunRecord | None, run_href: dict[str, str]) -> list[str]:
    """The item-health summary of the latest run with an item analysis (audit --items; docs/analyses.md)."""
    if run is None:
        return []
    ia = run.item_analysis

    def num(key):
        v = ia.get(key)
        return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    def count(key, of=None):
        n, total = num(key), num(of) if of else None
        return DASH if n is None else f"{n:,.0f}" + (f" of {total:,.0f}" if total else "")

    rel, lo, hi = num("reliability"), num("reliability_lower"), num("reliability_upper")
    res = num("resolution_median")
    rows = [["items", count("n_items")], ["inert items (every model alike)", count("n_inert", "n_items")],
            ["suspected broken keys" + (f" (FDR {num('fdr'):g})" if num("fdr") is not None else ""),
             count("n_broken_key", "n_tested_broken_key")],
            ["negative discrimination", count("n_negative_discrimination", "n_items")],
            ["reliability (KR-20 / Cronbach)", DASH if rel is None else
             f"{rel:.3f}" + (f" [{lo:.3f}, {hi:.3f}]" if lo is not None and hi is not None else "")],
            ["resolution (median smallest detectable gap)", DASH if res is None else f"{100 * res:.2f} pp"]]
    return [f'<h2 id="item-health">Item health</h2><p class="note">From run {link(run_href[run.run_id], run.run_id)} '
            "(audit --items); every item is in that run's report.</p>", table(["", ""], rows, cls="item-health meta")]


def _across_runs(runs: list[RunRecord], t: list[dict], run_href: dict[str, str], max_trend_runs: int) -> list[str]:
    body = ['<h2 id="runs">Across runs</h2>']
    all_ids = [r.run_id for r in runs]
    shown_ids = all_ids[-max_trend_runs:]
    if len(shown_ids) < len(all_ids):
        body.append(f'<p class="note">Charts show the last {len(shown_ids)} of {len(all_ids)} runs.</p>')
    if len(all_ids) == 1:
        body.append('<p class="note">One run so far: trends are drawn from the second run on.</p>')
    shown = set(shown_ids)
    # one pass: each model's rows (a filter per model was most of the page at 200 runs x 200 checkpoints)
    by_model: dict[str, list[dict]] = {}
    for r in sorted(t, key=lambda r: (r["run_order"], r["metric"])):
        by_model.setdefault(r["model"], []).append(r)
    families: dict[str, list[str]] = {}
    for model in by_model:
        families.setdefault(split_checkpoint(model)[0], []).append(model)
    for fam in sorted(families):
        body.append(f'<section class="family"><h3>{escape(fam)}</h3>')
        for model in sorted(families[fam], key=lambda m: checkpoint_key(split_checkpoint(m)[1])):
            runs_of = {r["run_id"] for r in by_model[model]}
            if split_checkpoint(model)[1] is not None and len(runs_of) == 1:
                continue  # a checkpoint in one run: its numbers are in the Checkpoints section above
            rows = [r for r in by_model[model] if r["run_id"] in shown]
            when = [_when(r["finished_at"]) for r in rows if r["metric"] == "macro"]
            charted = len(when) >= 2  # a single point is no trend; its numbers are shown open instead
            if charted:
                body.append(trend_svg(when, _series(rows), title=model))
            body.append(("<details>" if charted else "<details open>") + "<summary>numbers for " + escape(model)
                        + "</summary>" + _values_table(rows, run_href) + "</details>")
        body.append("</section>")
    return body

