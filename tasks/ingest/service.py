"""Ingest one log file into the store: read, validate, check against what is stored, insert.

Per file the outcome is all-or-nothing unless ``allow_rejects``: a single rejected row
means the file is not ingested and nothing in the store changes.  With ``allow_rejects``
the good rows are ingested and the bad ones are kept in the ``rejects`` table.  A score
that contradicts a stored one, or an item whose subject/domain disagrees with the stored
item, is never a reject but an error (:class:`ConflictError`) naming both sources: the
file is refused whole, whatever ``allow_rejects`` says, because one of the two sources is
wrong and benchcert cannot tell which.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import gzip
import hashlib
import json
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import polars as pl

from benchcert.tasks import progress
from benchcert.tasks.errors import is_disk_full
from benchcert.tasks.ingest.adapters import detect, generic, limits, native, probs
from benchcert.tasks.store.codes import ITEM, MODEL, VARIANT, CodeBook
from benchcert.tasks.ingest.mapping import ColumnMapping, MappingError, evaluate
from benchcert.tasks.ingest.prefetch import ValidatedBatches
from benchcert.tasks.schemas import CANONICAL_FIELDS
from benchcert.tasks.store.connection import DEFAULT_LOCK_TIMEOUT, StoreError, StoreLockedError, open_store, query_pl
from benchcert.tasks.ingest.validate import REJECT_SCHEMA

KEY = ("benchmark", "model", "item_id", "variant", "replicate")
#: Outcomes that are not failures; ``metadata`` = a file with no item rows that other files read
#: (lm-eval's aggregated results_<date>.json).
OK_STATUSES = ("ingested", "unchanged", "metadata")
MAX_REPORTED_REJECTS = 50


class IngestError(ValueError):
    """The file cannot be ingested as given (unreadable, mapping does not fit)."""


class ConflictError(IngestError):
    """The file contradicts what the store already holds."""


@dataclass
class FileReport:
    path: str
    status: str  # ingested | unchanged | metadata | rejected | conflict | error | locked | unusable (the store)
    #            | rolled-back | not-tried (--atomic)
    format: str | None = None
    sha256: str | None = None
    source_id: int | None = None
    rows_read: int = 0
    rows_accepted: int = 0
    rows_added: int = 0
    rows_already_stored: int = 0
    rows_rejected: int = 0
    duplicate_rows_in_file: int = 0
    message: str = ""
    rejects: list[dict] = field(default_factory=list)
    read: dict = field(default_factory=dict)  # native logs: what was read (model, task, metric, ...)

    @property
    def ok(self) -> bool:
        return self.status in OK_STATUSES

    def as_dict(self) -> dict:
        return asdict(self)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _field_label(canonical: str, column: str | None) -> str:
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


def _store(db, lock_timeout: float, con):
    """The caller's connection (inside its transaction), or the store opened for this file alone."""
    return contextlib.nullcontext(con) if con is not None else open_store(db, write=True, lock_timeout=lock_timeout)


@dataclass(frozen=True)
class GenericPlan:
    """How a table file (CSV, JSONL, JSON records, Parquet) is read, and the settings its source records."""

    path: Path
    format: str
    sha: str
    cols: dict
    prob_cols: dict
    config: str  # with ``sha``, what tells that the file is stored already

    def reader(self) -> _GenericReader:
        return _GenericReader(self.path, self.format, self.cols, self.prob_cols)


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


def unchanged_message(path, source_id: int) -> str:
    """The report of a file whose content is stored already with the same settings."""
    return f"{path}: already ingested as source {source_id} (same content and settings); nothing added"


def ingest_file(db: str | Path, path: str | Path, *, benchmark: str | None, mapping: ColumnMapping,
                allow_rejects: bool = False, lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
                batch_rows: int = generic.BATCH_ROWS, con=None, own_transaction: bool | None = None) -> FileReport:
    """Ingest one file; never raises for bad data, returns a report whose ``status`` says what happened.

    ``con``: an open store connection; unless ``own_transaction`` it is inside a transaction the
    caller commits or rolls back (:func:`ingest_files_atomic`).  By default (no ``con``) the
    store is opened for this file and the file is ingested in its own transaction.
    """
    path = Path(path)
    own = con is None if own_transaction is None else own_transaction
    report = FileReport(path=str(path), status="error")
    try:
        plan = open_file(path, mapping, benchmark, allow_rejects, report)
        if isinstance(plan, native.NativeSource):
            _ingest_native(db, plan, benchmark, allow_rejects, lock_timeout, batch_rows, report, con,
                           named=getattr(mapping, "model", None) is not None, own_transaction=own)
            return report
        fmt, sha, cols, prob_cols, config = plan.format, plan.sha, plan.cols, plan.prob_cols, plan.config
        reader = plan.reader()
        batches = ValidatedBatches(reader.batches(batch_rows), cols, benchmark)  # starts reading now
        try:
            with _store(db, lock_timeout, con) as store_con:
                done = store_con.execute(
                    "SELECT source_id, rows_accepted FROM sources WHERE sha256 = ? AND config = ? LIMIT 1",
                    [sha, config]).fetchall()
                done = done[0] if done else None
                if done is not None:
                    report.status, report.source_id = "unchanged", done[0]
                    report.message = unchanged_message(path, done[0])
                    return report
                ctx = _FileContext(path=path, reader=reader, cols=cols, benchmark=benchmark, sha=sha, config=config,
                                   allow_rejects=allow_rejects)
                _stage_and_insert(store_con, ctx, batches, report, own_transaction=own)
        finally:
            batches.close()
    except ConflictError as exc:
        report.status, report.message = "conflict", str(exc)
    except StoreLockedError as exc:
        report.status, report.message = "locked", str(exc)
    except StoreError as exc:
        report.status, report.message = "unusable", str(exc)
    except (IngestError, generic.AdapterError) as exc:
        report.status, report.message = "error", str(exc)
    except Exception as exc:  # noqa: BLE001 - no input may stop the files after it
        report.status, report.message = "error", describe_failure(path, exc)
    return report


