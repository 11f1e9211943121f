"""Which adapter reads a path, decided from its content (the name is only a fallback).

* a directory holding ``per_instance_stats.json`` and ``run_spec.json`` is a HELM run;
* a zip archive holding ``header.json`` / ``samples/`` / ``_journal/`` is an inspect_ai ``.eval``
  log; one holding a single JSON list of ``{question_id, answer, pred, ...}`` is an MMLU-Pro
  ``model_outputs_<model>_<n>shots.zip``;
* JSON text is classified by its keys: ``doc_id`` + ``resps`` = lm-evaluation-harness samples
  (one object per line since v0.4.3, a JSON list before), ``eval`` + ``status``/``version`` =
  an inspect_ai ``.json`` log, ``results`` + ``configs``/``group_subtasks`` = lm-eval's aggregated
  results (metadata: it has no per-item rows), ``instance_id`` + ``stats`` = HELM
  per_instance_stats.json, ``question_id`` + ``pred`` = MMLU-Pro outputs;
* anything else goes to the generic CSV/JSONL/Parquet adapter, which decides by name.

A single-line JSON document is parsed; a pretty-printed one (first line ``{`` or ``[``) is
classified from the keys in its first 64 KiB, and the adapter then checks the structure in
full, so a wrong guess ends in an error naming the file, never in wrong rows.
"""

from __future__ import annotations

import json
import os
import re
import zipfile
from pathlib import Path

from benchcert.tasks.ingest.adapters import generic, limits
from benchcert.tasks.ingest.adapters.native import NATIVE_FORMATS, NativeError, NativeSource
from benchcert.tasks.ingest.mapping import FORMATS as GENERIC_FORMATS
from benchcert.tasks.ingest.mapping import ColumnMapping

GENERIC_EXTENSIONS = (".csv", ".jsonl", ".ndjson", ".parquet", ".pq")
HELM_FILES = ("per_instance_stats.json", "run_spec.json")
_PREFIX_BYTES = 64 << 10
_FIRST_LINE_LIMIT = 1 << 20
_NOT_JSON = object()


def is_helm_run(path: Path) -> bool:
    return path.is_dir() and all((path / f).is_file() for f in HELM_FILES)


def sniff(path: Path) -> str | None:
    """The native kind of a path from its content, or None for the generic adapter.

    Kinds: ``lm_eval``, ``lm_eval_results``, ``inspect_ai``, ``helm``, ``mmlu_pro_raw``,
    ``helm_part`` (a HELM run file other than per_instance_stats.json) and ``zip_unreadable``.
    """
    path = Path(path)
    if path.is_dir():
        return "helm" if is_helm_run(path) else None
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
    except OSError:
        return None
    if head[:2] == b"PK":
        return _sniff_zip(path)
    if head == b"PAR1":
        return None
    return _sniff_text(path)


def _sniff_zip(path: Path) -> str | None:
    try:
        with zipfile.ZipFile(path) as z:
            limits.check_archive(z, path)
            names = z.namelist()
            if any(n == "header.json" or n.startswith(("samples/", "_journal/")) for n in names):
                return "inspect_ai"
            jsons = [n for n in names if n.lower().endswith(".json")]
            if len(jsons) == 1:
                with z.open(jsons[0]) as fh:
                    prefix = fh.read(_PREFIX_BYTES).decode("utf-8", errors="replace")
                return "mmlu_pro_raw" if _classify_prefix(prefix) == "mmlu_pro_raw" else None
    except limits.DecompressionLimitError:
        raise
    except (zipfile.BadZipFile, EOFError, OSError, ValueError):
        return "zip_unreadable"
    return None


def _sniff_text(path: Path) -> str | None:
    try:
        with generic._open_text(path, strict=False) as fh:
            first = ""
            for _ in range(5):  # tolerate a few blank lines before the first record
                first = fh.readline(_FIRST_LINE_LIMIT)
                if first.strip() or not first:
                    break
            stripped = first.strip()
            if not stripped or stripped[0] not in "{[":
                return None
            complete = first.endswith("\n") or len(first) < _FIRST_LINE_LIMIT
            obj = _NOT_JSON
            if complete and stripped not in ("{", "["):
                try:
                    obj = json.loads(stripped)
                except json.JSONDecodeError:
                    obj = _NOT_JSON
            if obj is not _NOT_JSON:
                kind = _classify(obj)
                if kind is not None or isinstance(obj, dict):
                    return kind  # a JSON object per line that no harness wrote: generic JSONL
            prefix = first[:_PREFIX_BYTES] + fh.read(max(0, _PREFIX_BYTES - len(first)))
    except (OSError, EOFError, ValueError):
        # Unreadable, or past a decompression limit: the reader that takes it reports why.
        return None
    return _classify_prefix(prefix)


