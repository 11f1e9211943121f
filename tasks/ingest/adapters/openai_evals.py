"""OpenAI evals run logs: the JSONL event log ``oaieval COMPLETION_FN EVAL --record_path LOG`` writes.

The ``evals`` package's ``LocalRecorder`` (evals/record.py) writes, one JSON object a line: first
the run spec ``{"spec": {completion_fns, eval_name, base_eval, split, run_config, created_by,
run_id, created_at}}``; then the events ``{run_id, event_id, sample_id, type, data, created_by,
created_at}``, flushed in batches in the order they were recorded; and, when the run ends,
``{"final_report": {...}, "run_id": ...}`` (written before the last batch of events, so it may sit
anywhere after the spec).  A per-sample score is a ``match`` event (``data.correct``, a boolean;
``evals.metrics.get_accuracy`` averages them into the report's ``accuracy``) or a ``metrics``
event (``data`` a dict of named numbers, e.g. FuzzyMatch's ``accuracy`` and ``f1_score``, which
the report averages with ``np.mean(recorder.get_scores(NAME))``).

Mapping to the canonical row: ``model`` = the spec's ``completion_fns`` joined with ``,``
(``--model`` overrides); ``benchmark`` = ``--benchmark``, else the spec's ``eval_name`` (eval,
split and version, e.g. ``capitals.dev.v0``); ``item_id`` = the event's ``sample_id``
(``<eval>.<split>.<index>``); ``subject``/``domain`` = ``all``; ``variant`` = ``""``.
``score`` = ``--metric``: ``match`` (the default when the log holds match events) reads
``data.correct`` as 1/0; any other NAME reads ``data[NAME]`` of the ``metrics`` events (the
default when there are no match events and the metrics events have one key).  ``replicate`` =
the event's rank among its sample's events of that type: an eval that records several per
sample gets replicates, which benchcert averages per item, whereas the report averages events;
the two agree whenever every sample has as many events (one each, for the basic evals).
Other event types (``sampling``, ``error``, ``extra``, ...) are counted and not read.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchcert.tasks.ingest.adapters import generic, registry
from benchcert.tasks.ingest.adapters.generic import Reject
from benchcert.tasks.ingest.adapters.native import NativeError, NativeSource, Row, check_mapped, score_choice, to_float
from benchcert.tasks.ingest.mapping import ColumnMapping

FORMAT = "openai_evals"
MATCH = "match"
_SPEC_KEYS = ("completion_fns", "eval_name")
_EVENT_KEYS = {"run_id", "event_id", "sample_id", "type", "data"}


def _lines(path: Path) -> Iterator[tuple[int, Any, str | None]]:
    """(line, parsed object or the raw text, problem) for every non-blank line."""
    with generic.open_text(path) as fh:
        for number, text in enumerate(fh, start=1):
            if not text.strip():
                continue
            try:
                yield number, generic.loads_json_line(text), None
            except ValueError as exc:  # syntax, a duplicate key, an overlong integer, nesting too deep
                yield number, text.rstrip("\r\n")[:2000], generic.json_problem(exc)


def _is_spec(obj: Any) -> bool:
    return (isinstance(obj, dict) and isinstance(obj.get("spec"), dict)
            and all(k in obj["spec"] for k in _SPEC_KEYS))


class _Scan:
    """What one pass over the log found: the spec, the event types, the metric names, the final report."""

    def __init__(self, path: Path):
        self.spec: dict | None = None
        self.types: Counter = Counter()
        self.metric_keys: set[str] = set()
        self.final_report: Any = None
        for line, obj, problem in _lines(path):
            if self.spec is None:
                if problem is not None or not _is_spec(obj):
                    raise NativeError(f"{path}: line {line}: expected the run spec ({{\"spec\": {{completion_fns, "
                                      "eval_name, ...}}}}) that oaieval writes first; not an OpenAI evals log")
                self.spec = obj["spec"]
                continue
            if problem is not None or not isinstance(obj, dict):
                continue  # reported as a reject when the rows are read
            if "spec" in obj:
                raise NativeError(f"{path}: line {line}: a second run spec; one log holds one run (oaieval writes "
                                  "each run to its own --record_path)")
            if "final_report" in obj:
                self.final_report = obj["final_report"]
            elif isinstance(obj.get("type"), str):
                self.types[obj["type"]] += 1
                if obj["type"] == "metrics" and isinstance(obj.get("data"), dict):
                    self.metric_keys.update(obj["data"])
        if self.spec is None:
            raise NativeError(f"{path}: empty; an OpenAI evals log starts with its run spec")


def _metric(path: Path, mapping: ColumnMapping, scan: _Scan) -> str:
    chosen = score_choice(mapping, "metric")
    names = ([MATCH] if scan.types[MATCH] else []) + sorted(scan.metric_keys)
    if chosen is None:
        if scan.types[MATCH]:
            return MATCH
        if len(scan.metric_keys) == 1:
            return names[0]
        if not names:
            raise NativeError(f"{path}: no match or metrics events in this log (event types: "
                              f"{dict(scan.types) or 'none'}); benchcert needs per-sample scores")
        raise NativeError(f"{path}: the metrics events hold several scores {names}; choose one with --metric NAME")
    if chosen not in names:
        raise NativeError(f"{path}: unknown metric {chosen!r}: this log's per-sample scores are {names or 'none'}; "
                          "choose one with --metric NAME")
    return chosen


def _score(event: dict, metric: str) -> tuple[float | None, str, str | None]:
    """The event's score, the field it came from, and why it is unusable (None if it is usable)."""
    data = event.get("data")
    if not isinstance(data, dict):
        return None, "data", "missing" if data is None else f"expected an object, got {type(data).__name__}"
    if metric == MATCH:
        value = data.get("correct")
        if not isinstance(value, bool):
            return None, "data.correct", ("missing" if value is None else
                                          f"expected true or false, got {json.dumps(value, default=str)[:40]}")
        return float(value), "data.correct", None
    if metric not in data:
        return None, f"data.{metric}", "missing from this metrics event"
    score, why = to_float(data[metric], strings=False)
    return score, f"data.{metric}", why


