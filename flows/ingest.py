"""The ingest flow: one task for the files, taken in the order given (they may depend on each other).

The body is :func:`benchcert.flows.bodies.ingest_body`, shared with the in-process mode.
"""

from __future__ import annotations

from benchcert.flows.bodies import ingest_body
from benchcert.flows.prefect_flow import flow
from benchcert.tasks.ingest.service import FileReport
from benchcert.tasks.ingest.mapping import ColumnMapping
from benchcert.flows.steps import prefect_steps
from benchcert.tasks.store.connection import DEFAULT_LOCK_TIMEOUT


@flow(name="benchcert-ingest", log_prints=False, validate_parameters=False)
def ingest_flow(paths: list[str], db: str, benchmark: str | None, mapping: ColumnMapping,
                allow_rejects: bool = False, lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
                atomic: bool = False) -> list[FileReport]:
    """Ingest log files into the store; each file is all-or-nothing unless allow_rejects.

    ``atomic``: every file in one transaction, all stored or none (one task).
    """
    return ingest_body(prefect_steps(), paths, db, benchmark, mapping, allow_rejects, lock_timeout, atomic=atomic)
