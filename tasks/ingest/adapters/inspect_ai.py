"""inspect_ai evaluation logs, read directly (the inspect_ai package is not needed).

Two containers of the same log (inspect_ai ``EvalLog``, log versions 1-3):

* ``.eval``: a zip archive with ``header.json`` (version, status, eval spec, results, stats),
  ``samples/<id>_epoch_<n>.json`` (one ``EvalSample`` each), ``summaries.json``,
  ``reductions.json`` and ``_journal/``.  A log still being written has no ``header.json``
  yet; ``_journal/start.json`` then gives the eval spec.
* ``.json``: one JSON object with the same header fields and a ``samples`` list.

Mapping to the canonical row: ``model`` = ``eval.model``; ``benchmark`` = ``--benchmark``, else
``eval.task``; ``item_id`` = the sample ``id``; ``replicate`` = ``epoch - 1`` (epochs are
repeated samples of one item; benchcert averages them like inspect's default ``mean``
reducer); ``variant`` = ``""``; ``subject``/``domain`` = the sample metadata fields named by
``--map subject=KEY`` / ``--map domain=KEY`` (dotted paths reach nested metadata), else the
metadata fields ``subject`` / ``domain`` when present, else ``all``.

``score`` = the ``value`` of the chosen scorer (``--scorer``; the only scorer by default),
converted as inspect's ``value_to_float`` does: ``C`` = 1, ``I`` = 0, ``P`` = 0.5, ``N`` = 0,
numbers and booleans as they are, the strings yes/true = 1 and no/false = 0, numeric strings
parsed.  One deliberate departure: a value inspect cannot convert (it logs a warning and uses
0) is rejected here, as is a dict- or list-valued score, because a silent 0 would bias the mean.

``parsed`` (whether the model's answer could be read) is false for a score value ``N`` (inspect's
NOANSWER) and for the ``pattern`` scorer's "Scoring pattern not matched in output" (both scored
0), true for ``C``, ``I`` and ``P``, and not known (null) for a number or a boolean.
"""

from __future__ import annotations

import json
import re
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchcert.tasks.ingest.adapters import generic, inspect_probs, limits
from benchcert.tasks.ingest.adapters.generic import Reject
from benchcert.tasks.ingest.adapters.native import (
    NativeError, NativeSource, Row, check_mapped, load_json, score_choice, text_field)
from benchcert.tasks.ingest.adapters import registry
from benchcert.tasks.ingest.mapping import ColumnMapping

FORMAT = "inspect_ai"
SAMPLE_MEMBER = re.compile(r"^samples/(?P<id>.+)_epoch_(?P<epoch>\d+)\.json$")
#: inspect_ai.scorer's CORRECT, INCORRECT, PARTIAL, NOANSWER.
VALUE_LETTERS = {"C": 1.0, "I": 0.0, "P": 0.5, "N": 0.0}
#: The explanation inspect_ai's ``pattern`` scorer gives when its pattern is not found in the output.
PATTERN_NOT_MATCHED = "Scoring pattern not matched in output"


def parse_flag(entry: dict) -> bool | None:
    """Whether a scorer's entry says the answer was read: False for NOANSWER (``N``) or the pattern
    scorer's no-match, True for another letter, None (not said) for a number or boolean value."""
    value, explanation = entry.get("value"), entry.get("explanation")
    if value == "N" or (isinstance(explanation, str) and explanation.startswith(PATTERN_NOT_MATCHED)):
        return False
    return True if isinstance(value, str) and value in VALUE_LETTERS else None



def value_to_float(value: Any) -> tuple[float | None, str | None]:
    """inspect_ai's ``value_to_float`` (scorer/_metric.py), except that failures are reported, not 0."""
    if isinstance(value, bool):
        return float(value), None
    if isinstance(value, (int, float)):
        return float(value), None
    if isinstance(value, str):
        if value in VALUE_LETTERS:
            return VALUE_LETTERS[value], None
        low = value.strip().lower()
        if low in ("yes", "true"):
            return 1.0, None
        if low in ("no", "false"):
            return 0.0, None
        try:
            return float(low), None
        except ValueError:
            return None, f"score value {value[:60]!r} is not C/I/P/N, yes/no, true/false or a number"
    if value is None:
        return None, "score value is missing (null)"
    return None, (f"score value is a {type(value).__name__} ({json.dumps(value, default=str)[:80]}); "
                  "benchcert needs one number per sample")