def _printable_benchmark(path: Path, benchmark: str | None) -> None:
    """A benchmark name (the flag's, or a harness log's task) with a control character is refused."""
    import re

    from benchcert.tasks.ingest.validate import CONTROL, CONTROL_REASON

    if benchmark is not None and re.search(CONTROL, benchmark):
        raise IngestError(f"{path}: benchmark name {benchmark!r} {CONTROL_REASON}; nothing from this file is stored")


def describe_failure(path: Path, exc: BaseException) -> str:
    """One line naming the file and what is wrong with it, for an exception no adapter translated.

    Bad data must end in a per-file error, never in a traceback that stops the files after it;
    an exception type outside the known classes is named, so a defect stays visible.
    """
    if isinstance(exc, limits.DecompressionLimitError):
        return str(exc)
    if is_disk_full(exc):
        target = getattr(exc, "filename", None) or "the store or its temporary files"
        return (f"{path}: disk full (ENOSPC) writing {target} ({' '.join(str(exc).split())[:300]}); "
                "nothing from this file is stored; free some space and ingest it again")
    if isinstance(exc, UnicodeDecodeError):
        return str(generic.not_utf8(path, exc))
    if isinstance(exc, (EOFError, zlib.error, gzip.BadGzipFile)):
        return f"{path}: truncated or corrupt compressed data ({exc}); nothing from this file is stored"
    if isinstance(exc, RecursionError):
        return f"{path}: nested too deeply to read; nothing from this file is stored"
    if isinstance(exc, OSError):
        return f"{path}: cannot be read: {exc.strerror or exc}; nothing from this file is stored"
    return f"{path}: cannot be read ({type(exc).__name__}: {exc}); nothing from this file is stored"


class _GenericReader:
    """The generic adapter behind the interface _stage_and_insert reads (native sources have the same)."""

    def __init__(self, path: Path, fmt: str, cols: dict, prob_cols: dict | None = None):
        from benchcert.tasks.ingest.mapping import expression_columns

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
                frame = evaluate(batch.frame, self.expressions, f"{self.path}: ")
            except MappingError as exc:
                raise IngestError(str(exc)) from None
            yield generic.RawBatch(frame=frame, rejects=batch.rejects, extras=batch.extras)

    def raw_text(self, lines: set[int]) -> dict[int, str]:
        return generic.raw_text(self.path, self.format, lines)


def _ingest_native(db, source: native.NativeSource, benchmark: str | None, allow_rejects: bool,
                   lock_timeout: float, batch_rows: int, report: FileReport, shared_con=None, *,
                   named: bool = False, own_transaction: bool | None = None) -> None:
    """A harness log: the adapter yields canonical columns; the same staging, checks and rules apply.

    ``named``: ``--model`` names the model (the user's choice; the log is not checked against
    the names its content is stored under).
    """
    report.format, report.sha256, report.read = source.format, source.sha256, dict(source.read)
    if source.metadata_only:
        report.status = "metadata"
        report.message = f"{source.path}: {source.summary()}"
        return
    # Columns are canonical already; the benchmark is the source's (flag or log), a constant.
    cols = {f: (None if f == "benchmark" else f) for f in CANONICAL_FIELDS}
    config = json.dumps({"benchmark": benchmark, "format": source.format, "settings": source.settings,
                         "allow_rejects": allow_rejects}, sort_keys=True, default=str)
    batches = ValidatedBatches(source.batches(batch_rows), cols, source.benchmark)
    try:
        with _store(db, lock_timeout, shared_con) as con:
            done = con.execute("SELECT source_id FROM sources WHERE sha256 = ? AND config = ? LIMIT 1",
                               [source.sha256, config]).fetchall()
            if done:
                report.status, report.source_id = "unchanged", done[0][0]
                report.message = (f"{source.path}: already ingested as source {done[0][0]} (same content and "
                                  f"settings); nothing added [{source.summary()}]")
                return
            if not named:
                _refuse_second_name(con, source)
            ctx = _FileContext(path=source.path, reader=source, cols=cols, benchmark=source.benchmark,
                               sha=source.sha256, config=config, allow_rejects=allow_rejects)
            _stage_and_insert(con, ctx, batches, report,
                              own_transaction=shared_con is None if own_transaction is None else own_transaction)
    finally:
        batches.close()
    report.message += f" [{source.summary()}]"


def _refuse_second_name(con, source: native.NativeSource) -> None:
    """A log whose content is stored already under another model name is refused (ConflictError).

    The same log read again with other settings (a repaired results file beside it, a folder
    renamed) must not store its rows a second time under a second name it read itself: one run
    would be two models in every audit.  ``--model`` is the user's explicit choice and is not
    checked.
    """
    model = source.read.get("model")
    if not model:
        return
    other = con.execute("""
        SELECT DISTINCT m.model, src.source_id, src.path
        FROM sources src JOIN response_codes r ON r.source_id = src.source_id
        JOIN models m ON m.model_id = r.model_id
        WHERE src.sha256 = ? AND src.benchmark = ? AND m.model <> ?
        ORDER BY src.source_id LIMIT 3""", [source.sha256, source.benchmark, model]).fetchall()
    if other:
        named, source_id, where = other[0]
        raise ConflictError(
            f"{source.path}: this log (same content) is stored already as model {named!r} (source {source_id}, "
            f"{where}); storing it again as {model!r} would make one run two models; nothing ingested "
            "(pass --model to name the model yourself)")


