"""promptfoo eval output: ``promptfoo eval -o results.json`` (or ``-o results.jsonl``).

``results.json`` is one object ``{evalId, results: {version, timestamp, prompts, results, stats},
config, metadata, ...}``; ``results.results`` holds one *EvaluateResult* per test case x prompt x
provider, and ``results.stats`` promptfoo's own counts (``successes``, ``failures``, ``errors``), with
per provider and prompt the pass counts and the sums of the named scores in
``results.prompts[].metrics``.  ``results.jsonl`` holds the same EvaluateResults, one a line, without
the config or the counts.  An EvaluateResult has ``provider {id, label}``, ``promptIdx``,
``testIdx``, ``testCase {description, vars, ...}``, ``vars``, ``success`` (every assertion passed),
``score`` (the assertions' weighted mean score), ``namedScores`` (each assertion's ``metric`` name
with its score; assertions of one name averaged), ``gradingResult`` and ``error`` /
``failureReason`` (2 = the provider failed).

Mapping to the canonical row, one row per test case x provider (x prompt): ``model`` = the
provider's ``label``, else its ``id`` (two providers of one id are told apart by their labels);
``benchmark`` = ``--benchmark``, else the config's ``description`` (results.json only; a .jsonl
needs ``--benchmark``); ``item_id`` = ``testIdx``, the test case's index in the config (``--map
item_id=vars.NAME`` reads a test variable instead; ``--map subject=`` / ``domain=`` likewise, as
dotted paths into the result); ``variant`` = ``""`` when the output has one prompt (one
``promptId``, the hash of the prompt template), else the prompt's ``label`` (the template unless
the config names it) when at most 64 characters, else ``prompt-`` and the first 12 digits of its
``promptId`` (``promptIdx`` indexes prompt x provider, so it does not tell prompts apart);
``replicate`` = the rank of that (provider, test, prompt) in the output (``--repeat``).
``score`` = ``--metric``: ``pass`` (default: ``success`` as 1/0, what promptfoo counts as passed),
``score`` (the result's score) or the NAME of a named assertion metric (``namedScores[NAME]``).  A result whose provider failed is scored 0 for ``pass`` and ``score``, as
promptfoo counts it not passed; it has no named scores, so under a named metric it is a reject.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchcert.tasks.ingest.adapters import generic, registry
from benchcert.tasks.ingest.adapters.generic import Reject
from benchcert.tasks.ingest.adapters.native import (
    NativeError, NativeSource, Row, check_mapped, load_json, score_choice, text_fields, to_float)
from benchcert.tasks.ingest.mapping import ColumnMapping

FORMAT = "promptfoo"
PASS, SCORE = "pass", "score"
_ERROR = 2  # promptfoo's ResultFailureReason.ERROR: the provider call failed


class _Output:
    """The EvaluateResults of one output file, with what a first pass over them found."""

    def __init__(self, path: Path):
        self.path = path
        self.document: dict | None = None
        self.jsonl = not _starts_with_document(path)
        if not self.jsonl:
            obj = load_json(path, "promptfoo output")
            inner = obj.get("results") if isinstance(obj, dict) else None
            if not isinstance(inner, dict) or not isinstance(inner.get("results"), list):
                raise NativeError(f"{path}: not a promptfoo results.json (expected an object whose 'results' object "
                                  "holds a 'results' list)")
            self.document = obj
        self.prompt_ids: set = set()
        self.named: set[str] = set()
        self.errors = 0
        self.n = 0
        for _, obj, problem in self.results():
            if problem is None and isinstance(obj, dict):
                self.n += 1
                self.prompt_ids.add(obj.get("promptId"))
                if isinstance(obj.get("namedScores"), dict):
                    self.named.update(obj["namedScores"])
                self.errors += _provider_failed(obj)

    def results(self) -> Iterator[tuple[int, Any, str | None]]:
        """(line, EvaluateResult or raw text, problem): lines of a .jsonl, positions in results.json."""
        if self.document is not None:
            for i, obj in enumerate(self.document["results"]["results"], start=1):
                yield i, obj, None
            return
        with generic.open_text(self.path) as fh:
            for number, text in enumerate(fh, start=1):
                if not text.strip():
                    continue
                try:
                    yield number, generic.loads_json_line(text), None
                except ValueError as exc:
                    yield number, text.rstrip("\r\n")[:2000], generic.json_problem(exc)

    def stats(self) -> dict | None:
        """promptfoo's own counts (results.json only)."""
        stats = self.document["results"].get("stats") if self.document is not None else None
        return stats if isinstance(stats, dict) else None


