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
    """Check a mapping's SQL expressions against the table files before anything is read.

    Raises
    ------
    MappingError
        An expression does not parse, or reads a column a table file lacks (a usage error).
        Plain column names are checked per file by the ingest itself, as before.
    """
    from benchcert.tasks.ingest.adapters import generic
    from benchcert.tasks.ingest.mapping import ColumnMapping, is_identifier

    if all(is_identifier(v) for v in mapping.columns.values()):
        return
    for f in files:
        path = Path(f)
        try:
            fmt = generic.detect_format(path, getattr(mapping, "format", None))
            if fmt not in ("csv", "jsonl", "parquet") or not path.is_file():
                continue
            available = generic.file_columns(path, fmt)
        except (generic.AdapterError, OSError, UnicodeDecodeError):
            continue  # the file's own report says what is wrong with it
        if available:
            odd = ColumnMapping({k: v for k, v in mapping.columns.items() if not is_identifier(v)})
            odd.expressions(available, str(path))


def not_tried(files: list[str]) -> list[dict]:
    """Reports for ``files`` left alone by ``--atomic`` because a file no adapter reads was given:
    the command fails before anything is stored."""
    from benchcert.tasks.ingest.service import NOT_TRIED

    return [{"path": f, "status": NOT_TRIED, "rows_added": 0,
             "message": f"{f}: not tried: --atomic, and a file no adapter reads was given"} for f in files]