@dataclass(frozen=True)
class _FileContext:
    """One file's ingest settings: what is read, with which columns, and how its source is recorded."""

    path: Path
    reader: Any  # _GenericReader or native.NativeSource: .format, .raw_text(lines)
    cols: dict
    benchmark: str | None
    sha: str
    config: str
    allow_rejects: bool

    @property
    def labels(self) -> dict[str, str]:
        """Each canonical field as the user named it (``column (field)`` when they differ)."""
        return {f: _field_label(f, c) for f, c in self.cols.items()}


@dataclass(frozen=True)
class _Rows:
    """Where the file's rows are kept while they are checked, inside the transaction.

    ``direct``: the benchmark has nothing stored, so rows go straight into ``response_codes``;
    otherwise into the temporary ``_stage``. ``rows_sql``/``rows_params`` name them either way.
    """

    source_id: int
    direct: bool
    rows_sql: str
    rows_params: list

    @property
    def table(self) -> str:
        return "response_codes" if self.direct else "_stage"


@dataclass(frozen=True)
class _ReadFile:
    """What reading the file's batches left: counts, rejects so far and the within-file check's inputs."""

    rows_read: int
    reject_frames: list[pl.DataFrame]
    staged_probs: bool
    key_hashes: list[pl.Series]
    staged_items: _StagedItems


def _stage_and_insert(con, ctx: _FileContext, batches: ValidatedBatches, report: FileReport, *,
                      own_transaction: bool = True) -> None:
    """Read, check and store one file in a single transaction: any failure leaves the store as it was.

    ``batches`` yields the file's validated batches (read one ahead on a worker thread).  Rows
    are turned into integer codes as they arrive (:class:`CodeBook`).  Rows of a benchmark
    that has nothing stored yet (the common first ingest) go straight into ``response_codes``
    inside the transaction, since nothing stored can conflict with them; otherwise they are
    staged in a temporary table and anti-joined against the store.  Either way only a 64-bit
    hash of each key is kept aside, in memory, for the within-file duplicate check (sorted to
    find repeats; exact keys are compared for the rare repeated hashes), and each distinct
    (item, subject, domain) is kept once, in memory (:class:`_StagedItems`), so every item
    check runs on a small table.
    """
    if own_transaction:
        con.execute("BEGIN TRANSACTION")
    try:
        source_id = con.execute("SELECT nextval('source_ids')").fetchall()[0][0]
        direct = ctx.benchmark is not None and not con.execute(
            "SELECT count(*) FROM (SELECT 1 FROM models WHERE benchmark = ? LIMIT 1)",
            [ctx.benchmark]).fetchall()[0][0]
        # The file's rows, wherever they are kept while checking: one SQL fragment, one parameter list.
        if direct:
            rows = _Rows(source_id, True, "(SELECT * FROM response_codes WHERE source_id = ?)", [source_id])
        else:
            con.execute("CREATE OR REPLACE TEMP TABLE _stage (model_id INTEGER, item_key INTEGER, variant_id INTEGER, "
                        "replicate BIGINT, score DOUBLE, source_id BIGINT, line BIGINT, human_score DOUBLE)")
            rows = _Rows(source_id, False, "_stage", [])
        # A benchmark with no stored model has no stored responses, items or variants either.
        book = CodeBook(con, new_benchmarks=(ctx.benchmark,) if direct else ())
        _store_file(con, ctx, batches, book, rows, report)
        if not own_transaction:
            pass  # the caller commits or rolls back every file of the command at once
        elif report.status == "ingested":
            con.execute("COMMIT")
        else:
            con.execute("ROLLBACK")
    except BaseException:
        if own_transaction:
            con.execute("ROLLBACK")
        raise
    finally:
        try:
            for t in ("_stage", "_dup_lines", "_dups", "_stage_probs"):
                con.execute(f"DROP TABLE IF EXISTS {t}")  # fixed names, not values
            con.unregister("_stage_items")
        except duckdb.Error:
            if own_transaction:
                raise  # in a shared transaction that failed, the caller's rollback drops them


