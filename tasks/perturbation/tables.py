"""The perturbation test's design tables, kept on disk: calibrations and smallest detectable gaps.

Both depend on the design only (null variants, replicate counts, alpha), never on the data, and
cost seconds each (stats/perturbation/calibrated.py ``calibration``, item_test.py ``_min_gap``).
They are looked up, in this order, in the table shipped with the package (``calibrations.json``
here: the common designs and those of the bundled data, made by tools/perturbation_tables.py)
and in the user's cache folder; what a run computes anew is added to the cache folder when it ends.

The cache folder is ``$BENCHCERT_CACHE_DIR/perturbation`` (``off`` keeps nothing on disk), else
``$XDG_CACHE_HOME/benchcert/perturbation``, else ``~/.cache/benchcert/perturbation``.  Each run
writes its own file (a unique name, written to a temporary file in the same folder and renamed),
so concurrent runs never overwrite each other and a reader never sees half a file; unreadable
files are skipped (their designs are computed again).  Files of another table version are ignored.
``BENCHCERT_SHIPPED_TABLES=0`` ignores the shipped table (benchmarks/perturb_latency.py measures
the uncached time with it).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import uuid
from pathlib import Path

from benchcert.tasks.atomic_write import write_text_atomic

ENV_DIR = "BENCHCERT_CACHE_DIR"
ENV_SHIPPED = "BENCHCERT_SHIPPED_TABLES"
SHIPPED = "calibrations.json"
#: More files than this in the cache folder are merged into one when a run ends.
MERGE_AFTER = 16

_loaded: set[str] = set()


def cache_dir() -> Path | None:
    """The cache folder (None: ``BENCHCERT_CACHE_DIR=off``)."""
    env = os.environ.get(ENV_DIR)
    if env is not None and env.strip().lower() == "off":
        return None
    if env:
        return Path(env).expanduser() / "perturbation"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "benchcert" / "perturbation"


def _version() -> int:
    from benchcert.stats.perturbation.calibrated import CALIBRATION_VERSION

    return CALIBRATION_VERSION


def _z(value) -> float:
    return math.inf if value is None else float(value)


def _register(data: dict) -> None:
    from benchcert.stats.perturbation.calibrated import register_calibrations
    from benchcert.stats.perturbation.item_test import register_min_gaps

    if data.get("version") != _version():
        return
    register_calibrations((m, r, rt, a, _z(z)) for m, r, rt, a, z in data.get("calibrations", ()))
    register_min_gaps((reps, rt, a, s, _z(g)) for reps, rt, a, s, g in data.get("min_gaps", ()))


def _read(path) -> dict | None:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None                    # gone (merged by another run) or unreadable: computed again
    return data if isinstance(data, dict) else None


def shipped_table() -> dict | None:
    """The package's table (None when ``BENCHCERT_SHIPPED_TABLES=0`` or absent)."""
    if os.environ.get(ENV_SHIPPED, "1").strip() == "0":
        return None
    from importlib.resources import files

    try:
        return json.loads((files("benchcert.tasks.perturbation") / SHIPPED).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def load() -> None:
    """Register the shipped table and every readable cache file (once per process and folder)."""
    folder = cache_dir()
    tag = f"{os.environ.get(ENV_SHIPPED, '1')}|{folder}"
    if tag in _loaded:
        return
    _loaded.add(tag)
    for data in [shipped_table(), *(_read(p) for p in _files(folder))]:
        if data:
            with contextlib.suppress(ValueError, TypeError):   # a malformed file: its designs are recomputed
                _register(data)


def _files(folder: Path | None) -> list[Path]:
    if folder is None or not folder.is_dir():
        return []
    return sorted(folder.glob(f"tables-v{_version()}-*.json"))


def _as_json(z: float):
    return None if not math.isfinite(z) else z


def save() -> Path | None:
    """Write what this process computed anew to a file of its own in the cache folder (None: nothing
    new, or no folder).  A folder that cannot be written leaves the run's results untouched."""
    from benchcert.stats.perturbation.calibrated import computed_calibrations
    from benchcert.stats.perturbation.item_test import computed_min_gaps

    folder = cache_dir()
    cal, gaps = computed_calibrations(), computed_min_gaps()
    if folder is None or not (cal or gaps):
        return None
    data = {"version": _version(), "calibrations": [[m, r, rt, a, _as_json(z)] for m, r, rt, a, z in cal],
            "min_gaps": [[reps, rt, a, s, _as_json(g)] for reps, rt, a, s, g in gaps]}
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path = _write(folder, data)
        _merge(folder)
    except OSError:
        return None
    from benchcert.stats.perturbation.calibrated import register_calibrations
    from benchcert.stats.perturbation.item_test import register_min_gaps

    register_calibrations(cal)       # saved: known from now on, not written again by this process
    register_min_gaps(gaps)
    _forget_computed()
    return path


def _forget_computed() -> None:
    from benchcert.stats.perturbation import calibrated, item_test

    calibrated._COMPUTED.clear()
    item_test._COMPUTED_GAPS.clear()


def _write(folder: Path, data: dict) -> Path:
    """``data`` as a new file of its own: written to a temporary file in the folder, then renamed."""
    return write_text_atomic(folder / f"tables-v{data['version']}-{uuid.uuid4().hex}.json", json.dumps(data))


def _merge(folder: Path) -> None:
    """More than :data:`MERGE_AFTER` files: one new file with all their entries, then the old ones removed
    (a reader that lists a removed file skips it; its entries are in the new one)."""
    files = _files(folder)
    if len(files) <= MERGE_AFTER:
        return
    cal, gaps = {}, {}
    for p in files:
        data = _read(p) or {}
        for row in data.get("calibrations", ()):
            cal[tuple(row[:4])] = row
        for row in data.get("min_gaps", ()):
            gaps[(tuple(row[0]), *row[1:4])] = row
    _write(folder, {"version": _version(), "calibrations": list(cal.values()), "min_gaps": list(gaps.values())})
    for p in files:
        with contextlib.suppress(FileNotFoundError):
            p.unlink()


@contextlib.contextmanager
def design_tables():
    """Around a computation that calibrates: known tables registered before, new entries saved after."""
    load()
    try:
        yield
    finally:
        save()
