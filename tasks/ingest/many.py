"""Many files in one command: the store opened once, runs of small table files stored together.

Ingested one at a time, a folder of small logs (hundreds of CSV files of a hundred rows) cost
0.1-0.26 s a file: the store opened, its schema checked and its write-ahead log checkpointed
on close, a reader thread started, and some twenty statements in a transaction, for each file.
:func:`ingest_files` opens the store once for the whole command and reads the small table
files (generic CSV, JSONL, JSON records, Parquet of at most :data:`SMALL_FILE_BYTES`, read in
one batch) ahead of the store; a run of such files, consecutive in the order given, is
validated as one frame and stored in one transaction with a handful of statements.

The rule that keeps the store identical to ingesting the files one at a time: a run is
stored together only where the one-file path (:func:`~benchcert.tasks.ingest.service.ingest_file`)
would do nothing but add each file's rows: no bad row, no key given twice (within a file or
across the run), no item given two subject/domain pairs, no score or item contradicting the
store, no file stored already.  Then each file gets the source id, the codes
of the texts it names first (in sorted text order within the file), the items, rows, ``sources``
row and report that the one-file path gives it.  Every other file (a bad row, a conflict, a native
harness log, a large file) goes through ``ingest_file`` itself, at its place in the order, on
the same connection and in its own transaction, so its report (rejects with file, line and
field; conflicts naming both sources) is the one-file path's own.  The first such file of a run
ends the run; the files after it are checked again against the store it left.

A run's files are stored by the store's one write,
:func:`~benchcert.tasks.store.ingest_write.write_sources`, which the one-file path calls for its
file too: the run's rows are coded by a :class:`~benchcert.tasks.store.codes.CodeBook` file after
file (so each file gets the codes the one-file path would give it), staged as one relation, checked
against the store (the write stores the files before the first one the store contradicts) and
inserted.  Batching and ``--atomic`` are policies around that write, not paths of their own:
batching (``_Command.batching``) decides which files are stored together, ``--atomic``
(``_Command.atomic``) puts the whole command in one transaction instead of one per run or file;
:func:`ingest_files_atomic` is the command with ``atomic`` and no batching.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import polars as pl
from polars.exceptions import PanicException, PolarsError

from benchcert.tasks import progress
from benchcert.tasks.ingest.adapters import generic
from benchcert.tasks.ingest.adapters.generic import LINE
from benchcert.tasks.ingest.errors import FILE_ERRORS, READ_FAILURES
from benchcert.tasks.ingest.file_checks import StagedItems
from benchcert.tasks.ingest.readers import GenericPlan, open_file
from benchcert.tasks.ingest.reports import NOT_TRIED, ROLLED_BACK, FileReport, unchanged_message
from benchcert.tasks.ingest.service import ingest_file
from benchcert.tasks.ingest.validate import validate_batch
from benchcert.tasks.store import responses, staging
from benchcert.tasks.store.codes import ITEM, MODEL, VARIANT, CodeBook
from benchcert.tasks.store.ingest_write import NewSource, write_sources
from benchcert.tasks.store.connection import DEFAULT_LOCK_TIMEOUT, StoreError, StoreLockedError, open_store

#: A table file up to this size on disk is read ahead and may be stored with others.
SMALL_FILE_BYTES = 256 << 10
#: At most this many rows are read ahead before a run is stored (memory stays bounded).
MAX_RUN_ROWS = 1_000_000
_KEY = ["benchmark", "model", "item_id", "variant", "replicate"]
#: The columns of ``response_codes``, in order, as a run's coded rows are staged.
_RESPONSE_COLUMNS = ("model_id", "item_key", "variant_id", "replicate", "score", "source_id", "line", "human_score",
                     "parsed")
#: Each row's position in the run and its line in its file, in one integer (``pos << 32 | line``).
_SHIFT = 32


@dataclass(frozen=True)
class _Small:
    """A small table file read ahead: its plan and its one raw batch."""

    index: int  # place in the command
    plan: GenericPlan
    frame: pl.DataFrame  # the raw batch (``LINE``: the line in the file)


def ingest_files(db: str | Path, paths: list[str], *, benchmark: str | None, mapping,
                 allow_rejects: bool = False, lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
                 atomic: bool = False) -> list[FileReport]:
    """Ingest ``paths`` in order, each file all-or-nothing as :func:`ingest_file` does, the store opened once.

    Returns one report per path, in order: the same reports (and the same store) as ingesting
    the files one at a time.  ``atomic``: every file in one transaction; at the first refused
    file nothing is stored, the files before it are ``rolled-back`` and those after it
    ``not-tried``.  The lock is held for the whole command.
    """
    cmd = _Command(db=db, paths=[str(p) for p in paths], benchmark=benchmark, mapping=mapping,
                   allow_rejects=allow_rejects, lock_timeout=lock_timeout, atomic=atomic,
                   new_store=not Path(db).exists())
    try:
        return _run_command(cmd)
    except _RunFailed:  # (--atomic: a run's write failed half way) the files one by one, from the start
        cmd = _Command(db=db, paths=cmd.paths, benchmark=benchmark, mapping=mapping, allow_rejects=allow_rejects,
                       lock_timeout=lock_timeout, atomic=True, new_store=False, batching=False)
        return _run_command(cmd)


def ingest_files_atomic(db: str | Path, paths: list[str], *, benchmark: str | None, mapping,
                        allow_rejects: bool = False, lock_timeout: float = DEFAULT_LOCK_TIMEOUT) -> list[FileReport]:
    """Ingest every path in one transaction, each by the one-file path: all of them are stored, or none.

    :func:`ingest_files` with ``atomic`` and no batching of small files (each file sees the rows
    of the files before it inside the transaction).
    """
    cmd = _Command(db=db, paths=[str(p) for p in paths], benchmark=benchmark, mapping=mapping,
                   allow_rejects=allow_rejects, lock_timeout=lock_timeout, atomic=True, new_store=False,
                   batching=False)
    return _run_command(cmd)


def _run_command(cmd: _Command) -> list[FileReport]:
    """The command's files on one connection: each run or file in its own transaction, or (--atomic)
    all in the command's; the store's lock or unusability reported on the files it kept from the store."""
    try:
        with open_store(cmd.db, write=True, lock_timeout=cmd.lock_timeout) as con:
            cmd.con = con
            following = responses.next_source_id(con)
            if cmd.atomic:
                responses.begin(con)
            try:
                _ingest_in_order(cmd)
            except _Refused:
                responses.rollback(con)
                return _rolled_back(cmd)
            except _RunFailed:  # redone file by file: from the ids the command began with
                responses.rollback(con)
                responses.give_back_source_ids(con, following)
                raise
            except BaseException:
                if cmd.atomic:
                    responses.rollback(con)
                raise
            if cmd.atomic:
                responses.commit(con)
    except StoreLockedError as exc:
        return [FileReport(path=p, status="locked", message=str(exc)) if r is None or cmd.atomic else r
                for r, p in zip(cmd.reports, cmd.paths)]
    except StoreError as exc:
        return [FileReport(path=p, status="unusable", message=str(exc)) if r is None or cmd.atomic else r
                for r, p in zip(cmd.reports, cmd.paths)]
    return cmd.reports  # type: ignore[return-value]


class _Refused(Exception):
    """--atomic: a file was refused; the command stores nothing."""


class _RunFailed(Exception):
    """--atomic: storing a run failed inside the command's transaction."""


