"""Generic tabular adapter: CSV, JSONL and Parquet, each optionally gzipped.

Files are read in bounded batches so memory does not grow with the file.  Every row
carries ``__line__``: the physical line of a CSV record (header = line 1; records with
embedded newlines and skipped malformed lines are accounted for), the line of a JSONL
object, or the 1-based row number of a Parquet row.  Structural problems (wrong number of
CSV fields, unparsable JSON) become reject records instead of exceptions, so one bad line
never hides the others.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from benchcert.tasks.ingest.adapters import limits
# The shared pieces, under the names the other adapters and ingest have always used here.
from benchcert.tasks.ingest.adapters.base import (BATCH_RECORD_ROWS, BATCH_TEXT_CHARS, LINE, AdapterError, RawBatch, Reject, is_gzip,  # noqa: F401
                                                  columns_frame, json_problem, loads_json, loads_json_line, not_utf8,
                                                  object_values, open_binary, open_text)

BATCH_ROWS = 1_000_000


def detect_format(path: Path, override: str | None = None, records: str | None = None) -> str:
    """csv / jsonl / parquet / json from --format, else from the name (``.gz`` stripped), else
    from the content (a JSON list of records, or an object holding one, is ``json``).

    ``records``: ``--records FIELD``, the field of a JSON object that holds the records.
    """
    from benchcert.tasks.ingest.adapters import json_records

    if records and override not in (None, json_records.FORMAT):
        raise AdapterError(f"{path}: --records applies to a JSON file of records, not to --format {override}")
    if override:
        return json_records.format_name(records) if override == json_records.FORMAT else override
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    ext = suffixes[-1] if suffixes else ""
    if ext in (".csv",):
        return "csv"
    if ext in (".jsonl", ".ndjson"):
        return "jsonl"
    if ext in (".parquet", ".pq"):
        return "parquet"
    if ext == ".json" and not records and path.is_file():
        # The content decides (issue #39): JSON lines in a file named .json are JSONL.
        return json_records.looks_like_records(path, named_json=True) or json_records.FORMAT
    seen = json_records.looks_like_records(path) if path.is_file() else None
    if ext == ".json" or seen == json_records.FORMAT:
        return json_records.format_name(records)
    if seen == "jsonl":
        return "jsonl"
    if records:
        return json_records.format_name(records)
    raise AdapterError(f"{path}: cannot tell the format: the name ({ext or 'no extension'}) is not .csv, .jsonl, "
                       f".json or .parquet, and the content {_what_it_is(path)}; pass --format csv|jsonl|json|parquet")


def _what_it_is(path: Path) -> str:
    """A few words on what a file's first bytes look like, for the format message."""
    try:
        with open_binary(path) as fh:
            head = fh.read(64)
    except (OSError, EOFError, ValueError):
        return "cannot be read"
    if not head.strip():
        return "is empty"
    text = head.lstrip()[:20].decode("utf-8", errors="replace")
    return f"starts with {text!r}, which is no JSON document, JSON line or table this reader knows"


def file_columns(path: Path, fmt: str) -> list[str]:
    """Column names of the file (CSV header, Parquet schema, keys of the first JSON object)."""
    if fmt == "csv":
        try:
            with open_text(path) as fh:
                header = next(csv.reader(fh), None)
        except UnicodeDecodeError as exc:
            raise not_utf8(path, exc) from None
        except csv.Error as exc:
            raise AdapterError(f"{path}: line 1: unreadable CSV header: {exc}") from None
        if not header:
            raise AdapterError(f"{path}: empty file, no CSV header on line 1")
        from collections import Counter

        dupes = sorted(c for c, k in Counter(header).items() if k > 1)
        if dupes:
            raise AdapterError(f"{path}: line 1: duplicate column names {dupes}")
        return header
    if fmt == "parquet":
        return list(_parquet_file(path).schema_arrow.names)
    from benchcert.tasks.ingest.adapters import json_records

    if json_records.is_json_format(fmt):
        return json_records.columns(path, fmt)
    if fmt == "jsonl":
        # The keys of the first line that is a JSON object: a garbage first line is a bad row
        # (reported with its line), not a reason to see no columns at all.
        first_problem = None
        try:
            with open_text(path) as fh:
                for number, line in enumerate(fh, start=1):
                    if not line.strip():
                        continue
                    try:
                        obj = loads_json(line)
                    except ValueError as exc:
                        first_problem = first_problem or f"line {number}: {json_problem(exc)}"
                        continue
                    if isinstance(obj, dict):
                        return list(obj)
                    first_problem = first_problem or f"line {number}: a JSON {type(obj).__name__}, not an object"
        except UnicodeDecodeError as exc:
            raise not_utf8(path, exc) from None
        if first_problem:
            raise AdapterError(f"{path}: no line is a JSON object ({first_problem})")
        raise AdapterError(f"{path}: empty file")
    raise AdapterError(f"{path}: unknown format {fmt!r}")


