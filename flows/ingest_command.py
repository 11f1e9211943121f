"""One ingest as ``benchcert ingest`` and the Python API's ``Store.ingest`` ask for it: the column
mapping built from the options, the paths expanded and checked, the files ingested in the run mode.

The command line parses its arguments into :class:`IngestOptions` and prints the reports; the
Python API builds the same options from keyword arguments.  Neither repeats these steps.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from benchcert.tasks.store import DEFAULT_LOCK_TIMEOUT


@dataclass(frozen=True)
class IngestOptions:
    """How the files are read (``benchcert ingest``'s options).

    Attributes
    ----------
    map : tuple of str
        ``FIELD=COLUMN`` (or ``FIELD=EXPRESSION``) pairs; they override ``config``'s.
    config : str or None
        A mapping TOML file (``[map]`` table and ``format``).
    format : str or None
        The log format (None: detected from each file's content).
    model, metric, scorer, stat : str or None
        A native log's model name and which of its scores to read.
    records : str or None
        The field of a JSON object that holds the records.
    replace_human_labels : bool
        A human score contradicting a stored one replaces it (the old value kept in the store's
        ``human_label_changes``) instead of refusing the file.
    """

    map: tuple[str, ...] = ()
    config: str | None = None
    format: str | None = None
    model: str | None = None
    metric: str | None = None
    scorer: str | None = None
    stat: str | None = None
    records: str | None = None
    replace_human_labels: bool = False


def build_mapping(options: IngestOptions):
    """The column mapping of ``options``; :class:`~benchcert.tasks.ingest.mapping.MappingError` (or the
    limits' ``LimitSettingError``) when the options or a limit variable make none."""
    from benchcert.tasks.ingest.adapters.limits import check_settings
    from benchcert.tasks.ingest.adapters import registry
    from benchcert.tasks.ingest.adapters.native import NativeMapping
    from benchcert.tasks.ingest.mapping import MappingError, parse_mapping

    native_format = options.format if options.format in registry.native_names() else None
    check_settings()  # a limit variable set to no usable value: before any file is read
    mapping = parse_mapping(list(options.map), options.config, None if native_format else options.format)
    if options.model is not None:
        if not options.model.strip():
            raise MappingError("--model must not be empty")
        if "model" in mapping.columns:
            raise MappingError("give --model NAME or --map model=..., not both")
    if native_format or options.metric or options.scorer or options.stat or options.model:
        mapping = NativeMapping(columns=mapping.columns, format=native_format or mapping.format,
                                model=options.model, metric=options.metric, scorer=options.scorer, stat=options.stat)
    if options.records is not None:
        if native_format or mapping.format not in (None, "json"):
            raise MappingError("--records applies to JSON files of records (--format json), "
                               f"not to --format {options.format}")
        mapping = dataclasses.replace(mapping, records=options.records)
    if options.replace_human_labels:
        mapping = dataclasses.replace(mapping, replace_human_labels=True)
    return mapping


def ingest_paths(paths: list[str], db: str, benchmark: str | None, mapping, *, mode: str,
                 allow_rejects: bool = False, lock_timeout: float = DEFAULT_LOCK_TIMEOUT, atomic: bool = False,
                 progress=None) -> list[dict]:
    """Expand ``paths`` (files, folders, globs), check the mapping against them, and ingest them in
    ``mode`` (flows/runs.py); one report dict per file, those no adapter reads included.

    Raises
    ------
    MappingError
        The mapping does not fit the files (checked before anything is read or stored).
    """
    from benchcert.flows.runs import run_ingest
    from benchcert.tasks.ingest.sources import check_expressions, check_labels, expand_sources, not_tried

    files, unknown = expand_sources(paths)
    check_expressions(files, mapping)
    check_labels(files, mapping, benchmark, paths)
    reports = []
    if atomic and unknown:  # a file no adapter reads fails the command before anything is stored
        reports, files = not_tried(files), []
    if files:
        reports = [r.as_dict() for r in run_ingest(mode, files, db, benchmark, mapping, allow_rejects, lock_timeout,
                                                   progress=progress, atomic=atomic)]
    return reports + unknown
