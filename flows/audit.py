"""The audit flow: read one benchmark once, run every analysis as one task on the whole
matrix, publish the run (artifacts on disk, run catalog in the store, Prefect artifacts).

The body is :func:`benchcert.flows.bodies.audit_body`, shared with the in-process mode the
CLI uses when no Prefect API is configured; here its steps are Prefect tasks.
"""

from __future__ import annotations

from benchcert.flows.bodies import audit_body
from benchcert.flows.prefect_flow import flow
from benchcert.flows.steps import prefect_steps
from benchcert.tasks.audit.request import AuditRequest


@flow(name="benchcert-audit", log_prints=False)
def audit_flow(request: AuditRequest, verdicts: list[dict] | None = None) -> dict:
    """Audit one benchmark as ``request`` asks; returns summary.json's content plus ``run_dir``,
    ``timings_s`` and ``run_mode``.

    The summary names what changed since the previous run of the benchmark under the same
    artifacts root; when ``request.webhook_url`` is set and something regressed, it gets a JSON
    POST.  ``verdicts`` are checkpoint verdicts decided before the audit (see flows/checkpoint.py),
    carried into summary.json.

    With ``request.export_dir`` (a Parquet export of the store, tasks/store/export.py) the
    benchmark is read from the export and every analysis is submitted to the flow's task runner:
    run the flow ``with_options(task_runner=dask_task_runner(...))`` (tasks/audit/distributed.py)
    to fan the analyses out to Dask workers, which read the export, never the store; the
    per-model and pairwise work goes out in blocks of ``request.dask_block_models`` models
    (default tasks/audit/distributed.BLOCK_MODELS). Artifacts are the same as without it.
    """
    return audit_body(prefect_steps(), request, verdicts=verdicts)
