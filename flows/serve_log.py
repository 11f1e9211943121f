"""The served stack speaks: one line on stdout per deployment flow run started, finished or failed.

``benchcert serve`` runs each flow run in a child process whose output it streams to its own log
(Prefect's runner), so a line printed here is a line of the serve log::

    benchcert serve: started checkpoint-audit flow_run=... benchmark="mmlu" model="org/m@step-2000"
    benchcert serve: finished checkpoint-audit flow_run=... benchmark="mmlu" model="org/m@step-2000" run_id="..." verdict="inconclusive"
    benchcert serve: failed checkpoint-audit flow_run=... benchmark="mmlu" model="org/m@step-2000" error="..."

Every value comes from a log or an event, so it is written as a JSON string (quotes, backslashes,
newlines and control characters escaped): a model name cannot forge a second line.
"""

from __future__ import annotations

import contextlib
import json
import sys
from typing import Iterator

__all__ = ["serve_line", "announced"]

#: Characters of an error message kept in its line.
MAX_ERROR_CHARS = 500


def _flow_run_id() -> str:
    try:
        from prefect.runtime import flow_run

        return str(flow_run.id or "-")
    except Exception:  # noqa: BLE001 - outside a flow run (a direct call): no id, still a line
        return "-"


def serve_line(event: str, deployment: str, **fields) -> str:
    """Print (and return) one serve-log line: ``event`` (started, finished, failed), the deployment, the
    Prefect flow run id, then ``fields`` as ``key="value"`` (None fields left out)."""
    parts = [f"benchcert serve: {event} {deployment} flow_run={_flow_run_id()}"]
    parts += [f"{k}={json.dumps(str(v), ensure_ascii=True)}" for k, v in fields.items() if v is not None]
    line = " ".join(parts)
    print(line, file=sys.stdout, flush=True)
    return line


@contextlib.contextmanager
def announced(deployment: str, **fields) -> Iterator[dict]:
    """A started line now, then a finished line (with what the body put in the yielded dict: ``run_id``,
    ``verdict``, ...) or a failed line with the error, which is raised on."""
    serve_line("started", deployment, **fields)
    outcome: dict = {}
    try:
        yield outcome
    except BaseException as exc:
        serve_line("failed", deployment, **fields,
                   error=f"{type(exc).__name__}: {exc}"[:MAX_ERROR_CHARS])
        raise
    serve_line("finished", deployment, **fields, **outcome)
