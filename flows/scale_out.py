"""Scale-out of one audit on Dask: the audit flow with a DaskTaskRunner, reading a Parquet export.

``benchcert audit --dask-address URL | --dask-workers N [--export DIR] [--dask-block-models N]``:
the store's benchmark is exported to Parquet (tasks/store/export.py) and the audit flow runs with
a DaskTaskRunner (tasks/audit/distributed.py) whose workers read the export, never the DuckDB file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from benchcert.tasks.audit.request import AuditRequest


@dataclass(frozen=True)
class ScaleOut:
    """Where an audit's analyses run.

    Attributes
    ----------
    address : str or None
        A running Dask scheduler (tcp://HOST:PORT).
    workers : int or None
        Processes of a local Dask cluster started for the audit.
    export : Path or None
        Where the store is exported for the workers (default ARTIFACTS/.export).
    block_models : int or None
        Models per block of the per-model and pairwise work sent to the workers.
    """

    address: str | None = None
    workers: int | None = None
    export: Path | None = None
    block_models: int | None = None

    @property
    def asked(self) -> bool:
        """Any scale-out option given (the audit then runs as a Prefect flow run)."""
        return bool(self.address) or self.workers is not None or bool(self.export) or self.block_models is not None


def dask_audit(options: ScaleOut, request: AuditRequest, audit_flow):
    """The audit flow and the request to run it with.

    Without a cluster (no address or workers) both are returned unchanged; else the options are
    checked, the request's benchmark is exported to Parquet, and the flow gets a DaskTaskRunner and
    the request the export folder and block size.

    Raises
    ------
    ValueError
        Options that make no scale-out (an export or block size without a cluster, a block size
        below 2, a bad address or worker count), before anything is exported.
    """
    if not options.address and options.workers is None:
        if options.export or (options.block_models is not None and not request.out_of_core):
            raise ValueError("--export and --dask-block-models are for the Dask workers (or --out-of-core); give "
                             "--dask-address or --dask-workers with them")
        return audit_flow, request
    from benchcert.tasks.audit.distributed import dask_task_runner, model_blocks
    from benchcert.tasks.store.export import export_parquet

    runner = dask_task_runner(address=options.address, workers=options.workers)  # validates the options first
    if options.block_models is not None:
        model_blocks(1, options.block_models)  # validates it (ValueError: an integer >= 2)
    export = options.export or (Path(request.artifacts_root) / ".export")
    export_parquet(request.db, export, benchmarks=[request.benchmark], lock_timeout=request.lock_timeout)
    return (audit_flow.with_options(task_runner=runner),
            request.model_copy(update={"export_dir": str(export), "dask_block_models": options.block_models}))