def _classify(obj) -> str | None:
    if isinstance(obj, dict):
        if "doc_id" in obj and any(k in obj for k in ("resps", "filtered_resps", "metrics")):
            return "lm_eval"
        if isinstance(obj.get("eval"), dict) and ("status" in obj or "version" in obj):
            return "inspect_ai"
        if isinstance(obj.get("results"), dict) and any(
                k in obj for k in ("configs", "versions", "group_subtasks", "n-shot", "lm_eval_version")):
            return "lm_eval_results"
        if "adapter_spec" in obj and "scenario_spec" in obj:
            return "helm_part"
        from benchcert.tasks.ingest.adapters.mmlu_pro_raw import is_summary

        if is_summary(obj):
            return "mmlu_pro_summary"
        return None
    if isinstance(obj, list) and obj and isinstance(obj[0], dict):
        first = obj[0]
        if "doc_id" in first and ("resps" in first or "filtered_resps" in first):
            return "lm_eval"
        if "instance_id" in first and "stats" in first:
            return "helm"
        if "question_id" in first and "pred" in first and "answer" in first:
            return "mmlu_pro_raw"
        if isinstance(first.get("name"), dict) and "count" in first:
            return "helm_part"
    return None


def _has(text: str, *keys: str) -> bool:
    return all(re.search(r'"' + re.escape(k) + r'"\s*:', text) for k in keys)


def _classify_prefix(text: str) -> str | None:
    body = text.lstrip()
    if body.startswith("{"):
        if re.search(r'"eval"\s*:\s*\{', body) and (_has(body, "status") or _has(body, "version")):
            return "inspect_ai"
        if _has(body, "results") and any(_has(body, k) for k in ("configs", "versions", "group_subtasks", "n-shot")):
            return "lm_eval_results"
        if _has(body, "adapter_spec", "scenario_spec"):
            return "helm_part"
        if _has(body, "total", "corr", "wrong"):
            return "mmlu_pro_summary"
        return None
    if body.startswith("["):
        if _has(body, "doc_id") and (_has(body, "resps") or _has(body, "filtered_resps")):
            return "lm_eval"
        if _has(body, "instance_id", "stats"):
            return "helm"
        if _has(body, "question_id", "pred", "answer"):
            return "mmlu_pro_raw"
        if re.search(r'"name"\s*:\s*\{', body) and _has(body, "count"):
            return "helm_part"
    return None


def open_native(path: Path, mapping: ColumnMapping, benchmark: str | None) -> NativeSource | None:
    """Open ``path`` with its native adapter, or return None when the generic adapter should read it."""
    path = Path(path)
    fmt = mapping.format
    if fmt in GENERIC_FORMATS:
        return None
    if fmt is not None and fmt not in NATIVE_FORMATS:
        raise NativeError(f"{path}: unknown format {fmt!r}; "
                          f"formats are {', '.join((*GENERIC_FORMATS, *NATIVE_FORMATS))}")
    kind = sniff(path)
    if fmt is None and kind is None:
        return None
    if kind == "zip_unreadable":
        try:
            zipfile.ZipFile(path).close()
            problem = "unreadable member"
        except (zipfile.BadZipFile, EOFError, OSError, ValueError) as exc:
            problem = str(exc)
        raise NativeError(f"{path}: not a readable zip archive ({problem}); the file is truncated or corrupt")
    chosen = kind if (fmt == "mmlu_pro_raw" and kind == "mmlu_pro_summary") else (fmt or kind)
    # Imported only for a native log: a plain table does not pay for the harness adapters.
    from benchcert.tasks.ingest.adapters import helm, inspect_ai, lm_eval, mmlu_pro_raw

    if chosen == "helm_part":
        raise NativeError(f"{path}: a file of a HELM run directory without per_instance_stats.json and run_spec.json "
                          "beside it; ingest the run directory (both files are needed)")
    if chosen == "helm":
        return helm.open_source(path.parent if path.is_file() else path, mapping, benchmark)
    if chosen in ("lm_eval", "lm_eval_results"):
        return lm_eval.open_source(path, mapping, benchmark, results_only=(kind == "lm_eval_results"))
    if chosen == "inspect_ai":
        return inspect_ai.open_source(path, mapping, benchmark)
    if chosen == "mmlu_pro_raw":
        return mmlu_pro_raw.open_source(path, mapping, benchmark)
    if chosen == "mmlu_pro_summary":
        return mmlu_pro_raw.open_summary(path, mapping, benchmark)
    raise NativeError(f"{path}: content is not a {fmt} log")


