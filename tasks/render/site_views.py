"""The dashboard's views across benchmarks: overview, model pages, training-run pages, the checkpoint grid.

All are built from the runs :func:`~benchcert.tasks.render.run_records.load_runs` read (summary.json and
manifest.json of each run), never from the store:

* **overview** (``index.html``): each benchmark's latest run with its leading model's headline interval,
  the regressions of each benchmark's latest run (against its previous run), the open checkpoint
  verdicts, the benchmarks with no run for ``stale_days`` days, the training runs and the latest runs;
* **model** (``_views/model-<model>.html``, listed in ``_views/models.html``): one model across every benchmark, from
  each benchmark's latest run that has it: headline intervals, rank with its interval and tied group;
* **training run** (``series/<family>.html``): a checkpoint series ``family@step-N``: per benchmark the
  headline pooled score with its interval along the steps (a line with a band), the recorded verdicts
  marked and regressions flagged, and the numbers in a table;
* **checkpoint grid** (``_views/checkpoints.html``): benchmarks (rows) by checkpoints or candidate models
  (columns), each cell the latest verdict against the baseline, coloured and marked by direction, with
  gap and interval in its tooltip and in the text table below; on top, the suite verdicts among the artifacts
  (tasks/artifacts/suites.py): a table of each suite's answers and a row per suite in each grid (:func:`suite_rows`).

Every verdict is shown with its question, gap and interval (:mod:`benchcert.tasks.render.verdict_rows`).
"""

from __future__ import annotations

import datetime as dt
import functools
from dataclasses import dataclass, field

from benchcert.tasks.artifacts.folders import hashed_folder, safe_component
from benchcert.tasks.render.charts import fmt_interval as _iv
from benchcert.tasks.render.charts import fmt_percent as _pct
from benchcert.tasks.render.charts import interval_plot_svg
from benchcert.tasks.render.escape import escape
from benchcert.tasks.render.run_records import (ModelScore, RunRecord, checkpoint_key, choose_method, headline_order,
                                                method_label, score_interval, split_checkpoint)
from benchcert.tasks.render.series_chart import band_svg
from benchcert.tasks.render.site_html import DASH, METRIC_COLORS, Html, href, link, page, table
from benchcert.tasks.render.site_run import rank_text
from benchcert.tasks.render.verdict_rows import SYMBOLS, VerdictView, verdict_badge, verdict_view, verdicts_table

__all__ = ["SiteData", "site_data", "overview_page", "models_index_page", "model_page", "series_page", "grid_page",
           "model_path", "series_path", "suite_rows", "suite_view", "model_runs", "VIEWS", "GRID_PATH", "MODELS_PATH", "LATEST_RUNS_SHOWN"]

#: Runs listed on the overview (every run is on its benchmark's page).
LATEST_RUNS_SHOWN = 30
#: Open (and decided) verdicts listed on the overview, most recent first; every one is on the checkpoint grid's
#: pages and its run's page.  Keeps the overview of 50 benchmarks x 200 runs under 2 MB.
OVERVIEW_VERDICTS = 60
#: Checkpoints per training run shown as grid columns and in the training-run tables (the latest ones; the
#: charts draw every checkpoint).
GRID_CHECKPOINTS = 24


#: The folder of the views across benchmarks.  Its name starts with "_", which no benchmark's folder does (plain
#: names start with a letter or digit, hashed ones with their slug's), so no benchmark can take it.
VIEWS = "_views"
GRID_PATH, MODELS_PATH = f"{VIEWS}/checkpoints.html", f"{VIEWS}/models.html"


def model_path(model: str) -> str:
    """A model's page, relative to the site root; the file name cannot leave the views folder."""
    return f"{VIEWS}/model-{hashed_folder(model)}.html"


def series_path(family: str) -> str:
    """A training run's page, relative to the site root."""
    return f"{VIEWS}/series-{hashed_folder(family)}.html"


