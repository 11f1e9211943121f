"""The exact worst-case subsample half-widths h*(n, N, alpha), computed once and kept.

h* (the exchangeable-bounds paper's exact worst case over every binary response vector, from
the hypergeometric distribution; stats/subsample/worst_case.py, ``worst_case_halfwidth``) depends only on
(n, N, alpha), yet costs most of the audit's subsample step (0.67 of 0.88 s on MMLU-Pro, 4.4 s
at N = 100,000).  So the values are kept in a small JSON file beside the store,
``<store>.cache/worst_case.json``, and a repeated audit reads them instead.

The file is keyed by the SHA-256 of stats/subsample/worst_case.py and hypergeom.py: when the code
that computes h* changes, the old values are not used.  It is written atomically (a temporary file renamed into place);
two audits writing at once may each miss the other's new entries, never corrupt the file.  A
missing, unreadable or foreign file is ignored (and rewritten), never an error.
"""

from __future__ import annotations

import hashlib
import json
import os
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path

from benchcert.tasks.atomic_write import write_text_atomic

FILE_NAME = "worst_case.json"


@lru_cache(maxsize=1)
def code_version() -> str:
    """Digest of the modules that compute h* (its values are only as good as that code)."""
    from benchcert.stats.subsample import hypergeom, worst_case

    digest = hashlib.sha256()
    for module in (worst_case, hypergeom):
        digest.update(Path(module.__file__).read_bytes())
    return digest.hexdigest()[:16]


def cache_path(db: str | os.PathLike) -> Path:
    db = Path(db)
    return db.with_name(db.name + ".cache") / FILE_NAME


def _key(n: int, N: int, alpha: float) -> str:
    return f"{int(n)}/{int(N)}/{float(alpha)!r}"


def load(db: str | os.PathLike | None) -> dict[str, list]:
    """Stored values {key: [half_width, worst_K]} for the current code, or {}."""
    if not db:
        return {}
    try:
        data = json.loads(cache_path(db).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("code") != code_version() or not isinstance(data.get("values"), dict):
        return {}
    return data["values"]


def save(db: str | os.PathLike | None, values: dict[str, list]) -> None:
    """Merge ``values`` into the file (best effort: a read-only folder just means no cache)."""
    if not db or not values:
        return
    path = cache_path(db)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        merged = {**load(db), **values}
        write_text_atomic(path, json.dumps({"code": code_version(), "values": merged}, sort_keys=True))
    except OSError:
        return


def exact_worst_case(n: int, N: int, alpha: float) -> tuple[float, int]:
    """h*(n, N, alpha) and its worst count K, computed now (stats/subsample.py)."""
    from benchcert.stats.subsample import worst_case_halfwidth

    w = worst_case_halfwidth(n, N, alpha=alpha)
    return float(w.half_width), int(w.worst_K)


def per_size(fn, grid: list[int]) -> dict:
    """``fn(n)`` for every subset size of the grid, the sizes spread over the machine's cores.

    The exact computations are numpy work on large arrays, which releases the GIL, so threads
    run them in parallel (about 2x on two cores; benchmarks/subsample.py measures it).  They
    are deterministic, so the results do not depend on the threads.
    """
    workers = min(len(grid), os.cpu_count() or 1)
    if workers <= 1:
        return {n: fn(n) for n in grid}
    with ThreadPoolExecutor(max_workers=workers) as pool:
        # Largest first: they take longest, so the pool finishes at about the same time.
        sizes = sorted(grid, reverse=True)
        return dict(zip(sizes, pool.map(fn, sizes)))


def worst_cases(grid: list[int], N: int, alpha: float, db=None, *,
                one=exact_worst_case) -> dict[int, tuple[float, int]]:
    """h* and its worst count K for every n of ``grid``: from the file beside ``db`` where present,
    the missing ones computed by ``one(n, N, alpha)`` (in parallel, :func:`per_size`) and kept.

    The one way the audit's subsample step, ``benchcert plan subsample`` and ``benchcert
    subsample`` obtain h*.  ``db`` None: nothing is read or kept.
    """
    N, alpha = int(N), float(alpha)
    stored = load(db)
    out: dict[int, tuple[float, int]] = {}
    missing = []
    for n in grid:
        v = stored.get(_key(n, N, alpha))
        if isinstance(v, list) and len(v) == 2:
            out[n] = (float(v[0]), int(v[1]))
        else:
            missing.append(n)
    if missing:
        fresh = per_size(lambda n: one(n, N, alpha), missing)
        out.update(fresh)
        save(db, {_key(n, N, alpha): [float(h), int(k)] for n, (h, k) in fresh.items()})
    return out
