"""The two deployments benchcert serves: a nightly schedule and a checkpoint trigger."""

from __future__ import annotations

from dataclasses import dataclass

from prefect.client.schemas.schedules import CronSchedule
from prefect.events.schemas.deployment_triggers import DeploymentEventTrigger

from benchcert.flows.checkpoint import CHECKPOINT_EVENT, checkpoint_deployment_flow
from benchcert.flows.nightly import nightly_flow

NIGHTLY = "nightly-audit"
CHECKPOINT = "checkpoint-audit"


@dataclass(frozen=True)
class ServeOptions:
    """What ``benchcert serve`` serves: the store, inbox and artifacts, the nightly schedule, the
    checkpoint verdict's baseline, and the options both deployments pass to their audits."""

    db: str
    inbox: str
    artifacts_root: str
    cron: str = "0 2 * * *"
    timezone: str = "UTC"
    baseline: str | None = None
    webhook_url: str | None = None
    alpha: float = 0.05
    dashboard_dir: str | None = None
    allowed_logs: tuple[str, ...] = ()
    dask_address: str | None = None
    dask_workers: int | None = None
    processes: int | None = None


def build_deployments(options: ServeOptions) -> list:
    """RunnerDeployments for ``prefect.serve``: paths are made absolute so runs find them."""
    from pathlib import Path

    o = options
    cron, timezone, baseline, webhook_url, alpha = o.cron, o.timezone, o.baseline, o.webhook_url, o.alpha
    dask_address, dask_workers = o.dask_address, o.dask_workers
    db, inbox, artifacts_root = (str(Path(p).resolve()) for p in (o.db, o.inbox, o.artifacts_root))
    dashboard_dir = str(Path(o.dashboard_dir).resolve()) if o.dashboard_dir else None
    allowed_logs = [str(Path(p).resolve()) for p in o.allowed_logs or ()]
    nightly = nightly_flow.to_deployment(
        name=NIGHTLY,
        schedule=CronSchedule(cron=cron, timezone=timezone),
        parameters={"inbox": inbox, "db": db, "artifacts_root": artifacts_root, "alpha": alpha,
                    "webhook_url": webhook_url, "dashboard_dir": dashboard_dir,
                    # the nightly audits on a Dask cluster (tasks/audit/distributed.py), only when asked
                    **({"dask_address": dask_address} if dask_address else {}),
                    **({"dask_workers": dask_workers} if dask_workers else {}),
                    # the nightly's benchmarks on a pool of worker processes (flows/nightly.py), only when asked
                    **({"processes": o.processes} if o.processes else {})},
        description=f"Ingest new logs from {inbox} and audit changed benchmarks ({cron}, {timezone}).",
        tags=["benchcert"],
    )
    trigger = DeploymentEventTrigger(
        name="benchcert checkpoint logged",
        expect={CHECKPOINT_EVENT},
        match={"prefect.resource.id": "*"},
        parameters={"model": "{{ event.resource.id }}", "benchmark": "{{ event.payload.benchmark }}",
                    "logs": "{{ event.payload.logs }}", "question": "{{ event.payload.question }}",
                    # an event from a notify-checkpoint without --suite (or an older one) has no "suite"
                    "suite": "{{ event.payload.suite | default('') }}", "db": db, "artifacts_root": artifacts_root,
                    "baseline": baseline, "alpha": alpha, "webhook_url": webhook_url, "inbox": inbox,
                    "dashboard_dir": dashboard_dir, "allowed_logs": allowed_logs},
    )
    checkpoint = checkpoint_deployment_flow.to_deployment(
        name=CHECKPOINT,
        triggers=[trigger],
        parameters={"db": db, "artifacts_root": artifacts_root, "baseline": baseline, "alpha": alpha,
                    "webhook_url": webhook_url, "inbox": inbox, "dashboard_dir": dashboard_dir,
                    "allowed_logs": allowed_logs},
        description=f"Audit a checkpoint when '{CHECKPOINT_EVENT}' arrives; verdict vs baseline {baseline!r}.",
        tags=["benchcert"],
    )
    return [nightly, checkpoint]
