"""No test asserts on a time measurement (issue #33).

A seconds bound fails on a loaded machine and passes on a fast one whatever the code does, so it
tests the machine. The behaviour a timing stood for is checked instead (work counted, the order of
events, the error raised); the speed figures themselves belong in benchmarks/ (fast_paths.py).

The check is syntactic: a value read from a clock (``time.perf_counter()``, ``process_time``,
``monotonic``, ``time.time``, their ``_ns`` forms, ``thread_time``, ``os.times``, ``timeit``), any
name assigned, appended or iterated from such a value, and any function of the file that returns
one are "timing"; an ``assert`` comparing a timing is reported. Using a clock to poll until a
condition holds, failing if it never does (waiting for a browser's port), is fine: that bounds a
wait for an event, not the speed of the code.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

from conftest import TESTS

CLOCKS = {"perf_counter", "perf_counter_ns", "process_time", "process_time_ns", "monotonic", "monotonic_ns",
          "time", "time_ns", "thread_time", "thread_time_ns", "times", "timeit", "repeat", "default_timer"}
CLOCK_MODULES = {"time", "os", "timeit"}


def _clock_names(tree: ast.AST) -> set[str]:
    """Names bound to a clock by ``from time import perf_counter [as pc]``."""
    return {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
            and n.module in CLOCK_MODULES for a in n.names if a.name in CLOCKS}


def _is_clock(call: ast.Call, names: set[str], timers: set[str]) -> bool:
    f = call.func
    if isinstance(f, ast.Attribute) and f.attr in CLOCKS and isinstance(f.value, ast.Name):
        return f.value.id in CLOCK_MODULES
    return isinstance(f, ast.Name) and (f.id in names or f.id in timers)


def _reads_time(node: ast.AST, names: set[str], timers: set[str], tainted: set[str]) -> bool:
    for n in ast.walk(node):
        if isinstance(n, ast.Call) and _is_clock(n, names, timers):
            return True
        if isinstance(n, ast.Name) and n.id in tainted:
            return True
    return False


def _targets(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _scopes(tree: ast.Module) -> list[ast.AST]:
    """The module's own statements and each outermost function (its nested ones included: a
    timing appended in a helper thread is asserted in the test around it)."""
    outer = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    nested = {id(m) for n in outer for m in ast.walk(n) if m is not n and isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))}
    functions = [n for n in outer if id(n) not in nested]
    module = ast.Module(body=[st for st in tree.body if not isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                                ast.ClassDef))], type_ignores=[])
    return [module, *functions]


def _taint(scope: ast.AST, names: set[str], timers: set[str]) -> set[str]:
    """Names of ``scope`` holding a timing (to a fixed point); adds its functions returning one to ``timers``."""
    tainted: set[str] = set()

    def reads(v) -> bool:
        return v is not None and _reads_time(v, names, timers, tainted)

    while True:
        before = (len(tainted), len(timers))
        for n in ast.walk(scope):
            if isinstance(n, ast.Assign) and reads(n.value):
                for t in n.targets:
                    tainted |= _targets(t)
            elif isinstance(n, (ast.AugAssign, ast.AnnAssign, ast.NamedExpr)) and reads(n.value):
                tainted |= _targets(n.target)
            elif isinstance(n, (ast.For, ast.comprehension)) and reads(n.iter):
                tainted |= _targets(n.target)
            elif (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name)
                  and n.func.attr in ("append", "extend", "add", "insert", "update", "setdefault")
                  and any(reads(a) for a in n.args)):
                tainted.add(n.func.value.id)
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                    isinstance(r, ast.Return) and reads(r.value) for r in ast.walk(n)):
                timers.add(n.name)
        if (len(tainted), len(timers)) == before:
            return tainted


def timing_asserts(source: str) -> list[tuple[int, str]]:
    """(line, source) of every assert in ``source`` that compares a time measurement."""
    tree = ast.parse(source)
    names = _clock_names(tree)
    scopes = _scopes(tree)
    timers: set[str] = set()
    while True:  # a helper returning seconds may be defined after its first use
        before = len(timers)
        taints = [_taint(scope, names, timers) for scope in scopes]
        if len(timers) == before:
            break
    found = set()
    for scope, tainted in zip(scopes, taints):
        for n in ast.walk(scope):
            if isinstance(n, ast.Assert) and any(isinstance(c, ast.Compare) and _reads_time(c, names, timers, tainted)
                                                 for c in ast.walk(n.test)):
                found.add((n.lineno, ast.get_source_segment(source, n).splitlines()[0]))
    return sorted(found)


def _test_files() -> list[Path]:
    return sorted(TESTS.rglob("*.py"))


@pytest.mark.parametrize("path", _test_files(), ids=lambda p: str(p.relative_to(TESTS)))
def test_no_test_asserts_a_time_measurement(path):
    found = timing_asserts(path.read_text())
    assert not found, (f"{path.relative_to(TESTS)} asserts on a time measurement (check the behaviour the timing "
                       f"stood for; measure speed in benchmarks/): " + "; ".join(f"line {ln}: {s}" for ln, s in found))


# The forms of timing assert the suite held before issue #33 (each must be reported) and uses of a clock
# that must not be: sample sources kept in a TOML file, so no .py file of the suite holds one even as text.
# The file writes each sample's assert keyword as CHECK, so that no file holds a timing assert as text.
_SAMPLES = tomllib.loads((Path(__file__).parent / "data" / "timing_samples.toml").read_text(encoding="utf-8"))
CAUGHT, PASSED = ({name: re.sub(r"(?m)^(\s*)CHECK ", r"\1assert ", src) for name, src in _SAMPLES[kind].items()}
                  for kind in ("caught", "passed"))


@pytest.mark.parametrize("name", CAUGHT)
def test_the_check_reports_each_form_of_timing_assert(name):
    assert timing_asserts(CAUGHT[name]), name


@pytest.mark.parametrize("name", PASSED)
def test_the_check_leaves_polling_and_other_asserts_alone(name):
    assert not timing_asserts(PASSED[name]), name
