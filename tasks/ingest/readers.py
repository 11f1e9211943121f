"""The reader of one file: the checks every path passes, then a table's plan or a harness log's source.

:func:`open_file` decides what a path is (a native harness log, through the adapter registry's
detection, or a table: CSV, JSONL, JSON records, Parquet) and checks the mapping against it before
a row is read.  Both kinds then yield the same raw batches (:class:`TableReader` for a table,
:class:`~benchcert.tasks.ingest.adapters.native.NativeSource` for a log), which validation turns
into canonical rows.  Nothing here touches the store.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from benchcert.tasks.ingest.adapters import detect, generic, native, probs
from benchcert.tasks.ingest.errors import IngestError
from benchcert.tasks.ingest.mapping import ColumnMapping, MappingError, evaluate, expression_columns
from benchcert.tasks.ingest.reports import FileReport
from benchcert.tasks.ingest.validate import CONTROL, CONTROL_REASON
from benchcert.tasks.schemas import CANONICAL_FIELDS

sha256_file = native.sha256_file


def field_label(canonical: str, column: str | None) -> str:
    """A canonical field as the user named it: ``column (field)`` when they differ."""
    return canonical if column in (None, canonical) else f"{column} ({canonical})"


def resolve_columns(path: Path, fmt: str, mapping: ColumnMapping, benchmark: str | None) -> dict[str, str | None]:
    available = generic.file_columns(path, fmt)
    cols = {f: mapping.column_for(f, available) for f in CANONICAL_FIELDS}
    try:  # mapped values that are no column: SQL expressions over the columns (tasks/ingest/mapping.py)
        computed = mapping.expressions(available, str(path)) if (fmt != "jsonl" or available) else {}
    except MappingError as exc:
        raise IngestError(str(exc)) from None
    if fmt != "jsonl" or available:
        missing = {f: c for f, c in cols.items() if c is not None and c not in available and f not in computed}
        if missing:
            raise IngestError(
                f"{path}: column(s) {', '.join(f'{c!r} (for {f})' for f, c in missing.items())} not in the file; "
                f"its columns are {available}")
    if benchmark is None and cols["benchmark"] is None:
        raise IngestError(f"{path}: no benchmark: pass --benchmark NAME or map a benchmark column")
    if benchmark is not None and "benchmark" not in mapping.columns:
        cols["benchmark"] = None  # the flag names the benchmark; a same-named column is not used
    for f in ("model", "item_id", "score"):
        if cols[f] is None:
            raise IngestError(f"{path}: no column for required field {f!r}; map one with --map {f}=COLUMN "
                              f"(columns are {available})")
    generic.check_column_types(path, fmt, cols)
    return cols



@dataclass(frozen=True)
class GenericPlan:
    """How a table file (CSV, JSONL, JSON records, Parquet) is read, and the settings its source records."""

    path: Path
    format: str
    sha: str
    cols: dict
    prob_cols: dict
    config: str  # with ``sha``, what tells that the file is stored already

    def reader(self) -> TableReader:
        return TableReader(self.path, self.format, self.cols, self.prob_cols)


def open_file(path: Path, mapping: ColumnMapping, benchmark: str | None, allow_rejects: bool,
              report: FileReport) -> GenericPlan | native.NativeSource:
    """The checks every file passes before it is read: a native log's source, or a table's plan.

    Raises IngestError (or an adapter's error) for a file that cannot be ingested as given;
    ``report.format`` and ``report.sha256`` are filled as they become known.
    """
    if path.is_symlink() and (problem := detect.link_target(path)[1]) is not None:
        raise IngestError(f"{path}: {problem}")
    if not path.exists():
        raise IngestError(f"{path}: no such file")
    if not (path.is_file() or path.is_dir()):  # opening a FIFO would wait for a writer forever
        raise IngestError(f"{path}: not a regular file (a FIFO, socket or device); not read")
    _printable_benchmark(path, benchmark)
    source = detect.open_native(path, mapping, benchmark)
    if source is not None:
        _printable_benchmark(path, source.benchmark)
        return source
    if not path.is_file():
        raise IngestError(f"{path}: a directory, not a HELM run directory (per_instance_stats.json and "
                          "run_spec.json); give its files, or walk it with `benchcert ingest DIR`")
    report.format = fmt = generic.detect_format(path, mapping.format, getattr(mapping, "records", None))
    report.sha256 = sha = sha256_file(path)
    cols = resolve_columns(path, fmt, mapping, benchmark)
    prob_cols = probs.mapped_columns(mapping.columns, generic.file_columns(path, fmt), path)
    config = json.dumps({"benchmark": benchmark, "columns": cols, "format": fmt,
                         "allow_rejects": allow_rejects, **({"probs": prob_cols} if prob_cols else {})},
                        sort_keys=True)
    return GenericPlan(path=path, format=fmt, sha=sha, cols=cols, prob_cols=prob_cols or {}, config=config)



def _printable_benchmark(path: Path, benchmark: str | None) -> None:
    """A benchmark name (the flag's, or a harness log's task) with a control character is refused."""
    if benchmark is not None and re.search(CONTROL, benchmark):
        raise IngestError(f"{path}: benchmark name {benchmark!r} {CONTROL_REASON}; nothing from this file is stored")


class TableReader:
    """The generic adapter behind the interface _stage_and_insert reads (native sources have the same)."""

    def __init__(self, path: Path, fmt: str, cols: dict, prob_cols: dict | None = None):
        self.path, self.format, self.cols = path, fmt, cols
        self.prob_cols = prob_cols or {}  # --map prob_<option>= / option= prob= / label=: kept aside
        used = [c for c in dict.fromkeys(c for c in cols.values() if c is not None)]
        available = generic.file_columns(path, fmt) if any(c for c in used) else []
        # A used name that is no column of the file is a mapping expression (checked by resolve_columns).
        self.expressions = {c: c for c in used if available and c not in available}
        reads = [c for c in used if c not in self.expressions]
        reads += [r for e in self.expressions for r in expression_columns(e)]
        reads += list(self.prob_cols.values())
        self.file_cols = list(dict.fromkeys(reads))

    def batches(self, batch_rows: int):
        # A JSON string where a score or a human score is read ("1") is a mistyped field, not a number.
        numbers = tuple(c for c in (self.cols.get("score"), self.cols.get("human_score"))
                        if c in self.file_cols and c not in self.expressions)
        raw = generic.read_batches(self.path, self.format, self.file_cols, batch_rows, numbers=numbers)
        if self.expressions:
            raw = self._computed(raw)
        if "option" in self.prob_cols:
            return probs.attach_long(raw, self.prob_cols, self.cols)
        if "confidence" in self.prob_cols:
            return probs.attach_confidence(raw, self.prob_cols["confidence"], self.cols["score"])
        return probs.attach(raw, self.prob_cols) if self.prob_cols else raw

    def _computed(self, raw):
        for batch in raw:
            try:
                frame = evaluate(batch.frame, self.expressions, f"{self.path}: ", blank_is_null=self.format == "csv")
            except MappingError as exc:
                raise IngestError(str(exc)) from None
            yield generic.RawBatch(frame=frame, rejects=batch.rejects, extras=batch.extras)

    def raw_text(self, lines: set[int]) -> dict[int, str]:
        return generic.raw_text(self.path, self.format, lines)
