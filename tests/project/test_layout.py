"""The layout rules of docs/architecture.md, checked on the source tree (issue #23's acceptance).

Each rule keeps a feature in one home: the store's tables in one schema module, no SQL and no
decision rules in flows/, dependencies one way (flows -> tasks -> stats), and pieces small
enough to read: no module over MAX_MODULE_LINES lines and no function over MAX_FUNCTION_LINES
lines, a function counted without its docstring (numpydoc docstrings hold the mathematics, which
stays with its function). What is still over a limit is listed in OVER_LIMIT with its reason, at
most five entries; an entry that no longer excuses anything fails, so the list only shrinks.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from conftest import ROOT

PACKAGES = ("flows", "tasks", "stats")
MAX_MODULE_LINES = 800
MAX_FUNCTION_LINES = 100  # without the docstring
#: Over a limit for now, each with its reason: a module ("path") or a function ("path:name").
OVER_LIMIT: dict[str, str] = {}
SQL = re.compile(r"\b(SELECT\s+[\w*(]|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|CREATE\s+(TABLE|VIEW|INDEX)"
                 r"|ALTER\s+TABLE|DROP\s+TABLE)", re.I)


def _modules(*packages: str) -> list[Path]:
    return sorted(p for pkg in packages for p in (ROOT / pkg).rglob("*.py"))


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _docstring_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    first = node.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return first.end_lineno - first.lineno + 1
    return 0


def _over_limits(path: Path) -> list[tuple[str, int]]:
    """(OVER_LIMIT key, lines) of the module, if over, and of each function over its limit."""
    src = path.read_text()
    over = [(_name(path), src.count("\n"))] if src.count("\n") > MAX_MODULE_LINES else []
    for n in ast.walk(ast.parse(src)):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = n.end_lineno - n.lineno + 1 - _docstring_lines(n)
            if lines > MAX_FUNCTION_LINES:
                over.append((f"{_name(path)}:{n.name}", lines))
    return over


@pytest.mark.parametrize("path", _modules(*PACKAGES), ids=_name)
def test_modules_and_functions_are_small(path):
    over = [(key, lines) for key, lines in _over_limits(path) if key not in OVER_LIMIT]
    assert not over, (f"over {MAX_MODULE_LINES} lines (a module) or {MAX_FUNCTION_LINES} (a function, without "
                      f"its docstring): {over}")


def test_the_size_allowlist_only_shrinks():
    assert len(OVER_LIMIT) <= 5, "at most five modules or functions over a size limit"
    assert all(reason.strip() for reason in OVER_LIMIT.values()), "each entry says why it is over"
    over = {key for p in _modules(*PACKAGES) for key, _ in _over_limits(p)}
    stale = sorted(set(OVER_LIMIT) - over)
    assert not stale, f"within the limits now, remove from OVER_LIMIT: {stale}"


def _strings(tree: ast.AST) -> list[tuple[int, str]]:
    return [(n.lineno, n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def test_every_table_is_defined_in_the_schema_module():
    schema = ROOT / "tasks" / "store" / "schema.py"
    assert schema.is_file()
    found = [f"{_name(p)}:{line}" for p in _modules(*PACKAGES) if p != schema
             for line, s in _strings(ast.parse(p.read_text())) if re.search(r"CREATE\s+TABLE", s, re.I)]
    assert not found, f"CREATE TABLE outside tasks/store/schema.py: {found}"


def test_no_sql_in_flows():
    found = [f"{_name(p)}:{line}" for p in _modules("flows")
             for line, s in _strings(ast.parse(p.read_text())) if SQL.search(s)]
    assert not found, f"SQL in flows/ (it belongs in a tasks/ service): {found}"


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.append((node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names]
    return out


@pytest.mark.parametrize("layer,forbidden", [("stats", ("benchcert.tasks", "benchcert.flows")),
                                             ("tasks", ("benchcert.flows",))])
def test_dependencies_point_one_way(layer, forbidden):
    bad = [f"{_name(p)}: {mod}" for p in _modules(layer) for mod, _ in _imports(p) if mod.startswith(forbidden)]
    assert not bad, bad


@pytest.mark.parametrize("layer", ["flows", "tasks"])
def test_no_module_imports_a_private_name_of_another_package(layer):
    # inside one stats/ subpackage private helpers are shared (relative imports); across packages
    # and from flows/ or tasks/ only public names are
    bad = [f"{_name(p)}: {mod}.{n}" for p in _modules(layer) for mod, names in _imports(p)
           if mod.startswith("benchcert.") for n in names if n.startswith("_") and not n.startswith("__")]
    assert not bad, bad


def test_readme_is_a_short_page_that_links_every_doc():
    readme = (ROOT / "README.md").read_text()
    assert readme.count("\n") <= 300, "README.md is a newcomer's page; reference material goes to docs/"
    unlinked = [p.name for p in sorted((ROOT / "docs").glob("*.md")) if f"(docs/{p.name}" not in readme]
    assert not unlinked, f"docs pages the README does not link: {unlinked}"
