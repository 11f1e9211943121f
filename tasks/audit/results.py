"""Collate analysis outputs into what a run publishes: summary, tables, report, result rows."""

from __future__ import annotations

import polars as pl

from benchcert.tasks.audit.contract import INTERVAL_SCHEMA, AnalysisOutput, AuditConfig
from benchcert.tasks.store.matrices import BenchmarkMatrices
from benchcert.tasks.render.charts import interval_plot_svg
from benchcert.tasks.render.report import render_report
from benchcert.tasks.render.sections import audit as audit_sections, headline as headline_sections
from benchcert.tasks.audit import analyses
from benchcert.tasks.audit.headline import QUESTIONS, RULE
from benchcert.tasks.render.model_order import order_models
from benchcert.tasks.audit.scores import UNSCORED_CONVENTION
from benchcert.tasks.schemas import Headline, Interval, ModelSummary, ScoreSummary, Summary, Verdict

#: Order of interval methods in plots and summaries (later analyses append theirs).
METHOD_ORDER = ["iid_clt", "wilson", "lm_eval_group", "clustered_subject", "hierarchical"]
#: One colour per method in every plot of a report (colour-blind-friendly palette).
METHOD_COLORS = {"iid_clt": "#0072b2", "wilson": "#d55e00", "lm_eval_group": "#cc79a7",
                 "clustered_subject": "#009e73", "hierarchical": "#e69f00",
                 "subsample_theorem_5_2": "#56b4e9", "subsample_exact": "#000000", "subsample_stratified": "#999999"}


#: The headline chart's colours: the dashboard's weighting colours (Okabe-Ito vermillion and blue).
HEADLINE_COLORS = {"pooled": "#d55e00", "macro": "#0072b2"}


def all_intervals(outputs: list[AnalysisOutput]) -> pl.DataFrame:
    frames = [o.intervals.cast(INTERVAL_SCHEMA) for o in outputs if o.intervals is not None and o.intervals.height]
    return pl.concat(frames) if frames else pl.DataFrame(schema=INTERVAL_SCHEMA)


def collect_tables(outputs: list[AnalysisOutput]) -> dict[str, pl.DataFrame]:
    tables: dict[str, pl.DataFrame] = {}
    for o in outputs:
        for name, frame in o.tables.items():
            if name in tables:
                raise ValueError(f"two analyses both write table {name!r}")
            tables[name] = frame
    return tables




def _headline(row: dict | None) -> Headline | None:
    if row is None:
        return None
    beside = None
    if row["method"] == "same_subjects":
        beside = Interval(method="hierarchical", lower=row["new_subjects_lower"], upper=row["new_subjects_upper"],
                          half_width=row["new_subjects_half_width"], alpha=row["alpha"])
    return Headline(method=row["method"], question=row["question"], lower=row["lower"], upper=row["upper"],
                    half_width=row["half_width"], beside=beside, note=row["note"])


def _ranks(tables: dict[str, pl.DataFrame]) -> dict[str, dict]:
    """Rank, simultaneous rank interval and tied groups per model, from the comparisons analysis."""
    ranks = tables.get("comparison_ranks")
    if ranks is None:
        return {}
    return {r["model"]: {"rank": r["rank"], "rank_lower": r["rank_lower"], "rank_upper": r["rank_upper"],
                         "tied_groups": [int(g) for g in (r["groups"] or "").split(",") if g]}
            for r in ranks.iter_rows(named=True)}


def _method_rank(method: str) -> int:
    return METHOD_ORDER.index(method) if method in METHOD_ORDER else len(METHOD_ORDER)