def _store_file(con, ctx: _FileContext, batches: ValidatedBatches, book: CodeBook, rows: _Rows,
                report: FileReport) -> None:
    """Stage the file's rows, check them, and (unless a bad row refuses the file) store them; fills ``report``."""
    read = _read_file(con, ctx, batches, book, rows)
    n_dup_keys, split_items, conflicts = _within_file_conflicts(con, ctx, book, rows, read)
    reject_frames = read.reject_frames + conflicts
    rejects = (pl.concat(reject_frames).unique(maintain_order=True).sort("line")
               if reject_frames else pl.DataFrame(schema=REJECT_SCHEMA))
    n_bad_rows = rejects.select(pl.col("line").n_unique()).item() if rejects.height else 0
    report.rows_read = read.rows_read
    report.rows_rejected = n_bad_rows
    if rejects.height:
        rejects = _name_rejects(ctx, rejects, report)
        if not ctx.allow_rejects:
            return
        _quarantine(con, rows, rejects, read.staged_items)
    staged, distinct_rows = _keep_first_of_repeats(con, rows, n_dup_keys)
    report.duplicate_rows_in_file = staged - distinct_rows
    report.rows_accepted = staged
    added = _insert_rows(con, ctx, rows, distinct_rows)
    # Every new code is used unless rows were taken out (bad rows, repeated keys).
    _store_new_codes(con, book, rows.rows_sql, rows.rows_params, rows.source_id,
                     pruned=bool(rejects.height or n_dup_keys))
    _insert_items(con, rows, split_items)
    if read.staged_probs:
        native.insert_option_probs(con, rows.source_id, rows.rows_sql, rows.rows_params)
    _record_source(con, ctx, rows, rejects, (read.rows_read, staged, added, n_bad_rows))
    report.status = "ingested"
    report.source_id = rows.source_id
    report.rows_added = added
    report.rows_already_stored = distinct_rows - added
    report.message = (f"{ctx.path}: {added} row(s) added, {distinct_rows - added} already stored"
                      + (f", {n_bad_rows} bad row(s) quarantined in rejects" if n_bad_rows else ""))


def _read_file(con, ctx: _FileContext, batches: ValidatedBatches, book: CodeBook, rows: _Rows) -> _ReadFile:
    """Code and stage every validated batch; keep the rejects, key hashes, items and option probabilities."""
    labels = ctx.labels
    col_labels = {c: labels[f] for f, c in ctx.cols.items() if c is not None}
    reject_frames: list[pl.DataFrame] = []
    rows_read = 0
    staged_probs = False
    key_hashes: list[pl.Series] = []
    staged_items = _StagedItems()
    try:
        for raw, good, bad in batches:
            rows_read += raw.frame.height + len({r.line for r in raw.rejects})
            progress.note(f"{Path(ctx.path).name}: {rows_read:,} rows read")
            if raw.extras is not None and raw.extras.height:
                native.stage_option_probs(con, raw.extras, first=not staged_probs)
                staged_probs = True
            if raw.rejects:
                reject_frames.append(pl.DataFrame(
                    [{"line": r.line, "field": col_labels.get(r.field, r.field),
                      "reason": r.reason} for r in raw.rejects], schema=REJECT_SCHEMA))
            if raw.frame.height == 0:
                continue
            if bad.height:
                reject_frames.append(bad.with_columns(pl.col("field").replace_strict(
                    {c: labels[f] for f, c in ctx.cols.items() if c}, default=pl.col("field"))))
            if good.height:
                key_hashes.append(_store_batch(con, book, good, rows.source_id, rows.table, staged_items,
                                               one_benchmark=ctx.cols["benchmark"] is None))
    except UnicodeDecodeError as exc:
        raise generic.not_utf8(ctx.path, exc) from None
    except Exception as exc:  # pyarrow parse errors that the invalid-row handler cannot absorb
        if type(exc).__module__.startswith("pyarrow"):
            raise IngestError(f"{ctx.path}: cannot parse as {ctx.reader.format}: {exc}") from None
        raise
    return _ReadFile(rows_read=rows_read, reject_frames=reject_frames, staged_probs=staged_probs,
                     key_hashes=key_hashes, staged_items=staged_items)


def _within_file_conflicts(con, ctx: _FileContext, book: CodeBook, rows: _Rows,
                           read: _ReadFile) -> tuple[int, bool, list[pl.DataFrame]]:
    """Within the file: keys given twice with different scores, or an item given two subjects.

    Returns the number of repeated keys, whether some item was given two subject/domain pairs,
    and the conflicting rows as rejects. Exact keys are compared only for hash groups with
    more than one row (none, usually).
    """
    rows_sql, rows_params = rows.rows_sql, rows.rows_params
    dup_lines = _repeated_key_lines(con, read.key_hashes, rows_sql, rows_params)
    read.key_hashes.clear()  # the hashes are done with: free them before the inserts
    if dup_lines.height:
        con.register("_dup_lines_view", dup_lines.to_arrow())
        con.execute("CREATE OR REPLACE TEMP TABLE _dup_lines AS SELECT line FROM _dup_lines_view")
        con.unregister("_dup_lines_view")
        con.execute(f"""CREATE OR REPLACE TEMP TABLE _dups AS
            SELECT model_id, item_key, variant_id, replicate, count(*) AS n,
                   min(score) <> max(score) AS conflicting,
                   count(DISTINCT human_score) > 1 AS human_conflicting
            FROM {rows_sql}
            WHERE line IN (SELECT line FROM _dup_lines)
            GROUP BY model_id, item_key, variant_id, replicate HAVING count(*) > 1""", rows_params)
        n_dup_keys = con.execute("SELECT count(*) FROM _dups").fetchall()[0][0]
    else:  # no two rows share a key hash: no key is repeated, nothing to scan
        n_dup_keys = 0
    dup_conflicts = _dup_conflicts(con, book, rows_sql, rows_params) if n_dup_keys else []
    # Staged pairs are distinct per item, so an item staged twice was given two subject/domain pairs.
    split_items = read.staged_items.split_items()
    con.register("_stage_items", read.staged_items.frame().to_arrow())  # what the item checks below read
    item_conflicts = [] if not split_items else con.execute(f"""
        SELECT s.line, 'subject/domain' AS field,
               'item ' || c.item_id || ' is given ' || c.n || ' different subject/domain pairs in this file' AS reason
        FROM {rows_sql} s JOIN (
            SELECT item_key, any_value(item_id) AS item_id, count(DISTINCT (subject, domain)) AS n
            FROM _stage_items GROUP BY item_key HAVING count(DISTINCT (subject, domain)) > 1) c
        USING (item_key)""", rows_params).fetchall()
    labels = ctx.labels
    frames = [pl.DataFrame(r, schema=REJECT_SCHEMA, orient="row").with_columns(pl.col("field").replace_strict(
                  {"score": labels["score"], "human_score": labels["human_score"],
                   "subject/domain": f"{labels['subject']}/{labels['domain']}"},
                  default=pl.col("field")))
              for r in (dup_conflicts, item_conflicts) if r]
    return n_dup_keys, split_items, frames