@dataclass(frozen=True)
class SiteData:
    """What the cross-benchmark views read, computed once per build."""

    by_bench: dict[str, list[RunRecord]]
    bench_dir: dict[str, str]
    methods: tuple
    verdicts: dict[str, list[VerdictView]]  # benchmark -> latest verdict per (model, baseline)
    verdict_runs: dict[tuple[str, str, str], RunRecord]  # (benchmark, model, baseline) -> run that recorded it
    families: dict[str, list[str]]  # checkpoint family -> its members (any benchmark), in step order
    generated: str
    now: dt.datetime
    stale_days: int
    problems: list[str] = field(default_factory=list)
    suites: list[dict] = field(default_factory=list)  # suite verdict documents (tasks/artifacts/suites.py)
    #: id(run) -> the run's verdicts as verdict_view made them here (its page shows them again)
    run_views: dict[int, list[VerdictView]] = field(default_factory=dict)

    @functools.cached_property
    def model_verdicts(self) -> dict[str, dict[str, list[VerdictView]]]:
        """model -> benchmark -> its verdicts there as candidate or baseline (in :attr:`verdicts`' order): each
        model page's rows without scanning every verdict of every benchmark."""
        out: dict[str, dict[str, list[VerdictView]]] = {}
        for bench, views in self.verdicts.items():
            for v in views:
                for m in {v.model, v.baseline}:
                    out.setdefault(m, {}).setdefault(bench, []).append(v)
        return out

    def bench_href(self, bench: str) -> str:
        return href(self.bench_dir[bench]) + "/index.html"

    def run_href(self, run: RunRecord) -> str:
        return href(self.bench_dir[run.benchmark], safe_component(run.run_id)) + "/index.html"

    @functools.cached_property
    def _bench_methods(self) -> dict[str, str | None]:
        # once per benchmark: the model and training-run pages ask for it once per (model, benchmark)
        return {bench: choose_method(runs[-1], self.methods) for bench, runs in self.by_bench.items()}

    def method(self, bench: str):
        return self._bench_methods[bench]


def site_data(by_bench: dict[str, list[RunRecord]], bench_dir: dict[str, str], methods, generated: str,
              now: dt.datetime, stale_days: int, problems: list[str], suites: list[dict] | None = None) -> SiteData:
    verdicts: dict[str, dict[tuple[str, str], VerdictView]] = {}
    runs_of: dict[tuple[str, str, str], RunRecord] = {}
    run_views: dict[int, list[VerdictView]] = {}
    members: dict[str, set[str]] = {}
    for bench, runs in by_bench.items():
        for run in runs:  # oldest first: a later look replaces an earlier one
            views = run_views[id(run)] = [verdict_view(v, bench) for v in run.verdicts]
            for view in views:
                verdicts.setdefault(bench, {})[(view.model, view.baseline)] = view
                runs_of[(bench, view.model, view.baseline)] = run
            for m in run.models:
                if m.checkpoint is not None:
                    members.setdefault(m.family, set()).add(m.model)
    families = {fam: sorted(ms, key=lambda m: checkpoint_key(split_checkpoint(m)[1])) for fam, ms in members.items()}
    return SiteData(by_bench=by_bench, bench_dir=bench_dir, methods=tuple(methods),
                    verdicts={b: list(d.values()) for b, d in verdicts.items()}, verdict_runs=runs_of,
                    families=dict(sorted(families.items())), generated=generated, now=now, stale_days=stale_days,
                    problems=problems, suites=list(suites or []), run_views=run_views)


def _age_days(finished_at: str, now: dt.datetime) -> float | None:
    try:
        t = dt.datetime.fromisoformat(finished_at.replace("Z", "+00:00"))
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.timezone.utc)
    return (now - t).total_seconds() / 86400


def _headline_cells(m: ModelScore, method) -> list:
    return [_pct(m.estimates["pooled"]), _iv(*score_interval(m, "pooled", method))]


