"""Ingest has one write path (issue #34, point 4), checked on the source tree.

Every stored row of an ingest (responses, codes, items, option probabilities, rejects, sources)
is written by :func:`benchcert.tasks.store.ingest_write.write_sources` (a new benchmark's responses are
appended in place by ``staging.append_rows`` in the same transaction), which the one-file path
(tasks/ingest/one_file.py) and a run of small files (tasks/ingest/many.py) both call.  So:

* the store's ingest write helpers (each function of tasks/store/responses.py or
  tasks/store/staging.py whose SQL inserts into, updates or deletes from a stored table) are
  called from tasks/store/ingest_write.py only, nowhere else in the package;
* tasks/ingest/ calls :func:`write_sources` (from both paths) and never the store's id sequence
  or code counter itself (``next_codes``: the CodeBook codes every ingested row).

The helpers are found by reading the store modules' syntax trees (the string constants of each
function), so a new insert helper is covered without editing this test.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from conftest import ROOT

PACKAGES = ("flows", "tasks", "stats", "benchcert")
ONE_WRITE = "tasks/store/ingest_write.py"
#: The store modules holding ingest's SQL (the helpers they offer).
INGEST_SQL = ("tasks/store/responses.py", "tasks/store/staging.py")
#: The stored tables an ingest writes.
STORED = ("response_codes", "models", "variants", "items", "sources", "rejects", "option_probs",
          "human_label_changes")
#: A stored table named in SQL text, or one of the code tables through its fixed Kind constant.
WRITES = re.compile(r"\b(INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+(%s|\{kind\.table\})" % "|".join(
    rf"{t}\b" for t in STORED), re.I)
#: Store functions tasks/ingest/ must not call: the code counter (the CodeBook's to use).
NOT_FROM_INGEST = frozenset({"next_codes"})


def _tree(rel: str) -> ast.Module:
    return ast.parse((ROOT / rel).read_text(), filename=rel)


def store_writers() -> dict[str, str]:
    """Name -> module of every function of :data:`INGEST_SQL` whose SQL writes a stored table."""
    out = {}
    for rel in INGEST_SQL:
        for node in _tree(rel).body:
            if not isinstance(node, ast.FunctionDef):
                continue
            text = " ".join(c.value if isinstance(c, ast.Constant) else ast.unparse(c) for c in ast.walk(node)
                            if isinstance(c, ast.JoinedStr) or (isinstance(c, ast.Constant) and isinstance(c.value, str)))
            if WRITES.search(text):
                out[node.name] = rel
    return out


def called_names(tree: ast.AST) -> set[str]:
    """Names of every function called (``f(...)`` or ``module.f(...)``) or imported by name."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            out.add(f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else "")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("benchcert.tasks.store"):
            out.update(a.name for a in node.names)
    return out


def _modules() -> list[str]:
    return sorted(p.relative_to(ROOT).as_posix() for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def test_the_finder_sees_the_write_helpers():
    writers = store_writers()
    for name in ("insert_codes", "merge_responses", "insert_staged", "insert_staged_items", "record_sources",
                 "record_rejects", "replace_human_labels", "insert_option_probs"):
        assert name in writers, name
    # Reads are not writes, nor are the staged rows' own deletions (drop_lines: ``DELETE FROM {rows.table}``).
    for name in ("stored_source", "contradictions", "drop_lines", "keep_sources_before", "append_rows"):
        assert name not in writers, name


def test_only_the_one_write_calls_the_store_write_helpers():
    writers = store_writers()
    wrong = [f"{rel} calls {name} ({writers[name]})" for rel in _modules() if rel not in (ONE_WRITE, *INGEST_SQL)
             for name in sorted(called_names(_tree(rel)) & set(writers))]
    assert wrong == [], "only tasks/store/ingest_write.py writes an ingest's stored rows:\n" + "\n".join(wrong)


def test_both_ingest_paths_call_the_one_write_and_neither_restates_the_code_book():
    for rel in ("tasks/ingest/one_file.py", "tasks/ingest/many.py"):
        assert "write_sources" in called_names(_tree(rel)), rel
    ingest = [rel for rel in _modules() if rel.startswith("tasks/ingest/")]
    wrong = [f"{rel} calls {name}" for rel in ingest for name in sorted(called_names(_tree(rel)) & NOT_FROM_INGEST)]
    assert wrong == []
