"""The audit flow: read one benchmark once, run every analysis as one task on the whole
matrix, publish the run (artifacts on disk, run catalog in the store, Prefect artifacts)."""

from __future__ import annotations

import datetime as dt
import time

from prefect import flow
from prefect.runtime import flow_run
from prefect.utilities.annotations import quote

import benchcert
from benchcert.tasks import artifacts, changes, results
from benchcert.tasks.analyses import ANALYSES, AuditConfig
from benchcert.tasks.prefect_tasks import (analysis_task, load_matrices_task, notify_task, publish_task,
                                          record_run_task, write_artifacts_task)
from benchcert.tasks.store import DEFAULT_LOCK_TIMEOUT


@flow(name="benchcert-audit", log_prints=False)
def audit_flow(db: str, benchmark: str, artifacts_root: str = "artifacts", alpha: float = 0.05,
               variant: str | None = None, lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
               hierarchy: list[str] | None = None, subject_weights: dict[str, float] | None = None,
               baseline: str | None = None, webhook_url: str | None = None,
               verdicts: list[dict] | None = None, export_dir: str | None = None,
               all_pairs: bool = False) -> dict:
    """Audit one benchmark; returns summary.json's content plus ``run_dir`` and ``timings_s``.

    The summary names what changed since the previous run of the benchmark under the same
    artifacts root; when ``webhook_url`` is set and something regressed, it gets a JSON POST.
    ``verdicts`` are checkpoint verdicts decided before the audit (see flows/checkpoint.py),
    carried into summary.json.

    With ``export_dir`` (a Parquet export of the store, tasks/export.py) the benchmark is read
    from the export and every analysis is submitted to the flow's task runner: run the flow
    ``with_options(task_runner=dask_task_runner(...))`` (tasks/distributed.py) to fan the
    analyses out to Dask workers, which read the export, never the store. Artifacts are the
    same as without it.
    """
    wall = time.perf_counter()
    started = dt.datetime.now(dt.timezone.utc)
    run_id = artifacts.new_run_id(started)
    config = AuditConfig(alpha=alpha, variant=variant,
                         hierarchy=tuple(hierarchy) if hierarchy is not None else ("subject", "domain"),
                         subject_weights=subject_weights, baseline=baseline, db=str(db), all_pairs=all_pairs)
    flow_run_id = str(flow_run.id) if flow_run.id else None
    run_config = {"db": str(db), "benchmark": benchmark, "alpha": alpha, "variant": variant,
                  "artifacts_root": str(artifacts_root), "analyses": list(ANALYSES),
                  "hierarchy": list(config.hierarchy), "subject_weights": subject_weights, "baseline": baseline,
                  "webhook": bool(webhook_url), "all_pairs": all_pairs}
    try:
        if export_dir is None:
            matrices, sources, read_s = load_matrices_task(db, benchmark, variant, lock_timeout)
            outputs = [analysis_task(name, matrices, config) for name in ANALYSES]
        else:
            from benchcert.tasks.distributed import analysis_from_export_task, read_benchmark_export

            matrices, sources, read_s = read_benchmark_export(export_dir, benchmark, variant)
            futures = [analysis_from_export_task.submit(export_dir, benchmark, matrices.variant, name, config)
                       for name in ANALYSES]
            outputs = [f.result() for f in futures]
        start = time.perf_counter()
        summary = results.build_summary(run_id=run_id, created_at=artifacts.iso(started), matrices=matrices,
                                        config=config, outputs=outputs)
        if verdicts:
            summary = summary.model_copy(update={"verdicts": [results.verdict_entry(v) for v in verdicts]})
        summary = summary.model_copy(update={
            "changes": changes.run_changes(summary, changes.previous_summary(artifacts_root, benchmark))})
        tables = results.collect_tables(outputs)
        report_html = results.build_report(summary, outputs, sources=sources)
        collate_s = time.perf_counter() - start
        timings = {"read_store": read_s, **{f"analysis:{o.name}": o.seconds for o in outputs},
                   "collate_and_report": collate_s}
        finished = dt.datetime.now(dt.timezone.utc)
        manifest_fields = {
            "benchcert_version": benchcert.__version__, "run_id": run_id, "flow_run_id": flow_run_id,
            "benchmark": benchmark, "status": "completed", "started_at": artifacts.iso(started),
            "finished_at": artifacts.iso(finished), "config": {**run_config, "variant": matrices.variant},
            "sources": sources.to_dicts(), "timings_s": timings,
        }
        # quote(): large inputs are passed as they are, not walked element by element by Prefect to
        # record task inputs (34 s at 5,000 models; docs/scale.md).
        run_dir, write_s = write_artifacts_task(str(artifacts_root), quote(summary), quote(manifest_fields),
                                                quote(tables), report_html)
        timings["write_artifacts"] = write_s
        timings["record_run"] = record_run_task(
            db, lock_timeout, run_id=run_id, benchmark=benchmark, flow_run_id=flow_run_id, status="completed",
            started_at=started.replace(tzinfo=None), finished_at=finished.replace(tzinfo=None), config=run_config,
            run_dir=str(run_dir), n_models=summary.n_models, n_items=summary.n_items,
            results=quote(results.result_rows(run_id, benchmark, outputs)))
        publish_task(quote(summary), str(run_dir))
        if webhook_url and summary.changes and summary.changes.regressions:
            state = notify_task(webhook_url, quote(summary), str(run_dir), return_state=True)
            if state.is_completed():
                timings["webhook"] = state.result()
    except Exception as exc:
        _record_failure(db, lock_timeout, run_id, benchmark, flow_run_id, started, run_config, exc)
        raise
    timings["flow_wall"] = time.perf_counter() - wall
    work = sum(v for k, v in timings.items() if k != "flow_wall")
    timings["prefect_overhead"] = max(timings["flow_wall"] - work, 0.0)
    return {**summary.model_dump(mode="json"), "run_dir": str(run_dir), "timings_s": timings}


def _record_failure(db, lock_timeout, run_id, benchmark, flow_run_id, started, run_config, exc) -> None:
    """Keep failed runs in the catalog too; never mask the original error."""
    from pathlib import Path

    from benchcert.tasks.prefect_tasks import record_run

    if not Path(db).is_file():
        return
    try:
        record_run(db, lock_timeout, run_id=run_id, benchmark=benchmark, flow_run_id=flow_run_id, status="failed",
                   started_at=started.replace(tzinfo=None),
                   finished_at=dt.datetime.now(dt.timezone.utc).replace(tzinfo=None), config=run_config,
                   error=f"{type(exc).__name__}: {exc}"[:2000])
    except Exception:
        pass
