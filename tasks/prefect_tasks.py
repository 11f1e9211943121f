"""The Prefect tasks: thin wrappers around plain functions of tasks/ (test those directly).

Retries only on I/O (reading the store, writing artifacts, recording the run): a retry of
an analysis would recompute the same numbers.  No task caches its inputs: they are whole
matrices, and hashing them would cost more than the work.
"""

from __future__ import annotations

import time
from pathlib import Path

import polars as pl
from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from benchcert.tasks import artifacts, results, store
from benchcert.tasks.analyses import ANALYSES, AnalysisOutput, AuditConfig, run_analysis
from benchcert.tasks.ingest import FileReport, ingest_file, ingest_files_atomic
from benchcert.tasks.mapping import ColumnMapping
from benchcert.tasks.matrices import BenchmarkMatrices, load_matrices, source_refs
from benchcert.tasks.perturbation import with_variant_counts


@task(name="ingest-file", cache_policy=NO_CACHE)
def ingest_file_task(db: str, path: str, benchmark: str | None, mapping: ColumnMapping,
                     allow_rejects: bool, lock_timeout: float) -> FileReport:
    # No retries: a rejected or conflicting file fails the same way every time.
    return ingest_file(db, path, benchmark=benchmark, mapping=mapping, allow_rejects=allow_rejects,
                       lock_timeout=lock_timeout)


@task(name="ingest-files-atomic", cache_policy=NO_CACHE)
def ingest_files_atomic_task(db: str, paths: list[str], benchmark: str | None, mapping: ColumnMapping,
                             allow_rejects: bool, lock_timeout: float) -> list[FileReport]:
    return ingest_files_atomic(db, paths, benchmark=benchmark, mapping=mapping, allow_rejects=allow_rejects,
                               lock_timeout=lock_timeout)


def read_benchmark(db: str, benchmark: str, variant: str | None,
                   lock_timeout: float) -> tuple[BenchmarkMatrices, pl.DataFrame, float]:
    start = time.perf_counter()
    with store.open_store(db, write=False, lock_timeout=lock_timeout) as con:
        # Variant counts ride along only when the benchmark has >= 3 variants (perturbation tests).
        m = with_variant_counts(con, load_matrices(con, benchmark, variant))
        sources = source_refs(con, benchmark)
    # Materialise the derived arrays here so their cost is counted as reading, once.
    _ = (m.scores, m.item_subject, m.subject_domain)
    return m, sources, time.perf_counter() - start


load_matrices_task = task(name="load-matrices", retries=2, retry_delay_seconds=2, cache_policy=NO_CACHE)(read_benchmark)


@task(name="analysis", cache_policy=NO_CACHE)
def analysis_task(name: str, matrices: BenchmarkMatrices, config: AuditConfig) -> AnalysisOutput:
    return run_analysis(name, ANALYSES[name], matrices, config)


def write_run_artifacts(root: str, summary, manifest_fields: dict, tables: dict, report_html: str) -> tuple[Path, float]:
    """Stage the run's files (hidden, locked); the flow publishes them once the run is recorded."""
    start = time.perf_counter()
    staged = artifacts.stage_run(root, summary=summary, manifest_fields=manifest_fields, tables=tables,
                                 report_html=report_html)
    return staged, time.perf_counter() - start


write_artifacts_task = task(name="write-artifacts", retries=2, retry_delay_seconds=1,
                            cache_policy=NO_CACHE)(write_run_artifacts)


def record_run(db: str, lock_timeout: float, artifacts_root: str | None = None, **fields) -> float:
    """Record the run in the catalog; then, under the same lock, finish what a killed audit left
    under ``artifacts_root`` (a staged run it had recorded is published, others are removed)."""
    start = time.perf_counter()
    with store.open_store(db, write=True, lock_timeout=lock_timeout) as con:
        store.record_run(con, **fields)
        if artifacts_root is not None:
            recorded = set(store.list_runs(con).filter(pl.col("status") == "completed")["run_id"].to_list())
            artifacts.recover_stale(artifacts_root, recorded)
    return time.perf_counter() - start


record_run_task = task(name="record-run", retries=2, retry_delay_seconds=2, cache_policy=NO_CACHE)(record_run)


def artifact_key(benchmark: str, what: str) -> str:
    """A stable Prefect artifact key (lowercase letters, digits, dashes) for a benchmark."""
    import hashlib
    import re

    slug = re.sub(r"[^a-z0-9]+", "-", benchmark.lower()).strip("-")[:40] or "benchmark"
    digest = hashlib.sha256(benchmark.encode("utf-8")).hexdigest()[:6]
    return f"benchcert-{slug}-{digest}-{what}"


@task(name="publish-prefect-artifacts", cache_policy=NO_CACHE)
def publish_task(summary, run_dir: str) -> None:
    rows = []
    for m in summary.models:
        iv = {i.method: i for i in m.macro.intervals}
        rows.append({"model": m.model, "n_items": m.n_items, "pooled": round(m.pooled.estimate, 4),
                     "macro": round(m.macro.estimate, 4),
                     **{f"macro_hw_{k}": round(v.half_width, 4) for k, v in iv.items()}})
    create_table_artifact(key=artifact_key(summary.benchmark, "models"), table=rows,
                          description=f"benchcert audit {summary.run_id}: per-model scores and half-widths")
    md = results.summary_markdown(summary, run_dir)
    create_markdown_artifact(key=artifact_key(summary.benchmark, "summary"), markdown=md,
                             description=f"benchcert audit {summary.run_id}")


def notify(url: str, summary, run_dir: str) -> float:
    from benchcert.tasks.changes import notify_webhook

    start = time.perf_counter()
    status = notify_webhook(url, summary, run_dir)
    if status.startswith("webhook failed"):
        raise RuntimeError(status)  # lets Prefect retry; the flow keeps the run if all tries fail
    return time.perf_counter() - start


notify_task = task(name="notify-webhook", retries=2, retry_delay_seconds=5, cache_policy=NO_CACHE)(notify)


def rebuild_dashboard(artifacts_root: str, out_dir: str) -> str:
    from benchcert.tasks.dashboard import build_site

    report = build_site(artifacts_root, out_dir)
    return str(report.out)


rebuild_dashboard_task = task(name="rebuild-dashboard", retries=1, retry_delay_seconds=2,
                              cache_policy=NO_CACHE)(rebuild_dashboard)


def verdict(db: str, benchmark: str, baseline: str, candidate: str, alpha: float, lock_timeout: float) -> dict:
    from benchcert.tasks.verdicts import checkpoint_verdict

    return checkpoint_verdict(db, benchmark, baseline, candidate, alpha=alpha, record=True,
                              lock_timeout=lock_timeout).as_dict()


# No retries: a recorded look must not be recorded twice by a retry.
verdict_task = task(name="checkpoint-verdict", cache_policy=NO_CACHE)(verdict)