def _rows(path: Path, spec: dict, model: str, metric: str) -> Iterator[Row | Reject]:
    kind = MATCH if metric == MATCH else "metrics"
    run_id = spec.get("run_id")
    seen: Counter = Counter()
    for line, obj, problem in _lines(path):
        if problem is not None:
            yield Reject(line, "<row>", problem, obj)
            continue
        if not isinstance(obj, dict):
            yield Reject(line, "<row>", f"expected a JSON object (an event), got {type(obj).__name__}",
                         json.dumps(obj, default=str)[:2000])
            continue
        if "spec" in obj or "final_report" in obj:
            continue
        if not isinstance(obj.get("type"), str):
            yield Reject(line, "type", "missing: an event names its type (match, metrics, sampling, ...)"
                         if obj.get("type") is None else "expected a string", _describe(obj))
            continue
        if obj["type"] != kind:
            continue
        raw = _describe(obj)
        sid = obj.get("sample_id")
        if not isinstance(sid, str) or not sid.strip():
            yield Reject(line, "sample_id", "missing" if sid is None else
                         f"expected a non-empty string, got {json.dumps(sid, default=str)[:40]}", raw)
            continue
        if run_id is not None and obj.get("run_id") != run_id:
            yield Reject(line, "run_id", f"{json.dumps(obj.get('run_id'), default=str)[:40]} is not this log's run "
                         f"{run_id!r}", raw)
            continue
        score, field, why = _score(obj, metric)
        if why:
            yield Reject(line, field, why, raw)
            continue
        sid = sid.strip()
        yield Row(line=line, model=model, item_id=sid, score=score, replicate=seen[sid], src=obj)
        seen[sid] += 1


def open_source(path: Path, mapping: ColumnMapping, benchmark: str | None) -> NativeSource:
    from benchcert.tasks.ingest.adapters.native import sha256_file

    path = Path(path)
    check_mapped(path, FORMAT, mapping, ())
    scan = _Scan(path)
    spec = scan.spec
    fns = spec.get("completion_fns")
    given = getattr(mapping, "model", None)
    if given:
        model = given
    elif isinstance(fns, list) and fns and all(isinstance(f, str) and f.strip() for f in fns):
        model = ",".join(f.strip() for f in fns)
    else:
        raise NativeError(f"{path}: line 1: spec.completion_fns must be a list of names, got "
                          f"{json.dumps(fns, default=str)[:60]}; pass --model NAME")
    eval_name = spec.get("eval_name")
    if benchmark is None and (not isinstance(eval_name, str) or not eval_name.strip()):
        raise NativeError(f"{path}: line 1: spec.eval_name is missing; pass --benchmark NAME")
    metric = _metric(path, mapping, scan)
    kind = MATCH if metric == MATCH else "metrics"
    read = {"eval": eval_name, "model": model, "score": metric if metric == MATCH else f"metrics.{metric}",
            "events": f"{scan.types[kind]} {kind}", "run_id": spec.get("run_id")}
    notes = []
    others = {t: n for t, n in scan.types.items() if t != kind}
    if others:
        notes.append("not read: " + ", ".join(f"{n} {t} event(s)" for t, n in sorted(others.items())))
    if isinstance(scan.final_report, dict):
        shown = {k: v for k, v in scan.final_report.items() if isinstance(v, (int, float))}
        notes.append("the log's final report: " + json.dumps(shown, default=str)[:300])
    else:
        notes.append("no final report (the run did not finish): the events it holds were read")
    settings = {"metric": metric, **({"model": model} if given else {})}
    return NativeSource(format=FORMAT, path=path, sha256=sha256_file(path),
                        benchmark=benchmark or eval_name.strip(), settings=settings, read=read,
                        records=lambda: _rows(path, spec, model, metric), describe=_describe, notes=notes)


def _describe(obj: Any) -> str:
    if not isinstance(obj, dict):
        return json.dumps(obj, default=str)[:2000]
    keep = {k: obj.get(k) for k in ("event_id", "sample_id", "type", "data") if k in obj}
    return json.dumps(keep, default=str, ensure_ascii=False)[:2000]


# --- its entry in the adapter registry --------------------------------------------------------

def sniff(probe: registry.Probe) -> str | None:
    """``openai_evals`` for a JSONL log whose first line is oaieval's run spec, or one of its events
    (a log that lost its first line: the adapter then says the spec is missing)."""
    obj = probe.obj
    return FORMAT if _is_spec(obj) or (isinstance(obj, dict) and _EVENT_KEYS <= obj.keys()) else None


def open_log(path: Path, mapping: ColumnMapping, benchmark: str | None, kind: str | None) -> NativeSource:
    return open_source(path, mapping, benchmark)


ADAPTER = registry.Adapter(
    name=FORMAT, sniff=sniff, open=open_log, options=("metric",),
    reads="OpenAI evals run logs (`oaieval ... --record_path LOG`: the run spec, then `match`/`metrics` events)")
