"""A minimal run summary and manifest, shared by the artifact tests."""

from __future__ import annotations

from benchcert.tasks.schemas import Interval, ModelSummary, ScoreSummary, Summary


def _summary(benchmark: str, run_id: str) -> Summary:
    s = ScoreSummary(estimate=0.5, intervals=[Interval(method="iid_clt", lower=0.4, upper=0.6, half_width=0.1,
                                                       alpha=0.05)])
    return Summary(run_id=run_id, benchmark=benchmark, created_at="2026-11-26T00:00:00Z", alpha=0.05, variant="",
                   n_items=10, n_models=1, n_subjects=1, n_domains=1, analyses=["x"],
                   models=[ModelSummary(model="<m>", n_items=10, coverage=1, n_subjects=1, pooled=s, macro=s)])


def _fields(benchmark, run_id, finished):
    return {"benchcert_version": "0", "run_id": run_id, "flow_run_id": None, "benchmark": benchmark,
            "status": "completed", "started_at": finished, "finished_at": finished, "config": {}, "sources": [],
            "timings_s": {}}


def stage_and_publish(root, *, summary, manifest_fields, tables, report_html):
    """Write one run directory as an audit does; returns it.

    ``steps.write_run_artifacts`` stages the files in a hidden, locked folder and
    ``artifacts.publish_run`` renames it into place and re-indexes (``flows/runs.py`` records
    the run in the catalog between the two; these tests have no catalog).
    """
    from benchcert.tasks.artifacts import runs as artifacts
    from benchcert.tasks.audit import steps

    staged, _seconds = steps.write_run_artifacts(str(root), summary, manifest_fields, tables, report_html)
    return artifacts.publish_run(root, staged)
