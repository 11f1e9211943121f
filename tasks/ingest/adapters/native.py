"""What the native log adapters share: options, the row they yield, batching, the option-probability table.

A native adapter (lm_eval, inspect_ai, helm, mmlu_pro_raw, promptfoo, openai_evals, lighteval)
reads a harness log as the harness wrote it and yields :class:`Row` records whose fields are already canonical, or
:class:`~benchcert.tasks.ingest.adapters.generic.Reject` records for structurally bad entries
(missing field, wrong type).  :meth:`NativeSource.batches` turns them into the same
:class:`~benchcert.tasks.ingest.adapters.generic.RawBatch` frames the generic adapter yields, so
validation, staging, conflict checks and the all-or-nothing rule of ``tasks/ingest/service.py``
apply unchanged.  ``LINE`` is the physical line for JSONL files and the 1-based position of
the record in the log otherwise (the n-th sample of an inspect log, the n-th instance of a
HELM run, the n-th entry of a JSON list).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from benchcert.tasks.ingest.adapters import generic
from benchcert.tasks.ingest.adapters.generic import LINE, AdapterError, RawBatch, Reject
from benchcert.tasks.ingest.mapping import ColumnMapping
from benchcert.tasks.schemas import DEFAULT_DOMAIN, DEFAULT_SUBJECT

RAW_LIMIT = 2000
_TEXT_FIELDS = ("model", "item_id", "subject", "domain", "variant")


class NativeError(AdapterError):
    """A native log that cannot be read as given (corrupt, truncated, missing header, unknown scorer)."""


@dataclass(frozen=True)
class NativeMapping(ColumnMapping):
    """A column mapping plus the per-format choice of score.

    ``metric`` picks the lm-evaluation-harness metric (default acc, else exact_match), and the
    score of promptfoo, OpenAI evals and lighteval logs (see their modules),
    ``scorer`` the inspect_ai scorer (default: the only one), ``stat`` the HELM stat as
    ``NAME`` or ``NAME:SPLIT`` (default exact_match on the test split).  Each format reads
    only its own option, so one directory may mix formats.  ``--map score=X`` is the
    fallback for all three.
    """

    metric: str | None = None
    scorer: str | None = None
    stat: str | None = None

    def as_dict(self) -> dict:
        return {**super().as_dict(), "metric": self.metric, "scorer": self.scorer, "stat": self.stat}


def score_choice(mapping: ColumnMapping, option: str) -> str | None:
    """The user's score choice for one format: its own option, else ``--map score=``."""
    own = getattr(mapping, option, None)
    return own if own else mapping.columns.get("score")


def check_mapped(path: Path, fmt: str, mapping: ColumnMapping, allowed: tuple[str, ...]) -> dict[str, str]:
    """The mapped fields this format understands; any other mapped field is an error, not ignored."""
    extra = sorted(set(mapping.columns) - set(allowed) - {"score"})
    if extra:
        can = f"only score, {', '.join(allowed)} can be mapped" if allowed else "only the score can be chosen"
        raise NativeError(f"{path}: --map {', '.join(extra)} does not apply to {fmt} logs ({can}; "
                          "the rest comes from the log itself)")
    return {f: c for f, c in mapping.columns.items() if f in allowed}


@dataclass
class Row:
    """One canonical row read from a native log (benchmark is the source's)."""

    line: int
    model: str
    item_id: str
    score: float | None
    subject: str = DEFAULT_SUBJECT
    domain: str = DEFAULT_DOMAIN
    variant: str = ""
    replicate: int = 0
    option_probs: list[float] | None = None
    label: int | None = None  # index of the correct option, when the log says which (beside option_probs)
    parsed: bool | None = None  # False: the log says the answer could not be read from the output; None: not said
    src: Any = None  # what describe() renders when the row is rejected later


@dataclass
class NativeSource:
    """One native log opened and checked, ready to be read in batches."""

    format: str
    path: Path
    sha256: str
    benchmark: str
    settings: dict                      # choices besides content that decide the rows (part of sources.config)
    read: dict                          # what was read, for the report
    records: Callable[[], Iterator[Row | Reject]]
    describe: Callable[[Any], str] = lambda src: json.dumps(src, default=str)
    metadata_only: bool = False
    notes: list[str] = field(default_factory=list)

    def batches(self, batch_rows: int) -> Iterator[RawBatch]:
        return _batches(self.records(), batch_rows)

    def raw_text(self, lines: set[int]) -> dict[int, str]:
        """The log's own text of the given records (re-read: only needed when some are rejected)."""
        out: dict[int, str] = {}
        for rec in self.records():
            if rec.line in lines:
                text = rec.raw if isinstance(rec, Reject) else self.describe(rec.src)
                out[rec.line] = (text or "")[:RAW_LIMIT]
        return out

    def summary(self) -> str:
        parts = [f"{k} {v}" for k, v in self.read.items() if v not in (None, "", [], {})]
        return f"{self.format}: " + ", ".join(parts) + ("; " + "; ".join(self.notes) if self.notes else "")


