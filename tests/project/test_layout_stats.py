"""tasks/ and flows/ use only the public modules of stats/ (issue #34, point 7).

A private module of stats/ (``_common``, ``_blas``, ``_dist``, ``perturbation/_checks``, ...) may
change its names whenever stats/ changes; what tasks/ and flows/ need of it lives in a public
module named for what it holds (``stats/degenerate.py``, ``stats/validation.py``,
``stats/segments.py``).
"""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT


def _private_stats_module(dotted: str) -> bool:
    parts = dotted.split(".")
    return parts[:2] == ["benchcert", "stats"] and any(p.startswith("_") and not p.startswith("__") for p in parts[2:])


def private_stats_imports(root: Path) -> list[str]:
    """``path:line module`` for every import, at any depth (function-level too), of a private
    module of stats/ by a module of tasks/ or flows/ under ``root``."""
    found = []
    for path in sorted(p for pkg in ("tasks", "flows") for p in (root / pkg).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                # "from benchcert.stats._common import x" and "from benchcert.stats import _common"
                modules = [node.module] if _private_stats_module(node.module) else [
                    f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            else:
                continue
            found += [f"{path.relative_to(root)}:{node.lineno} {m}" for m in modules if _private_stats_module(m)]
    return found


def test_the_check_sees_each_way_of_importing_a_private_module():
    assert _private_stats_module("benchcert.stats._common")
    assert _private_stats_module("benchcert.stats.perturbation._checks")
    assert not _private_stats_module("benchcert.stats.degenerate")
    assert not _private_stats_module("benchcert.stats.comparisons.__init__")
    assert not _private_stats_module("benchcert.tasks._x")


def test_no_module_of_tasks_or_flows_imports_a_private_module_of_stats():
    # No allowlist: every name tasks/ and flows/ use has a public home.
    bad = private_stats_imports(ROOT)
    assert not bad, ("tasks/ and flows/ import a private module of stats/; import the public module that "
                     f"holds the name (stats/degenerate.py, stats/validation.py, stats/segments.py): {bad}")
