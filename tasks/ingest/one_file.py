"""One file's validated rows into the store, in one transaction: any failure leaves the store as it was.

Per file the outcome is all-or-nothing unless ``allow_rejects``: a single rejected row
means the file is not ingested and nothing in the store changes.  With ``allow_rejects``
the good rows are ingested and the bad ones are kept in the ``rejects`` table.  A score
that contradicts a stored one, or an item whose subject/domain disagrees with the stored
item, is never a reject but an error (:class:`~benchcert.tasks.ingest.errors.ConflictError`)
naming both sources: the file is refused whole, whatever ``allow_rejects`` says, because one
of the two sources is wrong and benchcert cannot tell which.

The file's rows are staged here (tasks/store/staging.py) and stored by the store's one write,
:func:`~benchcert.tasks.store.ingest_write.write_sources`, which a run of small files stored
together calls too; the transaction is the caller's policy (its own, or a command's).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import polars as pl

from benchcert.tasks import progress
from benchcert.tasks.ingest.adapters import generic
from benchcert.tasks.ingest.adapters.generic import LINE
from benchcert.tasks.ingest.errors import IngestError
from benchcert.tasks.ingest.file_checks import (StagedItems, conflict_error, dup_conflicts, repeated_key_lines,
                                                store_batch)
from benchcert.tasks.ingest.prefetch import ValidatedBatches
from benchcert.tasks.ingest.readers import field_label
from benchcert.tasks.ingest.reports import MAX_REPORTED_REJECTS, FileReport
from benchcert.tasks.ingest.validate import REJECT_SCHEMA
from benchcert.tasks.store import responses, staging
from benchcert.tasks.store.codes import CodeBook
from benchcert.tasks.store.ingest_write import NewSource, write_sources
from benchcert.tasks.store.staging import FileRows


@dataclass(frozen=True)
class FileContext:
    """One file's ingest settings: what is read, with which columns, and how its source is recorded."""

    path: Path
    reader: Any  # readers.TableReader or native.NativeSource: .format, .raw_text(lines)
    cols: dict
    benchmark: str | None
    sha: str
    config: str
    allow_rejects: bool
    replace_human: bool = False  # --replace-human-labels: a contradicting human score replaces the stored one

    @property
    def labels(self) -> dict[str, str]:
        """Each canonical field as the user named it (``column (field)`` when they differ)."""
        return {f: field_label(f, c) for f, c in self.cols.items()}


@dataclass(frozen=True)
class _ReadFile:
    """What reading the file's batches left: counts, rejects so far and the within-file check's inputs."""

    rows_read: int
    reject_frames: list[pl.DataFrame]
    staged_probs: bool
    key_hashes: list[pl.Series]
    staged_items: StagedItems


def stage_and_insert(con, ctx: FileContext, batches: ValidatedBatches, report: FileReport, *,
                     own_transaction: bool = True) -> None:
    """Read, check and store one file in a single transaction: any failure leaves the store as it was.

    ``batches`` yields the file's validated batches (read one ahead on a worker thread).  Rows
    of a benchmark that has nothing stored yet (the common first ingest) go straight into
    ``response_codes`` inside the transaction, since nothing stored can conflict with them;
    otherwise they are staged in a temporary table and anti-joined against the store.
    ``own_transaction=False``: the caller commits or rolls back (every file of an --atomic command
    at once).
    """
    if own_transaction:
        responses.begin(con)
    try:
        (source_id,) = responses.take_source_ids(con, 1)
        direct = ctx.benchmark is not None and not responses.has_models(con, [ctx.benchmark])
        rows = staging.file_rows(con, source_id, direct=direct)
        # A benchmark with no stored model has no stored responses, items or variants either.
        book = CodeBook(con, new_benchmarks=(ctx.benchmark,) if direct else ())
        _store_file(con, ctx, batches, book, rows, report)
        if own_transaction:
            (responses.commit if report.status == "ingested" else responses.rollback)(con)
    except BaseException:
        if own_transaction:
            responses.rollback(con)
        raise
    finally:
        staging.drop_staging(con, strict=own_transaction)