def _batches(records: Iterator[Row | Reject], batch_rows: int) -> Iterator[RawBatch]:
    cols: dict[str, list] = {f: [] for f in _TEXT_FIELDS}
    scores: list[float | None] = []
    reps: list[int] = []
    parsed: list[bool | None] = []
    lines: list[int] = []
    prob_lines: list[int] = []
    probs: list[list[float]] = []
    labels: list[int | None] = []
    rejects: list[Reject] = []

    def flush() -> RawBatch:
        data = {f: pl.Series(f, v, dtype=pl.String) for f, v in cols.items()}
        data["score"] = pl.Series("score", scores, dtype=pl.Float64)
        data["replicate"] = pl.Series("replicate", reps, dtype=pl.Int64)
        data["parsed"] = pl.Series("parsed", parsed, dtype=pl.Boolean)
        data[LINE] = pl.Series(LINE, lines, dtype=pl.Int64)
        extras = (pl.DataFrame({LINE: pl.Series(prob_lines, dtype=pl.Int64),
                                "option_probs": pl.Series(probs, dtype=pl.List(pl.Float64)),
                                "label": pl.Series(labels, dtype=pl.Int64)})
                  if prob_lines else None)
        out = RawBatch(frame=pl.DataFrame(data), rejects=list(rejects), extras=extras)
        for v in (*cols.values(), scores, reps, parsed, lines, prob_lines, probs, labels, rejects):
            v.clear()
        return out

    for rec in records:
        if isinstance(rec, Reject):
            rejects.append(rec)
            continue
        for f in _TEXT_FIELDS:
            cols[f].append(getattr(rec, f))
        scores.append(rec.score)
        reps.append(rec.replicate)
        parsed.append(rec.parsed)
        lines.append(rec.line)
        if rec.option_probs is not None:
            prob_lines.append(rec.line)
            probs.append(rec.option_probs)
            labels.append(rec.label)
        if len(lines) >= batch_rows:
            yield flush()
    if lines or rejects:
        yield flush()


# --- helpers the adapters share ----------------------------------------------------------

def sha256_file(path: Path) -> str:
    """The SHA-256 of a file's bytes (with the settings, what tells that a file is stored already)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def sha256_files(root: Path, files: list[Path]) -> str:
    """One digest for several files (a HELM run directory): names relative to root, then contents."""
    h = hashlib.sha256()
    for f in sorted(files, key=lambda p: p.relative_to(root).as_posix()):
        h.update(f.relative_to(root).as_posix().encode("utf-8") + b"\0")
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        h.update(b"\0")
    return h.hexdigest()


def load_json(path: Path, what: str) -> Any:
    """Parse a whole JSON file, turning every failure into an error that names the file."""
    try:
        with open(path, "rb") as fh:
            return generic.loads_json(fh.read())
    except json.JSONDecodeError as exc:
        raise NativeError(f"{path}: {what} is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}); "
                          "the file may be truncated") from None
    except UnicodeDecodeError as exc:
        raise generic.not_utf8(path, exc) from None
    except ValueError as exc:  # a duplicate key, an overlong integer, nesting too deep
        raise NativeError(f"{path}: {what} is not acceptable JSON ({exc})") from None


def to_float(value: Any, *, strings: bool = True) -> tuple[float | None, str | None]:
    """A value as a float, or the reason it is not one (bool counts as 0/1).

    ``strings=False`` for a score: a JSON string, even ``"1"``, is a mistyped field (the rule
    of every JSON reader); log-likelihoods that a harness writes as text pass ``strings=True``.
    """
    if isinstance(value, str) and not strings:
        return None, f"a JSON string ({json.dumps(value[:40])}), not a number: a score in JSON must be a number or true/false"
    if isinstance(value, bool):
        return float(value), None
    if isinstance(value, (int, float)):
        return float(value), None
    if value is None:
        return None, "missing value"
    if isinstance(value, str):
        try:
            return float(value.strip()), None
        except ValueError:
            return None, f"not a number: {value[:80]!r}"
    return None, f"expected a number, got {type(value).__name__} {json.dumps(value, default=str)[:80]}"


def dotted(obj: Any, path: str) -> tuple[bool, Any]:
    """Look up ``a.b.c`` in nested dicts; (found, value)."""
    cur = obj
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return False, None
        cur = cur[part]
    return True, cur


def text_field(obj: Any, key: str, where: str) -> tuple[str | None, str | None]:
    """A subject/domain/item field read from the log: a non-empty scalar rendered as text."""
    found, value = dotted(obj, key)
    if not found or value is None:
        return None, f"{where} field {key!r} is missing"
    if isinstance(value, (dict, list)):
        return None, f"{where} field {key!r} is a {type(value).__name__}, not a single value"
    text = str(value).strip() if not isinstance(value, bool) else str(value).lower()
    if not text:
        return None, f"{where} field {key!r} is empty"
    return text, None


def text_fields(obj: Any, fields: dict[str, str], where: str) -> tuple[dict[str, str], tuple[str, str] | None]:
    """The fields ``{name: key}`` of ``obj``, each read by :func:`text_field`, and None; or, at the
    first that cannot be read, what was read before it and (its key, the reason)."""
    values: dict[str, str] = {}
    for name, key in fields.items():
        v, why = text_field(obj, key, where)
        if why:
            return values, (key, why)
        values[name] = v
    return values, None


def softmax(logits: list[float]) -> list[float]:
    """Probabilities from log-likelihoods (max subtracted first so exp never overflows)."""
    top = max(logits)
    ex = [math.exp(x - top) for x in logits]
    total = sum(ex)
    return [e / total for e in ex]
