"""Options several commands share, declared once: the store options and the run mode."""

from __future__ import annotations

from pathlib import Path

from benchcert.tasks.store import DEFAULT_LOCK_TIMEOUT


def store_options(sp, db_required: bool = True) -> None:
    """``--db``, ``--lock-timeout`` and ``--json``, as ingest, audit, runs and show take them."""
    sp.add_argument("--db", type=Path, required=db_required, help="DuckDB store file")
    lock_timeout_option(sp)
    sp.add_argument("--json", action="store_true", help="machine-readable output on stdout")


def lock_timeout_option(sp) -> None:
    """``--lock-timeout S``: how long a command waits for another process's lock on the store."""
    sp.add_argument("--lock-timeout", type=float, default=DEFAULT_LOCK_TIMEOUT, metavar="S",
                    help=f"seconds to wait for another benchcert process using the store (default {DEFAULT_LOCK_TIMEOUT:g})")


def run_mode_options(sp) -> None:
    """``--prefect`` / ``--in-process``: run as a Prefect flow run or in this process."""
    g = sp.add_mutually_exclusive_group()
    g.add_argument("--prefect", dest="prefect", action="store_true", default=None,
                   help="run as a Prefect flow run (default when PREFECT_API_URL is set; without it Prefect "
                        "starts a temporary local API, which takes seconds)")
    g.add_argument("--in-process", dest="prefect", action="store_false",
                   help="run in this process even when a Prefect API is configured (default without one)")