def read_batches(path: Path, fmt: str, columns: list[str], batch_rows: int = BATCH_ROWS, *,
                 numbers: tuple[str, ...] = ()) -> Iterator[RawBatch]:
    """Yield the named columns of the file in batches (all columns read as they are stored).

    ``numbers``: columns whose JSON values must be numbers or booleans (the score): a JSON
    string there, even ``"1"``, is a reject of that field (CSV text is parsed, having no types).
    """
    if fmt == "csv":
        yield from _csv_batches(path, columns, batch_rows)
    elif fmt == "jsonl":
        yield from _jsonl_batches(path, columns, min(batch_rows, BATCH_RECORD_ROWS), numbers)
    elif fmt == "parquet":
        yield from _parquet_batches(path, columns, batch_rows)
    else:
        from benchcert.tasks.ingest.adapters import json_records

        if not json_records.is_json_format(fmt):
            raise AdapterError(f"{path}: unknown format {fmt!r}")
        yield from json_records.batches(path, fmt, columns, min(batch_rows, BATCH_RECORD_ROWS), numbers)


def _csv_batches(path: Path, columns: list[str], batch_rows: int) -> Iterator[RawBatch]:
    header = file_columns(path, "csv")
    invalid: list[Reject] = []
    bad_records: list[int] = []  # record numbers of malformed rows (never rewritten)

    def on_invalid(row) -> str:
        if row.number is not None:
            bad_records.append(int(row.number))
        invalid.append(Reject(line=int(row.number) if row.number is not None else -1, field="<row>",
                              reason=f"expected {row.expected_columns} fields, found {row.actual_columns}",
                              raw=row.text))
        return "skip"

    # Compression is decided by content, not by the name pyarrow would go by; a gzip stream
    # is decompressed within the limits.
    source = open_binary(path, lines=True)  # a line past the limit is refused, not buffered whole
    # A block holds any record within the limit; pyarrow's block size is a 32-bit int.
    block = min(max(32 << 20, 2 * limits.max_line_bytes()), (1 << 31) - 1)
    try:  # pyarrow reads (and decodes) the first block here already
        reader = pacsv.open_csv(
            source,
            read_options=pacsv.ReadOptions(use_threads=False, block_size=block),
            parse_options=pacsv.ParseOptions(newlines_in_values=True, invalid_row_handler=on_invalid),
            convert_options=pacsv.ConvertOptions(column_types={c: pa.string() for c in header},
                                                 strings_can_be_null=False, include_columns=header),
        )
    except BaseException as exc:
        source.close()
        if isinstance(exc, pa.ArrowInvalid):
            raise _csv_error(path, exc) from None
        raise
    valid_so_far = 0
    newlines_so_far = 0
    reported = 0
    pending: list[pa.RecordBatch] = []
    pending_rows = 0

    def flush() -> RawBatch:
        nonlocal valid_so_far, newlines_so_far, reported
        table = pa.Table.from_batches(pending)
        frame = pl.from_arrow(table)
        assert isinstance(frame, pl.DataFrame)
        n = frame.height
        # A record's first physical line: header + records before it + the extra lines taken
        # by embedded newlines in earlier records + malformed lines skipped before it.
        per_row = np.zeros(n, dtype=np.int64)
        schema = frame.schema  # once: Polars builds it anew on every access (quadratic in columns)
        str_cols = [c for c in header if schema[c] == pl.String]
        if n and str_cols and frame.select(pl.any_horizontal(
                [pl.col(c).str.contains("\n", literal=True) for c in str_cols]).any()).item():
            per_row = frame.select(pl.sum_horizontal(
                [pl.col(c).str.count_matches("\n", literal=True) for c in str_cols])).to_series().to_numpy().astype(np.int64)
        before = np.cumsum(per_row) - per_row  # embedded newlines in this batch's earlier records
        # pyarrow numbers malformed rows by record (header = 1), not by physical line.
        bad = np.array(sorted(bad_records), dtype=np.int64)
        record = 2 + valid_so_far + np.arange(n, dtype=np.int64)
        if bad.size:
            record = record + np.searchsorted(bad - np.arange(bad.size), record, side="right")
        lines = record + newlines_so_far + before
        for r in invalid[reported:]:
            if r.line > 0:
                valid_before = r.line - 2 - int(np.searchsorted(bad, r.line, side="left")) - valid_so_far
                k = min(max(valid_before, 0), n)
                r.line += newlines_so_far + (int(before[k]) if k < n else int(per_row.sum()))
        newlines_so_far += int(per_row.sum())
        valid_so_far += n
        out = RawBatch(frame=frame.select(columns).with_columns(pl.Series(LINE, lines)),
                       rejects=invalid[reported:])
        reported = len(invalid)
        pending.clear()
        return out

    try:
        for batch in _csv_record_batches(path, reader):
            pending.append(batch)
            pending_rows += batch.num_rows
            if pending_rows >= batch_rows:
                yield flush()
                pending_rows = 0
        if pending or len(invalid) > reported:
            if not pending:
                pending.append(pa.RecordBatch.from_pylist([], schema=reader.schema))
            yield flush()
    finally:
        source.close()