@dataclass
class _Command:
    """One ingest command: its settings, its store connection and a report per path (None until known)."""

    db: str | Path
    paths: list[str]
    benchmark: str | None
    mapping: object
    allow_rejects: bool
    lock_timeout: float
    atomic: bool
    new_store: bool  # made by this command's opening
    batching: bool = True  # small table files read ahead and stored together where that changes nothing
    con: object = None
    reports: list = field(default_factory=list)
    failed: str | None = None  # --atomic: the refused file

    def __post_init__(self) -> None:
        self.reports = [None] * len(self.paths)

    def one_file(self, i: int) -> None:
        """File ``i`` by the one-file path, in its own transaction (--atomic: the command's)."""
        following = responses.next_source_id(self.con)
        with progress.prefixed(f"ingesting file {i + 1}/{len(self.paths)}"):
            report = ingest_file(self.db, self.paths[i], benchmark=self.benchmark, mapping=self.mapping,
                                 allow_rejects=self.allow_rejects, lock_timeout=self.lock_timeout, con=self.con,
                                 own_transaction=not self.atomic)
        self.reports[i] = report
        if self.atomic and not report.ok:
            self.failed = self.paths[i]
            raise _Refused
        # The first file of a new store, opened for it alone, made the store in the same opening:
        # that commit wrote the sequence with the id a refused file took, and the next file got
        # the one after it.  Any other refused file left no trace.
        if report.status != "ingested" and not self.atomic and not (self.new_store and i == 0):
            responses.give_back_source_ids(self.con, following)


