"""The checkpoint audit: a new checkpoint's logs arrive -> ingest, audit, verdict vs the baseline.

Started by the Prefect event ``benchcert.checkpoint.logged`` (resource id = the model id,
payload = benchmark and log location), which ``benchcert notify-checkpoint`` emits.
"""

from __future__ import annotations

import logging
from pathlib import Path

from prefect import flow

from benchcert.flows.audit import audit_flow
from benchcert.tasks.ingest.mapping import ColumnMapping
from benchcert.flows.serve_log import announced
from benchcert.flows.steps import ingest_files_task, rebuild_dashboard_task, verdict_task
from benchcert.tasks.audit.request import AuditRequest, CheckpointRequest
from benchcert.tasks.store.connection import DEFAULT_LOCK_TIMEOUT, open_store
from benchcert.tasks.store.matrices import response_count
from benchcert.tasks.errors import DataError

CHECKPOINT_EVENT = "benchcert.checkpoint.logged"


def model_rows(db: str, benchmark: str, model: str, lock_timeout: float) -> int:
    """How many responses of ``model`` for ``benchmark`` the store holds (0: the logs had none)."""
    with open_store(db, write=False, lock_timeout=lock_timeout) as con:
        return response_count(con, benchmark, model)


class LogsPathRefused(DataError):
    """A checkpoint event named logs outside the inbox and the allowed folders (or reached through a
    symlink loop): the event's input cannot be used, and nothing at that path is read."""


def allowed_logs_path(logs: str, inbox: str | None, allowed: list[str] | None) -> Path:
    """The event's logs path, resolved (symlinks and '..' followed), if it lies inside the inbox or an
    allowed folder; otherwise :class:`LogsPathRefused`, raised before anything at that path is read.

    The event comes from whoever can reach the Prefect server, so its path is untrusted: without
    this check a served flow would read, and echo in its errors, any file the server can read.
    """
    roots = [Path(r).resolve() for r in ([inbox] if inbox else []) + list(allowed or ())]
    text = str(logs)
    # A NUL byte (or any path the OS cannot name) is refused like a path outside the roots.
    target = None if "\x00" in text else _resolved(Path(text))
    if target is None or not any(target == r or r in target.parents for r in roots):
        where = ", ".join(str(r) for r in roots) or "none configured"
        logging.getLogger("benchcert.checkpoint").warning(
            "checkpoint logs path refused (outside the inbox and the allowed folders): %r", str(logs)[:500])
        raise LogsPathRefused(f"checkpoint logs path {str(logs)[:500]!r} refused: it is not inside the inbox or an "
                              f"allowed folder ({where}); nothing was read. Put the logs in the inbox or start "
                              "`benchcert serve` with --allow-logs DIR")
    return target


def _resolved(path: Path) -> Path:
    """``path`` with its symlinks followed; a symlink loop on the way is :class:`LogsPathRefused`.

    ``Path.resolve`` raises RuntimeError on a loop (Python 3.11), which ended the flow with a
    traceback instead of the refusal (issue #39).
    """
    from benchcert.tasks.ingest.adapters.detect import link_target

    try:
        return path.resolve()
    except (RuntimeError, OSError):
        pass
    problem = "a symlink loop along the path"
    for part in [*reversed(path.parents), path]:  # the first link on the way that leads nowhere
        if part.is_symlink() and (found := link_target(part)[1]) is not None:
            where = "" if part == path else f" ({part} is {found.removesuffix('; not read')})"
            problem = found.removesuffix("; not read") if part == path else f"a symlink loop along the path{where}"
            break
    logging.getLogger("benchcert.checkpoint").warning("checkpoint logs path refused (%s): %r", problem,
                                                      str(path)[:500])
    raise LogsPathRefused(f"checkpoint logs path {str(path)[:500]!r} refused: it is {problem}; nothing was read. "
                          "Give the logs' real location")


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
                               allowed_logs: list[str] | None = None, question: str = "items") -> dict:
    """:func:`checkpoint_flow` with flat parameters, as the ``checkpoint-audit`` deployment serves it.

    Flat because the deployment's trigger fills single parameters from the event (model, benchmark,
    logs) and Prefect merges a run's parameters into the deployment's one name deep: with one
    nested request, ``prefect deployment run --param`` or the trigger would have to restate it
    whole.  It runs :func:`checkpoint_flow`'s body in this flow run (not as a subflow).  ``question``
    comes from the event (``notify-checkpoint --question``); an event without one asks "items".
    The serve log gets a line when the run starts, and when it finishes (run id and verdict) or fails
    (the error): :mod:`benchcert.flows.serve_log`.
    """
    with announced("benchcert-checkpoint", benchmark=benchmark, model=model) as outcome:
        result = _checkpoint_request_flow(model, benchmark, logs, db, artifacts_root, baseline, alpha, mapping,
                                          webhook_url, lock_timeout, inbox, dashboard_dir, allowed_logs, question)
        verdict = result.get("verdict") or {}
        outcome.update(run_id=result.get("run_id"), baseline=baseline,
                       verdict=verdict.get("verdict") or "none (no baseline)",
                       gap=None if verdict.get("gap") is None else f"{100 * verdict['gap']:+.2f} pp")
    return result


def _checkpoint_request_flow(model, benchmark, logs, db, artifacts_root, baseline, alpha, mapping, webhook_url,
                             lock_timeout, inbox, dashboard_dir, allowed_logs, question) -> dict:
    request = CheckpointRequest(
        model=model, logs=logs, mapping=mapping, inbox=inbox, dashboard_dir=dashboard_dir, allowed_logs=allowed_logs,
        question=question or "items",
        audit=AuditRequest(db=db, benchmark=benchmark, artifacts_root=artifacts_root, alpha=alpha,
                           baseline=baseline, webhook_url=webhook_url, lock_timeout=lock_timeout))
    return checkpoint_flow.fn(request)
