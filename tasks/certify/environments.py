"""An environments file: the mixes of a benchmark's domains or subjects a model is certified on.

The TOML file (see :mod:`benchcert.tasks.certify.service` for its shape) is read, checked entry by
entry (:class:`EnvironmentsError` names the file and the entry) and resolved against the benchmark's
atoms into a weight matrix.  The certificate and plan services build on it.
"""

from __future__ import annotations

import math
import numbers
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from benchcert.tasks.errors import UsageError

LEVELS = ("domain", "subject")
WEIGHT_TOL = 1e-6


class EnvironmentsError(UsageError):
    """An environments file, or its use, is wrong; the message names the file and the entry.

    A usage error (exit code 2) in every command: the file is an option's value, read before the
    benchmark, and a file that does not fit the benchmark or the plan is corrected in the file, as
    a ``--map`` that names no column is.  A plan the store does not hold is :class:`UnknownPlanError`.
    """


# --------------------------------------------------------------------------------------
# the file


@dataclass(frozen=True)
class EnvironmentSpec:
    """Parsed environments: level, named weight mixes and an optional family (its vertices)."""

    source: str
    level: str
    environments: dict[str, dict[str, float]]
    family_name: str | None = None
    family_kind: str | None = None            # "simplex" | "hull"
    family_vertices: dict[str, dict[str, float]] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"source": self.source, "level": self.level, "environments": self.environments,
                "family_name": self.family_name, "family_kind": self.family_kind,
                "family_vertices": self.family_vertices}

    @classmethod
    def from_dict(cls, d: dict) -> "EnvironmentSpec":
        return cls(source=d["source"], level=d["level"], environments=d["environments"],
                   family_name=d.get("family_name"), family_kind=d.get("family_kind"),
                   family_vertices=d.get("family_vertices") or {})

    def rows(self) -> list[tuple[str, dict[str, float], bool]]:
        """(name, weights, is_family_vertex) for every environment the union bound covers."""
        out = [(n, w, False) for n, w in self.environments.items()]
        if self.family_kind == "simplex":
            out += [(n, w, True) for n, w in self.family_vertices.items()]
        return out

    def vertex_names(self) -> list[str]:
        return list(self.family_vertices)

    def atoms_used(self) -> list[str]:
        seen: dict[str, None] = {}
        for _, w, _ in self.rows():
            for a, v in w.items():
                if v > 0:
                    seen[a] = None
        return list(seen)


def _err(source: str, where: str, msg: str) -> EnvironmentsError:
    return EnvironmentsError(f"{source}: {where}: {msg}")


def read_environments(path) -> EnvironmentSpec:
    """Read and check an environments TOML file (shape, weights); atoms are checked by :func:`resolve`."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise EnvironmentsError(f"{p}: cannot read the environments file: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise EnvironmentsError(f"{p}: not valid TOML: {exc}") from None
    return parse_environments(data, str(p))


def _weights(source: str, where: str, w) -> dict[str, float]:
    if not isinstance(w, dict) or not w:
        raise _err(source, where, "weights must be a non-empty table of name = weight")
    out = {}
    for k, v in w.items():
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v):
            raise _err(source, f"{where}.{k}", f"weight must be a finite number; got {v!r}")
        if v < 0:
            raise _err(source, f"{where}.{k}", f"weight must be >= 0; got {v!r}")
        out[str(k)] = float(v)
    total = sum(out.values())
    if abs(total - 1.0) > WEIGHT_TOL:
        raise _err(source, where, f"weights must sum to 1; they sum to {total:.6g}")
    return out if total == 1.0 else {k: v / total for k, v in out.items()}


def parse_environments(data: dict, source: str = "<environments>") -> EnvironmentSpec:
    """Check the parsed TOML content; every error names the entry (``[environments.NAME]`` ...)."""
    if not isinstance(data, dict):
        raise _err(source, "top level", "expected a TOML table")
    unknown = set(data) - {"level", "environments", "family"}
    if unknown:
        raise _err(source, "top level", f"unknown key(s) {sorted(unknown)}; expected level, [environments.NAME], "
                                        "[family]")
    level = data.get("level", "domain")
    if level not in LEVELS:
        raise _err(source, "level", f"must be \"domain\" or \"subject\"; got {level!r}")
    envs_raw = data.get("environments", {})
    if not isinstance(envs_raw, dict):
        raise _err(source, "environments", "must be tables [environments.NAME] with weights = {...}")
    envs = {}
    for name, body in envs_raw.items():
        where = f"[environments.{name}]"
        if not isinstance(body, dict) or set(body) != {"weights"}:
            raise _err(source, where, "must hold exactly one key, weights = { name = weight, ... }")
        envs[str(name)] = _weights(source, f"{where} weights", body["weights"])
    fam = data.get("family")
    fname = fkind = None
    vertices: dict[str, dict[str, float]] = {}
    if fam is not None:
        if not isinstance(fam, dict):
            raise _err(source, "[family]", "must be a table")
        bad = set(fam) - {"name", "simplex", "hull"}
        if bad or ("simplex" in fam) == ("hull" in fam):
            raise _err(source, "[family]", "give exactly one of simplex = [names] or hull = [environments] "
                                           "(and optionally name = \"...\")")
        fname = str(fam.get("name", "family"))
        if fname in envs:
            raise _err(source, "[family] name", f"{fname!r} is also an environment's name")
        fkind = "simplex" if "simplex" in fam else "hull"
        members = fam[fkind]
        if not isinstance(members, list) or len(members) < 2 or not all(isinstance(x, str) for x in members):
            raise _err(source, f"[family] {fkind}", "must list at least two names")
        if len(set(members)) != len(members):
            raise _err(source, f"[family] {fkind}", f"names must be distinct; got {members}")
        if fkind == "simplex":
            vertices = {f"{fname}:{a}": {a: 1.0} for a in members}
        else:
            missing = [x for x in members if x not in envs]
            if missing:
                raise _err(source, "[family] hull", f"unknown environment(s) {missing}; defined: {sorted(envs)}")
            vertices = {x: envs[x] for x in members}
    if not envs and not vertices:
        raise _err(source, "environments", "define at least one [environments.NAME] or a [family]")
    return EnvironmentSpec(source=source, level=level, environments=envs, family_name=fname, family_kind=fkind,
                           family_vertices=vertices)


def resolve(spec: EnvironmentSpec, atoms: list[str]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(names, P (rows x atoms), is_vertex) for the benchmark's atoms; unknown names are an error."""
    index = {a: i for i, a in enumerate(atoms)}
    names, rows, vert = [], [], []
    for name, w, is_v in spec.rows():
        row = np.zeros(len(atoms))
        for a, v in w.items():
            if a not in index:
                where = (f"[family] simplex entry {a!r}" if is_v and spec.family_kind == "simplex"
                         else f"[environments.{name}] weights.{a}")
                raise _err(spec.source, where, f"unknown {spec.level} {a!r}; the benchmark's {spec.level}s: "
                                               f"{', '.join(sorted(atoms))}")
            row[index[a]] = v
        names.append(name)
        rows.append(row / row.sum())
        vert.append(is_v)
    return names, np.array(rows), np.array(vert, dtype=bool)
