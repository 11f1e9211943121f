"""lm-evaluation-harness ``--log_samples`` output.

Two layouts (both written by ``lm_eval --log_samples --output_path OUT``):

* v0.4.3 and later: ``OUT/<model_name_sanitized>/samples_<task>_<date>.jsonl``, one JSON object
  per line with ``doc_id, doc, target, arguments, resps, filtered_resps, filter, metrics,
  doc_hash, prompt_hash, target_hash`` and one key per metric (``acc``, ``acc_norm``,
  ``exact_match``, ...); ``resps``/``filtered_resps`` are stringified (``sanitize_list``), so a
  log-likelihood reads ``["-1.25", "False"]``.  Beside it, ``results_<date>.json`` holds
  ``model_name``, the aggregated scores keyed ``"<metric>,<filter>"``, ``group_subtasks`` and
  ``configs``.
* v0.4.0 - v0.4.2: ``<model_args>_<task>.jsonl`` holding one JSON *list* (indent 2) of the same
  objects without ``filter``/``metrics``; a task with several filters repeats each document
  once per filter, in the order of the task's ``filter_list``.

Mapping to the canonical row:

* ``item_id`` = ``<task>/<doc_id>`` (doc ids restart at 0 in every task), or a ``doc`` field
  named by ``--map item_id=FIELD``;
* ``subject`` = the task, ``domain`` = its parent group when the group itself sits in a larger
  group (mmlu_philosophy -> mmlu_humanities -> mmlu), else ``all``; ``--map subject=FIELD`` /
  ``domain=FIELD`` read a ``doc`` field instead (dotted paths reach nested fields);
* ``benchmark`` = ``--benchmark``, else the top group of the task, else the task;
* ``model`` = ``model_name`` of the results file, else ``pretrained=`` of its ``model_args``,
  else the sample file's folder (``org__name`` -> ``org/name``);
* ``score`` = the chosen metric (``--metric``; default ``acc`` when present, else
  ``exact_match``); ``variant`` = the filter (``""`` for lm-eval's default filter ``none``);
  ``replicate`` = 0 (lm-eval folds ``repeats`` into the metric).

For multiple-choice tasks (every filtered response a ``[loglikelihood, is_greedy]`` pair)
the softmax of the log-likelihoods is kept as the predicted option probabilities.

``parsed`` (whether the answer could be read): false when every filtered response is
``[invalid]``, what lm-eval's extraction filters (``regex``, ``strict-match``,
``flexible-extract``, ...) give a response they match nothing in (scored wrong); true when a
filter other than ``none`` extracted something; null otherwise (no extraction to fail).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchcert.tasks.ingest.adapters import generic
from benchcert.tasks.ingest.adapters.generic import Reject
from benchcert.tasks.ingest.adapters.native import (
    NativeError, NativeSource, Row, check_mapped, load_json, score_choice, softmax, text_fields, to_float)
from benchcert.tasks.ingest.adapters import registry
from benchcert.tasks.ingest.mapping import ColumnMapping

FORMAT = "lm_eval"
_DATE = r"\d{4}-\d{2}-\d{2}T\d{2}[-:]\d{2}[-:]\d{2}(?:\.\d+)?"
SAMPLES_NAME = re.compile(rf"^samples_(?P<task>.+?)(?:_(?P<date>{_DATE}))?\.jsonl(?:\.gz)?$")
RESULTS_NAME = re.compile(rf"^results(?:_(?P<date>{_DATE}))?\.json$")
#: Keys of a logged sample that are not metrics (old logs have no "metrics" list).
_SAMPLE_KEYS = {"doc_id", "doc", "target", "arguments", "resps", "filtered_resps", "filter", "metrics", "doc_hash",
                "prompt_hash", "target_hash", "task_name", "token_counts"}
_TRUE, _FALSE = {"true", "True", True}, {"false", "False", False}


def _is_results(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("results"), dict) and (
        "configs" in obj or "versions" in obj or "group_subtasks" in obj)


def _companions(path: Path, any_name: bool) -> list[tuple[Path, dict]]:
    """Aggregated results files beside a samples file: results*.json, or (old layout, whose
    ``--output_path`` named the file freely) any small JSON file that is an lm-eval results file."""
    out = []
    for f in sorted(path.parent.glob("*.json")):
        if f == path or not f.is_file():
            continue
        if not RESULTS_NAME.match(f.name) and (not any_name or f.stat().st_size > (16 << 20)):
            continue
        try:
            obj = json.loads(f.read_bytes())
        except (ValueError, RecursionError, OSError) as exc:
            if RESULTS_NAME.match(f.name):
                # The run's own results file, damaged: the model and task it names cannot be read,
                # and guessing them (from the folder) would store the rows under a second name
                # once the file is repaired.
                raise NativeError(f"{path}: the results file beside it, {f.name}, cannot be read "
                                  f"({type(exc).__name__}: {str(exc)[:120]}), so the run's model and task are "
                                  "unknown; repair or remove that file; nothing is stored") from None
            continue  # any other JSON file that cannot be read is no companion
        if _is_results(obj):
            out.append((f, obj))
    return out


def _tasks_of(results: dict) -> set[str]:
    return set(results.get("configs") or {}) | set(results.get("results") or {})


def _pick_results(path: Path, task: str | None, date: str | None,
                  old_layout: bool) -> tuple[Path | None, dict | None, str | None]:
    """The results file of this samples file, and the task when the name did not say it."""
    cands = _companions(path, any_name=old_layout or task is None)
    if date:
        for f, obj in cands:
            m = RESULTS_NAME.match(f.name)
            if m and m.group("date") == date:
                return f, obj, task
    if task:
        holding = [(f, obj) for f, obj in cands if task in _tasks_of(obj)]
        if holding:
            return (*holding[-1], task)  # the newest by name (results_<date>.json sorts by date)
        return None, None, task
    # Old layout: <model_args>_<task>.jsonl, the task named in the results file's configs.
    stem = path.name.removesuffix(".gz")
    best: tuple[int, Path, dict, str] | None = None
    for f, obj in cands:
        for t in _tasks_of(obj):
            if stem.endswith(f"_{t}.jsonl") or stem == f"{t}.jsonl":
                if best is None or len(t) > best[0]:
                    best = (len(t), f, obj, t)
    if best is not None:
        return best[1], best[2], best[3]
    if len(cands) == 1 and len(_tasks_of(cands[0][1])) == 1:
        f, obj = cands[0]
        return f, obj, next(iter(_tasks_of(obj)))
    return None, None, None


def _model_from_args(model_args: Any) -> str | None:
    if isinstance(model_args, dict):
        v = model_args.get("pretrained") or model_args.get("model") or model_args.get("path")
        return str(v) if v else None
    if isinstance(model_args, str):
        for part in model_args.split(","):
            k, _, v = part.partition("=")
            if k.strip() in ("pretrained", "model", "path") and v.strip():
                return v.strip()
    return None


def _chain(task: str, results: dict | None) -> list[str]:
    """task, its group, the group's group, ... (from group_subtasks, else the task config's group)."""
    if not results:
        return [task]
    parent: dict[str, str] = {}
    for group, subs in (results.get("group_subtasks") or {}).items():
        for s in subs or []:
            if s != group:
                parent.setdefault(s, group)
    if task not in parent:
        cfg_group = ((results.get("configs") or {}).get(task) or {}).get("group")
        if isinstance(cfg_group, list):
            cfg_group = cfg_group[0] if cfg_group else None
        if isinstance(cfg_group, str) and cfg_group and cfg_group != task:
            parent[task] = cfg_group
    chain = [task]
    while chain[-1] in parent and parent[chain[-1]] not in chain:
        chain.append(parent[chain[-1]])
    return chain


#: What lm-eval's extraction filters put in place of a response they found no answer in.
INVALID = "[invalid]"


def parse_flag(filtered: Any, filt: str) -> bool | None:
    """Whether the filtered response says the answer was extracted: False when every filtered
    response is :data:`INVALID`, True when a filter other than ``none`` gave something else, else None."""
    texts = [r for r in (filtered if isinstance(filtered, list) else [filtered]) if isinstance(r, str)]
    if not texts:
        return None
    if all(t.strip() == INVALID for t in texts):
        return False
    return True if filt != "none" else None


def _loglikelihoods(filtered: Any) -> list[float] | None:
    """Log-likelihoods when every filtered response is an ``[ll, is_greedy]`` pair (multiple choice)."""
    if not isinstance(filtered, list) or len(filtered) < 2:
        return None
    out = []
    for r in filtered:
        if not (isinstance(r, list) and len(r) == 2 and (r[1] in _TRUE or r[1] in _FALSE)):
            return None
        ll, problem = to_float(r[0]) if not isinstance(r[0], bool) else (None, "bool")
        if problem or ll is None or ll != ll or ll > 0:
            return None
        out.append(ll)
    return out


def _gold(obj: dict, n_options: int) -> int | None:
    """Index of the correct option of a multiple-choice sample, when its ``target`` says so unambiguously.

    lm-evaluation-harness logs ``target`` as the gold index (an int, or its digits as text) or as the
    gold continuation's text; anything else (a list of golds, an index out of range) gives None.
    """
    target = obj.get("target")
    if isinstance(target, bool):
        return None
    if isinstance(target, int):
        return target if 0 <= target < n_options else None
    if isinstance(target, str):
        text = target.strip()
        if text.isdigit():
            k = int(text)
            return k if k < n_options else None
        args = obj.get("arguments")
        if isinstance(args, dict):  # v0.4.3+: {"gen_args_0": {"arg_0": context, "arg_1": continuation}, ...}
            args = [[a.get("arg_0"), a.get("arg_1")] if isinstance(a, dict) else None for a in args.values()]
        if isinstance(args, list) and len(args) == n_options:  # older: [[context, continuation], ...]
            conts = [a[1] if isinstance(a, list) and len(a) == 2 else None for a in args]
            hits = [i for i, c in enumerate(conts) if isinstance(c, str) and c.strip() == text]
            if len(hits) == 1:
                return hits[0]
    return None


def _iter_objects(path: Path, old_layout: bool, array: list | None) -> Iterator[tuple[int, Any, str | None]]:
    """(line, object or None, problem) for every record of the samples file."""
    if old_layout:
        for i, obj in enumerate(array or [], start=1):
            yield i, obj, None
        return
    with generic.open_text(path) as fh:
        for number, text in enumerate(fh, start=1):
            if not text.strip():
                continue
            try:
                obj = generic.loads_json_line(text)
            except ValueError as exc:  # syntax, a duplicate key, an overlong integer, nesting too deep
                yield number, text.rstrip("\r\n")[:2000], generic.json_problem(exc)
                continue
            yield number, obj, None


def _first_object(path: Path, old_layout: bool, array: list | None) -> dict | None:
    for _, obj, problem in _iter_objects(path, old_layout, array):
        if problem is None and isinstance(obj, dict):
            return obj
    return None


def _available_metrics(obj: dict) -> list[str]:
    listed = obj.get("metrics")
    if isinstance(listed, list) and all(isinstance(m, str) for m in listed):
        return listed
    return sorted(k for k, v in obj.items() if k not in _SAMPLE_KEYS and isinstance(v, (int, float, bool)))


def _old_layout(path: Path) -> list | None:
    """The samples of the v0.4.0-0.4.2 layout (one JSON list), or None for v0.4.3+ (an object per line)."""
    with generic.open_text(path) as fh:
        head = fh.read(4096).lstrip()
    if not head.startswith("["):
        return None
    array = load_json(path, "lm-evaluation-harness samples file (JSON list, v0.4.0-0.4.2 layout)")
    if not isinstance(array, list):
        raise NativeError(f"{path}: expected a JSON list of samples, got {type(array).__name__}")
    return array


def _open_results(path: Path, benchmark: str | None) -> NativeSource:
    """A results_<date>.json alone: metadata that the samples files beside it read (no rows)."""
    from benchcert.tasks.ingest.adapters.native import sha256_file

    obj = load_json(path, "lm-evaluation-harness results file")
    if not _is_results(obj):
        raise NativeError(f"{path}: not an lm-evaluation-harness results file (no results/configs)")
    tasks = sorted(_tasks_of(obj))
    near = sorted(p.name for p in path.parent.iterdir() if SAMPLES_NAME.match(p.name))
    return NativeSource(
        format=FORMAT, path=path, sha256=sha256_file(path), benchmark=benchmark or "", settings={},
        read={"kind": "aggregated results (no per-item rows)", "model": obj.get("model_name"), "tasks": tasks},
        records=lambda: iter(()), metadata_only=True,
        notes=[f"read as metadata by the samples files beside it ({len(near)} found)" if near else
               "no samples_<task>_<date>.jsonl beside it: run lm_eval with --log_samples to get per-item rows"])


def _model_of(path: Path, mapping: ColumnMapping, results: dict | None, *, from_folder: bool,
              notes: list[str]) -> str:
    """--model, else the results file's model, else (a v0.4.3+ samples file alone) its folder's name."""
    model = getattr(mapping, "model", None)  # --model
    if model:
        notes.append("model taken from --model")
    elif results:
        model = results.get("model_name") or _model_from_args((results.get("config") or {}).get("model_args"))
    if not model and from_folder:
        model = path.parent.name.replace("__", "/") if path.parent.name else None
        if model:
            notes.append("model taken from the folder name (no results file beside the samples)")
    if not model:
        raise NativeError(f"{path}: cannot tell the model: keep the run's results_<date>.json (model_name, "
                          "config.model_args) beside the samples file")
    return model


def _metric_of(path: Path, mapping: ColumnMapping, available: list[str]) -> str:
    """--metric (or --map score=), else acc, else exact_match, among the metrics the samples log."""
    metric = score_choice(mapping, "metric")
    if metric is None:
        metric = next((c for c in ("acc", "exact_match") if c in available), None)
        if metric is None:
            raise NativeError(f"{path}: neither acc nor exact_match is logged; choose the metric with --metric NAME "
                              f"(this file has {available})")
    elif metric not in available:
        raise NativeError(f"{path}: unknown metric {metric!r}: this file logs {available}; choose one with --metric")
    return metric


def open_source(path: Path, mapping: ColumnMapping, benchmark: str | None, *,
                results_only: bool = False) -> NativeSource:
    from benchcert.tasks.ingest.adapters.native import sha256_file

    path = Path(path)
    if results_only:
        return _open_results(path, benchmark)
    fields = check_mapped(path, FORMAT, mapping, ("item_id", "subject", "domain"))

    name = path.name
    m = SAMPLES_NAME.match(name)
    task, date = (m.group("task"), m.group("date")) if m else (None, None)
    array = _old_layout(path)
    old_layout = array is not None
    if old_layout and m:  # a v0.4.3+ name on a list: trust the content
        task, date = None, None
    results_path, results, task = _pick_results(path, task, date, old_layout)
    notes: list[str] = []
    if task is None:
        if benchmark is None:
            raise NativeError(
                f"{path}: cannot tell which lm-eval task this samples file holds: name it samples_<task>_<date>.jsonl, "
                "keep the results_<date>.json of the run beside it, or pass --benchmark (used as the task name)")
        task = benchmark
        notes.append(f"task taken from --benchmark ({benchmark!r})")

    model = _model_of(path, mapping, results, from_folder=not old_layout and m is not None, notes=notes)

    chain = _chain(task, results)
    bench = benchmark or chain[-1]
    default_domain = chain[1] if len(chain) >= 3 else "all"

    first = _first_object(path, old_layout, array)
    if first is None:
        raise NativeError(f"{path}: no samples in the file")
    metric = _metric_of(path, mapping, _available_metrics(first))

    filters = []
    if old_layout:
        cfg = ((results or {}).get("configs") or {}).get(task) or {}
        filters = [f.get("name") for f in cfg.get("filter_list") or [] if isinstance(f, dict)]

    def records() -> Iterator[Row | Reject]:
        seen: dict[Any, int] = {}
        for line, obj, problem in _iter_objects(path, old_layout, array):
            if problem is not None:
                yield Reject(line, "<row>", problem, obj[:2000])
                continue
            if not isinstance(obj, dict):
                yield Reject(line, "<row>", f"expected a JSON object (one logged sample), got {type(obj).__name__}",
                             json.dumps(obj, default=str)[:500])
                continue
            doc_id = obj.get("doc_id")
            if doc_id is None or isinstance(doc_id, (bool, dict, list)):
                raw = _describe(obj)
                yield Reject(line, "doc_id", "missing" if doc_id is None else
                             f"expected an integer or string, got {type(doc_id).__name__}", raw)
                continue
            if old_layout:
                k = seen.get(doc_id, 0)
                seen[doc_id] = k + 1
                filt = filters[k] if k < len(filters) and filters[k] else ("none" if k == 0 else f"filter{k}")
            else:
                filt = obj.get("filter", "none")
                if not isinstance(filt, str):
                    yield Reject(line, "filter", f"expected a string, got {type(filt).__name__}", _describe(obj))
                    continue
            if metric not in obj:
                yield Reject(line, metric, f"metric {metric!r} missing from this sample", _describe(obj))
                continue
            score, why = to_float(obj[metric], strings=False)  # a metric in JSON is a number
            if why:
                yield Reject(line, metric, why, _describe(obj))
                continue
            doc = obj.get("doc")
            read, bad = text_fields(doc, fields, "doc")
            if bad:
                yield Reject(line, f"doc.{bad[0]}", bad[1], _describe(obj))
                continue
            values = {"item_id": f"{task}/{doc_id}", "subject": task, "domain": default_domain, **read}
            lls = _loglikelihoods(obj.get("filtered_resps"))
            yield Row(line=line, model=model, score=score, variant="" if filt == "none" else filt,
                      option_probs=softmax(lls) if lls else None, label=_gold(obj, len(lls)) if lls else None,
                      parsed=None if lls else parse_flag(obj.get("filtered_resps"), filt), src=obj, **values)

    settings = {"metric": metric, "task": task, "model": model, "fields": fields,
                "results_sha256": sha256_file(results_path) if results_path else None}
    read = {"task": task, "model": model, "metric": metric,
            "results file": results_path.name if results_path else None,
            "layout": "JSON list (v0.4.0-0.4.2)" if old_layout else "JSONL (v0.4.3+)"}
    return NativeSource(format=FORMAT, path=path, sha256=sha256_file(path), benchmark=bench, settings=settings,
                        read=read, records=records, describe=_describe, notes=notes)


def _describe(obj: Any) -> str:
    if not isinstance(obj, dict):
        return json.dumps(obj, default=str)[:2000]
    keep = {k: v for k, v in obj.items() if k not in ("doc", "arguments", "resps")}
    return json.dumps(keep, default=str, ensure_ascii=False)[:2000]


# --- its entry in the adapter registry --------------------------------------------------------

def sniff(probe: registry.Probe) -> str | None:
    """``lm_eval`` for samples (one object per line, or the v0.4.0-0.4.2 JSON list), ``lm_eval_results``
    for the aggregated results_<date>.json (metadata: no per-item rows)."""
    obj, text = probe.obj, (probe.prefix or "").lstrip()
    if isinstance(obj, dict):
        if "doc_id" in obj and any(k in obj for k in ("resps", "filtered_resps", "metrics")):
            return "lm_eval"
        # config_general: lighteval's results file, which also has results and versions
        if isinstance(obj.get("results"), dict) and "config_general" not in obj and any(
                k in obj for k in ("configs", "versions", "group_subtasks", "n-shot", "lm_eval_version")):
            return "lm_eval_results"
    elif isinstance(obj, list) and obj and isinstance(obj[0], dict):
        if "doc_id" in obj[0] and ("resps" in obj[0] or "filtered_resps" in obj[0]):
            return "lm_eval"
    elif text.startswith("{"):
        if registry.has_keys(text, "results") and not registry.has_keys(text, "config_general") and any(
                registry.has_keys(text, k) for k in ("configs", "versions", "group_subtasks", "n-shot")):
            return "lm_eval_results"
    elif text.startswith("["):
        if registry.has_keys(text, "doc_id") and (registry.has_keys(text, "resps")
                                                  or registry.has_keys(text, "filtered_resps")):
            return "lm_eval"
    return None


def open_log(path: Path, mapping: ColumnMapping, benchmark: str | None, kind: str | None) -> NativeSource:
    """A samples file, or (``kind`` lm_eval_results) a results file read as metadata."""
    return open_source(path, mapping, benchmark, results_only=kind == "lm_eval_results")


ADAPTER = registry.Adapter(
    name=FORMAT, sniff=sniff, open=open_log, options=("metric",),
    reads="lm-evaluation-harness `--log_samples` (`samples_<task>_<date>.jsonl`, or the v0.4.0-0.4.2 JSON "
          "list), with the `results_<date>.json` beside it")
