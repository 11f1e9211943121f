"""One error taxonomy (issue #34, point 1), checked on the source tree.

Two rules:

* every exception class defined in ``tasks/`` and ``flows/`` derives from
  ``tasks/errors.py``'s :class:`~benchcert.tasks.errors.UserError` (through the kind that gives
  its exit code), so the command line, the audit's skip and the Python API tell the user's
  mistakes from bugs by class, never by ``ValueError``; the exceptions allowed otherwise are
  listed below with their reason;
* no command module of ``flows/cli/`` reports an error by hand (a line on stderr and
  ``return EXIT_DATA``/``EXIT_USAGE``/``EXIT_STORE``): it raises, and ``main()``
  (``flows/cli/__init__.py``) alone turns the error into its line and exit code.  A command
  returns its successful code, the CI gate's ``EXIT_GATE`` (4), or, where the exit code sums up
  an answer already printed, a code listed below with its reason.

Each allowlist entry must still excuse something, so the lists only shrink.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

from conftest import ROOT

#: Folders and classes (``path::Class``) whose exceptions need not derive from UserError.
EXCEPTIONS_ALLOWED = {
    "tasks/ingest/many.py::_Refused": "internal control flow (--atomic): a file was refused, caught in the same "
                                      "module, which then stores nothing and reports every file",
    "tasks/ingest/many.py::_RunFailed": "internal control flow (--atomic): storing a run failed inside the "
                                        "command's transaction, caught in the same module, which rolls it back",
    "tasks/render/run_records.py::_NotPlain": "internal control flow: a model entry the fast reader leaves to the "
                                              "checked reader, caught in the same function (never leaves it)",
    "tasks/render/run_records.py::_Skip": "internal control flow: one run folder the dashboard cannot show, caught "
                                          "in the same module and listed as skipped",
    "flows/prefect_flow.py::_NotJson": "internal control flow: a flow parameter that is not JSON-like, caught by "
                                       "json_parameter's caller, which then passes the value as it is",
    "flows/nightly.py::BenchmarkFailed": "internal control flow: fails one benchmark's task run carrying what it got "
                                         "to (its files' reports, the original error's text); caught in the same "
                                         "module, which lists the problem and raises NightlyProblems (a DataError)",
}

#: Exit-code names a command may return: success and the CI gate's verdict.
RETURNABLE = {"EXIT_OK", "EXIT_GATE"}

#: (module, function) of flows/cli whose non-zero return sums up an answer it printed in full.
RESULT_CODES_ALLOWED = {
    ("flows/cli/ingest.py", "cmd_ingest"): "every file's report is printed (a refused one on stderr with its bad "
                                           "rows); the code sums them up: 3 a locked store, 1 a refused file",
    ("flows/cli/perturb.py", "cmd_plan_perturbation"): "no valid design is the answer, printed with the smallest "
                                                       "budget that gives one; exit 1 says so",
    ("flows/cli/runs.py", "cmd_show"): "a failed run's record is the answer to show (on stdout); exit 1 as the run "
                                       "failed",
    ("flows/cli/gof.py", "cmd_gof"): "--json prints its body, which names the error; exit 1 says the test failed",
}

#: Modules of flows/cli that report errors: the one place that does.
REPORTERS = {"flows/cli/errors.py", "flows/cli/__init__.py"}


def _modules(*folders: str):
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if "/tests/" not in f"/{rel}" and path.name != "__main__.py":
                yield rel, path


def _allowed(rel: str, name: str | None = None) -> str | None:
    for key in EXCEPTIONS_ALLOWED:
        if key.endswith("/") and rel.startswith(key) or key == rel or key == f"{rel}::{name}":
            return key
    return None


def _module_name(rel: str) -> str:
    parts = rel[:-3].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return "benchcert." + ".".join(parts)


def _exception_classes():
    """(path::Class, class) of every class defined at a module's top level that is an exception
    (warnings are categories, not errors), and path::Class of every class defined inside a
    function or class whose base looks like an exception (those cannot be imported to check)."""
    found, nested = [], []
    for rel, path in _modules("tasks", "flows"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top = [n for n in tree.body if isinstance(n, ast.ClassDef)]
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node not in top:
                bases = [ast.unparse(b) for b in node.bases]
                if any(b.endswith(("Error", "Exception", "Refused")) for b in bases):
                    nested.append(f"{rel}::{node.name}")
        if not top:
            continue
        module = importlib.import_module(_module_name(rel))
        for node in top:
            cls = getattr(module, node.name, None)
            if isinstance(cls, type) and issubclass(cls, BaseException) and not issubclass(cls, Warning):
                found.append((f"{rel}::{node.name}", cls))
    return found, nested


def test_every_exception_of_tasks_and_flows_is_a_user_error_or_allowed_with_a_reason():
    from benchcert.tasks.errors import UserError

    found, nested = _exception_classes()
    assert not nested, f"exceptions defined inside a function or class (define them at module level): {nested}"
    stray = [key for key, cls in found if not issubclass(cls, UserError) and not _allowed(*key.split("::"))]
    assert not stray, ("exceptions that derive from neither tasks/errors.py's UserError (through the kind that "
                       f"gives their exit code) nor an entry of EXCEPTIONS_ALLOWED: {stray}")
    used = {_allowed(*key.split("::")) for key, cls in found if not issubclass(cls, UserError)}
    assert set(EXCEPTIONS_ALLOWED) <= used, f"allowlist entries that excuse nothing: {set(EXCEPTIONS_ALLOWED) - used}"


def test_each_kind_keeps_its_exit_code():
    """A feature error with two kinds takes the code of the one it lists first; the kinds spell theirs out."""
    from benchcert.tasks import errors

    codes = {k: getattr(errors, k).exit_code for k in ("UserError", "UsageError", "MissingStoreError",
                                                        "StoreUnusableError", "NoDataError", "DataError",
                                                        "NotAnalysableError")}
    assert codes == {"UserError": 1, "UsageError": 2, "MissingStoreError": 3, "StoreUnusableError": 3,
                     "NoDataError": 1, "DataError": 1, "NotAnalysableError": 1}
    from benchcert.tasks.certify.service import EnvironmentsError, UnknownPlanError
    from benchcert.tasks.render.dashboard import DashboardError, OutputFolderError
    from benchcert.tasks.store.connection import StoreError, StoreLockedError
    from benchcert.tasks.subsample.subsets import NoSubsetItems, SubsetError

    assert (OutputFolderError.exit_code, DashboardError.exit_code, issubclass(OutputFolderError, DashboardError)) \
        == (2, 1, True)
    assert (NoSubsetItems.exit_code, SubsetError.exit_code, issubclass(NoSubsetItems, SubsetError)) == (1, 2, True)
    assert (StoreError.exit_code, StoreLockedError.exit_code) == (3, 3)
    # a bad environments file is a usage error in every command; a plan the store lacks is missing data
    assert (EnvironmentsError.exit_code, UnknownPlanError.exit_code) == (2, 1)


def _code_names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id.startswith("EXIT_")}


def _hand_reported(value: ast.AST | None) -> bool:
    """Whether a returned value is an error code made by hand: a non-zero exit-code name other
    than the gate's, a non-zero literal, or a call of the old reporters (user_error, exit_code)."""
    if value is None:
        return False
    if isinstance(value, ast.IfExp):
        return _hand_reported(value.body) or _hand_reported(value.orelse)
    if isinstance(value, ast.Constant):
        return isinstance(value.value, int) and not isinstance(value.value, bool) and value.value != 0
    if _code_names(value) - RETURNABLE:
        return True
    return any(isinstance(n, ast.Call) and getattr(n.func, "id", getattr(n.func, "attr", None)) in ("user_error",
                                                                                                  "exit_code")
               for n in ast.walk(value))


def _functions(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def _own_returns(fn):
    """The return statements of ``fn`` itself (not of the functions defined inside it)."""
    stack = list(fn.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return):
            yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))


def test_no_command_reports_an_error_by_hand():
    found, used = [], set()
    for rel, path in _modules("flows/cli"):
        if rel in REPORTERS:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for fn in _functions(tree):
            lines = [r.lineno for r in _own_returns(fn) if _hand_reported(r.value)]
            if not lines:
                continue
            if (rel, fn.name) in RESULT_CODES_ALLOWED:
                used.add((rel, fn.name))
            else:
                found.append(f"{rel}:{lines} {fn.name}")
        names = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        if names & {"user_error", "user_errors"}:
            found.append(f"{rel}: imports the old reporter {sorted(names & {'user_error', 'user_errors'})}")
    assert not found, ("commands that print an error and return its code by hand; raise the UserError and let "
                       f"main() report it: {found}")
    stale = set(RESULT_CODES_ALLOWED) - used
    assert not stale, f"allowlist entries that excuse nothing: {stale}"
