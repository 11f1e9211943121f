"""Folder names of the run layout: a benchmark's or run's name as a folder that cannot escape its
parent, collide with another name (case-folding file systems included) or take a reserved name.

Their names must not change from one release to the next: a run's folder is found again by its
name (tasks/artifacts/runs.py) and dashboards link to it.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from benchcert.tasks.slug import slug as _slug

_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
#: The tail every hashed name ends with; a name that already ends like this is hashed too.
_HASHED = re.compile(r"-[0-9a-f]{10}$")
#: Names of files that sit beside benchmark or run folders (artifacts root, run directory,
#: dashboard site); a benchmark or run with such a name gets a hashed folder instead.
RESERVED = frozenset({"index.json", "index.html", "manifest.json", "summary.json", "report.html", "tables"})


def is_plain_folder(name: str) -> bool:
    """Whether ``name`` is its own folder name: safe characters, no '..', not reserved, no hash tail."""
    return (isinstance(name, str) and bool(_SAFE.match(name)) and ".." not in name
            and name.lower() not in RESERVED and not _HASHED.search(name))


def safe_component(name: str) -> str:
    """A folder name for ``name`` that cannot escape its parent, collide with another name or
    take a reserved name.

    Plain names (:func:`is_plain_folder`) are kept; anything else (slashes, '..', spaces,
    unicode, overlong, ``index.json``, a name ending like a hashed one) becomes a slug plus
    the first 10 hex digits of the name's SHA-256.  The map is one-to-one: kept names never
    end in ``-<10 hex digits>`` and hashed ones always do, so 'a/b', 'a_b' and
    'a_b-c14cddc033' get three folders (two hashed names meet only if their SHA-256 agree
    in 40 bits).
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string; got {name!r}")
    if is_plain_folder(name):
        return name
    return hashed_folder(name)


def hashed_folder(name: str) -> str:
    """A slug of ``name`` plus the first 10 hex digits of its SHA-256 (of the exact code points)."""
    slug = _slug(name, keep="._-", sep="_", lower=False, max_len=60, empty="x")
    digest = hashlib.sha256(name.encode("utf-8", errors="surrogatepass")).hexdigest()[:10]
    return f"{slug}-{digest}"


def folder_name(name: str) -> str:
    """The folder a benchmark named ``name`` gets in a new tree: distinct under case folding.

    A plain name (:func:`is_plain_folder`) that is all lower case is kept; any other name, one
    with a capital letter included, is hashed (:func:`safe_component`'s slug plus digest).
    Kept names are ASCII, lower case and never end in ``-<10 hex digits>``; hashed ones always
    do, with a digest of the exact name, so two different names (``Case`` and ``case``, or the
    NFC and NFD spellings of one word) never get folders that a case-insensitive or
    normalising filesystem would take for one.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string; got {name!r}")
    return name if is_plain_folder(name) and name == name.lower() else hashed_folder(name)


def folder_candidates(name: str) -> frozenset[str]:
    """Every folder benchcert ever gives benchmark ``name``: its hashed folder, and the name
    itself when it is plain (kept by earlier benchcert versions whatever its case).  The sets of
    two different names are disjoint (plain names never end like a hashed one)."""
    hashed = hashed_folder(folder_name(name) and name)  # (folder_name validates the name)
    return frozenset({hashed, name}) if is_plain_folder(name) else frozenset({hashed})


def benchmark_folder(root: str | os.PathLike, name: str) -> str:
    """The folder of benchmark ``name`` under ``root``, where its runs are written and found.

    1. A folder already on disk under one of the name's own :func:`folder_candidates` (listed
       by exact name, so a case-insensitive filesystem cannot answer for another spelling) is
       kept: trees written by earlier versions (``MMLU/``) keep their folders and runs.
    2. Otherwise :func:`folder_name`, except that a lower-case plain name whose folder would
       fold onto another entry of ``root`` (an earlier version's ``MMLU/`` when ``mmlu`` is
       new) is hashed instead.

    A new capitalised name is always hashed and a lower-case one is the only plain spelling of
    its case-fold class, so no two benchmarks share a folder on any filesystem, and a folder,
    once made, never moves when other benchmarks come or go.
    """
    root = Path(root)
    try:
        entries = set(os.listdir(root))
    except (FileNotFoundError, NotADirectoryError):
        entries = set()
    cands = folder_candidates(name)
    hashed = hashed_folder(name)
    for folder in sorted(cands, key=lambda f: f != name):  # an earlier version's plain folder first
        if folder in entries:
            return folder
    folder = folder_name(name)
    if folder != hashed and any(e.casefold() == folder.casefold() for e in entries):
        return hashed
    return folder


def inside(root: Path, *parts: str) -> Path:
    """root/parts..., refusing any result outside root (defence in depth beside safe_component)."""
    root_r = root.resolve()
    target = root_r.joinpath(*parts).resolve()
    if target != root_r and root_r not in target.parents:
        raise ValueError(f"path {target} would escape {root_r}")
    return target
