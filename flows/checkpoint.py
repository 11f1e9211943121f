"""The checkpoint audit: a new checkpoint's logs arrive -> ingest, audit, verdict vs the baseline.

Started by the Prefect event ``benchcert.checkpoint.logged`` (resource id = the model id,
payload = benchmark and log location), which ``benchcert notify-checkpoint`` emits.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from benchcert.flows.audit import audit_flow
from benchcert.tasks.ingest.mapping import ColumnMapping
from benchcert.flows.serve_log import announced
from benchcert.flows.steps import ingest_files_task, rebuild_dashboard_task, verdict_task
from benchcert.tasks.audit.request import AuditRequest, CheckpointRequest
from benchcert.tasks.store.connection import DEFAULT_LOCK_TIMEOUT
# re-exported: the logs-path rule and the response count lived here first (tests and callers import them)
from benchcert.flows.checkpoint_logs import LogsPathRefused, allowed_logs_path, model_rows  # noqa: F401

CHECKPOINT_EVENT = "benchcert.checkpoint.logged"


def compare_to_baseline(summary: dict, model: str, baseline: str | None) -> dict:
    """Candidate and baseline scores with their intervals, side by side (the test is the verdict)."""
    by = {m["model"]: m for m in summary["models"]}
    out = {"model": model, "baseline": baseline, "candidate": by.get(model)}
    if baseline is not None:
        out["baseline_scores"] = by.get(baseline)
    return out


@flow(name="benchcert-checkpoint", log_prints=False)
def checkpoint_flow(request: CheckpointRequest) -> dict:
    """Ingest one checkpoint's logs, audit the benchmark, and record the verdict vs the baseline.

    The column mapping is ``request.mapping`` when given, else the benchmark's inbox mapping
    (``<inbox>/<benchmark>/mapping.toml``) when there is one, else the canonical names.
    """
    from benchcert.flows.nightly import MAPPING_FILE, inbox_files
    from benchcert.tasks.ingest.adapters.limits import check_settings
    from benchcert.tasks.ingest.mapping import parse_mapping

    check_settings()  # a limit variable with no usable value: before any file is read, as the CLI does
    model, logs, mapping, inbox = request.model, request.logs, request.mapping, request.inbox
    db, benchmark, baseline = request.audit.db, request.audit.benchmark, request.audit.baseline
    alpha, lock_timeout = request.audit.alpha, request.audit.lock_timeout
    path = allowed_logs_path(logs, inbox, list(request.allowed_logs))
    if path.is_dir():
        files, unknown = inbox_files(path)
    elif path.is_file():
        files, unknown = [str(path)], []
    else:
        raise FileNotFoundError(f"checkpoint logs {logs} not found")
    inbox_map = Path(inbox) / benchmark / MAPPING_FILE if inbox else None
    if mapping:
        colmap = ColumnMapping(columns=dict(mapping))
    elif inbox_map is not None and inbox_map.is_file():
        colmap = parse_mapping(config=inbox_map)
    else:
        colmap = parse_mapping()
    reports = [r.as_dict() for r in ingest_files_task(db, files, benchmark, colmap, False, lock_timeout)]
    reports += unknown
    bad = [r for r in reports if r["status"] not in ("ingested", "unchanged")]
    if bad:
        raise ValueError("checkpoint logs not ingested: " + "; ".join(r["message"] for r in bad))
    if model_rows(db, benchmark, model, lock_timeout) == 0:
        raise ValueError(f"the logs at {logs} hold no responses of model {model!r} for benchmark {benchmark!r}")
    decided = None
    if baseline:
        decided = verdict_task(db, benchmark, baseline, model, alpha, lock_timeout, request.question)
    run = audit_flow(request.audit, verdicts=[decided] if decided else None)
    result = {"model": model, "benchmark": benchmark, "files": reports, "run_id": run["run_id"],
              "run_dir": run["run_dir"], "comparison": compare_to_baseline(run, model, baseline),
              "verdict": decided}
    if request.dashboard_dir:
        result["dashboard"] = rebuild_dashboard_task(request.audit.artifacts_root, request.dashboard_dir)
    return result


@flow(name="benchcert-checkpoint", log_prints=False, validate_parameters=False)
def checkpoint_deployment_flow(model: str, benchmark: str, logs: str, db: str, artifacts_root: str,
                               baseline: str | None = None, alpha: float = 0.05, mapping: dict | None = None,
                               webhook_url: str | None = None, lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
                               inbox: str | None = None, dashboard_dir: str | None = None,
                               allowed_logs: list[str] | None = None, question: str = "items",
                               suite: str | None = None) -> dict:
    """:func:`checkpoint_flow` with flat parameters, as the ``checkpoint-audit`` deployment serves it.

    Flat because the deployment's trigger fills single parameters from the event (model, benchmark,
    logs) and Prefect merges a run's parameters into the deployment's one name deep: with one
    nested request, ``prefect deployment run --param`` or the trigger would have to restate it
    whole.  It runs :func:`checkpoint_flow`'s body in this flow run (not as a subflow).  ``question``
    comes from the event (``notify-checkpoint --question``); an event without one asks "items".
    ``suite`` (``notify-checkpoint --suite``): the logs hold every benchmark of that stored suite, and
    this one flow run ingests and audits them all, records one suite verdict and sends one webhook
    (flows/checkpoint_suite.py); ``benchmark`` is then unused.
    The serve log gets a line when the run starts, and when it finishes (run id and verdict) or fails
    (the error): :mod:`benchcert.flows.serve_log`.
    """
    where = {"suite": suite} if suite else {"benchmark": benchmark}
    with announced("benchcert-checkpoint", **where, model=model) as outcome:
        result = _checkpoint_request_flow(model, benchmark, logs, db, artifacts_root, baseline, alpha, mapping,
                                          webhook_url, lock_timeout, inbox, dashboard_dir, allowed_logs, question,
                                          suite)
        outcome.update(_outcome(result, baseline))
    return result


def _outcome(result: dict, baseline: str | None) -> dict:
    """What the serve log's finished line says: the run id and the verdict with its gap; for a suite, each
    benchmark's run id and the suite answer's one line."""
    if "runs" in result:  # a suite checkpoint (flows/checkpoint_suite.py)
        notice = result.get("suite_verdict") if isinstance(result.get("suite_verdict"), dict) else {}
        return {"run_id": ", ".join(f"{b}:{r}" for b, r in result["runs"].items()), "baseline": baseline,
                "verdict": notice.get("text") or "none (no baseline)"}
    verdict = result.get("verdict") if isinstance(result.get("verdict"), dict) else {}
    return {"run_id": result.get("run_id"), "baseline": baseline, "verdict": verdict.get("verdict") or
            "none (no baseline)", "gap": None if verdict.get("gap") is None else f"{100 * verdict['gap']:+.2f} pp"}


def _checkpoint_request_flow(model, benchmark, logs, db, artifacts_root, baseline, alpha, mapping, webhook_url,
                             lock_timeout, inbox, dashboard_dir, allowed_logs, question, suite) -> dict:
    request = CheckpointRequest(
        model=model, logs=logs, mapping=mapping, inbox=inbox, dashboard_dir=dashboard_dir, allowed_logs=allowed_logs,
        question=question or "items",
        audit=AuditRequest(db=db, benchmark=benchmark or suite or "", artifacts_root=artifacts_root, alpha=alpha,
                           baseline=baseline, webhook_url=webhook_url, lock_timeout=lock_timeout))
    if suite:
        from benchcert.flows.checkpoint_suite import suite_checkpoint_body

        return suite_checkpoint_body(request, suite)
    return checkpoint_flow.fn(request)
