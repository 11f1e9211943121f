"""A JSON file of records, read like JSONL: a top-level list of objects, or an object with one
list-of-objects field (``--records FIELD`` names it when there are several).

Public result files often come this way (a benchmark's ``{"performances": [{...}, ...]}``).
The format is ``json`` (``json:FIELD`` when ``--records`` names the field); the records are
the rows, each one's ``LINE`` is its 1-based position in the list, and every rule of the JSONL
reader applies to its fields (scalars only; a score is a JSON number or true/false).  The
document is read as a stream, within the decompression limits: a record at a time, so memory
holds a batch of rows, not the whole document (the JSONL reader's bound).
"""

from __future__ import annotations

import io
import json
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import polars as pl

from benchcert.tasks.errors import DataError

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


def _first_text_line(fh) -> str:
    """The next line that is not blank (within five, each read up to 1 MiB), or ""."""
    line = ""
    for _ in range(5):
        line = fh.readline(1 << 20)
        if line.strip() or not line:
            break
    return line


class _TooDeep(DataError, ValueError):
    """A value nested too deeply for the parser."""


class _TooLong(DataError, ValueError):
    """One JSON value (a record, or a field around the records) longer than the line limit."""


#: Records of a batch held as Python objects at most before they become Polars columns: a batch of
#: 32 Ki short records held as Python strings until its end cost some 7 MB more of the reader's
#: peak (benchmarks/json_memory.py).
_PART_ROWS = 4096
#: Characters of the document read at a time while its records are streamed.
_CHUNK = 1 << 20
_BLANKS = re.compile(r"[ \t\n\r]*")
#: What may still follow a number cut at the end of the text read so far ("1.5" of "1.5e+300").
_NUMBER_GOES_ON = re.compile(r"[0-9eE.+\-]*")
#: Between two elements of an array: the comma and the blanks around it.
_NEXT = re.compile(r"[ \t\n\r]*,[ \t\n\r]*")
#: A parse error this close to the end of the text read so far may be the text being cut
#: ("tru", "1.5e", "\\u00"); farther back it is the document's own, whatever follows.
_CUT_MARGIN = 16


