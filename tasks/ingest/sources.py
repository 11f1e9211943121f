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
    from benchcert.tasks.ingest.errors import FILE_ERRORS, READ_FAILURES
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
        except (*FILE_ERRORS, *READ_FAILURES):  # not a table, or the file's own report says what is wrong with it
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


def check_labels(files: list[str], mapping, benchmark: str | None, paths: list[str] | None = None) -> None:
    """``--model`` / ``--benchmark`` on input that names several models / benchmarks is refused.

    One name for every row is right for input that names none (or one, renamed); on input
    that already names several (a folder with one sub-folder per model, a table with a model
    column, harness logs of several models) it would store every model's rows under one name.
    Each source's own names are read before anything is stored: a harness log's model as its
    adapter reads it without ``--model`` (header, results file, or the folder of a per-model
    layout), a table's ``model`` / ``benchmark`` column's distinct values.

    Sources that name no model (a table without a model column) carry one by where they lie:
    ``--model`` with a folder in ``paths`` whose walk finds such sources in two or more
    directories (``ROOT/gpt-4o/a.csv``, ``ROOT/claude/b.csv``: the per-model sub-folder layout)
    is refused as well (:func:`_check_layout`). Files named on the command line are the user's
    own statement and are not counted.

    Parameters
    ----------
    files : list of str
        The sources, as :func:`expand_sources` returned them.
    mapping : ColumnMapping or NativeMapping
        The mapping; its ``model`` (``--model``) and columns decide what is checked.
    benchmark : str or None
        ``--benchmark``.
    paths : list of str, optional
        The paths as given on the command line; a directory among them is a walk.

    Raises
    ------
    MappingError
        The sources name two or more models (benchmarks), or a walked folder holds sources naming
        no model in two or more directories; the message names them and where.
    """
    model = getattr(mapping, "model", None)
    take_benchmark = benchmark is not None and "benchmark" not in mapping.columns
    if model is None and not take_benchmark:
        return
    found: dict[str, dict[str, str]] = {"model": {}, "benchmark": {}}
    own: dict[str, set[str] | None] = {}  # each source's own models; None: it names none (a plain table)
    for f in files:
        names, nameless = _own_names(Path(f), mapping, model is not None, take_benchmark)
        own[f] = None if nameless else names["model"]
        for kind in names:
            for name in names[kind]:
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
    if model is not None:
        _check_layout(own, paths or [])


def _check_layout(own: dict[str, set[str] | None], paths: list[str]) -> None:
    """``--model`` on a walked folder whose sources naming no model lie in several directories.

    For each folder argument, the directories (relative to it) of the sources found by its walk
    that name no model are its labels; a directory that also holds sources naming a model
    (a harness log beside a table) counts as those models, and every model the walk's sources
    name is a label too. Two or more labels, with at least one nameless source among them,
    and the folder is refused: one ``--model`` would store every sub-folder's rows as one model.
    """
    from benchcert.tasks.ingest.mapping import MappingError

    given = {Path(p) for p in paths if not Path(p).is_dir()}
    for root in (Path(p) for p in paths if Path(p).is_dir()):
        walked = {Path(f): names for f, names in own.items()
                  if Path(f) not in given and Path(f).is_relative_to(root)}
        named: dict[Path, set[str]] = {}
        for f, names in walked.items():
            if names:
                named.setdefault(f.parent, set()).update(names)
        nameless = sorted({f.parent for f, names in walked.items() if names is None})
        if not nameless:
            continue
        labels = {m for names in named.values() for m in names}
        places = [d for d in nameless if not named.get(d)]
        if len(labels) + len(places) < 2:
            continue
        shown = [f"{str(d.relative_to(root)) if d != root else '.'}/" for d in places[:6]]
        shown += [f"{m!r}" for m in sorted(labels)][: max(0, 6 - len(shown))]
        count = len(places) + len(labels)
        more = f" and {count - len(shown)} more" if count > len(shown) else ""
        models = f" and harness logs naming {len(labels)} model(s)" if labels else ""
        raise MappingError(f"--model names one model for every row, but {root} holds tables without a model column "
                           f"in {len(places)} folder(s){models}: {', '.join(shown)}{more} (a folder per model?); "
                           "nothing is stored. Ingest each sub-folder with its own --model, or name the files "
                           "explicitly to give them all one model")


def _own_names(path: Path, mapping, want_model: bool, want_benchmark: bool) -> tuple[dict[str, set[str]], bool]:
    """The models and benchmarks a source names by itself (empty when it names none or is unreadable),
    and whether it was read and names no model (a table without a model column, a harness log
    without one)."""
    import dataclasses

    from benchcert.tasks.ingest.adapters import detect, generic
    from benchcert.tasks.ingest.errors import FILE_ERRORS, READ_FAILURES

    out: dict[str, set[str]] = {"model": set(), "benchmark": set()}
    try:
        plain = dataclasses.replace(mapping, model=None) if dataclasses.is_dataclass(mapping) else mapping
        source = detect.open_native(path, plain, None)
        if source is not None:
            if want_model and source.read.get("model"):
                out["model"].add(str(source.read["model"]))
            return out, want_model and not source.read.get("model")
        if not path.is_file():
            return out, False
        fmt = generic.detect_format(path, getattr(mapping, "format", None), getattr(mapping, "records", None))
        available = generic.file_columns(path, fmt)
        nameless = want_model and bool(available) and "model" not in available
        wanted = [k for k, want in (("model", want_model), ("benchmark", want_benchmark)) if want and k in available]
        if not wanted:
            return out, nameless
        for batch in generic.read_batches(path, fmt, wanted):
            for k in wanted:
                out[k] |= {str(v).strip() for v in batch.frame[k].unique().to_list() if v is not None and str(v).strip()}
            if all(len(out[k]) > 1 for k in wanted):
                break
        return out, nameless
    except (*FILE_ERRORS, *READ_FAILURES):  # a file that cannot be read is reported by its own ingest
        return out, False


def not_tried(files: list[str]) -> list[dict]:
    """Reports for ``files`` left alone by ``--atomic`` because a file no adapter reads was given:
    the command fails before anything is stored."""
    from benchcert.tasks.ingest.reports import NOT_TRIED

    return [{"path": f, "status": NOT_TRIED, "rows_added": 0,
             "message": f"{f}: not tried: --atomic, and a file no adapter reads was given"} for f in files]
