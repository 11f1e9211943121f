"""Suite verdicts among the run artifacts, for dashboards: ``<root>/_suites/<suite>/<baseline> vs <candidate>.json``.

A suite checkpoint (flows/checkpoint_suite.py) records its suite verdict in the store (``suite_verdicts``) and
writes the same ``compare --suite --json`` document here (:func:`write_suite_verdict`), the latest look of each
(suite, baseline, candidate) replacing the one before, so the dashboard (which reads artifacts, never the store)
can put the suite's answer on top of its checkpoint grid (:func:`read_suite_verdicts`).

Layout: the folder ``_suites`` starts with ``_``, which no benchmark's folder does (a plain name starts with a
letter or digit, a hashed one with its slug's), so no benchmark can take it, and the index, which lists run
folders holding a manifest.json, never lists it.  The suite's folder and the file's name go through
:func:`~benchcert.tasks.artifacts.folders.safe_component`, so no name can leave the folder.  A file is written
to a hidden sibling and renamed into place: a reader sees the old or the new document, never half of one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from benchcert.tasks.artifacts.folders import inside, safe_component
from benchcert.tasks.atomic_write import write_text_atomic

__all__ = ["SUITES_DIR", "suite_verdict_path", "write_suite_verdict", "read_suite_verdicts"]

SUITES_DIR = "_suites"


def suite_verdict_path(root: str | os.PathLike, suite: str, baseline: str, candidate: str) -> Path:
    """Where the latest look of (``suite``, ``baseline``, ``candidate``) is kept under the artifacts ``root``."""
    name = safe_component(f"{baseline} vs {candidate}") + ".json"  # one plain component, ".json" kept when hashed
    return inside(Path(root), SUITES_DIR, safe_component(suite), name)


def write_suite_verdict(root: str | os.PathLike, document: dict) -> Path:
    """Write ``document`` (:meth:`~benchcert.tasks.compare.suite.SuiteResult.as_dict`, with ``recorded_at``) as
    the latest suite verdict of its (suite, baseline, candidate); returns its path."""
    path = suite_verdict_path(root, document["suite"]["name"], document["baseline"], document["candidate"])
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_text_atomic(path, json.dumps(document, default=str, allow_nan=False, indent=1))


def _plain(doc) -> bool:
    suite = doc.get("suite") if isinstance(doc, dict) else None
    return (isinstance(suite, dict) and isinstance(suite.get("name"), str)
            and all(isinstance(doc.get(k), str) for k in ("baseline", "candidate")))


def read_suite_verdicts(root: str | os.PathLike) -> tuple[list[dict], list[str]]:
    """Every suite verdict under ``root`` (sorted by suite, baseline, candidate) and the problems met: a file that
    is unreadable, not a suite document, or a symlink out of the root is skipped and named, never fatal."""
    root = Path(root).resolve()
    top = root / SUITES_DIR
    docs, problems = [], []
    if not top.is_dir() or top.is_symlink():
        return docs, problems
    for path in sorted(top.glob("*/*.json")):
        if path.name.startswith("."):
            continue
        try:
            real = inside(root, str(path.relative_to(root)))
            doc = json.loads(real.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            problems.append(f"{path}: unreadable suite verdict ({exc})")
            continue
        if not _plain(doc):
            problems.append(f"{path}: not a suite verdict (needs suite.name, baseline and candidate)")
            continue
        docs.append(doc)
    docs.sort(key=lambda d: (d["suite"]["name"], d["baseline"], d["candidate"]))
    return docs, problems