def _ingest_in_order(cmd: _Command) -> None:
    """Every path in order: small table files read ahead into runs, every other file by itself."""
    run: list[_Small] = []
    rows = 0
    n = len(cmd.paths)
    for i, p in enumerate(cmd.paths):
        progress.note(f"ingesting file {i + 1}/{n}: {Path(p).name}")
        small = _read_small(i, Path(p), cmd.benchmark, cmd.mapping, cmd.allow_rejects) if cmd.batching else None
        if small is not None:
            progress.note(f"ingesting file {i + 1}/{n}: {Path(p).name}: {small.frame.height:,} rows read")
            run.append(small)
            rows += small.frame.height
            if rows < MAX_RUN_ROWS:
                continue
        _store_runs(cmd, run)
        run, rows = [], 0
        if small is None:
            cmd.one_file(i)
    _store_runs(cmd, run)


def _rolled_back(cmd: _Command) -> list[FileReport]:
    """--atomic after a refused file: the files before it rolled back, those after it not tried."""
    out = []
    for p, r in zip(cmd.paths, cmd.reports):
        if r is None:
            r = FileReport(path=p, status=NOT_TRIED,
                           message=f"{p}: not tried: --atomic, and {cmd.failed} was refused; nothing stored")
        elif r.ok:
            r.status, r.source_id, r.rows_added = ROLLED_BACK, None, 0
            r.message = f"{r.path}: rolled back: --atomic, and {cmd.failed} was refused; nothing stored"
        out.append(r)
    return out


def _read_small(index: int, path: Path, benchmark: str | None, mapping, allow_rejects: bool) -> _Small | None:
    """The file read ahead, or None when the one-file path is to ingest it (or report what is wrong)."""
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > SMALL_FILE_BYTES:
            return None
        plan = open_file(path, mapping, benchmark, allow_rejects, FileReport(path=str(path), status="error"))
        if not isinstance(plan, GenericPlan) or plan.prob_cols:
            return None
        batches = list(plan.reader().batches(generic.BATCH_ROWS))
    except (*FILE_ERRORS, *READ_FAILURES):  # the one-file path reads it again and says what is wrong
        return None
    if len(batches) != 1 or batches[0].rejects or batches[0].extras is not None or not batches[0].frame.height:
        return None
    return _Small(index=index, plan=plan, frame=batches[0].frame)


#: What a run's data can raise (the store refusing a value, polars on a frame of several files,
#: an unreadable file): the one-file path then takes each file and reports its own error. A
#: programming error (KeyError, TypeError, ...) is not caught: it would only show as slowness.
_DATA_ERRORS = (duckdb.Error, PolarsError, PanicException, OSError, ValueError)


def _store_runs(cmd: _Command, run: list[_Small]) -> None:
    """Store ``run`` in order: clean stretches together, each other file by the one-file path."""
    while run:
        try:
            k = _store_run(cmd, run)
        except _RunFailed:
            raise
        except _DATA_ERRORS:  # nothing of the run was stored: each file goes the one-file way, which reports it
            for small in run:
                if cmd.reports[small.index] is None:
                    cmd.one_file(small.index)
            return
        if k == len(run):
            return
        cmd.one_file(run[k].index)
        run = run[k + 1:]