def _csv_record_batches(path: Path, reader) -> Iterator[pa.RecordBatch]:
    """pyarrow's batches, with its text-decoding failure turned into a located error."""
    try:
        yield from reader
    except pa.ArrowInvalid as exc:
        raise _csv_error(path, exc) from None


def _csv_error(path: Path, exc: Exception) -> AdapterError:
    if "UTF8" in str(exc) or "UTF-8" in str(exc):
        return not_utf8(path, exc)
    return AdapterError(f"{path}: cannot parse as CSV: {exc}")


def _jsonl_batches(path: Path, columns: list[str], batch_rows: int, numbers: tuple[str, ...] = ()) -> Iterator[RawBatch]:
    cols: dict[str, list] = {c: [] for c in columns}
    lines: list[int] = []
    rejects: list[Reject] = []

    def flush() -> RawBatch:
        out = RawBatch(frame=columns_frame(cols, lines), rejects=list(rejects))
        rejects.clear()
        return out

    try:
        yield from _jsonl_rows(path, columns, batch_rows, cols, lines, rejects, flush, numbers)
    except UnicodeDecodeError as exc:
        raise not_utf8(path, exc) from None
    if lines or rejects:
        yield flush()


def _jsonl_rows(path, columns, batch_rows, cols, lines, rejects, flush, numbers=()) -> Iterator[RawBatch]:
    size = 0  # characters read since the last batch (a batch holds at most BATCH_TEXT_CHARS of text)
    with open_text(path) as fh:
        for number, text in enumerate(fh, start=1):
            size += len(text)
            if size > BATCH_TEXT_CHARS and (lines or rejects):
                yield flush()
                size = len(text)
            if not text.strip():
                continue
            try:
                obj = loads_json_line(text)
            except ValueError as exc:
                rejects.append(Reject(number, "<row>", json_problem(exc), text.rstrip("\r\n")[:2000]))
                continue
            if not isinstance(obj, dict):
                rejects.append(Reject(number, "<row>", f"expected a JSON object, got {type(obj).__name__}", text.rstrip("\r\n")))
                continue
            values, problems = object_values(obj, columns, numbers)
            if problems:
                rejects += [Reject(number, c, why, text.rstrip("\r\n")) for c, why in problems]
                continue
            for c, v in zip(columns, values):
                cols[c].append(v)
            lines.append(number)
            if len(lines) >= batch_rows:
                yield flush()


