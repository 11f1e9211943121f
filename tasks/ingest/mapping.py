"""Column mapping: which column of a log file, or which expression over its columns, feeds
which canonical field.

Given by repeated ``--map FIELD=VALUE`` flags, by a small TOML file::

    format = "csv"            # optional: csv | jsonl | json | parquet (default: from the extension)
    [map]
    item_id = "question_id"
    score = "preference - 1"
    benchmark = "'alpaca_eval_2'"

or both (flags win).  A canonical field that is not mapped is read from the column of the
same name when the file has one; otherwise optional fields take their defaults.

A mapped VALUE that names a column of the file is that column (whatever characters the name
holds).  Otherwise it is a SQL expression over the file's columns, evaluated by Polars
(``polars.sql_expr``): arithmetic (``preference - 1``), concatenation
(``exam || '/' || problem_id``), a constant (``'alpaca_eval_2'``), CASE, CAST and Polars' SQL
functions; quote a column name that is not a plain identifier as ``"my col"``.  Text columns
of CSV and JSONL files are read as text; where an expression does arithmetic or comparison on
one whose values are numbers, it is read as a floating-point number (a value that is not a
number becomes missing, and its row is rejected with its line).  A CSV file has no way to write
a missing value but a blank cell, so in a CSV file's expressions a blank cell is NULL: ``--map
"parsed=pred IS NOT NULL"`` says the same of a CSV file as of a JSONL or Parquet one.  An
expression that does not parse, or names a column the file lacks, is a usage error that names
the token or column.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from benchcert.tasks.errors import UsageError
from benchcert.tasks.ingest.adapters.registry import GENERIC_FORMATS
from benchcert.tasks.schemas import CANONICAL_FIELDS

FORMATS = GENERIC_FORMATS  # the table formats; the native ones are the adapter registry's


class MappingError(UsageError):
    """A column mapping that cannot be used (unknown field, bad syntax, bad TOML): a usage error (exit 2)."""


@dataclass(frozen=True)
class ColumnMapping:
    columns: dict[str, str] = field(default_factory=dict)  # canonical field -> file column
    format: str | None = None
    model: str | None = None  # --model: every row's model (a table's model column, a native log's own name)
    records: str | None = None  # --records: the field of a JSON object holding the records
    # --replace-human-labels: a human score contradicting a stored one replaces it (the old value kept in
    # the store's human_label_changes) instead of refusing the file. A write policy, not a reading option,
    # carried with the mapping as --model is, so every path of an ingest (one file, runs, flows) has it.
    replace_human_labels: bool = False

    def _all(self) -> dict[str, str]:
        if self.model is None:
            return self.columns
        return {**self.columns, "model": sql_literal(self.model)}

    def column_for(self, canonical: str, available: list[str]) -> str | None:
        """The file column (or expression) feeding ``canonical``, or None when the file has none."""
        cols = self._all()
        if canonical in cols:
            return cols[canonical]
        return canonical if canonical in available else None

    def as_dict(self) -> dict:
        return {"map": dict(self.columns), "format": self.format, "model": self.model, "records": self.records,
                "replace_human_labels": self.replace_human_labels}

    def expressions(self, available: list[str], origin: str = "") -> dict[str, str]:
        """Mapped fields whose value is no column of the file: {field: expression}, each checked
        (it parses, and every column it names is in ``available``); MappingError otherwise."""
        out = {}
        for f, value in self._all().items():
            if value in available:
                continue
            expr = compile_expression(value, f"--map {f}={value!r}")
            missing = [c for c in expression_columns(value) if c not in available]
            if missing:
                where = f"{origin}: " if origin else ""
                raise MappingError(f"{where}--map {f}={value!r}: the file has no column "
                                   f"{', '.join(map(repr, missing))} (its columns are {available})")
            out[f] = value
            del expr
        return out


#: SQL function names Polars lacks, read as the Polars function of the same meaning (outside quotes):
#: ``to_timestamp(text, format)`` (a strftime format, e.g. ``'%Y-%m-%d %H:%M'``) is ``strptime``.
ALIASES = {"to_timestamp": "strptime"}


def _with_aliases(text: str) -> str:
    parts = re.split(r"('(?:[^']|'')*')", text)  # quoted literals at odd positions stay as they are
    for i in range(0, len(parts), 2):
        for alias, name in ALIASES.items():
            parts[i] = re.sub(rf"(?i)\b{alias}\s*\(", f"{name}(", parts[i])
    return "".join(parts)


@lru_cache(maxsize=256)
def _parse(text: str):
    import polars as pl

    return pl.sql_expr(_with_aliases(text))


def _syntax_hint(text: str) -> str:
    """Where SQL parsing stops, from the parser's own message (\"found: X at column N\"), if it says."""
    import polars as pl

    try:
        pl.SQLContext(frames={"t": pl.LazyFrame()}).execute(f"SELECT {text}\nFROM t", eager=False)
    except pl.exceptions.PolarsError as exc:
        m = re.search(r"found: (.+?) at Line: (\d+), Column: (\d+)", str(exc))
        if m:
            if m.group(1) == "FROM" or m.group(2) != "1":
                return " (the expression ends too early)"
            return f" (unexpected {m.group(1)} at character {int(m.group(3)) - len('SELECT ')})"
        m = re.search(r"(Unterminated string literal)", str(exc))
        if m:
            return f" ({m.group(1).lower()})"
    return ""


