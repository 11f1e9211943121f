"""No import cycles among benchcert's modules, function-level imports included (issue #34).

A cycle hidden in a function-level import still ties two modules into one: neither can be read,
tested or moved without the other, and which one finishes loading first depends on who is
imported first.  The graph is built from every import statement of flows/, tasks/, stats/ and
benchcert/ (module level and inside functions, read with ast), not from what one run happens to
import.  Imports under ``if TYPE_CHECKING:`` are left out: they never run, so they cannot make a
module wait for another.
"""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT

#: Source folder -> its package (pyproject.toml's package-dir).
PACKAGES = {"flows": "benchcert.flows", "tasks": "benchcert.tasks", "stats": "benchcert.stats",
            "benchcert": "benchcert"}

#: Cycles still allowed, each with why: a cycle passes when all its modules are in one entry.
#: Empty: every cycle the issue listed is broken, and a new one fails the suite.
ALLOWED: list[tuple[frozenset[str], str]] = []


def module_name(root: Path, path: Path) -> str:
    """The dotted name ``path`` is installed as (``tasks/audit/steps.py`` -> ``benchcert.tasks.audit.steps``)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    parts = PACKAGES[parts[0]].split(".") + parts[1:]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of the import nodes under ``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``)."""
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and (
                (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
                or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING")):
            skipped |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return skipped


def import_graph(root: Path) -> dict[str, dict[str, str]]:
    """module -> {imported module: "path:line" of the first import of it}, for every module of
    the packages under ``root``; only edges between those modules."""
    paths = {module_name(root, p): p for top in PACKAGES if (root / top).is_dir()
             for p in sorted((root / top).rglob("*.py"))}

    def resolve(name: str) -> str | None:
        while name and name not in paths:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, dict[str, str]] = {}
    for module, path in paths.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        skipped = _type_checking_only(tree)
        edges = graph.setdefault(module, {})
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                # "from pkg import mod" imports the module pkg.mod; "from mod import name" the module mod
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in paths else base for a in node.names]
            else:
                continue
            for target in targets:
                found = resolve(target)
                if found is not None and found != module:
                    edges.setdefault(found, f"{path.relative_to(root)}:{node.lineno}")
    return graph


def cycles(graph: dict[str, dict[str, str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, without recursion), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def describe(component: list[str], graph: dict[str, dict[str, str]]) -> str:
    """One cycle as its modules and the import lines that close it."""
    members = set(component)
    edges = [f"{a} -> {b} ({where})" for a in component for b, where in sorted(graph[a].items()) if b in members]
    return f"{' <-> '.join(component)}: " + "; ".join(edges)


def test_no_import_cycles():
    graph = import_graph(ROOT)
    bad = [describe(c, graph) for c in cycles(graph) if not any(set(c) <= allowed for allowed, _ in ALLOWED)]
    assert not bad, "import cycles (function-level imports included):\n" + "\n".join(bad)


def test_every_allowed_cycle_names_its_reason_and_is_still_there():
    """An entry that excuses no cycle any more fails, so the list only shrinks."""
    graph = import_graph(ROOT)
    found = cycles(graph)
    for allowed, reason in ALLOWED:
        assert reason.strip() and allowed <= set(graph), (sorted(allowed - set(graph)), reason)
        assert any(set(c) <= allowed for c in found), f"allowed cycle excuses nothing any more: {sorted(allowed)}"


def test_the_check_sees_function_level_and_relative_imports(tmp_path):
    """A cycle closed inside a function, through a relative import or a ``from pkg import module``
    is found; one closed only under TYPE_CHECKING is not a cycle."""
    def write(rel: str, text: str) -> None:
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    write("tasks/__init__.py", "")
    write("tasks/a.py", "from benchcert.tasks import b\n")
    write("tasks/b.py", "def f():\n    from benchcert.tasks.a import x\n")
    write("stats/__init__.py", "")
    write("stats/sub/__init__.py", "")
    write("stats/sub/c.py", "from .d import y\n")
    write("stats/sub/d.py", "def g():\n    from . import c\n")
    write("flows/__init__.py", "")
    write("flows/e.py", "from typing import TYPE_CHECKING\nimport benchcert.flows.f\n")
    write("flows/f.py", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from benchcert.flows.e import z\n")
    graph = import_graph(tmp_path)
    assert cycles(graph) == [["benchcert.stats.sub.c", "benchcert.stats.sub.d"],
                             ["benchcert.tasks.a", "benchcert.tasks.b"]]
    assert "tasks/b.py:2" in describe(["benchcert.tasks.a", "benchcert.tasks.b"], graph)