def _parquet_file(path: Path) -> pq.ParquetFile:
    try:
        if is_gzip(path):
            with open_binary(path) as fh:
                return pq.ParquetFile(pa.BufferReader(fh.read()))
        return pq.ParquetFile(path)
    except (pa.ArrowException, OSError, EOFError) as exc:
        if isinstance(exc, limits.DecompressionLimitError):
            raise
        raise AdapterError(f"{path}: not a readable Parquet file: {exc}") from None


def _scalar_type(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        return _scalar_type(t.value_type)
    return (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_integer(t)
            or pa.types.is_floating(t) or pa.types.is_decimal(t) or pa.types.is_boolean(t) or pa.types.is_null(t)
            or getattr(pa.types, "is_string_view", lambda _: False)(t))


def check_column_types(path: Path, fmt: str, columns: dict[str, str | None]) -> None:
    """Refuse a Parquet column of a type no canonical field can hold (list, struct, binary, date, ...)."""
    if fmt != "parquet":
        return
    schema = _parquet_file(path).schema_arrow
    for canonical, col in columns.items():
        if col is None or col not in schema.names:
            continue
        t = schema.field(col).type
        if not _scalar_type(t):
            raise AdapterError(f"{path}: column {col!r} (for {canonical}) has Parquet type {t}; "
                               "expected text, a number or a boolean")


def _parquet_batches(path: Path, columns: list[str], batch_rows: int) -> Iterator[RawBatch]:
    if is_gzip(path):  # Polars cannot scan a compressed stream; Arrow reads it from memory
        pf = _parquet_file(path)
        start = 1
        for batch in pf.iter_batches(batch_size=batch_rows, columns=columns):
            frame = pl.from_arrow(batch)
            assert isinstance(frame, pl.DataFrame)
            n = frame.height
            yield RawBatch(frame=frame.with_columns(pl.Series(LINE, np.arange(start, start + n, dtype=np.int64))))
            start += n
        return
    # Polars' own reader decodes straight into its memory layout: ~5x faster than going
    # through Arrow record batches (measured in benchmarks/ingest_audit.py), in bounded batches.
    scan = pl.scan_parquet(path).select(columns).with_row_index(LINE, offset=1)
    try:
        for frame in scan.collect_batches(chunk_size=batch_rows):
            yield RawBatch(frame=frame.with_columns(pl.col(LINE).cast(pl.Int64)).select(*columns, LINE))
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise AdapterError(f"{path}: cannot read as Parquet: {exc}") from None


def raw_text(path: Path, fmt: str, lines: set[int], limit_chars: int = 2000) -> dict[int, str]:
    """The original text of the given lines (rows for Parquet), for the rejects table."""
    out: dict[int, str] = {}
    if not lines:
        return out
    from benchcert.tasks.ingest.adapters import json_records

    if json_records.is_json_format(fmt):
        return json_records.raw_text(path, fmt, lines, limit_chars)
    if fmt == "parquet":
        pf = _parquet_file(path)
        wanted = sorted(lines)
        start = 1
        for batch in pf.iter_batches(batch_size=BATCH_ROWS):
            end = start + batch.num_rows
            idx = [w - start for w in wanted if start <= w < end]
            if idx:
                for w, row in zip([i + start for i in idx], batch.take(pa.array(idx)).to_pylist()):
                    out[w] = json.dumps(row, default=str)[:limit_chars]
            start = end
        return out
    last = max(lines)
    with open_text(path) as fh:
        for number, text in enumerate(fh, start=1):
            if number in lines:
                out[number] = text.rstrip("\r\n")[:limit_chars]
            if number >= last:
                break
    return out
