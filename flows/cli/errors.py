"""How the command line reports a failure: one line on stderr and a documented exit code.

Exit codes (flows/cli/__init__.py): 0 success; 1 the data or the run failed (unknown benchmark, variant
or model, rejected or conflicting file); 2 usage error (bad option value, bad mapping, bad
environments file); 3 the store is missing, locked or unusable; 4 a CI gate failed (``compare
--fail-on`` or ``--require``).

A command raises a :class:`~benchcert.tasks.errors.UserError` (or a feature error derived from
one) and returns only its successful codes and the gate's 4; ``main()`` alone turns the error into
its line (:func:`report`) and exit code (:func:`exit_code`).  Any other exception is a bug.

``--debug`` anywhere on the command line, or ``BENCHCERT_DEBUG=1``, lets the traceback through
(and Prefect's own console logging, which is otherwise kept to critical messages; the Prefect
API still receives every log of a flow run).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from benchcert.tasks.errors import UsageError, UserError, is_disk_full, unit_interval_option

#: The one definition of the exit codes; every command module imports them from here.
EXIT_OK, EXIT_DATA, EXIT_USAGE, EXIT_STORE, EXIT_GATE = 0, 1, 2, 3, 4
DEBUG_FLAG = "--debug"
_debug = False  # set by flows/cli/__init__.py main() for the command being run


def _env_debug() -> bool:
    return os.environ.get("BENCHCERT_DEBUG", "").strip().lower() not in ("", "0", "false", "no")


def debug_requested(argv: list[str]) -> tuple[bool, list[str]]:
    """Whether tracebacks were asked for, and argv without ``--debug`` (it may stand anywhere)."""
    rest = [a for a in argv if a != DEBUG_FLAG]
    return _env_debug() or len(rest) != len(argv), rest


def set_debug(on: bool) -> None:
    global _debug
    _debug = bool(on)


def show_traceback(exc: BaseException | None = None) -> None:
    """Under ``--debug`` (or BENCHCERT_DEBUG=1): print the traceback of ``exc`` (default: the
    exception being handled) on stderr, for commands that catch their own errors to report them
    in one line.  The errors it was raised from are printed too, even when a command re-raised
    them ``from None`` to keep the one-line message short."""
    if not (_debug or _env_debug()):
        return
    import traceback

    exc = exc if exc is not None else sys.exc_info()[1]
    chain = []
    while exc is not None and exc not in chain and len(chain) < 10:
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    for e in reversed(chain):
        traceback.print_exception(type(e), e, e.__traceback__, chain=False, file=sys.stderr)


def print_json(obj, *, strict: bool = False, indent: int | None = 2) -> None:
    """``--json`` output: indented (``indent=None``: one line), anything else as its string; ``strict``:
    NaN or infinity is an error instead of the non-standard ``NaN`` token (the command converts them to null)."""
    print(json.dumps(obj, indent=indent, default=str, allow_nan=not strict))


def alpha_arg(value: float, flag: str = "--alpha") -> float:
    """A level given on the command line (``--alpha``, or ``flag``), checked to lie in (0, 1).

    Every command that takes a level validates it here, after parsing, so that the message and
    exit code are the same everywhere and ``main()`` returns the code instead of exiting.

    Raises
    ------
    UsageError
        ``"<flag> must be in (0, 1); got <value>"`` (exit code 2).
    """
    unit_interval_option(flag, value)
    return value


def webhook_arg(url: str | None) -> str | None:
    """A ``--webhook`` URL checked before any work (None: no webhook).

    Raises
    ------
    UsageError
        ``"--webhook: <why>"``: a URL benchcert will not call (not http/https, no host, malformed).
    """
    if url:
        from benchcert.tasks.audit.changes import WebhookError, check_webhook_url

        try:
            check_webhook_url(url)
        except WebhookError as exc:
            raise UsageError(f"--webhook: {exc}") from None
    return url


def require_store(db) -> None:
    """Raise :class:`MissingStoreError` (exit 3) when the store file ``db`` does not exist, before a
    command reads it (opening it would create an empty one); the rule is tasks/store/connection.py's."""
    from benchcert.tasks.store.connection import require_store as check

    check(db)


def quiet_prefect_console(debug: bool) -> None:
    """Prefect prints a task's traceback to the console before the flow re-raises it: keep that for --debug."""
    if not debug:
        os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "CRITICAL")


def _is_setting_error(exc: BaseException) -> bool:
    # stats/ cannot import tasks' UsageError: its bad environment variables (stats/_blas.py's
    # SettingError) are ValueErrors that name the variable in ``setting``.
    return isinstance(exc, ValueError) and isinstance(getattr(exc, "setting", None), str)


def exit_code(exc: BaseException) -> int:
    """The documented exit code of an error that reached ``main()``: a
    :class:`~benchcert.tasks.errors.UserError` its own ``exit_code`` (the store's 3, usage 2, data 1),
    a bad environment variable of ``stats/`` 2, anything else (a bug, a file or a machine problem) 1."""
    if isinstance(exc, UserError):
        return exc.exit_code
    if _is_setting_error(exc):
        return EXIT_USAGE
    return EXIT_DATA


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 2000 else text[:1997] + "..."


def is_user_error(exc: BaseException) -> bool:
    """Whether ``exc`` describes the user's input or data (reported in one line) rather than a bug.

    A :class:`~benchcert.tasks.errors.UserError` (raised where the code knows the mistake is the
    user's: the store's errors and every feature's derive from it), a bad environment variable of
    ``stats/`` (see :func:`exit_code`), and the file errors of a path the user gave.  Anything
    else - a bare ValueError, a KeyError, IndexError, TypeError or AttributeError - is a bug in
    benchcert: it is reported as unexpected, with the ``--debug`` hint.
    """
    return (isinstance(exc, (UserError, FileNotFoundError, PermissionError, IsADirectoryError,
                             NotADirectoryError)) or _is_setting_error(exc))


def environment_problem(exc: BaseException) -> str | None:
    """A failure of the machine around benchcert, in the user's terms (not a bug): a full disk,
    a Prefect API that cannot be reached; None for anything else."""
    if is_disk_full(exc):
        where = getattr(exc, "filename", None)
        return (f"disk full (ENOSPC){f' writing {where}' if where else ''}: {one_line(exc)}; free some space "
                "and run again")
    if type(exc).__name__ in ("ConnectError", "ConnectTimeout") and type(exc).__module__.startswith("httpx"):
        api = os.environ.get("PREFECT_API_URL") or "the configured PREFECT_API_URL"
        return (f"cannot reach the Prefect API at {api} ({one_line(exc)}); start it (`prefect server start`) "
                "or run in-process (--in-process)")
    return None


def report(command: str | None, exc: BaseException, *, prog: str | None = None) -> int:
    """Print ``exc`` as one line on stderr, after ``prog`` (default ``benchcert <command>``: a
    sub-command's errors name it, ``benchcert plan subsample``); return its exit code."""
    prog = prog or (f"benchcert {command}" if command else "benchcert")
    problem = environment_problem(exc)
    if problem is not None:
        print(f"{prog}: {problem}", file=sys.stderr)
    elif is_user_error(exc):
        print(f"{prog}: {one_line(exc)}", file=sys.stderr)
    else:
        print(f"{prog}: unexpected error: {type(exc).__name__}: {one_line(exc)} "
              f"(run again with {DEBUG_FLAG} for the traceback)", file=sys.stderr)
    return exit_code(exc)


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (the message and where to read more), exit 2."""

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")