def _natural(name: str) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


class _Log:
    """Header and samples of one log, from either container."""

    def __init__(self, path: Path):
        self.path = path
        with open(path, "rb") as fh:
            self.zip = fh.read(2) == b"PK"
        if self.zip:
            try:
                with zipfile.ZipFile(path) as z:
                    limits.check_archive(z, path)
                    names = z.namelist()
                    self.members = sorted({n for n in names if SAMPLE_MEMBER.match(n)}, key=_natural)
                    self._check_repeated(z)
                    if "header.json" in names:
                        self.header = self._member_json(z, "header.json")
                        self.partial = False
                    elif "_journal/start.json" in names:
                        self.header = self._member_json(z, "_journal/start.json")
                        self.partial = True
                    else:
                        raise NativeError(f"{path}: an .eval archive without header.json or _journal/start.json; "
                                          "not an inspect_ai log, or a damaged one")
            except zipfile.BadZipFile as exc:
                raise NativeError(f"{path}: not a readable zip archive ({exc}); "
                                  "the .eval file is truncated or corrupt") from None
            self.samples_json = None
        else:
            obj = load_json(path, "inspect_ai log")
            if not isinstance(obj, dict):
                raise NativeError(f"{path}: not an inspect_ai log (one JSON object with eval, results, samples); "
                                  f"got a JSON {type(obj).__name__}")
            self.header = obj
            self.partial = False
            self.samples_json = obj.get("samples")
            if self.samples_json is not None and not isinstance(self.samples_json, list):
                raise NativeError(f"{path}: 'samples' must be a list, got {type(self.samples_json).__name__}")
            self.members = []
        if not isinstance(self.header, dict) or not isinstance(self.header.get("eval"), dict):
            raise NativeError(f"{path}: no 'eval' object in the log header; not an inspect_ai log")

    def _check_repeated(self, z: zipfile.ZipFile) -> None:
        """An archive naming one sample member twice: the copies must agree, else the log is refused.

        A zip may hold two entries of one name and a reader sees only the last, so a disagreeing
        copy would be dropped silently; identical copies are read once.
        """
        entries: dict[str, list[tuple[int, zipfile.ZipInfo]]] = {}
        for position, info in enumerate(z.infolist(), start=1):
            if SAMPLE_MEMBER.match(info.filename):
                entries.setdefault(info.filename, []).append((position, info))
        for name, copies in entries.items():
            if len(copies) < 2:
                continue
            (first_at, first), *others = copies
            base = self._member_json(z, first)
            for at, info in others:
                if self._member_json(z, info) != base:
                    raise NativeError(f"{self.path}: member {name} appears twice in the archive (entries {first_at} "
                                      f"and {at}) with different contents; the log is ambiguous, nothing is stored")

    def _member_json(self, z: zipfile.ZipFile, name: str | zipfile.ZipInfo) -> Any:
        if isinstance(name, zipfile.ZipInfo):
            entry, name = name, name.filename
        else:
            entry = name
        try:
            data = limits.read_member(z, entry, self.path)
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as exc:
            raise NativeError(f"{self.path}: member {name} cannot be read ({exc}); "
                              "the .eval file is truncated or corrupt") from None
        try:
            return generic.loads_json(data)
        except ValueError as exc:  # syntax, not UTF-8, a duplicate key, too deep
            raise NativeError(f"{self.path}: member {name} is not valid JSON ({exc})") from None

    @property
    def n_samples(self) -> int:
        return len(self.members) if self.zip else len(self.samples_json or [])

    def samples(self) -> Iterator[tuple[int, str, Any]]:
        """(line, where, sample) in a fixed order: members by natural name, or the list's order."""
        if self.zip:
            try:
                with zipfile.ZipFile(self.path) as z:
                    for i, name in enumerate(self.members, start=1):
                        yield i, name, self._member_json(z, name)
            except zipfile.BadZipFile as exc:
                raise NativeError(f"{self.path}: not a readable zip archive ({exc}); "
                                  "the .eval file is truncated or corrupt") from None
        else:
            for i, s in enumerate(self.samples_json or [], start=1):
                yield i, f"samples[{i - 1}]", s

    def scorer_names(self) -> list[str]:
        """Scorers that scored this log: the header's results (then its eval spec), else the samples' keys.

        An empty list means nothing was scored (a log written with scoring deferred).
        """
        names: list[str] = []
        for s in ((self.header.get("results") or {}).get("scores") or []):
            for key in ("name", "scorer"):
                if isinstance(s, dict) and isinstance(s.get(key), str) and s[key] not in names:
                    names.append(s[key])
        if names:
            for s in (self.header["eval"].get("scorers") or []):
                if isinstance(s, dict) and isinstance(s.get("name"), str) and s["name"] not in names:
                    names.append(s["name"])
            return names
        # No results in the header (unscored, or still running): trust what the samples carry.
        for _, _, sample in self.samples():
            if isinstance(sample, dict) and isinstance(sample.get("scores"), dict):
                names += [k for k in sample["scores"] if k not in names]
        return names