# --------------------------------------------------------------------------- overview


def _recent_first(d: SiteData, views: list[VerdictView]) -> list[VerdictView]:
    """Verdicts by the time of the run that recorded them, newest first (ties by benchmark and model)."""
    def key(v):
        run = d.verdict_runs[(v.benchmark, v.model, v.baseline)]
        return (run.finished_at, v.benchmark, v.model)

    return sorted(views, key=key, reverse=True)


def _shown_note(n: int, cap: int) -> str:
    return "" if n <= cap else (f"; the latest {cap} of {n} are listed, every one is on the "
                                f'<a href="{GRID_PATH}">checkpoint grid</a>')


def _regression_rows(d: SiteData) -> list[list]:
    """The regressions of each benchmark's latest run against its previous run: score moves down, and
    regressed verdicts (those are in the verdict rows, with their numbers)."""
    rows = []
    for bench, runs in sorted(d.by_bench.items()):
        last = runs[-1]
        for mv in (last.changes or {}).get("moves") or []:
            if isinstance(mv, dict) and mv.get("direction") == "down":
                prev = (mv.get("previous_lower"), mv.get("previous_upper"))
                rows.append([link(d.bench_href(bench), bench), mv.get("model"), mv.get("metric"),
                             _pct(mv.get("previous")), _iv(*prev), _pct(mv.get("current")),
                             link(d.run_href(last), last.run_id)])
    return rows


def _cards(d: SiteData, open_n: int, regressed_n: int, stale_n: int) -> str:
    n_runs = sum(len(r) for r in d.by_bench.values())
    cards = [("benchmarks", len(d.by_bench)), ("runs", n_runs), ("regressions in latest runs", regressed_n),
             ("open checkpoint verdicts", open_n), (f"stale (no run for {d.stale_days} days)", stale_n),
             ("training runs", len(d.families))]
    return '<div class="cards">' + "".join(f'<div class="card"><b>{n}</b>{escape(t)}</div>' for t, n in cards) + "</div>"