def build_summary(*, run_id: str, created_at: str, matrices: BenchmarkMatrices, config: AuditConfig,
                  outputs: list[AnalysisOutput]) -> Summary:
    tables = collect_tables(outputs)
    scores = tables["model_scores"]
    # One pass over the intervals, grouped by (model, metric) in table order: a filter per model
    # and metric made the summary quadratic in models (15 of 18 s at 5,000 models).
    grouped: dict[tuple[str, str], list[dict]] = {}
    for r in all_intervals(outputs).iter_rows(named=True):
        grouped.setdefault((r["model"], r["metric"]), []).append(r)
    headline = tables.get("headline")
    heads = ({} if headline is None else
             {(r["model"], r["metric"]): r for r in headline.with_columns(pl.lit(config.alpha).alias("alpha"))
              .iter_rows(named=True)})
    ranks = _ranks(tables)
    models = []
    for row in scores.iter_rows(named=True):
        per_metric = {}
        for metric in ("pooled", "macro"):
            rows = sorted(grouped.get((row["model"], metric), []), key=lambda r: _method_rank(r["method"]))
            per_metric[metric] = ScoreSummary(estimate=row[metric], intervals=[
                Interval(method=r["method"], lower=r["lower"], upper=r["upper"], half_width=r["half_width"],
                         alpha=r["alpha"]) for r in rows], headline=_headline(heads.get((row["model"], metric))))
        models.append(ModelSummary(model=row["model"], n_items=row["n_items"], coverage=row["coverage"],
                                   n_subjects=row["n_subjects"], pooled=per_metric["pooled"],
                                   macro=per_metric["macro"], subject_sd=row["subject_sd"],
                                   subject_min=row["subject_min"], subject_max=row["subject_max"],
                                   n_unscored=matrices.n_items - row["n_items"], **ranks.get(row["model"], {})))
    summary = analyses.summary_model()  # Summary, with the fields the registered analyses declare
    return summary(run_id=run_id, benchmark=matrices.benchmark, created_at=created_at, alpha=config.alpha,
                   variant=matrices.variant, n_items=matrices.n_items, n_models=len(matrices.models),
                   n_subjects=matrices.subjects.height, n_domains=len(matrices.domains), models=models,
                   analyses=[o.name for o in outputs],
                   warnings=[w for o in outputs for w in o.warnings],
                   headline_rule=RULE if headline is not None else None, unscored_convention=UNSCORED_CONVENTION,
                   **analyses.summary_fields(tables))


def result_rows(run_id: str, benchmark: str, outputs: list[AnalysisOutput]) -> pl.DataFrame:
    """The run's per-model intervals as rows of the store's run_results table."""
    return all_intervals(outputs).select(
        pl.lit(run_id).alias("run_id"), pl.lit(benchmark).alias("benchmark"), pl.all())


def headline_plot(headline: pl.DataFrame, order: list[str], level: str) -> str:
    """The report's first chart: each model's headline interval of both weightings, the question the headline
    rule chose named in the legend, models in ``order``."""
    series = []
    for metric in ("pooled", "macro"):
        rows = headline.filter(pl.col("metric") == metric)
        if not rows.height:
            continue
        question = rows["question"][0]
        r = pl.DataFrame({"model": order}).join(rows, on="model", how="left", maintain_order="left")
        series.append({"name": f"{metric} \u00b7 headline: {QUESTIONS.get(question, question)}",
                       "color": HEADLINE_COLORS[metric], "estimate": r["estimate"].fill_null(float("nan")).to_list(),
                       "lower": r["lower"].fill_null(float("nan")).to_list(),
                       "upper": r["upper"].fill_null(float("nan")).to_list()})
    return interval_plot_svg(order, series, title=f"Headline interval per model, {level}", x_label="score")


def interval_plot(intervals: pl.DataFrame, metric: str, *, order: list[str], title: str) -> str:
    """Every method's interval of one weighting, models in ``order`` (the report's one order)."""
    rows = intervals.filter(pl.col("metric") == metric)
    present = set(rows["model"].unique().to_list())
    order = [m for m in order if m in present]
    methods = sorted(rows["method"].unique().to_list(), key=lambda m: (_method_rank(m), m))
    series = []
    for method in methods:
        r = (pl.DataFrame({"model": order}).join(rows.filter(pl.col("method") == method), on="model", how="left",
                                                 maintain_order="left"))
        series.append({"name": method, **({"color": METHOD_COLORS[method]} if method in METHOD_COLORS else {}),
                       "estimate": r["estimate"].fill_null(float("nan")).to_list(),
                       "lower": r["lower"].fill_null(float("nan")).to_list(),
                       "upper": r["upper"].fill_null(float("nan")).to_list()})
    return interval_plot_svg(order, series, title=title, x_label=f"{metric} score")