def open_source(path: Path, mapping: ColumnMapping, benchmark: str | None) -> NativeSource:
    from benchcert.tasks.ingest.adapters.native import sha256_file

    path = Path(path)
    fields = check_mapped(path, FORMAT, mapping, ("subject", "domain"))
    log = _Log(path)
    spec = log.header["eval"]
    model, task = getattr(mapping, "model", None) or spec.get("model"), spec.get("task")  # --model overrides
    if not isinstance(model, str) or not model:
        raise NativeError(f"{path}: eval.model is missing from the log header")
    if benchmark is None and (not isinstance(task, str) or not task):
        raise NativeError(f"{path}: eval.task is missing from the log header; pass --benchmark NAME")
    if log.n_samples == 0:
        raise NativeError(f"{path}: the log holds no samples (written with log_samples off, or cancelled before any "
                          "sample finished); benchcert needs per-sample scores")
    names = log.scorer_names()
    if not names:
        raise NativeError(f"{path}: no scores in this log (its samples were never scored); score it first "
                          "(inspect score LOG), then ingest the scored log")
    scorer = score_choice(mapping, "scorer")
    if scorer is None:
        if len(names) > 1:
            raise NativeError(f"{path}: the log has several scorers {names}; choose one with --scorer NAME")
        scorer = names[0]
    elif scorer not in names:
        raise NativeError(f"{path}: unknown scorer {scorer!r}: this log's scorers are {names}; "
                          "choose one with --scorer NAME")

    def records() -> Iterator[Row | Reject]:
        for line, where, sample in log.samples():
            def raw(sample=sample, where=where) -> str:
                return f"{where}: {_describe(sample)}"

            if not isinstance(sample, dict):
                yield Reject(line, "<sample>", f"expected a JSON object, got {type(sample).__name__}", raw())
                continue
            sid, epoch = sample.get("id"), sample.get("epoch")
            if sid is None or isinstance(sid, (bool, dict, list)) or (isinstance(sid, str) and not sid.strip()):
                yield Reject(line, "id", "missing sample id" if sid is None else
                             f"sample id must be a string or integer, got {json.dumps(sid)[:40]}", raw())
                continue
            if epoch is None or isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 1:
                yield Reject(line, "epoch", "missing epoch" if epoch is None else
                             f"epoch must be an integer >= 1, got {json.dumps(epoch)[:40]}", raw())
                continue
            scores = sample.get("scores")
            if not isinstance(scores, dict):
                why = "missing (the sample has no scores" + (f"; it failed: {str(sample.get('error'))[:120]}"
                                                             if sample.get("error") else "") + ")"
                yield Reject(line, "scores", why if scores is None else
                             f"expected an object, got {type(scores).__name__}", raw())
                continue
            entry = scores.get(scorer)
            if not isinstance(entry, dict) or "value" not in entry:
                yield Reject(line, f"scores.{scorer}", f"no score from scorer {scorer!r} for this sample"
                             if entry is None else "score entry has no 'value'", raw())
                continue
            score, why = value_to_float(entry["value"])
            if why:
                yield Reject(line, f"scores.{scorer}.value", why, raw())
                continue
            meta = sample.get("metadata") if isinstance(sample.get("metadata"), dict) else {}
            values: dict[str, str] = {}
            bad = None
            for f in ("subject", "domain"):
                key = fields.get(f)
                if key is None:
                    v = meta.get(f)
                    if v is not None and not isinstance(v, (dict, list)) and str(v).strip():
                        values[f] = str(v).strip()
                    continue
                v, why = text_field(meta, key, "metadata")
                if why:
                    bad = (f"metadata.{key}", why)
                    break
                values[f] = v
            if bad:
                yield Reject(line, bad[0], bad[1], raw())
                continue
            probs, label = inspect_probs.option_probs(sample)  # multiple choice with logprobs only
            yield Row(line=line, model=model, item_id=str(sid).strip(), score=score, replicate=epoch - 1,
                      option_probs=probs, label=label, parsed=parse_flag(entry), src=(where, sample), **values)

    status = log.header.get("status")
    notes = []
    if log.partial:
        notes.append("no header.json (log still being written or interrupted): eval spec read from _journal/start.json")
    if status not in (None, "success"):
        notes.append(f"log status {status!r}: the samples it holds were read")
    config = spec.get("config") or {}
    read = {"task": task, "model": model, "scorer": scorer, "samples": log.n_samples,
            "epochs": config.get("epochs") or 1, "container": ".eval zip" if log.zip else ".json"}
    settings = {"scorer": scorer, "fields": fields, **({"model": model} if getattr(mapping, "model", None) else {})}
    return NativeSource(format=FORMAT, path=path, sha256=sha256_file(path), benchmark=benchmark or task,
                        settings=settings, read=read, records=records,
                        describe=lambda src: f"{src[0]}: {_describe(src[1])}", notes=notes)