def compile_expression(text: str, origin: str):
    """``text`` as a Polars expression, or a MappingError naming ``origin`` and what did not parse."""
    import polars as pl

    try:
        return _parse(text)
    except pl.exceptions.PolarsError as exc:  # polars' SQL errors (SQLInterfaceError, SQLSyntaxError, ...)
        reason = " ".join(str(exc).split())
        raise MappingError(f"{origin}: not a column of the file, and not a valid SQL expression: {reason}"
                           f"{_syntax_hint(text)}") from None


def expression_columns(text: str) -> list[str]:
    """The source columns an expression reads."""
    return list(dict.fromkeys(_parse(text).meta.root_names()))


def evaluate(frame, expressions: dict[str, str], origin: str = "", *, blank_is_null: bool = False):
    """Add one column per expression (named by its text) to ``frame``.

    ``blank_is_null`` (a CSV file): the text columns the expressions read hold NULL where a cell
    is blank, as JSONL and Parquet write a missing value.

    Tried on the columns as read first; where Polars refuses the types (arithmetic on text), the
    text columns the expression reads whose values are numbers (or that are blank throughout) are
    read as Float64 (a value that is not a number becomes null) and it is tried again.
    """
    import polars as pl

    if blank_is_null:
        read = {c for e in expressions.values() for c in expression_columns(e)}
        frame = frame.with_columns(pl.when(pl.col(c).str.strip_chars() != "").then(pl.col(c)).alias(c)
                                   for c in read if frame.schema[c] == pl.String)
    out = []
    for name in dict.fromkeys(expressions.values()):
        expr = _parse(name)
        try:
            out.append(frame.with_columns(expr.alias(name))[name])  # with_columns broadcasts a constant
            continue
        except pl.exceptions.ColumnNotFoundError as exc:
            raise MappingError(f"{origin}{name!r}: {' '.join(str(exc).split()[:12])}") from None
        except (pl.exceptions.InvalidOperationError, pl.exceptions.ComputeError,
                pl.exceptions.SchemaError) as exc:
            first_error = exc
        numeric = []
        for c in expression_columns(name):
            if frame.schema[c] == pl.String:
                text = frame[c].str.strip_chars()
                as_number = text.cast(pl.Float64, strict=False)
                # Some values are numbers, or none is given at all (a batch of a sparse column such
                # as human_score, where every row is blank: missing, not text).
                if as_number.null_count() < frame.height or (text.is_null() | (text == "")).all():
                    numeric.append(as_number.alias(c))
        try:
            out.append(frame.with_columns(numeric).with_columns(expr.alias(name))[name])
        except pl.exceptions.PolarsError:
            reason = " ".join(str(first_error).split("\n")[0].split())
            raise MappingError(f"{origin}cannot evaluate {name!r}: {reason}") from None
    return frame.with_columns(out)


def sql_literal(text: str) -> str:
    """``text`` as a SQL string constant."""
    return "'" + text.replace("'", "''") + "'"


def _check_field(name: str, origin: str) -> None:
    from benchcert.tasks.ingest.adapters.probs import is_probability_field

    if name not in CANONICAL_FIELDS and not is_probability_field(name):
        raise MappingError(f"{origin}: unknown canonical field {name!r}; fields are {', '.join(CANONICAL_FIELDS)}, "
                          "and prob_<option> / option, prob / label / confidence for probabilities")


def is_identifier(value: str) -> bool:
    return re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", value) is not None


def _looks_like_expression(value: str) -> bool:
    """Quotes, ``||``, or an operator at either end: text no log writes as a column name."""
    v = value.strip()
    return ("'" in v or "||" in v or v[:1] in "+-*/=<>%" or v[-1:] in "+-*/=<>%,(" or v.count("(") != v.count(")")
            or re.search(r"[A-Za-z_]\(", v) is not None)


def parse_mapping(pairs: list[str] | None = None, config: str | Path | None = None,
                  fmt: str | None = None) -> ColumnMapping:
    """Build a mapping from a TOML file and FIELD=COLUMN pairs (pairs override the file)."""
    columns: dict[str, str] = {}
    origins: dict[str, str] = {}
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
            if not isinstance(col, str) or not col.strip():
                raise MappingError(f"{path}: map.{key} must be a non-empty column name or expression; got {col!r}")
            columns[key], origins[key] = col, f"{path}: map.{key} = {col!r}"
        file_format = data.get("format")
    for pair in pairs or []:
        if "=" not in pair:
            raise MappingError(f"--map {pair!r}: expected FIELD=COLUMN or FIELD=EXPRESSION")
        key, col = (s.strip() for s in pair.split("=", 1))
        _check_field(key, f"--map {pair!r}")
        if not col:
            raise MappingError(f"--map {pair!r}: empty column name")
        columns[key], origins[key] = col, f"--map {key}={col!r}"
    for key, value in columns.items():
        if not is_identifier(value):
            # Parsed now, so a broken expression is a usage error before any file is read; a
            # value that does not parse may still be an odd column name (checked per file).
            from polars.exceptions import PolarsError

            try:
                _parse(value)
            except PolarsError:
                if _looks_like_expression(value):
                    compile_expression(value, origins[key])
    chosen = fmt or file_format
    if chosen is not None and chosen not in FORMATS:
        raise MappingError(f"format must be one of {', '.join(FORMATS)}; got {chosen!r}")
    return ColumnMapping(columns=columns, format=chosen)