def _name_rejects(ctx: _FileContext, rejects: pl.DataFrame, report: FileReport) -> pl.DataFrame:
    """The rejects with each line's raw text; without ``allow_rejects`` the report refuses the file."""
    raw_lines = ctx.reader.raw_text(set(rejects["line"].to_list()))
    rejects = rejects.with_columns(pl.col("line").replace_strict(raw_lines, default=None,
                                                                 return_dtype=pl.String).alias("raw"))
    report.rejects = rejects.head(MAX_REPORTED_REJECTS).to_dicts()
    if not ctx.allow_rejects:
        report.status = "rejected"
        report.message = (f"{ctx.path}: {report.rows_rejected} bad row(s) ({rejects.height} problem(s)); file not "
                          f"ingested, store unchanged. First: line {rejects['line'][0]}, field {rejects['field'][0]}: "
                          f"{rejects['reason'][0]}. Fix the file or pass --allow-rejects to ingest the good rows "
                          "and quarantine the bad ones.")
    return rejects


def _quarantine(con, rows: _Rows, rejects: pl.DataFrame, staged_items: _StagedItems) -> None:
    """Take the bad lines out of the file's rows (``allow_rejects``), and the items left without a row."""
    con.register("_bad_lines", rejects.select("line").unique().to_arrow())
    con.execute(f"DELETE FROM {rows.table} WHERE source_id = ? AND line IN (SELECT line FROM _bad_lines)",
                [rows.source_id])
    con.unregister("_bad_lines")
    # An item all of whose rows were rejected is not stored either.
    kept = query_pl(con, f"SELECT DISTINCT item_key FROM {rows.rows_sql}", rows.rows_params)["item_key"]
    con.register("_stage_items", staged_items.frame().filter(pl.col("item_key").is_in(kept.implode())).to_arrow())


def _keep_first_of_repeats(con, rows: _Rows, n_dup_keys: int) -> tuple[int, int]:
    """Identical duplicates inside the file count once: keep the first line of each key.

    Returns the rows staged and the distinct rows left.
    """
    staged = con.execute(f"SELECT count(*) FROM {rows.rows_sql}", rows.rows_params).fetchall()[0][0]
    if not n_dup_keys:
        return staged, staged
    con.execute(f"""DELETE FROM {rows.table} WHERE source_id = ? AND line IN (
        SELECT line FROM {rows.rows_sql} s SEMI JOIN _dups USING (model_id, item_key, variant_id, replicate)
        QUALIFY row_number() OVER (PARTITION BY model_id, item_key, variant_id, replicate ORDER BY line) > 1)""",
                [rows.source_id] + rows.rows_params)
    return staged, con.execute(f"SELECT count(*) FROM {rows.rows_sql}", rows.rows_params).fetchall()[0][0]


def _insert_rows(con, ctx: _FileContext, rows: _Rows, distinct_rows: int) -> int:
    """Check staged rows against the store and add the ones it does not hold; returns how many were added."""
    if rows.direct:  # a benchmark with nothing stored has no stored scores or items to contradict
        return distinct_rows
    # Only a model already stored can have stored responses (new codes are not in `models` yet).
    overlap = con.execute(
        "SELECT count(*) FROM (SELECT 1 FROM models WHERE model_id IN (SELECT DISTINCT model_id FROM _stage) "
        "LIMIT 1)").fetchall()[0][0] > 0
    _check_against_store(con, ctx.path, overlap, ctx.cols.get("human_score"))
    if overlap:
        return merge_responses(con, "_stage")
    return con.execute("INSERT INTO response_codes SELECT * FROM _stage").fetchall()[0][0]


#: The staged relations merge_responses takes (their names are written into its SQL).
_STAGED = frozenset({"_stage", "_run_rows"})


def merge_responses(con, staged: str) -> int:
    """Add the responses of the staged relation ``staged`` (response_codes' columns) that the store
    does not hold; returns how many were added. A stored response without a human score gains
    the one staged for it (human labels ingested after the judge's scores, issue #28). A staged
    human score contradicting a stored one never gets here: the file was refused as a conflict
    (issue #39). The one rule for the one-file and the many-files ingest."""
    if staged not in _STAGED:
        raise ValueError(f"staged: one of {sorted(_STAGED)}, not {staged!r}")
    con.execute(f"""UPDATE response_codes r SET human_score = s.human_score FROM {staged} s
                    WHERE r.model_id = s.model_id AND r.item_key = s.item_key AND r.variant_id = s.variant_id
                      AND r.replicate = s.replicate AND r.human_score IS NULL AND s.human_score IS NOT NULL""")
    return con.execute(f"""
        INSERT INTO response_codes
        SELECT * FROM {staged} s ANTI JOIN response_codes r USING (model_id, item_key, variant_id, replicate)
        """).fetchall()[0][0]