class _Cursor:
    """A JSON document's text, read a chunk at a time, and a position in it.

    Memory holds one chunk and the value being parsed, never the whole document: parsed whole,
    a JSON file of records took about eight times its size (issue #39).  One value longer than
    the line limit (``BENCHCERT_MAX_LINE_BYTES``, counted as its text takes in memory) is refused
    after about that much of it was read, and a syntax error is refused where it is found, so a hostile file
    (gigabytes of NUL bytes, one endless string) costs about the limit once.
    """

    def __init__(self, fh):
        from benchcert.tasks.ingest.adapters import limits
        from benchcert.tasks.ingest.adapters.base import json_decoder

        self._fh, self.buf, self.pos, self.eof = fh, "", 0, False
        self._decoder = json_decoder()
        self.limit = limits.max_line_bytes()
        self.dropped = 0  # characters of the document before ``buf``
        self.taken = 0  # characters of the values parsed so far (a batch's size)

    def _more(self, at_least: int = 0, held: int | None = None) -> bool:
        """Read on (at least ``at_least`` more characters); False at the end of the document.

        The chunks are joined once, so growing the text of one long value holds it about twice
        while they are joined (a value within the limit: at most about twice the limit).  ``held``: the memory of the value's text read so far; once it and the chunks read pass the
        limit the value is refused (:class:`_TooLong`) before they are joined, so a hostile value
        costs about the limit, not twice it.
        """
        if self.eof:
            return False
        parts = [self.buf[self.pos:]]
        got = 0
        while True:
            chunk = self._fh.read(_CHUNK)
            if not chunk:
                self.eof = True
                break
            parts.append(chunk)
            got += len(chunk)
            if held is not None:
                held += sys.getsizeof(chunk)
                if held > self.limit:
                    raise self._too_long(len(self.buf) - self.pos + got)
            if got >= at_least:
                break
        if not got:
            return False
        self.dropped += self.pos
        self.buf = "".join(parts)
        del parts
        self.pos = 0
        return True

    def peek(self) -> str:
        """The next character that is not blank ("" at the end)."""
        while True:
            self.pos = _BLANKS.match(self.buf, self.pos).end()
            if self.pos < len(self.buf) or not self._more():
                return self.buf[self.pos:self.pos + 1]

    def take(self, char: str, expecting: str) -> None:
        if self.peek() != char:
            raise json.JSONDecodeError(f"Expecting {expecting}", self.buf, self.pos)
        self.pos += 1

    def _grow(self, exc: json.JSONDecodeError | None) -> bool:
        """Read on for a value that may go on past the text read so far; False when it cannot.

        A syntax error well before the end of the text read is the document's (False at once);
        a value longer than the limit is refused (:class:`_TooLong`).
        """
        if exc is not None and not exc.msg.startswith("Unterminated string") and exc.pos < len(self.buf) - _CUT_MARGIN:
            return False
        pending = len(self.buf) - self.pos
        # The value's text as held in memory: a character takes 1, 2 or 4 bytes there (Python's
        # str), so the limit bounds the memory of any text, not only of ASCII.
        held = sys.getsizeof(self.buf) * pending // max(len(self.buf), 1)
        if held > self.limit:
            raise self._too_long(pending)
        # As much again (within the limit), so a value is parsed a bounded number of times.
        return self._more(max(1, min(max(pending, _CHUNK), (self.limit - held) * pending // max(held, 1))), held)

    def _too_long(self, pending: int) -> _TooLong:
        return _TooLong(f"a JSON value starting at character {self.dropped + self.pos + 1:,} is longer than "
                        f"{self.limit:,} bytes (limit BENCHCERT_MAX_LINE_BYTES, counted in memory); refused "
                        f"after reading {pending:,} characters of it")

    def value(self):
        """The next JSON value, parsed."""
        if self.pos >= len(self.buf) or self.buf[self.pos] in " \t\n\r":
            self.peek()
        while True:
            try:
                obj, end = self._decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                # The value may go on past the text read so far; at the end the error is the document's.
                if self._grow(exc):
                    continue
                raise
            except RecursionError:
                raise _TooDeep("JSON nested too deeply to read") from None
            if not self.eof and _NUMBER_GOES_ON.fullmatch(self.buf, end) and self._grow(None):
                continue  # a number at the end of the text read so far may go on
            self.taken += end - self.pos
            self.pos = end
            return obj

    def elements(self) -> Iterator:
        """The values of the array that starts here, one at a time."""
        self.take("[", "'['")
        if self.peek() == "]":
            self.pos += 1
            return
        while True:
            yield self.value()
            # The usual case in one match (a comma and the blanks around it, all read already).
            step = _NEXT.match(self.buf, self.pos)
            if step is not None and step.end() < len(self.buf):
                self.pos = step.end()
                continue
            if self.peek() == "]":
                self.pos += 1
                return
            self.take(",", "',' delimiter")

    def members(self) -> Iterator[str]:
        """The keys of the object that starts here; the caller reads each key's value before the next."""
        from benchcert.tasks.ingest.adapters.base import DuplicateKeyError

        self.take("{", "'{'")
        if self.peek() == "}":
            self.pos += 1
            return
        seen: set[str] = set()
        while True:
            if self.peek() != '"':
                raise json.JSONDecodeError("Expecting property name enclosed in double quotes", self.buf, self.pos)
            key = self.value()
            if key in seen:
                raise DuplicateKeyError(f"key {key!r} appears twice in one object")
            seen.add(key)
            self.take(":", "':' delimiter")
            yield key
            if self.peek() == "}":
                self.pos += 1
                return
            self.take(",", "',' delimiter")

    def end(self) -> None:
        """Nothing but blanks may follow the document."""
        if self.peek():
            raise json.JSONDecodeError("Extra data", self.buf, self.pos)


@contextmanager
def _document(path: Path):
    """A cursor over the file's text (decompressed within the limits), with its JSON errors
    turned into the file's refusal."""
    from benchcert.tasks.ingest.adapters import base

    try:
        with io.TextIOWrapper(base.open_binary(Path(path)), encoding="utf-8-sig", newline="") as fh:
            yield _Cursor(fh)
    except UnicodeDecodeError as exc:
        raise base.not_utf8(Path(path), exc) from None
    except (json.JSONDecodeError, base.DuplicateKeyError, _TooDeep) as exc:
        raise base.AdapterError(f"{path}: a .json file that is not valid JSON ({base.json_problem(exc)}); "
                                   "nothing from this file is stored") from None
    except _TooLong as exc:
        raise base.AdapterError(f"{path}: {exc}; nothing from this file is stored") from None


@dataclass(frozen=True)
class _Found:
    """Where a document keeps its records, and the keys of the first one."""

    member: str | None  # the object's field holding them; None for a top-level list
    where: str
    keys: list[str]


def _first_keys(elements: Iterator) -> tuple[int, object, list[str] | None]:
    """(how many elements, the first, the keys of the first object) of an array, read to its end."""
    n, first, keys = 0, None, None
    for element in elements:
        if n == 0:
            first = element
        n += 1
        if keys is None and isinstance(element, dict):
            keys = list(element)
    return n, first, keys


@lru_cache(maxsize=8)
def _find(path: str, stamp: tuple, field: str | None) -> _Found:
    """Where the records are: a top-level list (read up to its first record), or the one field of
    the object (read whole) whose list starts with a record, or the field ``field`` names.

    Raises
    ------
    AdapterError
        The document holds no list of records (or several, and ``field`` names none), saying
        what it saw; or it is not valid JSON up to where it was read.
    """
    from benchcert.tasks.ingest.adapters.base import AdapterError

    where = path
    with _document(Path(path)) as doc:
        start = doc.peek()
        if start == "[":
            if field:
                raise AdapterError(f"{where}: --records {field} names a field, but the file is a JSON list, "
                                   "not an object")
            n, first = 0, None
            for element in doc.elements():  # up to the first record: the rest is read with the rows
                first = element if n == 0 else first
                n += 1
                if isinstance(element, dict):
                    return _Found(None, "the top-level list", list(element))
            if not n:
                raise AdapterError(f"{where}: a JSON list with no records; nothing to ingest")
            raise AdapterError(f"{where}: a JSON list of {_kind(first)}s, not of records (JSON objects)")
        if start != "{":
            value = doc.value()
            doc.end()
            raise AdapterError(f"{where}: a JSON {_kind(value)}, not a list of records or an object holding one")
        kinds: dict[str, str] = {}
        lists: list[str] = []  # fields whose list starts with a record
        keys_of: dict[str, list[str] | None] = {}
        for key in doc.members():
            if doc.peek() == "[":
                n, first, keys = _first_keys(doc.elements())
                kinds[key], keys_of[key] = "list", keys
                if n and isinstance(first, dict):
                    lists.append(key)
            else:
                kinds[key] = _kind(doc.value())
        doc.end()
    fields = ", ".join(list(kinds)[:12]) + (", ..." if len(kinds) > 12 else "")
    if field:
        if field not in kinds:
            raise AdapterError(f"{where}: --records {field}: no such field; the object's fields are {fields}")
        if kinds[field] != "list" or keys_of[field] is None:
            raise AdapterError(f"{where}: --records {field}: the field is a JSON {kinds[field]}, not a list of records")
        return _Found(field, f"field {field!r}", keys_of[field])
    if not lists:
        raise AdapterError(f"{where}: a JSON object with fields {fields}, none of them a list of records "
                           "(JSON objects); nothing to ingest as rows")
    if len(lists) > 1:
        raise AdapterError(f"{where}: a JSON object with several lists of records ({', '.join(lists)}); "
                           "name the one to read with --records FIELD")
    return _Found(lists[0], f"field {lists[0]!r}", keys_of[lists[0]])


def _found(path: Path, fmt: str) -> _Found:
    st = Path(path).stat()
    return _find(str(path), (st.st_mtime_ns, st.st_size, st.st_ino), _field(fmt))


def _records(path: Path, fmt: str) -> Iterator[tuple[object, _Cursor]]:
    """Each record with the cursor reading it (whose ``taken`` counts the characters read so far)."""
    found = _found(path, fmt)
    with _document(path) as doc:
        if found.member is None:
            for element in doc.elements():
                yield element, doc
        else:
            for key in doc.members():
                if key == found.member:
                    for element in doc.elements():
                        yield element, doc
                else:
                    doc.value()
        doc.end()


def records(path: Path, fmt: str) -> Iterator:
    """The file's records one at a time, and the rest of the document read and checked after the last.

    Raises AdapterError (the file's refusal) for a document that is not valid JSON, when its
    error is reached.
    """
    for obj, _ in _records(path, fmt):
        yield obj


def columns(path: Path, fmt: str) -> list[str]:
    """The keys of the first record that is an object."""
    return list(_found(path, fmt).keys)


def batches(path: Path, fmt: str, columns: list[str], batch_rows: int, numbers: tuple[str, ...]) -> Iterator:
    """The records as raw batches: every column as text, as the JSONL reader gives them.

    A batch ends after ``batch_rows`` records or :data:`base.BATCH_TEXT_CHARS` characters of them,
    whichever comes first, so its Python objects stay small whatever the records hold; its values
    become Polars columns every :data:`_PART_ROWS` records, so at most that many rows are Python
    objects at a time.
    """
    from benchcert.tasks.ingest.adapters.base import BATCH_TEXT_CHARS, RawBatch, Reject, columns_frame, object_values

    rows = enumerate(_records(path, fmt), start=1)
    while True:
        cols: dict[str, list] = {c: [] for c in columns}
        lines: list[int] = []
        rejects: list[Reject] = []
        taken = 0
        budget = None
        parts: list[pl.DataFrame] = []
        for number, (obj, doc) in rows:
            if budget is None:
                budget = doc.taken + BATCH_TEXT_CHARS
            taken += 1
            if len(lines) >= _PART_ROWS:
                parts.append(columns_frame(cols, lines))
            if not isinstance(obj, dict):
                rejects.append(Reject(number, "<row>", f"expected a JSON object, got {_kind(obj)}", _raw(obj)))
            else:
                values, problems = object_values(obj, columns, numbers)
                if problems:
                    rejects += [Reject(number, c, why, _raw(obj)) for c, why in problems]
                else:
                    for c, v in zip(columns, values):
                        cols[c].append(v)
                    lines.append(number)
            if taken == batch_rows or doc.taken >= budget:
                break
        else:
            budget = None  # the records ran out: this batch is the last
        if not taken:
            return
        parts.append(columns_frame(cols, lines))
        frame = pl.concat(parts) if len(parts) > 1 else parts[0]
        del parts
        yield RawBatch(frame=frame, rejects=rejects)
        if budget is None:
            return


def _raw(obj, limit: int = 2000) -> str:
    return json.dumps(obj, default=str, ensure_ascii=False)[:limit]


def raw_text(path: Path, fmt: str, lines: set[int], limit_chars: int = 2000) -> dict[int, str]:
    out: dict[int, str] = {}
    last = max(lines, default=0)
    for number, obj in enumerate(records(path, fmt), start=1):
        if number in lines:
            out[number] = _raw(obj, limit_chars)
        if number >= last:
            break
    return out


def looks_like_records(path: Path, *, named_json: bool = False) -> str | None:
    """``json`` when a file's text is one JSON document (starts with ``[`` or a ``{`` that does not
    end on its first line), ``jsonl`` when its first line is a whole JSON object, else None.

    ``named_json``: the file's name ends in ``.json``; it is ``jsonl`` only when more text follows
    the whole object of its first line (one object on one line is a JSON document, ``{"rows": [...]}``;
    a bad later line is then a reject with its line number, as in any JSONL file).
    """
    from benchcert.tasks.ingest.adapters import base

    try:
        with base.open_text(path, strict=False) as fh:
            first = _first_text_line(fh)
            second = _first_text_line(fh) if named_json else ""
    except (OSError, EOFError, ValueError):
        return None
    body = first.strip()
    if named_json:
        if not (body.startswith("{") and second.strip()):
            return FORMAT
        try:
            return "jsonl" if isinstance(base.loads_json_line(body), dict) else FORMAT
        except ValueError:
            return FORMAT
    if body.startswith("["):
        return FORMAT
    if body.startswith("{"):
        try:
            return "jsonl" if isinstance(base.loads_json_line(body), dict) else None
        except ValueError:
            return FORMAT  # an object over several lines: one document
    return None
