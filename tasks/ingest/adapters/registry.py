"""The ingest formats by name: one registry that detection, ``--format`` and docs/cli.md read.

A table format (CSV, JSONL, JSON records, Parquet) is read by the generic adapter and chosen by
name (:data:`GENERIC_FORMATS`).  A harness log is read by a native adapter: an :class:`Adapter`
with its name (the ``--format`` value and the ``format`` its sources record), ``sniff`` (does a
:class:`Probe` of a path's content look like its logs), ``open`` (the path as a
:class:`~benchcert.tasks.ingest.adapters.native.NativeSource`) and the options it reads.  The
package's own adapters are the modules named in :data:`BUILTIN`, each defining ``ADAPTER``; they
are imported on first detection, so a command that reads a plain table (or only builds its
parser) pays nothing for them.  Another adapter is registered with :func:`register`.

This module imports nothing heavy: the command line's parser reads :func:`format_names`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import Any

#: The table formats of the generic adapter, each with what it reads.
GENERIC_FORMATS = ("csv", "jsonl", "json", "parquet")
_GENERIC_READS = {
    "csv": "a table with a header line (`.csv`, `.csv.gz`)",
    "jsonl": "one JSON object a line (`.jsonl`, `.ndjson`, gzipped or not)",
    "json": "a JSON list of records, or an object with one list-of-records field (`--records FIELD`)",
    "parquet": "a Parquet table (`.parquet`, `.pq`, `.parquet.gz`)",
}
#: The package's native adapters, in the order detection asks them: modules of
#: tasks/ingest/adapters/, each with an ``ADAPTER``.
BUILTIN = ("lm_eval", "inspect_ai", "helm", "mmlu_pro_raw", "promptfoo", "openai_evals", "lighteval")

#: ``Probe.obj`` when the path has no first line that parses as JSON.
NOT_JSON = object()


@dataclass(frozen=True)
class Probe:
    """What detection read of a path, one stage at a time (the fields of the other stages are unset).

    ``directory``: the path is a directory; ``zip_names``: the member names of a zip archive and
    ``zip_json`` the first 64 KiB of its only ``.json`` member (None if it has not exactly one);
    ``obj``: the first line of a text file parsed as JSON (:data:`NOT_JSON` if it is no whole
    JSON value); ``prefix``: the first 64 KiB of a JSON document spread over several lines;
    ``parquet_columns``: the top-level column names of a Parquet file (read from its footer).
    """

    path: Path
    directory: bool = False
    zip_names: tuple[str, ...] | None = None
    zip_json: str | None = None
    obj: Any = NOT_JSON
    prefix: str | None = None
    parquet_columns: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Adapter:
    """A native log format.

    ``sniff(probe)`` returns a kind of log it reads (its name, or a kind of its own such as
    ``lm_eval_results``) or None; ``open(path, mapping, benchmark, kind)`` returns the log's
    ``NativeSource`` (``kind``: what detection found, None or another adapter's when ``--format``
    forces this one).  ``options``: the mapping's options it reads (``metric``, ``scorer``,
    ``stat``); ``reads``: one line for docs/cli.md's table.
    """

    name: str
    reads: str
    sniff: Callable[[Probe], str | None]
    open: Callable[..., Any]
    options: tuple[str, ...] = ()


_extra: dict[str, Adapter] = {}
_loaded: list[Adapter] = []


def register(adapter: Adapter) -> None:
    """Add an adapter after the package's own (detection asks it last); its name must be new."""
    if adapter.name in GENERIC_FORMATS or adapter.name in BUILTIN or adapter.name in _extra:
        raise ValueError(f"an ingest format named {adapter.name!r} exists already")
    _extra[adapter.name] = adapter


def unregister(name: str) -> None:
    """Remove an adapter :func:`register` added."""
    _extra.pop(name, None)


def native_names() -> tuple[str, ...]:
    """The native formats' names: the package's, then the registered ones."""
    return (*BUILTIN, *_extra)


def format_names() -> tuple[str, ...]:
    """Every ``--format`` value: the table formats, then the native ones."""
    return (*GENERIC_FORMATS, *native_names())


def adapters() -> list[Adapter]:
    """Every native adapter in detection order (the package's modules imported on first call)."""
    if not _loaded:
        _loaded.extend(import_module(f"{__package__}.{name}").ADAPTER for name in BUILTIN)
    return [*_loaded, *_extra.values()]


def adapter(name: str) -> Adapter:
    """The native adapter named ``name`` (KeyError if there is none)."""
    return {a.name: a for a in adapters()}[name]


def has_keys(text: str, *keys: str) -> bool:
    """Whether JSON text holds every key of ``keys`` (as ``"key":``), for sniffing a document's prefix."""
    return all(re.search(r'"' + re.escape(k) + r'"\s*:', text) for k in keys)


def format_table() -> str:
    """docs/cli.md's table of the formats (a test checks the page holds it as written here)."""
    lines = ["| `--format` | Reads | Score option |", "| --- | --- | --- |"]
    lines += [f"| `{name}` | {reads} | `--map score=COLUMN` |" for name, reads in _GENERIC_READS.items()]
    for a in adapters():
        options = ", ".join(f"`--{o}`" for o in a.options) or "-"
        lines.append(f"| `{a.name}` | {a.reads} | {options} |")
    return "\n".join(lines)