def _store_run(cmd: _Command, run: list[_Small]) -> int:
    """Store the longest clean stretch at the head of ``run``; returns its length (files stored or stored already).

    The file at the returned position (if any) is for the one-file path.
    """
    con, reports = cmd.con, cmd.reports
    stored = _stored_already(con, run)
    todo = [pos for pos in range(len(run)) if pos not in stored]
    end = len(run)
    if todo:
        end = _store_clean(cmd, run, todo)
    # Files stored already before the end of the stretch are unchanged whatever the stretch did.
    for pos, source_id in stored.items():
        if pos < end:
            plan = run[pos].plan
            reports[run[pos].index] = FileReport(path=str(plan.path), status="unchanged", format=plan.format,
                                                 sha256=plan.sha, source_id=source_id,
                                                 message=unchanged_message(plan.path, source_id))
    return end


def _store_clean(cmd: _Command, run: list[_Small], todo: list[int]) -> int:
    """Store the files at ``todo`` (positions in ``run``) up to the first that is not clean; returns its position."""
    rows, end = _validated(run, todo, cmd.benchmark)
    files = [pos for pos in todo if pos < end]
    if files:
        end = min(end, _write_run(cmd, run, files, rows.filter(pl.col("pos") < end)))
    return end


def _stored_already(con, run: list[_Small]) -> dict[int, int]:
    """Position -> source id of the files whose content and settings are stored already."""
    keys = pl.DataFrame({"pos": range(len(run)), "sha256": [s.plan.sha for s in run],
                         "config": [s.plan.config for s in run]}, schema={"pos": pl.Int64, "sha256": pl.String,
                                                                          "config": pl.String})
    return responses.stored_sources(con, keys)