def overview_page(d: SiteData, artifacts_root) -> str:
    bench_rows, stale = [], []
    for bench, runs in sorted(d.by_bench.items()):
        last, method = runs[-1], d.method(bench)
        top = headline_order(last.models)[:1]
        age = _age_days(last.finished_at, d.now)
        if age is not None and age > d.stale_days:
            stale.append([link(d.bench_href(bench), bench), last.finished_at, f"{age:.0f}"])
        bench_rows.append([link(d.bench_href(bench), bench), len(runs), link(d.run_href(last), last.run_id),
                           last.finished_at, DASH if age is None else f"{age:.1f}", last.n_models, last.n_items,
                           *(([top[0].model, *_headline_cells(top[0], method)]) if top else [DASH, DASH, DASH]),
                           method_label(last, method, "pooled") if method else DASH,
                           ", ".join(last.regressions) or DASH])
    views = _recent_first(d, [v for b in sorted(d.verdicts) for v in d.verdicts[b]])
    open_views = [v for v in views if v.is_open]
    regressions = _regression_rows(d)
    links = {b: d.bench_href(b) for b in d.by_bench}
    body = [f'<p class="note">Built from the artifacts at {escape(artifacts_root)}.</p>',
            _cards(d, len(open_views), sum(bool(r[-1].regressions) for r in d.by_bench.values()), len(stale)),
            '<h2 id="benchmarks">Benchmarks</h2><p class="note">Each benchmark\'s latest run; the leading model by '
            "the headline's pooled score with its headline interval.</p>",
            table(["benchmark", "runs", "latest run", "finished", "age (days)", "models", "items", "leading model",
                   "pooled", "pooled interval", "interval (question)", "regressions"], bench_rows, cls="benchmarks",
                  num={1, 4, 5, 6, 8, 9},
                  cell_cls=["benchmark", "runs", "run", "finished", "age", "models", "items", "leader", "pooled",
                            "pooled-iv", "question", "regressions"]),
            '<h2 id="regressions">Regressions since the previous run</h2><p class="note">Scores of each benchmark\'s '
            "latest run that fell below the previous run's interval; regressed checkpoint verdicts are in the verdict "
            "rows below.</p>",
            table(["benchmark", "model", "metric", "previous", "previous interval", "now", "run"], regressions,
                  cls="regressions", num={3, 4, 5}),
            '<h2 id="open-verdicts">Open checkpoint verdicts</h2><p class="note">Inconclusive verdicts (the latest look '
            "of each question), most recent first, with what would resolve them where the artifact says"
            + _shown_note(len(open_views), OVERVIEW_VERDICTS) + ".</p>",
            verdicts_table(open_views[:OVERVIEW_VERDICTS], cls="verdicts open-verdicts", with_benchmark=True,
                           links=links)]
    decided = [v for v in views if not v.is_open]
    if decided:
        body += ['<h2 id="decided-verdicts">Decided checkpoint verdicts</h2><p class="note">Most recent first'
                 + _shown_note(len(decided), OVERVIEW_VERDICTS) + ".</p>",
                 verdicts_table(decided[:OVERVIEW_VERDICTS], cls="verdicts decided-verdicts", with_benchmark=True,
                                links=links)]
    body += [f'<h2 id="stale">Stale benchmarks</h2><p class="note">No run for more than {d.stale_days} days '
             f"(at {escape(d.generated)}).</p>",
             table(["benchmark", "last run finished", "days"], stale, cls="stale", num={2})]
    body += _training_runs_list(d)
    body += _latest_runs(d)
    if d.problems:
        body.append("<h2>Skipped</h2><ul class=\"problems\">"
                    + "".join(f"<li>{escape(p)}</li>" for p in d.problems) + "</ul>")
    return page("benchcert dashboard", [(None, "overview")], body, d.generated)


def _training_runs_list(d: SiteData) -> list[str]:
    rows = []
    for fam, members in d.families.items():
        benches = [b for b, rs in d.by_bench.items() if any(m.family == fam for m in rs[-1].models)]
        rows.append([link(series_path(fam), fam), len(members),
                     ", ".join(split_checkpoint(m)[1] or m for m in members[-3:]), len(benches)])
    return ['<h2 id="training-runs">Training runs</h2><p class="note">Checkpoint series (<code>model@step-N</code>); '
            f'the <a href="{GRID_PATH}">checkpoint grid</a> shows their verdicts per benchmark.</p>',
            table(["series", "checkpoints", "latest", "benchmarks"], rows, cls="series-list", num={1, 3})]


def _latest_runs(d: SiteData) -> list[str]:
    runs = sorted((r for rs in d.by_bench.values() for r in rs), key=lambda r: (r.finished_at, r.run_id), reverse=True)
    shown = runs[:LATEST_RUNS_SHOWN]
    note = (f'<p class="note">The latest {len(shown)} of {len(runs)} runs; every run is on its benchmark\'s '
            "page.</p>" if len(shown) < len(runs) else "")
    return ["<h2 id=\"runs\">Latest runs</h2>" + note,
            table(["finished", "benchmark", "run", "models", "items", "regressions"], [
                [r.finished_at, link(d.bench_href(r.benchmark), r.benchmark), link(d.run_href(r), r.run_id),
                 r.n_models, r.n_items, ", ".join(r.regressions) or DASH] for r in shown], cls="runs", num={3, 4})]


# --------------------------------------------------------------------------- models


def model_runs(d: SiteData) -> dict[str, dict[str, tuple[RunRecord, ModelScore]]]:
    """model -> benchmark -> (the benchmark's latest run that has it, its scores there)."""
    out: dict[str, dict[str, tuple[RunRecord, ModelScore]]] = {}
    for bench, runs in d.by_bench.items():
        for run in runs:
            for m in run.models:
                out.setdefault(m.model, {})[bench] = (run, m)
    return out


