"""The records a dashboard reads from each run, kept beside the built site so a rebuild reads only new runs.

The cross-run pages (overview, benchmark trends, grid, model and training-run pages) need every run's record
(:class:`~benchcert.tasks.render.run_records.RunRecord`).  Reading them was the largest part of a rebuild after
a nightly (issue #37, 50 benchmarks x 200 runs: parsing 10,000 summary.json files, most of it turning model
entries into records), although a published run never changes.  A built site therefore keeps
``<out>/.benchcert-records.json`` (a dotfile: never served), holding per run (keyed by benchmark and run id):

* the run's source key, exactly as the site manifest keys its folder
  (:func:`~benchcert.tasks.render.site_cache.source_key`: inode, size and mtime of summary.json, manifest.json
  and report.html), so a run rewritten in place or replaced is read again;
* the record as :func:`load_runs <benchcert.tasks.render.run_records.load_runs>` made it, in a compact form
  (a list per run and per model, interval names as indices into one table).

The file names the site format and the code digest (:func:`~benchcert.tasks.render.site_cache.code_digest`,
which covers the reader in tasks/render), and a digest of its body: a file of another version, a corrupt or
truncated one, or one edited by hand is not used, and every summary is read again; an entry that does not
decode is read from its run.  Only runs read without a problem are kept (a skipped run is read, and named,
at every build).  A full build (``--full``) neither reads it nor trusts it, and writes a new one.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import orjson

from benchcert.tasks.atomic_write import write_bytes_atomic
from benchcert.tasks.render.run_records import METRICS, ModelScore, RunRecord
from benchcert.tasks.render.site_cache import SITE_FORMAT, code_digest, source_key

__all__ = ["RECORDS_FILE", "RecordCache"]

#: The records kept beside the site (a dotfile: never served).
RECORDS_FILE = ".benchcert-records.json"

_RUN_FIELDS = ("started_at", "finished_at", "flow_run_id", "alpha", "variant", "n_items", "n_models", "n_subjects",
               "n_domains", "warnings", "verdicts", "changes", "sources", "tables", "item_analysis")
_TUPLES = frozenset(("warnings", "verdicts", "sources", "tables"))


class RecordCache:
    """The site's kept records (read once; empty when there is none to trust) and the ones of this build."""

    def __init__(self, site: Path | None, *, full: bool = False):
        self.digest = code_digest()
        self.old: dict[str, list] = {}
        if site is not None and not full:
            self._read(site / RECORDS_FILE)
        self.new: dict[str, list] = {}
        self.hits = 0

    def _read(self, path: Path) -> None:
        try:
            raw = path.read_bytes()
        except OSError:
            return
        cut = raw.find(b"\n")
        head, body = raw[:max(cut, 0)], memoryview(raw)[cut + 1:]  # the body (tens of MB) not copied
        try:
            header = orjson.loads(head)
            if (cut < 0 or type(header) is not dict or header.get("format") != SITE_FORMAT
                    or header.get("code") != self.digest or header.get("body") != _body_digest(body)):
                return
            runs = orjson.loads(body)
        except ValueError:  # corrupt or foreign: every summary read again
            return
        if type(runs) is dict:
            self.old = runs

    @staticmethod
    def _id(benchmark: str, run_id: str) -> str:
        return f"{benchmark}\0{run_id}"

    def get(self, benchmark: str, run_id: str, run_dir: Path) -> tuple[list, RunRecord | None]:
        """The run's source key and its kept record (None when it must be read: new, changed or undecodable)."""
        key = source_key(run_dir)
        entry = self.old.get(self._id(benchmark, run_id))
        if type(entry) is not list or len(entry) != 2 or entry[0] != key:
            return key, None
        try:
            record = self._decode(benchmark, run_id, run_dir, entry[1])
        except (ValueError, TypeError, KeyError, IndexError):
            return key, None
        self.new[self._id(benchmark, run_id)] = entry
        self.hits += 1
        return key, record

    def put(self, key: list, record: RunRecord) -> None:
        """Keep ``record`` (read from the run whose source key is ``key``) for the next build."""
        self.new[self._id(record.benchmark, record.run_id)] = [key, self._encode(record)]

    def kept(self, record: RunRecord) -> list:
        """The entry kept for ``record`` (read or kept by this build): what another process of a cold build sends
        back (:meth:`take`)."""
        return self.new[self._id(record.benchmark, record.run_id)]

    def take(self, benchmark: str, run_id: str, run_dir: Path, entry: list) -> RunRecord:
        """The record of a run another process of this build read (its :meth:`kept` entry), kept here too."""
        record = self._decode(benchmark, run_id, run_dir, entry[1])
        self.new[self._id(benchmark, run_id)] = entry
        return record

    def order(self, runs: list[RunRecord]) -> None:
        """Keep the records in the order of ``runs`` (the order one process reads them in), so the file is the
        same whichever processes read them."""
        self.new = {k: self.new[k] for k in (self._id(r.benchmark, r.run_id) for r in runs)}

    def source_key(self, record: RunRecord) -> list:
        """The source key ``record`` was read (or kept) under; computed again for a run this cache has not seen."""
        entry = self.new.get(self._id(record.benchmark, record.run_id))
        return entry[0] if entry is not None else source_key(record.run_dir)

    def _decode(self, benchmark: str, run_id: str, run_dir: Path, rec: list) -> RunRecord:
        keys = [(k[0], k[1]) for k in rec[-2]]
        models = []
        for m in rec[-1]:
            name, n_items, coverage, estimates, index, lower, upper, questions, rank, rank_lower, rank_upper, \
                groups = m
            if (type(name) is not str or type(n_items) is not int or type(coverage) is not float
                    or len(estimates) != len(METRICS) or type(questions) is not dict
                    or not len(index) == len(lower) == len(upper)):
                raise ValueError("not a kept model")
            # zip and map, not a loop: this was most of reading the records back
            intervals = dict(zip(map(keys.__getitem__, index), zip(lower, upper)))
            models.append(ModelScore(model=name, n_items=n_items, coverage=coverage,
                                     estimates=dict(zip(METRICS, estimates)), intervals=intervals,
                                     questions=questions, rank=rank, rank_lower=rank_lower, rank_upper=rank_upper,
                                     tied_groups=tuple(groups)))
        if len(rec) != len(_RUN_FIELDS) + 2:
            raise ValueError("not a kept run")
        fields = dict(zip(_RUN_FIELDS, rec))
        for name in _TUPLES:
            fields[name] = tuple(fields[name])
        return RunRecord(benchmark=benchmark, run_id=run_id, run_dir=run_dir, models=tuple(models), **fields)

    @staticmethod
    def _encode(record: RunRecord) -> list:
        """The record as a list: its fields, its interval names (metric, method) and its models, each with its
        intervals as three lists (the names' indices, the lower and the upper bounds).  A run's own table of
        names keeps each entry whole, so a kept entry is written again as it was read and a rebuild's file
        equals a cold build's."""
        names: dict[tuple[str, str], int] = {}
        models = []
        for m in record.models:
            index = [names.setdefault(k, len(names)) for k in m.intervals]
            models.append([m.model, m.n_items, m.coverage, [m.estimates[x] for x in METRICS], index,
                           [lo for lo, _ in m.intervals.values()], [hi for _, hi in m.intervals.values()],
                           m.questions, m.rank, m.rank_lower, m.rank_upper, list(m.tied_groups)])
        return [getattr(record, f) for f in _RUN_FIELDS] + [[list(k) for k in names], models]

    def write(self, site: Path) -> None:
        """Write the records of this build's runs beside the site (in one rename)."""
        try:
            body = orjson.dumps(self.new)
        except TypeError:  # a value orjson cannot write (it read every one of them): keep nothing
            (site / RECORDS_FILE).unlink(missing_ok=True)
            return
        header = orjson.dumps({"format": SITE_FORMAT, "code": self.digest, "body": _body_digest(body)})
        write_bytes_atomic(site / RECORDS_FILE, header, b"\n", body, private=False)


def _body_digest(body: bytes) -> str:
    return hashlib.blake2b(body, digest_size=16).hexdigest()
