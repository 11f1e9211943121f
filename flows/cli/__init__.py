"""The ``benchcert`` command line: one module per command, each with ``register(subparsers)``.

Exit codes: 0 success; 1 the data or a run failed (rejected or conflicting file, failed
audit, unknown benchmark, variant, model or run); 2 usage error; 3 the store is missing, locked or
unusable; 4 a CI gate failed (``compare --fail-on``/``--require``).  An error is one line on stderr;
``--debug`` (or ``BENCHCERT_DEBUG=1``) shows its traceback.

A command returns its successful exit code (and the gate's 4) and raises everything else: a
:class:`~benchcert.tasks.errors.UserError` is turned into its line and exit code here, in
:func:`main` alone; any other exception is reported as a bug.
"""

from __future__ import annotations

import argparse
import importlib
import sys

#: The command modules, in the order ``--help`` lists their commands.  Each defines
#: ``register(subparsers)``, which adds its parsers and sets ``func`` (a callable taking the
#: parsed args and returning an exit code).  Every one is imported: a missing module is a bug.
COMMAND_MODULES = ("benchcert.flows.cli.ingest", "benchcert.flows.cli.audit", "benchcert.flows.cli.runs",
                   "benchcert.flows.cli.schema", "benchcert.flows.cli.plan", "benchcert.flows.cli.compare",
                   "benchcert.flows.cli.suite",
                   "benchcert.flows.cli.perturb", "benchcert.flows.cli.serve", "benchcert.flows.cli.dashboard",
                   "benchcert.flows.cli.certify", "benchcert.flows.cli.default_variant", "benchcert.flows.cli.gof",
                   "benchcert.flows.cli.items",
                   "benchcert.flows.cli.export", "benchcert.flows.cli.demo")


def build_parser() -> argparse.ArgumentParser:
    from benchcert import __version__

    from benchcert.flows.cli.errors import OneLineParser

    p = OneLineParser(prog="benchcert", description=(
        "What your benchmark results actually support: ingest item-level evaluation logs into a DuckDB store, "
        "audit a benchmark (scores with honest intervals), and publish run artifacts."))
    p.add_argument("--version", action="version", version=f"benchcert {__version__}")
    p.add_argument("--debug", action="store_true",
                   help="show the traceback of an error (allowed anywhere on the line; or BENCHCERT_DEBUG=1)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    _name_commands(p)
    return p


def _name_commands(parser: argparse.ArgumentParser) -> None:
    """Give every command's parser its program name as the default ``prog``, so that main() starts
    an error's line with the command as typed (``benchcert plan subsample: ...``), aliases under
    the command's own name."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                sub.set_defaults(prog=sub.prog)
                _name_commands(sub)


def main(argv: list[str] | None = None) -> int:
    """Run one command; ``argv`` None means this process is the ``benchcert`` program."""
    as_program = argv is None
    if as_program:
        _arm_exit()
    try:
        code = _main(argv)
    except BaseException:
        if as_program:
            _before_exit(None)
        raise
    if as_program:
        _before_exit(code)
    return code


#: Set when the command has finished with this exit code: see _before_exit.
_exit_code: int | None = None


def _before_exit(code: int | None) -> None:
    """The command is done: spare the interpreter its teardown.

    At exit Python first joins the threads that are not daemons and runs the ``atexit``
    handlers (where Prefect sends the events still queued, e.g. the last task states, and logging
    flushes), then tears the interpreter down: module by module, every object it tracks (polars,
    DuckDB, NumPy and, in Prefect mode, some 2,000 modules and their pydantic models), only to
    free memory the process is about to give back anyway.  That teardown took 0.1-0.3 s after a
    Prefect-mode audit on a loaded 2-core machine (0.02-0.08 s in-process).  So when the command
    returned an exit code, the last ``atexit`` handler (:func:`_arm_exit`, registered before any
    other) flushes stdout and stderr and ends the process with that code: every thread join and
    every other handler has run by then.  ``gc.freeze()`` also keeps the collector from walking
    those objects in between.  Only when this process is the program, never when main() is called
    in-process, and not after an exception (SystemExit included), which exits as usual.
    """
    import gc

    global _exit_code
    gc.freeze()
    if isinstance(code, int) and not isinstance(code, bool):
        _exit_code = code


def _arm_exit() -> None:
    import atexit

    atexit.register(_exit_now)  # first registered, so it runs after every other handler


def _exit_now() -> None:
    if _exit_code is None:
        return
    import os

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:  # the reader went away: the code _main gives a broken pipe
            os._exit(141)
        except (OSError, ValueError):
            # The output could not be written (a full disk, a closed stream): the usual shutdown
            # reports it and exits non-zero, where ending here would say the command succeeded.
            return
    os._exit(_exit_code)


def _main(argv: list[str] | None) -> int:
    from benchcert.flows.cli import errors

    debug, argv = errors.debug_requested(list(sys.argv[1:] if argv is None else argv))
    errors.set_debug(debug)
    errors.quiet_prefect_console(debug)
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except errors.UserError as exc:
        # The one place a user error becomes its line and exit code.  Under --debug its traceback
        # comes first, except for a command that runs a flow, whose error is let through whole
        # (as Prefect reports a failed flow run).
        if debug and getattr(args, "raise_under_debug", False):
            raise
        if debug:
            errors.show_traceback(exc)
        return errors.report(args.command, exc, prog=getattr(args, "prog", None))
    except KeyboardInterrupt:
        print(f"benchcert {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`benchcert runs ... | head`): stop quietly, as other Unix tools do;
        # stdout is pointed at devnull so the interpreter's final flush cannot raise again.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as exc:  # a bug, or the machine around benchcert (a full disk, no Prefect API)
        if debug:
            raise
        return errors.report(args.command, exc, prog=getattr(args, "prog", None))