def models_index_page(d: SiteData, per_model: dict) -> str:
    rows = [[link("../" + model_path(m), m), len(b), ", ".join(sorted(b)[:4]) + (" \u2026" if len(b) > 4 else "")]
            for m, b in sorted(per_model.items())]
    return page("Models", [("../index.html", "overview"), (None, "models")],
                ['<p class="note">Every model of every benchmark; each page shows one model across benchmarks.</p>',
                 table(["model", "benchmarks", "some of them"], rows, cls="model-list", num={1})], d.generated, root="../")


def model_page(d: SiteData, model: str, benches: dict[str, tuple[RunRecord, ModelScore]]) -> str:
    rows, labels, series = [], [], {"pooled": ([], [], []), "macro": ([], [], [])}
    for bench in sorted(benches, key=lambda b: (-benches[b][1].estimates["pooled"], b)):
        run, m = benches[bench]
        method = d.method(bench)
        labels.append(bench)
        for metric in ("pooled", "macro"):
            lo, hi = score_interval(m, metric, method)
            est, los, his = series[metric]
            est.append(m.estimates[metric]); los.append(lo); his.append(hi)  # noqa: E702
        latest_note = "" if run is d.by_bench[bench][-1] else " (not in the latest run)"
        rows.append([link("../" + d.bench_href(bench), bench), link("../" + d.run_href(run), run.run_id + latest_note),
                     method_label(run, method, "pooled") if method else DASH, *_headline_cells(m, method),
                     _pct(m.estimates["macro"]), _iv(*score_interval(m, "macro", method)), rank_text(m),
                     f"{run.n_models}"])
    chart = interval_plot_svg(labels, [{"name": f"{metric} \u00b7 headline interval", "color": METRIC_COLORS[metric],
                                        "estimate": e, "lower": [x if x is not None else float("nan") for x in lo],
                                        "upper": [x if x is not None else float("nan") for x in hi]}
                                       for metric, (e, lo, hi) in series.items()],
                              title=f"{model}: headline interval per benchmark", x_label="score")
    body = [f'<p>{len(benches)} benchmark(s), each from its latest run that has this model; sorted by the '
            "headline's pooled score.</p>", chart,
            table(["benchmark", "run", "headline question", "pooled", "pooled interval", "macro", "macro interval",
                   "rank [interval], tied group", "models ranked"], rows, cls="model-benchmarks", num={3, 4, 5, 6, 8},
                  cell_cls=["benchmark", "run", "question", "pooled", "pooled-iv", "macro", "macro-iv", "rank",
                            "n-models"])]
    views = [v for b in sorted(benches) for v in d.model_verdicts.get(model, {}).get(b, [])]
    if views:
        links = {b: "../" + d.bench_href(b) for b in d.by_bench}
        body += ["<h2>Checkpoint verdicts</h2>", verdicts_table(views, with_benchmark=True, links=links)]
    fam, ck = split_checkpoint(model)
    if ck is not None and fam in d.families:
        body.append(f'<p>Part of the training run {link("../" + series_path(fam), fam)}.</p>')
    return page(model, [("../index.html", "overview"), ("../" + MODELS_PATH, "models"), (None, model)], body,
                d.generated, root="../")


# --------------------------------------------------------------------------- training run


def _bench_series(d: SiteData, bench: str, members: list[str]) -> dict | None:
    """This benchmark's points of a checkpoint series: each member from the latest run that has it."""
    found: dict[str, tuple[RunRecord, ModelScore]] = {}
    for run in d.by_bench[bench]:
        for m in run.models:
            if m.model in members:
                found[m.model] = (run, m)
    if not found:
        return None
    method = d.method(bench)
    views = {v.model: v for v in d.verdicts.get(bench, []) if v.model in found}
    pts = []
    for model in members:
        if model not in found:
            continue
        run, m = found[model]
        lo, hi = score_interval(m, "pooled", method)
        view = views.get(model)
        regressed = model in run.regressions or (view is not None and view.direction == "regressed")
        pts.append({"model": model, "step": split_checkpoint(model)[1] or model, "run": run, "est": m.estimates["pooled"],
                    "lo": lo, "hi": hi, "view": view, "regressed": regressed})
    return {"bench": bench, "method": method, "points": pts}


