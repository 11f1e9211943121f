"""The dashboard draws each score's headline interval (summary.json 1.2) and names its question; a run
from before the headline shows its hierarchical interval in that place (then its headline)."""

from __future__ import annotations

import polars as pl

from benchcert.tasks.render.dashboard import build_site
from benchcert.tasks.render.run_records import choose_method, load_runs, method_label, trend_rows
from benchcert.tasks.schemas import Headline, Interval, ModelSummary, ScoreSummary, Summary

from run_support import stage_and_publish


def _score(e: float, headline: bool) -> ScoreSummary:
    hier = Interval(method="hierarchical", lower=0.0, upper=1.0, half_width=0.6, alpha=0.05)
    head = Headline(method="same_subjects", question="same_subjects", lower=e - 0.02, upper=e + 0.02, half_width=0.02,
                    beside=hier, note="with 3 subjects, generalisation to new subjects cannot be bounded more "
                                      "tightly than ±60 pp") if headline else None
    return ScoreSummary(estimate=e, intervals=[hier], headline=head)


def _publish(root, i: int, headline: bool) -> str:
    run_id = f"2026110{i + 1}T020000000Z-{i:06d}"
    models = [ModelSummary(model=f"m{j}", n_items=100, coverage=1.0, n_subjects=3, macro=_score(0.3 + 0.2 * j, headline),
                           pooled=_score(0.31 + 0.2 * j, headline)) for j in range(3)]
    summary = Summary(run_id=run_id, benchmark="code", created_at=f"2026-11-0{i + 1}T02:00:00Z", alpha=0.05,
                      variant="", n_items=100, n_models=3, n_subjects=3, n_domains=1, analyses=["x"], models=models)
    finished = f"2026-11-0{i + 1}T02:00:00.000Z"
    stage_and_publish(root, summary=summary, manifest_fields={
        "benchcert_version": "0", "run_id": run_id, "flow_run_id": None, "benchmark": "code", "status": "completed",
        "started_at": finished, "finished_at": finished, "config": {}, "sources": [], "timings_s": {}},
        tables={"model_scores": pl.DataFrame({"model": ["m0"]})}, report_html="<!DOCTYPE html><html></html>")
    return run_id


def test_dashboard_draws_the_headline_and_names_its_question(tmp_path):
    arts = tmp_path / "arts"
    _publish(arts, 0, headline=False)
    _publish(arts, 1, headline=True)
    runs, problems = load_runs(arts)
    assert not problems
    latest = runs[-1]
    assert choose_method(latest) == "headline" and choose_method(runs[0]) == "hierarchical"
    assert method_label(latest, "headline") == "headline: these subjects"
    trends = {(r["run_id"], r["model"], r["metric"]): r for r in trend_rows(runs, choose_method(latest))}
    # the latest run's headline; the older run's hierarchical interval (its headline then)
    new = trends[(latest.run_id, "m2", "macro")]
    assert new["lower"] == 0.7 - 0.02 and new["upper"] == 0.7 + 0.02
    old = trends[(runs[0].run_id, "m2", "macro")]
    assert (old["lower"], old["upper"]) == (0.0, 1.0)
    out = tmp_path / "site"
    build_site(arts, out)
    bench = (out / "code" / "index.html").read_text()
    assert "macro 95% (headline: these subjects)" in bench
    assert "[68.00, 72.00]" in bench
    index = (out / "index.html").read_text()  # the overview: the leader's headline and its question
    assert "headline: these subjects" in index and "[69.00, 73.00]" in index
