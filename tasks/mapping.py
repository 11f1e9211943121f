"""Column mapping: which column of a log file feeds which canonical field.

Given by repeated ``--map FIELD=COLUMN`` flags, by a small TOML file::

    format = "csv"            # optional: csv | jsonl | parquet (default: from the extension)
    [map]
    item_id = "question_id"
    score = "correct"

or both (flags win).  A canonical field that is not mapped is read from the column of the
same name when the file has one; otherwise optional fields take their defaults.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from benchcert.tasks.schemas import CANONICAL_FIELDS

FORMATS = ("csv", "jsonl", "parquet")


class MappingError(ValueError):
    """A column mapping that cannot be used (unknown field, bad syntax, bad TOML)."""


@dataclass(frozen=True)
class ColumnMapping:
    columns: dict[str, str] = field(default_factory=dict)  # canonical field -> file column
    format: str | None = None

    def column_for(self, canonical: str, available: list[str]) -> str | None:
        """The file column feeding ``canonical``, or None when the file has none."""
        if canonical in self.columns:
            return self.columns[canonical]
        return canonical if canonical in available else None

    def as_dict(self) -> dict:
        return {"map": dict(self.columns), "format": self.format}


def _check_field(name: str, origin: str) -> None:
    from benchcert.tasks.adapters.probs import is_probability_field

    if name not in CANONICAL_FIELDS and not is_probability_field(name):
        raise MappingError(f"{origin}: unknown canonical field {name!r}; fields are {', '.join(CANONICAL_FIELDS)}, "
                          "and prob_<option> / option, prob / label for option probabilities")


def parse_mapping(pairs: list[str] | None = None, config: str | Path | None = None,
                  fmt: str | None = None) -> ColumnMapping:
    """Build a mapping from a TOML file and FIELD=COLUMN pairs (pairs override the file)."""
    columns: dict[str, str] = {}
    file_format = None
    if config is not None:
        path = Path(config)
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise MappingError(f"{path}: mapping file not found") from None
        except tomllib.TOMLDecodeError as exc:
            raise MappingError(f"{path}: not valid TOML: {exc}") from None
        unknown = set(data) - {"map", "format"}
        if unknown:
            raise MappingError(f"{path}: unknown keys {sorted(unknown)}; allowed: format, [map]")
        for key, col in (data.get("map") or {}).items():
            _check_field(key, str(path))
            if not isinstance(col, str) or not col:
                raise MappingError(f"{path}: map.{key} must be a non-empty column name; got {col!r}")
            columns[key] = col
        file_format = data.get("format")
    for pair in pairs or []:
        if "=" not in pair:
            raise MappingError(f"--map {pair!r}: expected FIELD=COLUMN")
        key, col = (s.strip() for s in pair.split("=", 1))
        _check_field(key, f"--map {pair!r}")
        if not col:
            raise MappingError(f"--map {pair!r}: empty column name")
        columns[key] = col
    chosen = fmt or file_format
    if chosen is not None and chosen not in FORMATS:
        raise MappingError(f"format must be one of {', '.join(FORMATS)}; got {chosen!r}")
    return ColumnMapping(columns=columns, format=chosen)
