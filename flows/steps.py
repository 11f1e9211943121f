"""The Prefect tasks: thin wrappers around the plain steps of tasks/audit/steps.py (test those directly).

They sit beside the flows that run them: Prefect is the flows' concern, and nothing in tasks/
imports it (tasks/audit/distributed.py's Dask fan-out aside).  Retries only on I/O (reading the
store, writing artifacts, recording the run), and only when the failure may pass
(:func:`~benchcert.tasks.audit.steps.is_transient`): an unknown benchmark or a bad file fails the
same way every time.  A retry of an analysis would recompute the same numbers.  No task caches
its inputs: they are whole matrices, and hashing them would cost more than the work.

Imported only when a Prefect API is configured (flows/runs.py decides).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.utilities.annotations import quote

from benchcert.tasks.audit.steps import (analysis, artifact_key, ingest_many, is_transient, notify, read_benchmark,
                                         rebuild_dashboard, record_run, verdict, write_run_artifacts)

if TYPE_CHECKING:  # an audit does not import the ingest code (its adapters: 0.05-0.15 s)
    from benchcert.tasks.ingest.service import FileReport
    from benchcert.tasks.ingest.mapping import ColumnMapping

__all__ = ["analysis_task", "artifact_key", "ingest_files_task", "load_matrices_task", "notify_task",
           "in_task_steps", "publish_prefect_artifacts", "publish_task",
           "read_benchmark", "rebuild_dashboard_task", "record_run", "record_run_task", "verdict_task",
           "write_artifacts_task", "write_run_artifacts"]


def _transient(task, task_run, state) -> bool:
    exc = state.data
    return not isinstance(exc, BaseException) or is_transient(exc)


@task(name="ingest-files", cache_policy=NO_CACHE)
def ingest_files_task(db: str, paths: list[str], benchmark: str | None, mapping: ColumnMapping,
                      allow_rejects: bool, lock_timeout: float, atomic: bool = False) -> list[FileReport]:
    """Every file of the command in one task (the store opened once; small files stored together;
    ``atomic``: all in one transaction, stored or none).

    No retries: a rejected or conflicting file fails the same way every time.
    """
    return ingest_many(db, paths, benchmark, mapping, allow_rejects, lock_timeout, atomic)


load_matrices_task = task(name="load-matrices", retries=2, retry_delay_seconds=2, retry_condition_fn=_transient,
                          cache_policy=NO_CACHE)(read_benchmark)
analysis_task = task(name="analysis", cache_policy=NO_CACHE)(analysis)
write_artifacts_task = task(name="write-artifacts", retries=2, retry_delay_seconds=1, retry_condition_fn=_transient,
                            cache_policy=NO_CACHE)(write_run_artifacts)
record_run_task = task(name="record-run", retries=2, retry_delay_seconds=2, retry_condition_fn=_transient,
                       cache_policy=NO_CACHE)(record_run)


def publish_prefect_artifacts(summary, run_dir: str) -> None:
    """The run's Prefect artifacts: its per-model table and its summary in Markdown, keyed by benchmark
    (linked to the task or flow run that creates them)."""
    from prefect.artifacts import create_markdown_artifact, create_table_artifact

    from benchcert.tasks.audit import results

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


publish_task = task(name="publish-prefect-artifacts", cache_policy=NO_CACHE)(publish_prefect_artifacts)
# No retries: the webhook's tries are inside its one deadline (tasks/audit/changes.py deliver_webhook).
notify_task = task(name="notify-webhook", cache_policy=NO_CACHE)(notify)
rebuild_dashboard_task = task(name="rebuild-dashboard", retries=1, retry_delay_seconds=2,
                              cache_policy=NO_CACHE)(rebuild_dashboard)
# No retries: a recorded look must not be recorded twice by a retry.
verdict_task = task(name="checkpoint-verdict", cache_policy=NO_CACHE)(verdict)


def prefect_steps():
    """The audit's steps as Prefect tasks (see tasks/audit/steps.py: Steps)."""
    from prefect.runtime import flow_run

    from benchcert.tasks.audit.steps import Steps

    # quote(): large inputs are passed as they are, not walked element by element by Prefect to
    # record task inputs (34 s at 5,000 models; docs/scale.md).
    def notify_step(url, summary, run_dir):
        state = notify_task(url, quote(summary), run_dir, return_state=True)
        return state.result() if state.is_completed() else f"{state.message}"

    def write_step(root, summary, manifest_fields, tables, report_html):
        return write_artifacts_task(root, quote(summary), quote(manifest_fields), quote(tables), report_html)

    def record_step(db, lock_timeout, **fields):
        if "results" in fields:
            fields["results"] = quote(fields["results"])
        return record_run_task(db, lock_timeout, **fields)

    def analyses_step(export_dir, benchmark, variant, names, config, matrices, block_models=None):
        from benchcert.tasks.audit.distributed import analyses_on_cluster

        return analyses_on_cluster(export_dir, benchmark, variant, names, config, matrices, block_models=block_models)

    return Steps(mode="prefect", load_matrices=load_matrices_task, analysis=analysis_task,
                 write_artifacts=write_step, record_run=record_step,
                 publish=lambda summary, run_dir: publish_task(quote(summary), run_dir),
                 notify=notify_step, ingest_files=ingest_files_task,
                 analyses_from_export=analyses_step,
                 flow_run_id=lambda: str(flow_run.id) if flow_run.id else None)


def in_task_steps():
    """The audit's steps as plain calls inside one Prefect task run (the nightly's per-benchmark task,
    flows/nightly.py): the plain steps with their retry policy and no task run of their own; the run
    is a Prefect-mode run of the enclosing flow run (its id in the manifest and the catalog) and
    publishes its Prefect artifacts from that task run, as :func:`prefect_steps`' publish task does.

    Why: each task run costs the flow's process and the Prefect server a run record, its state
    changes as events and its logs; an audit as its own subflow of 15 task runs cost a
    nightly 1.4 CPU s per benchmark beyond the work (1.1 s of it the server's), against 0.56 s
    as one task run (benchmarks/nightly_suite.py, docs/scale.md).
    """
    import dataclasses

    from prefect.runtime import flow_run

    from benchcert.tasks.audit.steps import plain_steps

    return dataclasses.replace(plain_steps(), mode="prefect", publish=publish_prefect_artifacts,
                               flow_run_id=lambda: str(flow_run.id) if flow_run.id else None)
