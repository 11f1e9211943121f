"""Which adapter reads a path, decided from its content (the name is only a fallback).

Detection reads a path in stages and asks every native adapter of the registry
(tasks/ingest/adapters/registry.py), in order, whether the :class:`~.registry.Probe` of that
stage looks like its logs: a directory; a zip archive's member names (and its only JSON
member's first 64 KiB); a Parquet file's column names; the first line of a text file parsed as
JSON; the first 64 KiB of a JSON document spread over several lines.  The first adapter that answers reads the path.  A
JSON object per line that no adapter claims is a generic JSONL table, and anything else goes
to the generic CSV/JSONL/Parquet adapter, which decides by name.  A wrong guess from a prefix
ends in an error naming the file, never in wrong rows: the adapter checks the structure in full.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from benchcert.tasks.ingest.adapters import generic, limits, registry
from benchcert.tasks.ingest.adapters.helm import HELM_FILES, is_helm_run
from benchcert.tasks.ingest.adapters.native import NativeError, NativeSource
from benchcert.tasks.ingest.adapters.registry import GENERIC_FORMATS, NOT_JSON, Probe
from benchcert.tasks.ingest.mapping import ColumnMapping

GENERIC_EXTENSIONS = (".csv", ".jsonl", ".ndjson", ".parquet", ".pq")
_PREFIX_BYTES = 64 << 10
_FIRST_LINE_LIMIT = 1 << 20


def sniff(path: Path) -> str | None:
    """The native kind of a path from its content, or None for the generic adapter.

    Kinds: an adapter's name (``lm_eval``, ``inspect_ai``, ``helm``, ``mmlu_pro_raw``, a
    registered one's) or a kind of its own (``lm_eval_results``, ``helm_part``: a HELM run file
    other than per_instance_stats.json, ``mmlu_pro_summary``), and ``zip_unreadable``.
    """
    return _detect(Path(path))[1]


def _detect(path: Path) -> tuple[registry.Adapter | None, str | None]:
    """The adapter that reads ``path`` and the kind it named, or (None, None) for the generic adapter."""
    if path.is_dir():
        return _ask(Probe(path, directory=True))
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
    except OSError:
        return None, None
    if head[:2] == b"PK":
        return _sniff_zip(path)
    if head == b"PAR1":
        return _sniff_parquet(path)
    return _sniff_text(path)


def _sniff_parquet(path: Path) -> tuple[registry.Adapter | None, str | None]:
    """A Parquet file's column names (read from its footer) asked of the adapters, else the generic reader's."""
    try:
        columns = tuple(pq.ParquetFile(path).schema_arrow.names)
    except (OSError, ValueError, pa.ArrowException):
        return None, None  # an unreadable footer: the generic Parquet reader reports it by name
    return _ask(Probe(path, parquet_columns=columns))


def _ask(probe: Probe) -> tuple[registry.Adapter | None, str | None]:
    """The first adapter that recognises ``probe``, with the kind it named."""
    for adapter in registry.adapters():
        kind = adapter.sniff(probe)
        if kind is not None:
            return adapter, kind
    return None, None


def _sniff_zip(path: Path) -> tuple[registry.Adapter | None, str | None]:
    try:
        with zipfile.ZipFile(path) as z:
            limits.check_archive(z, path)
            names = tuple(z.namelist())
            jsons = [n for n in names if n.lower().endswith(".json")]
            member = None
            if len(jsons) == 1:
                with z.open(jsons[0]) as fh:
                    member = fh.read(_PREFIX_BYTES).decode("utf-8", errors="replace")
            return _ask(Probe(path, zip_names=names, zip_json=member))
    except limits.DecompressionLimitError:
        raise
    except (zipfile.BadZipFile, EOFError, OSError, ValueError):
        return None, "zip_unreadable"


def _sniff_text(path: Path) -> tuple[registry.Adapter | None, str | None]:
    try:
        with generic.open_text(path, strict=False) as fh:
            first = ""
            for _ in range(5):  # tolerate a few blank lines before the first record
                first = fh.readline(_FIRST_LINE_LIMIT)
                if first.strip() or not first:
                    break
            stripped = first.strip()
            if not stripped or stripped[0] not in "{[":
                return None, None
            complete = first.endswith("\n") or len(first) < _FIRST_LINE_LIMIT
            obj = NOT_JSON
            if complete and stripped not in ("{", "["):
                try:
                    obj = json.loads(stripped)
                except json.JSONDecodeError:
                    obj = NOT_JSON
            if obj is not NOT_JSON:
                found = _ask(Probe(path, obj=obj))
                if found[1] is not None or isinstance(obj, dict):
                    return found  # a JSON object per line that no harness wrote: generic JSONL
            prefix = first[:_PREFIX_BYTES] + fh.read(max(0, _PREFIX_BYTES - len(first)))
    except (OSError, EOFError, ValueError):
        # Unreadable, or past a decompression limit: the reader that takes it reports why.
        return None, None
    return _ask(Probe(path, prefix=prefix))


def open_native(path: Path, mapping: ColumnMapping, benchmark: str | None) -> NativeSource | None:
    """Open ``path`` with its native adapter, or return None when the generic adapter should read it."""
    path = Path(path)
    fmt = mapping.format
    if fmt in GENERIC_FORMATS:
        return None
    if fmt is not None and fmt not in registry.native_names():
        raise NativeError(f"{path}: unknown format {fmt!r}; formats are {', '.join(registry.format_names())}")
    found, kind = _detect(path)
    if fmt is None and kind is None:
        return None
    if kind == "zip_unreadable":
        try:
            zipfile.ZipFile(path).close()
            problem = "unreadable member"
        except (zipfile.BadZipFile, EOFError, OSError, ValueError) as exc:
            problem = str(exc)
        raise NativeError(f"{path}: not a readable zip archive ({problem}); the file is truncated or corrupt")
    # --format forces its adapter, whatever detection found (the adapter checks the content).
    return (registry.adapter(fmt) if fmt is not None else found).open(path, mapping, benchmark, kind)


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
                                       "inspect_ai, HELM, MMLU-Pro, promptfoo, OpenAI evals or lighteval log; "
                                       "by name it is not "
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