def _unknown(path: Path, why: str) -> dict:
    return {"path": str(path), "status": "error", "message": f"{path}: {why}; not ingested"}


def walk(root: Path) -> tuple[list[str], list[dict]]:
    """Sources under a directory (files, and HELM run directories as one source each), and a
    report for every file that no adapter reads: nothing is skipped silently."""
    root = Path(root)
    if is_helm_run(root):
        return [str(root)], []
    files, unknown = _walk_files(root)
    helm_runs = sorted({f.parent for f in files if f.name == HELM_FILES[0] and is_helm_run(f.parent)})
    sources: list[Path] = list(helm_runs)
    for f in files:
        if any(run == f.parent or run in f.parents for run in helm_runs):
            continue  # read as part of its HELM run
        try:
            kind = sniff(f)
        except limits.DecompressionLimitError:
            sources.append(f)  # ingesting it reports the limit, by name
            continue
        if kind == "helm_part":
            unknown.append(_unknown(f, "a HELM run file, but its directory lacks per_instance_stats.json or "
                                       "run_spec.json, so the run cannot be read"))
        elif kind is not None:
            sources.append(f)
        elif f.name.lower().removesuffix(".gz").endswith(GENERIC_EXTENSIONS + (".json",)):
            sources.append(f)  # a .json no harness wrote: read as JSON records (or refused saying what it is)
        else:
            unknown.append(_unknown(f, "no adapter recognises this file (by content it is no lm-evaluation-harness, "
                                       "inspect_ai, HELM or MMLU-Pro log; by name it is not "
                                       f"{', '.join(GENERIC_EXTENSIONS)}, optionally .gz)"))
    return [str(s) for s in sorted(sources, key=str)], unknown


def link_target(link: Path) -> tuple[Path | None, str | None]:
    """Where a symlink leads, or why it leads nowhere: a link to itself, a loop, a dangling link.

    Never raises for a link (``Path.resolve`` raises ``RuntimeError`` on a loop in some Pythons).
    """
    import errno

    try:
        return link.resolve(strict=True), None
    except RuntimeError:
        looped = True
    except OSError as exc:
        looped = exc.errno == errno.ELOOP
        if not looped and exc.errno not in (errno.ENOENT, errno.ENOTDIR):
            return None, f"a symlink that cannot be followed ({exc.strerror or exc})"
    try:
        points_to = os.readlink(link)
    except OSError:
        points_to = "?"
    if looped:
        if (link.parent / points_to).absolute() == link.absolute():
            return None, "a symlink to itself; not read"
        return None, f"a symlink loop (it points to {points_to}, which leads back to it); not read"
    return None, f"a dangling symlink (its target {points_to} does not exist); not read"


def _walk_files(root: Path) -> tuple[list[Path], list[dict]]:
    """Regular files under ``root`` (hidden names skipped), and a report for every entry that is
    not read: a symlink leading out of ``root`` or nowhere, a FIFO, socket or device.

    Symlinked folders are not descended (a link could loop or lead out of the tree); a
    symlinked file is read only when its target lies inside ``root``.
    """
    base = root.resolve()
    files: list[Path] = []
    unknown: list[dict] = []
    def unreadable(err: OSError) -> None:
        unknown.append(_unknown(Path(err.filename or root), f"an unreadable folder ({err.strerror or err})"))

    for folder, dirs, names in os.walk(root, onerror=unreadable, followlinks=False):
        here = Path(folder)
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for d in list(dirs):
            if (here / d).is_symlink():
                dirs.remove(d)
                unknown.append(_unknown(here / d, "a symlinked folder; not followed (give its target instead)"))
        for name in sorted(names):
            if name.startswith("."):
                continue
            f = here / name
            if f.is_symlink():
                target, problem = link_target(f)
                if problem is not None:
                    unknown.append(_unknown(f, problem))
                    continue
                if target != base and base not in target.parents:
                    unknown.append(_unknown(f, f"a symlink to {target}, outside {root}; not followed"))
                    continue
            if not f.is_file():
                unknown.append(_unknown(f, "not a regular file (a FIFO, socket or device); not read"))
                continue
            files.append(f)
    return sorted(files), unknown
