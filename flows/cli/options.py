"""What several commands share, declared once: how a command is registered, the store options and
the run mode."""

from __future__ import annotations

from pathlib import Path

from benchcert.tasks.store import DEFAULT_LOCK_TIMEOUT


def command(sub, name: str, handler, *, help: str, **kwargs):
    """Add the command ``name``, run by ``handler``, to the sub-parsers ``sub``; the parser.

    Its ``--help`` description is the handler's docstring (argparse folds the line breaks), so the
    text a user reads and the code's own documentation are one text; ``help`` is its line in the
    parent's list of commands and ``kwargs`` go to ``add_parser`` (``aliases``, ...).
    """
    # Under ``python -OO`` docstrings are stripped: the one-line help then stands as the description.
    sp = sub.add_parser(name, help=help, description=handler.__doc__ or help, **kwargs)
    sp.set_defaults(func=handler)
    return sp


def benchmark_options(sp, db_help: str = "DuckDB store file") -> None:
    """``--db`` and ``--benchmark``, both required: the store and the benchmark a command reads."""
    sp.add_argument("--db", type=Path, required=True, help=db_help)
    sp.add_argument("--benchmark", required=True)


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
