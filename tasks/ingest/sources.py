"""What an ingest reads: paths expanded into sources, and a mapping checked against them first.

Used by ``benchcert ingest`` (flows/cli/ingest.py) and the nightly flow's inbox (flows/nightly.py):
one rule for which files of a directory are sources and which are reported as unreadable.
"""

from __future__ import annotations

from pathlib import Path


def expand_sources(paths: list[str]) -> tuple[list[str], list[dict]]:
    """Sources to ingest, and a report for every file found in a directory that no adapter reads.

    Parameters
    ----------
    paths : list of str
        Files and directories as given; a file is a source as it is.

    Returns
    -------
    files : list of str
        The sources: the files given, and those found under each directory (walked recursively,
        each file's format detected from its content (harness logs) or name (CSV/JSONL/Parquet));
        a HELM run directory inside it is one source.
    unknown : list of dict
        One report per file under a directory that no adapter reads (nothing is skipped silently).
    """
    from benchcert.tasks.ingest.adapters.detect import walk

    files, unknown = [], []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            found, skipped = walk(path)
            files += found
            unknown += skipped
        else:
            files.append(p)
    return files, unknown


def check_expressions(files: list[str], mapping) -> None:
    """Check every mapped column and SQL expression against the table files before anything is read.

    Raises
    ------
    MappingError
        A mapped column the file lacks, an expression that does not parse or reads a column the
        file lacks (a usage error, exit 2): every wrong mapping of every table file in one
        message, whether plain or inside an expression.
    """
    from benchcert.tasks.ingest.adapters import detect, generic
    from benchcert.tasks.ingest.mapping import FORMATS as GENERIC
    from benchcert.tasks.ingest.mapping import ColumnMapping, MappingError

    problems: list[str] = []
    for f in files:
        path = Path(f)
        try:
            if not path.is_file() or (getattr(mapping, "format", None) not in GENERIC and detect.sniff(path)):
                continue  # a harness log: its adapter checks what --map may name
            fmt = generic.detect_format(path, getattr(mapping, "format", None), getattr(mapping, "records", None))
            available = generic.file_columns(path, fmt)
        except Exception:  # noqa: BLE001 - not a table, or the file's own report says what is wrong with it
            continue
        if not available:
            continue
        for field, value in mapping.columns.items():
            try:
                ColumnMapping({field: value}).expressions(available, str(path))
            except MappingError as exc:
                problems.append(str(exc))
    if problems:
        head = f"{len(problems)} wrong mappings: " if len(problems) > 1 else ""
        raise MappingError(head + "; ".join(problems))


def check_labels(files: list[str], mapping, benchmark: str | None) -> None:
    """``--model`` / ``--benchmark`` on input that names several models / benchmarks is refused.

    One name for every row is right for input that names none (or one, renamed); on input
    that already names several (a folder with one sub-folder per model, a table with a model
    column, harness logs of several models) it would store every model's rows under one name.
    Each source's own names are read before anything is stored: a harness log's model as its
    adapter reads it without ``--model`` (header, results file, or the folder of a per-model
    layout), a table's ``model`` / ``benchmark`` column's distinct values.

    Raises
    ------
    MappingError
        The sources name two or more models (benchmarks); the message names them and where.
    """
    model = getattr(mapping, "model", None)
    take_benchmark = benchmark is not None and "benchmark" not in mapping.columns
    if model is None and not take_benchmark:
        return
    found: dict[str, dict[str, str]] = {"model": {}, "benchmark": {}}
    for f in files:
        for kind, names in _own_names(Path(f), mapping, model is not None, take_benchmark).items():
            for name in names:
                found[kind].setdefault(name, f)
    from benchcert.tasks.ingest.mapping import MappingError

    for kind, flag in (("model", "--model"), ("benchmark", "--benchmark")):
        names = found[kind]
        if len(names) > 1 and (model if kind == "model" else take_benchmark):
            shown = ", ".join(f"{n!r} ({where})" for n, where in list(names.items())[:6])
            more = f" and {len(names) - 6} more" if len(names) > 6 else ""
            raise MappingError(f"{flag} names one {kind} for every row, but the input names {len(names)} {kind}s: "
                               f"{shown}{more}; nothing is stored. Ingest each {kind}'s files separately, or "
                               f"without {flag}")


def _own_names(path: Path, mapping, want_model: bool, want_benchmark: bool) -> dict[str, set[str]]:
    """The models and benchmarks a source names by itself (empty when it names none or is unreadable)."""
    import dataclasses

    from benchcert.tasks.ingest.adapters import detect, generic

    out: dict[str, set[str]] = {"model": set(), "benchmark": set()}
    try:
        plain = dataclasses.replace(mapping, model=None) if dataclasses.is_dataclass(mapping) else mapping
        source = detect.open_native(path, plain, None)
        if source is not None:
            if want_model and source.read.get("model"):
                out["model"].add(str(source.read["model"]))
            return out
        if not path.is_file():
            return out
        fmt = generic.detect_format(path, getattr(mapping, "format", None), getattr(mapping, "records", None))
        available = generic.file_columns(path, fmt)
        wanted = [k for k, want in (("model", want_model), ("benchmark", want_benchmark)) if want and k in available]
        if not wanted:
            return out
        for batch in generic.read_batches(path, fmt, wanted):
            for k in wanted:
                out[k] |= {str(v).strip() for v in batch.frame[k].unique().to_list() if v is not None and str(v).strip()}
            if all(len(out[k]) > 1 for k in wanted):
                break
    except Exception:  # noqa: BLE001 - a file that cannot be read is reported by its own ingest
        pass
    return out


def not_tried(files: list[str]) -> list[dict]:
    """Reports for ``files`` left alone by ``--atomic`` because a file no adapter reads was given:
    the command fails before anything is stored."""
    from benchcert.tasks.ingest.service import NOT_TRIED

    return [{"path": f, "status": NOT_TRIED, "rows_added": 0,
             "message": f"{f}: not tried: --atomic, and a file no adapter reads was given"} for f in files]
