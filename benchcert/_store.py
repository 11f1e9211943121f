"""``benchcert.Store``: the Python API over one store, for notebooks and scripts.

Each method calls what the matching command calls (flows/ingest_command.py, flows/runs.py, the
compare service) and returns the services' own typed results; nothing here decides anything.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from benchcert.tasks.errors import UserError
from benchcert.tasks.result_types import TableResult
from benchcert.tasks.store import DEFAULT_LOCK_TIMEOUT


class IngestRefused(UserError):
    """A source was refused (nothing of it was stored); ``.result`` holds every file's report.

    Examples
    --------
    >>> import benchcert as bc
    >>> frame = bc.example_frame().with_columns(score=2.0)  # scores must lie in [0, 1]
    >>> try:
    ...     bc.Store().ingest(frame, benchmark="toy", mapping={"item_id": "item", "score": "score"})
    ... except bc.IngestRefused as exc:
    ...     print(exc.result.files[0].status, exc.exit_code)
    rejected 1
    """

    def __init__(self, message: str, result: IngestResult):
        super().__init__(message)
        self.result = result


@dataclass(frozen=True)
class IngestedFile:
    """What the ingest did with one file (as ``benchcert ingest --json`` reports it).

    Attributes
    ----------
    path, status : str
        The file, and ``ingested``, ``unchanged``, ``metadata`` (a file others read) or why it
        was refused (``rejected``, ``conflict``, ``error``, ``locked``, ...).
    format : str or None
        The log format it was read as.
    rows_added, rows_already_stored, rows_rejected : int
    message : str
        Why it was refused, or what it was read as.

    Examples
    --------
    >>> import benchcert as bc
    >>> report = bc.Store().ingest(bc.example_frame(), benchmark="toy", mapping={"item_id": "item", "score": "score"})
    >>> report.files[0].status, report.files[0].format, report.files[0].rows_added
    ('ingested', 'parquet', 400)
    """

    path: str
    status: str
    format: str | None
    rows_added: int
    rows_already_stored: int
    rows_rejected: int
    message: str

    @property
    def ok(self) -> bool:
        from benchcert.tasks.ingest.service import OK_STATUSES

        return self.status in OK_STATUSES


@dataclass(frozen=True, repr=False)
class IngestResult(TableResult):
    """One ingest: a report per file, and the store they went to.

    Examples
    --------
    >>> import benchcert as bc
    >>> store, columns = bc.Store(), {"item_id": "item", "subject": "subject", "score": "score"}
    >>> report = store.ingest(bc.example_frame(), benchmark="toy", mapping=columns)
    >>> report.rows_added, report.ok
    (400, True)
    >>> store.ingest(bc.example_frame(), benchmark="toy", mapping=columns).rows_added  # already stored
    0
    """

    db: str
    files: tuple[IngestedFile, ...]

    @classmethod
    def from_reports(cls, db: str, reports: Sequence[Mapping]) -> IngestResult:
        return cls(db=str(db), files=tuple(IngestedFile(
            path=r["path"], status=r["status"], format=r.get("format"), rows_added=int(r.get("rows_added") or 0),
            rows_already_stored=int(r.get("rows_already_stored") or 0),
            rows_rejected=int(r.get("rows_rejected") or 0), message=r.get("message") or "") for r in reports))

    @property
    def ok(self) -> bool:
        """Every file stored (or already there)."""
        return all(f.ok for f in self.files)

    @property
    def rows_added(self) -> int:
        return sum(f.rows_added for f in self.files)

    def to_polars(self):
        import polars as pl

        return pl.DataFrame([vars(f) for f in self.files],
                            schema={"path": pl.String, "status": pl.String, "format": pl.String,
                                    "rows_added": pl.Int64, "rows_already_stored": pl.Int64,
                                    "rows_rejected": pl.Int64, "message": pl.String})

    def _title(self) -> str:
        return f"ingest into {self.db}: {len(self.files)} file(s), {self.rows_added} row(s) added"

    def __repr__(self) -> str:
        lines = [f"<IngestResult: {self._title()}>"]
        lines += [f"  [{f.status}] {f.path}" + (f": {f.message}" if f.message and not f.ok else "") for f in self.files]
        return "\n".join(lines)


def _frame_kind(source: Any) -> str | None:
    """``"polars"``, ``"pandas"`` or None, without importing pandas."""
    module = type(source).__module__ or ""
    if module.startswith("polars") and hasattr(source, "write_parquet"):
        return "polars"
    if module.startswith("pandas") and hasattr(source, "columns") and hasattr(source, "to_numpy"):
        return "pandas"
    return None


def _mapping_options(mapping) -> tuple[tuple[str, ...], str | None]:
    """(``FIELD=COLUMN`` pairs, mapping TOML file) of the API's ``mapping`` argument."""
    if mapping is None:
        return (), None
    if isinstance(mapping, (str, os.PathLike)):
        return (), os.fspath(mapping)
    if isinstance(mapping, Mapping):
        pairs = []
        for key, column in mapping.items():
            if column is None:
                continue
            if not isinstance(key, str) or not isinstance(column, str):
                raise ValueError(f"mapping must map canonical field names to column names (str -> str); got "
                                 f"{key!r}: {column!r}")
            pairs.append(f"{key}={column}")
        return tuple(pairs), None
    if isinstance(mapping, (list, tuple)) and all(isinstance(p, str) for p in mapping):
        return tuple(mapping), None
    raise ValueError(f"mapping must be a dict {{field: column}}, a list of 'field=column' strings or a TOML file's "
                     f"path; got {type(mapping).__name__}")