def series_page(d: SiteData, family: str) -> str:
    members = d.families[family]
    body = [f"<p>Checkpoint series <b>{escape(family)}</b>: {len(members)} checkpoint(s). For each benchmark, the "
            "headline's pooled score with its headline interval (band) along the steps, each from the latest run "
            "that has the checkpoint; \u25b2 improved, \u25bc regressed, \u25cb inconclusive mark the recorded "
            "verdict against the baseline, and ! flags a regression.</p>"]
    for bench in sorted(d.by_bench):
        s = _bench_series(d, bench, members)
        if s is None:
            continue
        pts = s["points"]
        labels = [p["step"] for p in pts]
        n_reg = sum(p["regressed"] for p in pts)
        desc = (f"{bench}: pooled score of {family} at {len(pts)} checkpoints, from "
                f"{_pct(pts[0]['est'])} at {labels[0]} to {_pct(pts[-1]['est'])} at {labels[-1]}; "
                f"{sum(p['view'] is not None for p in pts)} recorded verdict(s), {n_reg} regression(s).")
        chart = band_svg(labels, [{
            "name": f"pooled \u00b7 {method_label(pts[-1]['run'], s['method'], 'pooled') if s['method'] else ''}",
            "color": METRIC_COLORS["pooled"], "estimate": [p["est"] for p in pts],
            "lower": [p["lo"] for p in pts], "upper": [p["hi"] for p in pts],
            "marks": [p["view"].direction if p["view"] else None for p in pts],
            "flags": [p["regressed"] for p in pts],
            "tips": [f"{p['model']}: {_pct(p['est'])} {_iv(p['lo'], p['hi'])}"
                     + (f" \u00b7 {p['view'].tooltip()}" if p["view"] else "") for p in pts]}],
            title=f"{bench}: {family} along its checkpoints", desc=desc)
        note = ("" if len(pts) <= GRID_CHECKPOINTS else
                f'<p class="note">The latest {GRID_CHECKPOINTS} of {len(pts)} checkpoints; the chart draws every one, '
                "each point with its numbers as a tooltip.</p>")
        rows = [[p["model"], link(d.run_href(p["run"]), p["run"].run_id), _pct(p["est"]), _iv(p["lo"], p["hi"]),
                 verdict_badge(p["view"]) if p["view"] else DASH, p["view"].gap if p["view"] else DASH,
                 p["view"].interval if p["view"] else DASH, p["view"].question if p["view"] else DASH,
                 Html('<span class="bad">\u25bc regression</span>') if p["regressed"] else DASH]
                for p in pts[-GRID_CHECKPOINTS:]]
        body += [f'<section class="series-bench"><h2>{link("../" + d.bench_href(bench), bench)}</h2>',
                 chart, note,
                 table(["checkpoint", "run", "pooled", "headline interval", "verdict", "gap", "interval", "question",
                        "regression"], [[link("../" + model_path(r[0]), r[0]), *[_rel(x) for x in r[1:]]]
                                         for r in rows], cls="series-points", num={2, 3},
                       cell_cls=["model", "run", "pooled", "pooled-iv", "verdict", "gap", "iv", "question", "flag"]),
                 "</section>"]
    return page(f"Training run {family}", [("../index.html", "overview"), (None, family)], body, d.generated,
                root="../")


def _rel(cell):
    """A run link made on the site root, moved one folder down (series/ and models/ pages)."""
    if isinstance(cell, Html) and cell.startswith('<a href="'):
        return Html(cell.replace('<a href="', '<a href="../', 1))
    return cell


