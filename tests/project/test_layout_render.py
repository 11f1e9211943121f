"""Render in one place (issue #34, point 7): HTML is made only under ``tasks/render/``.

An analysis computes its tables and notes and hands them to its module of
``tasks/render/sections/``, which makes the report section, so that every string from a log
meets the one escaper (``tasks/render/escape.py``) where the markup is written. Checked on the
modules' syntax trees: no string constant (f-strings' literal parts included) outside
``tasks/render/`` contains an HTML or SVG tag. Docstrings do not count: they may show markup.

Each allowlist entry is a path and the reason its text is not HTML; an entry that no longer
excuses anything fails the test, so the list only shrinks.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from conftest import ROOT

#: The installed package's source folders.
PACKAGES = ("flows", "tasks", "stats", "benchcert")
RENDER = "tasks/render/"

#: An opening or closing tag of the HTML and inline SVG the report and dashboard write.
TAG = re.compile(r"</?(p|h[1-6]|table|thead|tbody|tr|td|th|caption|div|span|code|pre|b|i|em|strong|sub|sup|"
                 r"ul|ol|li|a|svg|g|rect|line|polyline|circle|path|text|title)[\s>/]")

#: Modules outside tasks/render/ whose strings may match TAG, each with why its text is not HTML.
ALLOWED: dict[str, str] = {}


def _modules(root: Path) -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (root / pkg).rglob("*.py"))


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the constants that are a module's, class' or function's docstring."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def tagged_strings(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, text) of every string constant, docstrings aside, that contains a tag of :data:`TAG`."""
    docs = _docstrings(tree)
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
            and TAG.search(node.value)]


def html_outside_render(root: Path) -> dict[str, list[tuple[int, str]]]:
    """Per module outside ``tasks/render/`` (path relative to ``root``): its strings with a tag."""
    out = {}
    for path in _modules(root):
        name = path.relative_to(root).as_posix()
        if name.startswith(RENDER):
            continue
        found = tagged_strings(ast.parse(path.read_text(encoding="utf-8"), filename=name))
        if found:
            out[name] = found
    return out


def test_no_html_outside_tasks_render():
    found = {name: hits for name, hits in html_outside_render(ROOT).items() if name not in ALLOWED}
    assert not found, ("HTML is made in tasks/render/ (an analysis passes its data to "
                       "tasks/render/sections/<feature>.py); these modules hold markup:\n"
                       + "\n".join(f"  {name}:{line}: {text[:70]!r}" for name, hits in found.items()
                                   for line, text in hits[:3]))


def test_allowlist_entries_excuse_something():
    # One test over the whole allowlist (not one per entry): an empty allowlist is the goal, not a skip.
    found = html_outside_render(ROOT)
    stale = sorted(name for name in ALLOWED if name not in found)
    assert not stale, f"{stale} no longer hold a tagged string: remove them from ALLOWED"


def test_the_rule_sees_markup_in_f_strings_and_skips_docstrings():
    tree = ast.parse('"""<p>a docstring may show markup</p>"""\n'
                     'def f(x):\n    """<b>so may this</b>"""\n    return f"<li>{x}</li>"\n'
                     'HELP = "a <placeholder> is no tag"\n')
    assert sorted(tagged_strings(tree)) == [(4, "</li>"), (4, "<li>")]
