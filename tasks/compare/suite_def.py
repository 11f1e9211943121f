"""Suites: a named list of benchmarks with optional weights, kept in the store or given in a TOML file.

    benchcert suite define NAME B1 B2 ... [--weights W1,W2,...] --db F   # store it (replaces NAME)
    benchcert suite list --db F
    benchcert suite show NAME --db F [--json]
    benchcert compare A B --db F --suite NAME | --suite FILE.toml | --suite all

A TOML file holds ``name = "..."``, ``benchmarks = ["b1", "b2", ...]`` and, optionally,
``weights = [1.0, 2.0, ...]`` (one per benchmark, >= 0, not all 0; normalised to sum 1 when the
suite score is computed). ``--suite all`` is every benchmark on which both models have responses.
Weights default to 1 each (the suite score is then the plain mean of the benchmarks' gaps).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from benchcert.tasks.errors import DataError, NoDataError, UsageError
from benchcert.tasks.store import DEFAULT_LOCK_TIMEOUT

__all__ = ["Suite", "SuiteError", "check_suite", "define", "show", "list_all", "resolve"]


class SuiteError(NoDataError):
    """No such suite, or a suite that names no benchmark the models have (exit code 1)."""


@dataclass(frozen=True)
class Suite:
    """A suite: its name, benchmarks in order, their weights, and where it came from.

    Attributes
    ----------
    name : str
    benchmarks : tuple of str
    weights : tuple of float
        One per benchmark (as given; normalised only where the suite score is computed).
    source : str
        ``store``, ``file:PATH`` or ``all``.
    """

    name: str
    benchmarks: tuple[str, ...]
    weights: tuple[float, ...]
    source: str = "store"

    def as_dict(self) -> dict:
        return {"name": self.name, "benchmarks": list(self.benchmarks), "weights": list(self.weights),
                "source": self.source}


def check_suite(name: str, benchmarks, weights=None, *, where: str = "suite") -> Suite:
    """A checked :class:`Suite` (UsageError naming ``where`` and the field when it is not one)."""
    if not isinstance(name, str) or not name.strip() or name == "all":
        raise UsageError(f"{where}: name must be a non-empty string other than 'all'; got {name!r}")
    bs = list(benchmarks) if isinstance(benchmarks, (list, tuple)) else None
    if not bs or not all(isinstance(b, str) and b for b in bs):
        raise UsageError(f"{where}: benchmarks must be a non-empty list of benchmark names; got {benchmarks!r}")
    if len(set(bs)) != len(bs):
        dup = sorted({b for b in bs if bs.count(b) > 1})
        raise UsageError(f"{where}: benchmarks must be distinct; {dup} appear more than once")
    if weights is None:
        ws = [1.0] * len(bs)
    else:
        try:
            ws = [float(w) for w in weights]
        except (TypeError, ValueError) as exc:
            raise UsageError(f"{where}: weights must be numbers; got {weights!r}") from exc
        if len(ws) != len(bs):
            raise UsageError(f"{where}: weights must have one value per benchmark ({len(bs)}); got {len(ws)}")
        if any(not math.isfinite(w) or w < 0 for w in ws) or sum(ws) <= 0:
            raise UsageError(f"{where}: weights must be finite, >= 0 and not all 0; got {ws}")
    return Suite(name=name, benchmarks=tuple(bs), weights=tuple(ws))


def _from_toml(path: Path) -> Suite:
    import tomllib

    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: cannot read the suite file: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise DataError(f"{path}: not a TOML suite file: {exc}") from exc
    unknown = sorted(set(doc) - {"name", "benchmarks", "weights"})
    if unknown:
        raise DataError(f"{path}: unknown field(s) {unknown}; a suite file holds name, benchmarks and weights")
    try:
        s = check_suite(doc.get("name", path.stem), doc.get("benchmarks"), doc.get("weights"), where=str(path))
    except UsageError as exc:
        raise DataError(str(exc)) from exc
    return Suite(s.name, s.benchmarks, s.weights, source=f"file:{path}")


def define(db, name: str, benchmarks, weights=None, *, lock_timeout: float = DEFAULT_LOCK_TIMEOUT) -> Suite:
    """Store suite ``name`` (replacing one of that name)."""
    from benchcert.tasks.store.connection import open_store
    from benchcert.tasks.store.suites import define_suite

    s = check_suite(name, benchmarks, weights)
    with open_store(db, write=True, lock_timeout=lock_timeout) as con:
        define_suite(con, s.name, list(s.benchmarks), list(s.weights))
    return s


def _stored(con, name: str) -> Suite:
    from benchcert.tasks.store.suites import list_suites, read_suite

    rows = read_suite(con, name)
    if rows.height == 0:
        known = list_suites(con)["suite"].to_list()
        raise SuiteError(f"no suite {name!r} in the store (known: {known or 'none'}); define it with "
                         f"`benchcert suite define {name} B1 B2 ...`, or give a TOML file or --suite all")
    return Suite(name=name, benchmarks=tuple(rows["benchmark"].to_list()), weights=tuple(rows["weight"].to_list()))


def show(db, name: str, *, lock_timeout: float = DEFAULT_LOCK_TIMEOUT) -> Suite:
    """The stored suite ``name`` (SuiteError when there is none)."""
    from benchcert.tasks.store.connection import open_store

    with open_store(db, write=False, lock_timeout=lock_timeout) as con:
        return _stored(con, name)


def list_all(db, *, lock_timeout: float = DEFAULT_LOCK_TIMEOUT) -> list[dict]:
    """Every stored suite: name, n_benchmarks, defined_at (ISO text)."""
    from benchcert.tasks.store.connection import open_store
    from benchcert.tasks.store.suites import list_suites

    with open_store(db, write=False, lock_timeout=lock_timeout) as con:
        rows = list_suites(con).to_dicts()
    return [{**r, "defined_at": None if r["defined_at"] is None else r["defined_at"].isoformat()} for r in rows]


def resolve(db, spec: str, models: list[str], *, lock_timeout: float = DEFAULT_LOCK_TIMEOUT) -> Suite:
    """The suite ``--suite`` names: ``all`` (every benchmark all ``models`` have), a ``.toml`` file,
    or a suite stored in ``db``."""
    from benchcert.tasks.store.connection import open_store
    from benchcert.tasks.store.suites import shared_benchmarks

    if spec.endswith(".toml"):
        path = Path(spec)
        if not path.is_file():
            raise UsageError(f"--suite {spec}: no such suite file")
        return _from_toml(path)
    with open_store(db, write=False, lock_timeout=lock_timeout) as con:
        if spec == "all":
            found = shared_benchmarks(con, models)
            if not found:
                raise SuiteError(f"--suite all: no benchmark has responses from all of {models}")
            return Suite(name="all", benchmarks=tuple(found), weights=(1.0,) * len(found), source="all")
        return _stored(con, spec)