# --------------------------------------------------------------------------- checkpoint grid


def suite_view(doc: dict) -> VerdictView | None:
    """The suite score's verdict of one suite document (``compare --suite --json``, tasks/artifacts/suites.py) as a
    verdict row: its gap, interval and verdict as the document records them (answer (c): the weighted mean of the
    benchmarks' item-weighted gaps, so its question is the items question whatever the rows asked); None when the
    document has no suite score (some benchmark had no standard error)."""
    score = doc.get("score")
    if not isinstance(score, dict):
        return None
    look = doc.get("look")
    detail = {"gap": score.get("gap"), "lower": score.get("lower"), "upper": score.get("upper"),
              "question_key": "items", "method": score.get("method") or "suite score", "mde": score.get("mde"),
              "alpha": score.get("alpha", doc.get("alpha")), "more_items": score.get("more_items"), "look": look,
              "decided_by": None if score.get("verdict") == "inconclusive" else "suite_score"}
    view = verdict_view({"kind": "suite", "model": doc["candidate"], "baseline": doc["baseline"],
                         "verdict": score.get("verdict"), "detail": detail}, f"suite {doc['suite']['name']}")
    return view if view.complete else None


def suite_rows(d: SiteData, columns: list[str]) -> list[list]:
    """The suite verdicts above a grid's benchmarks: one row per (suite, baseline) that judged some column's
    checkpoint, a cell per column (its suite-score verdict, or None)."""
    rows: dict[tuple[str, str], dict[str, VerdictView]] = {}
    for doc in d.suites:
        view = suite_view(doc)
        if view is not None and doc["candidate"] in columns:
            rows.setdefault((doc["suite"]["name"], doc["baseline"]), {})[doc["candidate"]] = view
    return [[f"suite {name} (vs {base})", *(cells.get(c) for c in columns)] for (name, base), cells in rows.items()]


def _suite_table(d: SiteData) -> list[str]:
    """Every suite verdict with its three answers, each number as the document records it."""
    rows = []
    for doc in d.suites:
        view = suite_view(doc)
        named = "; ".join(f"{word}: {', '.join(map(str, doc.get(word) or []))}" for word in ("improved", "regressed")
                          if doc.get(word))
        rows.append([doc["suite"]["name"], doc["candidate"], doc["baseline"],
                     "YES" if doc.get("regressed_somewhere") else "no", named or "none",
                     view.question if view else DASH, view.gap if view else DASH,
                     view.interval if view else DASH, verdict_badge(view) if view else "no suite score",
                     view.decided_by if view else DASH, view.resolve if view else DASH])
    return ['<h2 id="suites">Suite verdicts</h2><p class="note">The latest look of each suite checkpoint '
            "(benchcert notify-checkpoint --suite); what each answer guarantees, as its verdict records it, "
            "follows the table.</p>",
            table(["suite", "candidate", "baseline", "regressed somewhere", "benchmarks named", "question",
                   "suite score gap", "interval", "verdict", "decided by", "what would resolve it"], rows,
                  cls="verdicts suite-verdicts",
                  cell_cls=["suite", "model", "baseline", "somewhere", "named", "question", "gap", "iv", "verdict",
                            "decided", "resolve"]),
            _suite_guarantees(d)]


def _suite_guarantees(d: SiteData) -> str:
    """Each suite verdict's own guarantee texts (tasks/compare/suite.py writes them with that verdict's alpha and
    whether its looks were recorded), not one text for all."""
    items = []
    for doc in d.suites:
        g = doc.get("guarantees") if isinstance(doc.get("guarantees"), dict) else {}
        parts = "; ".join(f"{label}: {escape(str(g[key]))}" for key, label in
                          (("regressed_somewhere", "regressed somewhere"), ("named", "benchmarks named"),
                           ("score", "suite score")) if g.get(key))
        items.append(f"<li>{escape(str(doc['suite']['name']))}, {escape(str(doc['candidate']))} against "
                     f"{escape(str(doc['baseline']))}: {parts or DASH}</li>")
    return f'<ul class="note suite-guarantees">{"".join(items)}</ul>'