_NAME = re.compile(r"[^A-Za-z0-9._-]+")


class Store:
    """A benchcert store: a DuckDB file of item-level results, and the runs audited from it.

    Parameters
    ----------
    path : str or Path, optional
        The store file (created on first ingest).  None: a throw-away store in a temporary folder
        on a memory-backed filesystem where the system has one (``/dev/shm`` on Linux), removed
        with the Store (:meth:`close`, the end of a ``with`` block, or garbage collection).
    artifacts : str or Path, optional
        Where audits write their run folders (default: ``artifacts`` beside the store file).
    lock_timeout : float
        Seconds to wait for another process using the store.
    prefect : bool or None
        True: run ingests and audits as Prefect flow runs; False: in this process; None (default):
        as Prefect flow runs when a Prefect API is configured, as the command line does.

    Examples
    --------
    >>> import benchcert as bc
    >>> with bc.Store() as store:
    ...     _ = store.ingest(bc.example_frame(), benchmark="toy",
    ...                      mapping={"item_id": "item", "subject": "subject", "score": "score"})
    ...     result = store.audit("toy")
    ...     gap = store.compare("strong", "weak", benchmark="toy")
    >>> result.models[0].model, gap.comparisons[0].verdict
    ('strong', 'improved')
    """

    def __init__(self, path: str | os.PathLike | None = None, *, artifacts: str | os.PathLike | None = None,
                 lock_timeout: float = DEFAULT_LOCK_TIMEOUT, prefect: bool | None = None):
        self._tmp = None
        if path is None:
            shm = "/dev/shm"
            base = shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None
            self._tmp = tempfile.TemporaryDirectory(prefix="benchcert-", dir=base)
            path = Path(self._tmp.name) / "store.duckdb"
        self.path = Path(path)
        if self.path.is_dir():
            raise ValueError(f"path must be a store file, not a folder; got {os.fspath(path)!r}")
        self.artifacts = Path(artifacts) if artifacts is not None else self.path.parent / "artifacts"
        if not isinstance(lock_timeout, (int, float)) or lock_timeout < 0:
            raise ValueError(f"lock_timeout must be a number of seconds >= 0; got {lock_timeout!r}")
        self.lock_timeout = float(lock_timeout)
        self.prefect = prefect

    # -- lifetime -------------------------------------------------------------------------------------
    def close(self) -> None:
        """Remove a throw-away store's folder (a store on a path the user gave is kept)."""
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        kind = "temporary store" if self._tmp is not None else "store"
        return f"<benchcert.Store: {kind} {self.path}, artifacts {self.artifacts}>"

    def _mode(self) -> str:
        from benchcert.flows.runs import choose_mode

        return choose_mode(self.prefect)

    # -- ingest ---------------------------------------------------------------------------------------
    def _frame_file(self, frame, kind: str, name: str) -> str:
        """The frame written as Parquet under the store's ``frames/`` folder, named by its content, so
        ingesting the same frame again adds nothing (the store keeps which file each row came from)."""
        import polars as pl

        if kind == "pandas":
            frame = pl.from_pandas(frame)
        folder = self.path.parent / "frames"
        folder.mkdir(parents=True, exist_ok=True)
        stem = _NAME.sub("_", name).strip("._-")[:60] or "frame"  # a name never leaves the folder
        tmp = folder / f".{stem}.{os.getpid()}.tmp"
        frame.write_parquet(tmp)
        digest = hashlib.sha256(tmp.read_bytes()).hexdigest()[:12]
        final = folder / f"{stem}-{digest}.parquet"
        os.replace(tmp, final)
        return str(final)

    def ingest(self, source, *, benchmark: str | None = None, mapping=None, model: str | None = None,
               format: str | None = None, name: str = "dataframe", allow_rejects: bool = False,
               atomic: bool = False) -> IngestResult:
        """Ingest item-level results: a log file or folder, a list of them, or a polars or pandas DataFrame.

        Parameters
        ----------
        source : path, list of paths, polars.DataFrame or pandas.DataFrame
            What to read.  A DataFrame is written as Parquet under the store's ``frames/`` folder
            and ingested from there (so each row can name its source and line).
        benchmark : str, optional
            The benchmark the rows belong to (needed unless the data name it).
        mapping : dict, list of str or path, optional
            Which column holds each canonical field, e.g. ``{"item_id": "question", "score":
            "correct"}`` (``benchcert ingest --map``), or a mapping TOML file (``--config``).
            Harness logs need none.
        model, format : str, optional
            ``--model`` and ``--format`` of ``benchcert ingest``.
        name : str
            A DataFrame's name in the store's record of sources.
        allow_rejects, atomic : bool
            As ``--allow-rejects`` and ``--atomic``.

        Returns
        -------
        IngestResult

        Raises
        ------
        IngestRefused
            A file was refused (its rows not stored; the others' were, unless ``atomic``); the
            message names each refused file and why, and ``.result`` has every report.
        ValueError
            A bad argument.
        UserError
            A mapping that names no canonical field or does not fit the files (``MappingError``,
            exit code 2 on the command line).
        """
        from benchcert.flows.ingest_command import IngestOptions, build_mapping, ingest_paths

        kind = _frame_kind(source)
        if kind is not None:
            paths = [self._frame_file(source, kind, name)]
        elif isinstance(source, (str, os.PathLike)):
            paths = [os.fspath(source)]
        elif isinstance(source, (list, tuple)) and source and all(isinstance(p, (str, os.PathLike)) for p in source):
            paths = [os.fspath(p) for p in source]
        else:
            raise ValueError("source must be a path, a list of paths, or a polars or pandas DataFrame; got "
                             f"{type(source).__name__}")
        pairs, config = _mapping_options(mapping)
        built = build_mapping(IngestOptions(map=pairs, config=config, format=format, model=model))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        reports = ingest_paths(paths, str(self.path), benchmark, built, mode=self._mode(),
                               allow_rejects=allow_rejects, lock_timeout=self.lock_timeout, atomic=atomic)
        result = IngestResult.from_reports(str(self.path), reports)
        refused = [f for f in result.files if not f.ok]
        if refused:
            raise IngestRefused("; ".join(f"{f.path}: {f.status}: {f.message}" for f in refused), result)
        return result

    # -- audit ----------------------------------------------------------------------------------------
    def audit(self, benchmark: str, **options):
        """Audit one benchmark, as ``benchcert audit`` does: every analysis, a run folder under
        :attr:`artifacts`, the run recorded in the store.

        Parameters
        ----------
        benchmark : str
        **options
            The settings of :class:`benchcert.tasks.audit.request.AuditRequest`: ``alpha``,
            ``variant``, ``hierarchy`` (e.g. ``("subject",)``), ``subject_weights``, ``baseline``,
            ``environments``, ``all_pairs``, ``out_of_core``, ``webhook_url``.

        Returns
        -------
        AuditResult
            ``.models`` is the per-model table (pooled and macro score, headline interval, rank);
            ``.to_polars()`` the same as a DataFrame; ``.report`` the run's report.html.
        """
        from benchcert.flows.runs import run_audit
        from benchcert.tasks.audit.audit_result import AuditResult
        from benchcert.tasks.audit.request import AuditRequest
        from benchcert.tasks.store.connection import require_store

        for fixed in ("db", "benchmark", "artifacts_root", "lock_timeout", "export_dir"):
            if fixed in options:
                raise ValueError(f"{fixed} is the Store's, not an audit option")
        require_store(self.path)
        request = AuditRequest(db=str(self.path), benchmark=benchmark, artifacts_root=str(self.artifacts),
                               lock_timeout=self.lock_timeout, **options)
        return AuditResult.from_summary(run_audit(self._mode(), request))

    # -- compare --------------------------------------------------------------------------------------
    def compare(self, candidate: str | Sequence[str], baseline: str, *, benchmark: str | None = None,
                question: str = "items", require: str | None = None, margin: float | None = None,
                fail_on: str | None = None, alpha: float = 0.05, power: float = 0.8, variant: str | None = None,
                hierarchy: str = "subject,domain", record: bool = False, scale: str = "judge",
                suite: str | Sequence[str] | None = None, assume: str = "none"):
        """Paired comparison of ``candidate`` (one model or several) against ``baseline``, as ``benchcert compare``.

        Parameters
        ----------
        candidate : str or sequence of str
            The candidate model(s); several are decided by their Bonferroni simultaneous intervals.
        baseline : str
        benchmark : str, optional
            The benchmark (or ``suite``).
        suite : str or sequence of str, optional
            Judge one candidate on a suite instead: a stored suite's name, a TOML file, ``"all"``
            (every benchmark both models have) or a list of benchmark names (equal weights).
            ``require`` may then also be ``"suite-non-inferior"``.
        question : {"items", "new-subjects"}
            items: is the candidate better on this benchmark's items (the item-weighted gap);
            new-subjects: does the gap generalise to new subjects (the subject-weighted gap).
        require, margin, fail_on
            The CI gate (``"non-inferior"``/``"equivalent"`` with a margin in accuracy units, and
            ``"regressed"``); its decision is ``result.gate`` (``.passed``, ``.reason``).
        alpha, power : float
            Level, and the power of the minimum detectable effect.
        variant, hierarchy : str
            As ``--variant`` and ``--hierarchy``.
        record : bool
            Record a two-model comparison as the next look of its anytime-valid checkpoint verdict.
        scale : {"judge", "human"}
            judge: the scores as stored; human: a judge-scored benchmark's gap on the human scale
            (PPI++ from the judge's scores and the items people labelled for both models).
        assume : {"none", "symmetric"}
            As ``--assume``: with ``record`` and ``question="new-subjects"``, ``"symmetric"``
            assumes the subject gaps symmetric about their mean (a more powerful verdict).

        Returns
        -------
        ComparisonResult; RecordedLook when ``record``; HumanGapResult when ``scale="human"``;
        SuiteResult with ``suite`` (its ``regressed_somewhere``, ``improved``, ``regressed``, ``score``,
        one ``line(benchmark)`` per benchmark, ``gate``)
        """
        from benchcert.stats.validation import check_unit_interval
        from benchcert.tasks.compare.gate import GateOptions
        from benchcert.tasks.compare.service import CompareRequest, compare_models, record_look
        from benchcert.tasks.store.connection import require_store

        check_unit_interval("alpha", alpha)
        check_unit_interval("power", power)
        candidates = (candidate,) if isinstance(candidate, str) else tuple(candidate)
        if not candidates or not all(isinstance(c, str) for c in candidates):
            raise ValueError(f"candidate must be a model name or a list of them; got {candidate!r}")
        require_store(self.path)
        if suite is not None:
            return self._compare_suite(candidates, baseline, suite, benchmark=benchmark, question=question,
                                       gate=GateOptions(fail_on, margin, require), alpha=alpha, power=power,
                                       variant=variant, hierarchy=hierarchy, record=record, scale=scale)
        if benchmark is None:
            raise ValueError("give benchmark= (or suite=)")
        request = CompareRequest(db=self.path, benchmark=benchmark, baseline=baseline, candidates=candidates,
                                 alpha=alpha, power=power, variant=variant, hierarchy=hierarchy,
                                 lock_timeout=self.lock_timeout, gate=GateOptions(fail_on, margin, require),
                                 question=question, assume=assume)
        if assume != "none" and not (record and question == "new-subjects"):
            raise ValueError(f"assume={assume!r} applies to the recorded new-subjects verdict (record=True, "
                             "question='new-subjects')")
        if scale not in ("judge", "human"):
            raise ValueError(f"scale must be 'judge' or 'human'; got {scale!r}")
        if scale == "human":
            if record:
                raise ValueError("record answers the judge-scale checkpoint question; drop scale='human'")
            from benchcert.tasks.judge.service import compare_human

            return compare_human(request)
        return record_look(request) if record else compare_models(request)

    def _compare_suite(self, candidates, baseline, suite, *, benchmark, question, gate, alpha, power, variant,
                       hierarchy, record, scale):
        """:meth:`compare` on a suite (``suite=``): the service of ``compare --suite``."""
        from benchcert.tasks.compare.suite import SuiteRequest, compare_suite
        from benchcert.tasks.compare.suite_def import check_suite, resolve

        if benchmark is not None or scale != "judge" or len(candidates) != 1:
            raise ValueError("suite= compares one candidate on the judge scale; drop benchmark= and scale=")
        if isinstance(suite, str):
            s = resolve(self.path, suite, [baseline, candidates[0]], lock_timeout=self.lock_timeout)
        else:
            s = check_suite("(given)", list(suite))
        return compare_suite(SuiteRequest(db=self.path, suite=s, baseline=baseline, candidate=candidates[0],
                                          alpha=alpha, power=power, variant=variant, hierarchy=hierarchy,
                                          lock_timeout=self.lock_timeout, gate=gate, question=question,
                                          record=record))

    # -- perturbation ---------------------------------------------------------------------------------
    def perturb(self, benchmark: str, *, base: str | None = None, null: Sequence[str] | None = None,
                test: Sequence[str] | None = None, alpha: float = 0.05, method: str = "calibrated",
                models: Sequence[str] | None = None):
        """Does a prompt change matter beyond semantically irrelevant rewordings? As ``benchcert perturb``.

        Parameters
        ----------
        benchmark : str
            A benchmark whose rows carry prompt variants (the ``variant`` field) and, for power,
            replicates.
        base, null, test
            The design: the base variant, the null variants (rewordings that should not matter) and
            the variants tested (default: the built-in design, as the command's).
        alpha : float
        method : str
            The composite test (default ``calibrated``; see ``benchcert perturb --help``).
        models : sequence of str, optional
            Only these models.

        Returns
        -------
        PerturbationAudit
            ``.to_polars()``: per (model, tested variant) the share of items where the change
            matters, and ``composite_status``: "tested", or why there is no share ("no power", ...).
        """
        from benchcert.stats.validation import check_unit_interval
        from benchcert.tasks.store.connection import require_store
        from benchcert.tasks.perturbation.service import audit_stored

        check_unit_interval("alpha", alpha)
        require_store(self.path)
        listed = {name: None if value is None else list(value) for name, value in
                  (("null", null), ("test", test), ("models", models))}
        return audit_stored(self.path, benchmark, base=base, alpha=alpha, method=method,
                            lock_timeout=self.lock_timeout, **listed)

    # -- runs -----------------------------------------------------------------------------------------
    def runs(self, benchmark: str | None = None):
        """The runs recorded in the store (one row each: run_id, benchmark, status, times, run_dir), as a
        polars DataFrame."""
        from benchcert.tasks.store.connection import list_runs, open_store, require_store

        require_store(self.path)  # opening a missing store would create an empty one
        with open_store(self.path, write=False, lock_timeout=self.lock_timeout) as con:
            return list_runs(con, benchmark)

    def show(self, run_id: str):
        """The :class:`AuditResult` of a completed run recorded in the store, read from its summary.json."""
        from benchcert.tasks.artifacts import runs as artifacts
        from benchcert.tasks.audit.audit_result import AuditResult
        from benchcert.tasks.errors import NoDataError
        from benchcert.tasks.store.connection import get_run, open_store, require_store

        require_store(self.path)
        with open_store(self.path, write=False, lock_timeout=self.lock_timeout) as con:
            row = get_run(con, run_id)
        if row is None:
            raise NoDataError(f"run {run_id!r} is not recorded in {self.path}")
        if row["status"] != "completed" or not row["run_dir"]:
            raise NoDataError(f"run {run_id!r}: {row['status']}: {row['error']}")
        run_dir = Path(row["run_dir"])
        summary = artifacts.load_json(run_dir / "summary.json")
        return AuditResult.from_summary({**summary, "run_dir": str(run_dir)})