def build_report(summary: Summary, outputs: list[AnalysisOutput], *, sources: pl.DataFrame) -> str:
    intervals = all_intervals(outputs)
    level = f"{100 * (1 - summary.alpha):g}%"
    # One order everywhere: the pooled score, best first, ties by name (tasks/render/model_order.py).
    order = order_models([m.model for m in summary.models], [m.pooled.estimate for m in summary.models])
    headline = next((o.tables["headline"] for o in outputs if "headline" in o.tables), None)
    sections = [audit_sections.intervals_section(
        summary.alpha, None if headline is None else headline_plot(headline, order, level),
        interval_plot(intervals, "macro", order=order, title=f"Macro score, {level} intervals by method"),
        interval_plot(intervals, "pooled", order=order, title=f"Pooled score, {level} intervals by method"))]
    if summary.verdicts:
        sections.append(audit_sections.verdicts_section(summary.benchmark, [v.model_dump() for v in summary.verdicts]))
    if headline is not None:
        sections.append(headline_sections.section(headline, summary.alpha))
    for o in outputs:
        sections.extend(o.sections)
    if summary.warnings:
        sections.append(audit_sections.warnings_section(summary.warnings))
    sections.append(audit_sections.sources_section(sources))
    meta = {"benchmark": summary.benchmark, "run id": summary.run_id,
            "variant": repr(summary.variant), "models": str(summary.n_models), "items": str(summary.n_items),
            "subjects": str(summary.n_subjects), "domains": str(summary.n_domains), "alpha": f"{summary.alpha:g}"}
    return render_report(title=f"benchcert audit: {summary.benchmark}", meta=meta, sections=sections,
                         generated_at=summary.created_at)


def _md(text: str) -> str:
    """Markdown-safe text: no HTML, no table breaks, no emphasis from model names."""
    import html

    return html.escape(text).replace("|", "\\|").replace("*", "\\*").replace("_", "\\_")


def summary_markdown(summary: Summary, run_dir: str) -> str:
    level = f"{100 * (1 - summary.alpha):g}%"
    lines = [f"# benchcert audit: {_md(summary.benchmark)}", "",
             f"Run `{summary.run_id}`: {summary.n_models} models, {summary.n_items} items, "
             f"{summary.n_subjects} subjects, {summary.n_domains} domains. Artifacts: `{_md(run_dir)}`", "",
             f"| model | pooled | macro | macro {level} (clustered) | macro {level} (iid) |", "|---|---|---|---|---|"]
    for m in sorted(summary.models, key=lambda m: -m.macro.estimate):
        iv = {i.method: i for i in m.macro.intervals}
        cl, ii = iv.get("clustered_subject"), iv.get("iid_clt")
        fmt = (lambda i: f"{100 * i.lower:.1f}-{100 * i.upper:.1f}%" if i else "-")
        lines.append(f"| {_md(m.model)} | {100 * m.pooled.estimate:.2f}% | {100 * m.macro.estimate:.2f}% | "
                     f"{fmt(cl)} | {fmt(ii)} |")
    if summary.warnings:
        lines += ["", f"{len(summary.warnings)} warning(s); see the report."]
    return "\n".join(lines) + "\n"


#: The verdict's numbers summary.json carries: the question it answers and its estimand come with the gap and
#: interval, so a page shows them together (tasks/render/verdict_rows.py).
VERDICT_DETAIL = ("look", "decided_by", "fixed_verdict", "gap", "lower", "upper", "p_value", "anytime_p", "mde",
                  "mde_alpha", "n_shared", "n_excluded", "cs_lower", "cs_upper", "alpha", "method", "question_key",
                  "question", "estimand", "more_items", "first_look_share", "first_gap", "first_lower", "first_upper")


def verdict_entry(v: dict) -> Verdict:
    """A checkpoint verdict (tasks/compare/verdicts.py) as summary.json carries it."""
    return Verdict(kind="checkpoint", model=v["candidate"], baseline=v["baseline"], verdict=v["verdict"],
                   detail={k: v.get(k) for k in VERDICT_DETAIL})
