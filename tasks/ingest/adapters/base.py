"""What every tabular adapter shares: the batch and reject types, a file's bytes and text (gzip and
the read limits), strict JSON (no key twice in one object) and the JSON record rule.

A leaf of the adapters: generic.py (CSV, JSONL, Parquet) and json_records.py (JSON documents of
records) both build on it, so neither imports the other to read a file.
"""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from benchcert.tasks.errors import DataError
from benchcert.tasks.ingest.adapters import limits

LINE = "__line__"
#: The text a batch of JSON or JSONL records is read from, at most (characters): its rows become
#: Python objects before they are a frame, so a batch is bounded by its text as well as by its
#: rows (16 Mi characters make about 8,000 log-like records of 2 KB; issue #39).
BATCH_TEXT_CHARS = 1 << 24
#: The rows of a batch of JSON or JSONL records, at most: each row is Python objects until the
#: batch is a frame, and up to three batches are alive at once (read, queued, stored).  Short
#: records (200 bytes) filled 16 Mi characters with 80,000 rows; capped at 32 Ki rows a million
#: of them peak some 40 MB lower (benchmarks/json_memory.py), while batches of long records
#: stay as large as their text allows (smaller ones cost a fifth more CPU, for no memory).
BATCH_RECORD_ROWS = 1 << 15
_GZIP_MAGIC = b"\x1f\x8b"


class AdapterError(DataError, ValueError):
    """A file that cannot be read at all (missing, empty, no header, unknown format).

    A :class:`~benchcert.tasks.errors.DataError`; still a ValueError, which the readers' format
    probes catch to mean "not this format".
    """


@dataclass
class Reject:
    line: int
    field: str
    reason: str
    raw: str | None = None


@dataclass
class RawBatch:
    frame: pl.DataFrame                      # file columns (+ LINE)
    rejects: list[Reject] = field(default_factory=list)
    extras: pl.DataFrame | None = None       # native adapters: LINE + option_probs, stored aside


def is_gzip(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(2) == _GZIP_MAGIC


def open_binary(path: Path, *, lines: bool = False):
    """The file's bytes, decompressed (within the limits of :mod:`.limits`) when it is gzip.

    ``lines``: for a line-based reader, refuse a line longer than the line limit
    (``BENCHCERT_MAX_LINE_BYTES``) after reading at most that much of it.
    """
    raw = limits.open_gzip(path) if is_gzip(path) else open(path, "rb")
    if not lines:
        return raw
    return io.BufferedReader(limits.LineLimitedReader(raw, path), buffer_size=1 << 16)


def open_text(path: Path, *, strict: bool = True):
    # Strict: a byte that is not UTF-8 refuses the file (replacing it would merge distinct
    # names, e.g. models b"m\xff" and b"m\xfe"); a leading BOM is dropped.  Only sniffing a
    # file's kind reads leniently.
    return io.TextIOWrapper(open_binary(path, lines=True), encoding="utf-8-sig", errors="strict" if strict else "replace",
                            newline="")


def utf8_error(path: Path) -> str | None:
    """Where the file stops being UTF-8: '<path>: line L, byte offset B: ...', or None if it is UTF-8.

    The byte offset counts from the start of the (decompressed) file.
    """
    offset = 0
    with open_binary(path, lines=True) as fh:
        for number, line in enumerate(fh, start=1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as exc:
                return (f"{path}: line {number}, byte offset {offset + exc.start}: not UTF-8 text "
                        f"({exc.reason}, byte 0x{line[exc.start]:02x}); nothing from this file is stored")
            offset += len(line)
    return None


def not_utf8(path: Path, exc: Exception | None = None) -> AdapterError:
    """The error for a file that is not UTF-8, located by a second pass over its bytes."""
    try:
        where = utf8_error(path)
    except (OSError, EOFError, ValueError) as err:
        where = f"{path}: not UTF-8 text ({err})"
    return AdapterError(where or f"{path}: not UTF-8 text: {exc}")


class DuplicateKeyError(DataError, ValueError):
    """A JSON object that gives one key twice (a ValueError too, as the JSON parser's hooks raise)."""


def _no_duplicate_keys(pairs: list) -> dict:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise DuplicateKeyError(f"key {dup!r} appears twice in one object")
    return obj


def json_decoder() -> json.JSONDecoder:
    """A decoder that refuses a key repeated in one object, as :func:`loads_json` (for raw_decode)."""
    return json.JSONDecoder(object_pairs_hook=_no_duplicate_keys)


def loads_json(text: str | bytes):
    """json.loads that refuses duplicate keys in one object (the last would silently win).

    Raises ValueError for anything that is not acceptable JSON: a syntax error
    (``json.JSONDecodeError``), a duplicate key, an integer of more than 4,300 digits, or
    nesting too deep for the parser (RecursionError is turned into ValueError).
    """
    try:
        return json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except RecursionError:
        raise ValueError("JSON nested too deeply to read") from None


_SPACE_BEFORE_COLON = re.compile(r'"\s+:')


def loads_json_line(text: str):
    """:func:`loads_json` at json.loads' speed for the usual flat object.

    Every key occurrence of an object written without blanks before its colon contains
    ``":``, so when the text holds exactly as many ``":`` as the parsed object has keys (and
    no ``"`` followed by blanks and a colon), no key can have occurred twice.  Anything else
    (nested objects, such text inside values, blanks before colons) is parsed again with the
    exact duplicate check.
    """
    try:
        obj = json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply to read") from None
    if isinstance(obj, dict) and (text.count('":') != len(obj) or _SPACE_BEFORE_COLON.search(text)):
        return loads_json(text)
    return obj


def json_problem(exc: Exception) -> str:
    """A short reason for a JSON value that :func:`loads_json` refused."""
    if isinstance(exc, json.JSONDecodeError):
        return f"unparsable JSON: {exc.msg} at column {exc.colno}"
    if isinstance(exc, DuplicateKeyError):
        return f"duplicate key: {exc}"
    return f"unreadable JSON: {exc}"


def _jsonl_scalar(value):
    if value is None or isinstance(value, str):
        return value, None
    if isinstance(value, bool):
        return ("true" if value else "false"), None
    if isinstance(value, (int, float)):
        return repr(value), None
    return None, f"expected a scalar, got {type(value).__name__}"


def columns_frame(cols: dict[str, list], lines: list[int]) -> pl.DataFrame:
    """The rows gathered so far as a frame (every column as text, and their lines); empties ``cols`` and ``lines``."""
    frame = {c: pl.Series(c, v, dtype=pl.String) for c, v in cols.items()}
    frame[LINE] = pl.Series(LINE, lines, dtype=pl.Int64)
    for v in cols.values():
        v.clear()
    lines.clear()
    return pl.DataFrame(frame)


def object_values(obj: dict, columns: list[str], numbers: tuple[str, ...] = ()) -> tuple[list, list]:
    """One JSON record's values as text (the JSONL rule), and (column, reason) of each bad one.

    ``numbers``: columns whose value must be a JSON number or boolean (a string there, even
    ``"1"``, is a mistyped field).
    """
    values, problems = [], []
    for c in columns:
        raw = obj.get(c)
        v, problem = _jsonl_scalar(raw)
        if c in numbers and isinstance(raw, str):
            problem = (f"a JSON string ({json.dumps(raw[:40])}), not a number: a score (or human score) in JSON "
                       "must be a number or true/false")
        if problem:
            problems.append((c, problem))
        values.append(v)
    return values, problems
