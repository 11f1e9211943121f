"""The flow bodies: an ingest and an audit as a sequence of steps, the same code in both run modes.

``steps`` is a :class:`~benchcert.tasks.audit.steps.Steps`: plain functions in this process
(flows/runs.py, without a Prefect API) or Prefect tasks (flows/steps.py, inside the flows of
flows/ingest.py and flows/audit.py).  Nothing here imports Prefect.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from benchcert.tasks.store import DEFAULT_LOCK_TIMEOUT

if TYPE_CHECKING:  # (imported where used: this module is read by every command, before its work starts)
    from benchcert.tasks.audit.request import AuditRequest


def ingest_body(steps, paths: list[str], db: str, benchmark: str | None, mapping, allow_rejects: bool = False,
                lock_timeout: float = DEFAULT_LOCK_TIMEOUT, progress=None, atomic: bool = False) -> list:
    """One step for the files, taken in the order given (they may depend on each other), each
    all-or-nothing; the store is opened once and small table files are stored together
    (tasks/ingest/many.py).

    ``atomic``: every file in one transaction, all stored or none (one step).
    """
    from benchcert.tasks import progress as hook

    if atomic:
        if progress is not None:
            progress.update(f"ingesting {len(paths)} file(s) in one transaction")
        return steps.ingest_files(db, [str(p) for p in paths], benchmark, mapping, allow_rejects, lock_timeout,
                                  True)

    with hook.listening(progress.update if progress is not None else None):
        return steps.ingest_files(db, [str(p) for p in paths], benchmark, mapping, allow_rejects, lock_timeout)


def audit_body(steps, request: AuditRequest, verdicts: list[dict] | None = None, progress=None) -> dict:
    """Audit one benchmark; returns summary.json's content plus ``run_dir``, ``timings_s`` and ``run_mode``.

    The summary names what changed since the previous run of the benchmark under the same
    artifacts root; when ``request.webhook_url`` is set and something regressed, it gets a JSON
    POST.  ``verdicts`` are checkpoint verdicts decided before the audit (see flows/checkpoint.py),
    carried into summary.json.

    With ``request.export_dir`` (a Parquet export of the store, tasks/store/export.py) the benchmark
    is read from the export and the analyses go through ``steps.analyses_from_export``: Prefect
    tasks submitted to the flow's task runner (a DaskTaskRunner fans them out to workers, which
    read the export, never the store; tasks/audit/distributed.py), the per-model and pairwise work
    in blocks of ``request.dask_block_models`` models. Artifacts are the same as without it.
    """
    from benchcert.tasks.artifacts import runs as artifacts

    def say(text: str) -> None:
        if progress is not None:
            progress.update(text)

    if request.webhook_url:
        from benchcert.tasks.audit import changes as _changes

        _changes.check_webhook_url(request.webhook_url)  # before any work: a URL benchcert will not call
    # The analyses are imported before the clock starts: importing is not the run's work, and on
    # a thread beside the store's read it would only move that cost into the read's timing (the
    # GIL), not save it.
    _import_analyses()
    wall = time.perf_counter()
    started = dt.datetime.now(dt.timezone.utc)
    run = _Run(artifacts.new_run_id(started), steps.flow_run_id(), started, request.run_config())
    published = False
    webhook = None
    try:
        matrices, sources, read_s = _read_benchmark(steps, request, say)
        config = request.audit_config()
        outputs, cluster_s = _run_analyses(steps, request, matrices, config, run.config, say)
        say("writing the report")
        start = time.perf_counter()
        collated = _collate(request, run, matrices, config, outputs, sources, verdicts)
        summary = collated[0]
        timings = {"read_store": read_s, **{f"analysis:{o.name}": o.seconds for o in outputs},
                   "collate_and_report": time.perf_counter() - start}
        if cluster_s is not None:
            # On the task runner the analyses overlap (and the blocked ones count their queueing):
            # the run's work is the wall of the whole step, the per-analysis seconds are for reading.
            timings["analyses_on_cluster"] = cluster_s
        run_dir = _record_and_publish(steps, request, run, collated, outputs, matrices.variant, sources, timings)
        published = True
        if steps.publish is not None:
            steps.publish(summary, str(run_dir))
        if request.webhook_url and summary.changes and summary.changes.regressions:
            webhook = _notify(steps, request.webhook_url, summary, run_dir, timings)
    except Exception as exc:
        if not published:  # a published run is recorded as completed and stays so
            _record_failure(request.db, request.lock_timeout, run.run_id, request.benchmark, run.flow_run_id,
                            run.started, run.config, exc)
        raise
    timings["flow_wall"] = time.perf_counter() - wall
    work = sum(v for k, v in timings.items() if k != "flow_wall"
               and not (request.export_dir is not None and k.startswith("analysis:")))
    # The run's own overhead: Prefect's task and flow bookkeeping, or ~0 in-process.
    timings["prefect_overhead"] = max(timings["flow_wall"] - work, 0.0)
    return {**summary.model_dump(mode="json"), "run_dir": str(run_dir), "timings_s": timings,
            "run_mode": steps.mode, "webhook": webhook}


@dataclass(frozen=True)
class _Run:
    """One audit run as the catalog and the manifest name it."""

    run_id: str
    flow_run_id: str | None
    started: dt.datetime
    config: dict  # the request's run config; the analyses' names are added once they are known


def _read_benchmark(steps, request: AuditRequest, say):
    """(matrices, sources, seconds): the benchmark read from the store, or from the export on Dask."""
    export_dir = request.export_dir
    if export_dir is not None and steps.analyses_from_export is None:
        raise ValueError("export_dir is for the Dask path, which runs as a Prefect flow (--prefect)")
    if export_dir is None or request.out_of_core:
        # Out of core the flow reads the store by blocks itself, on Dask too: the workers read
        # the export; the flow never holds the matrix.
        say("reading the store")
        return steps.load_matrices(request.db, request.benchmark, request.variant, request.lock_timeout,
                                   out_of_core=request.out_of_core, block_models=request.dask_block_models)
    from benchcert.tasks.audit.steps import read_benchmark

    say("reading the export")
    return read_benchmark(None, request.benchmark, request.variant, request.lock_timeout, export_dir=export_dir)


def _run_analyses(steps, request: AuditRequest, matrices, config, run_config: dict, say):
    """(outputs, seconds on the task runner or None): every registered analysis, one step each, or all
    of them on the task runner from the export. ``run_config`` gets the analyses' names."""
    from benchcert.tasks.audit.analyses import ANALYSES

    run_config.update(analyses=list(ANALYSES))
    if request.export_dir is not None:
        say(f"{len(ANALYSES)} analyses on the task runner")
        start = time.perf_counter()
        outputs = steps.analyses_from_export(request.export_dir, request.benchmark, matrices.variant, list(ANALYSES),
                                             config, matrices, block_models=request.dask_block_models)
        return outputs, time.perf_counter() - start
    outputs = []
    for i, name in enumerate(ANALYSES):
        say(f"analysis {i + 1}/{len(ANALYSES)}: {name}")
        outputs.append(steps.analysis(name, matrices, config))
    return outputs, None


