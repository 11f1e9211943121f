"""How the command line reports a failure: one line on stderr and a documented exit code.

Exit codes (flows/cli.py): 0 success; 1 the data or the run failed (unknown benchmark, variant
or model, rejected or conflicting file); 2 usage error (bad option value, bad mapping);
3 the store is locked or unusable; 4 a CI gate failed (``compare --fail-on``).

``--debug`` anywhere on the command line, or ``BENCHCERT_DEBUG=1``, lets the traceback through
(and Prefect's own console logging, which is otherwise kept to critical messages; the Prefect
API still receives every log of a flow run).
"""

from __future__ import annotations

import argparse
import os
import sys

EXIT_OK, EXIT_DATA, EXIT_USAGE, EXIT_STORE, EXIT_GATE = 0, 1, 2, 3, 4
DEBUG_FLAG = "--debug"


def debug_requested(argv: list[str]) -> tuple[bool, list[str]]:
    """Whether tracebacks were asked for, and argv without ``--debug`` (it may stand anywhere)."""
    env = os.environ.get("BENCHCERT_DEBUG", "").strip().lower() not in ("", "0", "false", "no")
    rest = [a for a in argv if a != DEBUG_FLAG]
    return env or len(rest) != len(argv), rest


def quiet_prefect_console(debug: bool) -> None:
    """Prefect prints a task's traceback to the console before the flow re-raises it: keep that for --debug."""
    if not debug:
        os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "CRITICAL")


def exit_code(exc: BaseException) -> int:
    """The documented exit code of an error that reached the top of a command."""
    from benchcert.tasks.store import StoreError

    try:
        from benchcert.tasks.mapping import MappingError
    except ImportError:  # pragma: no cover
        MappingError = ()  # type: ignore[assignment]
    if isinstance(exc, StoreError):
        return EXIT_STORE
    if isinstance(exc, MappingError):
        return EXIT_USAGE
    return EXIT_DATA


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 2000 else text[:1997] + "..."


#: Errors that describe the user's input or data; anything else is reported as unexpected.
def is_user_error(exc: BaseException) -> bool:
    from benchcert.tasks.store import StoreError

    return isinstance(exc, (ValueError, LookupError, StoreError, FileNotFoundError, PermissionError,
                            IsADirectoryError, NotADirectoryError))


def report(command: str | None, exc: BaseException) -> int:
    """Print ``exc`` as one line on stderr; return its exit code."""
    prog = f"benchcert {command}" if command else "benchcert"
    if is_user_error(exc):
        print(f"{prog}: {one_line(exc)}", file=sys.stderr)
    else:
        print(f"{prog}: unexpected error: {type(exc).__name__}: {one_line(exc)} "
              f"(run again with {DEBUG_FLAG} for the traceback)", file=sys.stderr)
    return exit_code(exc)


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (the message and where to read more), exit 2."""

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")