def _starts_with_document(path: Path) -> bool:
    """Whether the file is one JSON document (results.json) rather than one result a line."""
    limit = 1 << 20
    with generic.open_text(path, strict=False) as fh:
        line = fh.readline(limit)
    first = line.strip()
    if first in ("{", "["):
        return True
    if len(line) >= limit and not line.endswith("\n"):
        return '"evalId"' in first[:1000]  # one long line: results.json written without indent starts with evalId
    try:
        obj = json.loads(first)
    except ValueError:
        return False  # a line of results.json would parse; this is JSONL (or broken, said later)
    return isinstance(obj, dict) and "evalId" in obj and isinstance(obj.get("results"), dict)


def _provider_failed(obj: dict) -> bool:
    return obj.get("failureReason") == _ERROR or (bool(obj.get("error")) and obj.get("gradingResult") is None)


def _model(obj: dict) -> tuple[str | None, str | None]:
    provider = obj.get("provider")
    if isinstance(provider, str) and provider.strip():
        return provider.strip(), None
    if not isinstance(provider, dict):
        return None, "missing" if provider is None else f"expected an object, got {type(provider).__name__}"
    for key in ("label", "id"):
        value = provider.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip(), None
    return None, "has neither a label nor an id"


def _score(obj: dict, metric: str) -> tuple[float | None, str, str | None]:
    """The result's score under ``metric``, the field it came from, and why it is unusable."""
    if metric == PASS:
        value = obj.get("success")
        if not isinstance(value, bool):
            return None, "success", "missing" if value is None else f"expected true or false, got {value!r:.40}"
        return float(value), "success", None
    if metric == SCORE:
        if _provider_failed(obj) and obj.get("score") is None:
            return 0.0, "score", None
        score, why = to_float(obj.get("score"), strings=False)
        return score, "score", why
    named = obj.get("namedScores")
    field = f"namedScores.{metric}"
    if not isinstance(named, dict) or metric not in named:
        if _provider_failed(obj):
            return None, field, f"missing (the provider failed: {str(obj.get('error'))[:120]})"
        return None, field, (f"missing: no assertion of this test case has metric {metric!r} (promptfoo averages "
                             "a named score over the results that have it; --allow-rejects keeps those)")
    score, why = to_float(named[metric], strings=False)
    return score, field, why


def _variant(obj: dict) -> str:
    """A prompt's name when the output has several: its label if short, else its hash's start."""
    prompt = obj.get("prompt")
    label = prompt.get("label") if isinstance(prompt, dict) else None
    if isinstance(label, str) and label.strip() and len(label.strip()) <= 64:
        return label.strip()
    return f"prompt-{str(obj.get('promptId'))[:12]}"


def _rows(out: _Output, metric: str, fields: dict[str, str]) -> Iterator[Row | Reject]:
    single_prompt = len(out.prompt_ids) <= 1
    seen: Counter = Counter()
    for line, obj, problem in out.results():
        if problem is not None:
            yield Reject(line, "<row>", problem, obj)
            continue
        raw = _describe(obj)
        if not isinstance(obj, dict):
            yield Reject(line, "<result>", f"expected a JSON object (one EvaluateResult), got {type(obj).__name__}",
                         raw)
            continue
        model, why = _model(obj)
        if why:
            yield Reject(line, "provider", why, raw)
            continue
        test, prompt = obj.get("testIdx"), obj.get("promptIdx")
        bad = next(((k, v) for k, v in (("testIdx", test), ("promptIdx", prompt))
                    if isinstance(v, bool) or not isinstance(v, int) or v < 0), None)
        if bad:
            yield Reject(line, bad[0], "missing" if bad[1] is None else
                         f"expected an index (an integer >= 0), got {json.dumps(bad[1], default=str)[:40]}", raw)
            continue
        values, bad = text_fields(obj, fields, "result")
        if bad:
            yield Reject(line, bad[0], bad[1], raw)
            continue
        score, field, why = _score(obj, metric)
        if why:
            yield Reject(line, field, why, raw)
            continue
        values.setdefault("item_id", str(test))
        variant = "" if single_prompt else _variant(obj)
        key = (model, values["item_id"], variant)
        yield Row(line=line, model=model, score=score, variant=variant, replicate=seen[key], src=obj, **values)
        seen[key] += 1


