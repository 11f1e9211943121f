"""MMLU-Pro raw model outputs (TIGER-AI-Lab/MMLU-Pro ``eval_results/model_outputs_<model>_<n>shots.zip``).

The archive holds one JSON file, a list of objects with ``question_id, question, options,
answer, answer_index, cot_content, category, src, pred`` and the model's text
(``generated_text`` for local models, ``model_outputs`` for API models).  The plain JSON file is
read as well, and so is the repository's early-release layout ``<model>/<subject>_result.json``
(the same list for one subject; the folder names the model, 5 shots) with its
``<subject>_summary.json`` beside it (counts only: read as metadata, like lm-eval's results file).
``--model`` names the model whatever the file is called.

Mapping to the canonical row: ``benchmark`` = ``--benchmark``, else ``mmlu_pro``; ``model`` from
the name ``model_outputs_<model>_<n>shots`` (the JSON member's name first, so a renamed archive
still reads); ``item_id`` = ``question_id``; ``subject`` = ``src``; ``domain`` = ``category``
(``--map`` may name other fields); ``score`` = 1 when ``pred == answer`` else 0, and
``pred: null`` (answer extraction failed) scores 0 and is stored with ``parsed`` false (true for
every other entry), so the audit shows how many answers failed to parse.  That is the strict accuracy: the official
``compute_accuracy.py`` instead draws a random letter for a null ``pred`` (seed 12345), so its
number is slightly higher for models with many nulls.  ``variant`` = ``""`` for the standard
5-shot protocol, else ``<n>shot``.
"""

from __future__ import annotations

import json
import re
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchcert.tasks.ingest.adapters import generic, limits
from benchcert.tasks.ingest.adapters.generic import Reject
from benchcert.tasks.ingest.adapters.native import NativeError, NativeSource, Row, check_mapped, text_fields
from benchcert.tasks.ingest.adapters import registry
from benchcert.tasks.ingest.mapping import ColumnMapping

FORMAT = "mmlu_pro_raw"
DEFAULT_BENCHMARK = "mmlu_pro"
STANDARD_SHOTS = 5
NAME = re.compile(r"model_outputs_(?P<model>.+?)_(?P<shots>\d+)shots?(?:\.json|\.zip)?$")
#: The early-release layout of the MMLU-Pro repository: <model>/<subject>_result.json (+ _summary.json).
RESULT = re.compile(r"(?P<subject>.+)_result\.json")
DEFAULT_FIELDS = {"item_id": "question_id", "subject": "src", "domain": "category"}


def _load(path: Path) -> tuple[list, str | None]:
    """The list of outputs and the JSON member's name (None for a plain JSON file)."""
    with open(path, "rb") as fh:
        is_zip = fh.read(2) == b"PK"
    member = None
    try:
        if is_zip:
            with zipfile.ZipFile(path) as z:
                limits.check_archive(z, path)
                members = [n for n in z.namelist() if n.lower().endswith(".json")]
                if len(members) != 1:
                    raise NativeError(f"{path}: expected one JSON file in the archive, found {members}")
                member = members[0]
                data = limits.read_member(z, member, path)
        else:
            data = path.read_bytes()
    except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
        raise NativeError(f"{path}: not a readable zip archive ({exc}); the file is truncated or corrupt") from None
    try:
        obj = generic.loads_json(data)
    except ValueError as exc:  # syntax, not UTF-8, a duplicate key, too deep
        where = f"member {member}" if member else "file"
        raise NativeError(f"{path}: {where} is not valid JSON ({exc}); it may be truncated") from None
    if not isinstance(obj, list):
        raise NativeError(f"{path}: expected a JSON list of model outputs, got {type(obj).__name__}")
    return obj, member


