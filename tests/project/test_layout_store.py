"""The store owns its SQL (issue #34, point 5), checked on the source tree.

Three rules, each read from the modules' syntax trees (not grep, so comments and docstrings
that merely mention a statement do not count):

* no module outside ``tasks/store/`` runs SQL on a connection: no call of ``execute``,
  ``executemany``, ``sql`` or ``query_pl``;
* every piece of the store's DDL (``CREATE TABLE``/``SEQUENCE``/``VIEW``/``INDEX``,
  ``ALTER TABLE``) is in ``tasks/store/schema.py``;
* temporary tables (``CREATE TEMP``/``TEMPORARY``) are made only under ``tasks/store/``.

Each allowlist entry is a path (a folder ends in ``/``) and the reason it is allowed; an
entry that no longer excuses anything fails the test, so the lists only shrink.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from conftest import ROOT

#: The installed package's source folders (benchmarks/ and tools/ are scripts run beside it).
PACKAGES = ("flows", "tasks", "stats", "benchcert")
STORE = "tasks/store/"
SCHEMA = "tasks/store/schema.py"

#: Modules outside tasks/store/ allowed to call execute/executemany/sql/query_pl.
SQL_CALLS_ALLOWED = {
    "tasks/ingest/mapping.py": "Polars' own SQL parser over an empty frame, to say where a --map expression's "
                               "syntax goes wrong (pl.SQLContext.execute); no store, no connection",
}
#: Modules other than schema.py allowed to hold DDL.
DDL_ALLOWED: dict[str, str] = {}
#: Modules outside tasks/store/ allowed to create temporary tables.
TEMP_TABLES_ALLOWED: dict[str, str] = {}

SQL_CALL_NAMES = frozenset({"execute", "executemany", "sql", "query_pl"})
DDL = re.compile(r"\bCREATE\s+(OR\s+REPLACE\s+)?(TABLE|SEQUENCE|VIEW|(UNIQUE\s+)?INDEX)\b|\bALTER\s+TABLE\b", re.I)
TEMP_TABLE = re.compile(r"\bCREATE\s+(OR\s+REPLACE\s+)?(TEMP|TEMPORARY)\s+(TABLE|VIEW)\b", re.I)


def _modules() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def _name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def sql_calls(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, name) of every call of a function or method named execute, executemany, sql or query_pl."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
            if name in SQL_CALL_NAMES:
                out.append((node.lineno, name))
    return out


def strings_matching(tree: ast.AST, pattern: re.Pattern) -> list[tuple[int, str]]:
    """(line, start of the text) of every string constant (f-strings' literal parts too) ``pattern`` finds."""
    return [(n.lineno, " ".join(n.value.split())[:60]) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and pattern.search(n.value)]


def _allowed(name: str, allowlist: dict[str, str]) -> str | None:
    return next((entry for entry in allowlist if name == entry or (entry.endswith("/") and name.startswith(entry))),
                None)


def _violations(finder, exempt, allowlist: dict[str, str]) -> tuple[list[str], set[str]]:
    """Findings not excused (``path:line: what``), and the allowlist entries that excused something."""
    found, used = [], set()
    for path in _modules():
        name = _name(path)
        if exempt(name):
            continue
        hits = finder(ast.parse(path.read_text(), filename=name))
        entry = _allowed(name, allowlist)
        if hits and entry:
            used.add(entry)
        elif hits:
            found += [f"{name}:{line}: {what}" for line, what in hits]
    return found, used


RULES = {
    "sql_calls": (sql_calls, lambda name: name.startswith(STORE), SQL_CALLS_ALLOWED,
                  "SQL run outside tasks/store/ (add a function to a tasks/store/ repository module)"),
    "ddl": (lambda tree: strings_matching(tree, DDL), lambda name: name == SCHEMA, DDL_ALLOWED,
            "DDL outside tasks/store/schema.py"),
    "temp_tables": (lambda tree: strings_matching(tree, TEMP_TABLE), lambda name: name.startswith(STORE),
                    TEMP_TABLES_ALLOWED, "temporary tables outside tasks/store/"),
}


@pytest.mark.parametrize("rule", list(RULES))
def test_the_store_owns_its_sql(rule):
    finder, exempt, allowlist, message = RULES[rule]
    found, used = _violations(finder, exempt, allowlist)
    assert not found, f"{message}: {found}"
    stale = sorted(set(allowlist) - used)
    assert not stale, f"allowlist entries that excuse nothing any more (remove them): {stale}"


@pytest.mark.parametrize("rule", list(RULES))
def test_every_allowlist_entry_has_a_reason(rule):
    allowlist = RULES[rule][2]
    assert all(reason.strip() for reason in allowlist.values()), allowlist


def test_the_finders_see_what_the_rules_name():
    # The rules above pass when nothing is found: these cases keep the finders from going blind.
    src = '''
con.execute("SELECT 1"); con.executemany("INSERT INTO t VALUES (?)", rows); duckdb.sql("SELECT 2")
query_pl(con, "SELECT 3"); store.query_pl(con, "SELECT 4")
a = "CREATE TABLE IF NOT EXISTS t (x INT)"; b = f"CREATE OR REPLACE SEQUENCE s START WITH {n}"
c = "create view v as select 1"; d = "CREATE UNIQUE INDEX i ON t (x)"; e = "ALTER TABLE t ADD COLUMN y INT"
f = "CREATE OR REPLACE TEMP TABLE _stage (x INT)"; g = "CREATE TEMPORARY TABLE _t AS SELECT 1"
'''
    tree = ast.parse(src)
    assert [name for _, name in sql_calls(tree)] == ["execute", "executemany", "sql", "query_pl", "query_pl"]
    assert len(strings_matching(tree, DDL)) == 5
    assert len(strings_matching(tree, TEMP_TABLE)) == 2
    benign = ast.parse('parser.register(sub); pool.submit(f); "the table is created on first use"; '
                       '"SELECT * FROM t"; "a temporary table"')
    assert sql_calls(benign) == []
    assert strings_matching(benign, DDL) == strings_matching(benign, TEMP_TABLE) == []