def _store_file(con, ctx: FileContext, batches: ValidatedBatches, book: CodeBook, rows: FileRows,
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
    source = NewSource(source_id=rows.source_id, benchmark=ctx.benchmark, path=str(ctx.path), sha256=ctx.sha,
                       format=ctx.reader.format, config=ctx.config, rows_read=read.rows_read, rows_accepted=staged,
                       rows_distinct=distinct_rows, rows_rejected=n_bad_rows,
                       rejects=rejects if rejects.height else None)
    written = write_sources(con, rows, [source], book, pruned=bool(rejects.height or n_dup_keys),
                            split_items=split_items, option_probs=read.staged_probs, replace_human=ctx.replace_human)
    if written.contradiction is not None:
        raise conflict_error(ctx.path, written.contradiction, ctx.cols.get("human_score"))
    added, replaced = written.added[rows.source_id], written.replaced
    report.status = "ingested"
    report.source_id = rows.source_id
    report.rows_added = added
    report.rows_already_stored = distinct_rows - added
    report.message = (f"{ctx.path}: {added} row(s) added, {distinct_rows - added} already stored"
                      + (f", {n_bad_rows} bad row(s) quarantined in rejects" if n_bad_rows else "")
                      + (f", {replaced} human label(s) replaced (the old ones kept in human_label_changes)"
                         if replaced else ""))


def _read_file(con, ctx: FileContext, batches: ValidatedBatches, book: CodeBook, rows: FileRows) -> _ReadFile:
    """Code and stage every validated batch; keep the rejects, key hashes, items and option probabilities."""
    labels = ctx.labels
    col_labels = {c: labels[f] for f, c in ctx.cols.items() if c is not None}
    reject_frames: list[pl.DataFrame] = []
    rows_read = 0
    staged_probs = False
    key_hashes: list[pl.Series] = []
    staged_items = StagedItems()
    try:
        for raw, good, bad in batches:
            rows_read += raw.frame.height + len({r.line for r in raw.rejects})
            progress.note(f"{Path(ctx.path).name}: {rows_read:,} rows read")
            if raw.extras is not None and raw.extras.height:
                staging.stage_option_probs(con, _probs_frame(raw.extras), first=not staged_probs)
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
                key_hashes.append(store_batch(con, book, good, rows, staged_items,
                                              one_benchmark=ctx.cols["benchmark"] is None))
    except UnicodeDecodeError as exc:
        raise generic.not_utf8(ctx.path, exc) from None
    except pa.ArrowException as exc:  # pyarrow parse errors that the invalid-row handler cannot absorb
        raise IngestError(f"{ctx.path}: cannot parse as {ctx.reader.format}: {exc}") from None
    return _ReadFile(rows_read=rows_read, reject_frames=reject_frames, staged_probs=staged_probs,
                     key_hashes=key_hashes, staged_items=staged_items)


def _probs_frame(extras: pl.DataFrame) -> pl.DataFrame:
    """A batch's option probabilities as the staged table's columns: line, probs, label."""
    if "label" not in extras.columns:
        extras = extras.with_columns(pl.lit(None, dtype=pl.Int64).alias("label"))
    return extras.rename({LINE: "line", "option_probs": "probs"}).select("line", "probs", "label")


def _within_file_conflicts(con, ctx: FileContext, book: CodeBook, rows: FileRows,
                           read: _ReadFile) -> tuple[int, bool, list[pl.DataFrame]]:
    """Within the file: keys given twice with different scores, or an item given two subjects.

    Returns the number of repeated keys, whether some item was given two subject/domain pairs,
    and the conflicting rows as rejects. Exact keys are compared only for hash groups with
    more than one row (none, usually).
    """
    dup_lines = repeated_key_lines(con, read.key_hashes, rows)
    read.key_hashes.clear()  # the hashes are done with: free them before the inserts
    # No two rows sharing a key hash: no key is repeated, nothing to scan.
    n_dup_keys = staging.mark_repeated_keys(con, rows, dup_lines) if dup_lines.height else 0
    dup_rejects = dup_conflicts(con, book, rows) if n_dup_keys else []
    # Staged pairs are distinct per item, so an item staged twice was given two subject/domain pairs.
    split_items = read.staged_items.split_items()
    staging.stage_items(con, read.staged_items.frame())  # what the item checks below read
    item_rejects = staging.split_item_rejects(con, rows) if split_items else []
    labels = ctx.labels
    frames = [pl.DataFrame(r, schema=REJECT_SCHEMA, orient="row").with_columns(pl.col("field").replace_strict(
                  {"score": labels["score"], "human_score": labels["human_score"], "parsed": labels["parsed"],
                   "subject/domain": f"{labels['subject']}/{labels['domain']}"},
                  default=pl.col("field")))
              for r in (dup_rejects, item_rejects) if r]
    return n_dup_keys, split_items, frames


def _name_rejects(ctx: FileContext, rejects: pl.DataFrame, report: FileReport) -> pl.DataFrame:
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


def _quarantine(con, rows: FileRows, rejects: pl.DataFrame, staged_items: StagedItems) -> None:
    """Take the bad lines out of the file's rows (``allow_rejects``), and the items left without a row."""
    staging.drop_lines(con, rows, rejects.select("line").unique())
    # An item all of whose rows were rejected is not stored either.
    kept = staging.item_keys(con, rows)
    staging.stage_items(con, staged_items.frame().filter(pl.col("item_key").is_in(kept.implode())))


def _keep_first_of_repeats(con, rows: FileRows, n_dup_keys: int) -> tuple[int, int]:
    """Identical duplicates inside the file count once: keep the first line of each key.

    Returns the rows staged and the distinct rows left.
    """
    staged = staging.count_rows(con, rows)
    if not n_dup_keys:
        return staged, staged
    staging.drop_repeats(con, rows)
    return staged, staging.count_rows(con, rows)