def _insert_items(con, rows: _Rows, split_items: bool) -> None:
    if rows.direct and not split_items:  # one row per item, and the benchmark has no stored items
        con.execute("INSERT INTO items SELECT benchmark, item_id, subject, domain, ?, line, item_key FROM _stage_items",
                    [rows.source_id])
    else:  # an item given two pairs keeps its first line's
        con.execute("""
            INSERT INTO items
            SELECT s.benchmark, s.item_id, arg_min(s.subject, s.line), arg_min(s.domain, s.line), ?, min(s.line),
                   s.item_key
            FROM _stage_items s ANTI JOIN items i USING (item_key)
            GROUP BY s.benchmark, s.item_id, s.item_key""", [rows.source_id])


def _record_source(con, ctx: _FileContext, rows: _Rows, rejects: pl.DataFrame, counts: tuple[int, int, int, int]) -> None:
    """The file's quarantined rows and its ``sources`` row; ``counts``: rows read, accepted, added, rejected."""
    if rejects.height:
        con.register("_rejects", rejects.to_arrow())
        con.execute("INSERT INTO rejects SELECT ?, ?, line, field, reason, raw FROM _rejects",
                    [rows.source_id, str(ctx.path)])
        con.unregister("_rejects")
    con.execute("INSERT INTO sources VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [rows.source_id, ctx.benchmark, str(ctx.path), ctx.sha, ctx.reader.format, ctx.config, *counts,
                 "ingested" if not rejects.height else "ingested-with-rejects",
                 dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)])


class _StagedItems:
    """The distinct (item, subject, domain) triples of a file, with their first lines.

    They stay in memory (one row per item, usually) and the item checks read them as
    ``_stage_items``; a triple that an earlier batch staged is not staged again, so an item
    staged twice was given two different (subject, domain) pairs.
    """

    SCHEMA = {"benchmark": pl.String, "item_id": pl.String, "item_key": pl.Int32, "subject": pl.String,
              "domain": pl.String, "line": pl.Int64}

    def __init__(self) -> None:
        self._frame = pl.DataFrame(schema=self.SCHEMA)

    def add(self, items: pl.DataFrame) -> None:
        """Stage the batch's triples that no earlier batch staged."""
        items = items.cast(self.SCHEMA)  # text out of the batch's Categoricals (few rows)
        if self._frame.height:
            items = items.join(self._frame, on=["item_key", "subject", "domain"], how="anti")
            items = pl.concat([self._frame, items])
        self._frame = items

    def frame(self) -> pl.DataFrame:
        """benchmark, item_id, item_key, subject, domain, line of every staged triple."""
        return self._frame

    def split_items(self) -> bool:
        """Whether some item was staged with two different (subject, domain) pairs."""
        return bool(self._frame["item_key"].is_duplicated().any())


def _store_batch(con, book: CodeBook, good: pl.DataFrame, source_id: int, table: str,
                 staged: _StagedItems, *, one_benchmark: bool = False) -> pl.Series:
    """Append a validated batch: coded rows to ``table``; items not staged before to ``staged``.

    Returns the rows' key hashes, sorted, for the within-file duplicate check.
    ``one_benchmark``: the benchmark is a constant (no column), so the batch need not be split.
    """
    bench = good["benchmark"]
    if not one_benchmark and not (bench == bench[0]).all():  # a benchmark column naming several
        return pl.concat([_store_batch(con, book, part, source_id, table, staged)
                          for part in good.partition_by("benchmark", maintain_order=True)]).sort()
    benchmark = bench[0]
    book.load(benchmark)  # the only step that reads the store before the insert below
    # Polars, numpy and DuckDB release the GIL, so the two threads keep both cores busy:
    # items are coded beside models, and the batch is inserted while its items are staged.
    with ThreadPoolExecutor(max_workers=2) as pool:
        coding = pool.submit(book.codes, ITEM, benchmark, good["item_id"])
        model_id = book.codes(MODEL, benchmark, good["model"])
        variant_id = book.codes(VARIANT, benchmark, good["variant"])
        item_key = coding.result()
        rows = pl.DataFrame([
            model_id, item_key, variant_id, good["replicate"], good["score"],
            pl.repeat(source_id, good.height, dtype=pl.Int64, eager=True).alias("source_id"),
            good["line"], good["human_score"]])
        con.register("_batch", rows.to_arrow())
        # Table names are fixed by the caller, never values from a log.  While this runs,
        # nothing else touches the connection.
        inserting = pool.submit(con.execute, f"INSERT INTO {table} SELECT * FROM _batch")
        try:
            frame = good.select("benchmark", "item_id", "subject", "domain", "line").with_columns(item_key)
            staged.add(_batch_items(frame))
            # Sorted here, while the insert runs, for the duplicate check after the last batch.
            keys = _key_hashes(rows).sort()
        finally:
            inserting.result()
            con.unregister("_batch")
    return keys


def _key_hashes(rows: pl.DataFrame) -> pl.Series:
    """A 64-bit hash of each row's key (model_id, item_key, variant_id, replicate)."""
    return rows.select(pl.col("model_id", "item_key", "variant_id").cast(pl.Int32),
                       pl.col("replicate").cast(pl.Int64)).hash_rows(0x3C6EF372).alias("key_hash")