def _cell(view: VerdictView | None) -> Html:
    if view is None:
        return Html('<td class="cell none">\u00b7</td>')
    return Html(f'<td class="cell v-{view.direction}" title="{escape(view.tooltip())}" '
                f'data-verdict="{escape(view.direction)}" data-gap="{escape(view.gap)}" '
                f'data-interval="{escape(view.interval)}">{SYMBOLS[view.direction]} {escape(view.gap)}'
                f'<span class="visually-hidden"> {escape(view.verdict)}, interval {escape(view.interval)}</span></td>')


def _grid(d: SiteData, columns: list[str], caption: str, short) -> str:
    head = "".join(f'<th scope="col" title="{escape(c)}">{escape(short(c))}</th>' for c in columns)
    rows = []
    for label, *cells in suite_rows(d, columns):
        rows.append(f'<tr class="suite"><th scope="row">{escape(label)}</th>{"".join(map(_cell, cells))}</tr>')
    for bench in sorted(d.by_bench):
        views = {v.model: v for v in d.verdicts.get(bench, [])}
        if not any(c in views for c in columns):
            continue
        rows.append(f'<tr><th scope="row">{link("../" + d.bench_href(bench), bench)}</th>'
                    + "".join(_cell(views.get(c)) for c in columns) + "</tr>")
    return (f'<div class="table-wrap"><table class="grid"><caption>{escape(caption)}</caption>'
            f'<thead><tr><th scope="col">benchmark</th>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>')


def grid_page(d: SiteData) -> str:
    candidates = {v.model for vs in d.verdicts.values() for v in vs}
    body = ['<p>Each cell is the latest recorded verdict of a checkpoint (column) against its baseline on a '
            "benchmark (row) with its gap: \u25b2 improved, \u25bc regressed, \u25cb inconclusive, \u00b7 no "
            "verdict; a suite's row on top is its suite score's verdict. Hover a cell for its question and interval; "
            "every number is in the tables.</p>"]
    if d.suites:
        body += _suite_table(d)
    shown: set[str] = set()
    for fam, members in d.families.items():
        cols = [m for m in members if m in candidates]
        if len(cols) > GRID_CHECKPOINTS:
            body.append(f'<p class="note">{escape(fam)}: the latest {GRID_CHECKPOINTS} of {len(cols)} checkpoints '
                        f'with a verdict; the <a href="../{escape(series_path(fam))}">training-run page</a> charts '
                        "every one.</p>")
            cols = cols[-GRID_CHECKPOINTS:]
        shown |= set(cols)
        if cols:
            body += [f'<h2>{link("../" + series_path(fam), fam)}</h2>',
                     _grid(d, cols, f"{fam}: verdict per benchmark and checkpoint",
                           lambda c: split_checkpoint(c)[1] or c)]
    others = sorted(c for c in candidates if split_checkpoint(c)[1] is None)
    shown |= set(others)
    if others:
        body += ["<h2>Other candidates</h2>", _grid(d, others, "verdict per benchmark and candidate", lambda c: c)]
    if not candidates:
        body.append('<p class="note">No checkpoint verdict has been recorded yet (benchcert compare --record, or the '
                    "checkpoint deployment).</p>")
    views = [v for b in sorted(d.verdicts) for v in d.verdicts[b] if v.model in shown]
    body += ['<h2 id="numbers">Every verdict in the grids</h2>',
             verdicts_table(views, cls="verdicts grid-numbers", with_benchmark=True,
                            links={b: "../" + d.bench_href(b) for b in d.by_bench})]
    return page("Checkpoints", [("../index.html", "overview"), (None, "checkpoints")], body, d.generated, root="../")