def _collate(request: AuditRequest, run: _Run, matrices, config, outputs, sources, verdicts: list[dict] | None):
    """(summary, tables, report html): the outputs collated, with the checkpoint verdicts decided before
    the audit and what changed since the benchmark's previous run under the same artifacts root."""
    from benchcert.tasks.artifacts import runs as artifacts
    from benchcert.tasks.audit import changes
    from benchcert.tasks.audit import results

    summary = results.build_summary(run_id=run.run_id, created_at=artifacts.iso(run.started), matrices=matrices,
                                    config=config, outputs=outputs)
    if verdicts:
        summary = summary.model_copy(update={"verdicts": [results.verdict_entry(v) for v in verdicts]})
    summary = summary.model_copy(update={
        "changes": changes.run_changes(summary, changes.previous_summary(request.artifacts_root, request.benchmark))})
    return summary, results.collect_tables(outputs), results.build_report(summary, outputs, sources=sources)


def _record_and_publish(steps, request: AuditRequest, run: _Run, collated: tuple, outputs, variant: str, sources,
                        timings: dict) -> Path:
    """Write the staged run, record it in the store's catalog, then publish it; returns the run directory.

    Record, then publish: the run directory appears (and index.json lists it) only after the
    catalog row is committed, so no reader ever sees a run the catalog does not know. ``timings``
    gets ``write_artifacts`` and ``record_run``.
    """
    import benchcert
    from benchcert.tasks.artifacts import runs as artifacts
    from benchcert.tasks.audit import results

    summary, tables, report_html = collated
    artifacts_root, benchmark = request.artifacts_root, request.benchmark
    finished = dt.datetime.now(dt.timezone.utc)
    manifest_fields = {
        "benchcert_version": benchcert.__version__, "run_id": run.run_id, "flow_run_id": run.flow_run_id,
        "run_mode": steps.mode,
        "benchmark": benchmark, "status": "completed", "started_at": artifacts.iso(run.started),
        "finished_at": artifacts.iso(finished), "config": {**run.config, "variant": variant},
        "sources": sources.to_dicts(), "timings_s": timings,
    }
    staged, write_s = steps.write_artifacts(str(artifacts_root), summary, manifest_fields, tables, report_html)
    run_dir = artifacts.run_dir_of(artifacts_root, benchmark, run.run_id)
    timings["write_artifacts"] = write_s
    try:
        timings["record_run"] = steps.record_run(
            request.db, request.lock_timeout, artifacts_root=str(artifacts_root), run_id=run.run_id,
            benchmark=benchmark, flow_run_id=run.flow_run_id, status="completed",
            started_at=run.started.replace(tzinfo=None), finished_at=finished.replace(tzinfo=None), config=run.config,
            run_dir=str(run_dir), n_models=summary.n_models, n_items=summary.n_items,
            results=results.result_rows(run.run_id, benchmark, outputs))
        return artifacts.publish_run(artifacts_root, staged)
    except Exception:  # (an interrupt leaves the staged run to the next audit's recovery)
        artifacts.discard_run(staged)  # and a half-published one: the failure is recorded below
        artifacts.unpublish_run(artifacts_root, run_dir)
        raise


