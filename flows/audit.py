"""The audit flow: read one benchmark once, run every analysis as one task on the whole
matrix, publish the run (artifacts on disk, run catalog in the store, Prefect artifacts).

The body is :func:`benchcert.flows.runs.audit_body`, shared with the in-process mode the
CLI uses when no Prefect API is configured; here its steps are Prefect tasks.
"""

from __future__ import annotations

from benchcert.flows.runs import audit_body, flow
from benchcert.tasks.audit.prefect_tasks import prefect_steps
from benchcert.tasks.store.connection import DEFAULT_LOCK_TIMEOUT


@flow(name="benchcert-audit", log_prints=False)
def audit_flow(db: str, benchmark: str, artifacts_root: str = "artifacts", alpha: float = 0.05,
               variant: str | None = None, lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
               hierarchy: list[str] | None = None, subject_weights: dict[str, float] | None = None,
               baseline: str | None = None, webhook_url: str | None = None,
               verdicts: list[dict] | None = None, environments: dict | None = None,
               export_dir: str | None = None, all_pairs: bool = False, dask_block_models: int | None = None) -> dict:
    """Audit one benchmark; returns summary.json's content plus ``run_dir``, ``timings_s`` and ``run_mode``.

    The summary names what changed since the previous run of the benchmark under the same
    artifacts root; when ``webhook_url`` is set and something regressed, it gets a JSON POST.
    ``verdicts`` are checkpoint verdicts decided before the audit (see flows/checkpoint.py),
    carried into summary.json.

    With ``export_dir`` (a Parquet export of the store, tasks/store/export.py) the benchmark is read
    from the export and every analysis is submitted to the flow's task runner: run the flow
    ``with_options(task_runner=dask_task_runner(...))`` (tasks/audit/distributed.py) to fan the
    analyses out to Dask workers, which read the export, never the store; the per-model and
    pairwise work goes out in blocks of ``dask_block_models`` models (default
    tasks/distributed.BLOCK_MODELS). Artifacts are the same as without it.
    """
    return audit_body(prefect_steps(), db, benchmark, artifacts_root, alpha, variant, lock_timeout,
                      hierarchy=hierarchy, subject_weights=subject_weights, baseline=baseline,
                      webhook_url=webhook_url, verdicts=verdicts, environments=environments,
                      export_dir=export_dir, all_pairs=all_pairs, dask_block_models=dask_block_models)