def _describe(sample: Any) -> str:
    if not isinstance(sample, dict):
        return json.dumps(sample, default=str)[:2000]
    keep = {k: sample.get(k) for k in ("id", "epoch", "scores", "metadata", "error") if k in sample}
    return json.dumps(keep, default=str, ensure_ascii=False)[:2000]


# --- its entry in the adapter registry --------------------------------------------------------

def sniff(probe: registry.Probe) -> str | None:
    """``inspect_ai`` for a ``.eval`` archive (header.json, samples/, _journal/) or a ``.json`` log."""
    if probe.zip_names is not None:
        if any(n == "header.json" or n.startswith(("samples/", "_journal/")) for n in probe.zip_names):
            return FORMAT
        return None
    obj, text = probe.obj, (probe.prefix or "").lstrip()
    if isinstance(obj, dict):
        return FORMAT if isinstance(obj.get("eval"), dict) and ("status" in obj or "version" in obj) else None
    if obj is registry.NOT_JSON and text.startswith("{") and re.search(r'"eval"\s*:\s*\{', text) and (
            registry.has_keys(text, "status") or registry.has_keys(text, "version")):
        return FORMAT
    return None


def open_log(path: Path, mapping: ColumnMapping, benchmark: str | None, kind: str | None) -> NativeSource:
    return open_source(path, mapping, benchmark)


ADAPTER = registry.Adapter(
    name=FORMAT, sniff=sniff, open=open_log, options=("scorer",),
    reads="inspect_ai logs: a `.eval` archive (read directly, no inspect_ai needed) or a `.json` log")