def _notify(steps, webhook_url: str, summary, run_dir, timings: dict) -> str:
    """POST the regressions to the webhook; returns what the summary's caller is told (``webhook``)."""
    outcome = steps.notify(webhook_url, summary, str(run_dir))
    if isinstance(outcome, float):
        timings["webhook"] = outcome
        return "delivered"
    return f"failed: {outcome}"


def _import_analyses() -> None:
    import importlib

    try:
        for name in ("benchcert.tasks.audit.analyses", "benchcert.tasks.audit.results", "benchcert.tasks.perturbation.service"):
            importlib.import_module(name)
        importlib.import_module("benchcert.tasks.audit.analyses").ANALYSES  # imports every analysis module
    except Exception:  # imported again where used, which reports any error itself
        pass


def _record_failure(db, lock_timeout, run_id, benchmark, flow_run_id, started, run_config, exc) -> None:
    """Keep failed runs in the catalog too; never mask the original error."""
    from benchcert.tasks.audit.steps import record_run

    if not Path(db).is_file():
        return
    try:
        record_run(db, lock_timeout, run_id=run_id, benchmark=benchmark, flow_run_id=flow_run_id, status="failed",
                   started_at=started.replace(tzinfo=None),
                   finished_at=dt.datetime.now(dt.timezone.utc).replace(tzinfo=None), config=run_config,
                   error=f"{type(exc).__name__}: {exc}"[:2000])
    except Exception:
        pass