def _repeated_key_lines(con, key_hashes: list[pl.Series], rows_sql: str, rows_params: list) -> pl.DataFrame:
    """Lines of the file's rows whose key hash occurs more than once (candidates for an exact check).

    ``key_hashes`` holds each batch's hashes, sorted.  Sorting 64-bit hashes finds repeats in a
    fraction of the time of a hash table over 10 million keys, and only the hashes are kept
    (8 bytes a row); when some hash repeats (rarely), the rows are read back from ``rows_sql``
    to find their lines, and the caller compares the keys themselves.
    """
    empty = pl.DataFrame(schema={"line": pl.Int64})
    if not key_hashes:
        return empty
    ordered = key_hashes[0] if len(key_hashes) == 1 else pl.concat(key_hashes).sort()  # each part is sorted
    repeated = ordered.filter(ordered == ordered.shift(1)).unique()
    if not repeated.len():
        return empty
    rows = query_pl(con, f"SELECT model_id, item_key, variant_id, replicate, line FROM {rows_sql}", rows_params)
    return rows.filter(_key_hashes(rows).is_in(repeated.implode())).select(pl.col("line").cast(pl.Int64))


def _batch_items(frame: pl.DataFrame) -> pl.DataFrame:
    """Each distinct (item, subject, domain) of a batch with its first line.

    Item codes are small dense integers, so the first row of each item is found by array
    indexing rather than by grouping on text; when every row's subject and domain equal those
    of its item's first row (the usual case; compared exactly) those first rows are the
    answer.  Otherwise (an item given two subjects, which the ingest reports) the batch is
    grouped by item, subject and domain.
    """
    columns = list(_StagedItems.SCHEMA)
    key = frame["item_key"].to_numpy()
    if key.size == 0:
        return frame.select(columns)
    base = int(key.min())
    slot = key - base
    rows = np.arange(key.size, dtype=np.int64)
    first = np.full(int(slot.max()) + 1, -1, dtype=np.int64)
    first[slot[::-1]] = rows[::-1]  # the last write wins, so each slot keeps its first row
    rep = first[slot]  # each row's item's first row
    if all(_same_as(frame[c], rep) for c in ("subject", "domain")):
        return frame.select(columns).gather(np.sort(first[first >= 0]))
    return (frame.group_by("item_key", "subject", "domain", maintain_order=True)
            .agg(pl.col("benchmark").first(), pl.col("item_id").first(), pl.col("line").min())
            .select(columns))


def _same_as(column: pl.Series, rows: np.ndarray) -> bool:
    """Whether every value equals the value at ``rows`` (exactly: text, or a Categorical's ids)."""
    if isinstance(column.dtype, pl.Categorical):
        ids = column.to_physical().to_numpy()
        return bool(np.array_equal(ids[rows], ids))
    return bool((column.gather(pl.Series(rows)) == column).all())


def _dup_conflicts(con, book: CodeBook, rows_sql: str, rows_params: list) -> list[tuple]:
    """(line, field, reason) of every row whose key the file gives again with another score or
    another human score (keeping the first line would drop the other label silently)."""
    found = query_pl(con, f"""
        SELECT s.line, s.model_id, s.item_key, s.variant_id, s.replicate,
               CASE WHEN d.conflicting THEN 'score' ELSE 'human_score' END AS field
        FROM {rows_sql} s JOIN (SELECT * FROM _dups WHERE conflicting OR human_conflicting) d
        USING (model_id, item_key, variant_id, replicate) ORDER BY s.line""", rows_params)
    if not found.height:
        return []
    for kind in (MODEL, ITEM, VARIANT):
        names = book.text_of(kind).select(pl.col("code").alias(kind.code), pl.col("text").alias(kind.text))
        found = found.join(names, on=kind.code, how="left")
    found = found.sort("line")
    words = {"score": "score", "human_score": "human score"}
    return [(line, f, f"key (model={m}, item_id={i}, variant={v}, replicate={r}) is given again with a "
                      f"different {words[f]}")
            for line, m, i, v, r, f in found.select("line", "model", "item_id", "variant", "replicate",
                                                    "field").iter_rows()]


def _store_new_codes(con, book: CodeBook, rows_sql: str, rows_params: list, source_id: int, *,
                     pruned: bool) -> None:
    """The models and variants this file named first, if any of its rows that use them was stored.

    Codes are given only to text of validated rows, so unless rows were ``pruned`` afterwards
    every new code is used and the check against the rows is skipped.
    """
    for kind in (MODEL, VARIANT):
        new = book.new_entries(kind)
        if not new.height:
            continue
        con.register("_new_codes", new.to_arrow())
        try:
            # Table and column names come from the fixed Kind constants.
            used = f" WHERE code IN (SELECT DISTINCT {kind.code} FROM {rows_sql})" if pruned else ""
            con.execute(f"""INSERT INTO {kind.table} ({kind.code}, benchmark, {kind.text}, source_id)
                SELECT code, benchmark, text, ? FROM _new_codes{used}""",
                        [source_id] + (rows_params if pruned else []))
        finally:
            con.unregister("_new_codes")


#: The column of ``_stage`` and ``response_codes`` each stored-value check compares, and its words.
_CONTRADICTIONS = (("score", "scores", "score"), ("human_score", "human scores", "human score"))