def _benchmark(path: Path, out: _Output, benchmark: str | None) -> str:
    if benchmark is not None:
        return benchmark
    config = (out.document or {}).get("config")
    description = config.get("description") if isinstance(config, dict) else None
    if isinstance(description, str) and description.strip():
        return description.strip()
    where = "a .jsonl output names no eval" if out.jsonl else "the config has no description"
    raise NativeError(f"{path}: cannot tell the benchmark ({where}); pass --benchmark NAME")


def _metric(path: Path, mapping: ColumnMapping, out: _Output) -> str:
    chosen = score_choice(mapping, "metric") or PASS
    if chosen in (PASS, SCORE) or chosen in out.named:
        return chosen
    names = [PASS, SCORE, *sorted(out.named)]
    raise NativeError(f"{path}: unknown metric {chosen!r}: this output's scores are {names}; choose one with "
                      "--metric NAME")


def open_source(path: Path, mapping: ColumnMapping, benchmark: str | None) -> NativeSource:
    from benchcert.tasks.ingest.adapters.native import sha256_file

    path = Path(path)
    fields = check_mapped(path, FORMAT, mapping, ("item_id", "subject", "domain"))
    out = _Output(path)
    if out.n == 0:
        raise NativeError(f"{path}: no results in this promptfoo output; nothing to ingest")
    bench = _benchmark(path, out, benchmark)
    metric = _metric(path, mapping, out)
    read = {"results": out.n, "score": metric, "prompts": len(out.prompt_ids),
            "container": ".jsonl" if out.jsonl else "results.json"}
    notes = []
    if out.errors:
        notes.append(f"{out.errors} result(s) whose provider failed" +
                     (" (scored 0, as promptfoo counts them not passed)" if metric in (PASS, SCORE) else ""))
    stats = out.stats()
    if stats is not None:
        counts = ", ".join(f"{stats.get(k)} {k}" for k in ("successes", "failures", "errors"))
        notes.append(f"promptfoo's stats: {counts}")
    settings = {"metric": metric, "fields": fields}
    return NativeSource(format=FORMAT, path=path, sha256=sha256_file(path), benchmark=bench, settings=settings,
                        read=read, records=lambda: _rows(out, metric, fields), describe=_describe, notes=notes)


def _describe(obj: Any) -> str:
    if not isinstance(obj, dict):
        return json.dumps(obj, default=str)[:2000]
    keep = {k: obj.get(k) for k in ("provider", "promptIdx", "testIdx", "vars", "success", "score", "namedScores",
                                    "error") if k in obj}
    return json.dumps(keep, default=str, ensure_ascii=False)[:2000]


# --- its entry in the adapter registry --------------------------------------------------------

def _is_result(obj: Any) -> bool:
    return (isinstance(obj, dict) and "provider" in obj and "testIdx" in obj and "promptIdx" in obj
            and ("success" in obj or "gradingResult" in obj))


def sniff(probe: registry.Probe) -> str | None:
    """``promptfoo`` for results.json (evalId, results) or a .jsonl of EvaluateResults."""
    obj, text = probe.obj, (probe.prefix or "").lstrip()
    if isinstance(obj, dict):
        if _is_result(obj):
            return FORMAT
        inner = obj.get("results")
        return FORMAT if "evalId" in obj and isinstance(inner, dict) and "results" in inner else None
    if obj is registry.NOT_JSON and text.startswith("{") and registry.has_keys(text, "evalId", "results") and (
            registry.has_keys(text, "promptIdx") or registry.has_keys(text, "prompts")):
        return FORMAT
    return None


def open_log(path: Path, mapping: ColumnMapping, benchmark: str | None, kind: str | None) -> NativeSource:
    return open_source(path, mapping, benchmark)


ADAPTER = registry.Adapter(
    name=FORMAT, sniff=sniff, open=open_log, options=("metric",),
    reads="promptfoo output (`promptfoo eval -o results.json` or `-o results.jsonl`): one row per test case x provider")