def _validated(run: list[_Small], todo: list[int], benchmark: str | None) -> tuple[pl.DataFrame, int]:
    """The canonical rows of the files at ``todo`` (text as text, ``pos`` and ``line``), and the
    position of the first file that is not clean by itself or beside the files before it.

    Files with the same columns (and types) are validated as one frame: validation is row by
    row, so the verdicts are those of each file alone.
    """
    groups: dict[tuple, list[pl.DataFrame]] = {}
    cols_of: dict[tuple, dict] = {}
    for pos in todo:
        small = run[pos]
        key = (tuple(small.frame.schema.items()), tuple(sorted((k, v or "") for k, v in small.plan.cols.items())))
        cols_of[key] = small.plan.cols
        groups.setdefault(key, []).append(small.frame.with_columns(pl.col(LINE) + (pos << _SHIFT)))
    end = len(run)
    parts = []
    for key, frames in groups.items():
        good, bad = validate_batch(pl.concat(frames, rechunk=True), cols_of[key], benchmark=benchmark)
        if bad.height:
            end = min(end, int(bad["line"].min()) >> _SHIFT)
        parts.append(good.select(
            pl.col("benchmark", "model", "item_id", "subject", "domain", "variant").cast(pl.String),
            "replicate", "score", "human_score", "parsed",
            (pl.col("line") // (1 << _SHIFT)).alias("pos"), (pl.col("line") % (1 << _SHIFT)).alias("line")))
    rows = pl.concat(parts).sort("pos", "line")
    # A key given again (in the same file or a later one), an item given another subject/domain
    # than at its first row, or a file naming several benchmarks: the one-file path decides that file.
    item = ["benchmark", "item_id"]
    again = rows.filter(~pl.struct(_KEY).is_first_distinct() | (pl.col("subject") != pl.col("subject").first().over(
        item)) | (pl.col("domain") != pl.col("domain").first().over(item))
        | (pl.col("benchmark") != pl.col("benchmark").first().over("pos")))
    # (The same content twice repeats every key: the second copy is the one-file path's, which
    # finds it stored already.)
    if again.height:
        end = min(end, int(again["pos"].min()))
    return rows, end


def _write_run(cmd: _Command, run: list[_Small], files: list[int], rows: pl.DataFrame) -> int:
    """Store the clean files at ``files`` in one transaction (--atomic: in the command's) by the store's
    one write; fill their reports.  Returns the position of the first file the store contradicts
    (it and the files after it are not stored), else past the end."""
    con, reports = cmd.con, cmd.reports
    following = responses.next_source_id(con)
    if not cmd.atomic:
        responses.begin(con)
    try:
        end = _write_files(cmd, run, files, rows)
        if not cmd.atomic:
            responses.commit(con)
    except BaseException as exc:
        for pos in files:
            reports[run[pos].index] = None
        if cmd.atomic:  # the command's transaction holds part of the run: it is rolled back whole
            raise _RunFailed from exc
        responses.rollback(con)
        responses.give_back_source_ids(con, following)
        raise
    finally:
        staging.drop_staging(con, strict=not cmd.atomic)
    return end


def _write_files(cmd: _Command, run: list[_Small], files: list[int], rows: pl.DataFrame) -> int:
    """The files' rows coded, staged and stored by :func:`write_sources` (inside a transaction)."""
    con = cmd.con
    benchmarks = rows["benchmark"].unique().to_list()
    direct = not responses.has_models(con, benchmarks)
    ids = responses.take_source_ids(con, len(files))
    source_of = dict(zip(files, ids))
    book = CodeBook(con, new_benchmarks=tuple(benchmarks) if direct else ())
    staged = staging.file_rows(con, ids[0], direct=direct, sources=len(files))
    coded = _coded(book, rows, source_of)
    staging.append_rows(con, staged, coded.select(*_RESPONSE_COLUMNS))
    # Each item's first row (by file, then line): the run names no item with two subject/domain pairs.
    staging.stage_items(con, coded.unique(subset=["item_key"], keep="first", maintain_order=True).select(
        *StagedItems.SCHEMA, "source_id"))
    sources = []
    for pos, sid in source_of.items():
        plan, n = run[pos].plan, run[pos].frame.height
        sources.append(NewSource(source_id=sid, benchmark=cmd.benchmark, path=str(plan.path), sha256=plan.sha,
                                 format=plan.format, config=plan.config, rows_read=n, rows_accepted=n,
                                 rows_distinct=n))
    written = write_sources(con, staged, sources, book)
    for pos, sid in source_of.items():
        if sid not in written.added:
            continue
        plan, n, a = run[pos].plan, run[pos].frame.height, written.added[sid]
        cmd.reports[run[pos].index] = FileReport(
            path=str(plan.path), status="ingested", format=plan.format, sha256=plan.sha, source_id=sid,
            rows_read=n, rows_accepted=n, rows_added=a, rows_already_stored=n - a,
            message=f"{plan.path}: {a} row(s) added, {n - a} already stored")
    found = written.contradiction
    return len(run) if found is None else files[ids.index(found.source_id)]


def _coded(book: CodeBook, rows: pl.DataFrame, source_of: dict[int, int]) -> pl.DataFrame:
    """The rows with their codes and source ids, as the one-file path codes each file (a file names one
    benchmark): a stored text keeps its code, the texts a file names first get the next free codes
    in sorted text order, file after file."""
    parts = []
    # One call per stretch of consecutive files of one benchmark (usually the whole run), in file order.
    stretch = (pl.col("benchmark") != pl.col("benchmark").shift(1)).fill_null(True).cum_sum().alias("_stretch")
    for _, part in rows.with_columns(stretch).partition_by("_stretch", maintain_order=True, as_dict=True).items():
        benchmark = part["benchmark"][0]
        parts.append(part.drop("_stretch").with_columns(
            book.codes(MODEL, benchmark, part["model"], files=part["pos"]),
            book.codes(ITEM, benchmark, part["item_id"], files=part["pos"]),
            book.codes(VARIANT, benchmark, part["variant"], files=part["pos"])))
    sources = pl.DataFrame({"pos": list(source_of), "source_id": list(source_of.values())},
                           schema={"pos": pl.Int64, "source_id": pl.Int64})
    return pl.concat(parts).sort("pos", "line").join(sources, on="pos", how="left", maintain_order="left")