def _check_against_store(con, path: Path, overlap: bool, human_column: str | None = None) -> None:
    """Refuse the staged file (ConflictError) if it contradicts a stored score, human score or item.

    A human label is a measurement like the judge's score: one of the two files is wrong, and
    keeping the stored one silently would hide that (issue #39). A stored response without a
    human score is no contradiction: it gains the staged one (:func:`merge_responses`).
    """
    for column, plural, word in _CONTRADICTIONS if overlap else ():
        # Column names come from the fixed _CONTRADICTIONS, never from a log.
        differ = f"r.{column} <> s.{column}"  # NULL on either side (no human score) is no contradiction
        conflicts = con.execute(f"""
            SELECT m.model, i.item_id, v.variant, s.replicate, s.{column}, s.line, r.{column}, src.path, r.line
            FROM _stage s JOIN response_codes r USING (model_id, item_key, variant_id, replicate)
            JOIN models m ON m.model_id = s.model_id
            JOIN items i ON i.item_key = s.item_key
            JOIN variants v ON v.variant_id = s.variant_id
            JOIN sources src ON src.source_id = r.source_id
            WHERE {differ} ORDER BY s.line LIMIT 5""").fetchall()
        if not conflicts:
            continue
        n = con.execute(f"""SELECT count(*) FROM _stage s JOIN response_codes r
                            USING (model_id, item_key, variant_id, replicate) WHERE {differ}""").fetchall()[0][0]
        m, item, var, rep, value, line, old, old_path, old_line = conflicts[0]
        named = column == "human_score" and human_column not in (None, column)
        label = f"{word} (column {human_column!r})" if named else word
        raise ConflictError(
            f"{path}: {n} row(s) contradict stored {plural}; nothing ingested. First: model {m!r}, item {item!r}, "
            f"variant {var!r}, replicate {rep}: {label} {value:g} at {path}:{line} but {old:g} at {old_path}:{old_line}")
    items = con.execute("""
        SELECT n.item_id, n.subject, n.domain, n.line, i.subject, i.domain, src.path, i.line
        FROM (SELECT item_key, arg_min(item_id, line) AS item_id, arg_min(subject, line) AS subject,
                     arg_min(domain, line) AS domain, min(line) AS line
              FROM _stage_items GROUP BY item_key) n
        JOIN items i USING (item_key)
        JOIN sources src ON src.source_id = i.source_id
        WHERE i.subject <> n.subject OR i.domain <> n.domain ORDER BY n.line LIMIT 5""").fetchall()
    if items:
        item, subj, dom, line, old_subj, old_dom, old_path, old_line = items[0]
        raise ConflictError(
            f"{path}: item {item!r} has subject/domain {subj!r}/{dom!r} at {path}:{line} but "
            f"{old_subj!r}/{old_dom!r} at {old_path}:{old_line}; nothing ingested")


#: Status of a file that was ingested inside an --atomic command whose transaction was rolled back.
ROLLED_BACK = "rolled-back"
#: Status of a file an --atomic command did not try after an earlier file failed.
NOT_TRIED = "not-tried"


def ingest_files_atomic(db: str | Path, paths: list[str], *, benchmark: str | None, mapping: ColumnMapping,
                        allow_rejects: bool = False, lock_timeout: float = DEFAULT_LOCK_TIMEOUT) -> list[FileReport]:
    """Ingest every path in one transaction: all of them are stored, or none.

    The files are ingested in order under one lock and one transaction, each seeing the rows of
    the files before it; at the first file that fails, the transaction is rolled back, the
    files before it are reported ``rolled-back`` and those after it ``not-tried``.
    """
    reports: list[FileReport] = []
    try:
        with open_store(db, write=True, lock_timeout=lock_timeout) as con:
            con.execute("BEGIN TRANSACTION")
            try:
                failed = None
                for p in paths:
                    if failed is not None:
                        reports.append(FileReport(path=str(p), status=NOT_TRIED, message=(
                            f"{p}: not tried: --atomic, and {failed} was refused; nothing stored")))
                        continue
                    r = ingest_file(db, p, benchmark=benchmark, mapping=mapping, allow_rejects=allow_rejects,
                                    lock_timeout=lock_timeout, con=con)
                    reports.append(r)
                    if not r.ok:
                        failed = p
            except BaseException:
                con.execute("ROLLBACK")
                raise
            if failed is None:
                con.execute("COMMIT")
                return reports
            con.execute("ROLLBACK")
    except StoreLockedError as exc:
        return [FileReport(path=str(p), status="locked", message=str(exc)) for p in paths]
    except StoreError as exc:
        return [FileReport(path=str(p), status="unusable", message=str(exc)) for p in paths]
    for r in reports:
        if r.ok:
            r.status, r.source_id, r.rows_added = ROLLED_BACK, None, 0
            r.message = f"{r.path}: rolled back: --atomic, and {failed} was refused; nothing stored"
    return reports


def command_summary(reports: list[dict]) -> dict:
    """The end-of-command summary: which files were stored and which refused, with counts.

    ``stored`` holds the files whose content is in the store after the command (ingested,
    already there, or metadata read by others); every other file is ``refused``.
    """
    stored = [r for r in reports if r["status"] in OK_STATUSES]
    refused = [r for r in reports if r["status"] not in OK_STATUSES]
    return {"n_stored": len(stored), "n_refused": len(refused),
            "rows_added": sum(r.get("rows_added", 0) for r in stored),
            "stored": [{"path": r["path"], "status": r["status"], "rows_added": r.get("rows_added", 0)} for r in stored],
            "refused": [{"path": r["path"], "status": r["status"]} for r in refused]}


def summary_text(summary: dict, db) -> str:
    """The summary as the lines the command prints last."""
    lines = [f"stored: {summary['n_stored']} file(s), {summary['rows_added']} row(s) added to {db}"]
    lines += [f"    {r['path']} ({r['status']}, {r['rows_added']} row(s) added)" for r in summary["stored"]]
    lines.append(f"refused: {summary['n_refused']} file(s)")
    lines += [f"    {r['path']} ({r['status']})" for r in summary["refused"]]
    return "\n".join(lines)