def open_source(path: Path, mapping: ColumnMapping, benchmark: str | None) -> NativeSource:
    from benchcert.tasks.ingest.adapters.native import sha256_file

    path = Path(path)
    fields = {**DEFAULT_FIELDS, **check_mapped(path, FORMAT, mapping, ("item_id", "subject", "domain"))}
    if "score" in mapping.columns:
        raise NativeError(f"{path}: --map score does not apply to MMLU-Pro outputs: the score is pred == answer")
    outputs, member = _load(path)
    m = None
    for name in (Path(member).stem if member else None, path.name):
        m = NAME.search(name) if name else None
        if m:
            break
    notes = []
    given = getattr(mapping, "model", None)  # --model
    layout = RESULT.fullmatch(path.name) if m is None else None
    if m is not None:
        model, shots = m.group("model"), int(m.group("shots"))
    elif given or (layout and path.parent.name):
        # The early-release layout <model>/<subject>_result.json: the folder names the model.
        model, shots = given or path.parent.name, STANDARD_SHOTS
        notes.append("model taken from --model" if given else "model taken from the folder name")
    else:
        raise NativeError(f"{path}: cannot tell the model: neither the archive's JSON member nor the file is named "
                          "model_outputs_<model>_<n>shots, and it is not a <model>/<subject>_result.json; "
                          "pass --model NAME")
    if given:
        model = given
    variant = "" if shots == STANDARD_SHOTS else f"{shots}shot"

    def records() -> Iterator[Row | Reject]:
        for line, obj in enumerate(outputs, start=1):
            if not isinstance(obj, dict):
                yield Reject(line, "<entry>", f"expected an object with question_id, answer and pred, "
                             f"got {type(obj).__name__} {json.dumps(obj, default=str)[:60]}", _describe(obj))
                continue
            values, bad = text_fields(obj, fields, "entry")
            if bad:
                yield Reject(line, bad[0], bad[1], _describe(obj))
                continue
            answer, pred = obj.get("answer"), obj.get("pred", ...)
            if not isinstance(answer, str) or not answer.strip():
                yield Reject(line, "answer", "missing" if answer is None else
                             f"expected an option letter, got {json.dumps(answer)[:40]}", _describe(obj))
                continue
            if pred is ...:
                yield Reject(line, "pred", "missing (null means extraction failed; the key must be there)",
                             _describe(obj))
                continue
            if pred is not None and not isinstance(pred, str):
                yield Reject(line, "pred", f"expected an option letter or null, got {json.dumps(pred)[:40]}",
                             _describe(obj))
                continue
            score = 1.0 if pred is not None and pred.strip() == answer.strip() else 0.0
            yield Row(line=line, model=model, score=score, variant=variant, parsed=pred is not None, src=obj,
                      **values)

    n_null = sum(1 for o in outputs if isinstance(o, dict) and o.get("pred", ...) is None)
    read = {"model": model, "shots": shots, "entries": len(outputs), "pred null (scored 0)": n_null,
            "member": member}
    return NativeSource(format=FORMAT, path=path, sha256=sha256_file(path), benchmark=benchmark or DEFAULT_BENCHMARK,
                        settings={"fields": fields, "model": model, "variant": variant}, read=read,
                        records=records, describe=_describe, notes=notes)


def is_summary(obj) -> bool:
    """An MMLU-Pro ``<subject>_summary.json``: {category: {corr, wrong[, acc]}, ..., total: {...}}."""
    return (isinstance(obj, dict) and isinstance(obj.get("total"), dict) and bool(obj)
            and all(isinstance(v, dict) and "corr" in v and "wrong" in v for v in obj.values()))


def open_summary(path: Path, mapping: ColumnMapping, benchmark: str | None) -> NativeSource:
    """A ``<subject>_summary.json`` beside its result file: counts only, no per-item rows (metadata)."""
    from benchcert.tasks.ingest.adapters.native import load_json
    from benchcert.tasks.ingest.adapters.native import sha256_file

    path = Path(path)
    obj = load_json(path, "MMLU-Pro summary")
    if not is_summary(obj):
        raise NativeError(f"{path}: expected an MMLU-Pro summary ({{category: {{corr, wrong}}, total: ...}})")
    total = obj["total"]
    read = {"kind": "MMLU-Pro summary (no per-item rows; the items are in the _result.json beside it)",
            "model": getattr(mapping, "model", None) or path.parent.name,
            "total": f"{total.get('corr')} correct, {total.get('wrong')} wrong"}
    return NativeSource(format=FORMAT, path=path, sha256=sha256_file(path), benchmark=benchmark or DEFAULT_BENCHMARK,
                        settings={}, read=read, records=lambda: iter(()), metadata_only=True)


def _describe(obj: Any) -> str:
    if not isinstance(obj, dict):
        return json.dumps(obj, default=str)[:2000]
    keep = {k: obj.get(k) for k in ("question_id", "category", "src", "answer", "pred") if k in obj}
    return json.dumps(keep, default=str, ensure_ascii=False)


# --- its entry in the adapter registry --------------------------------------------------------

def _is_outputs_prefix(text: str) -> bool:
    text = text.lstrip()
    return text.startswith("[") and registry.has_keys(text, "question_id", "pred", "answer")


def sniff(probe: registry.Probe) -> str | None:
    """``mmlu_pro_raw`` for model outputs (a zip's one JSON list, or the early layout's
    <subject>_result.json), ``mmlu_pro_summary`` for the <subject>_summary.json beside them."""
    if probe.zip_names is not None:
        return FORMAT if probe.zip_json is not None and _is_outputs_prefix(probe.zip_json) else None
    obj, text = probe.obj, (probe.prefix or "").lstrip()
    if isinstance(obj, dict):
        return "mmlu_pro_summary" if is_summary(obj) else None
    if isinstance(obj, list) and obj and isinstance(obj[0], dict):
        first = obj[0]
        return FORMAT if "question_id" in first and "pred" in first and "answer" in first else None
    if obj is not registry.NOT_JSON:
        return None
    if text.startswith("{"):
        return "mmlu_pro_summary" if registry.has_keys(text, "total", "corr", "wrong") else None
    return FORMAT if _is_outputs_prefix(text) else None


def open_log(path: Path, mapping: ColumnMapping, benchmark: str | None, kind: str | None) -> NativeSource:
    """Model outputs, or (``kind`` mmlu_pro_summary) a summary read as metadata."""
    if kind == "mmlu_pro_summary":
        return open_summary(path, mapping, benchmark)
    return open_source(path, mapping, benchmark)


ADAPTER = registry.Adapter(
    name=FORMAT, sniff=sniff, open=open_log,
    reads="MMLU-Pro `model_outputs_<model>_<n>shots.zip`, or the early `<model>/<subject>_result.json` layout")
