"""A JSON file of records, read like JSONL: a top-level list of objects, or an object with one
list-of-objects field (``--records FIELD`` names it when there are several).

Public result files often come this way (a benchmark's ``{"performances": [{...}, ...]}``).
The format is ``json`` (``json:FIELD`` when ``--records`` names the field); the records are
the rows, each one's ``LINE`` is its 1-based position in the list, and every rule of the JSONL
reader applies to its fields (scalars only; a score is a JSON number or true/false).  The
whole document is parsed at once (it is one JSON value), within the decompression limits.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

import polars as pl

FORMAT = "json"


def format_name(records: str | None) -> str:
    """The format string of a JSON records file (``json``, or ``json:FIELD``)."""
    return FORMAT if not records else f"{FORMAT}:{records}"


def is_json_format(fmt: str | None) -> bool:
    return isinstance(fmt, str) and (fmt == FORMAT or fmt.startswith(FORMAT + ":"))


def _field(fmt: str) -> str | None:
    return fmt.split(":", 1)[1] if ":" in fmt else None


def _kind(value) -> str:
    return {dict: "object", list: "list", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number")


def records_of(obj, field: str | None, where: str) -> tuple[list, str]:
    """The list of records in a parsed document and a description of where it was found.

    Raises
    ------
    AdapterError
        The document holds no list of records (or several, and ``field`` names none), saying
        what it saw.
    """
    from benchcert.tasks.ingest.adapters.generic import AdapterError

    if isinstance(obj, list):
        if field:
            raise AdapterError(f"{where}: --records {field} names a field, but the file is a JSON list, not an object")
        if not obj:
            raise AdapterError(f"{where}: a JSON list with no records; nothing to ingest")
        if not any(isinstance(r, dict) for r in obj):
            raise AdapterError(f"{where}: a JSON list of {_kind(obj[0])}s, not of records (JSON objects)")
        return obj, "the top-level list"
    if not isinstance(obj, dict):
        raise AdapterError(f"{where}: a JSON {_kind(obj)}, not a list of records or an object holding one")
    lists = [k for k, v in obj.items() if isinstance(v, list) and v and isinstance(v[0], dict)]
    fields = ", ".join(list(obj)[:12]) + (", ..." if len(obj) > 12 else "")
    if field:
        if field not in obj:
            raise AdapterError(f"{where}: --records {field}: no such field; the object's fields are {fields}")
        value = obj[field]
        if not isinstance(value, list) or not any(isinstance(r, dict) for r in value):
            raise AdapterError(f"{where}: --records {field}: the field is a JSON {_kind(value)}, not a list of records")
        return value, f"field {field!r}"
    if not lists:
        raise AdapterError(f"{where}: a JSON object with fields {fields}, none of them a list of records "
                           "(JSON objects); nothing to ingest as rows")
    if len(lists) > 1:
        raise AdapterError(f"{where}: a JSON object with several lists of records ({', '.join(lists)}); "
                           "name the one to read with --records FIELD")
    return obj[lists[0]], f"field {lists[0]!r}"


def _first_text_line(fh) -> str:
    """The next line that is not blank (within five, each read up to 1 MiB), or ""."""
    line = ""
    for _ in range(5):
        line = fh.readline(1 << 20)
        if line.strip() or not line:
            break
    return line


@lru_cache(maxsize=2)
def _load(path: str, stamp: tuple, field: str | None) -> tuple[list, str]:
    from benchcert.tasks.ingest.adapters import generic

    with generic.open_binary(Path(path)) as fh:
        data = fh.read()
    try:
        obj = generic.loads_json(data)
    except UnicodeDecodeError as exc:
        raise generic.not_utf8(Path(path), exc) from None
    except ValueError as exc:
        raise generic.AdapterError(f"{path}: a .json file that is not valid JSON ({generic.json_problem(exc)}); "
                                   "nothing from this file is stored") from None
    return records_of(obj, field, path)


def load(path: Path, fmt: str) -> tuple[list, str]:
    """The records of the file (parsed once for the few readers of one ingest) and where they are."""
    st = Path(path).stat()
    return _load(str(path), (st.st_mtime_ns, st.st_size, st.st_ino), _field(fmt))


def columns(path: Path, fmt: str) -> list[str]:
    """The keys of the first record that is an object."""
    rows, _ = load(path, fmt)
    return list(next(r for r in rows if isinstance(r, dict)))


def batches(path: Path, fmt: str, columns: list[str], batch_rows: int, numbers: tuple[str, ...]) -> Iterator:
    """The records as raw batches: every column as text, as the JSONL reader gives them."""
    from benchcert.tasks.ingest.adapters.generic import LINE, RawBatch, Reject, object_values

    rows, _ = load(path, fmt)
    for start in range(0, len(rows), batch_rows):
        cols: dict[str, list] = {c: [] for c in columns}
        lines: list[int] = []
        rejects: list[Reject] = []
        for number, obj in enumerate(rows[start:start + batch_rows], start=start + 1):
            if not isinstance(obj, dict):
                rejects.append(Reject(number, "<row>", f"expected a JSON object, got {_kind(obj)}", _raw(obj)))
                continue
            values, problems = object_values(obj, columns, numbers)
            if problems:
                rejects += [Reject(number, c, why, _raw(obj)) for c, why in problems]
                continue
            for c, v in zip(columns, values):
                cols[c].append(v)
            lines.append(number)
        frame = {c: pl.Series(c, v, dtype=pl.String) for c, v in cols.items()}
        frame[LINE] = pl.Series(LINE, lines, dtype=pl.Int64)
        yield RawBatch(frame=pl.DataFrame(frame), rejects=rejects)


def _raw(obj, limit: int = 2000) -> str:
    return json.dumps(obj, default=str, ensure_ascii=False)[:limit]


def raw_text(path: Path, fmt: str, lines: set[int], limit_chars: int = 2000) -> dict[int, str]:
    rows, _ = load(path, fmt)
    return {n: _raw(rows[n - 1], limit_chars) for n in lines if 1 <= n <= len(rows)}


def looks_like_records(path: Path, *, named_json: bool = False) -> str | None:
    """``json`` when a file's text is one JSON document (starts with ``[`` or a ``{`` that does not
    end on its first line), ``jsonl`` when its first line is a whole JSON object, else None.

    ``named_json``: the file's name ends in ``.json``; it is ``jsonl`` only when more text follows
    the whole object of its first line (one object on one line is a JSON document, ``{"rows": [...]}``;
    a bad later line is then a reject with its line number, as in any JSONL file).
    """
    from benchcert.tasks.ingest.adapters import generic

    try:
        with generic._open_text(path, strict=False) as fh:
            first = _first_text_line(fh)
            second = _first_text_line(fh) if named_json else ""
    except (OSError, EOFError, ValueError):
        return None
    body = first.strip()
    if named_json:
        if not (body.startswith("{") and second.strip()):
            return FORMAT
        try:
            return "jsonl" if isinstance(generic.loads_json_line(body), dict) else FORMAT
        except ValueError:
            return FORMAT
    if body.startswith("["):
        return FORMAT
    if body.startswith("{"):
        try:
            return "jsonl" if isinstance(generic.loads_json_line(body), dict) else None
        except ValueError:
            return FORMAT  # an object over several lines: one document
    return None
