"""flows/ parses, calls services and renders: no SQL (issue 23); queries live in tasks/."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SQL = re.compile(r"\.execute\(|query_pl\(|\bSELECT\s|\bINSERT\s+INTO\b|\bCREATE\s+TABLE\b|\bDELETE\s+FROM\b|"
                 r"\bUPDATE\s+\w+\s+SET\b")


def test_no_module_of_flows_holds_sql():
    found = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}"
             for p in sorted((ROOT / "flows").rglob("*.py"))
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if SQL.search(line)]
    assert found == []
