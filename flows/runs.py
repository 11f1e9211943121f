"""How a run is carried out: in this process, or as a Prefect flow run.

A command typed at a terminal should not wait for a Prefect server to start.  So when no
Prefect API is configured, ``benchcert ingest`` and ``benchcert audit`` run the flow bodies
(flows/bodies.py) in-process, calling the plain steps of tasks/audit/steps.py; the run is recorded in the
store's catalog and written as artifacts exactly as under Prefect.  When an API is configured
(``PREFECT_API_URL`` in the environment or the active Prefect profile, as ``benchcert serve``
and ``make serve`` need anyway) or ``--prefect`` is given, the same bodies run inside the
Prefect flows of flows/audit.py and flows/ingest.py with the steps as Prefect tasks, and the
run is also published as Prefect artifacts.

Nothing here imports Prefect at import time.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from benchcert.flows.bodies import audit_body, ingest_body
from benchcert.flows.prefect_flow import prefect_env, short_run_settings
from benchcert.tasks.store import DEFAULT_LOCK_TIMEOUT

if TYPE_CHECKING:  # (imported where used: this module is read by every command, before its work starts)
    from benchcert.tasks.audit.request import AuditRequest

IN_PROCESS, PREFECT = "in_process", "prefect"


def prefect_api_configured() -> str | None:
    """The Prefect API URL set in the environment or the active Prefect profile, else None.

    Read without importing Prefect (its import alone costs seconds): ``PREFECT_API_URL``, then
    ``$PREFECT_HOME/profiles.toml`` (default ``~/.prefect``), profile ``$PREFECT_PROFILE`` or
    the file's ``active`` one.
    """
    url = os.environ.get("PREFECT_API_URL", "").strip()
    if url:
        return url
    import tomllib

    home = Path(os.environ.get("PREFECT_HOME") or Path.home() / ".prefect").expanduser()
    try:
        profiles = tomllib.loads((home / "profiles.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return None
    name = os.environ.get("PREFECT_PROFILE") or profiles.get("active") or "ephemeral"
    value = (profiles.get("profiles", {}).get(name) or {}).get("PREFECT_API_URL")
    return str(value).strip() or None if value else None


def choose_mode(prefect: bool | None = None) -> str:
    """``prefect`` = True (``--prefect``) or False (``--in-process``) decides; None: Prefect when an API is set."""
    if prefect is not None:
        return PREFECT if prefect else IN_PROCESS
    return PREFECT if prefect_api_configured() else IN_PROCESS


# --------------------------------------------------------------------------- entry points


def run_ingest(mode: str, paths: list[str], db: str, benchmark: str | None, mapping, allow_rejects: bool = False,
               lock_timeout: float = DEFAULT_LOCK_TIMEOUT, progress=None, atomic: bool = False) -> list:
    """Ingest ``paths`` in ``mode``; a list of FileReport."""
    if mode == PREFECT:
        prefect_env()
        if progress is not None:
            progress.update(f"ingesting {len(paths)} file(s) as a Prefect flow run")
        from benchcert.flows.ingest import ingest_flow

        with short_run_settings():
            return ingest_flow(paths, db, benchmark, mapping, allow_rejects, lock_timeout, atomic=atomic)
    from benchcert.tasks.audit.steps import plain_steps

    return ingest_body(plain_steps(), paths, db, benchmark, mapping, allow_rejects, lock_timeout, progress=progress,
                       atomic=atomic)


def run_audit(mode: str, request: AuditRequest, progress=None) -> dict:
    """Audit as ``request`` asks, in ``mode``; summary.json's content plus ``run_dir``, ``timings_s`` and ``run_mode``."""
    if mode == PREFECT:
        prefect_env()
        if progress is not None:
            progress.update(f"auditing {request.benchmark} as a Prefect flow run")
        from benchcert.flows.audit import audit_flow

        with short_run_settings():
            return audit_flow(request)
    from benchcert.tasks.audit.steps import plain_steps

    return audit_body(plain_steps(), request, progress=progress)
