"""lighteval per-sample details: the Parquet files ``lighteval ... --save-details`` writes.

lighteval (0.10 and later; its ``EvaluationTracker``) writes, per task of a run,
``OUT/details/<model_name>/<date>/details_<task>_<date>.parquet``: one row per document with the
columns ``doc`` (the ``Doc``: ``id``, ``task_name``, ``query``, ``choices``, ``gold_index``,
``specific``, ...), ``metric`` (a struct of the sample-level metrics, e.g. ``em`` or ``acc``) and
``model_response``; beside it, ``OUT/results/<model_name>/results_<date>.json`` holds the
aggregated scores (``results[<task>][<metric>]``, the mean of the sample values for the usual
``np.mean`` metrics) and ``config_general.model_name``.  Earlier versions' flat details columns
(``example``, ``predictions``, ``metrics``) are not read.

Mapping to the canonical row: ``model`` = ``--model``, else the folders between ``details/`` and
the date folder (``org/name`` for a hub model); ``benchmark`` = ``--benchmark``, else the task as
lighteval names it (``doc.task_name``, e.g. ``capitals_gen|0``: the few-shot count is part of the
name, as in the results file); ``item_id`` = ``doc.id`` (the document's index in the task;
``--map item_id=doc.specific.FIELD`` reads another field, and ``subject``/``domain`` likewise);
``score`` = the ``metric`` field chosen by ``--metric`` (default: the only one); ``variant`` =
``""``; ``replicate`` = the rank of the document's id among the file's rows (0 unless a document
is evaluated more than once).  A corpus-level metric (bleu, chrf, ...) stores per-sample inputs to
the corpus statistic, not scores; it is refused, because its mean is not the task's value.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from benchcert.tasks.ingest.adapters import registry
from benchcert.tasks.ingest.adapters.generic import Reject
from benchcert.tasks.ingest.adapters.native import (
    NativeError, NativeSource, Row, check_mapped, load_json, score_choice, text_fields, to_float)
from benchcert.tasks.ingest.mapping import ColumnMapping

FORMAT = "lighteval"
COLUMNS = ("doc", "metric", "model_response")
_DATE = r"\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d+)?"
DATE_FOLDER = re.compile(rf"^{_DATE}$")
DETAILS_NAME = re.compile(rf"^details_(?P<task>.+)_(?P<date>{_DATE})\.parquet$")
RESULTS_NAME = re.compile(rf"^results_(?P<date>{_DATE})\.json$")
DEFAULT_FIELDS = {"item_id": "doc.id"}
_BATCH = 1024


def _parquet(path: Path) -> pq.ParquetFile:
    try:
        return pq.ParquetFile(path)
    except (pa.ArrowException, OSError, EOFError) as exc:
        raise NativeError(f"{path}: not a readable Parquet file ({exc}); the details file is truncated or corrupt") \
            from None


def _metric_names(path: Path, pf: pq.ParquetFile) -> list[str]:
    schema = pf.schema_arrow
    missing = [c for c in ("doc", "metric") if c not in schema.names]
    if missing:
        raise NativeError(f"{path}: no {' or '.join(missing)} column; not a lighteval details file of version 0.10 "
                          f"or later (columns: {', '.join(schema.names)})")
    metric = schema.field("metric").type
    if not pa.types.is_struct(metric):
        raise NativeError(f"{path}: the metric column is {metric}, not a struct of named metrics")
    return [metric.field(i).name for i in range(metric.num_fields)]


def _rows_of(path: Path, pf: pq.ParquetFile) -> Iterator[tuple[int, dict]]:
    """(1-based row, {doc, metric}) for every row, read a batch at a time."""
    line = 0
    try:
        for batch in pf.iter_batches(batch_size=_BATCH, columns=["doc", "metric"]):
            for row in batch.to_pylist():
                line += 1
                yield line, row
    except (pa.ArrowException, OSError) as exc:
        raise NativeError(f"{path}: row {line + 1} and after cannot be read ({exc}); the file is truncated or "
                          "corrupt") from None


def _model_from_path(path: Path) -> str | None:
    """``org/name`` from ``.../details/org/name/<date>/details_*.parquet``, or None."""
    parts = path.resolve().parts
    if len(parts) < 4 or not DATE_FOLDER.match(parts[-2]):
        return None
    above = parts[:-2]
    if "details" not in above:
        return None
    start = len(above) - above[::-1].index("details")
    model = "/".join(above[start:])
    return model or None


def _check_metric(path: Path, mapping: ColumnMapping, names: list[str]) -> str:
    chosen = score_choice(mapping, "metric")
    if chosen is None:
        if len(names) == 1:
            return names[0]
        raise NativeError(f"{path}: the details hold several metrics {names}; choose one with --metric NAME")
    if chosen not in names:
        raise NativeError(f"{path}: unknown metric {chosen!r}: this file's metrics are {names}; choose one with "
                          "--metric NAME")
    return chosen


def _score(row: dict, metric: str) -> tuple[float | None, str | None]:
    value = (row.get("metric") or {}).get(metric)
    if isinstance(value, (dict, list)):
        return None, (f"a {type(value).__name__}, not a number: {metric} is a corpus-level metric whose per-sample "
                      "values are inputs to a corpus statistic, not scores; choose a sample-level metric")
    return to_float(value, strings=False)


def _records(path: Path, model: str, metric: str, fields: dict[str, str], task: str | None
             ) -> Iterator[Row | Reject]:
    seen: Counter = Counter()
    for line, row in _rows_of(path, _parquet(path)):
        raw = _describe(row)
        doc = row.get("doc")
        if not isinstance(doc, dict):
            yield Reject(line, "doc", "missing (null)", raw)
            continue
        if task is not None and doc.get("task_name") != task:
            yield Reject(line, "doc.task_name", f"{json.dumps(doc.get('task_name'))[:60]}, not the file's task "
                         f"{task!r}", raw)
            continue
        values, bad = text_fields(row, fields, "row")
        if bad:
            yield Reject(line, bad[0], bad[1], raw)
            continue
        score, why = _score(row, metric)
        if why:
            yield Reject(line, f"metric.{metric}", why, raw)
            continue
        yield Row(line=line, model=model, score=score, replicate=seen[values["item_id"]], src=row, **values)
        seen[values["item_id"]] += 1


def _first_task(path: Path, pf: pq.ParquetFile) -> str | None:
    for _, row in _rows_of(path, pf):
        task = (row.get("doc") or {}).get("task_name")
        return task.strip() if isinstance(task, str) and task.strip() else None
    return None


def open_source(path: Path, mapping: ColumnMapping, benchmark: str | None) -> NativeSource:
    from benchcert.tasks.ingest.adapters.native import sha256_file

    path = Path(path)
    fields = {**DEFAULT_FIELDS, **check_mapped(path, FORMAT, mapping, ("item_id", "subject", "domain"))}
    pf = _parquet(path)
    metric = _check_metric(path, mapping, _metric_names(path, pf))
    if pf.metadata.num_rows == 0:
        raise NativeError(f"{path}: the details file holds no rows; nothing to ingest")
    given = getattr(mapping, "model", None)
    model = given or _model_from_path(path)
    if not model:
        raise NativeError(f"{path}: cannot tell the model: the file is not under details/<model>/<date>/ as lighteval "
                          "writes it, and the details do not name the model; pass --model NAME")
    task = _first_task(path, pf)
    named = DETAILS_NAME.match(path.name)
    if task is None and benchmark is None:
        task = named.group("task") if named else None
        if task is None:
            raise NativeError(f"{path}: row 1: doc.task_name is missing and the file name does not name the task; "
                              "pass --benchmark NAME")
    read = {"task": task, "model": model, "metric": metric, "rows": pf.metadata.num_rows}
    notes = [] if given else ["model taken from the details folder"]
    settings = {"metric": metric, "fields": fields, **({"model": model} if given else {})}
    return NativeSource(format=FORMAT, path=path, sha256=sha256_file(path), benchmark=benchmark or task,
                        settings=settings, read=read, records=lambda: _records(path, model, metric, fields, task),
                        describe=_describe, notes=notes)


def _is_results(obj: Any) -> bool:
    return (isinstance(obj, dict) and isinstance(obj.get("config_general"), dict)
            and isinstance(obj.get("results"), dict) and "summary_tasks" in obj)


def _open_results(path: Path, benchmark: str | None) -> NativeSource:
    """A results_<date>.json: the aggregated scores, read as metadata (the details files hold the rows)."""
    from benchcert.tasks.ingest.adapters.native import sha256_file

    obj = load_json(path, "lighteval results file")
    if not _is_results(obj):
        raise NativeError(f"{path}: not a lighteval results file (no config_general, results, summary_tasks)")
    tasks = sorted(t for t in obj["results"] if t != "all")
    return NativeSource(
        format=FORMAT, path=path, sha256=sha256_file(path), benchmark=benchmark or "", settings={},
        read={"kind": "aggregated results (no per-item rows)", "model": obj["config_general"].get("model_name"),
              "tasks": tasks},
        records=lambda: iter(()), metadata_only=True,
        notes=["the per-item rows are in details/<model>/<date>/details_<task>_<date>.parquet (run lighteval with "
               "--save-details)"])


def _describe(row: Any) -> str:
    if not isinstance(row, dict):
        return json.dumps(row, default=str)[:2000]
    doc = row.get("doc") if isinstance(row.get("doc"), dict) else {}
    keep = {"doc": {k: doc.get(k) for k in ("id", "task_name", "specific", "gold_index") if k in doc},
            "metric": row.get("metric")}
    return json.dumps(keep, default=str, ensure_ascii=False)[:2000]


# --- its entry in the adapter registry --------------------------------------------------------

def sniff(probe: registry.Probe) -> str | None:
    """``lighteval`` for a details Parquet file (doc, metric, model_response columns), ``lighteval_results``
    for the results_<date>.json beside the details (metadata: no per-item rows)."""
    if probe.parquet_columns is not None:
        return FORMAT if set(COLUMNS) <= set(probe.parquet_columns) else None
    obj, text = probe.obj, (probe.prefix or "").lstrip()
    if isinstance(obj, dict):
        return "lighteval_results" if _is_results(obj) else None
    if obj is registry.NOT_JSON and text.startswith("{") and registry.has_keys(text, "config_general") and (
            registry.has_keys(text, "lighteval_sha") or registry.has_keys(text, "summary_tasks")):
        return "lighteval_results"
    return None


def open_log(path: Path, mapping: ColumnMapping, benchmark: str | None, kind: str | None) -> NativeSource:
    """A details file, or (``kind`` lighteval_results) a results file read as metadata."""
    if kind == "lighteval_results":
        return _open_results(path, benchmark)
    return open_source(path, mapping, benchmark)


ADAPTER = registry.Adapter(
    name=FORMAT, sniff=sniff, open=open_log, options=("metric",),
    reads="lighteval `--save-details` Parquet (`details/<model>/<date>/details_<task>_<date>.parquet`), with "
          "the `results_<date>.json` beside them")
